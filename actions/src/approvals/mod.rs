//! The approval queue: everything that waits for a person before it reaches the network.
//!
//! An item is small and general: a `kind` (`enrollment`, or `reply` for a reply an agent drafted
//! in a conversation), the object it decides (`subject_id`), the prospect, sequence and sender it
//! concerns, the texts a person approves, and who or what proposed it (a person through a
//! credential, or an agent run, with why it chose the prospect and who drafted the texts).
//! Deciding is in [`decide`]; an agent's proposals expire after 72 hours ([`expiry`]), giving the
//! prospect back to other runs. A draft can be edited before it is decided (`update_approval`),
//! under the same checks as a template: no unfilled variable, within the step's limit.

pub mod decide;
pub mod expiry;
pub mod propose;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use crate::approval_items;
use crate::common::{IdKind, json_text};
use crate::conversations::Classification;
use crate::person_lock::PersonTx;
use crate::prospects::Tier;
use crate::scoring::engine::MatchedCriterion;
use crate::sequences::DraftedBy;
use crate::sequences::RenderedText;
use outreach_runtime::prelude::{
    ApiError, Ctx, ErrorCode, Page, PageParams, Timestamp, action, paged,
};

outreach_runtime::prelude::resource_tag!(
    "approvals",
    toolset = "outreach",
    "The approval queue: everything that would reach a person (an enrollment, a reply) waits here until a person approves or rejects it."
);

/// The most item ids one decision takes.
pub const MAX_IDS: usize = 1000;

outreach_runtime::prelude::text_enum! {
    /// What an approval item decides.
    pub enum ApprovalKind {
        /// Whether a prospect may receive a sequence's steps (the subject is the enrollment).
        Enrollment => "enrollment",
        /// Whether a reply an agent drafted may be sent in a conversation (the subject is the
        /// conversation).
        Reply => "reply",
    }
}

outreach_runtime::prelude::text_enum! {
    /// Where an approval item is.
    pub enum ApprovalStatus {
        /// Waits for a person.
        Pending => "pending",
        /// Approved: its outreach may go out.
        Approved => "approved",
        /// Rejected: nothing of it is sent.
        Rejected => "rejected",
        /// No longer relevant: its enrollment or sequence was stopped, the prospect became
        /// do-not-contact or declined, or an agent's proposal waited 72 hours.
        Expired => "expired",
    }
}

/// Who or what proposed an item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProposedBy {
    /// `api_key`, `oauth_token`, `web_session` (a person through a credential or a signed-in
    /// browser) or `agent`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The credential's or agent's id.
    pub id: String,
    /// The person behind the credential, if any.
    pub person_id: Option<String>,
    /// The credential's or agent's name.
    pub name: Option<String>,
}

impl ProposedBy {
    /// The caller of this request.
    pub fn caller(ctx: &Ctx) -> Self {
        let principal = ctx.principal();
        Self {
            kind: principal.credential_kind.as_str().to_owned(),
            id: principal.credential_id.clone(),
            person_id: Some(principal.person_id.clone()),
            name: Some(principal.credential_name.clone()),
        }
    }
}

/// The prospect an item concerns, as a person deciding needs to see it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ProspectSummary {
    pub full_name: Option<String>,
    pub title: Option<String>,
    pub company_name: Option<String>,
    pub profile_url: Option<String>,
}

/// Why an agent run proposed an item.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProposalReasons {
    /// The reasons as a sentence.
    pub summary: String,
    /// `prospector`: the prospect's score against the agent's targeting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<i64>,
    /// `prospector`: the tier of that score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// `prospector`: the targeting (`tgt_...`) scored against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targeting_id: Option<String>,
    /// `prospector`: the criteria that earned points.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matched: Vec<MatchedCriterion<'static>>,
    /// `inbox_triage`: what the prospect's reply was read as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classification: Option<Classification>,
    /// `inbox_triage`: the inbound message (`msg_...`) replied to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

