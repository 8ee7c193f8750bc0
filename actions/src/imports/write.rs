//! The writes of an import, batched: many rows per `insert`, all inside the caller's transaction.
//!
//! One statement per row would make a 100,000-row import 100,000 round trips; a multi-row
//! `insert ... values (...), (...)` with bound parameters does it in a hundred. Batches stay under
//! SQLite's 32,766 parameters (PostgreSQL allows 65,535). Values shared by every row (workspace,
//! time) are bound once per statement.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::OnceLock;

use outreach_runtime::prelude::ApiError;
use sqlx::{AssertSqlSafe, Row as _};

use super::sql::Placeholders;
use crate::common::IdKind;
use crate::prospects::{
    COLUMNS, FIELD_COLUMNS, FIELD_COUNT, Fields, Prospect, ProspectSource, from_row_fields,
    normalize, write_fields,
};
use outreach_runtime::prelude::Backend;

type Tx = sqlx::AnyConnection;

/// Prospects per `insert`: 24 parameters each (`FIELD_COUNT` plus 4), so 24,000 per statement.
pub const PROSPECT_BATCH: usize = 1000;
/// Rows per `insert` of tags or list members.
const SMALL_BATCH: usize = 5000;

// SQL built here interpolates only constants and placeholders; values are bound.

/// Inserts new prospects; `ids[n]` is the id of `prospects[n]`.
pub async fn insert_prospects(
    tx: &mut Tx,
    backend: Backend,
    workspace_id: &str,
    now: i64,
    ids: &[String],
    prospects: &[Fields],
) -> Result<(), ApiError> {
    for (ids, batch) in ids
        .chunks(PROSPECT_BATCH)
        .zip(prospects.chunks(PROSPECT_BATCH))
    {
        let sql = if batch.len() == PROSPECT_BATCH {
            Cow::Borrowed(full_batch_sql(backend))
        } else {
            Cow::Owned(insert_prospects_sql(backend, batch.len()))
        };
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for (id, fields) in ids.iter().zip(batch) {
            query = fields
                .bind_columns(query.bind(id))?
                .bind(workspace_id)
                .bind(now)
                .bind(now);
        }
        query.execute(&mut *tx).await?;
    }
    crate::prospects::totals::add(tx, workspace_id, ids.len() as i64).await
}

/// The insert of a full batch of prospects, made once per backend (an import writes a hundred).
fn full_batch_sql(backend: Backend) -> &'static str {
    static SQLITE: OnceLock<String> = OnceLock::new();
    static POSTGRES: OnceLock<String> = OnceLock::new();
    let sql = match backend {
        Backend::Sqlite => &SQLITE,
        Backend::Postgres => &POSTGRES,
    };
    sql.get_or_init(|| insert_prospects_sql(backend, PROSPECT_BATCH))
}

fn insert_prospects_sql(backend: Backend, rows: usize) -> String {
    let mut sql = format!(
        "insert into prospects (id, {}, workspace_id, source, created_at, updated_at) values ",
        *FIELD_COLUMNS
    );
    // The source is the same for every row: written as its constant text, not bound per row.
    let source = format!(", '{}', ", ProspectSource::Import.as_str());
    let mut placeholders = Placeholders::new(backend);
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        placeholders.list(&mut sql, 1 + FIELD_COUNT + 1);
        sql.push_str(&source);
        placeholders.list(&mut sql, 2);
        sql.push(')');
    }
    sql
}

/// Inserts the tags of prospects into `prospect_tags` (what the `tag` filter looks up).
pub async fn insert_tags(
    tx: &mut Tx,
    backend: Backend,
    workspace_id: &str,
    tags: &[(&str, &str)],
) -> Result<(), ApiError> {
    for batch in tags.chunks(SMALL_BATCH) {
        let mut sql =
            String::from("insert into prospect_tags (prospect_id, workspace_id, tag) values ");
        let mut placeholders = Placeholders::new(backend);
        for row in 0..batch.len() {
            if row > 0 {
                sql.push_str(", ");
            }
            placeholders.tuple(&mut sql, 3);
        }
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for (prospect_id, tag) in batch {
            query = query.bind(*prospect_id).bind(workspace_id).bind(*tag);
        }
        query.execute(&mut *tx).await?;
    }
    Ok(())
}

