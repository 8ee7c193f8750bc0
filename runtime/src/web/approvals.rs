//! `/approvals`: the approval queue as a page, so a reviewer who signs in can approve, reject or
//! edit what is waiting without an API client: each pending item with the person (name, title,
//! company), why they were proposed (tier, score, the reasons' summary), the sequence, and every
//! drafted text (with its variant), newest first (as `list_approvals` answers).
//!
//! The page acts as the signed-in person through the actions ([`Caller`]): `list_approvals`,
//! `approve_outreach`, `reject_outreach` and `update_approval`, so the scopes, the sending terms,
//! the all-or-nothing rules and the lock order are the API's own, and a refusal is shown with
//! its sentence (approving needs `send`: a member, or a workspace whose sending terms are not
//! accepted, reads why). Every form names the item and the workspace it was shown for; a POST
//! after the person switched workspace in another tab changes nothing.

use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::acting::Caller;
use super::{Nav, PageError, render, see_other};
use crate::request_id::RequestId;
use crate::session;
use crate::state::AppState;

const PAGE: &str = "/approvals";

/// The flash of the last decision: this prefix and its sentence.
const DONE_FLASH: &str = "approvals_done:";

/// How many pending items the page shows (newest first); the API pages through the rest.
const SHOWN: u32 = 50;

/// A pending item as `list_approvals` answers it (the fields this page shows).
#[derive(Deserialize)]
struct Item {
    id: String,
    kind: String,
    prospect: Option<Person>,
    sequence_name: Option<String>,
    texts: Vec<Text>,
    reasons: Option<Reasons>,
    expires_at: Option<String>,
}

#[derive(Deserialize)]
struct Person {
    full_name: Option<String>,
    title: Option<String>,
    company_name: Option<String>,
}

#[derive(Deserialize)]
struct Reasons {
    summary: String,
    score: Option<i64>,
    tier: Option<String>,
}

#[derive(Deserialize)]
struct Text {
    step_index: u32,
    #[serde(rename = "type")]
    kind: String,
    variant: Option<String>,
    subject: Option<String>,
    text: String,
}

#[derive(Deserialize)]
struct Listed {
    items: Vec<Item>,
    total: u64,
}

/// One item as the page shows it.
struct Row {
    id: String,
    person: String,
    headline: String,
    what: String,
    tier: String,
    reasons: String,
    expires: String,
    texts: Vec<Text>,
}

impl Row {
    fn of(item: Item) -> Self {
        let person = item.prospect.as_ref();
        let name = person
            .and_then(|person| person.full_name.clone())
            .unwrap_or_else(|| "(no name)".to_owned());
        let headline = person
            .map(|person| match (&person.title, &person.company_name) {
                (Some(title), Some(company)) => format!("{title} at {company}"),
                (Some(one), None) | (None, Some(one)) => one.clone(),
                (None, None) => String::new(),
            })
            .unwrap_or_default();
        let what = match (item.kind.as_str(), item.sequence_name) {
            ("reply", _) => "A reply in a conversation".to_owned(),
            (_, Some(sequence)) => format!("Outreach in {sequence}"),
            _ => "Outreach".to_owned(),
        };
        let (tier, reasons) = match item.reasons {
            Some(reasons) => {
                let tier = match (reasons.tier, reasons.score) {
                    (Some(tier), Some(score)) => format!("tier {tier}, score {score}"),
                    (Some(tier), None) => format!("tier {tier}"),
                    (None, Some(score)) => format!("score {score}"),
                    (None, None) => String::new(),
                };
                (tier, reasons.summary)
            }
            None => (String::new(), String::new()),
        };
        Self {
            id: item.id,
            person: name,
            headline,
            what,
            tier,
            reasons,
            expires: item.expires_at.unwrap_or_default(),
            texts: item.texts,
        }
    }
}

