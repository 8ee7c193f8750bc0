//! The sandbox network: deterministic fates, the network's refusals, its log, the test helpers on
//! both faces, the shared test clock across instances, and the helpers' absence in production.

use outreach_actions::network::sandbox::{INVITATIONS_PER_DAY, RESEND_AFTER_MS, fate};
use outreach_actions::network::{
    Account, ChatDirection, ConnectionState, Network, NetworkError, NetworkProvider, Outbound,
    Sandbox, network_for,
};
use outreach_runtime::{Clock, Config, Environment};
use serde_json::{Value, json};
use sqlx::Row;

use crate::helpers::{TestApp, sender_with_id, spawn_app, spawn_app_in, spawn_app_with_test_clock};

const SEED: u64 = 42;
const HOUR_MS: i64 = 3_600_000;
const SENDER: &str = "snd_sandboxTestSender001";

/// What the sandbox has for the workspace, handed to delivery and applied, as the poll job does:
/// how many events were new.
async fn deliver(app: &TestApp, network: &Sandbox, workspace_id: &str) -> u64 {
    let network = Network::Sandbox(network.clone());
    outreach_actions::delivery::inbound::deliver_due(&network, &app.db, &app.clock, workspace_id)
        .await
        .expect("deliver what fell due")
}

fn sandbox(app: &TestApp) -> Sandbox {
    Sandbox::new(app.db.clone(), app.clock.clone(), SEED)
}

fn to<'a>(
    app: &'a TestApp,
    url: &'a str,
    prospect: Option<&'a str>,
    intent: &'a str,
) -> Outbound<'a> {
    Outbound {
        account: Account {
            workspace_id: &app.workspace_id,
            sender_id: SENDER,
        },
        profile_url: url,
        prospect_id: prospect,
        intent,
    }
}

fn account(app: &TestApp) -> Account<'_> {
    Account {
        workspace_id: &app.workspace_id,
        sender_id: SENDER,
    }
}

/// `count` profile URLs whose fate passes `keep`.
fn urls(
    count: usize,
    keep: impl Fn(&outreach_actions::network::sandbox::Fate) -> bool,
) -> Vec<String> {
    (0..)
        .map(|n| format!("linkedin.com/in/person-{n}"))
        .filter(|url| keep(&fate(SEED, url)))
        .take(count)
        .collect()
}

/// A prospect with the given normalised profile URL; returns its id.
async fn prospect(app: &TestApp, url: &str) -> String {
    let created = app
        .create_prospect(json!({"first_name": "Ada", "profile_url": format!("https://{url}")}))
        .await;
    created["id"].as_str().expect("an id").to_owned()
}

async fn count(app: &TestApp, sql: &str) -> i64 {
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .bind(&app.workspace_id)
        .fetch_one(app.db.pool())
        .await
        .expect("count")
        .try_get::<i64, _>(0)
        .expect("a count")
}

