//! The webhooks settings page over HTTP: an owner creates an endpoint, sees its secret once (on
//! the answer, never stored for a later page), sends it a test that an independent verifier
//! accepts, watches deliveries arrive, rotates, disables, enables and deletes it; each effect
//! checked on the API. Bad forms, forged forms, forms of another workspace, a member's forms and
//! another workspace's ids are refused with their sentence and change nothing.

use outreach_runtime::prelude::scope_now;
use outreach_runtime::{CredentialKind, Role, Scope};
use serde_json::{Value, json};

use crate::helpers::{OWNER_EMAIL, TestApp, spawn_app};
use crate::web::{Browser, signed_in};
use crate::webhooks::{Receiver, eventually, make_endpoint, three_events, verify};

const PAGE: &str = "/settings/webhooks";

async fn endpoints(app: &TestApp) -> Vec<Value> {
    app.get("/webhook-endpoints", &app.key).await.expect(200)["items"]
        .as_array()
        .expect("items")
        .clone()
}

/// Posts a form of the page (with its CSRF token and workspace) to `action`.
async fn post_form(
    app: &TestApp,
    browser: &Browser,
    action: &str,
    fields: &[(&str, &str)],
) -> crate::web::Page {
    let mut all = vec![("workspace_id", app.workspace_id.as_str())];
    all.extend_from_slice(fields);
    browser.submit(PAGE, action, &all).await
}

/// Posts one endpoint's button form (`test`, `rotate`, `enabled`, `delete`) from the page.
async fn press(
    app: &TestApp,
    browser: &Browser,
    endpoint: &str,
    button: &str,
    fields: &[(&str, &str)],
) -> crate::web::Page {
    let pressed = post_form(app, browser, &format!("{PAGE}/{endpoint}/{button}"), fields).await;
    if pressed.status.as_u16() == 303 {
        assert_eq!(pressed.location(), PAGE);
    }
    pressed
}

