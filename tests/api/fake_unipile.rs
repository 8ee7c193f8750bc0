//! A fake of the Unipile API v1 (the LinkedIn messaging provider), for the end-to-end suite.
//!
//! The suite has no internet, and the adapter must still be tested against what it will meet in
//! production: these routes, these JSON bodies, `multipart/form-data` for sending messages, the
//! `X-API-KEY` header, Unipile's error bodies (`{"title","detail","instance","type","status"}`)
//! and webhooks that arrive late, twice, or not at all. This is Unipile as its documentation
//! describes it, served by axum on `127.0.0.1:0` with its state in memory.
//!
//! A test drives the other side of the network through [`FakeUnipile`]: people accept, decline
//! and reply, accounts lose their credentials, and faults are queued per [`Route`]. The fake
//! records every request and what work it did (invitations sent, messages sent, profile views,
//! withdrawals), so a test can assert that something happened exactly once.
//!
//! Webhooks go to the URLs registered through `POST /api/v1/webhooks`. Those caused by a request
//! (the echo of a sent message) are delivered in a spawned task; those caused by a test helper
//! ([`FakeUnipile::accept`], [`FakeUnipile::reply`], ...) are awaited, so when the helper returns
//! the app has answered them. A delivery not answered 200 is retried 5 times, 50 ms apart.
#![allow(dead_code)]
// The handlers answer Unipile error bodies through `?`, as axum `Response`s.
#![allow(clippy::result_large_err)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, Path, Query, Request, State as AxState};
use axum::http::{Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde_json::{Value, json};

/// The Unipile routes the fake speaks, for queuing faults and counting requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    GetUser,
    Invite,
    ListSentInvitations,
    WithdrawInvitation,
    ListRelations,
    StartChat,
    SendMessage,
    ListChats,
    ListChatMessages,
    GetAccount,
    HostedLink,
    CreateWebhook,
    ListWebhooks,
}

/// One way for the next request of a route to go wrong.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Answers this status with the Unipile error body of type `errors/<name>` and does nothing.
    Error { status: u16, name: &'static str },
    /// Does the work, then answers 500 `errors/unexpected_error`.
    ServerErrorAfterWork,
    /// Does the work, then answers 504 `errors/request_timeout`.
    TimeoutAfterWork,
    /// Does the work, then sleeps this long before answering normally (for client timeouts).
    SlowAfterWork(Duration),
    /// Sleeps, then answers 503 `errors/network_down`, doing nothing.
    SlowFailure(Duration),
    /// Answers 200 with a body that is not JSON, doing nothing.
    Garbage,
    /// `POST /chats` only: does the work but answers 201 with a null `chat_id` and `message_id`.
    NullChatId,
}

/// One piece of work the fake did for an account (an action that reaches a person).
#[derive(Debug, Clone)]
pub struct Done {
    pub at_ms: i64,
    pub account_id: String,
    pub public_id: String,
    /// `view`, `invite` or `message`.
    pub kind: &'static str,
    pub text: Option<String>,
}

/// A request the fake received.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub query: String,
    pub body: String,
}

struct Account {
    id: String,
    status: String,
}

struct Invitation {
    id: String,
    account_id: String,
    public_id: String,
    at: i64,
}

struct Relation {
    account_id: String,
    public_id: String,
    at: i64,
}

struct Chat {
    id: String,
    account_id: String,
    public_id: String,
}

struct Message {
    id: String,
    chat_id: String,
    text: String,
    outbound: bool,
    at: i64,
}

/// One webhook POST to make.
#[derive(Clone)]
struct Delivery {
    url: String,
    headers: Vec<(String, String)>,
    body: Value,
}

type Pair = (String, String);

#[derive(Default)]
struct State {
    counters: HashMap<&'static str, u64>,
    last_ms: i64,
    accounts: Vec<Account>,
    people: Vec<String>,
    invitations: Vec<Invitation>,
    relations: Vec<Relation>,
    chats: Vec<Chat>,
    messages: Vec<Message>,
    hosted_links: Vec<Value>,
    webhooks: Vec<(String, Value)>,
    faults: HashMap<Route, VecDeque<Fault>>,
    calls: Vec<(Option<Route>, Call)>,
    drop_next: bool,
    duplicate_next: bool,
    invite_usage: u8,
    /// The app's clock, when the test moves one: the fake's time is then the app's.
    clock: Option<outreach_runtime::Clock>,
    invites_sent: HashMap<Pair, usize>,
    texts_sent: HashMap<Pair, Vec<String>>,
    views: HashMap<Pair, usize>,
    /// Every piece of work done, in order: what the month simulation checks.
    done: Vec<Done>,
    withdrawals: HashMap<Pair, usize>,
}

impl State {
    fn id(&mut self, prefix: &'static str) -> String {
        let n = self.counters.entry(prefix).or_insert(0);
        *n += 1;
        format!("{prefix}_{n}")
    }

    /// The system clock in milliseconds, strictly increasing so "newest first" is well defined.
    fn now(&mut self) -> i64 {
        let ms = match &self.clock {
            Some(clock) => clock.now_ms(),
            None => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        };
        self.last_ms = ms.max(self.last_ms + 1);
        self.last_ms
    }

    fn account(&self, id: &str) -> Option<&Account> {
        self.accounts.iter().find(|a| a.id == id)
    }

