//! Registry-wide checks: every action, over REST and over MCP, answers alike.
//!
//! The tests walk `Registry::build()` rather than a hand-written list, so a new action is covered
//! the day it is registered: it needs a `parity!` fixture beside it (the parity test fails until it
//! has one; `outreach_runtime::fixtures` says how to write one), and the refusal tests (no
//! credential, a too-small scope) cover it with no fixture at all.
//!
//! A fixture's input names objects of a [`World`] made through the API. A read action is called on
//! both faces against the same world and must answer byte-for-byte alike; a write action gets one
//! world per face, and the answers must be equal once each world's ids, the new ids and the times
//! are replaced by symbols. Each failure input must give the same `{error, code}` on both faces.

use outreach_actions::network::DEFAULT_SANDBOX_SEED;
use outreach_actions::network::sandbox::fate;
use outreach_actions::network::{Account, NetworkProvider, Outbound, Sandbox};
use outreach_actions::sandbox_helpers::{AcceptInvitationInput, accept_invitation};
use outreach_runtime::fixtures::{self, ActionFixture, FixtureKind, WORLD};
use serde_json::{Value, json};

use crate::helpers::{ApiResponse, Auth, TestApp, spawn_app_on_test_clock_with};

/// The objects a fixture's input may name, made through the API so they are real: a prospect, a
/// targeting, a list holding the prospect, an import and a scoring run of the prospect.
struct World {
    /// A marker unique to this world, for names that must be unique in a workspace.
    tag: String,
    number: usize,
    prospect: String,
    targeting: String,
    list: String,
    import: String,
    run: String,
    conversation: String,
    /// A prospect with a profile URL, invited on the sandbox network by `pending_sender`,
    /// `withdrawing_sender` and `connected_sender`, and connected with the last.
    contact: String,
    profile_url: String,
    pending_sender: String,
    /// Whose pending invitation `sandbox_withdraw_invitation` withdraws (the TypeScript replay
    /// shares one contact among its worlds, so acceptance and withdrawal need a sender each).
    withdrawing_sender: String,
    connected_sender: String,
    /// A sender whose sandbox account `sandbox_set_sender_status` may change (the others must
    /// stay connected).
    status_sender: String,
    /// A sender that nothing uses (what `delete_sender` may delete).
    spare_sender: String,
    /// A connected sender, and sequences in `draft` (with the sender and steps), `active` and
    /// `paused` (the same, started and paused).
    sender: String,
    draft: String,
    active: String,
    paused: String,
    /// Three reachable prospects enrolled in `active`: the first approved (`scheduled`), the
    /// second pending, the third approved and paused.
    reachable: Vec<String>,
    scheduled: String,
    pending_approval: String,
    paused_enrollment: String,
    /// A prospector agent over the world's targeting, list and draft sequence.
    agent: String,
    /// A writer agent over the world's list and draft sequence, and its run, still `queued`.
    runner: String,
    agent_run: String,
    /// What this world's reachable prospects' profile URLs have in common (`world-<n>-`).
    reachable_slug: String,
    /// The `sequence.paused` event of `paused`.
    event: String,
    /// A webhook endpoint taking `sequence.paused`, at a loopback port nothing answers.
    webhook_endpoint: String,
    dnc_entry: String,
    /// A draft sequence whose second step (`s2`) has A/B variants `a` and `b`.
    variants: String,
}

/// The prospect each world holds. It has no profile URL and no email (each is unique in a
/// workspace), so it can be created twice alike.
fn target_body() -> Value {
    json!({
        "first_name": "Ada",
        "last_name": "Lovelace",
        "headline": "Poet of numbers",
        "title": "Engineer",
        "seniority": "senior",
        "company_name": "Analytical Engines",
        "company_domain": "engines.test",
        "tags": ["vip"],
        "custom_fields": {"met_at": "conference", "rank": 3},
    })
}

