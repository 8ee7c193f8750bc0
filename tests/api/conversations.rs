//! Conversations through the API: one per (sender, prospect), messages both ways in order,
//! unread counts kept with the messages, an inbound message reported twice stored once, and the
//! usual refusals (another workspace's id, a read key marking read, bad filters).
//!
//! Messages are written here the way the network's ingestion and the scheduler write them
//! (`record_inbound`, `record_outbound`), since those are the only writers.

use outreach_actions::conversations::{
    Inbound, MessageStatus, Outbound, record_inbound, record_outbound,
};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};

const SENDER: &str = "snd_ConversationSender1";
const OTHER_SENDER: &str = "snd_ConversationSender2";

async fn prospect(app: &TestApp, name: &str) -> String {
    let made = app
        .post_json("/prospects", &app.key, json!({"first_name": name}))
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    made.body["id"].as_str().expect("an id").to_owned()
}

async fn inbound(
    app: &TestApp,
    sender: &str,
    prospect: &str,
    text: &str,
    provider_id: &str,
) -> bool {
    let mut conn = app.db.pool().acquire().await.expect("a connection");
    let now = app.clock.now_ms();
    let message = Inbound {
        workspace_id: &app.workspace_id,
        sender_id: sender,
        prospect_id: prospect,
        text,
        at_ms: now,
        provider_message_id: provider_id,
    };
    let mut conn = outreach_actions::person_lock::lock(&mut conn, &app.workspace_id, [prospect])
        .await
        .expect("the person's lock");
    record_inbound(&mut conn, &message, now)
        .await
        .expect("record inbound")
        .is_some()
}

async fn outbound(app: &TestApp, sender: &str, prospect: &str, text: &str) {
    let mut conn = app.db.pool().acquire().await.expect("a connection");
    let now = app.clock.now_ms();
    let message = Outbound {
        workspace_id: &app.workspace_id,
        sender_id: sender,
        prospect_id: prospect,
        sequence_id: Some("seq_ConversationSeq01"),
        enrollment_id: None,
        step_index: Some(1),
        created_by: None,
        text,
        status: MessageStatus::Sent,
        at_ms: now,
    };
    let mut conn = outreach_actions::person_lock::lock(&mut conn, &app.workspace_id, [prospect])
        .await
        .expect("the person's lock");
    record_outbound(&mut conn, &message, now)
        .await
        .expect("record outbound");
}

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| item["id"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test]
async fn one_conversation_per_pair_with_messages_in_order_and_unread_counts() {
    let app = spawn_app().await;
    let ada = prospect(&app, "Ada").await;
    let bob = prospect(&app, "Bob").await;

    outbound(&app, SENDER, &ada, "Hello Ada").await;
    app.clock.advance_ms(60_000);
    assert!(inbound(&app, SENDER, &ada, "Hi! Tell me more.", "p-1").await);
    // The network reports the same message again: stored once, counted once.
    assert!(!inbound(&app, SENDER, &ada, "Hi! Tell me more.", "p-1").await);
    app.clock.advance_ms(60_000);
    outbound(&app, OTHER_SENDER, &bob, "Hello Bob").await;

    let all = app.get("/conversations?sort=last_message", &app.key).await;
    assert_eq!(all.status, StatusCode::OK, "{}", all.body);
    assert_eq!(all.body["total"], 2);
    // The most recent message first: Bob's conversation, then Ada's.
    let conversations = ids(&all.body);
    let ada_conversation = all.body["items"][1].clone();
    assert_eq!(ada_conversation["prospect_id"], ada);
    assert_eq!(ada_conversation["sender_id"], SENDER);
    assert_eq!(ada_conversation["sequence_id"], "seq_ConversationSeq01");
    assert_eq!(ada_conversation["unread_count"], 1);
    assert_eq!(ada_conversation["replied"], true);
    assert_eq!(all.body["items"][0]["replied"], false);

    let unread = app.get("/conversations?unread=true", &app.key).await;
    assert_eq!(ids(&unread.body), vec![conversations[1].clone()]);
    let not_replied = app.get("/conversations?replied=false", &app.key).await;
    assert_eq!(ids(&not_replied.body), vec![conversations[0].clone()]);
    let by_sender = app
        .get(
            &format!("/conversations?sender_id={OTHER_SENDER}"),
            &app.key,
        )
        .await;
    assert_eq!(ids(&by_sender.body), vec![conversations[0].clone()]);

    let id = &conversations[1];
    let messages = app
        .get(&format!("/conversations/{id}/messages"), &app.key)
        .await;
    assert_eq!(messages.status, StatusCode::OK, "{}", messages.body);
    let texts: Vec<&str> = messages.body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|message| message["text"].as_str().expect("text"))
        .collect();
    assert_eq!(texts, ["Hello Ada", "Hi! Tell me more."]);
    assert_eq!(messages.body["items"][0]["direction"], "outbound");
    assert_eq!(messages.body["items"][0]["status"], "sent");
    assert_eq!(messages.body["items"][1]["direction"], "inbound");
    assert_eq!(messages.body["items"][1]["status"], "received");

    // A read key sees but cannot mark read.
    let read_key = app.read_key().await;
    let refused = app
        .post_json(&format!("/conversations/{id}/read"), &read_key, json!({}))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let unchanged = app.get(&format!("/conversations/{id}"), &read_key).await;
    assert_eq!(unchanged.body["unread_count"], 1);

    let marked = app
        .post_json(&format!("/conversations/{id}/read"), &app.key, json!({}))
        .await;
    assert_eq!(marked.status, StatusCode::OK, "{}", marked.body);
    assert_eq!(marked.body["marked"], 1);
    assert_eq!(marked.body["conversations"][0]["unread_count"], 0);
    assert!(marked.body["conversations"][0]["read_at"].is_string());
    let unread = app.get("/conversations?unread=true", &app.key).await;
    assert_eq!(unread.body["total"], 0);
}

