//! The browsable API reference at `/api/v1/docs`.
//!
//! Rendered once at start-up on the server from the OpenAPI document, as one HTML page with its
//! stylesheet served by this server (`/assets/docs.css`): no script, no inline style, no CDN, no
//! fonts to fetch, so it renders on a machine with no internet, under a `default-src 'self'`
//! policy, and reads the same as the document a client generator would use.
//!
//! It opens with a getting-started section and shows a curl command per operation, made from the
//! operation's own example when the document has one (following `$ref`s into `components`), else
//! from the required fields of its schema. On a narrow screen the operation index folds into a
//! `<details>` element at the top, which opens and closes without script.

use std::fmt::Write;

use serde_json::Value;

/// Renders the reference page from an OpenAPI 3.1 document.
pub fn render(document: &Value) -> String {
    let mut operations: Vec<(String, String, &Value)> = Vec::new();
    if let Some(paths) = document["paths"].as_object() {
        for (path, methods) in paths {
            if let Some(methods) = methods.as_object() {
                for (method, operation) in methods {
                    operations.push((method.to_ascii_uppercase(), path.clone(), operation));
                }
            }
        }
    }
    let tags: Vec<&str> = document["tags"]
        .as_array()
        .map(|tags| tags.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();

    let mut html = String::with_capacity(64 * 1024);
    let title = escape(document["info"]["title"].as_str().unwrap_or("API"));
    let base = base_url(document);
    let _ = write!(
        html,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} reference</title><link rel=\"icon\" href=\"/assets/favicon.svg\" type=\"image/svg+xml\">\
         <link rel=\"stylesheet\" href=\"/assets/docs.css\"></head><body><nav id=\"index\"><details class=\"index\" open><summary>{title}: operations</summary>\
         <p><a href=\"#getting-started\">Getting started</a> · <a href=\"/api/v1/openapi.json\">openapi.json</a></p>"
    );
    for tag in &tags {
        let _ = write!(html, "<h2>{}</h2><ul>", escape(tag));
        for (method, path, operation) in operations
            .iter()
            .filter(|(_, _, op)| op["tags"][0].as_str() == Some(tag))
        {
            let id = operation["operationId"].as_str().unwrap_or_default();
            let _ = write!(
                html,
                "<li><a href=\"#{id}\"><span class=\"method {m}\">{method}</span> {}</a></li>",
                escape(path),
                m = method.to_ascii_lowercase()
            );
        }
        html.push_str("</ul>");
    }
    html.push_str("</details></nav><main>");
    getting_started(&mut html, &base);
    let _ = write!(
        html,
        "<section class=\"intro\">{}</section>",
        paragraphs(document["info"]["description"].as_str().unwrap_or_default())
    );
    for (method, path, operation) in &operations {
        render_operation(&mut html, document, method, path, operation);
    }
    html.push_str("<section><h2 id=\"errors\">Errors</h2>");
    if let Some(responses) = document["components"]["responses"].as_object() {
        html.push_str("<table><tr><th>Status</th><th>Codes</th></tr>");
        for (status, response) in responses {
            let _ = write!(
                html,
                "<tr><td>{status}</td><td>{}</td></tr>",
                inline_code(response["description"].as_str().unwrap_or_default())
            );
        }
        html.push_str("</table>");
    }
    html.push_str("</section></main></body></html>");
    html
}

/// The API's address for examples: the document's server when it is absolute, else a variable
/// the getting-started section explains.
fn base_url(document: &Value) -> String {
    document["servers"][0]["url"]
        .as_str()
        .filter(|url| url.starts_with("http"))
        .map_or_else(|| "$BASE".to_owned(), str::to_owned)
}

fn getting_started(html: &mut String, base: &str) {
    let setup = if base == "$BASE" {
        "export BASE=http://127.0.0.1:8080/api/v1   # the address `outreach serve` printed, plus /api/v1\n"
    } else {
        ""
    };
    let _ = write!(
        html,
        "<section class=\"intro\" id=\"getting-started\"><h2>Getting started</h2><ol>\
         <li><strong>Get a key.</strong> Sign in at <a href=\"/settings/api\">/settings/api</a> and create an API key \
         (<code>read</code> to look, <code>write</code> to change, <code>send</code> to send outreach). The key is shown once: copy it. \
         On a fresh server, <code>outreach serve</code> prints a first key.</li>\
         <li><strong>The base URL</strong> of every operation below is <code>{base_html}</code>: your server's address followed by <code>/api/v1</code>, as in the headings below.</li>\
         <li><strong>Make an authenticated call</strong>: send the key as a bearer token.\
         <pre><code>{setup}export KEY=pk_test_...\ncurl -s {base_html}/workspace -H \"Authorization: Bearer $KEY\"</code></pre></li>\
         <li><strong>Errors</strong> are JSON <code>{{\"error\": \"a sentence\", \"code\": \"...\"}}</code> with the status of the <a href=\"#errors\">table below</a>.</li>\
         <li><strong>MCP</strong>: the same operations are tools of the MCP server (Streamable HTTP) at <code>/api/mcp</code> on the same host, \
         with the same key as a bearer token, or connected through OAuth by the assistant itself. Each operation below names its tool.</li>\
         </ol></section>",
        base_html = escape(base),
        setup = escape(setup),
    );
}