    /// Unknown (or deleted) account: 404; any status but OK: 401 `disconnected_account`.
    fn usable_account(&self, id: &str, instance: &str) -> Result<(), Response> {
        match self.account(id) {
            None => Err(error(404, "resource_not_found", instance)),
            Some(a) if a.status == "DELETED" => Err(error(404, "resource_not_found", instance)),
            Some(a) if a.status != "OK" => Err(error(401, "disconnected_account", instance)),
            Some(_) => Ok(()),
        }
    }

    /// A person as `account_id` sees them, by public identifier or by that account's provider id.
    fn person(&self, account_id: &str, identifier: &str) -> Option<String> {
        let public_id = identifier
            .strip_prefix(&format!("prov_{account_id}_"))
            .unwrap_or(identifier);
        self.people.iter().find(|p| *p == public_id).cloned()
    }

    fn is_relation(&self, account_id: &str, public_id: &str) -> bool {
        self.relations
            .iter()
            .any(|r| r.account_id == account_id && r.public_id == public_id)
    }

    fn pending(&self, account_id: &str, public_id: &str) -> Option<usize> {
        self.invitations
            .iter()
            .position(|i| i.account_id == account_id && i.public_id == public_id)
    }

    /// The chat of an account with a person, made if there is none.
    fn chat_with(&mut self, account_id: &str, public_id: &str) -> String {
        if let Some(chat) = self
            .chats
            .iter()
            .find(|c| c.account_id == account_id && c.public_id == public_id)
        {
            return chat.id.clone();
        }
        let id = self.id("chat");
        self.chats.push(Chat {
            id: id.clone(),
            account_id: account_id.to_owned(),
            public_id: public_id.to_owned(),
        });
        id
    }

    /// Adds a message to a chat and plans its `message_received` webhook (also for own sends).
    fn add_message(
        &mut self,
        chat_id: &str,
        text: &str,
        outbound: bool,
    ) -> (String, Vec<Delivery>) {
        let chat = self
            .chats
            .iter()
            .find(|c| c.id == chat_id)
            .expect("chat exists");
        let (account_id, public_id) = (chat.account_id.clone(), chat.public_id.clone());
        let (id, at) = (self.id("msg"), self.now());
        self.messages.push(Message {
            id: id.clone(),
            chat_id: chat_id.to_owned(),
            text: text.to_owned(),
            outbound,
            at,
        });
        if outbound {
            self.done.push(Done {
                at_ms: at,
                account_id: account_id.clone(),
                public_id: public_id.clone(),
                kind: "message",
                text: Some(text.to_owned()),
            });
            let key = (account_id.clone(), public_id.clone());
            self.texts_sent
                .entry(key)
                .or_default()
                .push(text.to_owned());
        }
        let me = attendee_own(&account_id);
        let them = attendee_person(&account_id, &public_id);
        let sender = if outbound { me.clone() } else { them.clone() };
        let body = json!({
            "event": "message_received",
            "account_id": account_id,
            "account_type": "LINKEDIN",
            "account_info": {"type": "LINKEDIN", "feature": "classic", "user_id": FakeUnipile::own_user_id(&account_id)},
            "chat_id": chat_id,
            "timestamp": rfc3339(at),
            "message_id": id,
            "message": text,
            "sender": sender,
            "attendees": [me, them],
            "attachments": [],
            "is_event": 0,
        });
        let deliveries = self.plan("messaging", &account_id, &body);
        (id, deliveries)
    }

    /// The deliveries of one event to every webhook registered for `source` (and the account),
    /// applying a pending drop or duplication to the first of them.
    fn plan(&mut self, source: &str, account_id: &str, body: &Value) -> Vec<Delivery> {
        let mut out = Vec::new();
        for (_, hook) in &self.webhooks {
            if hook["source"] != source {
                continue;
            }
            if let Some(ids) = hook["account_ids"].as_array()
                && !ids.is_empty()
                && !ids.iter().any(|i| i == account_id)
            {
                continue;
            }
            let mut body = body.clone();
            if source != "account_status" {
                body["webhook_name"] = hook["name"].clone();
            }
            let headers = hook["headers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|h| {
                    Some((
                        h["key"].as_str()?.to_owned(),
                        h["value"].as_str()?.to_owned(),
                    ))
                })
                .collect::<Vec<_>>();
            let url = hook["request_url"].as_str().unwrap_or_default().to_owned();
            out.push(Delivery { url, headers, body });
        }
        let mut planned = Vec::new();
        for delivery in out {
            if std::mem::take(&mut self.drop_next) {
                continue;
            }
            if std::mem::take(&mut self.duplicate_next) {
                planned.push(delivery.clone());
            }
            planned.push(delivery);
        }
        planned
    }
}

/// The fake server and the test's handle on it.
pub struct FakeUnipile {
    /// `http://127.0.0.1:PORT`; the routes are under `/api/v1`.
    pub dsn: String,
    pub api_key: String,
    state: Arc<Mutex<State>>,
    http: reqwest::Client,
}

/// What the handlers share.
#[derive(Clone)]
struct Ctx {
    state: Arc<Mutex<State>>,
    http: reqwest::Client,
    api_key: String,
}

