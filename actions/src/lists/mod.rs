//! Lists: named sets of prospects, the unit that is imported into, processed and scored.
//!
//! A list holds prospect ids, not copies: deleting a list leaves its prospects alone, and deleting a
//! prospect drops it from every list (the foreign key cascades). Names are unique in a workspace,
//! because people tell lists apart by name; a second list of the same name is a 409 naming the first.
//! Membership changes report every id they did not apply (unknown, already in, not in) rather than
//! dropping them silently, so a caller can tell a typo from a no-op.

pub mod processing_lease;

use std::collections::HashSet;

use crate::common::{Deleted, IdKind};
use crate::prospects::normalize;
use crate::prospects::{JOINED_COLUMNS, Prospect};
use outreach_runtime::prelude::is_unique_violation;
use outreach_runtime::prelude::paged;
use outreach_runtime::prelude::{ApiError, Ctx, Page, PageParams, Timestamp, action, ids};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

outreach_runtime::prelude::resource_tag!(
    "lists",
    toolset = "prospecting",
    "Named sets of prospects; processing a list scores all of its members."
);

pub const MAX_NAME_CHARS: usize = 200;
pub const MAX_DESCRIPTION_CHARS: usize = 2000;
/// The most prospect ids one membership call takes.
pub const MAX_IDS_PER_CALL: usize = 1000;

/// A list as the API shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct List {
    pub id: String,
    /// Unique in the workspace.
    pub name: String,
    pub description: Option<String>,
    /// How many prospects the list holds.
    pub size: i64,
    /// `idle` (never processed), `processing`, `processed` or `failed`.
    pub processing_status: ProcessingStatus,
    /// When processing last finished.
    pub processed_at: Option<Timestamp>,
    /// The targeting `process_list` uses when none is given.
    pub default_targeting_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

outreach_runtime::prelude::text_enum! {
    /// Where a list is in `process_list`.
    pub enum ProcessingStatus {
        /// Never processed.
        Idle => "idle",
        /// Being processed now; a second `process_list` is refused until it ends.
        Processing => "processing",
        /// Processed; `processed_at` says when.
        Processed => "processed",
        /// The last processing failed and left nothing behind; it may be run again.
        Failed => "failed",
    }
}

// SQL built with format! here interpolates only constants and `$n` placeholders; values are bound.

const LIST_COLUMNS: &str = "id, name, description, default_targeting_id, processing_status, processed_at, created_at, updated_at, \
    (select count(*) from list_members m where m.list_id = lists.id) as size";

impl List {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        Ok(Self {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            description: row.try_get("description")?,
            size: row.try_get("size")?,
            processing_status: ProcessingStatus::from_db(
                &row.try_get::<String, _>("processing_status")?,
            )?,
            processed_at: row
                .try_get::<Option<i64>, _>("processed_at")?
                .map(Timestamp),
            default_targeting_id: row.try_get("default_targeting_id")?,
            created_at: Timestamp(row.try_get("created_at")?),
            updated_at: Timestamp(row.try_get("updated_at")?),
        })
    }
}

/// The 404 of a missing list, for an id that cannot name one.
fn check_list_id(id: &str) -> Result<(), ApiError> {
    IdKind::List.check(id)
}

/// Reads one list of the caller's workspace, or 404.
pub(crate) async fn fetch(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<List, ApiError> {
    check_list_id(id)?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "select {LIST_COLUMNS} from lists where workspace_id = $1 and id = $2"
    )))
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(conn)
    .await?
    .ok_or_else(|| IdKind::List.not_found(id))?;
    List::from_row(&row)
}

async fn fetch_pooled(ctx: &Ctx, id: &str) -> Result<List, ApiError> {
    let mut conn = ctx.db().pool().acquire().await?;
    fetch(&mut conn, ctx.workspace_id(), id).await
}