/// The event types the API documents for an endpoint.
async fn documented_event_types(app: &TestApp) -> usize {
    let document: Value = app
        .client
        .get(format!("{}/api/v1/openapi.json", app.base_url))
        .send()
        .await
        .expect("the OpenAPI document")
        .json()
        .await
        .expect("JSON");
    let schema = &document["paths"]["/webhook-endpoints"]["post"]["requestBody"]["content"]["application/json"]
        ["schema"];
    let schema = match schema["$ref"].as_str() {
        Some(reference) => {
            let name = reference.rsplit('/').next().expect("a name");
            document["components"]["schemas"][name].clone()
        }
        None => schema.clone(),
    };
    schema["properties"]["event_types"]["items"]["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("an enum of event types in {schema}"))
        .len()
}

async fn stored_flash(app: &TestApp) -> Vec<Option<String>> {
    sqlx::query_scalar("select flash from web_sessions")
        .fetch_all(app.db.pool())
        .await
        .expect("the sessions")
}

#[tokio::test]
async fn an_owner_creates_tests_rotates_disables_and_deletes_an_endpoint() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    let browser = signed_in(&app, OWNER_EMAIL).await;

    let empty = browser.get(PAGE).await;
    empty.expect(200);
    assert!(empty.body.contains("id=\"no-endpoints\""), "{}", empty.body);
    // Every type the API takes is offered, from the action's own schema.
    assert_eq!(
        empty.body.matches("name=\"event_types\"").count(),
        documented_event_types(&app).await
    );
    assert!(empty.body.contains("value=\"webhook_endpoint.disabled\""));

    let shown = post_form(
        &app,
        &browser,
        PAGE,
        &[
            ("url", &receiver.url),
            ("description", "CRM sync"),
            ("event_types", "sequence.activated"),
            ("event_types", "sequence.paused"),
        ],
    )
    .await;
    shown.expect(200);
    let secret = shown
        .text_of("new-secret-value")
        .unwrap_or_else(|| panic!("the secret is shown once:\n{}", shown.body));
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert!(
        stored_flash(&app).await.iter().all(Option::is_none),
        "the secret is kept for no later page"
    );
    let again = browser.get(PAGE).await;
    assert_eq!(again.text_of("new-secret-value"), None);
    assert!(
        !again.body.contains(&secret),
        "a reload shows the secret no more"
    );

    let listed = endpoints(&app).await;
    assert_eq!(listed.len(), 1);
    let endpoint = listed[0]["id"].as_str().expect("an id").to_owned();
    assert_eq!(listed[0]["url"], json!(receiver.url));
    assert_eq!(listed[0]["description"], "CRM sync");
    assert_eq!(
        listed[0]["event_types"],
        json!(["sequence.activated", "sequence.paused"])
    );
    assert!(again.body.contains("sequence.activated, sequence.paused"));

    // A test, signed with the secret the page showed.
    press(&app, &browser, &endpoint, "test", &[])
        .await
        .expect(303);
    let received = receiver.wait_for(1).await;
    verify(&secret, &received[0]);
    assert_eq!(received[0].json()["type"], "webhook.test");
    // Another settings page leaves the outcome for this one.
    browser.get("/settings/api").await.expect(200);
    let outcome = browser.get(PAGE).await;
    let line = outcome.text_of("test-outcome").expect("the test's outcome");
    assert!(line.contains("delivered, HTTP 200"), "{line}");

    // Events of its types arrive and are listed with their deliveries.
    three_events(&app).await;
    let events: Vec<String> = eventually("the sequence's events delivered", || async {
        let received = receiver.received();
        (received.len() >= 3).then(|| {
            received[1..]
                .iter()
                .map(|message| {
                    verify(&secret, message);
                    message.header("webhook-id").to_owned()
                })
                .collect()
        })
    })
    .await;
    let listed = eventually("the deliveries recorded as succeeded", || async {
        let page = browser.get(PAGE).await;
        (page.body.matches("badge-succeeded").count() >= events.len()).then_some(page)
    })
    .await;
    for event in &events {
        assert!(
            listed.body.contains(&format!("data-event-id=\"{event}\"")),
            "{event} is listed:\n{}",
            listed.body
        );
    }

    // Rotation: a new secret shown once; the old one signs beside it.
    let rotated = press(&app, &browser, &endpoint, "rotate", &[]).await;
    rotated.expect(200);
    let new_secret = rotated.text_of("new-secret-value").expect("the new secret");
    assert_ne!(new_secret, secret);
    assert_eq!(browser.get(PAGE).await.text_of("new-secret-value"), None);
    let before = receiver.received().len();
    press(&app, &browser, &endpoint, "test", &[])
        .await
        .expect(303);
    let received = receiver.wait_for(before + 1).await;
    let last = received.last().expect("the second test");
    verify(&new_secret, last);
    verify(&secret, last);
    assert_eq!(last.header("webhook-signature").split(' ').count(), 2);

    // Disabled: the API says so and the page offers Enable; a test still goes out (to check a
    // receiver before enabling it), as the action documents.
    press(
        &app,
        &browser,
        &endpoint,
        "enabled",
        &[("enabled", "false")],
    )
    .await
    .expect(303);
    assert_eq!(endpoints(&app).await[0]["enabled"], false);
    let disabled = browser.get(PAGE).await;
    assert!(disabled.body.contains("badge-revoked\">disabled"));
    assert!(disabled.body.contains("name=\"enabled\" value=\"true\""));
    assert!(
        disabled
            .body
            .contains("Disabled from this page or the API."),
        "{}",
        disabled.body
    );
    let before = receiver.received().len();
    press(&app, &browser, &endpoint, "test", &[])
        .await
        .expect(303);
    receiver.wait_for(before + 1).await;
    press(&app, &browser, &endpoint, "enabled", &[("enabled", "true")])
        .await
        .expect(303);
    assert_eq!(endpoints(&app).await[0]["enabled"], true);

    // Deleted after a confirmation.
    let confirm = browser.get(&format!("{PAGE}/{endpoint}/delete")).await;
    confirm.expect(200);
    assert!(confirm.body.contains(&receiver.url));
    assert!(endpoints(&app).await.len() == 1, "asking deletes nothing");
    press(&app, &browser, &endpoint, "delete", &[])
        .await
        .expect(303);
    assert!(endpoints(&app).await.is_empty());
}