impl Ctx {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl FakeUnipile {
    pub async fn start() -> Self {
        let api_key = "fake-unipile-key".to_owned();
        let state = Arc::new(Mutex::new(State {
            invite_usage: 10,
            ..State::default()
        }));
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("build the webhook client");
        let ctx = Ctx {
            state: state.clone(),
            http: http.clone(),
            api_key: api_key.clone(),
        };
        let app = Router::new()
            .route("/api/v1/users/invite", post(invite))
            .route("/api/v1/users/invite/sent", get(list_sent_invitations))
            .route("/api/v1/users/invite/sent/{id}", delete(withdraw))
            .route("/api/v1/users/relations", get(list_relations))
            .route("/api/v1/users/{identifier}", get(get_user))
            .route("/api/v1/chats", post(start_chat).get(list_chats))
            .route(
                "/api/v1/chats/{id}/messages",
                post(send_message).get(list_messages),
            )
            .route("/api/v1/accounts/{id}", get(get_account))
            .route("/api/v1/hosted/accounts/link", post(hosted_link))
            .route("/api/v1/webhooks", post(create_webhook).get(list_webhooks))
            .fallback(|uri: Uri| async move { error(404, "resource_not_found", uri.path()) })
            .layer(middleware::from_fn_with_state(ctx.clone(), gate))
            .with_state(ctx);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake Unipile");
        let addr = listener.local_addr().expect("fake Unipile address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            dsn: format!("http://{addr}"),
            api_key,
            state,
            http,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes an account as a finished hosted sign-in would, without the link: answers its id.
    pub fn add_account(&self) -> String {
        let mut s = self.lock();
        let id = s.id("acc");
        s.accounts.push(Account {
            id: id.clone(),
            status: "OK".to_owned(),
        });
        id
    }

    /// A person on the network, by public identifier (`linkedin.com/in/<public_id>`).
    pub fn add_person(&self, public_id: &str) {
        let mut s = self.lock();
        if !s.people.iter().any(|p| p == public_id) {
            s.people.push(public_id.to_owned());
        }
    }

    /// The provider id of a person as seen by an account: different per viewing account.
    pub fn provider_id(account_id: &str, public_id: &str) -> String {
        format!("prov_{account_id}_{public_id}")
    }

    /// The account's own user id (its `account_info.user_id`).
    pub fn own_user_id(account_id: &str) -> String {
        format!("me_{account_id}")
    }

    /// Makes the person a relation of the account already (connected before any invitation of
    /// ours), with no webhook.
    pub fn connect(&self, account_id: &str, public_id: &str) {
        let mut s = self.lock();
        let at = s.now();
        s.relations.push(Relation {
            account_id: account_id.to_owned(),
            public_id: public_id.to_owned(),
            at,
        });
    }

    /// The person accepts the account's pending invitation (panics if there is none); a
    /// `new_relation` webhook goes out unless `silent` (an acceptance only polling can see).
    pub async fn accept(&self, account_id: &str, public_id: &str, silent: bool) {
        let deliveries = {
            let mut s = self.lock();
            let index = s.pending(account_id, public_id).unwrap_or_else(|| {
                panic!("no pending invitation from {account_id} to {public_id}")
            });
            s.invitations.remove(index);
            let at = s.now();
            s.relations.push(Relation {
                account_id: account_id.to_owned(),
                public_id: public_id.to_owned(),
                at,
            });
            let body = json!({
                "event": "new_relation",
                "account_id": account_id,
                "account_type": "LINKEDIN",
                "user_full_name": full_name(public_id),
                "user_provider_id": Self::provider_id(account_id, public_id),
                "user_public_identifier": public_id,
                "user_profile_url": profile_url(public_id),
                "user_picture_url": null,
            });
            if silent {
                Vec::new()
            } else {
                s.plan("users", account_id, &body)
            }
        };
        deliver(self.http.clone(), deliveries).await;
    }

    /// The person declines: the invitation leaves the pending list; no relation, no webhook.
    pub fn decline(&self, account_id: &str, public_id: &str) {
        let mut s = self.lock();
        let index = s
            .pending(account_id, public_id)
            .unwrap_or_else(|| panic!("no pending invitation from {account_id} to {public_id}"));
        s.invitations.remove(index);
    }

    /// The person writes to the account (in their chat, made if none); answers the message id.
    pub async fn reply(&self, account_id: &str, public_id: &str, text: &str) -> String {
        let (id, deliveries) = {
            let mut s = self.lock();
            let chat_id = s.chat_with(account_id, public_id);
            s.add_message(&chat_id, text, false)
        };
        deliver(self.http.clone(), deliveries).await;
        id
    }

    /// Sets the account's status and sends an `account_status` webhook with it.
    pub async fn set_account_status(&self, account_id: &str, status: &str) {
        let deliveries = {
            let mut s = self.lock();
            let account = s
                .accounts
                .iter_mut()
                .find(|a| a.id == account_id)
                .unwrap_or_else(|| panic!("no account {account_id}"));
            account.status = status.to_owned();
            let body = json!({"AccountStatus": {"account_id": account_id, "account_type": "LINKEDIN", "message": status}});
            s.plan("account_status", account_id, &body)
        };
        deliver(self.http.clone(), deliveries).await;
    }

    /// Queues a fault for the next request matching `route` (first in, first out per route).
    pub fn fail_next(&self, route: Route, fault: Fault) {
        if matches!(fault, Fault::NullChatId) {
            assert_eq!(
                route,
                Route::StartChat,
                "NullChatId is for POST /chats only"
            );
        }
        self.lock()
            .faults
            .entry(route)
            .or_default()
            .push_back(fault);
    }

    /// The next webhook delivery the fake would make is dropped.
    pub fn drop_next_webhook(&self) {
        self.lock().drop_next = true;
    }

    /// The next webhook delivery the fake would make is made twice.
    pub fn duplicate_next_webhook(&self) {
        self.lock().duplicate_next = true;
    }

    /// The `usage` figure (percent of the weekly invitation quota) the invite answer carries.
    /// Keeps the fake's time on the app's clock (a test clock the test moves), as Unipile's and
    /// ours agree in production.
    pub fn use_clock(&self, clock: outreach_runtime::Clock) {
        self.state.lock().expect("fake state").clock = Some(clock);
    }

    pub fn set_invite_usage(&self, percent: u8) {
        self.lock().invite_usage = percent;
    }

    /// Every request received, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.iter().map(|(_, c)| c.clone()).collect()
    }

    /// How many requests matched `route`.
    pub fn count(&self, route: Route) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|(r, _)| *r == Some(route))
            .count()
    }

