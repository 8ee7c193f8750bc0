//! The OpenAPI 3.1 document, generated from the registry.
//!
//! OpenAPI 3.1 schema objects are JSON Schema 2020-12, which is what schemars emits, so there is no
//! second schema derive and no translation step that could drift. The document is built once at
//! start-up and served as bytes; a golden file (`tests/golden/openapi.json`) catches unintended
//! changes.
//!
//! The two faces want one schema in two forms. An MCP tool's input schema must stand alone (hosts do
//! not follow references into a shared document), so the registry inlines every subschema. A client
//! generator wants the opposite: a `Prospect` that four operations return should be one named
//! component, or the generated client has four Prospect classes. So the document runs the very
//! same steps on the very same `JsonSchema` impls, [`registry::input_object`] and
//! [`registry::output_object`] on the action's registered schema function, with a second generator
//! that references named types (`$ref: #/components/schemas/Prospect`) instead of inlining them;
//! its definitions become `components.schemas`. The two forms differ only in where a subschema is
//! written, and a test inlines the document's references again and finds each tool's schema.
//! schemars titles every `Page<T>` `Page`; the document names each after its items
//! (`ProspectPage`), so a generated client has one page class per item type.
//!
//! Examples come from the actions' crate (an [`example!`](crate::example) beside each action,
//! collected like actions), because the runtime knows no domain type; a test makes sure no
//! operation lacks one and that each request example decodes.

use std::collections::{BTreeMap, BTreeSet};

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator, transform::RecursiveTransform};
use serde_json::{Map, Value, json};

use crate::credits::Estimate;
use crate::error::ErrorCode;
use crate::idempotency::MAX_KEY_LEN;
use crate::paging::Page;
use crate::registry::{self, Action, IDEMPOTENCY_KEY_DESCRIPTION, Registry};
use crate::toolsets;

/// One action's example request and response, declared beside the action with [`example!`]
/// (`inventory::submit!`), since the runtime names no domain type. `request` is the input object
/// as an MCP tool call sends it (path and query fields included) and `response` the success body.
pub struct ActionExample {
    pub action: &'static str,
    pub request: fn() -> Value,
    pub response: fn() -> Value,
}

inventory::collect!(ActionExample);

/// Declares an action's example beside it, in `serde_json::json!` syntax:
///
/// ```ignore
/// example!(get_prospect,
///     request: {"id": "prs_sgSJ6H0Sz0uqCgmLUWdS"},
///     response: {"id": "prs_sgSJ6H0Sz0uqCgmLUWdS", "first_name": "Ada"}
/// );
/// ```
///
/// The action's name is its function: a name that is no function in scope does not compile.
#[macro_export]
macro_rules! example {
    ($action:ident, request: $request:tt, response: $response:tt $(,)?) => {
        const _: () = {
            #[allow(dead_code)]
            fn the_action_is_in_scope() {
                let _ = $action;
            }
            $crate::__private::inventory::submit! {
                $crate::openapi::ActionExample {
                    action: stringify!($action),
                    request: || $crate::__private::serde_json::json!($request),
                    response: || $crate::__private::serde_json::json!($response),
                }
            }
        };
    };
}

/// One operation's example.
#[derive(Debug, Clone, Default)]
pub struct OperationExample {
    pub request: Value,
    pub response: Value,
}

/// Every registered example by action name; an action with two is reported as an error (a test
/// reads it; the document leaves the examples out).
pub fn examples() -> Result<BTreeMap<String, OperationExample>, String> {
    let mut all = BTreeMap::new();
    for example in inventory::iter::<ActionExample> {
        let entry = OperationExample {
            request: (example.request)(),
            response: (example.response)(),
        };
        if all.insert(example.action.to_owned(), entry).is_some() {
            return Err(format!("`{}` has two examples", example.action));
        }
    }
    Ok(all)
}

/// The schemas of the document: one generator that names types instead of inlining them, plus the
/// output types hoisted out of the operations into components.
struct Schemas {
    generator: SchemaGenerator,
    hoisted: Map<String, Value>,
}