/// One item of the approval queue.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ApprovalItem {
    pub id: String,
    /// `enrollment` or `reply`.
    pub kind: ApprovalKind,
    /// `pending`, `approved`, `rejected` or `expired`.
    pub status: ApprovalStatus,
    /// The object decided: the enrollment (`enr_...`) for kind `enrollment`, the conversation
    /// (`cnv_...`) for kind `reply`.
    pub subject_id: String,
    pub prospect_id: String,
    pub prospect: Option<ProspectSummary>,
    pub sequence_id: Option<String>,
    pub sequence_name: Option<String>,
    pub sender_id: Option<String>,
    /// The texts the prospect would receive, rendered for them, by step.
    pub texts: Vec<RenderedText>,
    pub proposed_by: ProposedBy,
    /// The agent run (`run_...`) that proposed it; `null` when a person did.
    pub run_id: Option<String>,
    /// The agent (`agt_...`) whose run proposed it; `null` when a person did.
    pub agent_id: Option<String>,
    /// On an agent's draft: `llm` when the drafting model wrote every text, `template` otherwise
    /// (each text says which, and why the template was used). A text a person edited since
    /// (`edited_at`) has no `drafted_by` of its own.
    pub drafted_by: Option<DraftedBy>,
    /// Why an agent run proposed it; `null` when a person did.
    pub reasons: Option<ProposalReasons>,
    /// When a pending agent proposal expires (72 hours after it was made); `null`: never.
    pub expires_at: Option<Timestamp>,
    /// When a person last edited its texts (`update_approval`), and who (`psn_...`).
    pub edited_at: Option<Timestamp>,
    pub edited_by: Option<String>,
    pub created_at: Timestamp,
    pub decided_at: Option<Timestamp>,
    /// The person (`psn_...`) who approved or rejected it.
    pub decided_by: Option<String>,
}

const ITEM_COLUMNS: &str = "a.id, a.kind, a.status, a.subject_id, a.prospect_id, a.sequence_id, a.sender_id, a.texts, \
     a.proposed_by, a.run_id, a.agent_id, a.drafted_by, a.reasons, a.expires_at, a.edited_at, a.edited_by, \
     a.created_at, a.decided_at, a.decided_by, \
     p.first_name, p.last_name, p.title, p.company_name, p.profile_url, s.name as sequence_name";

const ITEM_FROM: &str = "approvals a left join prospects p on p.id = a.prospect_id \
     left join sequences s on s.id = a.sequence_id";

impl ApprovalItem {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        let first: Option<String> = row.try_get("first_name")?;
        let last: Option<String> = row.try_get("last_name")?;
        let profile_url: Option<String> = row.try_get("profile_url")?;
        let full_name = crate::prospects::normalize::full_name(first.as_deref(), last.as_deref());
        Ok(Self {
            id: row.try_get("id")?,
            kind: ApprovalKind::from_db(&row.try_get::<String, _>("kind")?)?,
            status: ApprovalStatus::from_db(&row.try_get::<String, _>("status")?)?,
            subject_id: row.try_get("subject_id")?,
            prospect_id: row.try_get("prospect_id")?,
            prospect: Some(ProspectSummary {
                full_name,
                title: row.try_get("title")?,
                company_name: row.try_get("company_name")?,
                profile_url,
            }),
            sequence_id: row.try_get("sequence_id")?,
            sequence_name: row.try_get("sequence_name")?,
            sender_id: row.try_get("sender_id")?,
            texts: serde_json::from_str(&row.try_get::<String, _>("texts")?)
                .map_err(ApiError::internal)?,
            proposed_by: serde_json::from_str(&row.try_get::<String, _>("proposed_by")?)
                .map_err(ApiError::internal)?,
            run_id: row.try_get("run_id")?,
            agent_id: row.try_get("agent_id")?,
            drafted_by: row
                .try_get::<Option<String>, _>("drafted_by")?
                .map(|text| DraftedBy::from_db(&text))
                .transpose()?,
            reasons: row
                .try_get::<Option<String>, _>("reasons")?
                .map(|text| serde_json::from_str(&text))
                .transpose()
                .map_err(ApiError::internal)?,
            expires_at: row.try_get::<Option<i64>, _>("expires_at")?.map(Timestamp),
            edited_at: row.try_get::<Option<i64>, _>("edited_at")?.map(Timestamp),
            edited_by: row.try_get("edited_by")?,
            created_at: Timestamp(row.try_get("created_at")?),
            decided_at: row.try_get::<Option<i64>, _>("decided_at")?.map(Timestamp),
            decided_by: row.try_get("decided_by")?,
        })
    }
}

