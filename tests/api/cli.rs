//! The `outreach` binary, run as scripts run it: `admin --json ...` prints one JSON object, a
//! refusal exits non-zero with a sentence, and `serve` on an empty database prints a first key
//! and the addresses, then stops cleanly on SIGTERM.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{
    TestDatabase, admin, admin_ok, admin_workspace_with_key, field, outreach, serve, start_serve,
    start_serve_with,
};

#[tokio::test]
async fn admin_commands_print_one_json_object_and_the_key_works() {
    let database = TestDatabase::create().await;
    let created = admin_ok(
        &database,
        &[
            "workspace",
            "create",
            "--name",
            "Initech",
            "--owner-email",
            "Boss@Initech.test",
            "--owner-password",
            "tps-reports-2",
        ],
    )
    .await;
    let workspace = field(&created, "workspace_id");
    assert!(workspace.starts_with("wsp_"), "{created}");
    assert!(field(&created, "person_id").starts_with("psn_"));
    assert!(
        created.get("password").is_none(),
        "a given password is not echoed: {created}"
    );

    let member = admin_ok(
        &database,
        &[
            "member",
            "add",
            "--workspace",
            &workspace,
            "--email",
            "peter@initech.test",
            "--role",
            "admin",
        ],
    )
    .await;
    assert!(field(&member, "person_id").starts_with("psn_"));
    assert!(
        member["password"]
            .as_str()
            .is_some_and(|password| password.len() >= 8),
        "a generated password is shown once: {member}"
    );

    let key = admin_ok(
        &database,
        &[
            "key",
            "create",
            "--workspace",
            &workspace,
            "--email",
            "peter@initech.test",
            "--name",
            "ci",
            "--scopes",
            "read,write",
        ],
    )
    .await;
    let keys: Vec<&str> = key
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys.iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        ["expires_at", "id", "key", "prefix", "scopes", "unattended"].into()
    );
    assert_eq!(key["unattended"], json!(false));
    assert!(field(&key, "id").starts_with("key_"));
    let value = field(&key, "key");
    assert!(value.starts_with("pk_test_"), "{value}");
    assert!(
        value.starts_with(&field(&key, "prefix")),
        "the prefix is the start of the key"
    );
    assert!(
        field(&key, "prefix").len() < value.len() / 2,
        "the prefix does not give the key away"
    );
    assert_eq!(key["scopes"], json!(["read", "write"]));
    assert_eq!(key["expires_at"], Value::Null);

    let expiring = admin_ok(
        &database,
        &[
            "key",
            "create",
            "--workspace",
            &workspace,
            "--email",
            "Boss@Initech.test",
            "--name",
            "temp",
            "--scopes",
            "read",
            "--expires-at",
            "2099-01-01T00:00:00Z",
            "--unattended",
        ],
    )
    .await;
    assert_eq!(expiring["expires_at"], json!("2099-01-01T00:00:00.000Z"));
    assert_eq!(expiring["scopes"], json!(["read"]));
    assert_eq!(expiring["unattended"], json!(true));
    let expiring_id = field(&expiring, "id");
    let person_again = admin_ok(
        &database,
        &[
            "key",
            "set-unattended",
            "--id",
            &expiring_id,
            "--unattended",
            "false",
        ],
    )
    .await;
    assert_eq!(
        person_again,
        json!({"id": expiring_id, "unattended": false})
    );

    // The key the CLI made works against the server, and a revoke from the CLI takes effect.
    let server = serve(&database).await;
    assert!(
        !server.banner.iter().any(|line| line.contains("pk_test_")),
        "a non-empty database gets no new key: {:?}",
        server.banner
    );
    let (status, body) = server.get("/api/v1/workspace", &value).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["workspace"]["name"], json!("Initech"));
    assert_eq!(body["caller"]["email"], json!("peter@initech.test"));
    assert_eq!(body["caller"]["role"], json!("admin"));

    let revoked = admin_ok(&database, &["key", "revoke", "--id", &field(&key, "id")]).await;
    assert_eq!(revoked, json!({"revoked": true}));
    let (status, body) = server.get("/api/v1/workspace", &value).await;
    assert_eq!(status, 401);
    assert_eq!(body["code"], json!("credential_revoked"));
    server.terminate().await;

    let again = admin(&database, &["key", "revoke", "--id", &field(&key, "id")]).await;
    assert!(!again.status.success(), "revoking twice fails");
}