#[tokio::test]
async fn the_same_seed_and_profile_url_give_the_same_outcome_in_any_workspace() {
    let app = spawn_app().await;
    let (other_workspace, _) = app.other_workspace("Other", "other@acme.test").await;
    let people = urls(20, |fate| !fate.unreachable);
    let network = sandbox(&app);
    for workspace_id in [app.workspace_id.as_str(), other_workspace.as_str()] {
        for url in &people {
            let to = Outbound {
                account: Account {
                    workspace_id,
                    sender_id: SENDER,
                },
                profile_url: url,
                prospect_id: None,
                intent: "determinism",
            };
            network.invite(to, None).await.expect("invite");
        }
    }
    app.clock.advance_ms(73 * HOUR_MS);
    let mut accepted_by_workspace = Vec::new();
    for workspace_id in [app.workspace_id.as_str(), other_workspace.as_str()] {
        deliver(&app, &network, workspace_id).await;
        let mut accepted = Vec::new();
        for url in &people {
            let account = Account {
                workspace_id,
                sender_id: SENDER,
            };
            if network.connection_state(account, url).await.expect("state")
                == ConnectionState::Connected
            {
                accepted.push(url.clone());
            }
        }
        accepted_by_workspace.push(accepted);
    }
    let predicted: Vec<String> = people
        .iter()
        .filter(|url| fate(SEED, url).accepts_after_ms.is_some())
        .cloned()
        .collect();
    assert!(!predicted.is_empty() && predicted.len() < people.len());
    assert_eq!(accepted_by_workspace[0], predicted, "the fate decides");
    assert_eq!(
        accepted_by_workspace[1], predicted,
        "in every workspace alike"
    );
    // The delay is the fate's too.
    let delays: Vec<(String, i64)> = sqlx::query(
        "select profile_url, accept_at - invited_at as delay from sandbox_connections \
         where accept_at is not null and workspace_id = $1",
    )
    .bind(&app.workspace_id)
    .fetch_all(app.db.pool())
    .await
    .expect("delays")
    .iter()
    .map(|row| {
        (
            row.try_get("profile_url").expect("url"),
            row.try_get("delay").expect("delay"),
        )
    })
    .collect();
    let connected: i64 = count(
        &app,
        "select count(*) from sandbox_connections where workspace_id = $1 and state = 'connected'",
    )
    .await;
    assert_eq!(
        connected as usize,
        predicted.len(),
        "the poll wrote each acceptance"
    );
    for (url, delay) in delays {
        assert_eq!(Some(delay), fate(SEED, &url).accepts_after_ms, "{url}");
    }
}

#[tokio::test]
async fn a_withdrawn_person_cannot_be_invited_again_for_three_weeks() {
    let app = spawn_app().await;
    let network = sandbox(&app);
    let url = &urls(1, |fate| !fate.unreachable)[0];
    network
        .invite(to(&app, url, None, "i1"), Some("Hello"))
        .await
        .expect("invite");
    assert_eq!(
        network.invite(to(&app, url, None, "i2"), None).await,
        Err(NetworkError::AlreadyInvited)
    );
    let withdrawn = network
        .withdraw(to(&app, url, None, "w1"))
        .await
        .expect("withdraw");
    assert_eq!(
        network.withdraw(to(&app, url, None, "w2")).await,
        Err(NetworkError::NotInvited)
    );
    let again = network.invite(to(&app, url, None, "i3"), None).await;
    assert_eq!(
        again,
        Err(NetworkError::CannotResendYet {
            retry_at_ms: withdrawn.at_ms + RESEND_AFTER_MS
        })
    );
    let api: outreach_runtime::ApiError = again.expect_err("refused").into();
    assert_eq!(api.code.as_str(), "cannot_resend_yet");
    assert_eq!(api.status().as_u16(), 409);
    assert!(api.extra.contains_key("retry_at"), "{:?}", api.extra);

    app.clock.advance_ms(RESEND_AFTER_MS - HOUR_MS);
    assert!(matches!(
        network.invite(to(&app, url, None, "i4"), None).await,
        Err(NetworkError::CannotResendYet { .. })
    ));
    app.clock.advance_ms(2 * HOUR_MS);
    network
        .invite(to(&app, url, None, "i5"), None)
        .await
        .expect("three weeks later the invitation goes");
}

#[tokio::test]
async fn messages_go_to_connections_only_and_long_texts_are_refused() {
    let app = spawn_app().await;
    sender_with_id(&app, SENDER).await;
    let network = sandbox(&app);
    let url = urls(1, |fate| !fate.unreachable)[0].clone();
    let prospect_id = prospect(&app, &url).await;
    let target = to(&app, &url, Some(&prospect_id), "m1");
    assert_eq!(
        network.send_message(target, "Hi").await,
        Err(NetworkError::NotConnected)
    );
    network.invite(target, None).await.expect("invite");
    assert_eq!(
        network.send_message(target, "Hi").await,
        Err(NetworkError::NotConnected),
        "a pending invitation is no connection"
    );
    assert_eq!(
        network.invite(target, Some(&"x".repeat(301))).await,
        Err(NetworkError::TooLong { limit: 300 })
    );
    app.post_json(
        "/sandbox/invitations/accept",
        &app.key,
        json!({"prospect_id": prospect_id, "sender_id": SENDER}),
    )
    .await
    .expect(200);
    assert_eq!(
        network.send_message(target, &"y".repeat(8_001)).await,
        Err(NetworkError::TooLong { limit: 8_000 })
    );
    let sent = network.send_message(target, "Hi Ada").await.expect("send");
    assert_eq!(
        network.invite(target, None).await,
        Err(NetworkError::AlreadyConnected)
    );
    let messages = network
        .list_messages(account(&app), 0)
        .await
        .expect("messages");
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].provider_message_id, sent.provider_id);
    assert_eq!(messages[0].direction, ChatDirection::Outbound);

    let unreachable = urls(1, |fate| fate.unreachable)[0].clone();
    assert_eq!(
        network
            .invite(to(&app, &unreachable, None, "u"), None)
            .await,
        Err(NetworkError::Unreachable)
    );
}