fn criteria() -> Value {
    json!({
        "titles": {"include": [{"value": "engineer", "points": 60}], "exclude": ["intern"]},
        "seniorities": [{"value": "senior", "points": 40}],
    })
}

fn id_of(response: &ApiResponse, what: &str) -> String {
    assert!(
        response.status.is_success(),
        "making the world's {what}: {} {}",
        response.status,
        response.body
    );
    response.body["id"]
        .as_str()
        .unwrap_or_else(|| panic!("the {what} has no id: {}", response.body))
        .to_owned()
}

impl World {
    async fn make(app: &TestApp, number: usize) -> Self {
        let tag = format!("(world {number})");
        let key = &app.key;
        let prospect = id_of(
            &app.post_json("/prospects", key, target_body()).await,
            "prospect",
        );
        let targeting = app
            .post_json(
                "/targetings",
                key,
                json!({"name": format!("ICP {tag}"), "criteria": criteria()}),
            )
            .await;
        let targeting = id_of(&targeting, "targeting");
        let list = id_of(
            &app.post_json("/lists", key, json!({"name": format!("List {tag}")}))
                .await,
            "list",
        );
        let added = app
            .post_json(
                &format!("/lists/{list}/prospects"),
                key,
                json!({"prospect_ids": [prospect]}),
            )
            .await;
        assert!(
            added.status.is_success(),
            "adding the world's prospect to its list: {}",
            added.body
        );
        let rows = json!({"rows": [{"first_name": "Imported", "email": format!("imported-{number}@engines.test")}]});
        let import = id_of(&app.post_json("/imports", key, rows).await, "import");
        let run = app
            .post_json(
                "/scoring-runs",
                key,
                json!({"targeting_id": targeting, "prospect_ids": [prospect]}),
            )
            .await;
        let run = id_of(&run, "scoring run");
        let sender = app
            .post_json(
                "/senders",
                key,
                json!({"name": format!("Sender {tag}"), "timezone": "Europe/Berlin"}),
            )
            .await;
        let sender = id_of(&sender, "sender");
        let conversation = world_conversation(app, &sender, &prospect).await;
        let spare_sender = app
            .post_json(
                "/senders",
                key,
                json!({"name": format!("Spare sender {tag}"), "timezone": "UTC"}),
            )
            .await;
        let spare_sender = id_of(&spare_sender, "spare sender");
        let new_sender = async |name: &str| {
            let created = app
                .post_json(
                    "/senders",
                    key,
                    json!({"name": format!("{name} {tag}"), "timezone": "UTC"}),
                )
                .await;
            id_of(&created, name)
        };
        let pending_sender = new_sender("Pending sender").await;
        let withdrawing_sender = new_sender("Withdrawing sender").await;
        let connected_sender = new_sender("Connected sender").await;
        let status_sender = new_sender("Status sender").await;
        let (contact, profile_url) = sandbox_contact(
            app,
            number,
            &[&pending_sender, &withdrawing_sender],
            &connected_sender,
        )
        .await;
        let send = crate::sequences::send_key(app).await;
        let sequence = |name: &str| {
            json!({"name": format!("{name} {tag}"), "steps": crate::sequences::steps(), "sender_ids": [sender],
                   "settings": {"skip_if_in_other_live_sequence": false}})
        };
        let draft = id_of(
            &app.post_json("/sequences", key, sequence("Draft")).await,
            "sequence",
        );
        let active = id_of(
            &app.post_json("/sequences", key, sequence("Active")).await,
            "sequence",
        );
        let paused = id_of(
            &app.post_json("/sequences", key, sequence("Paused")).await,
            "sequence",
        );
        let mut reachable = Vec::new();
        for i in 0..3 {
            let body = json!({"first_name": format!("Reachable{i}"), "company_name": "Engines",
                              "profile_url": format!("https://linkedin.com/in/world-{number}-{i}")});
            reachable.push(id_of(
                &app.post_json("/prospects", key, body).await,
                "prospect",
            ));
        }
        let added = app
            .post_json(
                &format!("/sequences/{active}/enrollments"),
                key,
                json!({"prospect_ids": reachable}),
            )
            .await;
        assert!(
            added.status.is_success(),
            "enrolling the world's prospects: {}",
            added.body
        );
        let field = |i: usize, name: &str| {
            added.body["enrollments"][i][name]
                .as_str()
                .expect("an enrollment")
                .to_owned()
        };
        let (scheduled, pending_approval, paused_enrollment) = (
            field(0, "enrollment_id"),
            field(1, "approval_id"),
            field(2, "enrollment_id"),
        );
        let approve = json!({"ids": [field(0, "approval_id"), field(2, "approval_id")]});
        for (path, body) in [
            ("/approvals/approve".to_owned(), approve),
            (format!("/enrollments/{paused_enrollment}/pause"), json!({})),
            (format!("/sequences/{active}/activate"), json!({})),
            (format!("/sequences/{paused}/activate"), json!({})),
            (format!("/sequences/{paused}/pause"), json!({})),
        ] {
            let done = app.post_json(&path, &send, body).await;
            assert!(
                done.status.is_success(),
                "making the world: {path}: {}",
                done.body
            );
        }
        let webhook_endpoint = world_endpoint(app, number, &tag).await;
        let dnc = app
            .post_json(
                "/do-not-contact",
                key,
                json!({"entries": [{"kind": "domain", "value": format!("world-{number}.example")}]}),
            )
            .await;
        let dnc_entry = dnc.expect(200)["entries"][0]["id"]
            .as_str()
            .expect("a do-not-contact entry")
            .to_owned();
        let variants = app
            .post_json(
                "/sequences",
                key,
                json!({"name": format!("Variants {tag}"), "steps": [
                    {"type": "connection_request"},
                    {"type": "message", "delay_hours": 24, "variants": [
                        {"text": "Hi {{first_name|there}}, A."}, {"text": "Hi {{first_name|there}}, B."}]}
                ]}),
            )
            .await;
        let variants = id_of(&variants, "sequence with variants");
        let paused_event = app.get("/events?type=sequence.paused&limit=200", key).await;
        let event = paused_event.expect(200)["items"]
            .as_array()
            .and_then(|items| {
                items
                    .iter()
                    .find(|item| item["data"]["sequence_id"] == json!(paused))
            })
            .and_then(|item| item["id"].as_str())
            .unwrap_or_else(|| panic!("no sequence.paused event of {paused}"))
            .to_owned();
        let agent = app
            .post_json(
                "/agents",
                key,
                json!({"name": format!("Finder {tag}"), "kind": "prospector", "targeting_id": targeting,
                       "list_id": list, "sequence_id": draft}),
            )
            .await;
        let agent = id_of(&agent, "agent");
        let runner = app
            .post_json(
                "/agents",
                key,
                json!({"name": format!("Writer {tag}"), "kind": "writer", "list_id": list, "sequence_id": draft}),
            )
            .await;
        let runner = id_of(&runner, "writer agent");
        let agent_run = id_of(
            &app.post_json(&format!("/agents/{runner}/run"), key, json!({}))
                .await,
            "agent run",
        );
        Self {
            tag,
            number,
            prospect,
            targeting,
            list,
            import,
            run,
            conversation,
            contact,
            profile_url,
            pending_sender,
            withdrawing_sender,
            connected_sender,
            status_sender,
            spare_sender,
            sender,
            draft,
            active,
            paused,
            reachable,
            scheduled,
            pending_approval,
            paused_enrollment,
            agent,
            runner,
            agent_run,
            reachable_slug: format!("world-{number}-"),
            event,
            webhook_endpoint,
            dnc_entry,
            variants,
        }
    }

