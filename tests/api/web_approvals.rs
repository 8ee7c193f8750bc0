//! The approval queue as a page (`/approvals`): a signed-in owner sees each pending item with the
//! person, why they fit and every drafted text; edits a text, approves one item and rejects
//! another, each effect checked on the API. Approving before the sending terms are accepted, a
//! form of another workspace and a form without its CSRF token are refused with their sentence
//! and change nothing.

use outreach_runtime::admin;
use serde_json::{Value, json};

use crate::approvals::queued;
use crate::helpers::{OWNER_EMAIL, TestApp, spawn_app};
use crate::web::{Browser, signed_in};

const PAGE: &str = "/approvals";

async fn items(app: &TestApp, status: &str) -> Vec<Value> {
    app.get(&format!("/approvals?status={status}"), &app.key)
        .await
        .expect(200)["items"]
        .as_array()
        .expect("items")
        .clone()
}

async fn press(
    app: &TestApp,
    browser: &Browser,
    item: &str,
    button: &str,
    fields: &[(&str, &str)],
) -> crate::web::Page {
    let mut all = vec![("workspace_id", app.workspace_id.as_str())];
    all.extend_from_slice(fields);
    browser
        .submit(PAGE, &format!("{PAGE}/{item}/{button}"), &all)
        .await
}

#[tokio::test]
async fn an_owner_edits_approves_and_rejects_from_the_page() {
    let app = spawn_app().await;
    let (_, ids) = queued(&app, 2).await;
    let browser = signed_in(&app, OWNER_EMAIL).await;

    let page = browser.get(PAGE).await;
    page.expect(200);
    for id in &ids {
        assert!(
            page.body.contains(&format!("data-approval-id=\"{id}\"")),
            "{}",
            page.body
        );
    }
    assert!(page.body.contains("Person0") && page.body.contains("Person1"));
    assert!(
        page.body.contains("Outreach in Q3 founders"),
        "{}",
        page.body
    );
    let pending = items(&app, "pending").await;
    let first_text = pending[0]["texts"][0]["text"].as_str().expect("a text");
    assert!(
        page.body.contains(first_text),
        "every drafted text is shown"
    );

    // Before the sending terms are accepted, approving says why and changes nothing.
    let refused = press(&app, &browser, &ids[0], "approve", &[]).await;
    refused.expect(403);
    assert!(refused.body.contains("sending terms"), "{}", refused.body);
    assert_eq!(items(&app, "pending").await.len(), 2);

    admin::accept_terms(&app.db, &app.clock, &app.workspace_id, OWNER_EMAIL)
        .await
        .expect("accept the terms");

    let item = &pending[0];
    let id = item["id"].as_str().expect("an id");
    let step = item["texts"][0]["step_index"].to_string();
    let saved = press(
        &app,
        &browser,
        id,
        "edit",
        &[
            ("step_index", &step),
            ("variant", ""),
            ("text", "Hello from the page."),
        ],
    )
    .await;
    saved.expect(303);
    assert_eq!(saved.location(), PAGE);
    let edited = items(&app, "pending").await;
    let edited = edited
        .iter()
        .find(|other| other["id"] == json!(id))
        .expect("still pending");
    assert_eq!(edited["texts"][0]["text"], "Hello from the page.");
    let shown = browser.get(PAGE).await;
    assert_eq!(
        shown.text_of("decision-outcome").as_deref(),
        Some("Saved: the item waits with the new text.")
    );

    let approved = press(&app, &browser, id, "approve", &[]).await;
    approved.expect(303);
    let other = ids
        .iter()
        .find(|other| *other != id)
        .expect("the other item");
    press(&app, &browser, other, "reject", &[])
        .await
        .expect(303);
    assert_eq!(
        items(&app, "approved")
            .await
            .iter()
            .map(|item| item["id"].clone())
            .collect::<Vec<_>>(),
        [json!(id)]
    );
    assert_eq!(
        items(&app, "rejected")
            .await
            .iter()
            .map(|item| item["id"].clone())
            .collect::<Vec<_>>(),
        [json!(other)]
    );
    let approved_text = items(&app, "approved").await[0]["texts"][0]["text"].clone();
    assert_eq!(
        approved_text, "Hello from the page.",
        "what was approved is the edited text"
    );
    let empty = browser.get(PAGE).await;
    assert!(empty.body.contains("id=\"queue-empty\""), "{}", empty.body);
    assert_eq!(
        empty.text_of("decision-outcome").as_deref(),
        Some("Rejected: nothing will be sent.")
    );
}

#[tokio::test]
async fn a_form_of_another_workspace_or_without_its_token_changes_nothing() {
    let app = spawn_app().await;
    admin::accept_terms(&app.db, &app.clock, &app.workspace_id, OWNER_EMAIL)
        .await
        .expect("accept the terms");
    let (_, ids) = queued(&app, 1).await;
    let browser = signed_in(&app, OWNER_EMAIL).await;

    let elsewhere = browser
        .submit(
            PAGE,
            &format!("{PAGE}/{}/approve", ids[0]),
            &[("workspace_id", "wsp_other")],
        )
        .await;
    elsewhere.expect(409);
    assert!(
        elsewhere.body.contains("another workspace"),
        "{}",
        elsewhere.body
    );

    let forged = browser
        .post(
            &format!("{PAGE}/{}/approve", ids[0]),
            &[("workspace_id", app.workspace_id.as_str())],
        )
        .await;
    assert_eq!(forged.status.as_u16(), 403, "{}", forged.body);

    let unknown = press(&app, &browser, "apr_doesnotexist0000000", "approve", &[]).await;
    unknown.expect(404);
    assert_eq!(items(&app, "pending").await.len(), 1, "nothing was decided");
}
