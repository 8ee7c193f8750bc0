//! The OpenAPI document as client generators read it: named components, declared headers, an
//! example for every operation, the spec's defaults and only formats every tool knows.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::helpers::{Auth, Body, TestApp, spawn_app};

async fn document(app: &TestApp) -> Value {
    app.send(
        reqwest::Method::GET,
        "/api/v1/openapi.json",
        Auth::None,
        Body::Empty,
    )
    .await
    .expect(200)
    .clone()
}

/// Every operation as `(method path, operation)`.
fn operations(document: &Value) -> Vec<(String, &Value)> {
    let mut all = Vec::new();
    for (path, methods) in document["paths"].as_object().expect("paths") {
        for (method, operation) in methods.as_object().expect("methods") {
            all.push((format!("{} {path}", method.to_uppercase()), operation));
        }
    }
    all
}

fn success(operation: &Value) -> &Value {
    operation["responses"]
        .as_object()
        .expect("responses")
        .iter()
        .find(|(status, _)| status.starts_with('2'))
        .map(|(_, response)| response)
        .expect("a success response")
}

#[tokio::test]
async fn every_operation_has_a_request_and_a_response_example_that_decode() {
    let app = spawn_app().await;
    let document = document(&app).await;
    let examples = outreach_runtime::openapi::examples().expect("no action has two examples");
    for (name, example) in &examples {
        let action = app
            .registry
            .get(name)
            .unwrap_or_else(|| panic!("an example names `{name}`, which is no action"));
        if let Err(error) = (action.def.decode)(&example.request, &action.input_schema) {
            panic!("the example request of `{name}` does not decode: {error:?}");
        }
        // The response example has the fields the answer always has (an OpenAPI linter refuses
        // the document otherwise): those of the output, or of one of its alternatives.
        let output = Value::Object(action.output_schema.as_ref().clone());
        let required = |schema: &Value| -> Vec<String> {
            schema["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        };
        let alternatives: Vec<Vec<String>> = match output["anyOf"].as_array() {
            Some(options) => options.iter().map(required).collect(),
            None => vec![required(&output)],
        };
        let has = |field: &String| example.response.get(field).is_some();
        assert!(
            alternatives.iter().any(|fields| fields.iter().all(has)),
            "the example response of `{name}` lacks a required field of {alternatives:?}"
        );
    }
    for (operation_name, operation) in operations(&document) {
        let id = operation["operationId"].as_str().expect("operationId");
        assert!(examples.contains_key(id), "{operation_name}: no example");
        assert!(
            success(operation)["content"]["application/json"]
                .get("example")
                .is_some(),
            "{operation_name}: no response example"
        );
        if let Some(body) = operation.get("requestBody") {
            assert!(
                body["content"]["application/json"].get("example").is_some(),
                "{operation_name}: no request body example"
            );
        }
        for parameter in operation["parameters"].as_array().into_iter().flatten() {
            if parameter["in"] == json!("path") {
                assert!(
                    parameter.get("example").is_some(),
                    "{operation_name}: path parameter without an example"
                );
            }
        }
    }
}

#[tokio::test]
async fn idempotent_operations_declare_the_key_header_and_the_replay_header() {
    let app = spawn_app().await;
    let document = document(&app).await;
    let key = &document["components"]["parameters"]["IdempotencyKey"];
    assert_eq!(key["in"], json!("header"));
    assert_eq!(key["name"], json!("Idempotency-Key"));
    assert_eq!(key["required"], json!(false));
    assert_eq!(key["schema"]["maxLength"], json!(255));
    assert!(key["description"].as_str().is_some_and(|d| !d.is_empty()));
    let mut idempotent = 0;
    for (name, operation) in operations(&document) {
        let headers = &success(operation)["headers"];
        assert_eq!(
            headers["X-Request-Id"]["$ref"],
            json!("#/components/headers/X-Request-Id"),
            "{name}"
        );
        let takes_key = operation["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|parameter| parameter["$ref"] == json!("#/components/parameters/IdempotencyKey"));
        let is_idempotent = operation["x-idempotent"] == json!(true);
        assert_eq!(takes_key, is_idempotent, "{name}: Idempotency-Key");
        assert_eq!(
            headers.get("Idempotent-Replayed").is_some(),
            is_idempotent,
            "{name}: Idempotent-Replayed"
        );
        idempotent += usize::from(is_idempotent);
    }
    assert!(idempotent >= 3, "the idempotent operations are declared");
    for (status, response) in document["components"]["responses"]
        .as_object()
        .expect("responses")
    {
        assert!(
            response["headers"].get("X-Request-Id").is_some(),
            "{status}"
        );
        assert_eq!(
            response["headers"].get("Retry-After").is_some(),
            status == "409" || status == "429",
            "{status}: Retry-After"
        );
    }
}

#[tokio::test]
async fn resources_are_named_components_shared_by_their_operations() {
    let app = spawn_app().await;
    let document = document(&app).await;
    let schemas = document["components"]["schemas"]
        .as_object()
        .expect("schemas");
    for name in [
        "Prospect",
        "List",
        "Targeting",
        "Import",
        "ScoringRun",
        "ProspectPage",
        "Error",
        "Estimate",
    ] {
        assert!(schemas.contains_key(name), "no component `{name}`");
    }
    for name in schemas.keys() {
        // schemars numbers a second type of the same name (`TierCounts2`): rename one instead.
        assert!(
            !name.ends_with(|c: char| c.is_ascii_digit()),
            "two types share the schema name of `{name}`; give one a `#[schemars(rename = ...)]`"
        );
    }
    for (name, operation) in operations(&document) {
        let schema = &success(operation)["content"]["application/json"]["schema"];
        let named = schema.get("$ref").is_some()
            || schema["oneOf"]
                .as_array()
                .is_some_and(|choices| choices.iter().all(|choice| choice.get("$ref").is_some()));
        assert!(named, "{name}: the success schema is not a named component");
    }
    let prospect = json!("#/components/schemas/Prospect");
    for path in ["/prospects/{id}"] {
        for method in ["get", "patch"] {
            assert_eq!(
                success(&document["paths"][path][method])["content"]["application/json"]["schema"]
                    ["$ref"],
                prospect
            );
        }
    }
    assert_eq!(
        schemas["ProspectPage"]["properties"]["items"]["items"]["$ref"],
        prospect
    );
}

#[tokio::test]
async fn the_document_states_defaults_required_bodies_formats_tags_and_license() {
    let app = spawn_app().await;
    let document = document(&app).await;
    assert_eq!(document["info"]["license"]["identifier"], json!("MIT"));
    for tag in document["tags"].as_array().expect("tags") {
        assert!(
            tag["description"].as_str().is_some_and(|d| !d.is_empty()),
            "tag {tag} has no description"
        );
    }
    let list = &document["paths"]["/prospects"]["get"];
    for parameter in list["parameters"].as_array().expect("parameters") {
        match parameter["name"].as_str() {
            Some("limit") => assert_eq!(parameter["schema"]["default"], json!(25)),
            Some("offset") => assert_eq!(parameter["schema"]["default"], json!(0)),
            _ => {}
        }
    }
    for (name, operation) in operations(&document) {
        let Some(body) = operation.get("requestBody") else {
            continue;
        };
        let schema = &body["content"]["application/json"]["schema"];
        let requires = |schema: &Value| {
            schema["required"]
                .as_array()
                .is_some_and(|fields| !fields.is_empty())
        };
        // An empty body fails a schema that requires a field, has `minProperties`, whose every
        // `oneOf` branch requires one, or whose cross-field rule (`not`) refuses `{}`.
        let needs_fields = requires(schema)
            || schema["minProperties"]
                .as_u64()
                .is_some_and(|least| least > 0)
            || schema["oneOf"]
                .as_array()
                .is_some_and(|branches| branches.iter().all(requires))
            || schema.get("not").is_some();
        assert_eq!(body["required"], json!(needs_fields), "{name}");
    }
    assert_eq!(
        document["paths"]["/imports"]["post"]["requestBody"]["required"],
        json!(true),
        "an import needs `csv` or `rows`: an empty body is refused"
    );
    assert_eq!(
        document["paths"]["/prospects/{id}"]["patch"]["requestBody"]["required"],
        json!(false),
        "an update may change nothing"
    );
    let mut formats = BTreeSet::new();
    collect_formats(&document, &mut formats);
    // The formats of the OpenAPI Format Registry and JSON Schema that generators know.
    let known = [
        "int32",
        "int64",
        "float",
        "double",
        "date-time",
        "date",
        "email",
        "uri",
        "uuid",
    ];
    for format in &formats {
        assert!(
            known.contains(&format.as_str()),
            "non-standard format `{format}`"
        );
    }
}

fn collect_formats(value: &Value, formats: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                match (key.as_str(), child) {
                    // An example's own fields are data, not schema keywords.
                    ("example" | "examples", _) => {}
                    ("format", Value::String(format)) => {
                        formats.insert(format.clone());
                    }
                    _ => collect_formats(child, formats),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_formats(item, formats)),
        _ => {}
    }
}

#[tokio::test]
async fn history_kinds_and_spend_sources_are_enums_and_the_sources_are_the_actions_that_spend() {
    let app = spawn_app().await;
    let document = document(&app).await;
    let mut spending: Vec<&str> = app
        .registry
        .actions()
        .iter()
        .filter(|action| action.def.price.is_some())
        .map(|action| action.def.name)
        .collect();
    spending.sort_unstable();
    spending.push("other");
    assert_eq!(
        document["components"]["schemas"]["SourceSpend"]["properties"]["source"]["enum"],
        json!(spending)
    );
    let kinds = &document["components"]["schemas"]["EnrollmentEventKind"]["enum"];
    assert!(
        kinds
            .as_array()
            .is_some_and(|kinds| kinds.contains(&json!("approved"))
                && kinds.contains(&json!("connection_request"))),
        "{kinds}"
    );
}