    /// The value of one of the names a fixture may use ([`WORLD`]).
    fn value(&self, name: &str) -> Option<Value> {
        let text = |value: &str| Some(Value::from(value));
        match name {
            "tag" => text(&self.tag),
            "number" => text(&self.number.to_string()),
            "prospect" => text(&self.prospect),
            "targeting" => text(&self.targeting),
            "list" => text(&self.list),
            "import" => text(&self.import),
            "run" => text(&self.run),
            "sender" => text(&self.sender),
            "spare_sender" => text(&self.spare_sender),
            "status_sender" => text(&self.status_sender),
            "pending_sender" => text(&self.pending_sender),
            "withdrawing_sender" => text(&self.withdrawing_sender),
            "connected_sender" => text(&self.connected_sender),
            "contact" => text(&self.contact),
            "conversation" => text(&self.conversation),
            "draft" => text(&self.draft),
            "active" => text(&self.active),
            "paused" => text(&self.paused),
            "reachable" => Some(json!(self.reachable)),
            "reachable_0" => text(&self.reachable[0]),
            "scheduled" => text(&self.scheduled),
            "pending_approval" => text(&self.pending_approval),
            "paused_enrollment" => text(&self.paused_enrollment),
            "agent" => text(&self.agent),
            "runner" => text(&self.runner),
            "agent_run" => text(&self.agent_run),
            "event" => text(&self.event),
            "webhook_endpoint" => text(&self.webhook_endpoint),
            "dnc_entry" => text(&self.dnc_entry),
            "variants" => text(&self.variants),
            _ => None,
        }
    }