/// Trims a list name and checks its length.
pub(crate) fn check_name(name: &str) -> Result<String, ApiError> {
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

fn check_description(description: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(description) = description else {
        return Ok(None);
    };
    let description = description.trim();
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(ApiError::invalid_request(format!(
            "`description` is longer than {MAX_DESCRIPTION_CHARS} characters."
        )));
    }
    Ok((!description.is_empty()).then(|| description.to_owned()))
}

/// Checks that a targeting exists in the workspace (404 otherwise).
async fn check_targeting(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<(), ApiError> {
    let found =
        sqlx::query("select 1 as found from targetings where workspace_id = $1 and id = $2")
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(conn)
            .await?;
    match found {
        Some(_) => Ok(()),
        None => Err(IdKind::Targeting.not_found(id)),
    }
}

/// Maps a unique violation on the list name to a 409 naming the list that has it.
async fn name_conflict(ctx: &Ctx, error: sqlx::Error, name: &str) -> ApiError {
    if !is_unique_violation(&error, "lists_name_key") {
        return error.into();
    }
    let existing = sqlx::query("select id from lists where workspace_id = $1 and name = $2")
        .bind(ctx.workspace_id())
        .bind(name)
        .fetch_optional(ctx.db().pool())
        .await;
    match existing {
        Ok(Some(row)) => {
            let existing_id: String = row.try_get("id").unwrap_or_default();
            ApiError::conflict(format!("A list named `{name}` already exists: `{existing_id}`. List names are unique in a workspace."))
                .with_extra("existing_id", existing_id)
        }
        Ok(None) => ApiError::conflict(format!("A list named `{name}` already exists.")),
        Err(error) => error.into(),
    }
}

/// The input of `create_list`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateListInput {
    #[schemars(length(min = 1, max = 200), regex(pattern = crate::common::NOT_BLANK))]
    pub name: String,
    #[schemars(length(max = 2000))]
    pub description: Option<String>,
    /// `tgt_...`: what `process_list` scores against by default.
    pub default_targeting_id: Option<String>,
}

/// Create a list.
///
/// Makes an empty list. A name another list has is a 409 `conflict` whose `existing_id` names it.
///
/// Add prospects with `add_prospects_to_list` or by importing into it. A `default_targeting_id`
/// that names no targeting is a 404.
#[action(scope = "write", idempotent, http = "POST /lists")]
pub async fn create_list(ctx: Ctx, input: CreateListInput) -> Result<List, ApiError> {
    let name = check_name(&input.name)?;
    let description = check_description(input.description)?;
    let id = ids::new_id("lst");
    let now = ctx.now_ms();
    let mut conn = ctx.db().pool().acquire().await?;
    if let Some(targeting_id) = &input.default_targeting_id {
        check_targeting(&mut conn, ctx.workspace_id(), targeting_id).await?;
    }
    let inserted = sqlx::query(
        "insert into lists (id, workspace_id, name, description, default_targeting_id, created_at, updated_at) \
         values ($1, $2, $3, $4, $5, $6, $6)",
    )
    .bind(&id)
    .bind(ctx.workspace_id())
    .bind(&name)
    .bind(&description)
    .bind(&input.default_targeting_id)
    .bind(now)
    .execute(&mut *conn)
    .await;
    if let Err(error) = inserted {
        drop(conn);
        return Err(name_conflict(&ctx, error, &name).await);
    }
    fetch(&mut conn, ctx.workspace_id(), &id).await
}

outreach_runtime::prelude::example!(create_list,
    request: {
        "default_targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
        "description": "Heads of sales to reach in Q3.",
        "name": "Q3 software leads"
    },
    response: {
        "created_at": "2026-11-23T18:22:30.065Z",
        "default_targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
        "description": "Heads of sales to reach in Q3.",
        "id": "lst_R4d0zhECHdJUnPY7RrLC",
        "name": "Q3 software leads",
        "processed_at": null,
        "processing_status": "idle",
        "size": 0,
        "updated_at": "2026-11-23T18:22:30.065Z"
    }
);

