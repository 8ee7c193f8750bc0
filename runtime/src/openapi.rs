//! The OpenAPI 3.1 document, generated from the registry.
//!
//! OpenAPI 3.1 schema objects are JSON Schema 2020-12, which is what schemars emits, so each
//! operation embeds the very schema maps the registry made for the MCP tools: there is no second
//! schema derive and no translation step that could drift. The document is built once at start-up
//! and served as bytes; a golden file (`tests/golden/openapi.json`) catches unintended changes.

use serde_json::{Map, Value, json};

use crate::error::ErrorCode;
use crate::registry::{Action, Registry};

/// Builds the whole document. The server URL is relative (`/api/v1`), so the document does not
/// depend on the configured base URL and reads the same on every instance.
pub fn document(registry: &Registry) -> Value {
    let mut paths: Map<String, Value> = Map::new();
    let mut tags: Vec<&str> = Vec::new();
    for action in registry.actions() {
        let Some(route) = &action.route else { continue };
        if !tags.contains(&action.tag()) {
            tags.push(action.tag());
        }
        let entry = paths
            .entry(route.path.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(methods) = entry {
            methods.insert(
                route.method.as_str().to_ascii_lowercase(),
                operation(action),
            );
        }
    }
    tags.sort_unstable();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Outreach API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Prospects, lists, targeting and outreach in a workspace. Every operation is also an MCP tool \
                named `service_<operationId>` at `/api/mcp`, with the same input schema and the same answers.\n\n\
                Authenticate with `Authorization: Bearer <key>`. Scopes nest: `send` includes `write` includes `read`. \
                Errors have the body `{\"error\": \"<sentence>\", \"code\": \"<code>\"}`.",
        },
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearerAuth": []}],
        "tags": tags.iter().map(|tag| json!({"name": tag})).collect::<Vec<_>>(),
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key (`pk_live_...` or `pk_test_...`) or an OAuth access token.",
                }
            },
            "schemas": {"Error": error_schema()},
            "responses": error_responses(),
        },
    })
}

fn operation(action: &Action) -> Value {
    let def = action.def;
    let Some(route) = &action.route else {
        return Value::Null;
    };
    let has_body = matches!(route.method.as_str(), "POST" | "PATCH" | "PUT");
    let properties = action
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = action
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();

    let mut parameters = Vec::new();
    for name in &route.path_params {
        parameters.push(parameter(name, "path", true, properties.get(name)));
    }
    if !has_body {
        for (name, schema) in &properties {
            if !route.path_params.contains(name) {
                parameters.push(parameter(
                    name,
                    "query",
                    required.contains(&name.as_str()),
                    Some(schema),
                ));
            }
        }
    }

    let mut operation = Map::new();
    operation.insert("operationId".into(), json!(def.name));
    operation.insert("summary".into(), json!(def.summary));
    if !def.description.is_empty() {
        operation.insert("description".into(), json!(def.description));
    }
    operation.insert("tags".into(), json!([action.tag()]));
    operation.insert("x-required-scope".into(), json!(def.scope.as_str()));
    operation.insert("x-mcp-tool".into(), json!(action.tool_name()));
    if def.idempotent {
        operation.insert("x-idempotent".into(), json!(true));
    }
    if def.price.is_some() {
        operation.insert("x-spends-credits".into(), json!(true));
    }
    if !parameters.is_empty() {
        operation.insert("parameters".into(), Value::Array(parameters));
    }
    if has_body {
        operation.insert(
            "requestBody".into(),
            json!({
                "required": required.iter().any(|name| !route.path_params.iter().any(|p| p == name)),
                "content": {"application/json": {"schema": body_schema(action)}},
            }),
        );
        add_text_body_content(action, &mut operation);
    }
    let status = action.success_status();
    let mut responses = Map::new();
    responses.insert(
        status.as_u16().to_string(),
        json!({
            "description": status.canonical_reason().unwrap_or("Success"),
            "content": {"application/json": {"schema": Value::Object((*action.output_schema).clone())}},
        }),
    );
    for code in error_codes(action, has_body) {
        responses.insert(
            code.status().as_u16().to_string(),
            json!({"$ref": format!("#/components/responses/{}", code.status().as_u16())}),
        );
    }
    operation.insert("responses".into(), Value::Object(responses));
    Value::Object(operation)
}

/// The request body schema: the input schema without the fields that travel in the path.
pub fn body_schema(action: &Action) -> Value {
    let mut schema = (*action.input_schema).clone();
    let Some(route) = &action.route else {
        return Value::Object(schema);
    };
    if route.path_params.is_empty() {
        return Value::Object(schema);
    }
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for param in &route.path_params {
            properties.remove(param);
        }
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|name| {
            !route
                .path_params
                .iter()
                .any(|param| name.as_str() == Some(param))
        });
        if required.is_empty() {
            schema.remove("required");
        }
    }
    Value::Object(schema)
}

