//! The periodic deletions: expired sessions, old failed sign-ins, and codes and tokens a day past
//! their expiry go; live ones stay.

use outreach_runtime::server::build_state;
use outreach_runtime::{Config, housekeeping, ids};

use crate::helpers::spawn_app;

async fn count(app: &crate::helpers::TestApp, table: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("select count(*) from {table}")))
        .fetch_one(app.db.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn expired_sessions_failures_codes_and_tokens_are_purged_and_live_ones_kept() {
    let app = spawn_app().await;
    let state = build_state(
        app.db.clone(),
        app.clock.clone(),
        Config::new(&app.base_url, app.environment.clone()),
    )
    .unwrap();
    let now = app.clock.now_ms();
    let day = 24 * 60 * 60 * 1000;
    let person: String = sqlx::query_scalar("select id from people limit 1")
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    for (expires_at, label) in [(now - 1, "old"), (now + day, "live")] {
        sqlx::query(
            "insert into web_sessions (id, token_hash, person_id, csrf_token, created_at, expires_at) \
             values ($1, $2, $3, 'csrf', $4, $5)",
        )
        .bind(ids::new_id("ses"))
        .bind(ids::hash_secret(label))
        .bind(&person)
        .bind(now - day)
        .bind(expires_at)
        .execute(app.db.pool())
        .await
        .unwrap();
    }
    // The live session holds a show-once value past its five minutes.
    sqlx::query(
        "update web_sessions set flash = 'pk_test_forgotten', flash_expires_at = $1 \
         where token_hash = $2",
    )
    .bind(now - 1)
    .bind(ids::hash_secret("live"))
    .execute(app.db.pool())
    .await
    .unwrap();
    for failed_at in [now - 2 * day, now] {
        sqlx::query("insert into sign_in_failures (subject, failed_at) values ('account:x', $1)")
            .bind(failed_at)
            .execute(app.db.pool())
            .await
            .unwrap();
    }
    sqlx::query(
        "insert into oauth_grants (id, workspace_id, person_id, client_id, client_name, \
            client_source, scopes, resource, created_at) \
         values ('grt_1', $1, $2, 'cli_x', 'X', 'registration', 'read', 'r', $3)",
    )
    .bind(&app.workspace_id)
    .bind(&person)
    .bind(now)
    .execute(app.db.pool())
    .await
    .unwrap();
    // Expired an hour ago: kept for the grace period, so a replay is still recognised.
    for (hash, expires_at) in [
        ("a", now - 31 * day),
        ("b", now - 3_600_000),
        ("c", now + day),
    ] {
        sqlx::query(
            "insert into oauth_tokens (token_hash, grant_id, kind, expires_at, created_at) \
             values ($1, 'grt_1', 'refresh', $2, $3)",
        )
        .bind(hash)
        .bind(expires_at)
        .bind(now - 3 * day)
        .execute(app.db.pool())
        .await
        .unwrap();
        sqlx::query(
            "insert into oauth_codes (code_hash, grant_id, client_id, redirect_uri, code_challenge, expires_at) \
             values ($1, 'grt_1', 'cli_x', 'http://127.0.0.1/cb', 'x', $2)",
        )
        .bind(hash)
        .bind(expires_at)
        .execute(app.db.pool())
        .await
        .unwrap();
    }
    let purged = housekeeping::purge(&state).await.unwrap();
    assert_eq!(count(&app, "web_sessions").await, 1);
    assert_eq!(count(&app, "sign_in_failures").await, 1);
    assert_eq!(count(&app, "oauth_codes").await, 2);
    assert_eq!(count(&app, "oauth_tokens").await, 2);
    let flashes: i64 =
        sqlx::query_scalar("select count(*) from web_sessions where flash is not null")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    assert_eq!(flashes, 0, "the forgotten key value is gone");
    assert_eq!(
        purged, 5,
        "one session, one flash, one failure, one code and one token"
    );
    assert_eq!(
        housekeeping::purge(&state).await.unwrap(),
        0,
        "a second round finds nothing"
    );
}