#[tokio::test]
async fn send_scope_is_refused_until_the_terms_are_accepted() {
    let database = TestDatabase::create().await;
    let created = admin_ok(
        &database,
        &[
            "workspace",
            "create",
            "--name",
            "Hooli",
            "--owner-email",
            "gavin@hooli.test",
        ],
    )
    .await;
    let workspace = field(&created, "workspace_id");
    assert!(
        created["password"]
            .as_str()
            .is_some_and(|password| password.len() >= 8),
        "{created}"
    );
    let create_send = [
        "key",
        "create",
        "--workspace",
        &workspace,
        "--email",
        "gavin@hooli.test",
        "--name",
        "mailer",
        "--scopes",
        "read,write,send",
    ];

    let refused = admin(&database, &create_send).await;
    assert!(!refused.status.success(), "send before the terms must fail");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("terms"),
        "the refusal names the sending terms: {stderr}"
    );
    let stdout: Value =
        serde_json::from_slice(&refused.stdout).expect("--json prints the error as JSON");
    assert!(
        stdout["error"]
            .as_str()
            .is_some_and(|error| error.contains("send") && error.contains("terms")),
        "{stdout}"
    );

    admin_ok(
        &database,
        &[
            "member",
            "add",
            "--workspace",
            &workspace,
            "--email",
            "dev@hooli.test",
            "--role",
            "member",
        ],
    )
    .await;
    let by_member = admin(
        &database,
        &[
            "terms",
            "accept",
            "--workspace",
            &workspace,
            "--email",
            "dev@hooli.test",
        ],
    )
    .await;
    assert!(
        !by_member.status.success(),
        "a member cannot accept the terms"
    );
    let member_write = admin(
        &database,
        &[
            "key",
            "create",
            "--workspace",
            &workspace,
            "--email",
            "dev@hooli.test",
            "--name",
            "x",
            "--scopes",
            "write",
        ],
    )
    .await;
    assert!(!member_write.status.success(), "a member cannot hold write");

    assert_eq!(
        admin_ok(
            &database,
            &[
                "terms",
                "accept",
                "--workspace",
                &workspace,
                "--email",
                "gavin@hooli.test"
            ]
        )
        .await,
        json!({"accepted": true})
    );
    let key = admin_ok(&database, &create_send).await;
    assert_eq!(key["scopes"], json!(["read", "write", "send"]));
}

#[tokio::test]
async fn bad_admin_arguments_fail_with_a_sentence() {
    let database = TestDatabase::create().await;
    let cases: [&[&str]; 4] = [
        &[
            "workspace",
            "create",
            "--name",
            "X",
            "--owner-email",
            "not-an-email",
        ],
        &[
            "member",
            "add",
            "--workspace",
            "wsp_00000000000000000000",
            "--email",
            "a@b.test",
            "--role",
            "member",
        ],
        &["key", "revoke", "--id", "key_00000000000000000000"],
        &[
            "member",
            "add",
            "--workspace",
            "wsp_00000000000000000000",
            "--email",
            "a@b.test",
            "--role",
            "emperor",
        ],
    ];
    for args in cases {
        let output = admin(&database, args).await;
        assert!(!output.status.success(), "{args:?} should fail");
        assert!(!output.stderr.is_empty(), "{args:?}: no message");
    }
}

#[tokio::test]
async fn serve_on_an_empty_database_prints_a_first_key_and_stops_on_sigterm() {
    let database = TestDatabase::create().await;
    let server = serve(&database).await;
    let banner = server.banner.join("\n");
    let key = server
        .banner
        .iter()
        .find_map(|line| {
            line.split_whitespace()
                .find(|word| word.starts_with("pk_test_"))
        })
        .unwrap_or_else(|| panic!("no key printed: {banner}"))
        .to_owned();
    assert!(
        banner.contains("wsp_"),
        "the workspace is printed: {banner}"
    );
    assert!(
        banner.contains("password"),
        "the owner's password is printed: {banner}"
    );
    for address in ["/api/v1", "/api/mcp", "/api/v1/docs"] {
        assert!(
            banner.contains(&format!("{}{address}", server.base_url)),
            "{address} is printed: {banner}"
        );
    }

    let (status, body) = server.get("/api/v1/workspace", &key).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["caller"]["scopes"], json!(["read", "write"]));
    assert_eq!(body["caller"]["role"], json!("owner"));
    let (status, _) = server.get("/healthz", "").await;
    assert_eq!(status, 200);
    server.terminate().await;

    // A second start on the same database prints no new key.
    let again = serve(&database).await;
    assert!(
        !again.banner.join("\n").contains("pk_test_"),
        "{:?}",
        again.banner
    );
    again.terminate().await;
}

