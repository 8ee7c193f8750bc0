//! Agents: saved configurations that a run executes.
//!
//! An agent says whom to target (a targeting), where its prospects go or come from (a list),
//! what to say through which sequence (and, for `inbox_triage`, its reply templates), how much one
//! run may take (prospects and credits), and whether a person reviews its work (`review`, the
//! default) or not (`autonomous`). It holds references, not copies: a targeting, list or sequence
//! is checked to exist in the workspace when the agent names it, and is read again when a run
//! starts, so editing the sequence changes what the next run drafts. A kind that cannot work
//! without an input refuses to be saved without it, naming the field, rather than failing later in
//! a run nobody is watching. Runs are in [`runs`] (the actions) and [`execute`] (the job); what
//! each kind does is in [`prospector`], [`writer`] and [`triage`]; [`task`] offers a run to MCP
//! clients as a task.

pub mod execute;
pub mod prospector;
pub mod runs;
pub mod task;
pub mod triage;
pub mod writer;

use outreach_runtime::prelude::{ApiError, Ctx, Page, PageParams, Timestamp, action, ids, paged};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use crate::common::{Deleted, IdKind, json_text};
use crate::prospects::Tier;

outreach_runtime::prelude::resource_tag!(
    "agents",
    toolset = "agents",
    "Agents that work on your behalf (a prospector that proposes people to enroll, a writer that drafts the sequence's messages, an inbox triage that reads replies) and how each is set."
);

pub const MAX_NAME_CHARS: usize = 200;
/// The default and the ceiling of `max_prospects_per_run`.
pub const DEFAULT_PROSPECTS_PER_RUN: i64 = 50;
pub const MAX_PROSPECTS_PER_RUN: i64 = 1000;

outreach_runtime::prelude::text_enum! {
    /// What an agent's runs do.
    pub enum AgentKind {
        /// Scores the targeting's matches, adds those at or above `min_tier` to the list and
        /// proposes them for the sequence. Needs `targeting_id`, `list_id`, `sequence_id`.
        Prospector => "prospector",
        /// Drafts the sequence's texts for the list's prospects, for approval. Needs `list_id`,
        /// `sequence_id`.
        Writer => "writer",
        /// Classifies new replies, marks unsubscribes do-not-contact, drafts answers for
        /// approval.
        InboxTriage => "inbox_triage",
    }
}

outreach_runtime::prelude::text_enum! {
    /// Whether a person approves what a run proposes.
    pub enum AgentMode {
        /// Proposals wait in the approval queue (the default).
        Review => "review",
        /// Runs started with `send` approve their own proposals; `inbox_triage` never sends.
        Autonomous => "autonomous",
    }
}

/// An agent as the API shows it (and as a run keeps its settings).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Agent {
    pub id: String,
    pub name: String,
    pub kind: AgentKind,
    pub mode: AgentMode,
    /// A disabled agent keeps its settings but cannot be run.
    pub enabled: bool,
    /// The targeting a prospector selects and scores by (`tgt_...`).
    pub targeting_id: Option<String>,
    /// The list a prospector adds to, or a writer drafts for (`lst_...`).
    pub list_id: Option<String>,
    /// The sequence proposals are for (`seq_...`).
    pub sequence_id: Option<String>,
    /// The lowest tier a prospector keeps (`a` is best).
    pub min_tier: Tier,
    /// The most prospects one run processes.
    pub max_prospects_per_run: i64,
    /// The most credits one run may reserve; `null` for no cap beyond the balance.
    pub max_credits_per_run: Option<i64>,
    /// `inbox_triage`: the replies it drafts, by classification; `null` for the defaults.
    pub templates: Option<ReplyTemplates>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The replies an `inbox_triage` agent drafts, as templates (`{{first_name|there}}`) filled in for
/// the prospect. A classification without one gets the default shown in its description.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyTemplates {
    /// To a positive answer.
    ///
    /// Default: "Thanks, {{first_name|there}}! Glad to hear it. Would a short call next week work
    /// for you?"
    #[schemars(length(min = 1, max = 8000), regex(pattern = crate::common::NOT_BLANK))]
    pub positive: Option<String>,
    /// To a question.
    ///
    /// Default: "Thanks for asking, {{first_name|there}}. Happy to explain: would a short call be
    /// easiest, or shall I answer here?"
    #[schemars(length(min = 1, max = 8000), regex(pattern = crate::common::NOT_BLANK))]
    pub question: Option<String>,
}

