//! A crash never sends twice through Unipile: the real binary, pointed at the fake Unipile, is
//! killed with SIGKILL at random moments around an invitation and a reply, in particular after
//! Unipile did the work and before our commit, restarted on the same database, and the fake must
//! have received each action exactly once.
//!
//! The delays come from a seeded generator; the seed is printed (set `CRASH_TEST_SEED` to replay
//! one). On PostgreSQL (`TEST_DATABASE_URL`) a second instance, never killed, runs its own worker
//! on the same database, so either may settle what the killed one left.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::crash::Rng;
use crate::fake_unipile::{FakeUnipile, Fault, Route};
use crate::helpers::{
    Served, TestDatabase, admin_ok, admin_workspace_with_key, field, start_serve_env,
};
use crate::unipile::SECRET;

/// Kills per kind of action.
const KILLS: usize = 4;

/// How long Unipile takes to answer after doing the work: the window a kill falls in.
const SLOW_ANSWER: Duration = Duration::from_millis(2500);

/// A kill's delay: a third of them within the first 60 ms (before the call, or as it starts),
/// the rest anywhere up to `max`.
fn kill_delay(rng: &mut Rng, max: Duration) -> Duration {
    if rng.next().is_multiple_of(3) {
        rng.millis_up_to(Duration::from_millis(60))
    } else {
        rng.millis_up_to(max)
    }
}

struct World {
    fake: FakeUnipile,
    database: TestDatabase,
    server: Option<Served>,
    /// On PostgreSQL, a second instance with its own worker, never killed.
    _second: Option<Served>,
    client: reqwest::Client,
    key: String,
    send: String,
}

impl World {
    async fn start() -> Self {
        let fake = FakeUnipile::start().await;
        let database = TestDatabase::create().await;
        let (workspace, key) =
            admin_workspace_with_key(&database, "Crash", "owner@crash.test").await;
        admin_ok(
            &database,
            &[
                "terms",
                "accept",
                "--workspace",
                &workspace,
                "--email",
                "owner@crash.test",
            ],
        )
        .await;
        let send = admin_ok(
            &database,
            &[
                "key",
                "create",
                "--workspace",
                &workspace,
                "--email",
                "owner@crash.test",
                "--name",
                "send",
                "--scopes",
                "read,write,send",
            ],
        )
        .await;
        let send = field(&send, "key");
        let mut world = Self {
            fake,
            database,
            server: None,
            _second: None,
            client: reqwest::Client::new(),
            key,
            send,
        };
        world.server = Some(world.serve().await);
        if world.database.url().starts_with("postgres") {
            world._second = Some(world.serve().await);
        }
        world.register_webhooks().await;
        world
    }

    /// Points Unipile's webhooks at the running server (its port changes with each start).
    async fn register_webhooks(&self) {
        self.fake.forget_webhooks();
        let settings = crate::unipile::settings_for(&self.fake, Duration::from_secs(20));
        outreach_actions::network::unipile::connect::register_webhooks(
            settings.unipile.as_ref().expect("settings"),
            &format!("{}/api/v1/network/webhooks/unipile", self.base_url()),
        )
        .await
        .expect("register the webhooks");
    }

    async fn serve(&self) -> Served {
        let env = [
            ("OUTREACH_NETWORK", "unipile"),
            ("UNIPILE_DSN", self.fake.dsn.as_str()),
            ("UNIPILE_API_KEY", self.fake.api_key.as_str()),
            ("UNIPILE_WEBHOOK_SECRET", SECRET),
            ("UNIPILE_TIMEOUT_SECS", "20"),
            ("OUTREACH_JOB_POLL_MS", "50"),
        ]
        .map(|(name, value)| (name.to_owned(), value.to_owned()));
        start_serve_env(&self.database, &[], &env).await
    }

    fn base_url(&self) -> String {
        self.server
            .as_ref()
            .expect("a running server")
            .base_url
            .clone()
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        key: &str,
        body: Option<Value>,
    ) -> Value {
        let mut request = self
            .client
            .request(method.clone(), format!("{}/api/v1{path}", self.base_url()))
            .bearer_auth(key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the server answers");
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{method} {path}: {status} {body}");
        body
    }

    async fn post(&self, path: &str, key: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, key, Some(body))
            .await
    }

    async fn get(&self, path: &str) -> Value {
        self.call(reqwest::Method::GET, path, &self.key, None).await
    }

    /// A new sender, signed in through its hosted link: its id and Unipile account.
    async fn sender(&self, name: &str) -> (String, String) {
        let day = json!([{"start": "00:00", "end": "24:00"}]);
        let hours = json!({"monday": day, "tuesday": day, "wednesday": day, "thursday": day, "friday": day, "saturday": day, "sunday": day});
        let sender = self
            .post(
                "/senders",
                &self.key,
                json!({"name": name, "timezone": "UTC", "working_hours": hours}),
            )
            .await;
        let id = field(&sender, "id");
        self.post(&format!("/senders/{id}/connect"), &self.key, json!({}))
            .await;
        let (account, status) = self
            .fake
            .complete_hosted_link(self.fake.hosted_links().len() - 1)
            .await;
        assert_eq!(status, 200);
        (id, account)
    }

