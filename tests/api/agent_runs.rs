//! Agent runs end to end, through the API, the scheduler and the sandbox network with a moved
//! clock: a run is priced, reserved and queued at once, executed by the job, charged per prospect
//! processed with the rest released; its proposals wait for a person (whatever the caller's scope,
//! unless the agent is autonomous and the caller holds `send`), expire after 72 hours, and once
//! approved go out within the sender's hours and limits; an `inbox_triage` run reads the replies.

use std::collections::HashSet;
use std::str::FromStr;

use serde_json::{Value, json};
use sqlx::Row;

use crate::helpers::{HeldBack, TestApp};
use crate::outreach::{advance, always, no_worker_app, quiet_profile, settle};
use crate::sequences::send_key;

const HOUR_S: i64 = 3600;

fn id(value: &Value) -> String {
    value["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {value}"))
        .to_owned()
}

/// A workspace ready for a prospector: a sender working around the clock, a targeting that wants
/// heads of sales, a list, a draft sequence (an invitation, then a message), and prospects.
pub struct Setup {
    pub app: TestApp,
    pub send: String,
    pub sender: String,
    pub targeting: String,
    pub list: String,
    pub sequence: String,
    /// Heads of sales the sandbox leaves alone (tier b against the targeting).
    pub matching: Vec<String>,
    /// Interns (tier d), a do-not-contact head of sales, and one with no profile URL.
    pub others: Vec<String>,
}

impl Setup {
    pub async fn new(matching: usize) -> Self {
        let app = no_worker_app().await;
        app.grant_credits(1_000).await;
        let send = send_key(&app).await;
        let sender = app
            .post_json(
                "/senders",
                &app.key,
                json!({"name": "Ada's account", "timezone": "UTC", "working_hours": always()}),
            )
            .await;
        let sender = id(sender.expect(201));
        let targeting = app
            .post_json(
                "/targetings",
                &app.key,
                json!({"name": "Sales leaders", "criteria": {
                    "titles": {"include": [{"value": "head of sales", "points": 60}]},
                    "seniorities": [{"value": "vp", "points": 40}],
                }}),
            )
            .await;
        let targeting = id(targeting.expect(201));
        let list = app
            .post_json("/lists", &app.key, json!({"name": "Found by the agent"}))
            .await;
        let list = id(list.expect(201));
        let sequence = app
            .post_json(
                "/sequences",
                &app.key,
                json!({
                    "name": "Sales leaders outreach",
                    "sender_ids": [sender],
                    "settings": {"stop_on_reply": false},
                    "steps": [
                        {"type": "connection_request", "delay_hours": 0, "note": "Hi {{first_name}}, I work with sales teams like {{company_name|yours}}."},
                        {"type": "message", "delay_hours": 48, "text": "Thanks for connecting, {{first_name}}!"},
                    ],
                }),
            )
            .await;
        let sequence = id(sequence.expect(201));
        let mut setup = Self {
            app,
            send,
            sender,
            targeting,
            list,
            sequence,
            matching: Vec::new(),
            others: Vec::new(),
        };
        for n in 0..matching {
            let prospect = setup
                .prospect(&format!("Lead{n}"), "Head of Sales", true)
                .await;
            setup.matching.push(prospect);
        }
        let intern = setup.prospect("Intern", "Sales Intern", true).await;
        let blocked = setup.prospect("Blocked", "Head of Sales", true).await;
        setup
            .app
            .patch_json(
                &format!("/prospects/{blocked}"),
                &setup.app.key,
                json!({"do_not_contact": true}),
            )
            .await
            .expect(200);
        let unreachable = setup.prospect("Nowhere", "Head of Sales", false).await;
        setup.others = vec![intern, blocked, unreachable];
        setup
    }

    /// The first matching prospect, proposed by a prospector run, approved into the active
    /// sequence, invited and connected: ready to reply. Returns the prospect's id.
    pub async fn connected_lead(&self) -> String {
        let app = &self.app;
        let lead = self.matching[0].clone();
        let agent = self.prospector(json!({})).await;
        let run = id(&self.run(&agent, &app.key, json!({})).await);
        settle(app).await;
        app.post_json(
            &format!("/sequences/{}/activate", self.sequence),
            &self.send,
            json!({}),
        )
        .await
        .expect(200);
        app.post_json("/approvals/approve", &self.send, json!({"run_id": run}))
            .await
            .expect(200);
        settle(app).await;
        app.post_json(
            "/sandbox/invitations/accept",
            &app.key,
            json!({"prospect_id": lead, "sender_id": self.sender}),
        )
        .await
        .expect(200);
        lead
    }

    /// `lead` replies `text` to the sender in the sandbox, and the jobs it starts run.
    pub async fn reply(&self, lead: &str, text: &str) {
        self.app
            .post_json(
                "/sandbox/replies",
                &self.app.key,
                json!({"prospect_id": lead, "sender_id": self.sender, "text": text}),
            )
            .await
            .expect(200);
        settle(&self.app).await;
    }

    async fn prospect(&self, first_name: &str, title: &str, reachable: bool) -> String {
        let mut body = json!({"first_name": first_name, "title": title, "company_name": "Acme"});
        if reachable {
            body["profile_url"] = json!(format!(
                "https://www.{}",
                quiet_profile(&first_name.to_lowercase())
            ));
        }
        id(&self.app.create_prospect(body).await)
    }

    /// A prospector over the setup's targeting, list and sequence.
    pub async fn prospector(&self, extra: Value) -> String {
        self.agent(
            json!({"name": "Finder", "kind": "prospector", "targeting_id": self.targeting,
                   "list_id": self.list, "sequence_id": self.sequence}),
            extra,
        )
        .await
    }

    /// An inbox_triage agent, with `extra` fields.
    pub async fn triage(&self, extra: Value) -> String {
        self.agent(json!({"name": "Inbox", "kind": "inbox_triage"}), extra)
            .await
    }

    async fn agent(&self, mut body: Value, extra: Value) -> String {
        for (key, value) in extra.as_object().expect("an object") {
            body[key] = value.clone();
        }
        id(self
            .app
            .post_json("/agents", &self.app.key, body)
            .await
            .expect(201))
    }