impl Text {
    /// "Step 2, message, variant b".
    fn label(&self) -> String {
        let mut label = format!(
            "Step {}, {}",
            self.step_index + 1,
            self.kind.replace('_', " ")
        );
        if let Some(variant) = &self.variant {
            label.push_str(&format!(", variant {variant}"));
        }
        label
    }
}

#[derive(Template)]
#[template(path = "web/approvals.html")]
struct ApprovalsPage {
    nav: Nav,
    rows: Vec<Row>,
    total: u64,
    done: Option<String>,
}

/// `GET /approvals`.
pub async fn show(
    State(state): State<Arc<AppState>>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, PageError> {
    let next = uri.path_and_query().map_or(PAGE, |p| p.as_str());
    let signed = super::signed_in(&state, &headers, next).await?;
    let caller = Caller::new(&state, &signed, id).await?;
    let listed: Listed = caller
        .call_or_refuse(
            PAGE,
            "list_approvals",
            json!({"status": "pending", "limit": SHOWN}),
        )
        .await?;
    let done = session::take_flash(&state, &signed.session, DONE_FLASH).await?;
    let template = ApprovalsPage {
        nav: signed.nav("approvals", PAGE),
        total: listed.total,
        rows: listed.items.into_iter().map(Row::of).collect(),
        done,
    };
    Ok(render(StatusCode::OK, &template))
}

/// Runs one decision on one item and comes back to the page with its outcome.
async fn decide(
    state: Arc<AppState>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    item: String,
    body: Bytes,
    decision: Decision,
) -> Result<Response, PageError> {
    let (signed, form) = super::signed_in_workspace_form(&state, &headers, &body, PAGE).await?;
    let caller = Caller::new(&state, &signed, id).await?;
    let sentence = match decision {
        Decision::Approve => {
            let outcome: Value = caller
                .call_or_refuse(PAGE, "approve_outreach", json!({"ids": [item]}))
                .await?;
            match outcome["not_approved"]
                .as_array()
                .and_then(|list| list.first())
            {
                Some(refused) => format!(
                    "Not approved: {}",
                    refused["reason"]
                        .as_str()
                        .unwrap_or("the item could not be approved")
                ),
                None => "Approved: it goes out within the sender's hours and limits.".to_owned(),
            }
        }
        Decision::Reject => {
            let _: Value = caller
                .call_or_refuse(PAGE, "reject_outreach", json!({"ids": [item]}))
                .await?;
            "Rejected: nothing will be sent.".to_owned()
        }
        Decision::Edit => {
            let step_index: u32 = form.get("step_index").parse().map_err(|_| {
                PageError::message(
                    StatusCode::BAD_REQUEST,
                    "Not done",
                    "The form named no step to edit.",
                )
                .back_to(PAGE)
            })?;
            let mut text = json!({"step_index": step_index, "text": form.get("text")});
            let variant = form.get("variant");
            if !variant.is_empty() {
                text["variant"] = json!(variant);
            }
            let input = json!({"id": item, "texts": [text]});
            let _: Value = caller
                .call_or_refuse(PAGE, "update_approval", input)
                .await?;
            "Saved: the item waits with the new text.".to_owned()
        }
    };
    session::set_flash(&state, &signed.session, &format!("{DONE_FLASH}{sentence}")).await?;
    Ok(see_other(PAGE))
}

#[derive(Clone, Copy)]
enum Decision {
    Approve,
    Reject,
    Edit,
}

/// `POST /approvals/{id}/approve`.
pub async fn approve(
    State(state): State<Arc<AppState>>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    Path(item): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    decide(state, id, headers, item, body, Decision::Approve).await
}

/// `POST /approvals/{id}/reject`.
pub async fn reject(
    State(state): State<Arc<AppState>>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    Path(item): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    decide(state, id, headers, item, body, Decision::Reject).await
}

/// `POST /approvals/{id}/edit`: `step_index`, `variant` (empty for none) and `text`.
pub async fn edit(
    State(state): State<Arc<AppState>>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    Path(item): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    decide(state, id, headers, item, body, Decision::Edit).await
}