    /// Invitations actually made, ever (including ones later withdrawn, accepted or declined).
    pub fn invitations_sent(&self, account_id: &str, public_id: &str) -> usize {
        let key = (account_id.to_owned(), public_id.to_owned());
        self.lock().invites_sent.get(&key).copied().unwrap_or(0)
    }

    /// The texts the account sent to the person, in order.
    pub fn messages_sent(&self, account_id: &str, public_id: &str) -> Vec<String> {
        let key = (account_id.to_owned(), public_id.to_owned());
        self.lock()
            .texts_sent
            .get(&key)
            .cloned()
            .unwrap_or_default()
    }

    /// Profile lookups made with `notify=true`.
    /// Every piece of work done, oldest first.
    pub fn done(&self) -> Vec<Done> {
        self.lock().done.clone()
    }

    pub fn profile_views(&self, account_id: &str, public_id: &str) -> usize {
        let key = (account_id.to_owned(), public_id.to_owned());
        self.lock().views.get(&key).copied().unwrap_or(0)
    }

    pub fn withdrawals(&self, account_id: &str, public_id: &str) -> usize {
        let key = (account_id.to_owned(), public_id.to_owned());
        self.lock().withdrawals.get(&key).copied().unwrap_or(0)
    }

    pub fn is_relation(&self, account_id: &str, public_id: &str) -> bool {
        self.lock().is_relation(account_id, public_id)
    }

    pub fn pending_invitation(&self, account_id: &str, public_id: &str) -> bool {
        self.lock().pending(account_id, public_id).is_some()
    }

    /// The hosted links made (their request bodies), newest last.
    pub fn hosted_links(&self) -> Vec<Value> {
        self.lock().hosted_links.clone()
    }

    /// Completes hosted link `index` as the person would after signing in: a new account for
    /// `create`, the `reconnect_account` (back to OK) for `reconnect`; then POSTs the outcome to
    /// the link's `notify_url`. Answers the account id and the status the notify URL answered.
    pub async fn complete_hosted_link(&self, index: usize) -> (String, u16) {
        let link = self
            .lock()
            .hosted_links
            .get(index)
            .cloned()
            .expect("no such hosted link");
        let (account_id, status) = if link["type"] == "reconnect" {
            let id = link["reconnect_account"]
                .as_str()
                .expect("reconnect_account")
                .to_owned();
            let mut s = self.lock();
            let account = s
                .accounts
                .iter_mut()
                .find(|a| a.id == id)
                .expect("reconnected account exists");
            account.status = "OK".to_owned();
            (id, "RECONNECTED")
        } else {
            (self.add_account(), "CREATION_SUCCESS")
        };
        let notify_url = link["notify_url"].as_str().expect("notify_url");
        let body = json!({"status": status, "account_id": account_id, "name": link["name"]});
        let answer = self
            .http
            .post(notify_url)
            .json(&body)
            .send()
            .await
            .expect("POST to the hosted link's notify_url");
        (account_id, answer.status().as_u16())
    }

    /// The webhooks registered through `POST /api/v1/webhooks` (their bodies).
    /// Forgets every registered webhook (a test's server moved to a new address).
    pub fn forget_webhooks(&self) {
        self.lock().webhooks.clear();
    }

    pub fn webhooks(&self) -> Vec<Value> {
        self.lock()
            .webhooks
            .iter()
            .map(|(_, b)| b.clone())
            .collect()
    }
}

/// Makes the webhook POSTs in order; one not answered 200 is retried 5 times, 50 ms apart.
async fn deliver(http: reqwest::Client, deliveries: Vec<Delivery>) {
    for delivery in deliveries {
        for attempt in 0..=5 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let mut request = http.post(&delivery.url).json(&delivery.body);
            for (key, value) in &delivery.headers {
                request = request.header(key, value);
            }
            if let Ok(answer) = request.send().await
                && answer.status() == StatusCode::OK
            {
                break;
            }
        }
    }
}

fn spawn_deliveries(ctx: &Ctx, deliveries: Vec<Delivery>) {
    if !deliveries.is_empty() {
        tokio::spawn(deliver(ctx.http.clone(), deliveries));
    }
}

