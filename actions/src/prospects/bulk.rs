//! The writes of a batch of prospects: many rows per `insert`, all inside the caller's
//! transaction (an import's new rows, and the whole rows it rewrites).
//!
//! One statement per row would make a 100,000-row import 100,000 round trips; a multi-row
//! `insert ... values (...), (...)` with bound parameters does it in a hundred. Batches stay under
//! SQLite's 32,766 parameters (PostgreSQL allows 65,535). Values shared by every row (workspace,
//! time) are bound once per statement. The import decides what to write (`imports`); the rows are
//! the prospects', so the statements are here.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use outreach_runtime::prelude::{AnyQuery, ApiError, Backend};
use sqlx::AssertSqlSafe;

use super::{
    COLUMNS, FIELD_COLUMNS, FIELD_COUNT, Fields, Prospect, ProspectSource, from_row_fields,
    write_fields,
};
use crate::placeholders::Placeholders;

type Tx = sqlx::AnyConnection;

/// Prospects per `insert`: 24 parameters each (`FIELD_COUNT` plus 4), so 24,000 per statement.
pub(crate) const PROSPECT_BATCH: usize = 1000;
/// Rows per `insert` of tags, and ids per lookup.
const SMALL_BATCH: usize = 5000;

// SQL built here interpolates only constants and placeholders; values are bound.

/// New prospects bound into their inserts, to be run by [`insert_bound`]. Binding takes the fields
/// by value, so an import binds one batch while the database inserts the one before it.
pub(crate) struct BoundProspects<'i> {
    inserts: Vec<AnyQuery<'static>>,
    ids: &'i [String],
    /// The new prospects marked do-not-contact.
    marked: Vec<&'i str>,
    /// Every tag, with its prospect's id.
    tags: Vec<(&'i str, String)>,
}

/// Binds new prospects into their inserts; `ids[n]` is the id of `prospects[n]`.
pub(crate) fn bind_prospects<'i>(
    backend: Backend,
    workspace_id: &str,
    now: i64,
    ids: &'i [String],
    prospects: Vec<Fields>,
) -> Result<BoundProspects<'i>, ApiError> {
    let mut marked = Vec::new();
    let mut tags = Vec::new();
    for (id, fields) in ids.iter().zip(&prospects) {
        if fields.do_not_contact {
            marked.push(id.as_str());
        }
        tags.extend(fields.tags.iter().map(|tag| (id.as_str(), tag.clone())));
    }
    let mut inserts = Vec::with_capacity(ids.len().div_ceil(PROSPECT_BATCH));
    let mut prospects = prospects.into_iter();
    for ids in ids.chunks(PROSPECT_BATCH) {
        let sql = if ids.len() == PROSPECT_BATCH {
            Cow::Borrowed(full_batch_sql(backend))
        } else {
            Cow::Owned(insert_prospects_sql(backend, ids.len()))
        };
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for (id, fields) in ids.iter().zip(prospects.by_ref()) {
            query = fields
                .bind_columns(query.bind(id.clone()))?
                .bind(workspace_id.to_owned())
                .bind(now)
                .bind(now);
        }
        inserts.push(query);
    }
    Ok(BoundProspects {
        inserts,
        ids,
        marked,
        tags,
    })
}

/// Inserts bound new prospects, their do-not-contact marks and their tags.
pub(crate) async fn insert_bound(
    tx: &mut Tx,
    backend: Backend,
    workspace_id: &str,
    now: i64,
    bound: BoundProspects<'_>,
) -> Result<(), ApiError> {
    let BoundProspects {
        inserts,
        ids,
        marked,
        tags,
    } = bound;
    if ids.is_empty() {
        return Ok(());
    }
    for insert in inserts {
        insert.execute(&mut *tx).await?;
    }
    super::do_not_contact_added(tx, workspace_id, &marked, None, now).await?;
    let written: Vec<&str> = ids.iter().map(String::as_str).collect();
    super::do_not_contact::flag_listed(tx, workspace_id, &written, now).await?;
    crate::prospects::totals::add(tx, workspace_id, ids.len() as i64).await?;
    let tags: Vec<(&str, &str)> = tags.iter().map(|(id, tag)| (*id, tag.as_str())).collect();
    insert_tags(tx, backend, workspace_id, &tags).await
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
pub(crate) async fn insert_tags(
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

/// The current fields of existing prospects, by id.
pub(crate) async fn load_fields(
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

/// Writes the new fields of one existing prospect (`old` were its fields), and its tags when
/// they changed.
pub(crate) async fn update_prospect(
    tx: &mut Tx,
    backend: Backend,
    workspace_id: &str,
    id: &str,
    now: i64,
    old: &Fields,
    fields: &Fields,
) -> Result<(), ApiError> {
    // An import never clears do-not-contact: a row saying `false` leaves a marked person marked
    // (only a person's `update_prospect` clears it, and the entries with it).
    let kept;
    let fields = if old.do_not_contact && !fields.do_not_contact {
        kept = Fields {
            do_not_contact: true,
            ..fields.clone()
        };
        &kept
    } else {
        fields
    };
    write_fields(tx, workspace_id, id, fields, now).await??;
    super::do_not_contact::flag_listed(tx, workspace_id, &[id], now).await?;
    if fields.do_not_contact && !old.do_not_contact {
        super::do_not_contact_added(tx, workspace_id, &[id], None, now).await?;
    }
    if old.tags != fields.tags {
        sqlx::query("delete from prospect_tags where prospect_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let tags: Vec<(&str, &str)> = fields.tags.iter().map(|tag| (id, tag.as_str())).collect();
        insert_tags(tx, backend, workspace_id, &tags).await?;
    }
    Ok(())
}