fn render_operation(
    html: &mut String,
    document: &Value,
    method: &str,
    path: &str,
    operation: &Value,
) {
    let id = operation["operationId"].as_str().unwrap_or_default();
    let _ = write!(
        html,
        "<section class=\"operation\" id=\"{id}\"><h2><span class=\"method {m}\">{method}</span> <code>/api/v1{}</code></h2>\
         <p class=\"summary\">{}</p>{}\
         <dl><dt>Scope</dt><dd><code>{}</code></dd><dt>MCP tool</dt><dd><code>{}</code></dd></dl>",
        escape(path),
        escape(operation["summary"].as_str().unwrap_or_default()),
        paragraphs(operation["description"].as_str().unwrap_or_default()),
        escape(operation["x-required-scope"].as_str().unwrap_or_default()),
        escape(operation["x-mcp-tool"].as_str().unwrap_or_default()),
        m = method.to_ascii_lowercase(),
    );
    let _ = write!(
        html,
        "<h3>Example</h3><pre class=\"curl\"><code>{}</code></pre>",
        escape(&curl(document, method, path, operation))
    );
    if let Some(parameters) = operation["parameters"].as_array() {
        html.push_str("<h3>Parameters</h3><table><tr><th>Name</th><th>In</th><th>Type</th><th>Description</th></tr>");
        for parameter in parameters {
            let _ = write!(
                html,
                "<tr><td><code>{}</code>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                escape(parameter["name"].as_str().unwrap_or_default()),
                if parameter["required"].as_bool() == Some(true) {
                    " <em>required</em>"
                } else {
                    ""
                },
                escape(parameter["in"].as_str().unwrap_or_default()),
                escape(&type_name(&parameter["schema"])),
                inline_code(parameter["description"].as_str().unwrap_or_default()),
            );
        }
        html.push_str("</table>");
    }
    if let Some(schema) = operation["requestBody"]["content"]["application/json"].get("schema") {
        html.push_str("<h3>Request body</h3>");
        schema_block(html, resolve(document, schema));
    }
    if let Some(responses) = operation["responses"].as_object() {
        for (status, response) in responses {
            if let Some(schema) = response["content"]["application/json"].get("schema") {
                let _ = write!(html, "<h3>Response {status}</h3>");
                schema_block(html, resolve(document, schema));
            }
        }
        let errors: Vec<&str> = responses
            .keys()
            .filter(|status| status.starts_with('4') || status.starts_with('5'))
            .map(String::as_str)
            .collect();
        let _ = write!(
            html,
            "<p class=\"errors\">Errors: {} (see <a href=\"#errors\">error codes</a>).</p>",
            errors.join(", ")
        );
    }
    html.push_str("</section>");
}

/// Follows a local `$ref` (`#/components/...`) to what it names; anything else as it is.
fn resolve<'a>(document: &'a Value, value: &'a Value) -> &'a Value {
    let mut current = value;
    for _ in 0..8 {
        let Some(reference) = current["$ref"].as_str() else {
            return current;
        };
        let Some(pointer) = reference.strip_prefix('#') else {
            return current;
        };
        match document.pointer(pointer) {
            Some(target) => current = target,
            None => return current,
        }
    }
    current
}