/// Which route a request is for (the same matching as the router's).
fn route_of(method: &Method, path: &str) -> Option<Route> {
    let segments: Vec<&str> = path.strip_prefix("/api/v1/")?.split('/').collect();
    Some(match (method.as_str(), segments.as_slice()) {
        ("GET", ["users", "invite", "sent"]) => Route::ListSentInvitations,
        ("DELETE", ["users", "invite", "sent", _]) => Route::WithdrawInvitation,
        ("GET", ["users", "relations"]) => Route::ListRelations,
        ("POST", ["users", "invite"]) => Route::Invite,
        ("GET", ["users", id]) if *id != "invite" => Route::GetUser,
        ("POST", ["chats"]) => Route::StartChat,
        ("GET", ["chats"]) => Route::ListChats,
        ("POST", ["chats", _, "messages"]) => Route::SendMessage,
        ("GET", ["chats", _, "messages"]) => Route::ListChatMessages,
        ("GET", ["accounts", _]) => Route::GetAccount,
        ("POST", ["hosted", "accounts", "link"]) => Route::HostedLink,
        ("POST", ["webhooks"]) => Route::CreateWebhook,
        ("GET", ["webhooks"]) => Route::ListWebhooks,
        _ => return None,
    })
}

/// In front of every route: records the call, checks the API key, then plays a queued fault.
async fn gate(AxState(ctx): AxState<Ctx>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let route = route_of(&parts.method, &path);
    let authorized =
        parts.headers.get("x-api-key").and_then(|v| v.to_str().ok()) == Some(ctx.api_key.as_str());
    let fault = {
        let mut s = ctx.lock();
        s.calls.push((
            route,
            Call {
                method: parts.method.to_string(),
                path: path.clone(),
                query: parts.uri.query().unwrap_or_default().to_owned(),
                body: String::from_utf8_lossy(&bytes).into_owned(),
            },
        ));
        match route {
            Some(route) if authorized => s.faults.get_mut(&route).and_then(VecDeque::pop_front),
            _ => None,
        }
    };
    if !authorized {
        return error(401, "unauthorized", &path);
    }
    let request = Request::from_parts(parts, Body::from(bytes));
    match fault {
        None => next.run(request).await,
        Some(Fault::Error { status, name }) => error(status, name, &path),
        Some(Fault::SlowFailure(pause)) => {
            tokio::time::sleep(pause).await;
            error(503, "network_down", &path)
        }
        Some(Fault::Garbage) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/html")],
            "<html>garbage</html>",
        )
            .into_response(),
        Some(Fault::ServerErrorAfterWork) => {
            next.run(request).await;
            error(500, "unexpected_error", &path)
        }
        Some(Fault::TimeoutAfterWork) => {
            next.run(request).await;
            error(504, "request_timeout", &path)
        }
        Some(Fault::SlowAfterWork(pause)) => {
            let answer = next.run(request).await;
            tokio::time::sleep(pause).await;
            answer
        }
        Some(Fault::NullChatId) => {
            let answer = next.run(request).await;
            if !answer.status().is_success() {
                return answer;
            }
            reply(
                201,
                json!({"object": "ChatStarted", "chat_id": null, "message_id": null}),
            )
        }
    }
}

type Reply = Result<Response, Response>;
type Params = Query<HashMap<String, String>>;

fn reply(status: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(body)).into_response()
}

/// Unipile's error body: `{"title","detail","instance","type":"errors/<name>","status"}`.
fn error(status: u16, name: &str, instance: &str) -> Response {
    let mut title = name.replace('_', " ");
    if let Some(first) = title.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    let detail = match name {
        "unauthorized" => "The API key is missing or invalid.",
        "disconnected_account" => "The account appears to be disconnected from the provider.",
        "resource_not_found" => "The requested resource was not found.",
        "invalid_parameters" => "One or more request parameters are invalid or missing.",
        "too_many_characters" => "The provided content exceeds the character limit.",
        "action_already_performed" => "An invitation cannot be sent to someone already connected.",
        "already_invited_recently" => {
            "An invitation has already been sent recently to this recipient."
        }
        "no_connection_with_recipient" => "You have no first-degree connection with the recipient.",
        _ => "The provider could not complete the request.",
    };
    let body = json!({"title": title, "detail": detail, "instance": instance, "type": format!("errors/{name}"), "status": status});
    reply(status, body)
}

/// A required query or body parameter.
fn param<'a>(
    params: &'a HashMap<String, String>,
    name: &str,
    instance: &str,
) -> Result<&'a str, Response> {
    params
        .get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| error(400, "invalid_parameters", instance))
}

fn json_body(bytes: &Bytes, instance: &str) -> Result<Value, Response> {
    serde_json::from_slice::<Value>(bytes)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| error(400, "invalid_parameters", instance))
}

/// A `limit`/`cursor` page of `items` (the cursor is the next offset).
fn page(
    object: &str,
    items: Vec<Value>,
    params: &HashMap<String, String>,
    instance: &str,
) -> Reply {
    let bad = || error(400, "invalid_parameters", instance);
    let limit = match params.get("limit") {
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|l| (1..=100).contains(l))
            .ok_or_else(bad)?,
        None => 10,
    };
    let offset = match params.get("cursor").filter(|c| !c.is_empty()) {
        Some(c) => c.parse::<usize>().map_err(|_| bad())?,
        None => 0,
    };
    let end = (offset + limit).min(items.len());
    let cursor = (end < items.len()).then(|| end.to_string());
    let items: Vec<Value> = items.into_iter().skip(offset).take(limit).collect();
    Ok(reply(
        200,
        json!({"object": object, "items": items, "cursor": cursor}),
    ))
}

