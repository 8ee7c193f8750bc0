//! The REST face: `/api/v1` routes made from the registry.
//!
//! Each action with an `http` route becomes one axum route. The handler only assembles the input
//! object (path parameters plus the query string for `GET`/`DELETE`, plus the JSON body for
//! `POST`/`PATCH`/`PUT`) and hands it to [`dispatch`]. Query strings carry only strings, so they
//! are coerced to the types the input schema declares; that keeps one decoder (serde) for both
//! faces. Routing errors (404, 405 with `Allow`, 413, 415) use the same `{error, code}` body.
//!
//! One exception to "the body is JSON": an action that declared a file field with
//! [`text_body!`](crate::text_body) (`import_prospects`: `csv`) also takes the file as the whole
//! body (`Content-Type: text/csv`) or as the `file` part of a `multipart/form-data` upload, with
//! its other fields in the query string or the other form fields. Both are turned into the same
//! input object a JSON body gives (`{"csv": "...", "on_duplicate": "update"}`), so the dispatch,
//! the price, the estimate and the idempotency fingerprint cannot tell them apart. Form fields and
//! query values are strings, coerced like query strings; a field whose schema is an object
//! (`mapping`) is read as JSON text.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{
    DefaultBodyLimit, Extension, FromRef, FromRequest, Multipart, OriginalUri, Path, Request, State,
};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use serde_json::{Map, Value};

use crate::auth::Principal;
use crate::dispatch::{Dispatcher, json_kind};
use crate::error::{ApiError, ErrorCode};
use crate::registry::{Action, TextBody};
use crate::request_id::request_id;
use crate::state::AppState;
use crate::words;

/// The routes of every action with an `http` attribute, relative to `/api/v1`.
pub fn action_routes(state: &Arc<AppState>) -> Router<Arc<AppState>> {
    let mut by_path: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (index, action) in state.registry.actions().iter().enumerate() {
        if let Some(route) = &action.route {
            by_path.entry(route.path.clone()).or_default().push(index);
        }
    }
    let mut router = Router::new();
    for (path, indices) in by_path {
        let mut methods: Vec<Method> = Vec::new();
        let mut method_router: MethodRouter<Arc<AppState>> = MethodRouter::new();
        for index in indices {
            let Some(route) = &state.registry.actions()[index].route else {
                continue;
            };
            let Ok(filter) = MethodFilter::try_from(route.method.clone()) else {
                continue;
            };
            methods.push(route.method.clone());
            method_router = method_router.merge(on(
                filter,
                move |state: State<Arc<AppState>>,
                      principal: Extension<Arc<Principal>>,
                      params: Result<Path<Vec<(String, String)>>, PathRejection>,
                      request: Request| {
                    handle(state, principal, params, index, request)
                },
            ));
        }
        let allow = allow_header(&methods);
        method_router = method_router.fallback(move |request: Request| {
            let allow = allow.clone();
            async move {
                let path = request
                    .extensions()
                    .get::<OriginalUri>()
                    .map_or_else(|| request.uri().path(), |uri| uri.path());
                ApiError::new(
                    ErrorCode::METHOD_NOT_ALLOWED,
                    format!(
                        "{} is not allowed on {path}; allowed: {allow}.",
                        request.method()
                    ),
                )
                .with_header(header::ALLOW, &allow)
            }
        });
        // Multipart bodies are read after `read_body` applied the configured limit; this only
        // lifts axum's own 2 MB default for them.
        let method_router = method_router.layer(DefaultBodyLimit::max(state.config.max_body_bytes));
        router = router.route(&path, method_router);
    }
    router
}

fn allow_header(methods: &[Method]) -> String {
    let mut names: Vec<&str> = methods.iter().map(Method::as_str).collect();
    if names.contains(&"GET") {
        names.push("HEAD");
    }
    names.join(", ")
}