impl Schemas {
    fn new() -> Self {
        let generator = SchemaSettings::draft2020_12()
            .with(|settings| {
                settings.inline_subschemas = false;
                settings.meta_schema = None;
                settings.definitions_path = "/components/schemas".into();
            })
            .with_transform(RecursiveTransform(crate::schema::signed_int_formats))
            .with_transform(RecursiveTransform(crate::schema::no_nul_strings))
            .into_generator();
        Self {
            generator,
            hoisted: Map::new(),
        }
    }

    /// The request schema of `action`: its input object, with named types as references.
    fn input(&mut self, action: &Action) -> Map<String, Value> {
        let mut schema = registry::input_object(action.def, &mut self.generator)
            .unwrap_or_else(|_| (*action.input_schema).clone());
        schema.remove("components");
        schema
    }

    /// The success schema of `action`: a reference to its output type (and to `Estimate` for a
    /// priced action).
    fn output(&mut self, action: &Action) -> Value {
        let estimate = self.generator.subschema_for::<Estimate>().to_value();
        let Ok(mut schema) = registry::output_object(action.def, &mut self.generator, estimate)
        else {
            return Value::Object((*action.output_schema).clone());
        };
        if let Some(Value::Array(choices)) = schema.get_mut("oneOf") {
            if let Some(Value::Object(output)) = choices.first_mut() {
                let hoisted = self.hoist(std::mem::take(output));
                choices[0] = hoisted;
            }
            return Value::Object(schema);
        }
        self.hoist(schema)
    }

    /// Moves a root schema into the components under its title and answers a reference to it.
    /// A root whose name another, different schema holds stays inline.
    fn hoist(&mut self, mut schema: Map<String, Value>) -> Value {
        schema.remove("components");
        let Some(Value::String(mut name)) = schema.remove("title") else {
            return Value::Object(schema);
        };
        // Every `Page<T>` is titled `Page`; a generated client wants one class per item type.
        if name == Page::<()>::schema_name()
            && let Some(item) = schema
                .get("properties")
                .and_then(|properties| properties.get("items"))
                .and_then(|items| items.get("items"))
                .and_then(|item| item.get("$ref"))
                .and_then(Value::as_str)
                .and_then(|target| target.rsplit('/').next())
        {
            name = format!("{item}{name}");
        }
        let schema = Value::Object(schema);
        // The generator's definitions get its transforms only when they are taken (`finish`);
        // the root schema has had them already, so compare like with like.
        let taken = match self.generator.definitions().get(&name) {
            Some(definition) => Some(transformed(definition)),
            None => self.hoisted.get(&name).cloned(),
        };
        if taken.is_some_and(|other| other != schema) {
            return schema;
        }
        self.hoisted.insert(name.clone(), schema);
        json!({"$ref": format!("#/components/schemas/{name}")})
    }

    /// Every named schema, `Error` included, under its readable name.
    fn finish(mut self) -> Map<String, Value> {
        let mut all = self.generator.take_definitions(true);
        for (name, schema) in std::mem::take(&mut self.hoisted) {
            all.entry(name).or_insert(schema);
        }
        all.insert("Error".into(), error_schema());
        all
    }
}

/// `definition` with the transforms [`Schemas::new`] gives its generator.
fn transformed(definition: &Value) -> Value {
    use schemars::transform::Transform;
    let Ok(mut schema) = schemars::Schema::try_from(definition.clone()) else {
        return definition.clone();
    };
    RecursiveTransform(crate::schema::signed_int_formats).transform(&mut schema);
    RecursiveTransform(crate::schema::no_nul_strings).transform(&mut schema);
    schema.to_value()
}

fn tag_entry(tag: &str) -> Value {
    match toolsets::tag(tag) {
        Some(described) => json!({"name": tag, "description": described.description}),
        None => json!({"name": tag}),
    }
}