/// The `after`/`before` window (RFC 3339, exclusive) as milliseconds.
fn window(params: &HashMap<String, String>, instance: &str) -> Result<(i64, i64), Response> {
    let bound = |name: &str, default: i64| match params.get(name).filter(|v| !v.is_empty()) {
        None => Ok(default),
        Some(v) => v
            .parse::<jiff::Timestamp>()
            .map(|t| t.as_millisecond())
            .map_err(|_| error(400, "invalid_parameters", instance)),
    };
    Ok((bound("after", i64::MIN)?, bound("before", i64::MAX)?))
}

fn first_name(public_id: &str) -> String {
    let mut name = public_id.to_owned();
    if let Some(first) = name.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    name
}

fn full_name(public_id: &str) -> String {
    format!("{} Doe", first_name(public_id))
}

fn profile_url(public_id: &str) -> String {
    format!("https://www.linkedin.com/in/{public_id}")
}

fn attendee_person(account_id: &str, public_id: &str) -> Value {
    let provider_id = FakeUnipile::provider_id(account_id, public_id);
    json!({"attendee_id": format!("att_{provider_id}"), "attendee_name": full_name(public_id),
           "attendee_provider_id": provider_id, "attendee_profile_url": profile_url(public_id)})
}

fn attendee_own(account_id: &str) -> Value {
    let user_id = FakeUnipile::own_user_id(account_id);
    json!({"attendee_id": format!("att_{user_id}"), "attendee_name": format!("Sender {account_id}"),
           "attendee_provider_id": user_id, "attendee_profile_url": null})
}

async fn get_user(
    AxState(ctx): AxState<Ctx>,
    Path(identifier): Path<String>,
    Query(q): Params,
    uri: Uri,
) -> Reply {
    let instance = uri.path();
    let account_id = param(&q, "account_id", instance)?;
    let mut s = ctx.lock();
    s.usable_account(account_id, instance)?;
    let public_id = s
        .person(account_id, &identifier)
        .ok_or_else(|| error(404, "resource_not_found", instance))?;
    if q.get("notify").is_some_and(|n| n == "true") {
        let at = s.now();
        s.done.push(Done {
            at_ms: at,
            account_id: account_id.to_owned(),
            public_id: public_id.clone(),
            kind: "view",
            text: None,
        });
        *s.views
            .entry((account_id.to_owned(), public_id.clone()))
            .or_default() += 1;
    }
    let relation = s.is_relation(account_id, &public_id);
    let pending = s.pending(account_id, &public_id).is_some();
    Ok(reply(
        200,
        json!({
            "object": "UserProfile",
            "provider": "LINKEDIN",
            "provider_id": FakeUnipile::provider_id(account_id, &public_id),
            "public_identifier": public_id,
            "first_name": first_name(&public_id),
            "last_name": "Doe",
            "network_distance": if relation { "FIRST_DEGREE" } else { "SECOND_DEGREE" },
            "invitation": if pending { json!({"type": "SENT", "status": "PENDING"}) } else { Value::Null },
            "is_relationship": relation,
        }),
    ))
}

async fn invite(AxState(ctx): AxState<Ctx>, uri: Uri, body: Bytes) -> Reply {
    let instance = uri.path();
    let body = json_body(&body, instance)?;
    let bad = || error(400, "invalid_parameters", instance);
    let account_id = body["account_id"].as_str().ok_or_else(bad)?;
    let provider_id = body["provider_id"].as_str().ok_or_else(bad)?;
    if body["message"]
        .as_str()
        .is_some_and(|m| m.chars().count() > 300)
    {
        return Err(error(400, "too_many_characters", instance));
    }
    let mut s = ctx.lock();
    s.usable_account(account_id, instance)?;
    let public_id = s
        .person(account_id, provider_id)
        .filter(|p| FakeUnipile::provider_id(account_id, p) == provider_id)
        .ok_or_else(|| error(404, "resource_not_found", instance))?;
    if s.is_relation(account_id, &public_id) {
        return Err(error(422, "action_already_performed", instance));
    }
    if s.pending(account_id, &public_id).is_some() {
        return Err(error(422, "already_invited_recently", instance));
    }
    let (id, at) = (s.id("inv"), s.now());
    s.invitations.push(Invitation {
        id: id.clone(),
        account_id: account_id.to_owned(),
        public_id: public_id.clone(),
        at,
    });
    s.done.push(Done {
        at_ms: at,
        account_id: account_id.to_owned(),
        public_id: public_id.clone(),
        kind: "invite",
        text: None,
    });
    *s.invites_sent
        .entry((account_id.to_owned(), public_id))
        .or_default() += 1;
    let usage = s.invite_usage;
    Ok(reply(
        201,
        json!({"object": "UserInvitationSent", "invitation_id": id, "usage": usage}),
    ))
}

async fn list_sent_invitations(AxState(ctx): AxState<Ctx>, Query(q): Params, uri: Uri) -> Reply {
    let instance = uri.path();
    let account_id = param(&q, "account_id", instance)?;
    let s = ctx.lock();
    s.usable_account(account_id, instance)?;
    let items = s
        .invitations
        .iter()
        .rev()
        .filter(|i| i.account_id == account_id)
        .map(|i| {
            json!({
                "object": "UserInvitation",
                "id": i.id,
                "invited_user": full_name(&i.public_id),
                "invited_user_id": FakeUnipile::provider_id(account_id, &i.public_id),
                "invited_user_public_id": i.public_id,
                "date": rfc3339(i.at),
                "parsed_datetime": rfc3339(i.at),
            })
        })
        .collect();
    page("UserInvitationList", items, &q, instance)
}