outreach_runtime::prelude::parity!(create_list, write,
    ok: {
        "default_targeting_id": "$targeting",
        "description": "made twice",
        "name": "New list ${tag}"
    },
    fails: {"name": "  "} => INVALID_REQUEST
);

/// The input of `get_list` and `delete_list`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListId {
    /// `lst_...`
    pub id: String,
}

/// Get a list by id.
#[action(scope = "read", http = "GET /lists/{id}")]
pub async fn get_list(ctx: Ctx, input: ListId) -> Result<List, ApiError> {
    fetch_pooled(&ctx, &input.id).await
}

outreach_runtime::prelude::example!(get_list,
    request: {"id": "lst_R4d0zhECHdJUnPY7RrLC"},
    response: {
        "created_at": "2026-11-23T18:22:30.065Z",
        "default_targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
        "description": "Heads of sales to reach in Q3.",
        "id": "lst_R4d0zhECHdJUnPY7RrLC",
        "name": "Q3 software leads",
        "processed_at": null,
        "processing_status": "idle",
        "size": 0,
        "updated_at": "2026-11-23T18:22:30.065Z"
    }
);

outreach_runtime::prelude::parity!(get_list, read,
    ok: {"id": "$list"},
    fails: {"id": "$missing:lst"} => NOT_FOUND
);

/// The input of `list_lists`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListListsInput {
    /// Text in the name (any case).
    pub q: Option<String>,
    #[serde(flatten)]
    pub page: PageParams,
}

/// List lists, newest first.
#[action(scope = "read", http = "GET /lists")]
pub async fn list_lists(ctx: Ctx, input: ListListsInput) -> Result<Page<List>, ApiError> {
    let mut filter = String::from("workspace_id = $1");
    let pattern = input
        .q
        .as_deref()
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .map(normalize::like_pattern);
    if pattern.is_some() {
        filter.push_str(" and lower(name) like $2 escape '\\'");
    }
    paged(
        ctx.db().pool(),
        input.page,
        format!("select count(*) from lists where {filter}"),
        format!(
            "select {LIST_COLUMNS} from lists where {filter} order by created_at desc, id desc limit $3 offset $4"
        ),
        |query| query.bind(ctx.workspace_id()).bind(&pattern),
        List::from_row,
    )
    .await
}