// SQL built with format! here interpolates only constants and `$n` placeholders; values are bound.

const COLUMNS: &str = "id, name, kind, mode, enabled, targeting_id, list_id, sequence_id, min_tier, \
    max_prospects_per_run, max_credits_per_run, templates, created_at, updated_at";

impl Agent {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        let min_tier: String = row.try_get("min_tier")?;
        Ok(Self {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            kind: AgentKind::from_db(&row.try_get::<String, _>("kind")?)?,
            mode: AgentMode::from_db(&row.try_get::<String, _>("mode")?)?,
            enabled: row.try_get::<i64, _>("enabled")? != 0,
            targeting_id: row.try_get("targeting_id")?,
            list_id: row.try_get("list_id")?,
            sequence_id: row.try_get("sequence_id")?,
            min_tier: Tier::parse(&min_tier).ok_or_else(|| {
                ApiError::internal(format!("stored min_tier `{min_tier}` is not a tier"))
            })?,
            max_prospects_per_run: row.try_get("max_prospects_per_run")?,
            max_credits_per_run: row.try_get("max_credits_per_run")?,
            templates: row
                .try_get::<Option<String>, _>("templates")?
                .map(|text| serde_json::from_str(&text))
                .transpose()
                .map_err(ApiError::internal)?,
            created_at: Timestamp(row.try_get("created_at")?),
            updated_at: Timestamp(row.try_get("updated_at")?),
        })
    }
}

/// Reads one agent of the workspace, or 404.
pub(crate) async fn fetch(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<Agent, ApiError> {
    IdKind::Agent.check(id)?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "select {COLUMNS} from agents where workspace_id = $1 and id = $2"
    )))
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(conn)
    .await?
    .ok_or_else(|| IdKind::Agent.not_found(id))?;
    Agent::from_row(&row)
}

/// Reads one agent and locks its row until the transaction ends (PostgreSQL; SQLite's write
/// transaction holds the whole database), so a run and a delete of the same agent queue.
pub(crate) async fn fetch_for_update(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<Agent, ApiError> {
    IdKind::Agent.check(id)?;
    sqlx::query("update agents set updated_at = updated_at where workspace_id = $1 and id = $2")
        .bind(workspace_id)
        .bind(id)
        .execute(&mut *conn)
        .await?;
    fetch(conn, workspace_id, id).await
}

// ----- checks -----

fn check_name(name: &str) -> Result<String, ApiError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(ApiError::invalid_request("`name` must not be empty."));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::invalid_request(format!(
            "`name` is longer than {MAX_NAME_CHARS} characters."
        )));
    }
    Ok(name.to_owned())
}

fn check_tier(tier: Tier) -> Result<Tier, ApiError> {
    if tier == Tier::Disqualified {
        return Err(ApiError::invalid_request(
            "`min_tier` must be `a`, `b`, `c` or `d`: a run never keeps disqualified prospects.",
        ));
    }
    Ok(tier)
}

fn check_prospects(limit: i64) -> Result<i64, ApiError> {
    if !(1..=MAX_PROSPECTS_PER_RUN).contains(&limit) {
        return Err(ApiError::invalid_request(format!(
            "`max_prospects_per_run` must be between 1 and {MAX_PROSPECTS_PER_RUN}; it is {limit}."
        )));
    }
    Ok(limit)
}

fn check_credits(cap: Option<i64>) -> Result<Option<i64>, ApiError> {
    match cap {
        Some(cap) if cap < 0 => Err(ApiError::invalid_request(format!(
            "`max_credits_per_run` must not be negative; it is {cap}."
        ))),
        cap => Ok(cap),
    }
}

/// One reference an agent holds, to check against the workspace.
async fn check_reference(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    kind: IdKind,
    table: &str,
    field: &str,
    id: &str,
) -> Result<(), ApiError> {
    let found = kind.is_id(id)
        && sqlx::query(AssertSqlSafe(format!(
            "select 1 as found from {table} where workspace_id = $1 and id = $2"
        )))
        .bind(workspace_id)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?
        .is_some();
    if found {
        return Ok(());
    }
    Err(IdKind::not_found(kind, id).with_extra("field", field.to_owned()))
}