/// A path parameter's example value, or a placeholder named after it (`/prospects/{id}` ->
/// `PROSPECT_ID`).
fn path_value(document: &Value, path: &str, name: &str, operation: &Value) -> String {
    let parameter = operation["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| resolve(document, p))
        .find(|p| p["in"] == "path" && p["name"] == name);
    if let Some(parameter) = parameter {
        let schema = resolve(document, &parameter["schema"]);
        let example = [
            &parameter["example"],
            &schema["examples"][0],
            &schema["example"],
        ]
        .into_iter()
        .find_map(|v| v.as_str().map(str::to_owned))
        .or_else(|| {
            parameter["examples"].as_object().and_then(|examples| {
                examples
                    .values()
                    .find_map(|e| resolve(document, e)["value"].as_str().map(str::to_owned))
            })
        });
        if let Some(example) = example {
            return example;
        }
    }
    let placeholder = format!("{{{name}}}");
    let before = path
        .split('/')
        .take_while(|segment| *segment != placeholder)
        .filter(|segment| !segment.is_empty() && !segment.starts_with('{'))
        .last()
        .unwrap_or("object");
    let noun = before.strip_suffix('s').unwrap_or(before);
    if name == "id" {
        format!("{}_ID", noun.to_ascii_uppercase())
    } else {
        name.to_ascii_uppercase()
    }
}

/// A JSON body for an example: the operation's own example when the document has one, else the
/// required fields of its schema with placeholder values.
fn example_body(document: &Value, operation: &Value) -> Option<Value> {
    let content = &operation["requestBody"]["content"]["application/json"];
    if content.is_null() {
        return None;
    }
    if let Some(example) = content.get("example") {
        return Some(example.clone());
    }
    if let Some(examples) = content["examples"].as_object()
        && let Some(value) = examples
            .values()
            .find_map(|e| resolve(document, e).get("value"))
    {
        return Some(value.clone());
    }
    let schema = resolve(document, &content["schema"]);
    if let Some(example) = schema["examples"].get(0).or_else(|| schema.get("example")) {
        return Some(example.clone());
    }
    Some(minimal(document, schema, 0))
}

/// The smallest value a schema accepts, roughly: required properties only, placeholders by type.
fn minimal(document: &Value, schema: &Value, depth: usize) -> Value {
    let schema = resolve(document, schema);
    if depth > 4 {
        return Value::Null;
    }
    if let Some(value) = schema.get("default").filter(|v| !v.is_null()) {
        return value.clone();
    }
    if let Some(first) = schema["enum"].get(0) {
        return first.clone();
    }
    if let Some(options) = ["anyOf", "oneOf", "allOf"]
        .iter()
        .find_map(|key| schema[*key].as_array())
        && let Some(first) = options
            .iter()
            .find(|option| resolve(document, option)["type"] != "null")
    {
        return minimal(document, first, depth + 1);
    }
    let kind = match &schema["type"] {
        Value::String(kind) => kind.as_str(),
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|kind| *kind != "null")
            .unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    match kind {
        "object" => {
            let mut object = serde_json::Map::new();
            if let (Some(required), Some(properties)) = (
                schema["required"].as_array(),
                schema["properties"].as_object(),
            ) {
                for name in required.iter().filter_map(Value::as_str) {
                    if let Some(property) = properties.get(name) {
                        object.insert(name.to_owned(), minimal(document, property, depth + 1));
                    }
                }
            }
            Value::Object(object)
        }
        "array" => Value::Array(Vec::new()),
        "integer" => Value::from(schema["minimum"].as_i64().unwrap_or(1)),
        "number" => Value::from(1),
        "boolean" => Value::Bool(false),
        "null" => Value::Null,
        _ => Value::String("...".to_owned()),
    }
}

/// A curl command for an operation: method, path with example parameters, the bearer key, an
/// `Idempotency-Key` where the operation honours one, and a JSON body for POST, PATCH and PUT.
fn curl(document: &Value, method: &str, path: &str, operation: &Value) -> String {
    let mut url = String::new();
    for (index, segment) in path.split('/').enumerate() {
        if index > 0 {
            url.push('/');
        }
        match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => url.push_str(&path_value(document, path, name, operation)),
            None => url.push_str(segment),
        }
    }
    let base = base_url(document);
    let mut lines = vec![if method == "GET" {
        format!("curl -s \"{base}{url}\"")
    } else {
        format!("curl -s -X {method} \"{base}{url}\"")
    }];
    lines.push("  -H \"Authorization: Bearer $KEY\"".to_owned());
    let idempotent = operation["x-idempotent"] == Value::Bool(true)
        || operation["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| resolve(document, p))
            .any(|p| {
                p["in"] == "header"
                    && p["name"]
                        .as_str()
                        .is_some_and(|n| n.eq_ignore_ascii_case("idempotency-key"))
            });
    if idempotent {
        lines.push("  -H \"Idempotency-Key: $(uuidgen)\"".to_owned());
    }
    if matches!(method, "POST" | "PATCH" | "PUT")
        && let Some(body) = example_body(document, operation)
    {
        let json = serde_json::to_string_pretty(&body)
            .unwrap_or_default()
            .replace('\'', "'\\''");
        lines.push("  -H \"Content-Type: application/json\"".to_owned());
        lines.push(format!("  -d '{json}'"));
    }
    lines.join(" \\\n")
}

/// A table of an object schema's properties, and the full schema folded below it.
fn schema_block(html: &mut String, schema: &Value) {
    if let Some(properties) = schema["properties"].as_object() {
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        html.push_str("<table><tr><th>Field</th><th>Type</th><th>Description</th></tr>");
        for (name, property) in properties {
            let _ = write!(
                html,
                "<tr><td><code>{}</code>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                escape(name),
                if required.contains(&name.as_str()) {
                    " <em>required</em>"
                } else {
                    ""
                },
                escape(&type_name(property)),
                inline_code(property["description"].as_str().unwrap_or_default()),
            );
        }
        html.push_str("</table>");
    }
    let pretty = serde_json::to_string_pretty(schema).unwrap_or_default();
    let _ = write!(
        html,
        "<details><summary>JSON Schema</summary><pre>{}</pre></details>",
        escape(&pretty)
    );
}

fn type_name(schema: &Value) -> String {
    match &schema["type"] {
        Value::String(kind) if kind == "array" => format!("{}[]", type_name(&schema["items"])),
        Value::String(kind) => kind.clone(),
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" | "),
        _ if schema.get("enum").is_some() => "enum".to_owned(),
        _ => ["anyOf", "oneOf"]
            .iter()
            .find_map(|key| schema[*key].as_array())
            .map(|options| {
                options
                    .iter()
                    .map(type_name)
                    .collect::<Vec<_>>()
                    .join(" | ")
            })
            .unwrap_or_else(|| "any".to_owned()),
    }
}