async fn handle(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Arc<Principal>>,
    params: Result<Path<Vec<(String, String)>>, PathRejection>,
    index: usize,
    request: Request,
) -> Response {
    let request_id: Arc<str> = request_id(&request).into();
    let action = &state.registry.actions()[index];
    // Read before the body consumes the request; an invalid key is reported after the input's
    // own errors, as before.
    let key = idempotency_key(action, request.headers());
    let input = match params {
        Ok(Path(params)) => rest_input(&state, action, params, request).await,
        Err(rejection) => Err(ApiError::invalid_request(format!(
            "Bad path parameter: {}.",
            rejection.body_text()
        ))),
    };
    let result = match (input, key) {
        (Ok(input), Ok(key)) => {
            Dispatcher::from_ref(&state)
                .dispatch(principal, action, input, key, request_id.clone())
                .await
        }
        (Err(error), _) | (Ok(_), Err(error)) => Err(error),
    };
    match result {
        Ok(reply) => {
            // The bytes dispatch wrote, with the content type `Json` would give them.
            let mut response = (
                reply.status,
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                reply.body.bytes().clone(),
            )
                .into_response();
            if reply.replayed {
                response
                    .headers_mut()
                    .insert("idempotent-replayed", HeaderValue::from_static("true"));
            }
            response
        }
        Err(error) => error.log(&request_id).into_response(),
    }
}

/// The `Idempotency-Key` header of an idempotent action (ignored by the others).
fn idempotency_key(action: &Action, headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    if !action.def.idempotent {
        return Ok(None);
    }
    let mut values = headers.get_all("idempotency-key").iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::invalid_request(
            "Send one `Idempotency-Key` header, not several.",
        ));
    }
    let key = value.to_str().map_err(|_| {
        ApiError::invalid_request(
            "The `Idempotency-Key` header must be printable ASCII characters.",
        )
    })?;
    Ok(Some(key.to_owned()))
}

/// Builds the input object from the path, the query string and the body.
async fn rest_input(
    state: &AppState,
    action: &Action,
    params: Vec<(String, String)>,
    request: Request,
) -> Result<Value, ApiError> {
    let (parts, body) = request.into_parts();
    let route = action
        .route
        .as_ref()
        .ok_or_else(|| ApiError::internal("REST call of an action without a route"))?;
    let has_body = matches!(route.method, Method::POST | Method::PATCH | Method::PUT);
    let mut input = Map::new();

    if has_body
        && let Some(text_body) = route.text_body
        && let Some(kind) = upload_kind(&parts.headers, text_body)
    {
        let mut input = upload_input(state, action, text_body, kind, parts, body).await?;
        for (name, value) in params {
            if input.contains_key(&name) {
                return Err(ApiError::invalid_request(format!(
                    "`{name}` is given in the path; leave it out of the form fields and query string."
                )));
            }
            input.insert(name.clone(), coerce(&action.input_schema, &name, &value)?);
        }
        return Ok(Value::Object(input));
    }

    if let Some(query) = parts.uri.query().filter(|query| !query.is_empty()) {
        if has_body {
            return Err(ApiError::invalid_request(format!(
                "{} takes its input as a JSON body, not in the query string.",
                route.method
            )));
        }
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            let coerced = coerce(&action.input_schema, &key, &value)?;
            if input.insert(key.clone().into_owned(), coerced).is_some() {
                return Err(ApiError::invalid_request(format!(
                    "Query parameter `{key}` is given more than once."
                )));
            }
        }
    }

    if has_body {
        let bytes = crate::body::read(state.config.max_body_bytes, &parts.headers, body).await?;
        // Only an empty body means "no fields"; anything else must be a JSON object.
        if !bytes.is_empty() {
            if !is_json(&parts.headers) {
                let message = match route.text_body {
                    Some(text_body) => format!(
                        "Send the body as JSON with `Content-Type: application/json`, as `{}` (the `{}` \
                         itself, other fields in the query string), or as `multipart/form-data` with the \
                         file in a part named `file`.",
                        text_body.media_type, text_body.field
                    ),
                    None => {
                        "Send the body as JSON with `Content-Type: application/json`.".to_owned()
                    }
                };
                return Err(ApiError::new(ErrorCode::UNSUPPORTED_MEDIA_TYPE, message));
            }
            // Parsed through `Value`'s `FromStr`, which serde_json compiles itself: that keeps the
            // parser optimised in debug builds too (Cargo.toml), where a 1 MB body of short
            // strings would otherwise take most of the worst-input tests' 100 ms.
            let parsed = std::str::from_utf8(&bytes)
                .map_err(|error| format!("it is not UTF-8 ({error})"))
                .and_then(|text| text.parse::<Value>().map_err(|error| error.to_string()));
            match parsed {
                Ok(Value::Object(body)) => input = body,
                Ok(other) => {
                    return Err(ApiError::invalid_request(format!(
                        "The body must be a JSON object, got {}.",
                        json_kind(&other)
                    )));
                }
                Err(error) => {
                    return Err(ApiError::invalid_request(format!(
                        "The body is not valid JSON: {error}."
                    )));
                }
            }
        }
    }

    for (name, value) in params {
        if input.contains_key(&name) {
            return Err(ApiError::invalid_request(format!(
                "`{name}` is given in the path; leave it out of the {}.",
                if has_body { "body" } else { "query string" }
            )));
        }
        let coerced = coerce(&action.input_schema, &name, &value)?;
        input.insert(name, coerced);
    }
    Ok(Value::Object(input))
}