#[tokio::test]
async fn the_sandbox_enforces_its_own_daily_cap_per_sender() {
    let app = spawn_app().await;
    let network = sandbox(&app);
    let cap = usize::try_from(INVITATIONS_PER_DAY).expect("a small cap");
    let people = urls(cap + 2, |fate| !fate.unreachable);
    let mut first_at = None;
    for url in &people[..cap] {
        let sent = network
            .invite(to(&app, url, None, "cap"), None)
            .await
            .expect("under the cap");
        first_at.get_or_insert(sent.at_ms);
    }
    let refused = network
        .invite(to(&app, &people[cap], None, "cap"), None)
        .await;
    assert_eq!(
        refused,
        Err(NetworkError::LimitExceeded {
            retry_at_ms: first_at.map(|at| at + 24 * HOUR_MS)
        })
    );
    // Another sender has a cap of its own.
    let other = Outbound {
        account: Account {
            workspace_id: &app.workspace_id,
            sender_id: "snd_anotherSender000001",
        },
        ..to(&app, &people[cap], None, "cap")
    };
    network
        .invite(other, None)
        .await
        .expect("another sender's cap");
    app.clock.advance_ms(24 * HOUR_MS);
    network
        .invite(to(&app, &people[cap + 1], None, "cap"), None)
        .await
        .expect("a day later the cap has room");
}