/// Builds the whole document. The server URL is relative (`/api/v1`), so the document does not
/// depend on the configured base URL and reads the same on every instance.
pub fn document(registry: &Registry) -> Value {
    let mut paths: Map<String, Value> = Map::new();
    let mut tags: Vec<&str> = Vec::new();
    let mut schemas = Schemas::new();
    let examples = examples().unwrap_or_default();
    for action in registry.actions() {
        let Some(route) = &action.route else { continue };
        if !tags.contains(&action.tag()) {
            tags.push(action.tag());
        }
        let operation = operation(action, &mut schemas, examples.get(action.name()));
        let entry = paths
            .entry(route.path.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(methods) = entry {
            methods.insert(route.method.as_str().to_ascii_lowercase(), operation);
        }
    }
    tags.sort_unstable();
    let mut document = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Outreach API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Prospects, lists, targeting and outreach in a workspace. Every operation is also an MCP tool \
                named `service_<operationId>` at `/api/mcp`, with the same input schema and the same answers.\n\n\
                Authenticate with `Authorization: Bearer <key>`. Scopes nest: `send` includes `write` includes `read`. \
                Errors have the body `{\"error\": \"<sentence>\", \"code\": \"<code>\"}`.",
            "license": {"name": "MIT", "identifier": "MIT"},
        },
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearerAuth": []}],
        "tags": tags.iter().map(|tag| tag_entry(tag)).collect::<Vec<_>>(),
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key (`pk_live_...` or `pk_test_...`) or an OAuth access token.",
                }
            },
            "schemas": {},
            "responses": error_responses(),
            "parameters": {
                "IdempotencyKey": {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": false,
                    "description": IDEMPOTENCY_KEY_DESCRIPTION,
                    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LEN, "pattern": crate::idempotency::KEY_PATTERN},
                    "example": "import-2026-05-01-a",
                },
            },
            "headers": response_headers(),
        },
    });
    document["components"]["schemas"] = Value::Object(schemas.finish());
    // Only the error responses some operation names: an unused component is noise to a linter
    // (a 405 is about a method the path does not have, so no operation lists it).
    let used: BTreeSet<String> = document["paths"]
        .as_object()
        .into_iter()
        .flat_map(Map::values)
        .filter_map(Value::as_object)
        .flat_map(Map::values)
        .filter_map(|operation| operation["responses"].as_object())
        .flat_map(Map::keys)
        .cloned()
        .collect();
    if let Some(Value::Object(responses)) = document["components"].get_mut("responses") {
        responses.retain(|status, _| used.contains(status));
    }
    document
}

/// The response headers, declared once and referenced by the responses that carry them.
fn response_headers() -> Value {
    json!({
        "X-Request-Id": {
            "description": "The id of this request, on every response; quote it when you report a problem.",
            "required": true,
            "schema": {"type": "string"},
        },
        "Idempotent-Replayed": {
            "description": "`true` when this response is the stored answer to an earlier request with the same \
                `Idempotency-Key` (nothing was done or spent again); absent on a first answer.",
            "schema": {"type": "string", "enum": ["true"]},
        },
        "Retry-After": {
            "description": "Seconds to wait before retrying.",
            "schema": {"type": "integer", "minimum": 0},
        },
    })
}

fn header_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/headers/{name}")})
}

