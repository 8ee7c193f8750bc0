//! `/settings/credits`: the workspace's balance and its ledger, newest first, a page at a time.
//!
//! Read from the same ledger the API's spending writes ([`credits::transactions`]), so what the
//! page shows is what an `insufficient_credits` refusal counted. Every member may look: the
//! balance decides whether their own calls go through.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use super::{Nav, PageError, display_time, render};
use crate::credits::{self, Transaction};
use crate::paging::PageParams;
use crate::state::AppState;

const PAGE: &str = "/settings/credits";
/// Ledger entries per page.
const PER_PAGE: u32 = 50;

pub struct Entry {
    id: String,
    when: String,
    kind: &'static str,
    amount: String,
    balance_after: i64,
    detail: String,
}

#[derive(Template)]
#[template(path = "web/credits.html")]
struct CreditsPage {
    nav: Nav,
    balance: i64,
    entries: Vec<Entry>,
    total: u64,
    first: u64,
    last: u64,
    newer: Option<String>,
    older: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct CreditsQuery {
    #[serde(default)]
    offset: Option<String>,
}

/// What an entry was for, in a few words.
fn detail(entry: &Transaction) -> String {
    let mut parts = Vec::new();
    if let Some(action) = &entry.action {
        parts.push(action.clone());
    }
    if let Some(object) = &entry.object_id {
        parts.push(object.clone());
    }
    if let Some(reason) = &entry.reason {
        parts.push(reason.clone());
    }
    parts.join(" · ")
}

/// `GET /settings/credits?offset=N`.
pub async fn show(
    State(state): State<Arc<AppState>>,
    Query(query): Query<CreditsQuery>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let signed = super::signed_in(&state, &headers, PAGE).await?;
    // A hand-edited offset that is not a number shows the first page rather than an error.
    let offset = query
        .offset
        .as_deref()
        .and_then(|text| text.parse::<u64>().ok())
        .unwrap_or(0);
    let balance = credits::balance(&state.db, &signed.workspace_id).await?;
    let params = PageParams {
        limit: Some(PER_PAGE),
        offset: Some(offset),
    };
    let ledger = credits::transactions(&state.db, &signed.workspace_id, params).await?;
    let entries = ledger
        .items
        .iter()
        .map(|entry| Entry {
            id: entry.id.clone(),
            when: display_time(entry.created_at.0),
            kind: entry.kind.as_str(),
            amount: format!("{:+}", entry.amount),
            balance_after: entry.balance_after,
            detail: detail(entry),
        })
        .collect();
    let newer = (offset > 0).then(|| {
        let previous = offset.saturating_sub(u64::from(PER_PAGE));
        if previous == 0 {
            PAGE.to_owned()
        } else {
            format!("{PAGE}?offset={previous}")
        }
    });
    let older = ledger
        .next_offset
        .map(|next| format!("{PAGE}?offset={next}"));
    Ok(render(
        StatusCode::OK,
        &CreditsPage {
            nav: signed.nav("credits", PAGE),
            balance,
            entries,
            total: ledger.total,
            first: ledger.offset + 1,
            last: ledger.offset + ledger.count,
            newer,
            older,
        },
    ))
}
