//! The webhooks settings page over HTTP: an owner creates an endpoint, sees its secret once,
//! sends it a test that an independent verifier accepts, watches deliveries arrive, rotates,
//! disables, enables and deletes it; each effect checked on the API. Bad forms, forged forms, a
//! member's forms and another workspace's ids are refused with their sentence and change nothing.

use outreach_runtime::Role;
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

/// Posts one endpoint's button form (`test`, `rotate`, `enabled`, `delete`) from the page.
async fn press(browser: &Browser, endpoint: &str, button: &str, fields: &[(&str, &str)]) -> u16 {
    let pressed = browser
        .submit(PAGE, &format!("{PAGE}/{endpoint}/{button}"), fields)
        .await;
    if pressed.status.as_u16() == 303 {
        assert_eq!(pressed.location(), PAGE);
    }
    pressed.status.as_u16()
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
    assert_eq!(empty.body.matches("name=\"event_types\"").count(), 32);
    assert!(empty.body.contains("value=\"webhook_endpoint.disabled\""));

    let created = browser
        .submit(
            PAGE,
            PAGE,
            &[
                ("url", &receiver.url),
                ("description", "CRM sync"),
                ("event_types", "sequence.activated"),
                ("event_types", "sequence.paused"),
            ],
        )
        .await;
    created.expect(303);
    assert_eq!(created.location(), PAGE);
    let shown = browser.get(PAGE).await;
    shown.expect(200);
    let secret = shown
        .text_of("new-secret-value")
        .unwrap_or_else(|| panic!("the secret is shown once:\n{}", shown.body));
    assert!(secret.starts_with("whsec_"), "{secret}");
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
    assert_eq!(press(&browser, &endpoint, "test", &[]).await, 303);
    let received = receiver.wait_for(1).await;
    verify(&secret, &received[0]);
    assert_eq!(received[0].json()["type"], "webhook.test");
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
    assert_eq!(press(&browser, &endpoint, "rotate", &[]).await, 303);
    let rotated = browser.get(PAGE).await;
    let new_secret = rotated.text_of("new-secret-value").expect("the new secret");
    assert_ne!(new_secret, secret);
    let before = receiver.received().len();
    assert_eq!(press(&browser, &endpoint, "test", &[]).await, 303);
    let received = receiver.wait_for(before + 1).await;
    let last = received.last().expect("the second test");
    verify(&new_secret, last);
    verify(&secret, last);
    assert_eq!(last.header("webhook-signature").split(' ').count(), 2);

    // Disabled: the API says so and the page offers Enable; a test still goes out (to check a
    // receiver before enabling it), as the action documents.
    assert_eq!(
        press(&browser, &endpoint, "enabled", &[("enabled", "false")]).await,
        303
    );
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
    assert_eq!(press(&browser, &endpoint, "test", &[]).await, 303);
    receiver.wait_for(before + 1).await;
    assert_eq!(
        press(&browser, &endpoint, "enabled", &[("enabled", "true")]).await,
        303
    );
    assert_eq!(endpoints(&app).await[0]["enabled"], true);

    // Deleted after a confirmation.
    let confirm = browser.get(&format!("{PAGE}/{endpoint}/delete")).await;
    confirm.expect(200);
    assert!(confirm.body.contains(&receiver.url));
    assert!(endpoints(&app).await.len() == 1, "asking deletes nothing");
    assert_eq!(press(&browser, &endpoint, "delete", &[]).await, 303);
    assert!(endpoints(&app).await.is_empty());
}

#[tokio::test]
async fn bad_forged_and_foreign_webhook_forms_change_nothing() {
    let app = spawn_app().await;
    let browser = signed_in(&app, OWNER_EMAIL).await;

    let bad_url = browser
        .submit(
            PAGE,
            PAGE,
            &[
                ("url", "ftp://hooks.example.com/x"),
                ("description", "kept"),
            ],
        )
        .await;
    bad_url.expect(400);
    assert!(
        bad_url.body.contains("No endpoint was created"),
        "{}",
        bad_url.body
    );
    assert!(
        bad_url.body.contains("value=\"ftp://hooks.example.com/x\""),
        "the form is kept"
    );
    assert!(bad_url.body.contains("value=\"kept\""));

    let bad_type = browser
        .submit(
            PAGE,
            PAGE,
            &[
                ("url", "https://hooks.example.com/x"),
                ("event_types", "nope.never"),
            ],
        )
        .await;
    bad_type.expect(400);
    assert!(bad_type.body.contains("nope.never"), "{}", bad_type.body);

    let private = browser
        .submit(PAGE, PAGE, &[("url", "https://10.0.0.7/hooks")])
        .await;
    assert!(private.status.is_client_error(), "{}", private.body);

    let forged = browser
        .post(
            PAGE,
            &[
                ("csrf_token", "forged"),
                ("url", "https://hooks.example.com/x"),
            ],
        )
        .await;
    forged.expect(403);
    assert!(
        endpoints(&app).await.is_empty(),
        "no refused form made an endpoint"
    );

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
        assert_eq!(press(&browser, foreign, button, &[]).await, 404, "{button}");
    }
    assert_eq!(
        press(&browser, foreign, "enabled", &[("enabled", "false")]).await,
        404
    );
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

    let create = member
        .submit(PAGE, PAGE, &[("url", "https://hooks.example.com/y")])
        .await;
    create.expect(403);
    assert!(create.body.contains("owner or admin"), "{}", create.body);
    assert_eq!(press(&member, &endpoint, "rotate", &[]).await, 403);
    assert_eq!(
        press(&member, &endpoint, "enabled", &[("enabled", "false")]).await,
        403
    );
    assert_eq!(press(&member, &endpoint, "delete", &[]).await, 403);
    let listed = endpoints(&app).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["enabled"], true);
}