async fn withdraw(
    AxState(ctx): AxState<Ctx>,
    Path(id): Path<String>,
    Query(q): Params,
    uri: Uri,
) -> Reply {
    let instance = uri.path();
    let account_id = param(&q, "account_id", instance)?;
    let mut s = ctx.lock();
    s.usable_account(account_id, instance)?;
    let index = s
        .invitations
        .iter()
        .position(|i| i.id == id && i.account_id == account_id)
        .ok_or_else(|| error(404, "resource_not_found", instance))?;
    let invitation = s.invitations.remove(index);
    *s.withdrawals
        .entry((account_id.to_owned(), invitation.public_id))
        .or_default() += 1;
    Ok(reply(200, json!({"object": "UserInvitationCancelled"})))
}

async fn list_relations(AxState(ctx): AxState<Ctx>, Query(q): Params, uri: Uri) -> Reply {
    let instance = uri.path();
    let account_id = param(&q, "account_id", instance)?;
    let s = ctx.lock();
    s.usable_account(account_id, instance)?;
    let items = s
        .relations
        .iter()
        .rev()
        .filter(|r| r.account_id == account_id)
        .map(|r| {
            json!({
                "object": "UserRelation",
                "member_id": FakeUnipile::provider_id(account_id, &r.public_id),
                "public_identifier": r.public_id,
                "first_name": first_name(&r.public_id),
                "last_name": "Doe",
                "created_at": r.at,
            })
        })
        .collect();
    page("UserRelationList", items, &q, instance)
}

