//! The registry: every `#[action]` in the binary, collected once at start-up.
//!
//! The macro submits one [`ActionDef`] per function through `inventory`; [`Registry::build`] gathers
//! them, sorts them by name and validates what the type system cannot see (name length, unique
//! names and routes, object schemas, path parameters present in the input). A registry that fails
//! validation stops the server before it binds a port, with a message naming the action.
//!
//! Each action's schemas are generated here, once, and shared by every face: the MCP tool's input
//! schema and the OpenAPI request schema are the same `serde_json::Value`.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use schemars::{Schema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use crate::config::Environment;
use crate::credits::{Estimate, Price};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::idempotency::MAX_KEY_LEN;
use crate::json::JsonBody;
use crate::scope::Scope;
use crate::tasks::{self, TaskDef};

/// The input field the framework adds to priced actions.
pub const ESTIMATE_FIELD: &str = "estimate_only";

/// The MCP argument that carries an idempotency key (REST uses the `Idempotency-Key` header).
pub const IDEMPOTENCY_FIELD: &str = "idempotency_key";

/// The MCP argument of a list tool that names which fields each item carries (see
/// [`Action::chosen_fields`]).
pub const FIELDS_FIELD: &str = "fields";

/// What an idempotency key does, said once for the MCP argument and the REST header.
pub const IDEMPOTENCY_KEY_DESCRIPTION: &str = "A key of your choice (1 to 255 printable characters). A retry with the same key and \
    the same arguments within 24 hours returns the first result and spends nothing again.";

/// A boxed, sendable future: what the macro-generated shims return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A decoded input whose concrete type only the action's own shims know.
pub type ErasedInput = Box<dyn Any + Send + Sync>;

/// Decodes the JSON input object into the action's input type.
/// Decodes an input object; the second argument is the action's input schema, which the error
/// sentences describe expected values from.
pub type DecodeFn = fn(&Value, &Map<String, Value>) -> Result<ErasedInput, ApiError>;

/// The plan a price function made, which only the action's own shims know the type of.
pub type ErasedPlan = Box<dyn Any + Send>;

/// Runs the action on a decoded input (and, for a priced action, its plan) and encodes its output.
pub type CallFn =
    fn(Ctx, ErasedInput, Option<ErasedPlan>) -> BoxFuture<'static, Result<JsonBody, ApiError>>;

/// Prices a decoded input and plans the work (actions declared with `credits = ...`).
pub type PriceFn =
    for<'a> fn(&'a Ctx, &'a ErasedInput) -> BoxFuture<'a, Result<(Price, ErasedPlan), ApiError>>;

/// The REST route of an action, relative to `/api/v1`.
#[derive(Debug, Clone, Copy)]
pub struct HttpRoute {
    pub method: &'static str,
    pub path: &'static str,
}

/// One `#[action]`, as the macro registers it. Fields are public for the macro only.
pub struct ActionDef {
    pub name: &'static str,
    pub summary: &'static str,
    pub description: &'static str,
    pub scope: Scope,
    pub http: Option<HttpRoute>,
    pub idempotent: bool,
    /// A test helper (`#[action(test_helper)]`): outside production only. In production it is
    /// left out of the registry, so it has no route, no OpenAPI operation and no MCP tool.
    pub test_helper: bool,
    pub price: Option<PriceFn>,
    pub input_schema: fn(&mut SchemaGenerator) -> Schema,
    pub output_schema: fn(&mut SchemaGenerator) -> Schema,
    pub decode: DecodeFn,
    pub call: CallFn,
}

inventory::collect!(ActionDef);

/// A REST route that also takes a file: the whole body with `Content-Type: <media_type>` (or
/// `text/plain`), or the part named `file` of a `multipart/form-data` upload, becomes the string
/// input field `field`, and the other fields come from the query string or the other form
/// fields. The REST face builds the same input object a JSON body would give, so pricing,
/// estimates and idempotency see no difference; MCP is unaffected. Declared beside the action
/// with [`text_body!`](crate::text_body); start-up checks that the action has a body-taking route
/// and that `field` is one of its input's fields.
#[derive(Debug)]
pub struct TextBody {
    pub action: &'static str,
    pub field: &'static str,
    pub media_type: &'static str,
}

inventory::collect!(TextBody);

/// Lets an action's REST route take a file as its `field` (see [`TextBody`]):
/// `text_body!(import_prospects, "csv", "text/csv");`. Naming the function, not a string, makes a
/// misspelt action a compile error.
#[macro_export]
macro_rules! text_body {
    ($action:ident, $field:literal, $media_type:literal) => {
        const _: () = {
            let _ = $action;
        };
        $crate::__private::inventory::submit! {
            $crate::registry::TextBody {
                action: ::core::stringify!($action),
                field: $field,
                media_type: $media_type,
            }
        }
    };
}