#[tokio::test]
async fn sigterm_right_after_the_banner_is_a_graceful_shutdown() {
    let database = TestDatabase::create().await;
    start_serve(&database).await.terminate().await;
}

#[tokio::test]
async fn serve_refuses_production_without_https_and_development_flags_in_production() {
    let database = TestDatabase::create().await;
    let cases: [(&[&str], &str); 4] = [
        (
            &["--base-url", "http://api.example.test"],
            "https --base-url",
        ),
        (
            &["--base-url", "https://api.example.test", "--test-clock"],
            "--test-clock",
        ),
        (
            &[
                "--base-url",
                "https://api.example.test",
                "--network",
                "sandbox",
            ],
            "OUTREACH_NETWORK=sandbox is refused",
        ),
        (
            &[
                "--base-url",
                "https://api.example.test",
                "--cimd-allow-loopback",
            ],
            "--cimd-allow-loopback",
        ),
    ];
    for (args, expected) in cases {
        let mut command = outreach();
        command
            .env("OUTREACH_ENV", "production")
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--database-url",
                database.url(),
            ])
            .args(args);
        let output = tokio::time::timeout(Duration::from_secs(60), command.output())
            .await
            .expect("serve gives up")
            .expect("run outreach");
        assert!(!output.status.success(), "{args:?} should not serve");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn a_misspelt_price_override_refuses_the_start_before_anything_is_written_or_printed() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("outreach.db");
    let url = format!("sqlite://{}", file.display());
    let mut command = outreach();
    command.env("OUTREACH_PRICES", "import.prospects=2").args([
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--database-url",
        &url,
    ]);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("serve gives up")
        .expect("run outreach");
    assert!(!output.status.success(), "a misspelt item must not serve");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("`import.prospects`") && stderr.contains("import.prospect,"),
        "the sentence names the item and the known ones: {stderr}"
    );
    assert!(
        output.stdout.is_empty(),
        "nothing printed: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(!file.exists(), "no database was created");
}

#[tokio::test]
async fn admin_commands_refuse_a_missing_database_instead_of_making_an_empty_one() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("elsewhere.db");
    let url = format!("sqlite://{}", file.display());
    let mut command = outreach();
    command.args([
        "admin",
        "--database-url",
        &url,
        "--json",
        "credits",
        "grant",
        "--workspace",
        "wsp_nothing",
        "--amount",
        "5",
    ]);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("admin gives up")
        .expect("run outreach");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("there is no database at") && stderr.contains("elsewhere.db"),
        "the sentence names the file it looked for: {stderr}"
    );
    assert!(!file.exists(), "no empty database was made");
}