outreach_runtime::prelude::example!(list_lists,
    request: {"limit": 25},
    response: {
        "count": 1,
        "has_more": false,
        "items": [
            {
                "created_at": "2026-11-23T18:22:30.065Z",
                "default_targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
                "description": "Heads of sales in DACH to reach in Q3.",
                "id": "lst_R4d0zhECHdJUnPY7RrLC",
                "name": "Q3 software leads",
                "processed_at": null,
                "processing_status": "idle",
                "size": 2,
                "updated_at": "2026-11-23T18:22:30.074Z"
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 1
    }
);

outreach_runtime::prelude::parity!(list_lists, read,
    ok: {"limit": 10, "q": "list"},
    fails: {"limit": 0} => INVALID_REQUEST
);

/// The input of `update_list`: only the fields given change; `null` clears a field.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateListInput {
    /// `lst_...`
    pub id: String,
    #[schemars(length(min = 1, max = 200), regex(pattern = crate::common::NOT_BLANK))]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    pub description: Option<Option<String>>,
    /// `tgt_...`
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    pub default_targeting_id: Option<Option<String>>,
}

/// Update a list.
///
/// Fields left out keep their value; `null` clears one. A name another list has is a 409
/// `conflict`.
///
/// A targeting that does not exist is a 404. Members are changed with `add_prospects_to_list` and
/// `remove_prospects_from_list`.
#[action(scope = "write", idempotent, http = "PATCH /lists/{id}")]
pub async fn update_list(ctx: Ctx, input: UpdateListInput) -> Result<List, ApiError> {
    check_list_id(&input.id)?;
    let name = input.name.as_deref().map(check_name).transpose()?;
    let description = input.description.map(check_description).transpose()?;
    let mut conn = ctx.db().pool().acquire().await?;
    if let Some(Some(targeting_id)) = &input.default_targeting_id {
        check_targeting(&mut conn, ctx.workspace_id(), targeting_id).await?;
    }
    // `case` keeps a column when its flag is 0, so absent fields need no separate statements.
    let updated = sqlx::query(
        "update lists set \
         name = case when $3 = 1 then $4 else name end, \
         description = case when $5 = 1 then $6 else description end, \
         default_targeting_id = case when $7 = 1 then $8 else default_targeting_id end, \
         updated_at = $9 \
         where workspace_id = $1 and id = $2",
    )
    .bind(ctx.workspace_id())
    .bind(&input.id)
    .bind(i64::from(name.is_some()))
    .bind(&name)
    .bind(i64::from(description.is_some()))
    .bind(description.flatten())
    .bind(i64::from(input.default_targeting_id.is_some()))
    .bind(input.default_targeting_id.flatten())
    .bind(ctx.now_ms())
    .execute(&mut *conn)
    .await;
    match updated {
        Ok(result) if result.rows_affected() == 0 => {
            return Err(IdKind::List.not_found(&input.id));
        }
        Ok(_) => {}
        Err(error) => {
            drop(conn);
            return Err(name_conflict(&ctx, error, name.as_deref().unwrap_or_default()).await);
        }
    }
    fetch(&mut conn, ctx.workspace_id(), &input.id).await
}

outreach_runtime::prelude::example!(update_list,
    request: {"description": "Heads of sales in DACH to reach in Q3.", "id": "lst_R4d0zhECHdJUnPY7RrLC"},
    response: {
        "created_at": "2026-11-23T18:22:30.065Z",
        "default_targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
        "description": "Heads of sales in DACH to reach in Q3.",
        "id": "lst_R4d0zhECHdJUnPY7RrLC",
        "name": "Q3 software leads",
        "processed_at": null,
        "processing_status": "idle",
        "size": 0,
        "updated_at": "2026-11-23T18:22:30.069Z"
    }
);

outreach_runtime::prelude::parity!(update_list, write,
    ok: {
        "default_targeting_id": "$targeting",
        "description": null,
        "id": "$list",
        "name": "Renamed ${tag}"
    },
    fails: {
        "id": "$missing:lst",
        "name": "Nowhere"
    } => NOT_FOUND
);

/// Delete a list.
///
/// The prospects in it stay.
#[action(scope = "write", idempotent, http = "DELETE /lists/{id}")]
pub async fn delete_list(ctx: Ctx, input: ListId) -> Result<Deleted, ApiError> {
    check_list_id(&input.id)?;
    let mut tx = ctx.tx().await?;
    // The foreign key would cascade too; deleting the members first does not depend on it.
    sqlx::query("delete from list_members where workspace_id = $1 and list_id = $2")
        .bind(ctx.workspace_id())
        .bind(&input.id)
        .execute(&mut *tx)
        .await?;
    let deleted = sqlx::query("delete from lists where workspace_id = $1 and id = $2")
        .bind(ctx.workspace_id())
        .bind(&input.id)
        .execute(&mut *tx)
        .await?;
    if deleted.rows_affected() == 0 {
        return Err(IdKind::List.not_found(&input.id));
    }
    Ok(Deleted {
        id: input.id,
        deleted: true,
    })
}

outreach_runtime::prelude::example!(delete_list,
    request: {"id": "lst_R4d0zhECHdJUnPY7RrLC"},
    response: {"deleted": true, "id": "lst_R4d0zhECHdJUnPY7RrLC"}
);

outreach_runtime::prelude::parity!(delete_list, write,
    ok: {"id": "$list"},
    fails: {"id": "$missing:lst"} => NOT_FOUND
);

/// The input of `add_prospects_to_list` and `remove_prospects_from_list`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListMembersInput {
    /// `lst_...`
    pub id: String,
    /// `prs_...`
    ///
    /// Repeats count once.
    #[schemars(length(min = 1, max = 1000))]
    pub prospect_ids: Vec<String>,
}