/// Adds prospects to a list (members already in it stay); returns how many joined.
pub async fn insert_members(
    tx: &mut Tx,
    backend: Backend,
    workspace_id: &str,
    list_id: &str,
    now: i64,
    prospect_ids: &[&str],
) -> Result<u64, ApiError> {
    let mut added = 0;
    for batch in prospect_ids.chunks(SMALL_BATCH) {
        let mut sql = String::from(
            "insert into list_members (list_id, prospect_id, workspace_id, added_at) values ",
        );
        let mut placeholders = Placeholders::new(backend);
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

/// The current fields of existing prospects, by id.
pub async fn load_fields(
    tx: &mut Tx,
    backend: Backend,
    workspace_id: &str,
    ids: &[&str],
) -> Result<HashMap<String, Fields>, ApiError> {
    let mut fields = HashMap::with_capacity(ids.len());
    for batch in ids.chunks(SMALL_BATCH) {
        let mut sql = format!("select {} from prospects where workspace_id = ", *COLUMNS);
        let mut placeholders = Placeholders::new(backend);
        placeholders.one(&mut sql);
        sql.push_str(" and id in ");
        placeholders.tuple(&mut sql, batch.len());
        if backend == Backend::Postgres {
            // The rows are rewritten whole below: hold them so a concurrent `update_prospect`
            // waits instead of being overwritten. (SQLite's single writer already does this.)
            sql.push_str(" for update");
        }
        // Unprepared, so it is planned with its values (see `sql`).
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .persistent(false)
            .bind(workspace_id);
        for id in batch {
            query = query.bind(*id);
        }
        for row in query.fetch_all(&mut *tx).await? {
            let prospect = Prospect::from_row(&row)?;
            fields.insert(prospect.id.clone(), from_row_fields(&prospect));
        }
    }
    Ok(fields)
}

/// Writes the new fields of one existing prospect, and its tags when they changed.
pub async fn update_prospect(
    tx: &mut Tx,
    backend: Backend,
    workspace_id: &str,
    id: &str,
    now: i64,
    fields: &Fields,
    tags_changed: bool,
) -> Result<(), ApiError> {
    write_fields(tx, workspace_id, id, fields, now).await??;
    if tags_changed {
        sqlx::query("delete from prospect_tags where prospect_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let tags: Vec<(&str, &str)> = fields.tags.iter().map(|tag| (id, tag.as_str())).collect();
        insert_tags(tx, backend, workspace_id, &tags).await?;
    }
    Ok(())
}

/// Merges a duplicate row into the prospect it matched: the row's values replace the prospect's,
/// empty cells keep them; tags and custom fields are added to (within their limits).
pub fn merge(into: &mut Fields, row: &super::parse::Row, fill_url: bool, fill_email: bool) {
    fn set<T: Clone>(into: &mut Option<T>, value: &Option<T>) {
        if value.is_some() {
            into.clone_from(value);
        }
    }
    let from = &row.fields;
    set(&mut into.first_name, &from.first_name);
    set(&mut into.last_name, &from.last_name);
    set(&mut into.headline, &from.headline);
    set(&mut into.title, &from.title);
    set(&mut into.seniority, &from.seniority);
    set(&mut into.department, &from.department);
    set(&mut into.company_name, &from.company_name);
    set(&mut into.company_domain, &from.company_domain);
    set(&mut into.company_industry, &from.company_industry);
    set(&mut into.company_size, &from.company_size);
    set(&mut into.location, &from.location);
    set(&mut into.country, &from.country);
    set(&mut into.timezone, &from.timezone);
    set(&mut into.phone, &from.phone);
    if fill_url {
        set(&mut into.profile_url, &from.profile_url);
    }
    if fill_email {
        set(&mut into.email, &from.email);
    }
    for tag in &from.tags {
        if into.tags.len() < normalize::MAX_TAGS && !into.tags.contains(tag) {
            into.tags.push(tag.clone());
        }
    }
    for (key, value) in &from.custom_fields {
        if into.custom_fields.len() < normalize::MAX_CUSTOM_FIELDS
            || into.custom_fields.contains_key(key)
        {
            into.custom_fields.insert(key.clone(), value.clone());
        }
    }
    if row.do_not_contact_given {
        into.do_not_contact = from.do_not_contact;
    }
}

/// Checks that a list exists in the workspace; returns its id.
pub async fn existing_list(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    list_id: &str,
) -> Result<String, ApiError> {
    IdKind::List.check(list_id)?;
    let row = sqlx::query("select id from lists where workspace_id = $1 and id = $2")
        .bind(workspace_id)
        .bind(list_id)
        .fetch_optional(conn)
        .await?
        .ok_or_else(|| IdKind::List.not_found(list_id))?;
    Ok(row.try_get("id")?)
}

/// The list named `name`, made if there is none; returns its id and whether it was made.
pub async fn list_by_name(
    tx: &mut Tx,
    workspace_id: &str,
    name: &str,
    now: i64,
) -> Result<(String, bool), ApiError> {
    // `on conflict do nothing` also waits out a concurrent create of the same name, then yields.
    let made = sqlx::query(
        "insert into lists (id, workspace_id, name, created_at, updated_at) values ($1, $2, $3, $4, $4) \
         on conflict (workspace_id, name) do nothing",
    )
    .bind(outreach_runtime::prelude::ids::new_id("lst"))
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

/// An import's new prospects between the two reads of the file: read, waiting for the rows that
/// merge into them, and written in batches, in the order of their (sorted) ids.
pub struct NewProspects<'a> {
    /// The id of each new prospect.
    ids: &'a [String],
    /// The last valid row each new prospect takes values from.
    last_row: &'a [usize],
    /// Read and not written yet: new prospects `written..`.
    waiting: VecDeque<Fields>,
    written: usize,
    /// How many of `waiting`, from the front, no later row changes.
    ready: usize,
}

impl<'a> NewProspects<'a> {
    /// `ids[n]` is the id of new prospect `n`, and `last_row[n]` the last valid row it takes
    /// values from.
    pub fn new(ids: &'a [String], last_row: &'a [usize]) -> Self {
        Self {
            ids,
            last_row,
            waiting: VecDeque::new(),
            written: 0,
            ready: 0,
        }
    }

    /// The next new prospect, as its first row made it.
    pub fn push(&mut self, fields: Fields) {
        self.waiting.push_back(fields);
    }

    /// How many are read and not written yet.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// How many of those, from the first, no later row changes.
    pub fn ready(&self) -> usize {
        self.ready
    }

    /// New prospect `n`, which must still be waiting.
    pub fn waiting_mut(&mut self, n: usize) -> Result<&mut Fields, ApiError> {
        n.checked_sub(self.written)
            .and_then(|at| self.waiting.get_mut(at))
            .ok_or_else(|| ApiError::internal(format!("new prospect {n} was written too soon")))
    }

    /// Valid row `index` has been read.
    pub fn advance(&mut self, index: usize) {
        while self.ready < self.waiting.len() && self.last_row[self.written + self.ready] <= index {
            self.ready += 1;
        }
    }

    /// Writes the first `count` waiting prospects and their tags.
    pub async fn write(
        &mut self,
        tx: &mut Tx,
        backend: Backend,
        workspace_id: &str,
        now: i64,
        count: usize,
    ) -> Result<(), ApiError> {
        if count == 0 {
            return Ok(());
        }
        let batch: Vec<Fields> = self.waiting.drain(..count).collect();
        let ids = &self.ids[self.written..self.written + count];
        self.written += count;
        self.ready = self.ready.saturating_sub(count);
        if let Err(error) = insert_prospects(tx, backend, workspace_id, now, ids, &batch).await {
            // A prospect with one of these profile URLs was created by another request meanwhile.
            if let Some(cause) = error
                .internal
                .as_deref()
                .filter(|cause| cause.contains("prospects_profile_url_key"))
            {
                tracing::info!(cause, "import raced a prospect create");
                return Err(ApiError::conflict(
                    "A prospect with one of these profile URLs was created while the import ran; nothing was imported or spent. Retry.",
                ));
            }
            return Err(error);
        }
        let tags: Vec<(&str, &str)> = ids
            .iter()
            .zip(&batch)
            .flat_map(|(id, fields)| {
                fields
                    .tags
                    .iter()
                    .map(move |tag| (id.as_str(), tag.as_str()))
            })
            .collect();
        insert_tags(tx, backend, workspace_id, &tags).await
    }
}