fn paragraphs(text: &str) -> String {
    text.split("\n\n")
        .filter(|p| !p.trim().is_empty())
        .map(|p| format!("<p>{}</p>", inline_code(p)))
        .collect()
}

/// Escapes text and turns `backticked` spans into `<code>`.
fn inline_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (index, part) in text.split('`').enumerate() {
        if index % 2 == 1 {
            let _ = write!(out, "<code>{}</code>", escape(part));
        } else {
            out.push_str(&escape(part));
        }
    }
    out
}

fn escape(text: &str) -> String {
    // askama's HTML escaper, the one the page templates use.
    match askama::filters::escape(text, askama::filters::Html) {
        Ok(escaped) => escaped.to_string(),
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_operations_and_escapes() {
        let document = json!({
            "info": {"title": "T", "description": "Use `x`."},
            "tags": [{"name": "thing"}],
            "paths": {"/things/{id}": {"get": {
                "operationId": "get_thing", "summary": "Get a <thing>.", "tags": ["thing"],
                "x-required-scope": "read", "x-mcp-tool": "service_get_thing",
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {"200": {"content": {"application/json": {"schema": {"type": "object", "properties": {"id": {"type": "string"}}}}}}, "404": {"$ref": "x"}}
            }}},
            "components": {"responses": {"404": {"description": "`not_found`: missing"}}}
        });
        let html = render(&document);
        assert!(html.contains("Get a &#60;thing&#62;."));
        assert!(html.contains("id=\"get_thing\""));
        assert!(html.contains("<code>service_get_thing</code>"));
        assert!(html.contains("<code>not_found</code>"));
        assert!(
            !html.contains("https://") && !html.contains("src=\"http"),
            "the page must not load anything remote"
        );
        assert!(!html.contains("<style") && !html.contains("<script"));
        assert!(html.contains("id=\"getting-started\""));
        assert!(
            html.contains("curl -s &#34;$BASE/things/THING_ID&#34;"),
            "{html}"
        );
    }

    #[test]
    fn curl_examples_follow_refs_and_mark_idempotent_operations() {
        let document = json!({
            "info": {"title": "T"},
            "servers": [{"url": "/api/v1"}],
            "paths": {
                "/imports": {"post": {
                    "operationId": "import", "x-idempotent": true,
                    "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ImportInput"}}}}
                }},
                "/lists/{id}": {"patch": {
                    "operationId": "update_list",
                    "parameters": [{"name": "id", "in": "path", "schema": {"type": "string"}, "example": "lst_1"}],
                    "requestBody": {"content": {"application/json": {
                        "schema": {"type": "object"},
                        "examples": {"rename": {"$ref": "#/components/examples/Rename"}}
                    }}}
                }}
            },
            "components": {
                "schemas": {"ImportInput": {"type": "object", "required": ["csv", "limit"],
                    "properties": {"csv": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}, "tag": {"type": "string"}}}},
                "examples": {"Rename": {"value": {"name": "It's new"}}}
            }
        });
        let import = curl(
            &document,
            "POST",
            "/imports",
            &document["paths"]["/imports"]["post"],
        );
        assert!(import.contains("-X POST \"$BASE/imports\""), "{import}");
        assert!(import.contains("Authorization: Bearer $KEY"));
        assert!(import.contains("Idempotency-Key"));
        assert!(import.contains("\"csv\": \"...\"") && import.contains("\"limit\": 1"));
        assert!(!import.contains("tag"), "only required fields: {import}");
        let patch = curl(
            &document,
            "PATCH",
            "/lists/{id}",
            &document["paths"]["/lists/{id}"]["patch"],
        );
        assert!(patch.contains("$BASE/lists/lst_1"), "{patch}");
        assert!(
            patch.contains("It'\\''s new"),
            "quotes survive the shell: {patch}"
        );
        assert!(!patch.contains("Idempotency-Key"));
    }
}
