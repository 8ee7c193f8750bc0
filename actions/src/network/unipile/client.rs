//! Unipile's HTTP API v1 as the adapter calls it: the routes, a timeout per call, its error
//! bodies read into [`Failure`], and [`classify`], the one table from a failure to the engine's
//! [`NetworkError`] (docs/unipile.md shows it; a test checks the two agree).
//!
//! Only pure reads are retried here (twice, a moment apart, on a fault that may pass). A call
//! that acts (an invitation, a message, a view, a withdrawal) is made once: when it fails without
//! a clear answer its outcome is unknown, and the engine's reconciliation asks Unipile what
//! happened before anything is sent again.

use std::time::Duration;

use serde_json::Value;

use crate::network::{MAX_MESSAGE_CHARS, MAX_NOTE_CHARS, NetworkError};

const DAY_MS: i64 = 24 * 3_600_000;

/// How long Unipile keeps a withdrawn person from being invited again (the network's 3 weeks).
pub const RESEND_AFTER_MS: i64 = 21 * DAY_MS;

/// How a call to Unipile failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Unipile answered with an error body: its HTTP status, the name after `errors/` in its
    /// `type`, and its `detail`.
    Refused {
        status: u16,
        name: String,
        detail: String,
    },
    /// No usable answer: a timeout, a dropped connection, a body that is not what Unipile
    /// sends. Whether the call acted is unknown.
    NoAnswer(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused {
                status,
                name,
                detail,
            } => write!(f, "Unipile answered {status} errors/{name}: {detail}"),
            Self::NoAnswer(cause) => write!(f, "no answer from Unipile: {cause}"),
        }
    }
}

impl Failure {
    /// Whether a read may be asked again: the call had no answer, or a 5xx that may pass.
    fn may_pass(&self) -> bool {
        match self {
            Self::NoAnswer(_) => true,
            Self::Refused { status, .. } => *status >= 500,
        }
    }
}

/// What a call was doing, where one Unipile error means different things for different calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Reading a profile, a list or an account (no one sees it).
    Read,
    /// Viewing a profile with `notify=true` (the person sees the visit).
    View,
    /// Sending a connection request.
    Invite,
    /// Withdrawing a pending connection request.
    Withdraw,
    /// Sending a message (a new chat or an existing one).
    Message,
    /// Sending an InMail (a new chat with `linkedin[inmail]`).
    Inmail,
}

/// The engine's error for a Unipile failure of `op` (the table in docs/unipile.md). `now_ms` dates
/// the end of a "cannot resend yet".
pub fn classify(failure: &Failure, op: Op, now_ms: i64) -> NetworkError {
    let Failure::Refused {
        status,
        name,
        detail,
    } = failure
    else {
        return NetworkError::Transient(failure.to_string());
    };
    let rejected = || NetworkError::Rejected(format!("errors/{name}: {detail}"));
    match (*status, name.as_str()) {
        // The account's session: a person must sign in again.
        (
            401,
            "disconnected_account"
            | "invalid_credentials"
            | "expired_credentials"
            | "invalid_credentials_but_valid_account_imap"
            | "checkpoint_error"
            | "invalid_checkpoint_solution"
            | "multiple_sessions",
        ) => NetworkError::NeedsReauth,
        // Any other 401 is our API key, not the account: an operator's fault, which passes once
        // they fix it; the sender backs off meanwhile.
        (401, _) => NetworkError::Transient(failure.to_string()),
        // The network holds the account back.
        (403, _) => NetworkError::AccountRestricted,
        (404, _) if op == Op::Withdraw => NetworkError::NotInvited,
        (404, _) => NetworkError::Unreachable,
        (400 | 422, "too_many_characters") => NetworkError::TooLong {
            limit: match op {
                Op::Invite => MAX_NOTE_CHARS,
                Op::Inmail => crate::network::MAX_INMAIL_CHARS,
                _ => MAX_MESSAGE_CHARS,
            },
        },
        (422, "no_connection_with_recipient") => NetworkError::NotConnected,
        (
            422,
            "blocked_recipient"
            | "user_unreachable"
            | "cannot_invite_attendee"
            | "cant_send_message"
            | "recipient_cannot_be_reached",
        ) => NetworkError::Unreachable,
        (422, "not_allowed_inmail") if op == Op::Inmail => NetworkError::NotAllowedInmail,
        (402 | 422, "insufficient_credits") if op == Op::Inmail => {
            NetworkError::InsufficientCredits
        }
        (422, "not_allowed_inmail") => NetworkError::Unreachable,
        (422, "cannot_resend_yet") => NetworkError::CannotResendYet {
            retry_at_ms: now_ms + RESEND_AFTER_MS,
        },
        (422, "cannot_resend_within_24hrs") => NetworkError::CannotResendYet {
            retry_at_ms: now_ms + DAY_MS,
        },
        (422, "already_invited_recently") => NetworkError::AlreadyInvited,
        (422, "action_already_performed") if op == Op::Withdraw => NetworkError::NotInvited,
        (422, "action_already_performed") if op == Op::Invite => NetworkError::AlreadyInvited,
        (422, "limit_exceeded") | (429, _) => NetworkError::LimitExceeded { retry_at_ms: None },
        (400 | 422, _) => rejected(),
        // 5xx, and anything else: the outcome is unknown.
        _ => NetworkError::Transient(failure.to_string()),
    }
}