/// `outreach admin --json workspace create ...` with `env` set; returns the new workspace's id
/// and its ledger as `(kind, amount, reason)` rows.
async fn create_workspace_with_env(
    env: &[(&str, &str)],
    unset_amount: bool,
) -> (Value, Vec<(String, i64, Option<String>)>) {
    use sqlx::Row;
    let database = TestDatabase::create().await;
    let mut command = outreach();
    if unset_amount {
        command.env_remove("OUTREACH_STARTER_CREDITS");
    }
    command.envs(env.iter().copied()).args([
        "admin",
        "--database-url",
        database.url(),
        "--json",
        "workspace",
        "create",
        "--name",
        "Starter",
        "--owner-email",
        "new@starter.test",
    ]);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("admin finishes")
        .expect("run outreach");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{env:?}: {stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let created: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    let db = outreach_runtime::Db::connect(database.url())
        .await
        .expect("connect");
    let rows = sqlx::query(
        "select kind, amount, reason from credit_ledger where workspace_id = $1 order by created_at",
    )
    .bind(field(&created, "workspace_id"))
    .fetch_all(db.pool())
    .await
    .expect("the ledger");
    let ledger = rows
        .iter()
        .map(|row| {
            (
                row.get::<String, _>("kind"),
                row.get::<i64, _>("amount"),
                row.get::<Option<String>, _>("reason"),
            )
        })
        .collect();
    let balance: i64 = sqlx::query("select credits_balance from workspaces where id = $1")
        .bind(field(&created, "workspace_id"))
        .fetch_one(db.pool())
        .await
        .expect("the workspace")
        .get("credits_balance");
    let ledger_total: i64 = rows.iter().map(|row| row.get::<i64, _>("amount")).sum();
    assert_eq!(balance, ledger_total, "the balance is what the ledger says");
    db.close().await;
    (created, ledger)
}

#[tokio::test]
async fn a_new_workspace_starts_with_1000_starter_credits_in_the_ledger() {
    let (created, ledger) = create_workspace_with_env(&[], true).await;
    assert_eq!(created["starter_credits"], 1000, "{created}");
    assert_eq!(
        ledger,
        vec![("grant".to_owned(), 1000, Some("starter".to_owned()))]
    );
}

#[tokio::test]
async fn outreach_starter_credits_sets_the_amount_and_zero_turns_it_off() {
    let (created, ledger) =
        create_workspace_with_env(&[("OUTREACH_STARTER_CREDITS", "250")], false).await;
    assert_eq!(created["starter_credits"], 250, "{created}");
    assert_eq!(
        ledger,
        vec![("grant".to_owned(), 250, Some("starter".to_owned()))]
    );

    let (created, ledger) =
        create_workspace_with_env(&[("OUTREACH_STARTER_CREDITS", "0")], false).await;
    assert_eq!(created["starter_credits"], 0, "{created}");
    assert!(ledger.is_empty(), "{ledger:?}");
}

#[tokio::test]
async fn production_ignores_outreach_starter_credits_and_grants_nothing() {
    for amount in [None, Some("500")] {
        let mut env = vec![("OUTREACH_ENV", "production")];
        env.extend(amount.map(|amount| ("OUTREACH_STARTER_CREDITS", amount)));
        let (created, ledger) = create_workspace_with_env(&env, amount.is_none()).await;
        assert_eq!(created["starter_credits"], 0, "{created}");
        assert!(ledger.is_empty(), "{amount:?}: {ledger:?}");
    }
}

#[tokio::test]
async fn a_malformed_outreach_starter_credits_is_refused_with_a_sentence() {
    let database = TestDatabase::create().await;
    let mut command = outreach();
    command
        .env("OUTREACH_STARTER_CREDITS", "lots")
        .args(["admin", "--database-url", database.url(), "--json"])
        .args([
            "workspace",
            "create",
            "--name",
            "X",
            "--owner-email",
            "x@x.test",
        ]);
    let output = command.output().await.expect("run outreach");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("OUTREACH_STARTER_CREDITS"), "{stderr}");
}

#[tokio::test]
async fn set_password_prints_a_generated_password_once_and_it_is_the_one_that_works() {
    let database = TestDatabase::create().await;
    admin_ok(
        &database,
        &[
            "workspace",
            "create",
            "--name",
            "Initech",
            "--owner-email",
            "boss@initech.test",
            "--owner-password",
            "tps-reports-2",
        ],
    )
    .await;
    let stored = |db: outreach_runtime::Db| async move {
        let hash: String = sqlx::query_scalar(
            "select password_hash from people where email = 'boss@initech.test'",
        )
        .fetch_one(db.pool())
        .await
        .expect("the person");
        db.close().await;
        hash
    };
    let connect = || async {
        outreach_runtime::Db::connect(database.url())
            .await
            .expect("connect")
    };

    let generated = admin_ok(
        &database,
        &["person", "set-password", "--email", "Boss@Initech.test"],
    )
    .await;
    let password = field(&generated, "password");
    assert!(password.len() >= 8, "{generated}");
    let hash = stored(connect().await).await;
    assert!(outreach_runtime::admin::password_matches(&hash, &password));
    assert!(!outreach_runtime::admin::password_matches(
        &hash,
        "tps-reports-2"
    ));

    let given = admin_ok(
        &database,
        &[
            "person",
            "set-password",
            "--email",
            "boss@initech.test",
            "--password",
            "flair-pieces-37",
        ],
    )
    .await;
    assert!(
        given.get("password").is_none(),
        "a given password is not echoed: {given}"
    );
    let hash = stored(connect().await).await;
    assert!(outreach_runtime::admin::password_matches(
        &hash,
        "flair-pieces-37"
    ));

    for args in [
        &[
            "person",
            "set-password",
            "--email",
            "boss@initech.test",
            "--password",
            "short",
        ][..],
        &["person", "set-password", "--email", "nobody@initech.test"][..],
    ] {
        let output = admin(&database, args).await;
        assert!(!output.status.success(), "{args:?} should fail");
        assert!(!output.stderr.is_empty(), "{args:?}: no sentence");
    }
    let hash = stored(connect().await).await;
    assert!(
        outreach_runtime::admin::password_matches(&hash, "flair-pieces-37"),
        "a refused change changes nothing"
    );
}