/// Checks that every reference names an object of the workspace and that the kind has what
/// it needs.
async fn check_agent(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    agent: &Agent,
) -> Result<(), ApiError> {
    let needs: &[(&str, bool)] = match agent.kind {
        AgentKind::Prospector => &[
            ("targeting_id", agent.targeting_id.is_some()),
            ("list_id", agent.list_id.is_some()),
            ("sequence_id", agent.sequence_id.is_some()),
        ],
        AgentKind::Writer => &[
            ("list_id", agent.list_id.is_some()),
            ("sequence_id", agent.sequence_id.is_some()),
        ],
        AgentKind::InboxTriage => &[],
    };
    if let Some((field, _)) = needs.iter().find(|(_, present)| !present) {
        return Err(ApiError::invalid_request(format!(
            "A `{}` agent needs `{field}`.",
            agent.kind
        )));
    }
    if let Some(templates) = &agent.templates {
        if agent.kind != AgentKind::InboxTriage {
            return Err(ApiError::invalid_request(format!(
                "`templates` are the replies an `inbox_triage` agent drafts; a `{}` agent drafts from its sequence's steps.",
                agent.kind
            )));
        }
        triage::check_templates(templates)?;
    }
    let references = [
        (
            IdKind::Targeting,
            "targetings",
            "targeting_id",
            &agent.targeting_id,
        ),
        (IdKind::List, "lists", "list_id", &agent.list_id),
        (
            IdKind::Sequence,
            "sequences",
            "sequence_id",
            &agent.sequence_id,
        ),
    ];
    for (kind, table, field, id) in references {
        if let Some(id) = id {
            check_reference(conn, workspace_id, kind, table, field, id).await?;
        }
    }
    Ok(())
}

// ----- actions -----

/// The input of `create_agent`.
#[derive(Debug, Deserialize, JsonSchema)]
// What each kind needs, said as the cases it refuses (`not`): `if`/`then`/`else` here made
// redocly judge the examples against the wrong branch. Absent and `null` are alike.
#[schemars(extend("not" = {"anyOf": [
    {"required": ["kind", "templates"], "properties": {"kind": {"not": {"const": "inbox_triage"}}, "templates": {"not": {"type": "null"}}}},
    {"required": ["kind"], "properties": {"kind": {"const": "writer"}, "list_id": {"type": "null"}}},
    {"required": ["kind"], "properties": {"kind": {"const": "writer"}, "sequence_id": {"type": "null"}}},
    {"required": ["kind"], "properties": {"kind": {"const": "prospector"}, "targeting_id": {"type": "null"}}},
    {"required": ["kind"], "properties": {"kind": {"const": "prospector"}, "list_id": {"type": "null"}}},
    {"required": ["kind"], "properties": {"kind": {"const": "prospector"}, "sequence_id": {"type": "null"}}}
]}))]
pub struct CreateAgentInput {
    #[schemars(length(min = 1, max = 200), regex(pattern = crate::common::NOT_BLANK))]
    pub name: String,
    pub kind: AgentKind,
    pub mode: Option<AgentMode>,
    /// Default `true`.
    pub enabled: Option<bool>,
    /// `tgt_...`
    pub targeting_id: Option<String>,
    /// `lst_...`
    pub list_id: Option<String>,
    /// `seq_...`
    pub sequence_id: Option<String>,
    /// The lowest tier a `prospector` keeps; default `c`.
    #[schemars(extend("not" = {"const": "disqualified"}))]
    pub min_tier: Option<Tier>,
    /// Default 50.
    #[schemars(range(min = 1, max = 1000))]
    pub max_prospects_per_run: Option<i64>,
    /// The most credits a run may reserve; default: no cap.
    #[schemars(range(min = 0))]
    pub max_credits_per_run: Option<i64>,
    /// `inbox_triage` only: reply drafts, with `{{first_name|there}}` placeholders.
    ///
    /// A classification left out gets its default.
    pub templates: Option<ReplyTemplates>,
}