impl ListMembersInput {
    /// The distinct ids, in the order given, within the bounds.
    fn distinct_ids(&self) -> Result<Vec<&str>, ApiError> {
        if self.prospect_ids.is_empty() {
            return Err(ApiError::invalid_request(
                "`prospect_ids` must hold at least one id.",
            ));
        }
        if self.prospect_ids.len() > MAX_IDS_PER_CALL {
            return Err(ApiError::invalid_request(format!(
                "`prospect_ids` holds {} ids; send at most {MAX_IDS_PER_CALL} per call.",
                self.prospect_ids.len()
            )));
        }
        let mut seen = HashSet::with_capacity(self.prospect_ids.len());
        Ok(self
            .prospect_ids
            .iter()
            .map(String::as_str)
            .filter(|id| seen.insert(*id))
            .collect())
    }
}

/// `($first, $first+1, ...)` with `count` placeholders.
pub(crate) fn placeholders(first: usize, count: usize) -> String {
    let mut text = String::with_capacity(count * 6 + 2);
    text.push('(');
    for index in 0..count {
        if index > 0 {
            text.push_str(", ");
        }
        text.push('$');
        text.push_str(&(first + index).to_string());
    }
    text.push(')');
    text
}

/// Which of `ids` the query `select <column> ... in (ids)` returns, run with `$1` = `first_bind`.
async fn found_ids(
    conn: &mut sqlx::AnyConnection,
    sql_prefix: &str,
    first_bind: &str,
    ids: &[&str],
) -> Result<HashSet<String>, ApiError> {
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    let sql = format!("{sql_prefix} {}", placeholders(2, ids.len()));
    // Unprepared: PostgreSQL would keep a generic plan made while the table was small.
    let mut query = sqlx::query(AssertSqlSafe(sql))
        .persistent(false)
        .bind(first_bind);
    for id in ids {
        query = query.bind(*id);
    }
    let rows = query.fetch_all(conn).await?;
    rows.iter()
        .map(|row| row.try_get::<String, _>("id").map_err(ApiError::from))
        .collect()
}

/// What `add_prospects_to_list` did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProspectsAdded {
    /// How many prospects joined the list.
    pub added: u64,
    /// How many of the ids were members already (left as they were).
    pub already_in_list: u64,
    /// Ids that name no prospect in this workspace; nothing was done with them.
    pub unknown_ids: Vec<String>,
    /// The list after the change.
    pub list: List,
}

/// Add prospects to a list.
///
/// Members already in it are counted in `already_in_list`; ids of no prospect are answered in
/// `unknown_ids`.
///
/// A list that is being processed still accepts members.
#[action(scope = "write", idempotent, http = "POST /lists/{id}/prospects")]
pub async fn add_prospects_to_list(
    ctx: Ctx,
    input: ListMembersInput,
) -> Result<ProspectsAdded, ApiError> {
    check_list_id(&input.id)?;
    let ids = input.distinct_ids()?;
    let workspace_id = ctx.workspace_id();
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    // A write first: it takes SQLite's write lock at once (no snapshot upgrade later) and checks
    // that the list exists in this workspace.
    let touched =
        sqlx::query("update lists set updated_at = $3 where workspace_id = $1 and id = $2")
            .bind(workspace_id)
            .bind(&input.id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
    if touched.rows_affected() == 0 {
        return Err(IdKind::List.not_found(&input.id));
    }
    let shaped: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| IdKind::Prospect.is_id(id))
        .collect();
    let known = found_ids(
        &mut tx,
        "select id from prospects where workspace_id = $1 and id in",
        workspace_id,
        &shaped,
    )
    .await?;
    let members: Vec<&str> = shaped
        .iter()
        .copied()
        .filter(|id| known.contains(*id))
        .collect();
    let mut added = 0;
    if !members.is_empty() {
        let values: Vec<String> = (0..members.len())
            .map(|index| format!("($1, ${}, $2, $3)", index + 4))
            .collect();
        let sql = format!(
            "insert into list_members (list_id, prospect_id, workspace_id, added_at) values {} on conflict do nothing",
            values.join(", ")
        );
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .bind(&input.id)
            .bind(workspace_id)
            .bind(now);
        for id in &members {
            query = query.bind(*id);
        }
        added = query.execute(&mut *tx).await?.rows_affected();
    }
    let list = fetch(&mut tx, workspace_id, &input.id).await?;
    Ok(ProspectsAdded {
        added,
        already_in_list: members.len() as u64 - added,
        unknown_ids: ids
            .iter()
            .filter(|id| !known.contains(**id))
            .map(|id| (*id).to_owned())
            .collect(),
        list,
    })
}