/// An input field that, set to `true`, makes the call a preview: it answers what the call would do
/// and changes nothing, so it needs only `read`, as a priced action's `estimate_only` does (a
/// person may look at what approving would send before holding `send`). Declared beside the
/// action with [`preview_field!`](crate::preview_field); start-up checks that `field` is a boolean
/// field of its input. The action itself must keep the promise: its tests show that a preview
/// writes nothing.
#[derive(Debug)]
pub struct PreviewField {
    pub action: &'static str,
    pub field: &'static str,
}

inventory::collect!(PreviewField);

/// Declares `field` the preview switch of `action` (see [`PreviewField`]):
/// `preview_field!(approve_outreach, "dry_run");`.
#[macro_export]
macro_rules! preview_field {
    ($action:ident, $field:literal) => {
        const _: () = {
            let _ = $action;
        };
        $crate::__private::inventory::submit! {
            $crate::registry::PreviewField {
                action: ::core::stringify!($action),
                field: $field,
            }
        }
    };
}

/// A validated action with its schemas generated and its route parsed.
pub struct Action {
    pub def: &'static ActionDef,
    /// The input object schema, shared by the MCP tool and the OpenAPI operation (with
    /// `estimate_only` added for priced actions).
    pub input_schema: Arc<Map<String, Value>>,
    /// The MCP tool's input schema: `input_schema`, plus `idempotency_key` for idempotent actions
    /// (REST carries the key in a header instead).
    pub mcp_input_schema: Arc<Map<String, Value>>,
    /// The output schema; for priced actions, either the output or an estimate.
    pub output_schema: Arc<Map<String, Value>>,
    /// The names of the input type's own top-level properties, for precise unknown-field errors.
    pub input_fields: BTreeSet<String>,
    pub route: Option<Route>,
    /// The input field that makes a call a preview needing only `read`, if declared.
    pub preview: Option<&'static PreviewField>,
    /// The fields of each item, when the output is a page: what the MCP tool's `fields` may name.
    pub item_fields: Option<Vec<String>>,
}

/// A parsed REST route.
#[derive(Debug, Clone)]
pub struct Route {
    pub method: http::Method,
    /// The path under `/api/v1`, in axum's `{param}` syntax.
    pub path: String,
    pub path_params: Vec<String>,
    /// The input field a file upload fills, when the action declared one with `text_body!`.
    pub text_body: Option<&'static TextBody>,
}

impl Action {
    /// Whether `fields` (the call's input) set the declared [`PreviewField`] to `true`, so the call
    /// needs only `read` (a priced action's `estimate_only` is dispatch's own, read apart).
    pub fn asks_preview(&self, fields: &Map<String, Value>) -> bool {
        self.preview
            .is_some_and(|preview| fields.get(preview.field) == Some(&Value::Bool(true)))
    }