fn operation(action: &Action, schemas: &mut Schemas, example: Option<&OperationExample>) -> Value {
    let def = action.def;
    let Some(route) = &action.route else {
        return Value::Null;
    };
    let has_body = matches!(route.method.as_str(), "POST" | "PATCH" | "PUT");
    let input = schemas.input(action);
    let properties = input
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = input
        .get("required")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let request_example = example.map(|example| example.request.clone());
    let example_of = |name: &str| {
        request_example
            .as_ref()
            .and_then(|request| request.get(name))
            .cloned()
    };

    let mut parameters = Vec::new();
    for name in &route.path_params {
        parameters.push(parameter(
            name,
            "path",
            true,
            properties.get(name),
            example_of(name),
        ));
    }
    if !has_body {
        for (name, schema) in &properties {
            if !route.path_params.contains(name) {
                parameters.push(parameter(
                    name,
                    "query",
                    required.contains(&name.as_str()),
                    Some(schema),
                    example_of(name),
                ));
            }
        }
    }
    if def.idempotent {
        parameters.push(json!({"$ref": "#/components/parameters/IdempotencyKey"}));
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
        let body = without_path_params(input, &route.path_params);
        // Required when an empty body fails the schema: a required field, `minProperties`, a
        // `oneOf` whose every branch requires one, or a cross-field rule (`not`) that refuses `{}`.
        let body_required = needs_a_field(&body) || body.contains_key("not");
        let mut media = json!({"schema": Value::Object(body)});
        if let Some(Value::Object(mut request)) = request_example.clone() {
            for param in &route.path_params {
                request.remove(param);
            }
            media["example"] = Value::Object(request);
        }
        operation.insert(
            "requestBody".into(),
            json!({"required": body_required, "content": {"application/json": media}}),
        );
        add_text_body_content(action, &mut operation);
    }
    let status = action.success_status();
    let mut headers = Map::new();
    headers.insert("X-Request-Id".into(), header_ref("X-Request-Id"));
    if def.idempotent {
        headers.insert(
            "Idempotent-Replayed".into(),
            header_ref("Idempotent-Replayed"),
        );
    }
    let mut media = json!({"schema": schemas.output(action)});
    if let Some(example) = example {
        media["example"] = example.response.clone();
    }
    let mut responses = Map::new();
    responses.insert(
        status.as_u16().to_string(),
        json!({
            "description": status.canonical_reason().unwrap_or("Success"),
            "headers": headers,
            "content": {"application/json": media},
        }),
    );
    let writes = route.method != "GET";
    for code in error_codes(action, has_body, writes) {
        responses.insert(
            code.status().as_u16().to_string(),
            json!({"$ref": format!("#/components/responses/{}", code.status().as_u16())}),
        );
    }
    operation.insert("responses".into(), Value::Object(responses));
    Value::Object(operation)
}

fn without_path_params(
    mut schema: Map<String, Value>,
    path_params: &[String],
) -> Map<String, Value> {
    if path_params.is_empty() {
        return schema;
    }
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for param in path_params {
            properties.remove(param);
        }
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|name| !path_params.iter().any(|param| name.as_str() == Some(param)));
        if required.is_empty() {
            schema.remove("required");
        }
    }
    schema
}

fn parameter(
    name: &str,
    location: &str,
    required: bool,
    schema: Option<&Value>,
    example: Option<Value>,
) -> Value {
    let mut schema = schema.cloned().unwrap_or_else(|| json!({"type": "string"}));
    let description = schema
        .as_object_mut()
        .and_then(|map| map.remove("description"));
    let mut parameter =
        json!({"name": name, "in": location, "required": required, "schema": schema});
    if let (Some(description), Value::Object(map)) = (description, &mut parameter) {
        map.insert("description".into(), description);
    }
    if let Some(example) = example {
        parameter["example"] = example;
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
fn error_codes(action: &Action, has_body: bool, writes: bool) -> Vec<ErrorCode> {
    let mut codes = vec![ErrorCode::INVALID_REQUEST, ErrorCode::UNAUTHENTICATED];
    if action.def.price.is_some() {
        codes.push(ErrorCode::INSUFFICIENT_CREDITS);
    }
    codes.push(ErrorCode::INSUFFICIENT_SCOPE);
    // Any operation may name an object that does not exist, in its path or in its input.
    codes.push(ErrorCode::NOT_FOUND);
    // Any write may find its object in a state that refuses it (`invalid_state`, e.g. deleting
    // an agent while it runs) or a value taken (`conflict`): both are 409.
    if writes {
        codes.push(ErrorCode::CONFLICT);
    }
    if has_body {
        codes.push(ErrorCode::PAYLOAD_TOO_LARGE);
        codes.push(ErrorCode::UNSUPPORTED_MEDIA_TYPE);
    }
    if action.def.idempotent {
        codes.push(ErrorCode::IDEMPOTENCY_KEY_IN_USE);
        codes.push(ErrorCode::IDEMPOTENCY_KEY_REUSED);
    }
    // Every credential's calls are rate limited (DESIGN.md section 6).
    codes.push(ErrorCode::RATE_LIMITED);
    codes.push(ErrorCode::INTERNAL_ERROR);
    codes.sort_by_key(|code| code.status());
    codes.dedup_by_key(|code| code.status());
    codes
}

fn error_schema() -> Value {
    let codes: Vec<&str> = ErrorCode::all().iter().map(|code| code.as_str()).collect();
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
            "retryable": {"type": "boolean", "description": "With `conflict`: `true` when other requests kept changing the same records at the same moment and the server's own tries ran out; nothing of this one was kept, and the same request sent again may succeed."},
        },
    })
}

