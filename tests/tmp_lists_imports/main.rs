// Temporary harness (removed before hand-off): runs the lists and imports tests while parity.rs is being edited.
#[path = "../api/helpers.rs"]
#[allow(dead_code)]
mod helpers;
#[path = "../api/imports.rs"]
mod imports;
#[path = "../api/lists.rs"]
mod lists;

#[tokio::test]
async fn debug_pg() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let app = helpers::spawn_app().await;
    outreach_runtime::credits::grant(&app.db, &app.clock, &app.workspace_id, 100, &Default::default()).await.unwrap();
    let r = app.post_json("/imports", &app.key, serde_json::json!({"rows": [{"email": "a@b.co"}]})).await;
    println!("{}", r.body);
}
