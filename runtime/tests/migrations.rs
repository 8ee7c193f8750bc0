//! Migrations that rebuild a table keep what it held: a database at the schema before the
//! rebuild, with rows in it, migrated by the server's own migrator ([`Db::migrate`]).
//!
//! SQLite only: the rebuilds are SQLite's (it cannot change a table's storage in place).

use std::path::Path;

use outreach_runtime::Db;
use sqlx::migrate::Migrator;
use sqlx::{Connection, Row, SqliteConnection};

/// The SQLite migrations older than `version`, applied to the database at `url`.
async fn migrate_before(url: &str, version: i64) {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations/sqlite");
    let mut migrator = Migrator::new(folder).await.expect("read the migrations");
    migrator.migrations = migrator
        .migrations
        .iter()
        .filter(|migration| migration.version < version)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    let mut conn = SqliteConnection::connect(url).await.expect("connect");
    migrator.run(&mut conn).await.expect("migrate");
    conn.close().await.expect("close");
}

#[tokio::test]
async fn storing_scoring_results_by_run_keeps_every_result_and_its_cascades() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("old.db").display());
    migrate_before(&url, 20261128000000).await;

    let mut conn = SqliteConnection::connect(&url).await.expect("connect");
    for statement in [
        "insert into workspaces (id, name, created_at) values ('wsp_1', 'One', 1)",
        "insert into prospects (id, workspace_id, source, created_at, updated_at) \
         values ('prs_a', 'wsp_1', 'api', 1, 1), ('prs_b', 'wsp_1', 'api', 1, 1)",
        "insert into scoring_runs (id, workspace_id, targeting_id, targeting_version, status, created_at) \
         values ('scr_1', 'wsp_1', 'tgt_1', 1, 'completed', 1), ('scr_2', 'wsp_1', 'tgt_1', 2, 'completed', 2)",
        "insert into scoring_results (run_id, prospect_id, score, tier, matched, gates_failed, missing) values \
         ('scr_1', 'prs_b', 90, 'a', '[{\"x\":1}]', '[]', '[\"location\"]'), \
         ('scr_1', 'prs_a', 10, 'd', '[]', '[]', '[]'), \
         ('scr_2', 'prs_a', 55, 'c', '[]', '[\"g\"]', '[]')",
    ] {
        sqlx::query(statement)
            .execute(&mut conn)
            .await
            .expect(statement);
    }
    conn.close().await.expect("close");

    let db = Db::connect(&url).await.expect("connect");
    db.migrate().await.expect("the rest of the migrations");
    let rows = sqlx::query(
        "select run_id, prospect_id, score, tier, matched, gates_failed, missing from scoring_results \
         order by run_id, prospect_id",
    )
    .fetch_all(db.pool())
    .await
    .expect("read the results");
    let results: Vec<(String, String, i64, String, String, String, String)> = rows
        .iter()
        .map(|row| {
            (
                row.get(0),
                row.get(1),
                row.get(2),
                row.get(3),
                row.get(4),
                row.get(5),
                row.get(6),
            )
        })
        .collect();
    let text = |value: &str| value.to_owned();
    assert_eq!(
        results,
        vec![
            (
                text("scr_1"),
                text("prs_a"),
                10,
                text("d"),
                text("[]"),
                text("[]"),
                text("[]")
            ),
            (
                text("scr_1"),
                text("prs_b"),
                90,
                text("a"),
                text("[{\"x\":1}]"),
                text("[]"),
                text("[\"location\"]")
            ),
            (
                text("scr_2"),
                text("prs_a"),
                55,
                text("c"),
                text("[]"),
                text("[\"g\"]"),
                text("[]")
            ),
        ]
    );

    // The table is its primary key now: no rowid.
    let rowid = sqlx::query("select rowid from scoring_results")
        .fetch_all(db.pool())
        .await;
    assert!(rowid.is_err(), "scoring_results still has a rowid");
    // Its constraints came along: one result per run and prospect, scores 0 to 100.
    for refused in [
        "insert into scoring_results (run_id, prospect_id, score, tier, matched, gates_failed, missing) \
         values ('scr_1', 'prs_a', 10, 'd', '[]', '[]', '[]')",
        "insert into scoring_results (run_id, prospect_id, score, tier, matched, gates_failed, missing) \
         values ('scr_2', 'prs_b', 101, 'a', '[]', '[]', '[]')",
        "insert into scoring_results (run_id, prospect_id, score, tier, matched, gates_failed, missing) \
         values ('scr_2', 'prs_missing', 1, 'd', '[]', '[]', '[]')",
    ] {
        assert!(
            sqlx::query(refused).execute(db.pool()).await.is_err(),
            "accepted: {refused}"
        );
    }
    // And its cascades: deleting a prospect deletes its results, deleting a run deletes its own.
    sqlx::query("delete from prospects where id = 'prs_a'")
        .execute(db.pool())
        .await
        .expect("delete a prospect");
    sqlx::query("delete from scoring_runs where id = 'scr_1'")
        .execute(db.pool())
        .await
        .expect("delete a run");
    let left: i64 = sqlx::query_scalar("select count(*) from scoring_results")
        .fetch_one(db.pool())
        .await
        .expect("count");
    assert_eq!(left, 0);
}