/// How a file reaches an action that declared a [`TextBody`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Upload {
    /// The whole body is the file.
    Text,
    /// `multipart/form-data`: the `file` part is the file, the other parts are fields.
    Multipart,
}

fn upload_kind(headers: &HeaderMap, text_body: &TextBody) -> Option<Upload> {
    let essence = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())?
        .trim()
        .to_ascii_lowercase();
    if essence == text_body.media_type || essence == "text/plain" {
        Some(Upload::Text)
    } else if essence == "multipart/form-data" {
        Some(Upload::Multipart)
    } else {
        None
    }
}

/// The input object of a file upload: the file as `text_body.field`, the other fields from the
/// query string (either kind) and the form fields (multipart).
async fn upload_input(
    state: &AppState,
    action: &Action,
    text_body: &TextBody,
    kind: Upload,
    parts: http::request::Parts,
    body: Body,
) -> Result<Map<String, Value>, ApiError> {
    let file_field = text_body.field;
    let mut input = Map::new();
    let add = |input: &mut Map<String, Value>, key: &str, value: &str, from: &str| {
        if key == file_field {
            return Err(ApiError::invalid_request(format!(
                "`{file_field}` is the uploaded file; send the other fields in the {from}."
            )));
        }
        let coerced = coerce_field(&action.input_schema, key, value)?;
        if input.insert(key.to_owned(), coerced).is_some() {
            return Err(ApiError::invalid_request(format!(
                "`{key}` is given more than once (in the query string or the form fields)."
            )));
        }
        Ok(())
    };
    if let Some(query) = parts.uri.query().filter(|query| !query.is_empty()) {
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            add(&mut input, &key, &value, "query string")?;
        }
    }
    let bytes = crate::body::read(state.config.max_body_bytes, &parts.headers, body).await?;
    let file = match kind {
        Upload::Text => bytes.to_vec(),
        Upload::Multipart => {
            let request = Request::from_parts(parts, Body::from(bytes));
            let mut multipart =
                Multipart::from_request(request, state)
                    .await
                    .map_err(|rejection| {
                        ApiError::invalid_request(format!(
                            "The multipart body cannot be read: {}.",
                            rejection.body_text()
                        ))
                    })?;
            let unreadable = |error: axum::extract::multipart::MultipartError| {
                ApiError::invalid_request(format!(
                    "The multipart body cannot be read: {}.",
                    error.body_text()
                ))
            };
            let mut file = None;
            while let Some(part) = multipart.next_field().await.map_err(unreadable)? {
                let name = part.name().unwrap_or_default().to_owned();
                let data = part.bytes().await.map_err(unreadable)?;
                if name == "file" {
                    if file.replace(data.to_vec()).is_some() {
                        return Err(ApiError::invalid_request(
                            "The form has more than one `file` part; send one file per request.",
                        ));
                    }
                    continue;
                }
                let text = std::str::from_utf8(&data).map_err(|_| {
                    ApiError::invalid_request(format!("The form field `{name}` is not UTF-8 text."))
                })?;
                add(&mut input, &name, text, "form fields")?;
            }
            file.ok_or_else(|| {
                ApiError::invalid_request(format!(
                    "The form has no part named `file`; send the file as `file` (`curl -F file=@people.csv`), \
                     which becomes `{file_field}`."
                ))
            })?
        }
    };
    let text = String::from_utf8(file).map_err(|_| {
        ApiError::invalid_request(format!(
            "The uploaded `{file_field}` is not UTF-8 text; save the file as UTF-8 and send it again."
        ))
    })?;
    input.insert(file_field.to_owned(), Value::String(text));
    Ok(input)
}