/// One reusable response per error status, listing the codes it carries. Every response has a
/// request id; a 409 (the same idempotency key still running) and a 429 say when to retry.
fn error_responses() -> Value {
    let mut by_status: Map<String, Value> = Map::new();
    for code in ErrorCode::all() {
        let status = code.status().as_u16().to_string();
        let line = format!("`{}`: {}", code.as_str(), code.when());
        let entry = by_status.entry(status).or_insert_with(|| {
            let mut headers = Map::new();
            headers.insert("X-Request-Id".into(), header_ref("X-Request-Id"));
            if matches!(code.status().as_u16(), 409 | 429) {
                headers.insert("Retry-After".into(), header_ref("Retry-After"));
            }
            json!({
                "description": "",
                "headers": headers,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            })
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

/// Whether an empty object fails `schema`: it requires a field, itself or in every branch of its
/// `oneOf` / `anyOf`, or it has `minProperties` (an import takes `csv` or `rows`, so it needs a
/// body though it names no field as required). Such a request body is `required: true`.
fn needs_a_field(schema: &Map<String, Value>) -> bool {
    let requires = schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|names| !names.is_empty())
        || schema
            .get("minProperties")
            .and_then(Value::as_u64)
            .is_some_and(|least| least > 0);
    let every_branch_requires = |keyword: &str| {
        schema
            .get(keyword)
            .and_then(Value::as_array)
            .is_some_and(|branches| {
                !branches.is_empty()
                    && branches
                        .iter()
                        .all(|branch| branch.as_object().is_some_and(needs_a_field))
            })
    };
    requires || every_branch_requires("oneOf") || every_branch_requires("anyOf")
}

// ----- file uploads (`text_body!`) -----

/// `from` as `to` wherever `schema` names a field: in `required` lists and `properties` keys.
fn rename_field(schema: &mut Value, from: &str, to: &str) {
    match schema {
        Value::Object(object) => {
            if let Some(Value::Array(required)) = object.get_mut("required") {
                for name in required.iter_mut().filter(|name| *name == from) {
                    *name = to.into();
                }
            }
            if let Some(Value::Object(properties)) = object.get_mut("properties")
                && let Some(value) = properties.remove(from)
            {
                properties.insert(to.into(), value);
            }
            for (key, value) in object.iter_mut() {
                if key != "required" {
                    rename_field(value, from, to);
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| rename_field(item, from, to)),
        _ => {}
    }
}

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
    // The form's fields are the JSON body's, with the file in place of the field it fills.
    let mut form = content
        .get("application/json")
        .and_then(|media| media.get("schema"))
        .cloned()
        .unwrap_or_else(|| json!({"type": "object"}));
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
        // The cross-field rules name the field the file fills.
        for keyword in ["not", "if", "then"] {
            if let Some(rule) = form.get_mut(keyword) {
                rename_field(rule, field, "file");
            }
        }
        // A field the rules forbid beside the file is not a part of the form at all: a form part
        // is text, and cannot be sent as the `null` that would leave it out.
        let excluded: Vec<String> = form
            .get("not")
            .and_then(|rule| rule.get("anyOf"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|branch| branch.get("required")?.as_array())
            .filter(|names| names.len() == 2 && names.iter().any(|name| name == "file"))
            .flat_map(|names| {
                names
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|name| *name != "file")
            })
            .map(str::to_owned)
            .collect();
        if let Some(Value::Object(properties)) = form.get_mut("properties") {
            for name in &excluded {
                properties.remove(name);
            }
            // Nor can any part be null: a field that may be null is left out instead.
            for property in properties.values_mut() {
                if let Some(Value::Array(types)) = property.get_mut("type") {
                    types.retain(|kind| kind != "null");
                }
            }
        }
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