#[tokio::test]
async fn another_workspaces_conversation_is_not_found_and_bad_filters_are_refused() {
    let app = spawn_app().await;
    let ada = prospect(&app, "Ada").await;
    assert!(inbound(&app, SENDER, &ada, "Hello", "p-2").await);
    let listed = app.get("/conversations", &app.key).await;
    let id = ids(&listed.body).remove(0);

    let (_, other_key) = app.other_workspace("Other", "other@else.test").await;
    for path in [
        format!("/conversations/{id}"),
        format!("/conversations/{id}/messages"),
    ] {
        let response = app.get(&path, &other_key).await;
        assert_eq!(
            response.status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            response.body
        );
        assert_eq!(response.body["code"], "not_found");
    }
    let marked = app
        .post_json(&format!("/conversations/{id}/read"), &other_key, json!({}))
        .await;
    assert_eq!(marked.status, StatusCode::NOT_FOUND, "{}", marked.body);
    let others = app.get("/conversations", &other_key).await;
    assert_eq!(others.body["total"], 0);

    let bad = app.get("/conversations?unread=maybe", &app.key).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    assert!(
        bad.body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("unread"),
        "{}",
        bad.body
    );
    // Nothing was marked read by the refused calls.
    let mine = app.get(&format!("/conversations/{id}"), &app.key).await;
    assert_eq!(mine.body["unread_count"], 1);
}

#[tokio::test]
async fn a_message_for_a_person_deleted_meanwhile_is_a_404_not_a_fault() {
    let app = spawn_app().await;
    let person = prospect(&app, "Gone").await;
    assert!(inbound(&app, SENDER, &person, "Hello", "pm_before").await);
    // The person's delete holds its row while a message for them arrives: the message waits for
    // the delete, then finds nobody (on SQLite, which writes one at a time, it comes after).
    let mut delete = app.db.begin_write().await.expect("a transaction");
    sqlx::query("delete from prospects where workspace_id = $1 and id = $2")
        .bind(&app.workspace_id)
        .bind(&person)
        .execute(&mut *delete)
        .await
        .expect("delete the person");
    let (mut held, start) = crate::helpers::HeldBack::new();
    let arriving = {
        let (db, clock, workspace_id, person) = (
            app.db.clone(),
            app.clock.clone(),
            app.workspace_id.clone(),
            person.clone(),
        );
        tokio::spawn(async move {
            start.await.ok();
            let mut tx = db.begin_write().await.expect("a transaction");
            let now = clock.now_ms();
            let message = Inbound {
                workspace_id: &workspace_id,
                sender_id: SENDER,
                prospect_id: &person,
                text: "Are you there?",
                at_ms: now,
                provider_message_id: "pm_after",
            };
            let mut tx =
                outreach_actions::person_lock::lock(&mut tx, &workspace_id, [person.as_str()])
                    .await?;
            record_inbound(&mut tx, &message, now).await.map(|_| ())
        })
    };
    held.until_it_waits(&app, &mut delete, "the message never waited for the delete")
        .await;
    delete.commit().await.expect("commit the delete");
    held.release();
    let error = arriving
        .await
        .expect("the message's task")
        .expect_err("nobody to belong to");
    assert_eq!(
        error.code,
        outreach_runtime::ErrorCode::NOT_FOUND,
        "{error}"
    );
}