/// A client of one Unipile tenant.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    /// `https://{sub}.unipile.com:{port}/api/v1`
    base: String,
    api_key: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the API key.
        f.debug_struct("Client")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// Pauses between the attempts of a read.
const READ_RETRY_PAUSES: [Duration; 2] = [Duration::from_millis(200), Duration::from_millis(1_000)];

impl Client {
    /// A client of the tenant at `dsn` (`https://api1.unipile.com:13111`, a scheme optional),
    /// every call given at most `timeout`.
    pub fn new(dsn: &str, api_key: &str, timeout: Duration) -> Result<Self, String> {
        let dsn = dsn.trim().trim_end_matches('/');
        let dsn = if dsn.contains("://") {
            dsn.to_owned()
        } else {
            format!("https://{dsn}")
        };
        let parsed =
            url::Url::parse(&dsn).map_err(|error| format!("UNIPILE_DSN `{dsn}`: {error}"))?;
        if !matches!(parsed.scheme(), "https" | "http") || parsed.host().is_none() {
            return Err(format!("UNIPILE_DSN `{dsn}` is not an http(s) address"));
        }
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("outreach/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| format!("the HTTP client: {error}"))?;
        Ok(Self {
            http,
            base: format!("{dsn}/api/v1"),
            api_key: api_key.to_owned(),
        })
    }

    /// The tenant's address (`api_url` of a hosted link).
    pub fn dsn(&self) -> &str {
        self.base.trim_end_matches("/api/v1")
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request to `path` with the API key, answered in JSON.
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(path))
            .header("X-API-KEY", &self.api_key)
            .header("accept", "application/json")
    }

    /// `GET`, retried while the fault may pass.
    pub async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value, Failure> {
        let mut pauses = READ_RETRY_PAUSES.iter();
        loop {
            match self.get_once(path, query).await {
                Err(failure) if failure.may_pass() => match pauses.next() {
                    Some(pause) => tokio::time::sleep(*pause).await,
                    None => return Err(failure),
                },
                result => return result,
            }
        }
    }

    /// `GET` once: a read that the person sees (a profile view with `notify=true`).
    pub async fn get_once(&self, path: &str, query: &[(&str, String)]) -> Result<Value, Failure> {
        read(
            self.request(reqwest::Method::GET, path)
                .query(query)
                .send()
                .await,
        )
        .await
    }

    /// `POST` a JSON body, once.
    pub async fn post_json(&self, path: &str, body: &Value) -> Result<Value, Failure> {
        read(
            self.request(reqwest::Method::POST, path)
                .json(body)
                .send()
                .await,
        )
        .await
    }

    /// `POST` a `multipart/form-data` body of text fields, once.
    pub async fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> Result<Value, Failure> {
        let mut form = reqwest::multipart::Form::new();
        for (name, value) in fields {
            form = form.text(name.to_string(), value.to_string());
        }
        read(
            self.request(reqwest::Method::POST, path)
                .multipart(form)
                .send()
                .await,
        )
        .await
    }

    /// `DELETE`, once.
    pub async fn delete(&self, path: &str, query: &[(&str, String)]) -> Result<Value, Failure> {
        read(
            self.request(reqwest::Method::DELETE, path)
                .query(query)
                .send()
                .await,
        )
        .await
    }

    /// Every item of a list route, following `cursor` for at most `max_pages` pages of 100.
    pub async fn list_all(
        &self,
        path: &str,
        query: &[(&str, String)],
        max_pages: usize,
    ) -> Result<Vec<Value>, Failure> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..max_pages {
            let mut page_query = query.to_vec();
            page_query.push(("limit", "100".to_owned()));
            if let Some(cursor) = &cursor {
                page_query.push(("cursor", cursor.clone()));
            }
            let page = self.get(path, &page_query).await?;
            let Some(page_items) = page.get("items").and_then(Value::as_array) else {
                return Err(Failure::NoAnswer(format!("{path}: a list without `items`")));
            };
            items.extend(page_items.iter().cloned());
            cursor = page
                .get("cursor")
                .and_then(Value::as_str)
                .filter(|cursor| !cursor.is_empty())
                .map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        Ok(items)
    }
}

/// Unipile's answer as JSON, or the failure it is.
async fn read(sent: Result<reqwest::Response, reqwest::Error>) -> Result<Value, Failure> {
    let response = sent.map_err(|error| Failure::NoAnswer(describe(&error)))?;
    let status = response.status().as_u16();
    let bytes = response
        .bytes()
        .await
        .map_err(|error| Failure::NoAnswer(describe(&error)))?;
    let body: Option<Value> = serde_json::from_slice(&bytes).ok();
    if (200..300).contains(&status) {
        return body.filter(Value::is_object).ok_or_else(|| {
            Failure::NoAnswer(format!("a {status} answer that is not a JSON object"))
        });
    }
    let field = |name: &str| {
        body.as_ref()
            .and_then(|body| body.get(name))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let kind = field("type");
    let name = kind.strip_prefix("errors/").unwrap_or(&kind).to_owned();
    let detail = match field("detail") {
        detail if detail.is_empty() => field("title"),
        detail => detail,
    };
    Err(Failure::Refused {
        status,
        name,
        detail,
    })
}

fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "the call timed out".to_owned()
    } else if error.is_connect() {
        "could not connect".to_owned()
    } else {
        error.to_string()
    }
}