#[tokio::test]
async fn a_disconnected_or_restricted_account_is_refused_and_the_refusal_logged() {
    let app = spawn_app().await;
    sender_with_id(&app, SENDER).await;
    let network = sandbox(&app);
    let url = urls(1, |fate| !fate.unreachable)[0].clone();
    let target = to(&app, &url, None, "status");
    for (status, error) in [
        ("disconnected", NetworkError::AccountDisconnected),
        ("needs_reauth", NetworkError::AccountDisconnected),
        ("restricted", NetworkError::AccountRestricted),
    ] {
        let set = app
            .post_json(
                &format!("/sandbox/senders/{SENDER}/status"),
                &app.key,
                json!({"status": status}),
            )
            .await;
        assert_eq!(set.expect(200)["status"], json!(status));
        assert_eq!(network.invite(target, None).await, Err(error.clone()));
        assert_eq!(network.send_message(target, "Hi").await, Err(error.clone()));
        assert_eq!(
            network
                .account_status(account(&app))
                .await
                .expect("status")
                .as_str(),
            status
        );
    }
    app.post_json(
        &format!("/sandbox/senders/{SENDER}/status"),
        &app.key,
        json!({"status": "connected"}),
    )
    .await
    .expect(200);
    network.invite(target, None).await.expect("reconnected");
    let log = app.get("/sandbox/log?kind=invitation", &app.key).await;
    let outcomes: Vec<&str> = log.expect(200)["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| item["outcome"].as_str().expect("outcome"))
        .collect();
    assert_eq!(
        outcomes,
        [
            "account_disconnected",
            "account_disconnected",
            "account_restricted",
            "ok"
        ]
    );
}

#[tokio::test]
async fn the_log_records_every_call_and_answers_reconciliation() {
    let app = spawn_app().await;
    sender_with_id(&app, SENDER).await;
    let network = sandbox(&app);
    let url = urls(1, |fate| !fate.unreachable)[0].clone();
    let prospect_id = prospect(&app, &url).await;
    let target = |intent| to(&app, &url, Some(&prospect_id), intent);
    // A millisecond between calls: the log is ordered by time, and calls within one millisecond
    // have no order between them.
    assert_eq!(
        network
            .view_profile(target("int_view"))
            .await
            .map(|viewed| viewed.state),
        Ok(ConnectionState::NotConnected)
    );
    app.clock.advance_ms(1);
    network
        .invite(target("int_invite"), Some("Hello Ada"))
        .await
        .expect("invite");
    app.clock.advance_ms(1);
    assert_eq!(
        network.send_message(target("int_early"), "Too soon").await,
        Err(NetworkError::NotConnected)
    );
    app.clock.advance_ms(1);
    network
        .withdraw(target("int_withdraw"))
        .await
        .expect("withdraw");

    let log = app.get("/sandbox/log", &app.key).await;
    let log = log.expect(200);
    assert_eq!(log["total"], json!(4));
    let items = log["items"].as_array().expect("items");
    let summary: Vec<(&str, Option<&str>, &str)> = items
        .iter()
        .map(|item| {
            (
                item["kind"].as_str().expect("kind"),
                item["text"].as_str(),
                item["outcome"].as_str().expect("outcome"),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("profile_view", None, "ok"),
            ("invitation", Some("Hello Ada"), "ok"),
            ("message", Some("Too soon"), "not_connected"),
            ("withdrawal", None, "ok"),
        ]
    );
    for item in items {
        assert_eq!(item["sender_id"], json!(SENDER));
        assert_eq!(item["prospect_id"], json!(prospect_id));
        assert_eq!(item["profile_url"], json!(url));
        assert!(
            item["at"].as_str().is_some_and(|at| at.ends_with('Z')),
            "{item}"
        );
        assert!(
            item["id"].as_str().is_some_and(|id| id.starts_with("sbx_")),
            "{item}"
        );
    }
    let filtered = app
        .get(
            &format!("/sandbox/log?prospect_id={prospect_id}&kind=message&limit=1"),
            &app.key,
        )
        .await;
    assert_eq!(filtered.expect(200)["total"], json!(1));
    let other_sender = app.get("/sandbox/log?sender_id=snd_nobody", &app.key).await;
    assert_eq!(other_sender.expect(200)["total"], json!(0));

    let found = network
        .find_outbound(account(&app), "int_invite")
        .await
        .expect("lookup")
        .expect("the invitation is in the log");
    assert!(found.happened());
    let refused = network
        .find_outbound(account(&app), "int_early")
        .await
        .expect("lookup")
        .expect("the refusal is in the log");
    assert!(!refused.happened());
    assert_eq!(refused.outcome, "not_connected");
    assert_eq!(
        network.find_outbound(account(&app), "int_never").await,
        Ok(None),
        "an action never received"
    );
}

#[tokio::test]
async fn the_helpers_accept_and_reply_only_in_the_right_state_on_both_faces() {
    let app = spawn_app().await;
    sender_with_id(&app, SENDER).await;
    let network = sandbox(&app);
    let url = urls(1, |fate| !fate.unreachable)[0].clone();
    let prospect_id = prospect(&app, &url).await;
    let accept = json!({"prospect_id": prospect_id, "sender_id": SENDER});
    let refused = app
        .post_json("/sandbox/invitations/accept", &app.key, accept.clone())
        .await;
    let message = refused.expect_error(409, "invalid_state");
    assert!(
        message.contains("`not_connected`") && message.contains("`pending`"),
        "{message}"
    );
    assert_eq!(refused.body["connection_state"], json!("not_connected"));
    let reply = json!({"prospect_id": prospect_id, "sender_id": SENDER, "text": "Interested!"});
    let refused = app
        .post_json("/sandbox/replies", &app.key, reply.clone())
        .await;
    refused.expect_error(409, "invalid_state");

    network
        .invite(to(&app, &url, Some(&prospect_id), "i"), None)
        .await
        .expect("invite");
    let (is_error, accepted) = app
        .mcp_call(
            &app.key,
            "service_sandbox_accept_invitation",
            accept.clone(),
        )
        .await;
    assert!(!is_error, "{accepted}");
    assert_eq!(accepted["connection_state"], json!("connected"));
    assert_eq!(accepted["profile_url"], json!(url));
    let again = app
        .post_json("/sandbox/invitations/accept", &app.key, accept)
        .await;
    assert!(
        again
            .expect_error(409, "invalid_state")
            .contains("`connected`")
    );

    let replied = app.post_json("/sandbox/replies", &app.key, reply).await;
    let replied = replied.expect(200);
    assert_eq!(replied["direction"], json!("inbound"));
    assert_eq!(replied["text"], json!("Interested!"));

    let events: Vec<(String, Option<String>)> = sqlx::query(
        "select kind, text from inbound_events where workspace_id = $1 order by at, kind",
    )
    .bind(&app.workspace_id)
    .fetch_all(app.db.pool())
    .await
    .expect("events")
    .iter()
    .map(|row| {
        (
            row.try_get("kind").expect("kind"),
            row.try_get("text").expect("text"),
        )
    })
    .collect();
    assert_eq!(
        events,
        [
            ("invitation_accepted".to_owned(), None),
            (
                "message_received".to_owned(),
                Some("Interested!".to_owned())
            ),
        ]
    );
    // Not every helper error is a state: a prospect of nobody is a 404.
    let missing = app
        .post_json(
            "/sandbox/replies",
            &app.key,
            json!({"prospect_id": "prs_00000000000NoSuchOne", "sender_id": SENDER, "text": "Hi"}),
        )
        .await;
    missing.expect_error(404, "not_found");
}

#[tokio::test]
async fn polling_delivers_due_acceptances_and_replies_once() {
    let app = spawn_app().await;
    let network = sandbox(&app);
    let url = urls(1, |fate| {
        !fate.unreachable && fate.accepts_after_ms.is_some() && fate.replies_after_ms.is_some()
    })[0]
        .clone();
    let fate = fate(SEED, &url);
    let target = to(&app, &url, None, "poll");
    network.invite(target, None).await.expect("invite");
    assert_eq!(
        deliver(&app, &network, &app.workspace_id).await,
        0,
        "nothing due yet"
    );
    app.clock
        .advance_ms(fate.accepts_after_ms.expect("accepts") + 1_000);
    assert_eq!(
        network.connection_state(account(&app), &url).await,
        Ok(ConnectionState::Connected),
        "accepted on time, before any poll"
    );
    assert_eq!(deliver(&app, &network, &app.workspace_id).await, 1);
    assert_eq!(
        deliver(&app, &network, &app.workspace_id).await,
        0,
        "delivered once"
    );
    network
        .send_message(target, "Hello")
        .await
        .expect("message");
    app.clock
        .advance_ms(fate.replies_after_ms.expect("replies") + 1_000);
    assert_eq!(deliver(&app, &network, &app.workspace_id).await, 1);
    assert_eq!(deliver(&app, &network, &app.workspace_id).await, 0);
    let messages = network
        .list_messages(account(&app), 0)
        .await
        .expect("messages");
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1].direction, ChatDirection::Inbound);
    assert_eq!(Some(messages[1].text.as_str()), fate.reply_text);
    // A second message gets no second automatic reply.
    network
        .send_message(target, "Still there?")
        .await
        .expect("message");
    app.clock.advance_ms(49 * HOUR_MS);
    assert_eq!(deliver(&app, &network, &app.workspace_id).await, 0);
    assert_eq!(
        count(
            &app,
            "select count(*) from inbound_events where workspace_id = $1"
        )
        .await,
        2
    );
}