    /// A fixture's template with this world's values put in.
    fn input(&self, template: &Value, action: &str) -> Value {
        fixtures::instantiate(template, &|name| self.value(name))
            .unwrap_or_else(|error| panic!("{action}'s parity fixture: {error}"))
    }

    /// This world's ids and tag, with the symbols they stand for in a comparison.
    fn symbols(&self) -> Vec<(&str, &'static str)> {
        vec![
            // Before `world-<n>-`, which it contains (its suffix is the first reachable one of
            // its world, so two worlds' may differ).
            (self.profile_url.as_str(), "<profile_url>"),
            (self.agent.as_str(), "<agent>"),
            (self.runner.as_str(), "<runner>"),
            (self.reachable_slug.as_str(), "world-<n>-"),
            (self.agent_run.as_str(), "<agent run>"),
            (self.event.as_str(), "<event>"),
            (self.webhook_endpoint.as_str(), "<webhook endpoint>"),
            (self.dnc_entry.as_str(), "<dnc entry>"),
            (self.variants.as_str(), "<variants>"),
            (self.conversation.as_str(), "<conversation>"),
            (self.spare_sender.as_str(), "<spare sender>"),
            (self.pending_sender.as_str(), "<pending sender>"),
            (self.withdrawing_sender.as_str(), "<withdrawing sender>"),
            (self.connected_sender.as_str(), "<connected sender>"),
            (self.status_sender.as_str(), "<status sender>"),
            (self.contact.as_str(), "<contact>"),
            (self.prospect.as_str(), "<prospect>"),
            (self.targeting.as_str(), "<targeting>"),
            (self.list.as_str(), "<list>"),
            (self.import.as_str(), "<import>"),
            (self.run.as_str(), "<run>"),
            (self.sender.as_str(), "<sender>"),
            (self.draft.as_str(), "<draft>"),
            (self.active.as_str(), "<active>"),
            (self.paused.as_str(), "<paused>"),
            (self.reachable[0].as_str(), "<reachable 0>"),
            (self.reachable[1].as_str(), "<reachable 1>"),
            (self.reachable[2].as_str(), "<reachable 2>"),
            (self.scheduled.as_str(), "<scheduled>"),
            (self.pending_approval.as_str(), "<pending approval>"),
            (self.paused_enrollment.as_str(), "<paused enrollment>"),
            (self.tag.as_str(), "<tag>"),
        ]
    }
}