/// Create an agent.
///
/// Saves what `run_agent` executes. A missing input the `kind` needs is a 400, a reference to
/// nothing in this workspace a 404, each naming it.
///
/// A `prospector` needs `targeting_id`, `list_id` and `sequence_id`; a `writer` needs `list_id`
/// and `sequence_id`; an `inbox_triage` needs none. Mode `review` (the default) means nothing a
/// run proposes is sent before a person approves it.
#[action(scope = "write", idempotent, http = "POST /agents")]
pub async fn create_agent(ctx: Ctx, input: CreateAgentInput) -> Result<Agent, ApiError> {
    let now = ctx.now_ms();
    let agent = Agent {
        id: ids::new_id("agt"),
        name: check_name(&input.name)?,
        kind: input.kind,
        mode: input.mode.unwrap_or(AgentMode::Review),
        enabled: input.enabled.unwrap_or(true),
        targeting_id: input.targeting_id,
        list_id: input.list_id,
        sequence_id: input.sequence_id,
        min_tier: check_tier(input.min_tier.unwrap_or(Tier::C))?,
        max_prospects_per_run: check_prospects(
            input
                .max_prospects_per_run
                .unwrap_or(DEFAULT_PROSPECTS_PER_RUN),
        )?,
        max_credits_per_run: check_credits(input.max_credits_per_run)?,
        templates: input.templates,
        created_at: Timestamp(now),
        updated_at: Timestamp(now),
    };
    let mut tx = ctx.tx().await?;
    check_agent(&mut tx, ctx.workspace_id(), &agent).await?;
    sqlx::query(AssertSqlSafe(format!(
        "insert into agents (workspace_id, {COLUMNS}) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"
    )))
    .bind(ctx.workspace_id())
    .bind(&agent.id)
    .bind(&agent.name)
    .bind(agent.kind.as_str())
    .bind(agent.mode.as_str())
    .bind(i64::from(agent.enabled))
    .bind(&agent.targeting_id)
    .bind(&agent.list_id)
    .bind(&agent.sequence_id)
    .bind(agent.min_tier.as_str())
    .bind(agent.max_prospects_per_run)
    .bind(agent.max_credits_per_run)
    .bind(agent.templates.as_ref().map(json_text).transpose()?)
    .bind(now)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    Ok(agent)
}

outreach_runtime::prelude::example!(create_agent,
    request: {
        "kind": "prospector",
        "list_id": "lst_R4d0zhECHdJUnPY7RrLC",
        "max_credits_per_run": 100,
        "min_tier": "b",
        "name": "DACH sales finder",
        "sequence_id": "seq_sGbl2nzkshQDV6qitLc9",
        "targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84"
    },
    response: {
        "created_at": "2026-11-24T09:12:03.118Z",
        "enabled": true,
        "id": "agt_Vq3LmZ8xTn2RbK5wYc7D",
        "kind": "prospector",
        "list_id": "lst_R4d0zhECHdJUnPY7RrLC",
        "max_credits_per_run": 100,
        "max_prospects_per_run": 50,
        "min_tier": "b",
        "mode": "review",
        "name": "DACH sales finder",
        "sequence_id": "seq_sGbl2nzkshQDV6qitLc9",
        "targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
        "updated_at": "2026-11-24T09:12:03.118Z"
    }
);

outreach_runtime::prelude::parity!(create_agent, write,
    ok: {
        "kind": "writer",
        "list_id": "$list",
        "min_tier": "b",
        "name": "Writer ${tag}",
        "sequence_id": "$draft"
    },
    fails: {
        "kind": "writer",
        "list_id": "$list",
        "name": "Writer"
    } => INVALID_REQUEST
);

/// The input of `get_agent` and `delete_agent`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AgentId {
    /// `agt_...`
    pub id: String,
}

/// Get an agent by id.
#[action(scope = "read", http = "GET /agents/{id}")]
pub async fn get_agent(ctx: Ctx, input: AgentId) -> Result<Agent, ApiError> {
    let mut conn = ctx.db().pool().acquire().await?;
    fetch(&mut conn, ctx.workspace_id(), &input.id).await
}