fn parameter(name: &str, location: &str, required: bool, schema: Option<&Value>) -> Value {
    let mut schema = schema.cloned().unwrap_or_else(|| json!({"type": "string"}));
    let description = schema
        .as_object_mut()
        .and_then(|map| map.remove("description"));
    let mut parameter =
        json!({"name": name, "in": location, "required": required, "schema": schema});
    if let (Some(description), Value::Object(map)) = (description, &mut parameter) {
        map.insert("description".into(), description);
    }
    if location == "query" && schema_is_array(&parameter["schema"]) {
        parameter["style"] = json!("form");
        parameter["explode"] = json!(false);
    }
    parameter
}

fn schema_is_array(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(kind)) => kind == "array",
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "array"),
        _ => false,
    }
}

/// The error statuses an operation can answer, in status order.
fn error_codes(action: &Action, has_body: bool) -> Vec<ErrorCode> {
    let mut codes = vec![ErrorCode::InvalidRequest, ErrorCode::Unauthenticated];
    if action.def.price.is_some() {
        codes.push(ErrorCode::InsufficientCredits);
    }
    codes.push(ErrorCode::InsufficientScope);
    // Any operation may name an object that does not exist, in its path or in its input.
    codes.push(ErrorCode::NotFound);
    if has_body {
        codes.push(ErrorCode::Conflict);
        codes.push(ErrorCode::PayloadTooLarge);
        codes.push(ErrorCode::UnsupportedMediaType);
    }
    if action.def.idempotent {
        codes.push(ErrorCode::IdempotencyKeyReused);
    }
    codes.push(ErrorCode::InternalError);
    codes
}

fn error_schema() -> Value {
    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|code| code.as_str()).collect();
    json!({
        "type": "object",
        "description": "Every error has this body, on REST and (as the tool result's structuredContent) on MCP.",
        "required": ["error", "code"],
        "properties": {
            "error": {"type": "string", "description": "A sentence for the caller that names what is wrong."},
            "code": {"type": "string", "enum": codes, "description": "A stable machine-readable code."},
            "required_scope": {"type": "string", "description": "With `insufficient_scope`: the scope the action needs."},
            "price": {"type": "integer", "description": "With `insufficient_credits`: the price of the request."},
            "balance": {"type": "integer", "description": "With `insufficient_credits`: the workspace's balance."},
            "retry_after": {"type": "integer", "description": "With `rate_limited`: seconds to wait."},
            "request_id": {"type": "string", "description": "With `internal_error`: the id to quote."},
            "existing_id": {"type": "string", "description": "With `conflict`: the id of the object that already holds the unique value."},
        },
    })
}

/// One reusable response per error status, listing the codes it carries.
fn error_responses() -> Value {
    let mut by_status: Map<String, Value> = Map::new();
    for code in ErrorCode::ALL {
        let status = code.status().as_u16().to_string();
        let line = format!("`{}`: {}", code.as_str(), code.when());
        let entry = by_status.entry(status).or_insert_with(|| {
            json!({"description": "", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
        });
        let description = entry["description"].as_str().unwrap_or_default();
        entry["description"] = json!(if description.is_empty() {
            line
        } else {
            format!("{description}; {line}")
        });
    }
    Value::Object(by_status)
}

// ----- file uploads (`text_body!`) -----

/// The other request content types of an action that declared a file field with `text_body!`
/// (see `registry::TextBody`): the file as the whole body, or as the `file` part of a
/// `multipart/form-data` form whose other parts are the JSON body's other fields.
fn add_text_body_content(action: &Action, operation: &mut Map<String, Value>) {
    let Some(text_body) = action.route.as_ref().and_then(|route| route.text_body) else {
        return;
    };
    let Some(Value::Object(content)) = operation
        .get_mut("requestBody")
        .and_then(|body| body.get_mut("content"))
    else {
        return;
    };
    let field = text_body.field;
    let mut form = body_schema(action);
    if let Some(Value::Object(properties)) = form.get_mut("properties") {
        properties.remove(field);
        properties.insert(
            "file".into(),
            json!({"type": "string", "contentMediaType": text_body.media_type,
                   "description": format!("The file, which becomes `{field}`.")}),
        );
    }
    form["required"] = json!(["file"]);
    if let Some(form) = form.as_object_mut() {
        form.remove("oneOf");
        form.remove("anyOf");
    }
    content.insert(
        text_body.media_type.into(),
        json!({"schema": {"type": "string", "description": format!(
            "The `{field}` itself (also as `text/plain`); the other fields as query parameters."
        )}}),
    );
    content.insert(
        "multipart/form-data".into(),
        json!({"schema": form, "encoding": {"file": {"contentType": text_body.media_type}}}),
    );
}