#[tokio::test]
async fn bad_forged_and_foreign_webhook_forms_change_nothing() {
    let app = spawn_app().await;
    let browser = signed_in(&app, OWNER_EMAIL).await;

    let bad_url = post_form(
        &app,
        &browser,
        PAGE,
        &[
            ("url", "ftp://hooks.example.com/x"),
            ("description", "kept"),
        ],
    )
    .await;
    bad_url.expect(400);
    let error = bad_url.text_of("webhook-error").expect("the refusal");
    assert!(error.starts_with("No endpoint was created"), "{error}");
    assert!(
        bad_url.body.contains("value=\"ftp://hooks.example.com/x\""),
        "the form is kept"
    );
    assert!(bad_url.body.contains("value=\"kept\""));

    let bad_type = post_form(
        &app,
        &browser,
        PAGE,
        &[
            ("url", "https://hooks.example.com/x"),
            ("event_types", "nope.never"),
        ],
    )
    .await;
    bad_type.expect(400);
    assert!(bad_type.body.contains("nope.never"), "{}", bad_type.body);

    let private = post_form(&app, &browser, PAGE, &[("url", "https://10.0.0.7/hooks")]).await;
    private.expect(400);
    assert!(private.body.contains("private"), "{}", private.body);

    let forged = browser
        .post(
            PAGE,
            &[
                ("csrf_token", "forged"),
                ("workspace_id", &app.workspace_id),
                ("url", "https://hooks.example.com/x"),
            ],
        )
        .await;
    forged.expect(403);

    // A form shown for another workspace (switched since in another tab) changes nothing here.
    let stale = browser
        .submit(
            PAGE,
            PAGE,
            &[
                ("workspace_id", "wsp_elsewhere"),
                ("url", "https://hooks.example.com/x"),
            ],
        )
        .await;
    stale.expect(409);
    assert!(stale.body.contains("another workspace"), "{}", stale.body);
    assert!(
        endpoints(&app).await.is_empty(),
        "no refused form made an endpoint"
    );

    // Each button of an existing endpoint refuses a forged token and a stale workspace too.
    let (endpoint, _) = make_endpoint(&app, "https://hooks.example.com/mine", &[]).await;
    for (button, fields) in [
        ("test", vec![]),
        ("rotate", vec![]),
        ("enabled", vec![("enabled", "false")]),
        ("delete", vec![]),
    ] {
        let mut forged_fields = vec![
            ("csrf_token", "forged"),
            ("workspace_id", app.workspace_id.as_str()),
        ];
        forged_fields.extend_from_slice(&fields);
        let path = format!("{PAGE}/{endpoint}/{button}");
        browser.post(&path, &forged_fields).await.expect(403);
        let mut stale_fields = vec![("workspace_id", "wsp_elsewhere")];
        stale_fields.extend_from_slice(&fields);
        browser.submit(PAGE, &path, &stale_fields).await.expect(409);
    }
    let unchanged = endpoints(&app).await;
    assert_eq!(unchanged.len(), 1);
    assert_eq!(unchanged[0]["enabled"], true);
    let bad_switch = press(
        &app,
        &browser,
        &endpoint,
        "enabled",
        &[("enabled", "maybe")],
    )
    .await;
    bad_switch.expect(400);

    // Another workspace's endpoint is not found from here, and stays as it was.
    let (_, other_key) = app.other_workspace("Elsewhere", "else@other.test").await;
    let made = app
        .post_json(
            "/webhook-endpoints",
            &other_key,
            json!({"url": "https://hooks.example.com/other"}),
        )
        .await
        .expect(201)
        .clone();
    let foreign = made["id"].as_str().expect("an id");
    for button in ["rotate", "test", "delete"] {
        press(&app, &browser, foreign, button, &[])
            .await
            .expect(404);
    }
    press(&app, &browser, foreign, "enabled", &[("enabled", "false")])
        .await
        .expect(404);
    browser
        .get(&format!("{PAGE}/{foreign}/delete"))
        .await
        .expect(404);
    let still = app
        .get(&format!("/webhook-endpoints/{foreign}"), &other_key)
        .await
        .expect(200)
        .clone();
    assert_eq!(still["enabled"], true);
}