outreach_runtime::prelude::example!(get_agent,
    request: {"id": "agt_uC25m6KD9jMP26hUnu2B"},
    response: {
        "created_at": "2026-11-24T10:43:43.674Z",
        "enabled": true,
        "id": "agt_uC25m6KD9jMP26hUnu2B",
        "kind": "prospector",
        "list_id": "lst_IbWi9lFiGjBNmgy6S2jJ",
        "max_credits_per_run": 50,
        "max_prospects_per_run": 25,
        "min_tier": "b",
        "mode": "review",
        "name": "Finder",
        "sequence_id": "seq_okRb3aRfHsHWtBVIOdmk",
        "targeting_id": "tgt_sW8jGZy97n4Qevq812Ei",
        "templates": null,
        "updated_at": "2026-11-24T10:43:43.674Z"
    }
);

outreach_runtime::prelude::parity!(get_agent, read,
    ok: {"id": "$agent"},
    fails: {"id": "$missing:agt"} => NOT_FOUND
);

/// The input of `list_agents`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListAgentsInput {
    /// Only agents of this kind.
    pub kind: Option<AgentKind>,
    #[serde(flatten)]
    pub page: PageParams,
}

/// List agents, newest first.
#[action(scope = "read", http = "GET /agents")]
pub async fn list_agents(ctx: Ctx, input: ListAgentsInput) -> Result<Page<Agent>, ApiError> {
    let kind = input.kind.map(AgentKind::as_str);
    let mut filter = String::from("workspace_id = $1");
    if kind.is_some() {
        filter.push_str(" and kind = $2");
    }
    paged(
        ctx.db().pool(),
        input.page,
        format!("select count(*) from agents where {filter}"),
        format!(
            "select {COLUMNS} from agents where {filter} order by created_at desc, id desc limit $3 offset $4"
        ),
        |query| query.bind(ctx.workspace_id()).bind(kind),
        Agent::from_row,
    )
    .await
}

outreach_runtime::prelude::example!(list_agents,
    request: {"kind": "prospector", "limit": 25},
    response: {
        "count": 1,
        "has_more": false,
        "items": [
            {
                "created_at": "2026-11-24T09:12:03.118Z",
                "enabled": true,
                "id": "agt_Vq3LmZ8xTn2RbK5wYc7D",
                "kind": "prospector",
                "list_id": "lst_R4d0zhECHdJUnPY7RrLC",
                "max_credits_per_run": 100,
                "max_prospects_per_run": 50,
                "min_tier": "b",
                "mode": "review",
                "name": "DACH sales finder",
                "sequence_id": "seq_sGbl2nzkshQDV6qitLc9",
                "targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
                "updated_at": "2026-11-24T09:12:03.118Z"
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 1
    }
);

outreach_runtime::prelude::parity!(list_agents, read,
    ok: {"kind": "prospector", "limit": 5},
    fails: {"kind": "scout"} => INVALID_REQUEST
);

/// The input of `update_agent`: only the fields given change; `null` clears a reference or the
/// credit cap.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateAgentInput {
    /// `agt_...`
    pub id: String,
    #[schemars(length(min = 1, max = 200), regex(pattern = crate::common::NOT_BLANK))]
    pub name: Option<String>,
    pub mode: Option<AgentMode>,
    pub enabled: Option<bool>,
    /// `tgt_...`
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    pub targeting_id: Option<Option<String>>,
    /// `lst_...`
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    pub list_id: Option<Option<String>>,
    /// `seq_...`
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    pub sequence_id: Option<Option<String>>,
    #[schemars(extend("not" = {"const": "disqualified"}))]
    pub min_tier: Option<Tier>,
    #[schemars(range(min = 1, max = 1000))]
    pub max_prospects_per_run: Option<i64>,
    /// `null` removes the cap.
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(range(min = 0))]
    pub max_credits_per_run: Option<Option<i64>>,
    /// `null` returns to the defaults.
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    pub templates: Option<Option<ReplyTemplates>>,
}