/// A job row written straight into the table, of a kind no handler in the binary knows: a
/// worker that claims it records the missing handler as a failed attempt, so the row shows
/// whether a worker ran at all.
async fn insert_unknown_job(database: &TestDatabase) -> (outreach_runtime::Db, String) {
    let db = outreach_runtime::Db::connect(database.url())
        .await
        .expect("connect");
    let id = outreach_runtime::ids::new_id("job");
    sqlx::query(
        "insert into jobs (id, kind, payload, state, attempt, max_attempts, run_at, created_at, updated_at) \
         values ($1, 'cli.unregistered', '{}', 'available', 0, 5, 0, 0, 0)",
    )
    .bind(&id)
    .execute(db.pool())
    .await
    .expect("a job row");
    (db, id)
}

async fn attempts(db: &outreach_runtime::Db, id: &str) -> (i64, Option<String>) {
    let row = sqlx::query("select attempt, last_error from jobs where id = $1")
        .bind(id)
        .fetch_one(db.pool())
        .await
        .expect("the job");
    use sqlx::Row;
    (
        row.try_get::<i64, _>("attempt").expect("attempt"),
        row.try_get("last_error").expect("last_error"),
    )
}

#[tokio::test]
async fn serve_no_worker_runs_no_jobs_and_outreach_worker_runs_them() {
    let database = TestDatabase::create().await;
    let server = start_serve_with(&database, &["--no-worker", "--job-poll-ms", "20"]).await;
    let (db, id) = insert_unknown_job(&database).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        attempts(&db, &id).await,
        (0, None),
        "--no-worker claims nothing"
    );
    server.terminate().await;

    let mut worker = outreach()
        .args([
            "worker",
            "--database-url",
            database.url(),
            "--job-poll-ms",
            "20",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start outreach worker");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let (attempt, error) = loop {
        let (attempt, error) = attempts(&db, &id).await;
        // Claimed, and the missing handler recorded.
        if error.is_some() {
            break (attempt, error);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker never claimed the job"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(attempt, 1);
    assert!(
        error.as_deref().unwrap_or("").contains("no handler"),
        "{error:?}"
    );
    let pid = worker.id().expect("a running worker").to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .expect("run kill");
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(30), worker.wait())
        .await
        .expect("the worker exits after SIGTERM")
        .expect("wait");
    assert!(status.success(), "graceful shutdown exits 0, got {status}");
    db.close().await;
}

#[tokio::test]
async fn admin_commands_wait_their_turn_beside_a_busy_server() {
    let database = TestDatabase::create().await;
    let (workspace, key) = admin_workspace_with_key(&database, "Busy", "owner@busy.test").await;
    let server = serve(&database).await;
    // Writers keep the server's write lock busy while the admin commands run beside them.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..3 {
        let (base, key, stop) = (server.base_url.clone(), key.clone(), stop.clone());
        writers.spawn(async move {
            let client = reqwest::Client::new();
            let mut written = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let created = client
                    .post(format!("{base}/api/v1/prospects"))
                    .bearer_auth(&key)
                    .json(&json!({"first_name": format!("Writer {writer}"), "last_name": format!("No. {written}")}))
                    .send()
                    .await
                    .expect("send");
                let status = created.status().as_u16();
                assert_eq!(status, 201, "{}", created.text().await.unwrap_or_default());
                written += 1;
            }
            written
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for n in 0..6 {
        let email = format!("member{n}@busy.test");
        admin_ok(
            &database,
            &[
                "member",
                "add",
                "--workspace",
                &workspace,
                "--email",
                &email,
                "--role",
                "member",
            ],
        )
        .await;
        admin_ok(
            &database,
            &[
                "key",
                "create",
                "--workspace",
                &workspace,
                "--email",
                &email,
                "--name",
                "k",
                "--scopes",
                "read",
            ],
        )
        .await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written: i32 = writers.join_all().await.into_iter().sum();
    assert!(written > 0, "the server was writing meanwhile");
    server.terminate().await;
}
