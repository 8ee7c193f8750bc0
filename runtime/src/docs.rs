//! The browsable API reference at `/api/v1/docs`.
//!
//! Rendered once at start-up on the server from the OpenAPI document, as one HTML page with its
//! stylesheet inlined: no script, no CDN, no fonts to fetch, so it renders on a machine with no
//! internet and reads the same as the document a client generator would use.

use std::fmt::Write;

use serde_json::Value;

const STYLE: &str = include_str!("docs.css");

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
    let _ = write!(
        html,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} reference</title><style>{STYLE}</style></head><body><nav><h1>{title}</h1>\
         <p><a href=\"/api/v1/openapi.json\">openapi.json</a></p>"
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
    html.push_str("</nav><main>");
    let _ = write!(
        html,
        "<section class=\"intro\">{}</section>",
        paragraphs(document["info"]["description"].as_str().unwrap_or_default())
    );
    for (method, path, operation) in &operations {
        render_operation(&mut html, method, path, operation);
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

fn render_operation(html: &mut String, method: &str, path: &str, operation: &Value) {
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
        schema_block(html, schema);
    }
    if let Some(responses) = operation["responses"].as_object() {
        for (status, response) in responses {
            if let Some(schema) = response["content"]["application/json"].get("schema") {
                let _ = write!(html, "<h3>Response {status}</h3>");
                schema_block(html, schema);
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
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
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
        assert!(html.contains("Get a &lt;thing&gt;."));
        assert!(html.contains("id=\"get_thing\""));
        assert!(html.contains("<code>service_get_thing</code>"));
        assert!(html.contains("<code>not_found</code>"));
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "the page must not load anything remote"
        );
    }
}