/// Update an agent.
///
/// Fields left out keep their value; `null` clears a reference or the credit cap. Checked like
/// `create_agent`; the kind cannot change.
///
/// A kind left without an input it needs is a 400 naming it, a reference to nothing in this
/// workspace a 404. A run already started keeps the settings it started with.
#[action(scope = "write", idempotent, http = "PATCH /agents/{id}")]
pub async fn update_agent(ctx: Ctx, input: UpdateAgentInput) -> Result<Agent, ApiError> {
    IdKind::Agent.check(&input.id)?;
    let mut tx = ctx.tx().await?;
    let mut agent = fetch(&mut tx, ctx.workspace_id(), &input.id).await?;
    if let Some(name) = &input.name {
        agent.name = check_name(name)?;
    }
    if let Some(mode) = input.mode {
        agent.mode = mode;
    }
    if let Some(enabled) = input.enabled {
        agent.enabled = enabled;
    }
    if let Some(targeting_id) = input.targeting_id {
        agent.targeting_id = targeting_id;
    }
    if let Some(list_id) = input.list_id {
        agent.list_id = list_id;
    }
    if let Some(sequence_id) = input.sequence_id {
        agent.sequence_id = sequence_id;
    }
    if let Some(tier) = input.min_tier {
        agent.min_tier = check_tier(tier)?;
    }
    if let Some(limit) = input.max_prospects_per_run {
        agent.max_prospects_per_run = check_prospects(limit)?;
    }
    if let Some(cap) = input.max_credits_per_run {
        agent.max_credits_per_run = check_credits(cap)?;
    }
    if let Some(templates) = input.templates {
        agent.templates = templates;
    }
    check_agent(&mut tx, ctx.workspace_id(), &agent).await?;
    agent.updated_at = Timestamp(ctx.now_ms());
    sqlx::query(
        "update agents set name = $3, mode = $4, enabled = $5, targeting_id = $6, list_id = $7, \
         sequence_id = $8, min_tier = $9, max_prospects_per_run = $10, max_credits_per_run = $11, \
         templates = $13, updated_at = $12 where workspace_id = $1 and id = $2",
    )
    .bind(ctx.workspace_id())
    .bind(&agent.id)
    .bind(&agent.name)
    .bind(agent.mode.as_str())
    .bind(i64::from(agent.enabled))
    .bind(&agent.targeting_id)
    .bind(&agent.list_id)
    .bind(&agent.sequence_id)
    .bind(agent.min_tier.as_str())
    .bind(agent.max_prospects_per_run)
    .bind(agent.max_credits_per_run)
    .bind(agent.updated_at.0)
    .bind(agent.templates.as_ref().map(json_text).transpose()?)
    .execute(&mut *tx)
    .await?;
    Ok(agent)
}

outreach_runtime::prelude::example!(update_agent,
    request: {"id": "agt_Vq3LmZ8xTn2RbK5wYc7D", "max_prospects_per_run": 20, "mode": "autonomous"},
    response: {
        "created_at": "2026-11-24T09:12:03.118Z",
        "enabled": true,
        "id": "agt_Vq3LmZ8xTn2RbK5wYc7D",
        "kind": "prospector",
        "list_id": "lst_R4d0zhECHdJUnPY7RrLC",
        "max_credits_per_run": 100,
        "max_prospects_per_run": 20,
        "min_tier": "b",
        "mode": "autonomous",
        "name": "DACH sales finder",
        "sequence_id": "seq_sGbl2nzkshQDV6qitLc9",
        "targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
        "updated_at": "2026-11-24T09:15:41.902Z"
    }
);

outreach_runtime::prelude::parity!(update_agent, write,
    ok: {"id": "$agent", "max_credits_per_run": 20, "mode": "autonomous"},
    fails: {"id": "$agent", "sequence_id": null} => INVALID_REQUEST
);

/// Delete an agent.
///
/// Its runs and what they added stay. An agent with a `queued` or `running` run is a 409
/// `invalid_state`: cancel the run (`cancel_run`) or let it finish first.
///
/// Its runs stay readable (`get_run`, `list_runs`), and what they added (list members, proposals,
/// approved enrollments) stays. The refusal names the run.
#[action(scope = "write", idempotent, http = "DELETE /agents/{id}")]
pub async fn delete_agent(ctx: Ctx, input: AgentId) -> Result<Deleted, ApiError> {
    IdKind::Agent.check(&input.id)?;
    let mut tx = ctx.tx().await?;
    // The agent row first: on PostgreSQL a run starting now waits for this delete (its insert
    // reads the agent under a share lock), and one started before is seen here.
    fetch_for_update(&mut tx, ctx.workspace_id(), &input.id).await?;
    if let Some(run_id) = runs::live_run(&mut tx, ctx.workspace_id(), &input.id).await? {
        return Err(runs::live_run_error(&input.id, &run_id, "deleted"));
    }
    let deleted = sqlx::query("delete from agents where workspace_id = $1 and id = $2")
        .bind(ctx.workspace_id())
        .bind(&input.id)
        .execute(&mut *tx)
        .await?;
    if deleted.rows_affected() == 0 {
        return Err(IdKind::Agent.not_found(&input.id));
    }
    Ok(Deleted {
        id: input.id,
        deleted: true,
    })
}