    /// The field a caller below the action's scope may still call it with (`estimate_only` or the
    /// preview field), if any.
    pub fn preview_switch(&self) -> Option<&'static str> {
        match (self.def.price, self.preview) {
            (Some(_), _) => Some(ESTIMATE_FIELD),
            (None, Some(preview)) => Some(preview.field),
            (None, None) => None,
        }
    }

    pub fn name(&self) -> &'static str {
        self.def.name
    }

    /// The MCP tool name.
    pub fn tool_name(&self) -> String {
        format!("service_{}", self.def.name)
    }

    /// The item fields an MCP call's `fields` argument names, checked: a non-empty list of this
    /// page's item fields. A 400 naming the field otherwise, or naming `fields` itself when the
    /// tool answers no page.
    pub fn chosen_fields(&self, value: Value) -> Result<Vec<String>, ApiError> {
        let Some(known) = &self.item_fields else {
            return Err(ApiError::invalid_request(format!(
                "Unknown field `{FIELDS_FIELD}`: `{}` answers no list of items.",
                self.tool_name()
            )));
        };
        let listed = || {
            known
                .iter()
                .map(|field| format!("`{field}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let invalid = || {
            ApiError::invalid_request(format!(
                "Invalid field `{FIELDS_FIELD}`: expected a non-empty list of item fields, some of {}.",
                listed()
            ))
        };
        let Value::Array(values) = value else {
            return Err(invalid());
        };
        if values.is_empty() {
            return Err(invalid());
        }
        let mut chosen = Vec::with_capacity(values.len());
        for value in values {
            let Value::String(field) = value else {
                return Err(invalid());
            };
            if !known.contains(&field) {
                return Err(ApiError::invalid_request(format!(
                    "Unknown field `{field}` in `{FIELDS_FIELD}`: the items have {}.",
                    listed()
                )));
            }
            chosen.push(field);
        }
        Ok(chosen)
    }

    /// A read action changes nothing; it is the one kind that takes `GET` and `readOnlyHint`.
    pub fn is_read_only(&self) -> bool {
        self.def.scope == Scope::Read && self.def.price.is_none()
    }

    /// `201 Created` for `create_*` actions, `200 OK` otherwise.
    pub fn success_status(&self) -> http::StatusCode {
        if self.def.name.starts_with("create_") {
            http::StatusCode::CREATED
        } else {
            http::StatusCode::OK
        }
    }

    /// Deletes and sends cannot be undone by the caller.
    pub fn is_destructive(&self) -> bool {
        self.def.name.starts_with("delete_")
            || self.def.name.starts_with("remove_")
            || self.def.scope == Scope::Send
    }

    /// The tag that groups the operation in OpenAPI and the docs: the resource it belongs to.
    pub fn tag(&self) -> &'static str {
        // The first segment of the REST path names the resource (`/lists/{id}/prospects` belongs
        // to `lists`); an MCP-only action falls back to the words after its verb.
        if let Some(http) = self.def.http
            && let Some(resource) = http.path.split('/').find(|segment| !segment.is_empty())
        {
            return resource;
        }
        let name = self.def.name;
        name.split_once('_').map_or(name, |(_, rest)| rest)
    }
}

/// All actions, sorted by name, and the long calls among them (see [`tasks`](crate::tasks)).
pub struct Registry {
    actions: Vec<Action>,
    by_name: BTreeMap<&'static str, usize>,
    tasks: Vec<&'static TaskDef>,
}

/// The longest action name; tool names must fit in 64 characters with the `service_` prefix
/// counted by clients that show them, so the name itself is held to 64.
pub const MAX_NAME_LEN: usize = 64;

impl Registry {
    /// Collects every registered action and validates the set.
    pub fn build() -> Result<Self, String> {
        Self::from_defs(inventory::iter::<ActionDef>.into_iter().collect())
    }

    /// The registry a server in `environment` serves: in production, without the test helpers
    /// (Stripe's pattern: they do not exist there, so no face can route, list or call them).
    pub fn build_for(environment: &Environment) -> Result<Self, String> {
        let production = environment.is_production();
        Self::from_defs(
            inventory::iter::<ActionDef>
                .into_iter()
                .filter(|def| !(production && def.test_helper))
                .collect(),
        )
    }

    pub fn from_defs(mut defs: Vec<&'static ActionDef>) -> Result<Self, String> {
        defs.sort_by_key(|def| def.name);
        let mut problems = Vec::new();
        let mut actions = Vec::with_capacity(defs.len());
        let mut by_name = BTreeMap::new();
        let mut routes = BTreeMap::new();
        for def in defs {
            match validate(def) {
                Ok(action) => {
                    if by_name.insert(def.name, actions.len()).is_some() {
                        problems.push(format!("action `{}` is registered twice", def.name));
                    }
                    if let Some(route) = &action.route {
                        let key = (route.method.to_string(), route.path.clone());
                        if let Some(other) = routes.insert(key, def.name) {
                            problems.push(format!(
                                "actions `{other}` and `{}` share the route {} {}",
                                def.name, route.method, route.path
                            ));
                        }
                    }
                    actions.push(action);
                }
                Err(problem) => problems.push(problem),
            }
        }
        let mut registry = Self {
            actions,
            by_name,
            tasks: Vec::new(),
        };
        let mut tasks: Vec<&'static TaskDef> = inventory::iter::<TaskDef>.into_iter().collect();
        tasks.sort_by_key(|def| def.tool);
        problems.extend(tasks::validate(&tasks, &registry));
        registry.tasks = tasks;
        if problems.is_empty() {
            Ok(registry)
        } else {
            Err(format!(
                "invalid action registry:\n- {}",
                problems.join("\n- ")
            ))
        }
    }

    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    pub fn get(&self, name: &str) -> Option<&Action> {
        self.by_name.get(name).map(|&index| &self.actions[index])
    }

    /// Finds an action by its MCP tool name.
    pub fn by_tool_name(&self, tool: &str) -> Option<&Action> {
        tool.strip_prefix("service_")
            .and_then(|name| self.get(name))
    }