#[tokio::test]
async fn one_inbox_across_senders_filters_searches_and_marks_several_read() {
    let app = spawn_app().await;
    let ada = prospect(&app, "Ada").await;
    let bob = prospect(&app, "Bob").await;
    let cy = prospect(&app, "Cy").await;
    app.patch_json(
        &format!("/prospects/{ada}"),
        &app.key,
        json!({"last_name": "Lovelace", "headline": "Poet of numbers"}),
    )
    .await
    .expect(200);
    outbound(&app, SENDER, &ada, "Hello Ada").await;
    app.clock.advance_ms(1_000);
    outbound(&app, OTHER_SENDER, &cy, "Hello Cy").await;
    app.clock.advance_ms(1_000);
    assert!(inbound(&app, OTHER_SENDER, &bob, "Pricing, please?", "inbox-1").await);
    app.clock.advance_ms(1_000);
    assert!(inbound(&app, SENDER, &ada, "Happy to TALK next week", "inbox-2").await);
    app.clock.advance_ms(1_000);
    // The newest message is Cy's outbound one, but the replies come first by default.
    outbound(&app, OTHER_SENDER, &cy, "Following up").await;
    let page = |query: &'static str| {
        let app = &app;
        async move {
            let page = app.get(&format!("/conversations?{query}"), &app.key).await;
            assert_eq!(page.status, StatusCode::OK, "{query}: {}", page.body);
            page.body.clone()
        }
    };
    let people = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|item| item["prospect_id"].as_str().expect("a prospect").to_owned())
            .collect()
    };
    let all = page("").await;
    assert_eq!(people(&all), [ada.clone(), bob.clone(), cy.clone()]);
    let first = &all["items"][0];
    assert_eq!(first["prospect"]["name"], "Ada Lovelace", "{first}");
    assert_eq!(first["prospect"]["headline"], "Poet of numbers");
    assert!(first["prospect"]["tier"].is_null());
    assert_eq!(first["last_message_preview"], "Happy to TALK next week");
    assert_eq!(first["has_draft"], false);
    assert!(first["classification"].is_null());
    assert_eq!(
        people(&page("sort=last_message").await),
        [cy.clone(), ada.clone(), bob.clone()]
    );
    // Several senders, one sender, a search of the last message, a reply-less filter.
    let both = format!("sender_id={SENDER},{OTHER_SENDER}");
    let both_page = app.get(&format!("/conversations?{both}"), &app.key).await;
    assert_eq!(both_page.body["total"], 3, "{}", both_page.body);
    let one = app
        .get(
            &format!("/conversations?sender_id={OTHER_SENDER}"),
            &app.key,
        )
        .await;
    assert_eq!(people(&one.body), [bob.clone(), cy.clone()]);
    assert_eq!(people(&page("q=talk").await), [ada.as_str()]);
    assert_eq!(people(&page("q=50%25").await), Vec::<String>::new());
    assert_eq!(people(&page("replied=false").await), [cy.as_str()]);
    assert_eq!(people(&page("has_draft=false&unread=true").await).len(), 2);
    assert_eq!(
        people(&page("classification=positive").await),
        Vec::<String>::new()
    );
    // The same filters over MCP, the senders as a list.
    let (is_error, listed) = app
        .mcp_call(
            &app.key,
            "service_list_conversations",
            json!({"sender_id": [SENDER, OTHER_SENDER], "q": "pricing"}),
        )
        .await;
    assert!(!is_error, "{listed}");
    assert_eq!(people(&listed), [bob.as_str()]);

    // Bad filters change nothing and say what is wrong.
    for (query, names) in [
        ("classification=happy", "classification"),
        ("sort=oldest", "sort"),
        ("q=%20%20", "`q`"),
    ] {
        let bad = app.get(&format!("/conversations?{query}"), &app.key).await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{query}: {}", bad.body);
        assert!(
            bad.body.to_string().contains(names),
            "{query}: {}",
            bad.body
        );
    }

    // Several marked read at once; an unknown id among them marks none.
    let ids_all: Vec<String> = ids(&all);
    let missing = "cnv_00000000000NoSuchOne";
    let refused = app
        .post_json(
            &format!("/conversations/{},{missing}/read", ids_all[0]),
            &app.key,
            json!({}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND, "{}", refused.body);
    assert_eq!(page("unread=true").await["total"], 2);
    let (is_error, marked) = app
        .mcp_call(
            &app.key,
            "service_mark_conversation_read",
            json!({"id": [ids_all[0], ids_all[1], ids_all[0]]}),
        )
        .await;
    assert!(!is_error, "{marked}");
    assert_eq!(marked["marked"], 2, "{marked}");
    assert_eq!(page("unread=true").await["total"], 0);
}