outreach_runtime::prelude::example!(delete_agent,
    request: {"id": "agt_Vq3LmZ8xTn2RbK5wYc7D"},
    response: {"deleted": true, "id": "agt_Vq3LmZ8xTn2RbK5wYc7D"}
);

outreach_runtime::prelude::parity!(delete_agent, write,
    ok: {"id": "$agent"},
    fails: {"id": "$runner"} => INVALID_STATE
);

// ----- the inputs a run reads again -----

/// The 404 for an input of the agent that is gone since it was saved.
fn input_gone(agent: &Agent, kind: IdKind, field: &str, id: &str, error: ApiError) -> ApiError {
    if error.code != outreach_runtime::prelude::ErrorCode::NOT_FOUND {
        return error;
    }
    ApiError::new(
        outreach_runtime::prelude::ErrorCode::NOT_FOUND,
        format!(
            "Agent `{}` names the {} `{id}` (`{field}`), which no longer exists in this workspace; point it at another with `update_agent`.",
            agent.id,
            kind.noun()
        ),
    )
    .with_extra("field", field.to_owned())
}

/// The agent's targeting, read again (404 naming `targeting_id` if it is gone).
pub(crate) async fn targeting_of(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    agent: &Agent,
) -> Result<crate::targeting::Targeting, ApiError> {
    let id = agent.targeting_id.as_deref().unwrap_or_default();
    crate::targeting::fetch(&mut *conn, workspace_id, id)
        .await
        .map_err(|error| input_gone(agent, IdKind::Targeting, "targeting_id", id, error))
}

/// The agent's list, read again (404 naming `list_id` if it is gone).
pub(crate) async fn list_of(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    agent: &Agent,
) -> Result<crate::lists::List, ApiError> {
    let id = agent.list_id.as_deref().unwrap_or_default();
    crate::lists::fetch(conn, workspace_id, id)
        .await
        .map_err(|error| input_gone(agent, IdKind::List, "list_id", id, error))
}

/// The agent's sequence, read again: 404 naming `sequence_id` if it is gone, 409 if it can no
/// longer take proposals (stopped, completed, or without steps).
pub(crate) async fn sequence_of(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    agent: &Agent,
) -> Result<crate::sequences::Sequence, ApiError> {
    let id = agent.sequence_id.as_deref().unwrap_or_default();
    let sequence = crate::sequences::fetch_row(conn, workspace_id, id)
        .await
        .map_err(|error| input_gone(agent, IdKind::Sequence, "sequence_id", id, error))?;
    crate::approvals::propose::check_proposable(&sequence)?;
    Ok(sequence)
}

/// [`sequence_of`], with the sequence's row locked until the transaction ends, as
/// `add_to_sequence` locks it: proposals and a person's additions to one sequence take turns, so
/// neither enrolls a prospect the other just did.
pub(crate) async fn sequence_locked(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    agent: &Agent,
    now: i64,
) -> Result<crate::sequences::Sequence, ApiError> {
    let id = agent.sequence_id.as_deref().unwrap_or_default();
    let sequence = crate::sequences::lock(conn, workspace_id, id, now)
        .await
        .map_err(|error| input_gone(agent, IdKind::Sequence, "sequence_id", id, error))?;
    crate::approvals::propose::check_proposable(&sequence)?;
    Ok(sequence)
}

/// Who proposes what a run of `agent` proposes, started by `person_id`.
pub(crate) fn proposer(agent: &Agent, person_id: &str) -> crate::approvals::ProposedBy {
    crate::approvals::ProposedBy {
        kind: "agent".to_owned(),
        id: agent.id.clone(),
        person_id: Some(person_id.to_owned()),
        name: Some(agent.name.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_modes_send_what_they_store() {
        for kind in AgentKind::ALL {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
        for mode in AgentMode::ALL {
            assert_eq!(serde_json::to_value(mode).unwrap(), mode.as_str());
        }
    }
}