/// A conversation with one inbound message, stored the way the network's ingestion stores one.
async fn world_conversation(app: &TestApp, sender: &str, prospect: &str) -> String {
    use outreach_actions::conversations::{Inbound, record_inbound};
    let mut conn = app.db.pool().acquire().await.expect("a connection");
    let now = app.clock.now_ms();
    let inbound = Inbound {
        workspace_id: &app.workspace_id,
        sender_id: sender,
        prospect_id: prospect,
        text: "Happy to talk next week.",
        at_ms: now,
        provider_message_id: &format!("world-{prospect}"),
    };
    let mut locked = outreach_actions::person_lock::lock(&mut conn, &app.workspace_id, [prospect])
        .await
        .expect("the person's lock");
    record_inbound(&mut locked, &inbound, now)
        .await
        .expect("record the world's inbound message");
    drop(locked);
    let row = sqlx::query("select id from conversations where prospect_id = $1")
        .bind(prospect)
        .fetch_one(&mut *conn)
        .await
        .expect("the world's conversation");
    sqlx::Row::get(&row, "id")
}

/// A prospect with a profile URL the sandbox can reach, invited by every sender; the connected
/// sender's invitation is accepted.
async fn sandbox_contact(
    app: &TestApp,
    number: usize,
    pending_senders: &[&str],
    connected_sender: &str,
) -> (String, String) {
    let mut suffix = 0;
    let profile_url = loop {
        let url = format!("linkedin.com/in/babbage-world-{number}-{suffix}");
        if !fate(DEFAULT_SANDBOX_SEED, &url).unreachable {
            break url;
        }
        suffix += 1;
    };
    let contact = app
        .post_json(
            "/prospects",
            &app.key,
            json!({"first_name": "Charles", "last_name": "Babbage", "profile_url": format!("https://www.{profile_url}")}),
        )
        .await;
    let contact = id_of(&contact, "contact");
    let sandbox = Sandbox::new(app.db.clone(), app.clock.clone(), DEFAULT_SANDBOX_SEED);
    for &sender_id in pending_senders.iter().chain([&connected_sender]) {
        let to = Outbound {
            account: Account {
                workspace_id: &app.workspace_id,
                sender_id,
            },
            profile_url: &profile_url,
            prospect_id: Some(&contact),
            intent: "parity",
        };
        sandbox.invite(to, None).await.expect("invite the contact");
    }
    let mut tx = app.db.begin_write().await.expect("begin");
    let input = AcceptInvitationInput {
        prospect_id: contact.clone(),
        sender_id: connected_sender.to_owned(),
    };
    accept_invitation(&mut tx, &app.clock, &app.workspace_id, &input)
        .await
        .expect("accept the connected sender's invitation");
    tx.commit().await.expect("commit");
    (contact, profile_url)
}

/// An app whose workspace can pay for every priced call the fixtures make.
/// Its clock is a shared test clock, so `advance_clock` can succeed.
async fn funded_app() -> TestApp {
    // No job worker: what the worlds approve stays as it was made while both faces are compared.
    // No rate limit either: the walk makes well over a burst of calls with one key.
    let app = spawn_app_on_test_clock_with(|config| {
        config.jobs.workers = 0;
        config.rate_limit.per_second = 0;
    })
    .await;
    app.grant_credits(1_000_000).await;
    app
}