/// A new pending item, as `add_to_sequence` (and later the agents) propose it.
pub struct NewApproval<'a> {
    pub id: &'a str,
    pub kind: ApprovalKind,
    pub subject_id: &'a str,
    pub sequence_id: Option<&'a str>,
    pub prospect_id: &'a str,
    pub sender_id: Option<&'a str>,
    pub texts: &'a [RenderedText],
    /// The agent run that proposes it, with its agent; `None` for a person's proposal.
    pub run: Option<(&'a str, &'a str)>,
    /// Who wrote the texts, on an agent's draft.
    pub drafted_by: Option<DraftedBy>,
    /// Why an agent proposed it ([`ProposalReasons`] as JSON text).
    pub reasons: Option<&'a str>,
    /// When it expires unless decided; `None`: never.
    pub expires_at: Option<i64>,
}

/// Inserts pending items in the caller's transaction (the people's lock held).
pub(crate) async fn insert_pending(
    conn: &mut PersonTx<'_>,
    workspace_id: &str,
    proposed_by: &ProposedBy,
    now: i64,
    items: &[NewApproval<'_>],
) -> Result<(), ApiError> {
    let proposed_by = json_text(proposed_by)?;
    let rows = items
        .iter()
        .map(|item| {
            Ok(approval_items::PendingRow {
                id: item.id,
                kind: item.kind.as_str(),
                subject_id: item.subject_id,
                sequence_id: item.sequence_id,
                prospect_id: item.prospect_id,
                sender_id: item.sender_id,
                texts: json_text(&item.texts)?,
                run_id: item.run.map(|(run_id, _)| run_id),
                agent_id: item.run.map(|(_, agent_id)| agent_id),
                drafted_by: item.drafted_by.map(DraftedBy::as_str),
                reasons: item.reasons,
                expires_at: item.expires_at,
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    approval_items::insert_pending(conn, workspace_id, &proposed_by, now, &rows).await
}

/// The input of `list_approvals`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListApprovalsInput {
    /// `seq_...`
    pub sequence_id: Option<String>,
    /// An `enrollment` in a sequence, or a drafted `reply`.
    pub kind: Option<ApprovalKind>,
    /// Proposed by this agent run (`run_...`).
    pub run_id: Option<String>,
    /// Proposed by this agent's runs (`agt_...`).
    pub agent_id: Option<String>,
    /// Default `pending`.
    pub status: Option<ApprovalStatus>,
    #[serde(flatten)]
    pub page: PageParams,
}

/// List the approval queue, newest first.
///
/// Each item shows the prospect, the texts they would get, and who proposed it.
///
/// What waits for a person before it reaches the network; `status` defaults to `pending`. Each item
/// names the prospect (with name, title, company, profile), the sequence and sender, the texts the
/// prospect would receive, and who proposed it (with `run_id` and `agent_id` when an agent run
/// did). Filter by `sequence_id`, `kind`, `run_id` and `agent_id`. Paged with `limit` (1 to 200,
/// default 25) and `offset`.
#[action(scope = "read", http = "GET /approvals")]
pub async fn list_approvals(
    ctx: Ctx,
    input: ListApprovalsInput,
) -> Result<Page<ApprovalItem>, ApiError> {
    let status = input.status.unwrap_or(ApprovalStatus::Pending);
    let mut filter = String::from("a.workspace_id = $1 and a.status = $2");
    filter.push_str(if input.sequence_id.is_some() {
        " and a.sequence_id = $3"
    } else {
        " and $3 = $3"
    });
    filter.push_str(if input.kind.is_some() {
        " and a.kind = $4"
    } else {
        " and $4 = $4"
    });
    filter.push_str(if input.run_id.is_some() {
        " and a.run_id = $5"
    } else {
        " and $5 = $5"
    });
    filter.push_str(if input.agent_id.is_some() {
        " and a.agent_id = $6"
    } else {
        " and $6 = $6"
    });
    let sequence_id = input.sequence_id.clone().unwrap_or_default();
    let run_id = input.run_id.clone().unwrap_or_default();
    let agent_id = input.agent_id.clone().unwrap_or_default();
    let kind = input.kind.map_or("", ApprovalKind::as_str);
    paged(
        ctx.db().pool(),
        input.page,
        format!("select count(*) from approvals a where {filter}"),
        format!(
            "select {ITEM_COLUMNS} from {ITEM_FROM} where {filter} order by a.created_at desc, a.id desc limit $7 offset $8"
        ),
        |query| {
            query
                .bind(ctx.workspace_id())
                .bind(status.as_str())
                .bind(sequence_id.clone())
                .bind(kind)
                .bind(run_id.clone())
                .bind(agent_id.clone())
        },
        ApprovalItem::from_row,
    )
    .await
}

outreach_runtime::prelude::example!(list_approvals,
    request: {"run_id": "run_qouf72evK04FKb8aJCy8", "limit": 1},
    response: {
        "count": 1,
        "has_more": true,
        "items": [
            {
                "agent_id": "agt_uC25m6KD9jMP26hUnu2B",
                "created_at": "2026-11-24T10:43:43.702Z",
                "decided_at": null,
                "decided_by": null,
                "drafted_by": "template",
                "edited_at": null,
                "edited_by": null,
                "expires_at": "2026-11-27T10:43:43.702Z",
                "id": "apr_p5L2rgg2QtA5fTSXhFiQ",
                "kind": "enrollment",
                "proposed_by": {
                    "id": "agt_uC25m6KD9jMP26hUnu2B",
                    "name": "Finder",
                    "person_id": "psn_S78PHjQ1Gxxrs0AaGiVl",
                    "type": "agent"
                },
                "prospect": {
                    "company_name": "Compiler Works",
                    "full_name": "Grace Example",
                    "profile_url": "linkedin.com/in/grace-example-1",
                    "title": "Head of Sales"
                },
                "prospect_id": "prs_rnCByDKSyoytsxw895o3",
                "reasons": {
                    "matched": [
                        {
                            "criterion": "titles",
                            "field": "title",
                            "points": 60,
                            "value": "head of sales"
                        }
                    ],
                    "score": 60,
                    "summary": "Score 60 (tier b) against targeting `Heads of sales`: titles `head of sales` in title (+60).",
                    "targeting_id": "tgt_sW8jGZy97n4Qevq812Ei",
                    "tier": "b"
                },
                "run_id": "run_qouf72evK04FKb8aJCy8",
                "sender_id": "snd_wPlpaLP11UY148uu2eLa",
                "sequence_id": "seq_okRb3aRfHsHWtBVIOdmk",
                "sequence_name": "Q3 heads of sales (DACH)",
                "status": "pending",
                "subject_id": "enr_VOMni7KAkC36tIbUIxKU",
                "texts": [
                    {
                        "drafted_by": "template",
                        "step_index": 0,
                        "text": "Hi Grace, I work with sales teams like Compiler Works's and would like to connect.",
                        "type": "connection_request"
                    },
                    {
                        "drafted_by": "template",
                        "step_index": 1,
                        "text": "Thanks for connecting, Grace! Would a short call next week be useful?",
                        "type": "message"
                    }
                ]
            }
        ],
        "next_offset": 1,
        "offset": 0,
        "total": 2
    }
);

outreach_runtime::prelude::parity!(list_approvals, read,
    ok: {"kind": "enrollment", "limit": 5, "sequence_id": "$active"},
    fails: {"agent_id": "$agent", "kind": "note"} => INVALID_REQUEST
);

/// Reads one item of the workspace, or 404.
pub(crate) async fn fetch(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<ApprovalItem, ApiError> {
    IdKind::Approval.check(id)?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "select {ITEM_COLUMNS} from {ITEM_FROM} where a.workspace_id = $1 and a.id = $2"
    )))
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(conn)
    .await?
    .ok_or_else(|| IdKind::Approval.not_found(id))?;
    ApprovalItem::from_row(&row)
}

/// The input of `get_approval`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ApprovalId {
    /// `apr_...`
    pub id: String,
}

/// Get an approval item by id.
///
/// With its prospect, texts, status, and who proposed it and why.
#[action(scope = "read", http = "GET /approvals/{id}")]
pub async fn get_approval(ctx: Ctx, input: ApprovalId) -> Result<ApprovalItem, ApiError> {
    let mut conn = ctx.db().pool().acquire().await?;
    fetch(&mut conn, ctx.workspace_id(), &input.id).await
}

outreach_runtime::prelude::example!(get_approval,
    request: {"id": "apr_p5L2rgg2QtA5fTSXhFiQ"},
    response: {
        "agent_id": "agt_uC25m6KD9jMP26hUnu2B",
        "created_at": "2026-11-24T10:43:43.702Z",
        "decided_at": null,
        "decided_by": null,
        "drafted_by": "template",
        "edited_at": null,
        "edited_by": null,
        "expires_at": "2026-11-27T10:43:43.702Z",
        "id": "apr_p5L2rgg2QtA5fTSXhFiQ",
        "kind": "enrollment",
        "proposed_by": {
            "id": "agt_uC25m6KD9jMP26hUnu2B",
            "name": "Finder",
            "person_id": "psn_S78PHjQ1Gxxrs0AaGiVl",
            "type": "agent"
        },
        "prospect": {
            "company_name": "Compiler Works",
            "full_name": "Grace Example",
            "profile_url": "linkedin.com/in/grace-example-1",
            "title": "Head of Sales"
        },
        "prospect_id": "prs_rnCByDKSyoytsxw895o3",
        "reasons": {
            "matched": [{"criterion": "titles", "field": "title", "points": 60, "value": "head of sales"}],
            "score": 60,
            "summary": "Score 60 (tier b) against targeting `Heads of sales`: titles `head of sales` in title (+60).",
            "targeting_id": "tgt_sW8jGZy97n4Qevq812Ei",
            "tier": "b"
        },
        "run_id": "run_qouf72evK04FKb8aJCy8",
        "sender_id": "snd_wPlpaLP11UY148uu2eLa",
        "sequence_id": "seq_okRb3aRfHsHWtBVIOdmk",
        "sequence_name": "Q3 heads of sales (DACH)",
        "status": "pending",
        "subject_id": "enr_VOMni7KAkC36tIbUIxKU",
        "texts": [
            {
                "drafted_by": "template",
                "step_index": 0,
                "text": "Hi Grace, I work with sales teams like Compiler Works's and would like to connect.",
                "type": "connection_request"
            },
            {
                "drafted_by": "template",
                "step_index": 1,
                "text": "Thanks for connecting, Grace! Would a short call next week be useful?",
                "type": "message"
            }
        ]
    }
);

outreach_runtime::prelude::parity!(get_approval, read,
    ok: {"id": "$pending_approval"},
    fails: {"id": "$missing:apr"} => NOT_FOUND
);

/// One text of a draft to replace.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
// The list field that holds it describes it; a tool shows no line per item.
#[schemars(description = "")]
pub struct TextEdit {
    /// As in the item's `texts`; 0 for a reply.
    pub step_index: u32,
    /// On an A/B step, as in the item's `texts`.
    #[serde(default)]
    pub variant: Option<String>,
    /// Plain, or a template (`Hi {{first_name|there}}`).
    ///
    /// A template is rendered for the prospect.
    #[schemars(length(min = 1), regex(pattern = crate::common::NOT_BLANK))]
    pub text: String,
}

/// The input of `update_approval`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateApprovalInput {
    /// `apr_...`
    pub id: String,
    /// The others stay.
    #[schemars(length(min = 1, max = 20))]
    pub texts: Vec<TextEdit>,
}