/// [`coerce`], and JSON text for a field whose schema is an object (`mapping={"Who": "full_name"}`).
fn coerce_field(schema: &Map<String, Value>, field: &str, text: &str) -> Result<Value, ApiError> {
    let wants_object = schema
        .get("properties")
        .and_then(|props| props.get(field))
        .is_some_and(|property| schema_types(property).iter().any(|t| t == "object"));
    if wants_object {
        return serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| {
                ApiError::invalid_request(format!(
                    "`{field}` must be a JSON object, such as {{\"Full Name\": \"full_name\"}}; got `{text}`."
                ))
            });
    }
    coerce(schema, field, text)
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .map(|essence| {
            let essence = essence.trim().to_ascii_lowercase();
            essence == "application/json"
                || (essence.starts_with("application/") && essence.ends_with("+json"))
        })
        .unwrap_or(false)
}

/// The refusal of a query or path value of the wrong type, in the words the MCP face uses for
/// the same value sent as a JSON string.
fn not_a(field: &str, property: &Value, text: &str) -> ApiError {
    let expected = property
        .as_object()
        .map_or_else(|| "another type".to_owned(), words::describe);
    ApiError::invalid_request(format!(
        "Invalid field `{field}`: expected {expected}, got the string {}.",
        Value::String(text.to_owned())
    ))
}

/// Converts a query or path string to the JSON type the input schema declares for `field`.
fn coerce(schema: &Map<String, Value>, field: &str, text: &str) -> Result<Value, ApiError> {
    let Some(property) = schema.get("properties").and_then(|props| props.get(field)) else {
        // Unknown fields are reported by the dispatch with the list of expected ones.
        return Ok(Value::String(text.to_owned()));
    };
    let types = schema_types(property);
    let wants = |kind: &str| types.iter().any(|t| t == kind);
    if wants("integer") {
        if let Ok(number) = text.parse::<i64>() {
            return Ok(Value::from(number));
        }
        if let Ok(number) = text.parse::<u64>() {
            return Ok(Value::from(number));
        }
        if !wants("string") {
            return Err(not_a(field, property, text));
        }
    }
    if wants("number") {
        if let Some(number) = text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
        {
            return Ok(Value::Number(number));
        }
        if !wants("string") {
            return Err(not_a(field, property, text));
        }
    }
    if wants("boolean") {
        match text {
            "true" => return Ok(Value::Bool(true)),
            "false" => return Ok(Value::Bool(false)),
            _ if !wants("string") => {
                return Err(not_a(field, property, text));
            }
            _ => {}
        }
    }
    if wants("array") {
        // `style: form, explode: false`: `a,b` is two items and an empty value none; `a,` or `,`
        // hold an empty item, which the item's schema judges (an enum refuses it).
        if text.is_empty() {
            return Ok(Value::Array(Vec::new()));
        }
        return Ok(Value::Array(
            text.split(',')
                .map(|part| Value::String(part.to_owned()))
                .collect(),
        ));
    }
    Ok(Value::String(text.to_owned()))
}

/// The JSON types a property schema allows (`type` as a string or a list, or via `anyOf`/`oneOf`).
fn schema_types(property: &Value) -> Vec<String> {
    let mut types = Vec::new();
    match property.get("type") {
        Some(Value::String(kind)) => types.push(kind.clone()),
        Some(Value::Array(kinds)) => {
            types.extend(kinds.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = property.get(key) {
            for option in options {
                types.extend(schema_types(option));
            }
        }
    }
    if types.is_empty() && property.get("enum").is_some() {
        types.push("string".to_owned());
    }
    types
}

/// The JSON 404 for any path no route matches.
pub async fn not_found(request: Request) -> Response {
    let request_id = request_id(&request);
    ApiError::new(
        ErrorCode::NOT_FOUND,
        format!(
            "No such path: {} {}. The API reference is at /api/v1/docs.",
            request.method(),
            request.uri().path()
        ),
    )
    .log(&request_id)
    .into_response()
}