#[tokio::test]
async fn advance_clock_moves_every_instance_on_the_database() {
    let app = spawn_app_with_test_clock().await;
    sender_with_id(&app, SENDER).await;
    let second = app.second_instance_with_clock(Clock::shared()).await;
    let before = app.clock.now_ms();
    let (is_error, moved) = app
        .mcp_call(
            &app.key,
            "service_advance_clock",
            json!({"seconds": 30 * 86_400}),
        )
        .await;
    assert!(!is_error, "{moved}");
    let now = outreach_runtime::clock::parse_rfc3339(moved["now"].as_str().expect("now"))
        .expect("a time");
    assert!(now - before >= 30 * 86_400_000, "{moved}");
    // The second instance, with a clock of its own, shows the moved time on its next request.
    let set = app
        .client
        .post(format!(
            "{}/api/v1/sandbox/senders/{SENDER}/status",
            second.base_url
        ))
        .bearer_auth(&app.key)
        .json(&json!({"status": "connected"}))
        .send()
        .await
        .expect("send");
    let body: Value = set.json().await.expect("json");
    let updated =
        outreach_runtime::clock::parse_rfc3339(body["updated_at"].as_str().expect("updated_at"))
            .expect("a time");
    assert!(updated >= now, "{body}");
    assert!(updated - now < 60_000, "{body}");
    // A bad amount changes nothing.
    let bad = app
        .post_json("/sandbox/clock/advance", &app.key, json!({"seconds": -5}))
        .await;
    assert!(
        bad.expect_error(400, "invalid_request")
            .contains("`seconds`")
    );
}