    /// The long call an action starts, when it is registered as one.
    pub fn task_of(&self, action: &str) -> Option<&'static TaskDef> {
        self.tasks.iter().copied().find(|def| def.tool == action)
    }

    /// The long call a task id belongs to, by its prefix (validation keeps prefixes apart).
    pub fn task_by_id(&self, task_id: &str) -> Option<&'static TaskDef> {
        self.tasks
            .iter()
            .copied()
            .find(|def| task_id.starts_with(def.id_prefix))
    }

    /// Every registered long call.
    pub fn tasks(&self) -> &[&'static TaskDef] {
        &self.tasks
    }
}

impl tasks::Actions for Registry {
    fn input_fields(&self, action: &str) -> Option<Vec<&str>> {
        self.get(action)
            .map(|action| action.input_fields.iter().map(String::as_str).collect())
    }
}

/// The schema settings every face shares: JSON Schema 2020-12 (what OpenAPI 3.1 and MCP use),
/// with subschemas inlined so each tool's input schema stands alone.
pub fn schema_generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        // OpenAPI tools know `int32`/`int64`, not schemars' `uint32`/`uint64`.
        .with_transform(schemars::transform::RecursiveTransform(
            crate::schema::signed_int_formats,
        ))
        .into_generator()
}

fn validate(def: &'static ActionDef) -> Result<Action, String> {
    let name = def.name;
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!(
            "action name `{name}` must be 1 to {MAX_NAME_LEN} characters"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(format!("action name `{name}` must be snake_case ASCII"));
    }
    let mut input_schema = input_object(def, &mut schema_generator())?;
    // Inputs only: an answer's text never holds NUL, and MCP tool lists have a size budget.
    input_schema = crate::schema::without_nul(input_schema);
    let input_fields: BTreeSet<String> = input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .keys()
                .filter(|field| def.price.is_none() || *field != ESTIMATE_FIELD)
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let estimate = object_schema(
        name,
        "estimate",
        schema_generator().root_schema_for::<Estimate>(),
    )?;
    let output_schema = output_object(def, &mut schema_generator(), Value::Object(estimate))?;
    let mut mcp_input_schema = input_schema.clone();
    if def.idempotent {
        add_property(
            &mut mcp_input_schema,
            IDEMPOTENCY_FIELD,
            json!({
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_KEY_LEN,
                "pattern": crate::idempotency::KEY_PATTERN,
                "description": IDEMPOTENCY_KEY_DESCRIPTION,
            }),
        );
    }
    let item_fields = page_item_fields(&output_schema);
    if let Some(fields) = &item_fields {
        // The example names two of this page's own fields, so it is one a call may copy.
        let example: Vec<&str> = fields
            .iter()
            .map(String::as_str)
            .filter(|field| *field != "id")
            .take(2)
            .collect();
        add_property(
            &mut mcp_input_schema,
            FIELDS_FIELD,
            json!({
                "type": "array",
                "items": {"type": "string", "enum": fields},
                "minItems": 1,
                "uniqueItems": true,
                "description": format!(
                    "Only these fields of each item (`id` always comes), for a smaller page: e.g. \
                     {}. Default: every field.",
                    json!(example)
                ),
            }),
        );
    }
    let route = def
        .http
        .map(|http| parse_route(name, http, &input_fields))
        .transpose()?;
    let preview = inventory::iter::<PreviewField>
        .into_iter()
        .find(|preview| preview.action == name);
    if let Some(preview) = preview {
        let kind = input_schema
            .get("properties")
            .and_then(|properties| properties.get(preview.field))
            .and_then(|property| property.get("type"));
        if kind != Some(&json!("boolean")) {
            return Err(format!(
                "action `{name}`: `preview_field!` names `{}`, which is not a boolean field of its input type",
                preview.field
            ));
        }
    }
    Ok(Action {
        def,
        input_schema: Arc::new(input_schema),
        mcp_input_schema: Arc::new(mcp_input_schema),
        output_schema: Arc::new(output_schema),
        input_fields,
        route,
        preview,
        item_fields,
    })
}

/// The property names of a page's items, when `output` is a page (see `paging::PAGE_KEYS`) whose
/// items are objects with properties.
fn page_item_fields(output: &Map<String, Value>) -> Option<Vec<String>> {
    let properties = output.get("properties")?.as_object()?;
    let is_page = properties.len() == crate::paging::PAGE_KEYS.len()
        && crate::paging::PAGE_KEYS
            .iter()
            .all(|key| properties.contains_key(*key));
    if !is_page {
        return None;
    }
    let fields: Vec<String> = properties
        .get("items")?
        .get("items")?
        .get("properties")?
        .as_object()?
        .keys()
        .cloned()
        .collect();
    (!fields.is_empty()).then_some(fields)
}