outreach_runtime::prelude::example!(add_prospects_to_list,
    request: {"id": "lst_R4d0zhECHdJUnPY7RrLC", "prospect_ids": ["prs_FU1sf4YwPhIYhWi6JHan"]},
    response: {
        "added": 1,
        "already_in_list": 0,
        "list": {
            "created_at": "2026-11-23T18:22:30.065Z",
            "default_targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
            "description": "Heads of sales in DACH to reach in Q3.",
            "id": "lst_R4d0zhECHdJUnPY7RrLC",
            "name": "Q3 software leads",
            "processed_at": null,
            "processing_status": "idle",
            "size": 1,
            "updated_at": "2026-11-23T18:22:30.071Z"
        },
        "unknown_ids": []
    }
);

outreach_runtime::prelude::parity!(add_prospects_to_list, write,
    ok: {"id": "$list", "prospect_ids": ["$prospect", "$missing:prs"]},
    fails: {
        "id": "$missing:lst",
        "prospect_ids": ["$prospect"]
    } => NOT_FOUND
);

/// What `remove_prospects_from_list` did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProspectsRemoved {
    /// How many prospects left the list.
    pub removed: u64,
    /// Ids that were not members of the list (including ids that name no prospect).
    pub not_in_list: Vec<String>,
    /// The list after the change.
    pub list: List,
}

/// Remove prospects from a list.
///
/// The prospects stay; ids that were not members are answered in `not_in_list`.
#[action(
    scope = "write",
    idempotent,
    http = "POST /lists/{id}/prospects/remove"
)]
pub async fn remove_prospects_from_list(
    ctx: Ctx,
    input: ListMembersInput,
) -> Result<ProspectsRemoved, ApiError> {
    check_list_id(&input.id)?;
    let ids = input.distinct_ids()?;
    let workspace_id = ctx.workspace_id();
    let mut tx = ctx.tx().await?;
    let touched =
        sqlx::query("update lists set updated_at = $3 where workspace_id = $1 and id = $2")
            .bind(workspace_id)
            .bind(&input.id)
            .bind(ctx.now_ms())
            .execute(&mut *tx)
            .await?;
    if touched.rows_affected() == 0 {
        return Err(IdKind::List.not_found(&input.id));
    }
    let members = found_ids(
        &mut tx,
        "select prospect_id as id from list_members where list_id = $1 and prospect_id in",
        &input.id,
        &ids,
    )
    .await?;
    let mut removed = 0;
    if !members.is_empty() {
        let gone: Vec<&str> = ids
            .iter()
            .copied()
            .filter(|id| members.contains(*id))
            .collect();
        let sql = format!(
            "delete from list_members where list_id = $1 and prospect_id in {}",
            placeholders(2, gone.len())
        );
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(&input.id);
        for id in &gone {
            query = query.bind(*id);
        }
        removed = query.execute(&mut *tx).await?.rows_affected();
    }
    let list = fetch(&mut tx, workspace_id, &input.id).await?;
    Ok(ProspectsRemoved {
        removed,
        not_in_list: ids
            .iter()
            .filter(|id| !members.contains(**id))
            .map(|id| (*id).to_owned())
            .collect(),
        list,
    })
}