/// Whether `text` has the shape of an id (`abc_` and 20 letters and digits).
fn is_id(text: &str) -> bool {
    text.split_once('_').is_some_and(|(prefix, rest)| {
        prefix.len() == 3
            && prefix.bytes().all(|b| b.is_ascii_lowercase())
            && rest.len() == 20
            && rest.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// The world's webhook endpoint. A workspace holds at most 16, and a run makes a world or two
/// per action, so the endpoints of worlds no longer used (all but the shared world 0 and the one
/// made just before, which an action may use beside this one) are deleted first.
async fn world_endpoint(app: &TestApp, number: usize, tag: &str) -> String {
    let key = &app.key;
    let listed = app.get("/webhook-endpoints?limit=200", key).await;
    for item in listed.expect(200)["items"].as_array().into_iter().flatten() {
        let description = item["description"].as_str().unwrap_or_default();
        let Some(owner) = description
            .strip_prefix("Endpoint (world ")
            .and_then(|rest| rest.strip_suffix(')'))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if owner != 0 && owner + 1 != number {
            let id = item["id"].as_str().unwrap_or_default();
            app.delete(&format!("/webhook-endpoints/{id}"), key)
                .await
                .expect(200);
        }
    }
    let made = app
        .post_json(
            "/webhook-endpoints",
            key,
            json!({"url": "http://127.0.0.1:9/hooks", "event_types": ["sequence.paused"],
                   "description": format!("Endpoint {tag}")}),
        )
        .await;
    id_of(&made, "webhook endpoint")
}

/// Rewrites what differs by nature between two worlds: the world's ids and tag become symbols,
/// new ids and times become markers. What remains must be equal on both faces.
fn normalise(value: &Value, world: &World, key: &str) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| (key.clone(), normalise(value, world, key)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| normalise(item, world, key))
                .collect(),
        ),
        // How long a call to another server took, and a secret made for the call.
        Value::Number(_) if key.ends_with("_ms") => Value::from("<ms>"),
        Value::String(_) if key == "secret" => Value::from("<secret>"),
        Value::String(text) => {
            let mut text = text.clone();
            for (from, to) in world.symbols() {
                text = text.replace(from, to);
            }
            if is_id(&text) {
                text = format!("<new {}>", &text[..3]);
            } else if (key.ends_with("_at") || key == "at" || key == "now") && !text.is_empty() {
                text = "<time>".to_owned();
            }
            Value::String(text)
        }
        other => other.clone(),
    }
}

fn tool_name(name: &str) -> String {
    format!("service_{name}")
}

/// The parity fixture of `action`, declared beside it with `parity!`.
fn fixture(action: &str) -> Option<&'static ActionFixture> {
    fixtures::fixtures()
        .expect("one fixture per action")
        .get(action)
        .copied()
}

#[tokio::test]
async fn every_action_has_a_fixture_and_every_fixture_an_action() {
    let app = funded_app().await;
    let actions: Vec<&str> = app.registry.actions().iter().map(|a| a.name()).collect();
    let without: Vec<&&str> = actions
        .iter()
        .filter(|name| fixture(name).is_none())
        .collect();
    assert!(
        without.is_empty(),
        "actions without a parity fixture (declare one beside each with `parity!`): {without:?}"
    );
    let registered = fixtures::fixtures().expect("one fixture per action");
    let stray: Vec<&&str> = registered
        .keys()
        .filter(|name| !actions.contains(name))
        .collect();
    assert!(stray.is_empty(), "fixtures of no action: {stray:?}");

    // Every name a fixture uses is one a world holds, and every name of [`WORLD`] has a value.
    let world = World::make(&app, 0).await;
    for (name, _) in WORLD {
        assert!(world.value(name).is_some(), "the world has no `{name}`");
    }
    for (action, fixture) in registered {
        world.input(&(fixture.success)(), action);
        world.input(&(fixture.failure)(), action);
    }
}