/// The fields of a multipart body (a body that is not multipart is a 400).
async fn form(
    multipart: Result<Multipart, MultipartRejection>,
    instance: &str,
) -> Result<Vec<(String, String)>, Response> {
    let bad = || error(400, "invalid_parameters", instance);
    let mut multipart = multipart.map_err(|_| bad())?;
    let mut fields = Vec::new();
    while let Some(field) = multipart.next_field().await.map_err(|_| bad())? {
        let name = field.name().unwrap_or_default().to_owned();
        fields.push((name, field.text().await.map_err(|_| bad())?));
    }
    Ok(fields)
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

async fn start_chat(
    AxState(ctx): AxState<Ctx>,
    uri: Uri,
    multipart: Result<Multipart, MultipartRejection>,
) -> Reply {
    let instance = uri.path();
    let fields = form(multipart, instance).await?;
    let bad = || error(400, "invalid_parameters", instance);
    let account_id = field(&fields, "account_id").ok_or_else(bad)?;
    let text = field(&fields, "text").ok_or_else(bad)?;
    let attendees: Vec<&str> = fields
        .iter()
        .filter(|(n, _)| n == "attendees_ids" || n == "attendees_ids[]")
        .map(|(_, v)| v.as_str())
        .collect();
    let [attendee] = attendees.as_slice() else {
        return Err(bad());
    };
    if text.chars().count() > 8000 {
        return Err(error(400, "too_many_characters", instance));
    }
    let (chat_id, message_id, deliveries) = {
        let mut s = ctx.lock();
        s.usable_account(account_id, instance)?;
        let public_id = s
            .person(account_id, attendee)
            .filter(|p| s.is_relation(account_id, p))
            .ok_or_else(|| error(422, "no_connection_with_recipient", instance))?;
        let chat_id = s.chat_with(account_id, &public_id);
        let (message_id, deliveries) = s.add_message(&chat_id, text, true);
        (chat_id, message_id, deliveries)
    };
    spawn_deliveries(&ctx, deliveries);
    Ok(reply(
        201,
        json!({"object": "ChatStarted", "chat_id": chat_id, "message_id": message_id}),
    ))
}

async fn send_message(
    AxState(ctx): AxState<Ctx>,
    Path(chat_id): Path<String>,
    uri: Uri,
    multipart: Result<Multipart, MultipartRejection>,
) -> Reply {
    let instance = uri.path();
    let fields = form(multipart, instance).await?;
    let text = field(&fields, "text").ok_or_else(|| error(400, "invalid_parameters", instance))?;
    if text.chars().count() > 8000 {
        return Err(error(400, "too_many_characters", instance));
    }
    let (message_id, deliveries) = {
        let mut s = ctx.lock();
        let account_id = s
            .chats
            .iter()
            .find(|c| c.id == chat_id)
            .map(|c| c.account_id.clone())
            .ok_or_else(|| error(404, "resource_not_found", instance))?;
        s.usable_account(&account_id, instance)?;
        s.add_message(&chat_id, text, true)
    };
    spawn_deliveries(&ctx, deliveries);
    Ok(reply(
        201,
        json!({"object": "MessageSent", "message_id": message_id}),
    ))
}

async fn list_chats(AxState(ctx): AxState<Ctx>, Query(q): Params, uri: Uri) -> Reply {
    let instance = uri.path();
    let (after, before) = window(&q, instance)?;
    let account_id = q.get("account_id").filter(|a| !a.is_empty());
    let s = ctx.lock();
    if let Some(account_id) = account_id {
        s.usable_account(account_id, instance)?;
    }
    let mut chats: Vec<(i64, Value)> = s
        .chats
        .iter()
        .filter(|c| account_id.is_none_or(|a| *a == c.account_id))
        .filter_map(|c| {
            let last = s
                .messages
                .iter()
                .filter(|m| m.chat_id == c.id)
                .map(|m| m.at)
                .max()?;
            let chat = json!({
                "object": "Chat",
                "id": c.id,
                "account_id": c.account_id,
                "attendee_provider_id": FakeUnipile::provider_id(&c.account_id, &c.public_id),
                "timestamp": rfc3339(last),
                "unread_count": 0,
            });
            (last > after && last < before).then_some((last, chat))
        })
        .collect();
    chats.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    page(
        "ChatList",
        chats.into_iter().map(|(_, c)| c).collect(),
        &q,
        instance,
    )
}

async fn list_messages(
    AxState(ctx): AxState<Ctx>,
    Path(chat_id): Path<String>,
    Query(q): Params,
    uri: Uri,
) -> Reply {
    let instance = uri.path();
    let (after, before) = window(&q, instance)?;
    let s = ctx.lock();
    let chat = s
        .chats
        .iter()
        .find(|c| c.id == chat_id)
        .ok_or_else(|| error(404, "resource_not_found", instance))?;
    s.usable_account(&chat.account_id, instance)?;
    let items = s
        .messages
        .iter()
        .rev()
        .filter(|m| m.chat_id == chat_id && m.at > after && m.at < before)
        .map(|m| {
            let sender_id = if m.outbound {
                FakeUnipile::own_user_id(&chat.account_id)
            } else {
                FakeUnipile::provider_id(&chat.account_id, &chat.public_id)
            };
            json!({
                "object": "ChatMessage",
                "id": m.id,
                "chat_id": chat_id,
                "account_id": chat.account_id,
                "text": m.text,
                "sender_id": sender_id,
                "is_sender": i32::from(m.outbound),
                "timestamp": rfc3339(m.at),
            })
        })
        .collect();
    page("MessageList", items, &q, instance)
}

async fn get_account(AxState(ctx): AxState<Ctx>, Path(id): Path<String>, uri: Uri) -> Reply {
    let s = ctx.lock();
    let account = s
        .account(&id)
        .filter(|a| a.status != "DELETED")
        .ok_or_else(|| error(404, "resource_not_found", uri.path()))?;
    Ok(reply(
        200,
        json!({
            "object": "Account",
            "id": account.id,
            "name": format!("Sender {id}"),
            "type": "LINKEDIN",
            "created_at": rfc3339(0),
            "sources": [{"id": format!("{id}_MESSAGING"), "status": account.status}],
            "connection_params": {"im": {"id": FakeUnipile::own_user_id(&id), "publicIdentifier": format!("sender-{id}")}},
        }),
    ))
}

async fn hosted_link(AxState(ctx): AxState<Ctx>, uri: Uri, body: Bytes) -> Reply {
    let instance = uri.path();
    let body = json_body(&body, instance)?;
    let kind = body["type"].as_str().unwrap_or_default();
    let complete = ["name", "notify_url"]
        .iter()
        .all(|k| body[k].as_str().is_some_and(|v| !v.is_empty()));
    let reconnect_ok = kind != "reconnect" || body["reconnect_account"].is_string();
    if !matches!(kind, "create" | "reconnect") || !complete || !reconnect_ok {
        return Err(error(400, "invalid_parameters", instance));
    }
    let mut s = ctx.lock();
    s.hosted_links.push(body);
    let index = s.hosted_links.len() - 1;
    Ok(reply(
        201,
        json!({"object": "HostedAuthURL", "url": format!("https://account.unipile.test/hosted/{index}")}),
    ))
}

async fn create_webhook(AxState(ctx): AxState<Ctx>, uri: Uri, body: Bytes) -> Reply {
    let instance = uri.path();
    let body = json_body(&body, instance)?;
    let source = body["source"].as_str().unwrap_or_default();
    let known = [
        "messaging",
        "users",
        "account_status",
        "email",
        "email_tracking",
    ]
    .contains(&source);
    if !known || !body["request_url"].is_string() {
        return Err(error(400, "invalid_parameters", instance));
    }
    let mut s = ctx.lock();
    let id = s.id("wh");
    s.webhooks.push((id.clone(), body));
    Ok(reply(
        201,
        json!({"object": "WebhookCreated", "webhook_id": id}),
    ))
}

async fn list_webhooks(AxState(ctx): AxState<Ctx>, Query(q): Params, uri: Uri) -> Reply {
    let s = ctx.lock();
    let items = s
        .webhooks
        .iter()
        .map(|(id, body)| {
            let mut item = json!({"object": "Webhook", "id": id, "name": null, "headers": []});
            for (key, value) in body.as_object().into_iter().flatten() {
                item[key] = value.clone();
            }
            item
        })
        .collect();
    page("WebhookList", items, &q, uri.path())
}

/// Milliseconds since the epoch as RFC 3339 with milliseconds: `2026-11-27T20:00:00.123Z`.
fn rfc3339(ms: i64) -> String {
    let (secs, milli) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil from days (Howard Hinnant's algorithm), days counted from 1970-01-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (day_secs / 3600, day_secs % 3600 / 60, day_secs % 60);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

#[test]
fn rfc3339_formats_milliseconds() {
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
    assert_eq!(rfc3339(1_795_809_600_007), "2026-11-27T20:00:00.007Z");
}