outreach_runtime::prelude::example!(remove_prospects_from_list,
    request: {"id": "lst_R4d0zhECHdJUnPY7RrLC", "prospect_ids": ["prs_FU1sf4YwPhIYhWi6JHan"]},
    response: {
        "list": {
            "created_at": "2026-11-23T18:22:30.065Z",
            "default_targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
            "description": "Heads of sales in DACH to reach in Q3.",
            "id": "lst_R4d0zhECHdJUnPY7RrLC",
            "name": "Q3 software leads",
            "processed_at": "2026-11-23T18:22:30.104Z",
            "processing_status": "processed",
            "size": 1,
            "updated_at": "2026-11-23T18:22:30.112Z"
        },
        "not_in_list": [],
        "removed": 1
    }
);

outreach_runtime::prelude::parity!(remove_prospects_from_list, write,
    ok: {"id": "$list", "prospect_ids": ["$prospect", "$missing:prs"]},
    fails: {
        "id": "$missing:lst",
        "prospect_ids": ["$prospect"]
    } => NOT_FOUND
);

/// The input of `list_list_prospects`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListListProspectsInput {
    /// `lst_...`
    pub id: String,
    #[serde(flatten)]
    pub page: PageParams,
}

/// List the prospects of a list, most recently added first.
#[action(scope = "read", http = "GET /lists/{id}/prospects")]
pub async fn list_list_prospects(
    ctx: Ctx,
    input: ListListProspectsInput,
) -> Result<Page<Prospect>, ApiError> {
    let list = fetch_pooled(&ctx, &input.id).await?;
    let (limit, offset) = input.page.sql();
    let sql = format!(
        "select {} from list_members m join prospects p on p.id = m.prospect_id \
         where m.list_id = $1 and p.workspace_id = $2 \
         order by m.added_at desc, m.prospect_id desc limit $3 offset $4",
        *JOINED_COLUMNS
    );
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(&list.id)
        .bind(ctx.workspace_id())
        .bind(limit)
        .bind(offset)
        .fetch_all(ctx.db().pool())
        .await?;
    let items = rows
        .iter()
        .map(Prospect::from_row)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Page::new(input.page, list.size, items))
}