    async fn person(&self, name: &str) -> (String, String) {
        let public = format!(
            "{name}-{}",
            outreach_runtime::ids::new_id("c").to_lowercase()
        );
        self.fake.add_person(&public);
        let prospect = self
            .post(
                "/prospects",
                &self.key,
                json!({"first_name": name, "profile_url": format!("https://www.linkedin.com/in/{public}")}),
            )
            .await;
        (field(&prospect, "id"), public)
    }

    async fn kill_and_restart(&mut self) {
        self.server.take().expect("a running server").kill().await;
        self.server = Some(self.serve().await);
        self.register_webhooks().await;
    }

    /// Waits until `done` holds, up to a minute.
    async fn until(&self, what: &str, mut done: impl AsyncFnMut(&Self) -> bool) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(90) {
            if done(self).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what} did not happen within 90 s");
    }
}

#[tokio::test]
async fn a_kill_around_an_invitation_or_a_reply_never_sends_it_twice() {
    let (mut rng, seed) = Rng::from_env_or_clock();
    println!("CRASH_TEST_SEED={seed}");
    let mut world = World::start().await;
    // Kills that fell after Unipile did the work: reconciliation had to find it.
    let mut after_the_work = 0;
    for round in 0..KILLS {
        // An invitation: the kill falls before the call, during it, or after Unipile did it.
        let (sender, account) = world.sender(&format!("inviter {round}")).await;
        let (prospect, public) = world.person("grace").await;
        world
            .fake
            .fail_next(Route::Invite, Fault::SlowAfterWork(SLOW_ANSWER));
        let sequence = world
            .post(
                "/sequences",
                &world.key,
                json!({"name": format!("round {round}"), "sender_ids": [sender], "steps": [{"type": "connection_request", "note": "Hello"}]}),
            )
            .await;
        let sequence = field(&sequence, "id");
        world
            .post(
                &format!("/sequences/{sequence}/enrollments"),
                &world.key,
                json!({"prospect_ids": [prospect]}),
            )
            .await;
        world
            .post(
                &format!("/sequences/{sequence}/activate"),
                &world.send,
                json!({}),
            )
            .await;
        world
            .post(
                "/approvals/approve",
                &world.send,
                json!({"sequence_id": sequence}),
            )
            .await;
        tokio::time::sleep(kill_delay(
            &mut rng,
            SLOW_ANSWER + Duration::from_millis(500),
        ))
        .await;
        after_the_work += world.fake.invitations_sent(&account, &public);
        world.kill_and_restart().await;
        world
            .until("the invitation's outcome recorded", async |world| {
                let page = world
                    .get(&format!("/enrollments?sequence_id={sequence}"))
                    .await;
                page["items"][0]["status"] == "finished"
            })
            .await;
        assert_eq!(
            world.fake.invitations_sent(&account, &public),
            1,
            "round {round} (CRASH_TEST_SEED={seed})"
        );

        // A reply in an existing chat: the person wrote first.
        let (sender, account) = world.sender(&format!("replier {round}")).await;
        let (_, public) = world.person("ada").await;
        world.fake.connect(&account, &public);
        world
            .fake
            .reply(&account, &public, "Hello, are you hiring?")
            .await;
        let mut conversation = String::new();
        world
            .until("the conversation", async |world| {
                let page = world
                    .get(&format!("/conversations?sender_id={sender}"))
                    .await;
                match page["items"][0]["id"].as_str() {
                    Some(id) => {
                        conversation = id.to_owned();
                        true
                    }
                    None => false,
                }
            })
            .await;
        world
            .fake
            .fail_next(Route::SendMessage, Fault::SlowAfterWork(SLOW_ANSWER));
        world
            .post(
                &format!("/conversations/{conversation}/messages"),
                &world.send,
                json!({"text": format!("Yes, round {round}")}),
            )
            .await;
        tokio::time::sleep(kill_delay(
            &mut rng,
            SLOW_ANSWER + Duration::from_millis(500),
        ))
        .await;
        after_the_work += world.fake.messages_sent(&account, &public).len();
        world.kill_and_restart().await;
        world
            .until("the reply's outcome recorded", async |world| {
                let page = world
                    .get(&format!("/conversations/{conversation}/messages"))
                    .await;
                page["items"]
                    .as_array()
                    .is_some_and(|items| items.iter().any(|m| m["status"] == "sent"))
            })
            .await;
        assert_eq!(
            world.fake.messages_sent(&account, &public),
            [format!("Yes, round {round}")],
            "round {round} (CRASH_TEST_SEED={seed})"
        );
    }
    println!(
        "{after_the_work} of {} kills fell after Unipile did the work",
        2 * KILLS
    );
    assert!(
        after_the_work > 0,
        "no kill fell after the work, so reconciliation was not tested (CRASH_TEST_SEED={seed})"
    );
}