#[tokio::test]
async fn every_action_answers_the_same_over_rest_and_mcp() {
    let app = funded_app().await;
    let mut worlds = 0;
    let shared = World::make(&app, worlds).await;
    let send = crate::sequences::send_key(&app).await;
    // `advance_clock` plays out what is due (the shared world's queued run, its scheduled
    // steps), which other fixtures rely on finding as they are: it goes last.
    let mut actions: Vec<_> = app.registry.actions().iter().collect();
    actions.sort_by_key(|action| action.name() == "advance_clock");
    for action in actions {
        let name = action.name();
        // The send-scoped actions need a key that holds `send`; the rest use the owner's key.
        let key = if action.def.scope == outreach_runtime::Scope::Send {
            &send
        } else {
            &app.key
        };
        let fixture = fixture(name).unwrap_or_else(|| panic!("{name} has no parity fixture"));
        let own_worlds = if fixture.kind == FixtureKind::Write {
            worlds += 2;
            Some((
                World::make(&app, worlds - 1).await,
                World::make(&app, worlds).await,
            ))
        } else {
            None
        };
        let (rest_world, mcp_world) = own_worlds
            .as_ref()
            .map_or((&shared, &shared), |(rest, mcp)| (rest, mcp));

        let rest_input = rest_world.input(&(fixture.success)(), name);
        let mcp_input = mcp_world.input(&(fixture.success)(), name);
        let rest = app.rest_call(action, Auth::Key(key), &rest_input).await;
        assert!(
            rest.status.is_success(),
            "{name} over REST with {rest_input}: {} {}",
            rest.status,
            rest.body
        );
        assert_eq!(
            rest.status,
            action.success_status(),
            "{name}: the documented success status"
        );
        let (is_error, mcp) = app.mcp_call(key, &tool_name(name), mcp_input.clone()).await;
        assert!(!is_error, "{name} over MCP with {mcp_input}: {mcp}");
        if fixture.kind == FixtureKind::Write {
            assert_eq!(
                normalise(&rest.body, rest_world, ""),
                normalise(&mcp, mcp_world, ""),
                "{name}: REST and MCP outputs differ beyond ids and times"
            );
        } else if fixture.kind == FixtureKind::TimedRead {
            assert_eq!(
                normalise(&rest.body, &shared, ""),
                normalise(&mcp, &shared, ""),
                "{name}: REST and MCP outputs differ beyond times"
            );
        } else {
            assert_eq!(rest.body, mcp, "{name}: REST and MCP outputs differ");
        }

        let failure = shared.input(&(fixture.failure)(), name);
        let rest = app.rest_call(action, Auth::Key(key), &failure).await;
        let (is_error, mcp) = app.mcp_call(key, &tool_name(name), failure.clone()).await;
        assert!(
            is_error,
            "{name} over MCP with {failure} should fail: {mcp}"
        );
        assert_eq!(
            rest.code(),
            fixture.failure_code.as_str(),
            "{name} over REST with {failure}: {}",
            rest.body
        );
        assert!(rest.status.is_client_error(), "{name}: {}", rest.status);
        assert_eq!(
            rest.body, mcp,
            "{name}: the error differs between REST and MCP"
        );
        assert!(
            mcp["error"].as_str().is_some_and(|error| !error.is_empty()),
            "{name}: {mcp}"
        );
    }
}

/// What a refused call must leave as it was: counts and the world's objects.
async fn snapshot(app: &TestApp, world: &World) -> Vec<Value> {
    let mut state = Vec::new();
    for path in [
        "/prospects?limit=1".to_owned(),
        "/lists?limit=1".to_owned(),
        "/targetings?limit=1".to_owned(),
        "/imports?limit=1".to_owned(),
        "/scoring-runs?limit=1".to_owned(),
        "/senders?limit=1".to_owned(),
        format!("/prospects/{}", world.prospect),
        format!("/lists/{}", world.list),
        format!("/targetings/{}", world.targeting),
        "/workspace".to_owned(),
    ] {
        state.push(app.get(&path, &app.key).await.expect(200).clone());
    }
    state
}