#[tokio::test]
async fn first_advances_at_once_all_count() {
    let app = spawn_app_with_test_clock().await;
    let second = app.second_instance_with_clock(Clock::shared()).await;
    let before = app.clock.now_ms();
    let mut calls = tokio::task::JoinSet::new();
    for n in 0..8 {
        let base = if n % 2 == 0 {
            app.base_url.clone()
        } else {
            second.base_url.clone()
        };
        let (client, key) = (app.client.clone(), app.key.clone());
        calls.spawn(async move {
            client
                .post(format!("{base}/api/v1/sandbox/clock/advance"))
                .bearer_auth(key)
                .json(&json!({"seconds": 3600}))
                .send()
                .await
                .expect("send")
                .status()
                .as_u16()
        });
    }
    let statuses = calls.join_all().await;
    assert!(statuses.iter().all(|&status| status == 200), "{statuses:?}");
    assert_eq!(
        count(&app, "select offset_ms from test_clock where $1 = $1").await,
        8 * 3_600_000
    );
    app.clock.sync(&app.db).await.expect("sync");
    assert!(app.clock.now_ms() - before >= 8 * 3_600_000);
}

#[tokio::test]
async fn advance_clock_needs_a_server_started_with_test_clock() {
    let app = spawn_app().await;
    let refused = app
        .post_json("/sandbox/clock/advance", &app.key, json!({"seconds": 60}))
        .await;
    let message = refused.expect_error(409, "invalid_state");
    assert!(message.contains("--test-clock"), "{message}");
    assert_eq!(
        count(&app, "select count(*) from test_clock where $1 = $1").await,
        0
    );
}

const HELPERS: [&str; 7] = [
    "advance_clock",
    "list_sandbox_log",
    "sandbox_accept_invitation",
    "sandbox_reply",
    "sandbox_set_latency",
    "sandbox_set_sender_status",
    "sandbox_withdraw_invitation",
];