outreach_runtime::prelude::example!(list_list_prospects,
    request: {"id": "lst_R4d0zhECHdJUnPY7RrLC", "limit": 25},
    response: {
        "count": 2,
        "has_more": false,
        "items": [
            {
                "company_domain": null,
                "company_industry": null,
                "company_name": "Compilers Inc",
                "company_size": null,
                "country": null,
                "created_at": "2026-11-23T18:22:30.074Z",
                "custom_fields": {},
                "department": null,
                "do_not_contact": false,
                "email": "grace@compilers.example",
                "first_name": "Grace",
                "full_name": "Grace Hopper",
                "headline": null,
                "id": "prs_EQ24XQ4HBGP11McdHhtE",
                "last_name": "Hopper",
                "location": null,
                "phone": null,
                "profile_url": "linkedin.com/in/grace-hopper-example",
                "score": null,
                "scored_at": null,
                "seniority": null,
                "source": "import",
                "tags": [],
                "targeting_id": null,
                "targeting_version": null,
                "tier": null,
                "timezone": null,
                "title": "VP Sales",
                "updated_at": "2026-11-23T18:22:30.074Z"
            },
            {
                "company_domain": "analytical-engines.example",
                "company_industry": "Computer Software",
                "company_name": "Analytical Engines GmbH",
                "company_size": 120,
                "country": "DE",
                "created_at": "2026-11-23T18:22:30.054Z",
                "custom_fields": {"met_at": "SaaStr"},
                "department": null,
                "do_not_contact": false,
                "email": "ada@analytical-engines.example",
                "first_name": "Ada",
                "full_name": "Ada Lovelace",
                "headline": null,
                "id": "prs_FU1sf4YwPhIYhWi6JHan",
                "last_name": "Lovelace",
                "location": "Berlin, Germany",
                "phone": "+49 30 1234567",
                "profile_url": "linkedin.com/in/ada-lovelace-example",
                "score": null,
                "scored_at": null,
                "seniority": null,
                "source": "api",
                "tags": ["conference-2026"],
                "targeting_id": null,
                "targeting_version": null,
                "tier": null,
                "timezone": null,
                "title": "Head of Sales",
                "updated_at": "2026-11-23T18:22:30.062Z"
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 2
    }
);

outreach_runtime::prelude::parity!(list_list_prospects, read,
    ok: {"id": "$list", "limit": 10},
    fails: {"id": "$missing:lst"} => NOT_FOUND
);

// ----- The verbs other modules change a list through -----------------------------------------

/// Adds a prospect to a list (nothing if it is a member already).
pub(crate) async fn add_member(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    list_id: &str,
    prospect_id: &str,
    at: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "insert into list_members (list_id, prospect_id, workspace_id, added_at) values ($1, $2, $3, $4) \
         on conflict do nothing",
    )
    .bind(list_id)
    .bind(prospect_id)
    .bind(workspace_id)
    .bind(at)
    .execute(conn)
    .await?;
    Ok(())
}

/// Takes a prospect off a list.
pub(crate) async fn remove_member(
    conn: &mut sqlx::AnyConnection,
    list_id: &str,
    prospect_id: &str,
) -> Result<(), ApiError> {
    sqlx::query("delete from list_members where list_id = $1 and prospect_id = $2")
        .bind(list_id)
        .bind(prospect_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Notes that a list's members changed at `now`.
pub(crate) async fn touch(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    list_id: &str,
    now: i64,
) -> Result<(), ApiError> {
    sqlx::query("update lists set updated_at = $3 where workspace_id = $1 and id = $2")
        .bind(workspace_id)
        .bind(list_id)
        .bind(now)
        .execute(conn)
        .await?;
    Ok(())
}

// ----- An import's writes: its list, made by name, and its members, in batches ---------------

/// List members per `insert` of an import (four parameters each).
const MEMBER_BATCH: usize = 5000;

/// Adds prospects to a list (members already in it stay); returns how many joined.
pub(crate) async fn insert_members(
    tx: &mut sqlx::AnyConnection,
    backend: outreach_runtime::prelude::Backend,
    workspace_id: &str,
    list_id: &str,
    now: i64,
    prospect_ids: &[&str],
) -> Result<u64, ApiError> {
    let mut added = 0;
    for batch in prospect_ids.chunks(MEMBER_BATCH) {
        let mut sql = String::from(
            "insert into list_members (list_id, prospect_id, workspace_id, added_at) values ",
        );
        let mut placeholders = crate::placeholders::Placeholders::new(backend);
        for row in 0..batch.len() {
            if row > 0 {
                sql.push_str(", ");
            }
            placeholders.tuple(&mut sql, 4);
        }
        sql.push_str(" on conflict do nothing");
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for id in batch {
            query = query.bind(list_id).bind(*id).bind(workspace_id).bind(now);
        }
        added += query.execute(&mut *tx).await?.rows_affected();
    }
    Ok(added)
}

/// The list named `name`, made if there is none; returns its id and whether it was made.
pub(crate) async fn list_by_name(
    tx: &mut sqlx::AnyConnection,
    workspace_id: &str,
    name: &str,
    now: i64,
) -> Result<(String, bool), ApiError> {
    // `on conflict do nothing` also waits out a concurrent create of the same name, then yields.
    let made = sqlx::query(
        "insert into lists (id, workspace_id, name, created_at, updated_at) values ($1, $2, $3, $4, $4) \
         on conflict (workspace_id, name) do nothing",
    )
    .bind(ids::new_id("lst"))
    .bind(workspace_id)
    .bind(name)
    .bind(now)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    let row = sqlx::query("select id from lists where workspace_id = $1 and name = $2")
        .bind(workspace_id)
        .bind(name)
        .fetch_one(&mut *tx)
        .await?;
    Ok((row.try_get("id")?, made))
}
