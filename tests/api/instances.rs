//! Idempotency and credits across instances and time: two servers on one database share keys and
//! one balance; a key older than 24 hours is forgotten.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::helpers::{ApiResponse, TestApp, spawn_app};

/// Three new people; each import of it costs 3 credits.
const CSV: &str = "First Name,Last Name,Email\nAda,Lovelace,ada@engines.test\nAlan,Turing,alan@bletchley.test\nGrace,Hopper,grace@navy.test\n";

async fn post_import(
    app: &TestApp,
    base_url: &str,
    idempotency_key: &str,
    body: &Value,
) -> ApiResponse {
    let response = app
        .client
        .post(format!("{base_url}/api/v1/imports"))
        .bearer_auth(&app.key)
        .header("idempotency-key", idempotency_key)
        .json(body)
        .send()
        .await
        .expect("send the import");
    ApiResponse::read(response).await
}

async fn count(app: &TestApp, table: &str) -> i64 {
    use sqlx::Row;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "select count(*) as n from {table} where workspace_id = $1"
    )))
    .bind(&app.workspace_id)
    .fetch_one(app.db.pool())
    .await
    .expect("count")
    .try_get("n")
    .expect("n")
}

/// The balance, and the sum of the ledger that must explain it.
async fn balance_and_ledger(app: &TestApp) -> (i64, i64) {
    use sqlx::Row;
    let balance: i64 = sqlx::query("select credits_balance from workspaces where id = $1")
        .bind(&app.workspace_id)
        .fetch_one(app.db.pool())
        .await
        .expect("balance")
        .try_get("credits_balance")
        .expect("balance");
    let ledger: i64 = sqlx::query("select cast(coalesce(sum(amount), 0) as bigint) as total from credit_ledger where workspace_id = $1")
        .bind(&app.workspace_id)
        .fetch_one(app.db.pool())
        .await
        .expect("ledger")
        .try_get("total")
        .expect("total");
    (balance, ledger)
}

#[tokio::test]
async fn a_key_older_than_24_hours_is_a_new_execution() {
    let app = spawn_app().await;
    app.grant_credits(10).await;
    let body = json!({"csv": CSV});
    let first = post_import(&app, &app.base_url, "daily", &body).await;
    let first = first.expect(200).clone();
    assert_eq!(first["created"], 3);

    app.clock.advance_ms(24 * 60 * 60 * 1000 + 1);
    let again = post_import(&app, &app.base_url, "daily", &body).await;
    assert_eq!(
        again.header("idempotent-replayed"),
        None,
        "the old record is ignored"
    );
    let again = again.expect(200).clone();
    assert_ne!(again["id"], first["id"], "a new import ran");
    assert_eq!(
        again["duplicates"], 3,
        "it found the prospects the first one made"
    );
    assert_eq!(count(&app, "imports").await, 2);
}

#[tokio::test]
async fn two_instances_share_idempotency_keys() {
    let app = Arc::new(spawn_app().await);
    app.grant_credits(100).await;
    let second = app.second_instance().await;
    let body = json!({"csv": CSV});
    let mut calls = Vec::new();
    for call in 0..50 {
        let app = app.clone();
        let base_url = if call % 2 == 0 {
            app.base_url.clone()
        } else {
            second.base_url.clone()
        };
        let body = body.clone();
        calls.push(tokio::spawn(async move {
            post_import(&app, &base_url, "shared-key", &body).await
        }));
    }
    let mut ran = 0;
    for call in calls {
        let response = call.await.expect("the call finished");
        match response.status.as_u16() {
            200 if response.header("idempotent-replayed").is_none() => ran += 1,
            200 => {}
            409 => assert_eq!(response.code(), "idempotency_key_in_use"),
            other => panic!("unexpected {other}: {}", response.body),
        }
    }
    assert_eq!(ran, 1, "exactly one call executed");
    assert_eq!(count(&app, "imports").await, 1);
    let (balance, ledger) = balance_and_ledger(&app).await;
    assert_eq!(balance, 97, "one spend of three credits");
    assert_eq!(balance, ledger);
}

#[tokio::test]
async fn two_instances_never_overdraw_one_balance() {
    let app = Arc::new(spawn_app().await);
    app.grant_credits(20).await;
    let second = app.second_instance().await;
    let mut calls = Vec::new();
    for call in 0..50 {
        let app = app.clone();
        let base_url = if call % 2 == 0 {
            app.base_url.clone()
        } else {
            second.base_url.clone()
        };
        // Each body is three new people, so each import costs 3; 50 of them want 150 credits.
        let csv = format!(
            "First Name,Email\nA{call},a{call}@x.test\nB{call},b{call}@x.test\nC{call},c{call}@x.test\n"
        );
        calls.push(tokio::spawn(async move {
            post_import(
                &app,
                &base_url,
                &format!("key-{call}"),
                &json!({"csv": csv}),
            )
            .await
        }));
    }
    let mut succeeded = 0;
    for call in calls {
        let response = call.await.expect("the call finished");
        match response.status.as_u16() {
            200 => succeeded += 1,
            402 => assert_eq!(response.code(), "insufficient_credits"),
            other => panic!("unexpected {other}: {}", response.body),
        }
    }
    let (balance, ledger) = balance_and_ledger(&app).await;
    assert!(balance >= 0);
    assert_eq!(balance, ledger, "the ledger explains the balance");
    assert_eq!(
        balance,
        20 - 3 * succeeded,
        "every success spent 3, every refusal nothing"
    );
    assert_eq!(count(&app, "imports").await, succeeded);
    assert_eq!(
        count(&app, "prospects").await,
        3 * succeeded,
        "refused calls created nothing"
    );
}