/// Edit a draft before it is decided.
///
/// Only a `pending` item; what is approved is exactly what is sent. Rendered, a note holds at most
/// 300 characters, a message or reply 8,000.
///
/// Replaces texts of the item, each named by its `step_index`. A text may use variables
/// (`{{first_name|there}}`), filled for the prospect. An unknown variable is a 400; an item already
/// decided or expired a 409 `invalid_state`. Sends nothing.
#[action(scope = "write", idempotent, http = "PATCH /approvals/{id}")]
pub async fn update_approval(
    ctx: Ctx,
    input: UpdateApprovalInput,
) -> Result<ApprovalItem, ApiError> {
    use crate::sequences::templates::Template;
    use crate::sequences::{MAX_INMAIL_CHARS, MAX_MESSAGE_CHARS, MAX_NOTE_CHARS, StepType};

    IdKind::Approval.check(&input.id)?;
    if input.texts.is_empty() {
        return Err(ApiError::invalid_request(
            "`texts` must name at least one text to replace.",
        ));
    }
    let workspace_id = ctx.workspace_id();
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let item = fetch(&mut tx, workspace_id, &input.id).await?;
    // The item's person first (see `person_lock`); the edit is conditional on it still pending.
    let mut tx =
        crate::person_lock::lock(&mut tx, workspace_id, [item.prospect_id.as_str()]).await?;
    if item.status != ApprovalStatus::Pending {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "Approval item `{}` is `{}`; only `pending` items can be edited.",
                item.id, item.status
            ),
        )
        .with_extra("status", item.status.as_str()));
    }
    if let Some(expires_at) = item.expires_at
        && expires_at.ms() <= now
    {
        return Err(expired(std::slice::from_ref(&item.id)));
    }
    let prospect = crate::prospects::fetch_in(&mut tx, workspace_id, &item.prospect_id).await?;
    let mut texts = item.texts.clone();
    let mut seen = std::collections::HashSet::new();
    for (index, edit) in input.texts.iter().enumerate() {
        let field = format!("`texts[{index}].text`");
        let variant = edit.variant.as_deref();
        let named = match variant {
            Some(variant) => format!("step {} variant `{variant}`", edit.step_index),
            None => format!("step {}", edit.step_index),
        };
        if !seen.insert((edit.step_index, variant)) {
            return Err(ApiError::invalid_request(format!(
                "`texts` names {named} twice; give each text once."
            )));
        }
        let Some(slot) = texts
            .iter_mut()
            .find(|t| t.step_index == edit.step_index && t.variant.as_deref() == variant)
        else {
            if item.texts.iter().any(|t| t.step_index == edit.step_index) {
                let variants: Vec<String> = item
                    .texts
                    .iter()
                    .filter(|t| t.step_index == edit.step_index)
                    .map(|t| {
                        t.variant
                            .as_deref()
                            .map_or("(none)".into(), |v| format!("`{v}`"))
                    })
                    .collect();
                return Err(ApiError::invalid_request(format!(
                    "`texts[{index}].variant` does not name a text of step {}: its variants are {}.",
                    edit.step_index,
                    variants.join(", ")
                )));
            }
            let known: Vec<String> = texts.iter().map(|t| t.step_index.to_string()).collect();
            return Err(ApiError::invalid_request(format!(
                "`texts[{index}].step_index` is {}, but this item has no text for that step; its texts are for steps {}.",
                edit.step_index,
                known.join(", ")
            )));
        };
        let template = Template::parse(&edit.text)
            .map_err(|e| ApiError::invalid_request(e.sentence(&field)))?;
        let rendered = template.render_for(&prospect).map_err(|missing| {
            ApiError::invalid_request(format!(
                "{field} uses `{{{{{}}}}}`, which this prospect has no value for; add a fallback (`{{{{{}|...}}}}`) or write the value.",
                missing.0, missing.0
            ))
        })?;
        let rendered = rendered.trim().to_owned();
        let limit = match slot.kind {
            StepType::ConnectionRequest => MAX_NOTE_CHARS,
            StepType::Inmail => MAX_INMAIL_CHARS,
            _ => MAX_MESSAGE_CHARS,
        };
        let chars = rendered.chars().count();
        if chars == 0 || chars > limit {
            return Err(ApiError::invalid_request(format!(
                "{field} must be 1 to {limit} characters once filled in for this prospect; it is {chars}."
            )));
        }
        slot.text = rendered;
        slot.drafted_by = None;
        slot.fallback_reason = None;
    }
    let person_id = &ctx.principal().person_id;
    let texts = json_text(&texts)?;
    let edited =
        approval_items::edit_texts(&mut tx, workspace_id, &item.id, &texts, person_id, now).await?;
    if !edited {
        return Err(decide::changed_meanwhile(&item.id));
    }
    fetch(&mut tx, workspace_id, &item.id).await
}