#[tokio::test]
async fn a_member_sees_the_endpoints_but_cannot_change_them() {
    let app = spawn_app().await;
    let (endpoint, _) = make_endpoint(&app, "https://hooks.example.com/x", &[]).await;
    app.add_member("member@acme.test", Role::Member).await;
    let member = signed_in(&app, "member@acme.test").await;

    let page = member.get(PAGE).await;
    page.expect(200);
    assert!(page.body.contains("https://hooks.example.com/x"));
    assert!(page.body.contains("every event type"));
    assert!(
        !page.body.contains("id=\"create-webhook\""),
        "no create form"
    );
    assert!(!page.body.contains("/rotate\""), "no buttons");

    let create = post_form(
        &app,
        &member,
        PAGE,
        &[("url", "https://hooks.example.com/y")],
    )
    .await;
    create.expect(403);
    assert!(create.body.contains("owner or admin"), "{}", create.body);
    for (button, fields) in [
        ("test", vec![]),
        ("rotate", vec![]),
        ("enabled", vec![("enabled", "false")]),
        ("delete", vec![]),
    ] {
        press(&app, &member, &endpoint, button, &fields)
            .await
            .expect(403);
    }
    member
        .get(&format!("{PAGE}/{endpoint}/delete"))
        .await
        .expect(403);
    let listed = endpoints(&app).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["enabled"], true);
}

/// The work a signed-in browser starts acts with the person's role in the workspace it started
/// in, while the session lasts: not in the workspace the session looks at later, not after a
/// removal, not after signing out.
#[tokio::test]
async fn a_web_session_acts_with_its_role_where_the_work_belongs_until_it_ends() {
    let app = spawn_app().await;
    let browser = signed_in(&app, OWNER_EMAIL).await;
    let session: String = sqlx::query_scalar("select id from web_sessions")
        .fetch_one(app.db.pool())
        .await
        .expect("the session");
    let now = app.clock.now_ms();
    let here = scope_now(
        &app.db,
        now,
        CredentialKind::WebSession,
        &session,
        &app.workspace_id,
    )
    .await
    .expect("read");
    assert!(here.is_some_and(|scope| scope >= Scope::Write), "{here:?}");
    let (elsewhere, _) = app.other_workspace("Elsewhere", "else@other.test").await;
    let there = scope_now(
        &app.db,
        now,
        CredentialKind::WebSession,
        &session,
        &elsewhere,
    )
    .await
    .expect("read");
    assert_eq!(there, None, "not a member there");

    app.add_member("admin@acme.test", Role::Admin).await;
    let admin = signed_in(&app, "admin@acme.test").await;
    let admin_session: String = sqlx::query_scalar(
        "select s.id from web_sessions s join people p on p.id = s.person_id where p.email = $1",
    )
    .bind("admin@acme.test")
    .fetch_one(app.db.pool())
    .await
    .expect("the admin's session");
    let scope = |id: String| {
        let app = &app;
        async move {
            scope_now(
                &app.db,
                app.clock.now_ms(),
                CredentialKind::WebSession,
                &id,
                &app.workspace_id,
            )
            .await
            .expect("read")
        }
    };
    assert!(scope(admin_session.clone()).await.is_some());
    outreach_runtime::admin::remove_member(&app.db, &app.workspace_id, "admin@acme.test")
        .await
        .expect("removed");
    assert_eq!(scope(admin_session).await, None, "removed");
    drop(admin);

    let signed_out = browser.submit(PAGE, "/logout", &[]).await;
    signed_out.expect(303);
    assert_eq!(scope(session).await, None, "signed out");
}