#[tokio::test]
async fn every_action_refuses_an_unauthenticated_call_on_both_faces() {
    let app = funded_app().await;
    let world = World::make(&app, 0).await;
    let before = snapshot(&app, &world).await;
    for action in app.registry.actions() {
        let name = action.name();
        let input = fixture(name).map_or_else(
            || json!({}),
            |fixture| world.input(&(fixture.success)(), name),
        );
        if action.route.is_some() {
            let rest = app.rest_call(action, Auth::None, &input).await;
            rest.expect_error(401, "unauthenticated");
            let challenge = rest
                .header("www-authenticate")
                .unwrap_or_else(|| panic!("{name}: 401 without WWW-Authenticate"));
            assert!(
                challenge.starts_with("Bearer resource_metadata=\""),
                "{name}: {challenge}"
            );
            assert!(
                !challenge.contains("error="),
                "{name}: no credential was sent, so no error= in {challenge}"
            );
        }

        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool_name(name), "arguments": input}});
        let (status, headers, body) = app.mcp_raw(None, &call).await;
        assert_eq!(
            status.as_u16(),
            401,
            "{name} over MCP without a key: {body}"
        );
        assert_eq!(body["code"], json!("unauthenticated"), "{name}: {body}");
        let challenge = headers
            .get("www-authenticate")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        assert!(
            challenge.contains("resource_metadata=") && challenge.contains("/api/mcp"),
            "{name}: {challenge}"
        );
    }
    assert_eq!(
        snapshot(&app, &world).await,
        before,
        "an unauthenticated call changed something"
    );
}

#[tokio::test]
async fn every_action_above_read_refuses_a_read_only_key_on_both_faces() {
    let app = funded_app().await;
    let read_key = app.read_key().await;
    let world = World::make(&app, 0).await;
    let settings = format!("{}/settings/api", app.base_url);
    let mut refused = 0;
    for action in app.registry.actions() {
        let name = action.name();
        let scope = action.def.scope.as_str();
        let fixture = fixture(name);
        let input = fixture.map_or_else(
            || json!({}),
            |fixture| world.input(&(fixture.success)(), name),
        );
        if scope == "read" {
            // Within scope: a fixture's input succeeds; any input gets past the scope check.
            let (is_error, body) = app
                .mcp_call(&read_key, &tool_name(name), input.clone())
                .await;
            if fixture.is_some() {
                assert!(!is_error, "{name} with a read key over MCP: {body}");
                if action.route.is_some() {
                    let rest = app.rest_call(action, Auth::Key(&read_key), &input).await;
                    assert!(
                        rest.status.is_success(),
                        "{name} with a read key: {}",
                        rest.body
                    );
                }
            } else {
                assert_ne!(body["code"], json!("insufficient_scope"), "{name}: {body}");
            }
            continue;
        }
        refused += 1;
        let before = snapshot(&app, &world).await;

        let (is_error, mcp) = app
            .mcp_call(&read_key, &tool_name(name), input.clone())
            .await;
        assert!(
            is_error,
            "{name} over MCP with a read key should fail: {mcp}"
        );
        if action.route.is_some() {
            let rest = app.rest_call(action, Auth::Key(&read_key), &input).await;
            let message = rest.expect_error(403, "insufficient_scope");
            assert!(
                message.contains(&format!("`{scope}`")),
                "{name}: the sentence names the scope: {message}"
            );
            assert!(
                message.contains(&settings),
                "{name}: the sentence points to {settings}: {message}"
            );
            assert_eq!(
                rest.body["required_scope"],
                json!(scope),
                "{name}: {}",
                rest.body
            );
            let challenge = rest.header("www-authenticate").unwrap_or_default();
            assert!(
                challenge.contains("error=\"insufficient_scope\"") && challenge.contains(scope),
                "{name}: {challenge}"
            );
            assert_eq!(
                rest.body, mcp,
                "{name}: the refusal differs between REST and MCP"
            );
        } else {
            assert_eq!(mcp["code"], json!("insufficient_scope"), "{name}: {mcp}");
        }
        assert_eq!(
            snapshot(&app, &world).await,
            before,
            "{name}: a refused call changed something"
        );
    }
    assert!(refused > 0, "no action above `read` to check");
}