/// The input object schema of `def` as `generator` makes it, with what the framework adds: strict
/// fields (`additionalProperties: false`) and, for a priced action, `estimate_only`. The registry
/// calls it with the inlining [`schema_generator`] (the MCP tool and request decoding) and the
/// OpenAPI document with its referencing generator, so both faces get their input schema from the
/// same `JsonSchema` impl through the same steps.
pub fn input_object(
    def: &ActionDef,
    generator: &mut SchemaGenerator,
) -> Result<Map<String, Value>, String> {
    let name = def.name;
    let mut input_schema = object_schema(name, "input", (def.input_schema)(generator))?;
    // Inputs are strict: a misspelt field is an error, not silently ignored.
    input_schema.insert("additionalProperties".into(), Value::Bool(false));
    if let Some(Value::Object(properties)) = input_schema.get("properties") {
        for reserved in [ESTIMATE_FIELD, IDEMPOTENCY_FIELD, FIELDS_FIELD] {
            if properties.contains_key(reserved) {
                return Err(format!(
                    "action `{name}`: the input field `{reserved}` is reserved for the framework; rename it"
                ));
            }
        }
    }
    if def.price.is_some() {
        add_property(
            &mut input_schema,
            ESTIMATE_FIELD,
            json!({
                "type": "boolean",
                "default": false,
                "description": "Only price the call; needs only the `read` scope.\n\n\
                    Nothing is done or spent. The answer holds the price, its breakdown, the balance \
                    and whether it is sufficient."
            }),
        );
    }
    Ok(input_schema)
}

/// The output schema of `def` as `generator` makes it; for a priced action, either the output or
/// `estimate` (the schema of [`Estimate`], inlined or a reference, as the caller's generator has it).
pub fn output_object(
    def: &ActionDef,
    generator: &mut SchemaGenerator,
    estimate: Value,
) -> Result<Map<String, Value>, String> {
    let name = def.name;
    let output_schema = object_schema(name, "output", (def.output_schema)(generator))?;
    if def.price.is_none() {
        return Ok(output_schema);
    }
    Ok(Map::from_iter([
        ("type".to_owned(), json!("object")),
        (
            "oneOf".to_owned(),
            Value::Array(vec![Value::Object(output_schema), estimate]),
        ),
    ]))
}

fn add_property(schema: &mut Map<String, Value>, name: &str, property: Value) {
    if let Value::Object(properties) = schema.entry("properties").or_insert_with(|| json!({})) {
        properties.insert(name.to_owned(), property);
    }
}

pub(crate) fn object_schema(
    name: &str,
    which: &str,
    schema: Schema,
) -> Result<Map<String, Value>, String> {
    let Value::Object(mut map) = schema.to_value() else {
        return Err(format!(
            "action `{name}`: the {which} schema must be a JSON object schema"
        ));
    };
    map.remove("$schema");
    if map.get("type").and_then(Value::as_str) != Some("object") {
        return Err(format!(
            "action `{name}`: the {which} type must serialize as a JSON object (a struct with named fields)"
        ));
    }
    Ok(map)
}

fn parse_route(name: &str, http: HttpRoute, fields: &BTreeSet<String>) -> Result<Route, String> {
    let method = http::Method::from_bytes(http.method.as_bytes())
        .map_err(|_| format!("action `{name}`: unknown HTTP method `{}`", http.method))?;
    if !http.path.starts_with('/') {
        return Err(format!(
            "action `{name}`: path `{}` must start with `/`",
            http.path
        ));
    }
    let mut path_params = Vec::new();
    for segment in http.path.split('/').skip(1) {
        if let Some(param) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            if !fields.contains(param) {
                return Err(format!(
                    "action `{name}`: path parameter `{param}` in `{}` is not a field of its input type; add `{param}` to the input struct",
                    http.path
                ));
            }
            path_params.push(param.to_owned());
        }
    }
    let text_body = inventory::iter::<TextBody>
        .into_iter()
        .find(|body| body.action == name);
    if let Some(body) = text_body {
        if !matches!(
            method,
            http::Method::POST | http::Method::PUT | http::Method::PATCH
        ) {
            return Err(format!(
                "action `{name}`: `text_body!` needs a POST, PUT or PATCH route, not {method}"
            ));
        }
        if !fields.contains(body.field) {
            return Err(format!(
                "action `{name}`: `text_body!` names `{}`, which is not a field of its input type",
                body.field
            ));
        }
    }
    Ok(Route {
        method,
        path: http.path.to_owned(),
        path_params,
        text_body,
    })
}