outreach_runtime::prelude::example!(update_approval,
    request: {
        "id": "apr_p5L2rgg2QtA5fTSXhFiQ",
        "texts": [
            {
                "step_index": 1,
                "text": "Thanks for connecting, {{first_name}}! Would 20 minutes on Tuesday suit you?"
            }
        ]
    },
    response: {
        "agent_id": "agt_uC25m6KD9jMP26hUnu2B",
        "created_at": "2026-11-24T10:43:43.702Z",
        "decided_at": null,
        "decided_by": null,
        "drafted_by": "template",
        "edited_at": "2026-11-24T10:43:43.822Z",
        "edited_by": "psn_S78PHjQ1Gxxrs0AaGiVl",
        "expires_at": "2026-11-27T10:43:43.702Z",
        "id": "apr_p5L2rgg2QtA5fTSXhFiQ",
        "kind": "enrollment",
        "proposed_by": {
            "id": "agt_uC25m6KD9jMP26hUnu2B",
            "name": "Finder",
            "person_id": "psn_S78PHjQ1Gxxrs0AaGiVl",
            "type": "agent"
        },
        "prospect": {
            "company_name": "Compiler Works",
            "full_name": "Grace Example",
            "profile_url": "linkedin.com/in/grace-example-1",
            "title": "Head of Sales"
        },
        "prospect_id": "prs_rnCByDKSyoytsxw895o3",
        "reasons": {
            "matched": [{"criterion": "titles", "field": "title", "points": 60, "value": "head of sales"}],
            "score": 60,
            "summary": "Score 60 (tier b) against targeting `Heads of sales`: titles `head of sales` in title (+60).",
            "targeting_id": "tgt_sW8jGZy97n4Qevq812Ei",
            "tier": "b"
        },
        "run_id": "run_qouf72evK04FKb8aJCy8",
        "sender_id": "snd_wPlpaLP11UY148uu2eLa",
        "sequence_id": "seq_okRb3aRfHsHWtBVIOdmk",
        "sequence_name": "Q3 heads of sales (DACH)",
        "status": "pending",
        "subject_id": "enr_VOMni7KAkC36tIbUIxKU",
        "texts": [
            {
                "drafted_by": "template",
                "step_index": 0,
                "text": "Hi Grace, I work with sales teams like Compiler Works's and would like to connect.",
                "type": "connection_request"
            },
            {
                "step_index": 1,
                "text": "Thanks for connecting, Grace! Would 20 minutes on Tuesday suit you?",
                "type": "message"
            }
        ]
    }
);

outreach_runtime::prelude::parity!(update_approval, write,
    ok: {
        "id": "$pending_approval",
        "texts": [{"step_index": 1, "text": "Hi {{first_name|there}}, edited."}]
    },
    fails: {
        "id": "$pending_approval",
        "texts": [{"step_index": 9, "text": "Hi"}]
    } => INVALID_REQUEST
);

/// The 409 for agent proposals past their expiry.
pub(crate) fn expired(ids: &[String]) -> ApiError {
    let named = ids
        .iter()
        .map(|id| format!("`{id}`"))
        .collect::<Vec<_>>()
        .join(", ");
    ApiError::new(
        ErrorCode::INVALID_STATE,
        format!(
            "{named} expired: an agent's proposal waits at most {} hours for a decision; nothing was changed. Run the agent again for fresh proposals.",
            expiry::EXPIRES_AFTER_MS / 3_600_000
        ),
    )
    .with_extra("expired_ids", ids.to_vec())
}