    pub async fn run(&self, agent: &str, key: &str, body: Value) -> Value {
        let started = self
            .app
            .post_json(&format!("/agents/{agent}/run"), key, body)
            .await;
        started.expect(200).clone()
    }

    pub async fn get_run(&self, run: &str) -> Value {
        self.app
            .get(&format!("/runs/{run}"), &self.app.key)
            .await
            .expect(200)
            .clone()
    }

    pub async fn balance(&self) -> i64 {
        let row = sqlx::query("select credits_balance from workspaces where id = $1")
            .bind(&self.app.workspace_id)
            .fetch_one(self.app.db.pool())
            .await
            .expect("the balance");
        row.get(0)
    }

    /// What the sandbox network received, oldest first: (kind, text).
    pub async fn network_log(&self) -> Vec<(String, String)> {
        let page = self.app.get("/sandbox/log?limit=200", &self.app.key).await;
        page.expect(200)["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter(|entry| entry["kind"] != json!("view"))
            .map(|entry| {
                (
                    entry["kind"].as_str().unwrap_or_default().to_owned(),
                    entry["text"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    pub async fn approvals(&self, query: &str) -> Vec<Value> {
        self.app
            .get(&format!("/approvals?limit=200&{query}"), &self.app.key)
            .await
            .expect(200)["items"]
            .as_array()
            .expect("items")
            .clone()
    }

    /// The ledger's net spend on `run_agent`: what the runs cost, reservations and releases
    /// together.
    pub async fn spent_on_runs(&self) -> i64 {
        let row = sqlx::query(
            "select cast(coalesce(sum(l.amount), 0) as bigint) from credit_ledger l \
             left join credit_ledger s on s.id = l.reservation_id \
             where l.workspace_id = $1 and coalesce(s.action, l.action) = 'run_agent'",
        )
        .bind(&self.app.workspace_id)
        .fetch_one(self.app.db.pool())
        .await
        .expect("the ledger");
        -row.get::<i64, _>(0)
    }

    /// What the ledger entries that name `object_id` add up to, spent as a positive figure: every
    /// entry of a run (its hold, its release) names it.
    pub async fn spent_on(&self, object_id: &str) -> i64 {
        let row = sqlx::query(
            "select cast(coalesce(sum(amount), 0) as bigint) from credit_ledger \
             where workspace_id = $1 and object_id = $2",
        )
        .bind(&self.app.workspace_id)
        .bind(object_id)
        .fetch_one(self.app.db.pool())
        .await
        .expect("the ledger");
        -row.get::<i64, _>(0)
    }
}

#[tokio::test]
async fn a_prospector_run_proposes_the_matching_prospects_and_nothing_reaches_anyone_before_approval()
 {
    let setup = Setup::new(3).await;
    let app = &setup.app;
    let agent = setup.prospector(json!({"max_credits_per_run": 10})).await;
    let before = setup.balance().await;

    let estimate = app
        .post_json(
            &format!("/agents/{agent}/run"),
            &app.read_key().await,
            json!({"estimate_only": true}),
        )
        .await;
    let estimate = estimate.expect(200).clone();
    // Candidates before scoring: the three leads and the intern (the blocked and the unreachable
    // are not candidates).
    assert_eq!(estimate["price"], json!(4), "{estimate}");
    assert_eq!(estimate["details"]["candidates"], json!(4), "{estimate}");

    let run = setup.run(&agent, &app.key, json!({})).await;
    assert_eq!(run["status"], json!("queued"), "{run}");
    assert_eq!(run["credits_reserved"], json!(4), "{run}");
    assert_eq!(run["mode"], json!("review"), "{run}");
    assert_eq!(setup.balance().await, before - 4, "the price is reserved");
    let run_id = id(&run);

    settle(app).await;
    let run = setup.get_run(&run_id).await;
    assert_eq!(run["status"], json!("awaiting_approval"), "{run}");
    assert_eq!(
        (run["total"].clone(), run["processed"].clone()),
        (json!(3), json!(3)),
        "{run}"
    );
    assert_eq!(
        run["credits_charged"],
        json!(3),
        "one credit per prospect processed: {run}"
    );
    assert_eq!(run["approvals_pending"], json!(3), "{run}");
    assert_eq!(
        setup.balance().await,
        before - 3,
        "what was reserved and not used is released"
    );
    assert_eq!(setup.spent_on_runs().await, 3);
    assert_eq!(
        setup.spent_on(&run_id).await,
        3,
        "the entries naming the run add up to what it cost"
    );
    let log = run["log"].to_string();
    for expected in [
        "Selected 3 of 4 candidates",
        "Charged 3 credits, released 1",
    ] {
        assert!(log.contains(expected), "the log lacks `{expected}`: {log}");
    }

    let items = setup.approvals(&format!("run_id={run_id}")).await;
    assert_eq!(items.len(), 3);
    let proposed: HashSet<String> = items
        .iter()
        .map(|item| item["prospect_id"].as_str().expect("a prospect").to_owned())
        .collect();
    assert_eq!(proposed, setup.matching.iter().cloned().collect());
    for item in &items {
        assert_eq!(item["kind"], json!("enrollment"));
        assert_eq!(item["agent_id"], json!(agent));
        assert_eq!(item["drafted_by"], json!("template"));
        assert_eq!(item["proposed_by"]["type"], json!("agent"));
        assert!(item["expires_at"].is_string(), "{item}");
        let reasons = &item["reasons"];
        assert_eq!(reasons["score"], json!(60), "{item}");
        assert_eq!(reasons["tier"], json!("b"), "{item}");
        assert_eq!(
            reasons["matched"][0]["value"],
            json!("head of sales"),
            "{item}"
        );
        assert!(
            item["texts"][0]["text"]
                .as_str()
                .expect("a note")
                .starts_with("Hi Lead"),
            "{item}"
        );
    }
    // The kept prospects joined the agent's list, with their scores.
    let members = app
        .get(&format!("/lists/{}/prospects", setup.list), &app.key)
        .await;
    assert_eq!(members.expect(200)["total"], json!(3));
    let lead = app
        .get(&format!("/prospects/{}", setup.matching[0]), &app.key)
        .await;
    assert_eq!(lead.expect(200)["tier"], json!("b"));

    // Active sequence, two days later (within the proposals' 72 hours): nothing was sent.
    app.post_json(
        &format!("/sequences/{}/activate", setup.sequence),
        &setup.send,
        json!({}),
    )
    .await
    .expect(200);
    advance(app, 48 * HOUR_S).await;
    assert!(
        setup.network_log().await.is_empty(),
        "a proposal reached the network before approval"
    );

    // Approval schedules into the sender's next window: the invitations go out one by one, paced.
    let approved = app
        .post_json("/approvals/approve", &setup.send, json!({"run_id": run_id}))
        .await;
    assert_eq!(approved.expect(200)["approved"], json!(3));
    // The run ends through its follow-up job, at once.
    settle(app).await;
    let run = setup.get_run(&run_id).await;
    assert_eq!(run["status"], json!("succeeded"), "{run}");
    assert_eq!(setup.network_log().await.len(), 1, "approval sent a burst");
    for _ in 0..10 {
        advance(app, 60).await;
    }
    let sent = setup.network_log().await;
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert!(
        sent.iter().all(|(kind, _)| kind == "invitation"),
        "{sent:?}"
    );
    // Paced: the sender acts at most once every 30 seconds.
    let log = app.get("/sandbox/log?limit=200", &app.key).await;
    let times: Vec<i64> = log.expect(200)["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|entry| {
            let at = entry["at"].as_str().expect("a time");
            jiff::Timestamp::from_str(at)
                .expect("RFC 3339")
                .as_millisecond()
        })
        .collect();
    for pair in times.windows(2) {
        assert!(pair[1] - pair[0] >= 30_000, "a burst: {times:?}");
    }
}

#[tokio::test]
async fn a_review_run_waits_for_a_person_whatever_the_scope_and_an_autonomous_one_needs_send() {
    let setup = Setup::new(3).await;
    let app = &setup.app;
    app.post_json(
        &format!("/sequences/{}/activate", setup.sequence),
        &setup.send,
        json!({}),
    )
    .await
    .expect(200);

    // Review mode, started with `send`: still waits.
    let reviewed = setup.prospector(json!({"max_prospects_per_run": 1})).await;
    let run = setup.run(&reviewed, &setup.send, json!({})).await;
    assert_eq!(run["mode"], json!("review"));
    settle(app).await;
    advance(app, 24 * HOUR_S).await;
    assert!(setup.network_log().await.is_empty(), "a review run sent");
    assert_eq!(
        setup.get_run(&id(&run)).await["status"],
        json!("awaiting_approval")
    );

    // Autonomous, started with a write key: behaves as review.
    let autonomous = app
        .post_json(
            "/agents",
            &app.key,
            json!({"name": "Autopilot", "kind": "prospector", "mode": "autonomous",
                   "targeting_id": setup.targeting, "list_id": setup.list, "sequence_id": setup.sequence,
                   "max_prospects_per_run": 1}),
        )
        .await;
    let autonomous = id(autonomous.expect(201));
    let run = setup.run(&autonomous, &app.key, json!({})).await;
    assert_eq!(run["mode"], json!("review"), "{run}");
    settle(app).await;
    advance(app, 24 * HOUR_S).await;
    assert!(
        setup.network_log().await.is_empty(),
        "an autonomous run sent without send"
    );
    assert_eq!(setup.approvals("status=pending").await.len(), 2);

    // Autonomous with `send`: it approves its own proposal, which goes out within the hours.
    let run = setup
        .run(&autonomous, &setup.send, json!({"max_prospects": 1}))
        .await;
    assert_eq!(run["mode"], json!("autonomous"), "{run}");
    assert_eq!(setup.get_run(&id(&run)).await["status"], json!("queued"));
    settle(app).await;
    let run = setup.get_run(&id(&run)).await;
    assert_eq!(run["status"], json!("succeeded"), "{run}");
    assert!(
        run["log"]
            .to_string()
            .contains("Approved 1 of its 1 proposals"),
        "{run}"
    );
    let sent = setup.network_log().await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].0, "invitation");
}

#[tokio::test]
async fn an_autonomous_run_whose_key_lost_send_meanwhile_waits_for_a_person() {
    let setup = Setup::new(1).await;
    let app = &setup.app;
    let agent = setup.prospector(json!({"mode": "autonomous"})).await;
    let run = setup.run(&agent, &setup.send, json!({})).await;
    assert_eq!(run["mode"], json!("autonomous"));
    // The key is revoked before the job runs: the run must not act on its behalf.
    sqlx::query("update api_keys set revoked_at = 1 where key_hash = $1")
        .bind(outreach_runtime::ids::hash_secret(&setup.send))
        .execute(app.db.pool())
        .await
        .expect("revoke the send key");
    settle(app).await;
    let run = setup.get_run(&id(&run)).await;
    assert_eq!(run["status"], json!("awaiting_approval"), "{run}");
    assert!(
        run["log"].to_string().contains("no longer holds `send`"),
        "{run}"
    );
    assert_eq!(setup.approvals("status=pending").await.len(), 1);
}

#[tokio::test]
async fn bad_input_is_refused_with_its_code_and_changes_nothing() {
    let setup = Setup::new(3).await;
    let app = &setup.app;
    let before = setup.balance().await;
    let count = async || {
        let row = sqlx::query("select count(*) from agent_runs")
            .fetch_one(app.db.pool())
            .await
            .expect("count runs");
        row.get::<i64, _>(0)
    };

    // Over the credit cap: 400, nothing reserved.
    let capped = setup.prospector(json!({"max_credits_per_run": 2})).await;
    let refused = app
        .post_json(&format!("/agents/{capped}/run"), &app.key, json!({}))
        .await;
    let message = refused.expect_error(400, "invalid_request");
    assert!(message.contains("max_credits_per_run"), "{message}");
    assert_eq!(refused.body["price"], json!(4));
    // An estimate says so too, with the price; a lower limit fits under the cap.
    let estimate = app
        .post_json(
            &format!("/agents/{capped}/run"),
            &app.key,
            json!({"estimate_only": true}),
        )
        .await;
    estimate.expect_error(400, "invalid_request");
    assert_eq!(estimate.body["price"], json!(4));
    app.post_json(
        &format!("/agents/{capped}/run"),
        &app.key,
        json!({"max_prospects": 2, "estimate_only": true}),
    )
    .await
    .expect(200);
    for (body, field) in [
        (json!({"max_prospects": 0}), "max_prospects"),
        (json!({"max_prospects": 51}), "max_prospects"),
        (json!({"prospect_ids": ["prs_x"]}), "prospect_ids"),
        (json!({"colour": "red"}), "colour"),
    ] {
        let refused = app
            .post_json(&format!("/agents/{capped}/run"), &app.key, body.clone())
            .await;
        let message = refused.expect_error(400, "invalid_request");
        assert!(message.contains(field), "{body}: {message}");
    }
    // Unknown and another workspace's agent: 404.
    let (_, other_key) = app.other_workspace("Other", "other@example.com").await;
    for key in [&app.key, &other_key] {
        app.post_json("/agents/agt_00000000000NoSuchOne/run", key, json!({}))
            .await
            .expect_error(404, "not_found");
    }
    app.post_json(&format!("/agents/{capped}/run"), &other_key, json!({}))
        .await
        .expect_error(404, "not_found");
    // A read key may estimate but not run.
    let read = app.read_key().await;
    app.post_json(&format!("/agents/{capped}/run"), &read, json!({}))
        .await
        .expect_error(403, "insufficient_scope");
    // Disabled: 409.
    let disabled = setup.prospector(json!({"enabled": false})).await;
    app.post_json(&format!("/agents/{disabled}/run"), &app.key, json!({}))
        .await
        .expect_error(409, "invalid_state");
    // An input gone since the agent was saved: 404 naming the field.
    let agent = setup.prospector(json!({})).await;
    let orphan_list = app
        .post_json("/lists", &app.key, json!({"name": "Soon gone"}))
        .await;
    let orphan_list = id(orphan_list.expect(201));
    app.patch_json(
        &format!("/agents/{agent}"),
        &app.key,
        json!({"list_id": orphan_list}),
    )
    .await
    .expect(200);
    app.delete(&format!("/lists/{orphan_list}"), &app.key)
        .await
        .expect(200);
    let refused = app
        .post_json(&format!("/agents/{agent}/run"), &app.key, json!({}))
        .await;
    refused.expect_error(404, "not_found");
    assert_eq!(refused.body["field"], json!("list_id"), "{}", refused.body);
    assert_eq!(count().await, 0, "a refused run was kept");
    assert_eq!(setup.balance().await, before, "a refused run was charged");

    // One live run per agent: the second is a 409 naming the first, and deleting the agent too.
    let live = setup.prospector(json!({})).await;
    let first = setup.run(&live, &app.key, json!({})).await;
    let second = app
        .post_json(&format!("/agents/{live}/run"), &app.key, json!({}))
        .await;
    second.expect_error(409, "invalid_state");
    assert_eq!(second.body["run_id"], first["id"]);
    app.delete(&format!("/agents/{live}"), &app.key)
        .await
        .expect_error(409, "invalid_state");
    assert_eq!(count().await, 1);
    assert_eq!(
        setup.balance().await,
        before - 4,
        "only the first run reserved"
    );

    // Cancelling: a queued run releases everything; a finished one cannot be canceled.
    let canceled = app
        .post_json(&format!("/runs/{}/cancel", id(&first)), &app.key, json!({}))
        .await;
    let canceled = canceled.expect(200).clone();
    assert_eq!(canceled["status"], json!("canceled"), "{canceled}");
    assert_eq!(
        setup.balance().await,
        before,
        "a canceled queued run keeps nothing"
    );
    settle(app).await;
    let after = setup.get_run(&id(&first)).await;
    assert_eq!(
        after["processed"],
        json!(0),
        "a canceled run worked: {after}"
    );
    app.post_json(&format!("/runs/{}/cancel", id(&first)), &app.key, json!({}))
        .await
        .expect_error(409, "invalid_state");
    app.get("/runs/run_00000000000NoSuchOne", &app.key)
        .await
        .expect_error(404, "not_found");
    app.get(&format!("/runs/{}", id(&first)), &other_key)
        .await
        .expect_error(404, "not_found");
    // The agent is free again: it can run, and be deleted once that run is done.
    let again = setup.run(&live, &app.key, json!({})).await;
    settle(app).await;
    assert_eq!(
        setup.get_run(&id(&again)).await["status"],
        json!("awaiting_approval")
    );
    app.delete(&format!("/agents/{live}"), &app.key)
        .await
        .expect(200);
    assert_eq!(
        setup.get_run(&id(&again)).await["agent_id"],
        json!(live),
        "a run outlives its agent"
    );
    let listed = app.get("/runs?status=canceled", &app.key).await;
    assert_eq!(listed.expect(200)["total"], json!(1));
    app.get("/runs?status=done", &app.key)
        .await
        .expect_error(400, "invalid_request");
}

#[tokio::test]
async fn a_run_whose_sequence_is_stopped_before_it_starts_fails_and_keeps_nothing() {
    let setup = Setup::new(2).await;
    let app = &setup.app;
    let before = setup.balance().await;
    let agent = setup.prospector(json!({})).await;
    let run = setup.run(&agent, &app.key, json!({})).await;
    for change in ["activate", "stop"] {
        app.post_json(
            &format!("/sequences/{}/{change}", setup.sequence),
            &setup.send,
            json!({}),
        )
        .await
        .expect(200);
    }
    settle(app).await;
    let run = setup.get_run(&id(&run)).await;
    assert_eq!(run["status"], json!("failed"), "{run}");
    assert_eq!(run["error"]["code"], json!("invalid_state"), "{run}");
    assert!(
        run["error"]["message"]
            .as_str()
            .expect("a message")
            .contains("stopped"),
        "{run}"
    );
    assert_eq!(run["credits_charged"], json!(0));
    assert_eq!(setup.balance().await, before, "a failed run kept credits");
    assert!(setup.approvals("").await.is_empty());
}

#[tokio::test]
async fn proposals_expire_after_72_hours_and_can_no_longer_be_approved() {
    let setup = Setup::new(2).await;
    let app = &setup.app;
    let agent = setup.prospector(json!({})).await;
    let run = id(&setup.run(&agent, &app.key, json!({})).await);
    settle(app).await;
    let items = setup.approvals(&format!("run_id={run}")).await;
    assert_eq!(items.len(), 2);
    let first = id(&items[0]);

    // Edited before it lapses, with the same checks as a template.
    let edited = app
        .patch_json(
            &format!("/approvals/{first}"),
            &app.key,
            json!({"texts": [{"step_index": 0, "text": "Hello {{first_name}}, a note just for you."}]}),
        )
        .await;
    let edited = edited.expect(200).clone();
    assert!(
        edited["texts"][0]["text"]
            .as_str()
            .expect("a note")
            .starts_with("Hello Lead"),
        "{edited}"
    );
    assert!(edited["edited_at"].is_string(), "{edited}");
    for (texts, word) in [
        (
            json!([{"step_index": 0, "text": "Hi {{nickname}}"}]),
            "nickname",
        ),
        (
            json!([{"step_index": 0, "text": "Hi {{headline}}"}]),
            "headline",
        ),
        (json!([{"step_index": 0, "text": "x".repeat(301)}]), "300"),
        (json!([{"step_index": 0, "text": "  "}]), "1 to 300"),
        (json!([{"step_index": 7, "text": "Hi"}]), "step"),
        (json!([]), "at least one"),
    ] {
        let refused = app
            .patch_json(
                &format!("/approvals/{first}"),
                &app.key,
                json!({"texts": texts}),
            )
            .await;
        let message = refused.expect_error(400, "invalid_request");
        assert!(message.contains(word), "{texts}: {message}");
    }
    let unchanged = app.get(&format!("/approvals/{first}"), &app.key).await;
    assert_eq!(unchanged.expect(200)["texts"], edited["texts"]);

    advance(app, 73 * HOUR_S).await;
    let items = setup
        .approvals(&format!("run_id={run}&status=expired"))
        .await;
    assert_eq!(items.len(), 2, "the proposals did not expire");
    let run_now = setup.get_run(&run).await;
    assert_eq!(run_now["status"], json!("succeeded"), "{run_now}");
    let refused = app
        .post_json("/approvals/approve", &setup.send, json!({"ids": [first]}))
        .await;
    refused.expect_error(409, "invalid_state");
    app.patch_json(
        &format!("/approvals/{first}"),
        &app.key,
        json!({"texts": [{"step_index": 0, "text": "Late"}]}),
    )
    .await
    .expect_error(409, "invalid_state");
    let enrollments = app
        .get(
            &format!("/enrollments?sequence_id={}", setup.sequence),
            &app.key,
        )
        .await;
    for enrollment in enrollments.expect(200)["items"].as_array().expect("items") {
        assert_eq!(enrollment["exit_reason"], json!("expired"), "{enrollment}");
    }
    // Expired, they are in no live sequence any more; this sequence does not take them twice.
    let again = id(&setup.run(&agent, &app.key, json!({})).await);
    settle(app).await;
    assert_eq!(
        setup.get_run(&again).await["proposed"],
        json!(0),
        "already in this sequence"
    );
}

#[tokio::test]
async fn an_approved_and_edited_draft_is_what_is_sent_and_a_reply_is_triaged() {
    let setup = Setup::new(1).await;
    let app = &setup.app;
    let lead = setup.matching[0].clone();
    let agent = setup.prospector(json!({})).await;
    let run = id(&setup.run(&agent, &app.key, json!({})).await);
    settle(app).await;
    let item = id(&setup.approvals(&format!("run_id={run}")).await[0]);
    app.patch_json(
        &format!("/approvals/{item}"),
        &app.key,
        json!({"texts": [{"step_index": 0, "text": "Edited for {{first_name}}."}]}),
    )
    .await
    .expect(200);
    app.post_json(
        &format!("/sequences/{}/activate", setup.sequence),
        &setup.send,
        json!({}),
    )
    .await
    .expect(200);
    let dry = app
        .post_json(
            "/approvals/approve",
            &setup.send,
            json!({"ids": [item], "dry_run": true}),
        )
        .await;
    let dry = dry.expect(200).clone();
    assert!(dry["senders"][0]["first_send_at"].is_string(), "{dry}");
    app.post_json("/approvals/approve", &setup.send, json!({"ids": [item]}))
        .await
        .expect(200);
    settle(app).await;
    assert_eq!(
        setup.network_log().await,
        [("invitation".to_owned(), "Edited for Lead0.".to_owned())]
    );
    app.post_json(
        "/sandbox/invitations/accept",
        &app.key,
        json!({"prospect_id": lead, "sender_id": setup.sender}),
    )
    .await
    .expect(200);
    setup.reply(&lead, "Sounds good, what does it cost?").await;
    // The sequence does not stop on reply: the enrollment is still live until triage reads it.
    let enrollment = app
        .get(
            &format!("/enrollments?sequence_id={}", setup.sequence),
            &app.key,
        )
        .await;
    assert_eq!(
        enrollment.expect(200)["items"][0]["status"],
        json!("active")
    );

    let triage = setup
        .triage(json!({"templates": {"question": "Good question, {{first_name}}: it depends on the team size."}}))
        .await;
    let triage_run = id(&setup.run(&triage, &setup.send, json!({})).await);
    settle(app).await;
    let triage_run = setup.get_run(&triage_run).await;
    assert_eq!(
        triage_run["status"],
        json!("awaiting_approval"),
        "{triage_run}"
    );
    assert_eq!(triage_run["processed"], json!(1));
    assert_eq!(triage_run["credits_charged"], json!(1));
    let enrollment = app
        .get(
            &format!("/enrollments?sequence_id={}", setup.sequence),
            &app.key,
        )
        .await;
    let enrollment = enrollment.expect(200)["items"][0].clone();
    assert_eq!(enrollment["status"], json!("finished"), "{enrollment}");
    assert_eq!(enrollment["exit_reason"], json!("replied"), "{enrollment}");
    let drafts = setup.approvals("kind=reply").await;
    assert_eq!(drafts.len(), 1);
    let draft = &drafts[0];
    assert_eq!(
        draft["reasons"]["classification"],
        json!("question"),
        "{draft}"
    );
    assert_eq!(
        draft["texts"][0]["text"],
        json!("Good question, Lead0: it depends on the team size.")
    );
    let conversation = draft["subject_id"].as_str().expect("a conversation");
    let messages = app
        .get(&format!("/conversations/{conversation}/messages"), &app.key)
        .await;
    let inbound = messages.expect(200)["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|m| m["direction"] == json!("inbound"))
        .cloned()
        .expect("the reply");
    assert_eq!(inbound["classification"], json!("question"), "{inbound}");
    // Drafted, never sent by the run, even with `send`; approving queues it for the sender.
    advance(app, 24 * HOUR_S).await;
    assert_eq!(
        setup.network_log().await.len(),
        1,
        "the triage run sent its draft"
    );
    let approved = app
        .post_json(
            "/approvals/approve",
            &setup.send,
            json!({"ids": [id(draft)]}),
        )
        .await;
    assert_eq!(
        approved.expect(200)["replies"][0]["conversation_id"],
        json!(conversation)
    );
    settle(app).await;
    let sent = setup.network_log().await;
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(
        sent[1].1,
        "Good question, Lead0: it depends on the team size."
    );
    // A second triage run finds nothing new.
    let idle = id(&setup.run(&triage, &app.key, json!({})).await);
    settle(app).await;
    let idle = setup.get_run(&idle).await;
    assert_eq!(
        (idle["total"].clone(), idle["status"].clone()),
        (json!(0), json!("succeeded"))
    );
}

#[tokio::test]
async fn an_unsubscribe_is_marked_do_not_contact_and_stops_every_enrollment() {
    let setup = Setup::new(1).await;
    let app = &setup.app;
    let lead = setup.connected_lead().await;
    setup.reply(&lead, "Please remove me from your list.").await;
    let triage = setup.triage(json!({})).await;
    let triage_run = id(&setup.run(&triage, &app.key, json!({})).await);
    settle(app).await;
    let triage_run = setup.get_run(&triage_run).await;
    assert_eq!(
        triage_run["status"],
        json!("succeeded"),
        "nothing to approve: {triage_run}"
    );
    assert!(
        triage_run["log"].to_string().contains("unsubscribe"),
        "{triage_run}"
    );
    let prospect = app.get(&format!("/prospects/{lead}"), &app.key).await;
    assert_eq!(prospect.expect(200)["do_not_contact"], json!(true));
    let enrollment = app
        .get(
            &format!("/enrollments?sequence_id={}", setup.sequence),
            &app.key,
        )
        .await;
    assert_eq!(
        enrollment.expect(200)["items"][0]["exit_reason"],
        json!("unsubscribed")
    );
    advance(app, 10 * 24 * HOUR_S).await;
    assert_eq!(
        setup.network_log().await.len(),
        1,
        "a follow-up went after the unsubscribe"
    );
    assert!(setup.approvals("kind=reply").await.is_empty());
}

/// An unsubscribe triaged while a run of the person's step is in its outcome transaction (its
/// job held, about to write the prospect) waits for the run: a triage takes the people's step
/// jobs first, the order every writer keeps (see `delivery`), instead of taking the prospect in
/// the middle of the run's transaction. On PostgreSQL the test plays the run's transaction.
#[tokio::test]
async fn an_unsubscribe_triaged_while_a_step_runs_waits_for_the_run() {
    let setup = Setup::new(1).await;
    let app = &setup.app;
    let lead = setup.connected_lead().await;
    setup.reply(&lead, "Please remove me from your list.").await;
    let enrollments = app
        .get(
            &format!("/enrollments?sequence_id={}", setup.sequence),
            &app.key,
        )
        .await;
    let enrollment = enrollments.expect(200)["items"][0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let triage = setup.triage(json!({})).await;
    let triage_run = id(&setup.run(&triage, &app.key, json!({})).await);

    let (mut held_back, run_holds) = HeldBack::new();
    let step_run = async {
        let mut tx = app.hold_step_run(&enrollment).await;
        held_back
            .until_it_waits(app, &mut tx, "the triage never waited for the step's run")
            .await;
        // What the run writes after a step went out.
        sqlx::query("update prospects set last_contacted_at = 1 where id = $1")
            .bind(&lead)
            .execute(&mut *tx)
            .await
            .expect("the run writes the prospect without a deadlock");
        tx.commit().await.expect("commit the run");
        held_back.release();
    };
    let triaged = async {
        run_holds.await.expect("the run holds its locks");
        settle(app).await;
    };
    tokio::join!(step_run, triaged);
    let triage_run = setup.get_run(&triage_run).await;
    assert_eq!(triage_run["status"], json!("succeeded"), "{triage_run}");
    let prospect = app.get(&format!("/prospects/{lead}"), &app.key).await;
    assert_eq!(prospect.expect(200)["do_not_contact"], json!(true));
    let enrollment = app
        .get(&format!("/enrollments/{enrollment}"), &app.key)
        .await;
    assert_eq!(enrollment.expect(200)["exit_reason"], json!("unsubscribed"));
}

#[tokio::test]
async fn the_dashboard_counts_runs_by_status_and_what_agents_spent() {
    let setup = Setup::new(2).await;
    let app = &setup.app;
    let agent = setup.prospector(json!({})).await;
    setup.run(&agent, &app.key, json!({})).await;
    settle(app).await;
    let dashboard = app.get("/dashboard?period=7d", &app.key).await;
    let agents = dashboard.expect(200)["agents"].clone();
    assert_eq!(agents["runs"], json!(1), "{agents}");
    assert_eq!(
        agents["runs_by_status"]["awaiting_approval"],
        json!(1),
        "{agents}"
    );
    assert_eq!(agents["credits_spent"], json!(2), "{agents}");
    assert_eq!(agents["by_agent"][0]["agent_id"], json!(agent), "{agents}");
    let approvals = dashboard.body["approvals"].clone();
    assert_eq!(approvals["proposed_by_agents"], json!(2), "{approvals}");
}

#[tokio::test]
async fn a_run_waiting_for_approval_ends_when_its_proposals_are_expired_by_a_stopped_sequence() {
    let setup = Setup::new(2).await;
    let app = &setup.app;
    let agent = setup.prospector(json!({})).await;
    let run = id(&setup.run(&agent, &app.key, json!({})).await);
    settle(app).await;
    assert_eq!(
        setup.get_run(&run).await["status"],
        json!("awaiting_approval")
    );
    for change in ["activate", "stop"] {
        app.post_json(
            &format!("/sequences/{}/{change}", setup.sequence),
            &setup.send,
            json!({}),
        )
        .await
        .expect(200);
    }
    settle(app).await;
    let ended = setup.get_run(&run).await;
    assert_eq!(ended["status"], json!("succeeded"), "{ended}");
    assert_eq!(ended["approvals_pending"], json!(0), "{ended}");
    assert!(ended["log"].to_string().contains("2 expired"), "{ended}");
}

#[tokio::test]
async fn a_run_never_processes_more_than_its_reservation_pays_for() {
    let setup = Setup::new(1).await;
    let app = &setup.app;
    let agent = setup.prospector(json!({})).await;
    let before = setup.balance().await;
    let run = setup.run(&agent, &app.key, json!({})).await;
    // Priced at two candidates (the lead and the intern); three more leads arrive before it runs.
    assert_eq!(run["credits_reserved"], json!(2), "{run}");
    for n in 0..3 {
        setup
            .prospect(&format!("Late{n}"), "Head of Sales", true)
            .await;
    }
    settle(app).await;
    let run = setup.get_run(&id(&run)).await;
    assert_eq!(run["processed"], json!(2), "{run}");
    assert_eq!(run["credits_charged"], json!(2), "{run}");
    assert!(
        run["log"]
            .to_string()
            .contains("the others wait for the next run"),
        "{run}"
    );
    assert_eq!(setup.balance().await, before - 2);
    assert_eq!(
        setup.spent_on_runs().await,
        2,
        "the ledger agrees with the run"
    );
    // A cap of 0 stays 0: no free work.
    let capped = setup
        .prospector(json!({"name": "Capped", "max_credits_per_run": 0}))
        .await;
    app.post_json(&format!("/agents/{capped}/run"), &app.key, json!({}))
        .await
        .expect_error(400, "invalid_request");
}

#[tokio::test]
async fn an_autonomous_triage_run_with_send_still_only_drafts_and_an_unsubscribe_stops_an_approved_reply()
 {
    let setup = Setup::new(1).await;
    let app = &setup.app;
    let lead = setup.connected_lead().await;
    setup
        .reply(&lead, "Sounds good, let's talk next week")
        .await;
    let triage = setup.triage(json!({"mode": "autonomous"})).await;
    let first = id(&setup.run(&triage, &setup.send, json!({})).await);
    settle(app).await;
    assert_eq!(
        setup.get_run(&first).await["status"],
        json!("awaiting_approval")
    );
    let drafts = setup.approvals("kind=reply").await;
    assert_eq!(
        drafts.len(),
        1,
        "an autonomous triage run approved its draft"
    );
    assert_eq!(
        setup.network_log().await.len(),
        1,
        "only the invitation went out"
    );

    // Approved, queued, and then the person unsubscribes before it goes: nothing is sent.
    app.post_json(
        "/approvals/approve",
        &setup.send,
        json!({"ids": [id(&drafts[0])]}),
    )
    .await
    .expect(200);
    app.patch_json(
        &format!("/prospects/{lead}"),
        &app.key,
        json!({"do_not_contact": true}),
    )
    .await
    .expect(200);
    // Past the time it was due (the gap after the invitation, the sender's last call).
    advance(app, 120).await;
    assert_eq!(
        setup.network_log().await.len(),
        1,
        "a reply went to a do-not-contact prospect"
    );
    let conversation = drafts[0]["subject_id"].as_str().expect("a conversation");
    let messages = app
        .get(&format!("/conversations/{conversation}/messages"), &app.key)
        .await;
    let outbound: Vec<Value> = messages.expect(200)["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|m| m["direction"] == json!("outbound") && m["enrollment_id"].is_null())
        .cloned()
        .collect();
    assert_eq!(outbound.len(), 1, "{outbound:?}");
    assert_eq!(outbound[0]["status"], json!("failed"), "{outbound:?}");
    assert!(
        outbound[0]["error"]
            .as_str()
            .expect("why")
            .contains("do-not-contact"),
        "{outbound:?}"
    );
}

#[tokio::test]
async fn a_decline_after_a_keen_reply_drops_the_reply_still_waiting() {
    let setup = Setup::new(1).await;
    let app = &setup.app;
    let lead = setup.connected_lead().await;
    let triage = setup.triage(json!({})).await;
    for (text, pending) in [
        ("Yes, interested!", 1),
        ("Actually, not really interested.", 0),
    ] {
        setup.reply(&lead, text).await;
        setup.run(&triage, &app.key, json!({})).await;
        settle(app).await;
        let waiting = setup.approvals("kind=reply&status=pending").await;
        assert_eq!(waiting.len(), pending, "after {text:?}: {waiting:?}");
    }
}

#[tokio::test]
async fn an_item_past_its_expiry_is_refused_even_before_the_expiry_job_runs() {
    let setup = Setup::new(1).await;
    let app = &setup.app;
    let agent = setup.prospector(json!({})).await;
    let run = id(&setup.run(&agent, &app.key, json!({})).await);
    settle(app).await;
    let item = id(&setup.approvals(&format!("run_id={run}")).await[0]);
    // The clock moves, but no job runs (moved directly: `advance_clock` would play the
    // interval out, expiry job included): the item is still `pending` in the database.
    outreach_runtime::test_clock::advance(&app.db, &app.clock, 73 * HOUR_S * 1000)
        .await
        .expect("move the clock");
    let refused = app
        .post_json("/approvals/approve", &setup.send, json!({"ids": [item]}))
        .await;
    let message = refused.expect_error(409, "invalid_state");
    assert!(message.contains("expired"), "{message}");
    assert_eq!(refused.body["expired_ids"], json!([item]));
    assert_eq!(setup.approvals("status=pending").await.len(), 1);
}

#[tokio::test]
async fn a_run_whose_job_was_lost_is_failed_by_recovery_and_keeps_only_what_it_processed() {
    let setup = Setup::new(2).await;
    let app = &setup.app;
    let before = setup.balance().await;
    let agent = setup.prospector(json!({})).await;
    let run = id(&setup.run(&agent, &app.key, json!({})).await);
    // Its job discarded, as a rescue does after the last attempt died with its process.
    sqlx::query("update jobs set state = 'discarded' where kind = 'agent_run'")
        .execute(app.db.pool())
        .await
        .expect("discard the job");
    outreach_runtime::recovery::run_all(&app.db, &app.clock).await;
    let run = setup.get_run(&run).await;
    assert_eq!(run["status"], json!("failed"), "{run}");
    assert_eq!(run["error"]["code"], json!("internal_error"), "{run}");
    assert_eq!(
        setup.balance().await,
        before,
        "nothing processed, nothing kept"
    );
    // The agent is free to run again.
    setup.run(&agent, &app.key, json!({})).await;
}

#[tokio::test]
async fn a_run_canceled_while_its_job_s_instance_is_dead_releases_its_hold_at_once() {
    let setup = Setup::new(2).await;
    let app = &setup.app;
    let before = setup.balance().await;
    let agent = setup.prospector(json!({})).await;
    let run = id(&setup.run(&agent, &app.key, json!({})).await);
    assert!(setup.balance().await < before, "the run holds credits");
    // An instance claimed the run's job and died: the job is `running` under a lease nobody
    // renews, and nothing has rescued it yet.
    let (claimed, _token) = outreach_runtime::jobs::claim(&app.db, &app.clock, 10)
        .await
        .expect("claim the job");
    assert!(
        claimed.iter().any(|job| job.kind == "agent_run"),
        "the run's job is claimed"
    );
    let canceled = app
        .post_json(&format!("/runs/{run}/cancel"), &app.key, json!({}))
        .await;
    let canceled = canceled.expect(200).clone();
    // In the answer itself: canceled, ended, and nothing held any more.
    assert_eq!(canceled["status"], json!("canceled"), "{canceled}");
    assert!(canceled["finished_at"].is_string(), "{canceled}");
    assert_eq!(canceled["credits_charged"], json!(0), "{canceled}");
    assert_eq!(
        setup.balance().await,
        before,
        "the hold is released with the cancel"
    );
    let held: i64 = sqlx::query(
        "select count(*) from credit_ledger where workspace_id = $1 and held_until is not null",
    )
    .bind(&app.workspace_id)
    .fetch_one(app.db.pool())
    .await
    .expect("count holds")
    .get(0);
    assert_eq!(held, 0, "no hold left open");
    // The dead instance's jobs, rescued and run later: the run is ended and stays as it is.
    sqlx::query("update jobs set lease_until = 0 where state = 'running'")
        .execute(app.db.pool())
        .await
        .expect("its lease lapses");
    outreach_runtime::recovery::run_all(&app.db, &app.clock).await;
    settle(app).await;
    let after = setup.get_run(&run).await;
    assert_eq!(after["status"], json!("canceled"), "{after}");
    assert_eq!(after["processed"], json!(0), "{after}");
    assert_eq!(setup.balance().await, before);
    assert_eq!(
        setup.spent_on(&run).await,
        0,
        "a canceled run's entries net to nothing"
    );
}

/// Claims the next due job; `None` when nothing is due.
async fn claim_next(app: &TestApp) -> Option<(outreach_runtime::jobs::Job, String)> {
    let (mut batch, token) = outreach_runtime::jobs::claim(&app.db, &app.clock, 1)
        .await
        .expect("claim");
    (!batch.is_empty()).then(|| (batch.remove(0), token))
}

async fn run_job(app: &TestApp, job: outreach_runtime::jobs::Job, token: String) {
    let config = std::sync::Arc::new(outreach_runtime::Config::new(
        &app.base_url,
        app.environment.clone(),
    ));
    outreach_runtime::worker::run_claimed(
        &app.db,
        &app.clock,
        config,
        job,
        token,
        &outreach_runtime::retry::Retries::default(),
    )
    .await;
}

#[tokio::test]
async fn a_run_whose_last_proposal_was_decided_as_it_ended_moves_on_through_its_follow_up() {
    let setup = Setup::new(2).await;
    let app = &setup.app;
    let agent = setup.prospector(json!({})).await;
    let run = id(&setup.run(&agent, &app.key, json!({})).await);
    // The run's job, to its end: it ends waiting for its proposals.
    while let Some((job, token)) = claim_next(app).await {
        run_job(app, job, token).await;
    }
    assert_eq!(
        setup.get_run(&run).await["status"],
        json!("awaiting_approval")
    );
    // Its follow-up comes due half a second later.
    app.clock.advance_ms(1_000);
    let (follow_up, token) = claim_next(app).await.expect("the run's follow-up");
    assert_eq!(follow_up.kind, "agent_run_decided");
    // Meanwhile a person decided every proposal in a transaction that began before the run ended
    // (so it could not see the run waiting): the items are decided, the run still waits.
    sqlx::query("update approvals set status = 'rejected', decided_at = $2 where run_id = $1")
        .bind(&run)
        .bind(app.clock.now_ms())
        .execute(app.db.pool())
        .await
        .expect("decide the items");
    assert_eq!(
        setup.get_run(&run).await["status"],
        json!("awaiting_approval")
    );
    run_job(app, follow_up, token).await;
    let ended = setup.get_run(&run).await;
    assert_eq!(ended["status"], json!("succeeded"), "{ended}");
}