#[tokio::test]
async fn production_has_no_test_helpers_and_no_network() {
    let app = spawn_app_in("production").await;
    let openapi = app
        .send(
            reqwest::Method::GET,
            "/api/v1/openapi.json",
            crate::helpers::Auth::None,
            crate::helpers::Body::Empty,
        )
        .await;
    let text = openapi.expect(200).to_string();
    assert!(!text.contains("/sandbox"), "no sandbox route in OpenAPI");
    for name in HELPERS {
        assert!(
            !text.contains(name),
            "{name} is in the production OpenAPI document"
        );
    }
    let tools = app.mcp_tools(&app.key).await;
    for tool in &tools {
        let name = tool["name"].as_str().expect("a name");
        assert!(
            !HELPERS
                .iter()
                .any(|helper| name == format!("service_{helper}")),
            "{name} is listed in production"
        );
    }
    assert!(!tools.is_empty());
    for (method, path) in [
        (reqwest::Method::POST, "/api/v1/sandbox/invitations/accept"),
        (reqwest::Method::POST, "/api/v1/sandbox/replies"),
        (
            reqwest::Method::POST,
            "/api/v1/sandbox/senders/snd_x/status",
        ),
        (reqwest::Method::GET, "/api/v1/sandbox/log"),
        (reqwest::Method::POST, "/api/v1/sandbox/clock/advance"),
    ] {
        let response = app
            .send(
                method,
                path,
                crate::helpers::Auth::Key(&app.key),
                crate::helpers::Body::Json(json!({"seconds": 60})),
            )
            .await;
        response.expect_error(404, "not_found");
    }
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "service_advance_clock", "arguments": {"seconds": 60}}});
    let (_, _, body) = app.mcp_raw(Some(&app.key), &call).await;
    assert!(
        body.get("error").is_some() || body["result"]["isError"] == json!(true),
        "an unknown tool: {body}"
    );
    assert_eq!(
        count(&app, "select count(*) from test_clock where $1 = $1").await,
        0
    );

    // And production never falls back to the sandbox.
    let config = Config::new("https://api.example.test", Environment::new("production"));
    let refused = network_for(&config, &app.db, &app.clock).expect_err("no network");
    assert_eq!(refused.code.as_str(), "network_not_configured");
    assert_eq!(refused.status().as_u16(), 503);
    let development = Config::new("http://127.0.0.1", Environment::new("development"));
    assert!(matches!(
        network_for(&development, &app.db, &app.clock),
        Ok(Network::Sandbox(_))
    ));
}

#[tokio::test]
async fn outside_production_the_helpers_are_listed_and_documented() {
    let app = spawn_app().await;
    let tools = app.mcp_tools(&app.key).await;
    for helper in HELPERS {
        assert!(
            tools
                .iter()
                .any(|tool| tool["name"] == json!(format!("service_{helper}"))),
            "{helper} is not listed"
        );
    }
}

#[tokio::test]
async fn outreach_admin_sandbox_runs_the_helpers_from_a_script() {
    use crate::helpers::{TestDatabase, admin, admin_ok, field, outreach};
    let database = TestDatabase::create().await;
    let created = admin_ok(
        &database,
        &[
            "workspace",
            "create",
            "--name",
            "Demo",
            "--owner-email",
            "demo@acme.test",
        ],
    )
    .await;
    let workspace = field(&created, "workspace_id");
    // The sandbox plays the network of the workspace's own senders only.
    let refused = admin(
        &database,
        &[
            "sandbox",
            "set-sender-status",
            "--workspace",
            &workspace,
            "--sender",
            SENDER,
            "--status",
            "restricted",
        ],
    )
    .await;
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stdout).contains("No sender with id"),
        "{}",
        String::from_utf8_lossy(&refused.stdout)
    );
    let log = admin_ok(&database, &["sandbox", "log", "--workspace", &workspace]).await;
    assert_eq!(log["total"], json!(0), "{log}");
    let moved = admin_ok(
        &database,
        &["sandbox", "advance-clock", "--seconds", "3600"],
    )
    .await;
    let now = outreach_runtime::clock::parse_rfc3339(&field(&moved, "now")).expect("a time");
    assert!(now >= Clock::default().now_ms() + 3_500_000, "{moved}");
    let refused = admin(
        &database,
        &[
            "sandbox",
            "accept",
            "--workspace",
            &workspace,
            "--prospect",
            "prs_00000000000NoSuchOne",
            "--sender",
            SENDER,
        ],
    )
    .await;
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stdout).contains("No sender with id"),
        "{}",
        String::from_utf8_lossy(&refused.stdout)
    );
    let refused = admin(
        &database,
        &[
            "sandbox",
            "withdraw",
            "--workspace",
            &workspace,
            "--prospect",
            "prs_00000000000NoSuchOne",
            "--sender",
            SENDER,
        ],
    )
    .await;
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stdout).contains("No sender with id"),
        "{}",
        String::from_utf8_lossy(&refused.stdout)
    );

    let mut command = outreach();
    command.env("OUTREACH_ENV", "production").args([
        "admin",
        "--database-url",
        database.url(),
        "--json",
        "sandbox",
        "advance-clock",
        "--seconds",
        "60",
    ]);
    let output = command.output().await.expect("run outreach");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("do not exist in production"), "{stderr}");
}
