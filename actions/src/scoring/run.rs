//! Running a scoring run: load the prospects, score them, write the results, all in the caller's
//! transaction.
//!
//! [`score_prospects`] is shared by `start_scoring_run` and list processing: each opens its own
//! transaction, calls it, settles its credits in the same transaction and commits, so results,
//! the prospects' latest scores and the spend are all written or none is. The run's first
//! statement is the insert of its row, a write, so on SQLite the transaction takes the write lock
//! before it reads (a read first could not be upgraded while another writer is active).
//!
//! Writes are batched: results go in as multi-row inserts of [`BATCH`] rows, each batch scored
//! while the one before it is being inserted, and the prospects' latest scores are then updated
//! by one `update ... from` join over the run's results (`prospects::scores`). On
//! PostgreSQL the prospects are locked in id order as they are read, so two runs over
//! overlapping prospects queue instead of deadlocking; SQLite has one writer at a time.

use std::borrow::Cow;
use std::sync::Arc;

use outreach_runtime::prelude::{ApiError, Backend, Ctx, Timestamp, ids};
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, AssertSqlSafe, Row};

use super::engine::{ProspectFields, Scorer, Scratch};
use super::{RunStatus, ScoringRun, TierCounts};
use crate::common::IdKind;
use crate::events::{self, EventType};
use crate::placeholders::Placeholders;
use crate::prospects::Tier;
use crate::targeting::Targeting;

/// Rows per multi-row insert, and ids per `in (...)` lookup: 500 rows of 7 values stay far
/// below both backends' limits on bound parameters (32,766 on SQLite, 65,535 on PostgreSQL).
pub const BATCH: usize = 500;

/// The most prospect ids one call may name; larger sets belong in a list.
pub const MAX_PROSPECT_IDS: usize = 10_000;

/// What a run scores.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    /// Every member of a list (`lst_...`).
    List(&'a str),
    /// These prospects; a repeated id counts once. Ids of other workspaces are skipped.
    Prospects(&'a [String]),
}

impl Subject<'_> {
    fn list_id(&self) -> Option<&str> {
        match self {
            Subject::List(id) => Some(id),
            Subject::Prospects(_) => None,
        }
    }
}

/// One prospect as the engine reads it, packed by the database into a single JSON array text.
/// Reading one value a row instead of eleven makes loading a run's prospects through sqlx's `Any`
/// driver about twice as fast; strings are borrowed from the text unless they hold escapes.
#[derive(Debug, Deserialize)]
pub(crate) struct Packed<'a> {
    #[serde(borrow)]
    pub(crate) id: Cow<'a, str>,
    #[serde(borrow)]
    title: Option<Cow<'a, str>>,
    #[serde(borrow)]
    headline: Option<Cow<'a, str>>,
    #[serde(borrow)]
    seniority: Option<Cow<'a, str>>,
    #[serde(borrow)]
    department: Option<Cow<'a, str>>,
    #[serde(borrow)]
    company_name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    company_domain: Option<Cow<'a, str>>,
    #[serde(borrow)]
    company_industry: Option<Cow<'a, str>>,
    #[serde(deserialize_with = "lenient_size")]
    company_size: Option<i64>,
    #[serde(borrow)]
    location: Option<Cow<'a, str>>,
    #[serde(borrow)]
    country: Option<Cow<'a, str>>,
}

impl Packed<'_> {
    pub(crate) fn fields(&self) -> ProspectFields<'_> {
        ProspectFields {
            title: self.title.as_deref(),
            headline: self.headline.as_deref(),
            seniority: self.seniority.as_deref(),
            department: self.department.as_deref(),
            company_name: self.company_name.as_deref(),
            company_domain: self.company_domain.as_deref(),
            company_industry: self.company_industry.as_deref(),
            company_size: self.company_size,
            location: self.location.as_deref(),
            country: self.country.as_deref(),
        }
    }
}

/// Reads a company size as a whole number of employees; anything else (text a backend stored in
/// an integer column, a fraction) counts as no size rather than failing the whole run.
fn lenient_size<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<i64>, D::Error> {
    struct Size;
    impl serde::de::Visitor<'_> for Size {
        type Value = Option<i64>;
        fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            formatter.write_str("a company size")
        }
        fn visit_i64<E>(self, value: i64) -> Result<Self::Value, E> {
            Ok(Some(value))
        }
        fn visit_u64<E>(self, value: u64) -> Result<Self::Value, E> {
            Ok(i64::try_from(value).ok())
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_str<E>(self, value: &str) -> Result<Self::Value, E> {
            Ok(value.trim().parse().ok())
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    deserializer.deserialize_any(Size)
}

/// The select expression that packs a prospect (`p`) in the order of [`Packed`]'s fields.
pub(crate) fn packed_prospect(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => {
            "json_array(p.id, p.title, p.headline, p.seniority, p.department, p.company_name, p.company_domain, \
             p.company_industry, p.company_size, p.location, p.country)"
        }
        Backend::Postgres => {
            "json_build_array(p.id, p.title, p.headline, p.seniority, p.department, p.company_name, p.company_domain, \
             p.company_industry, p.company_size, p.location, p.country)::text"
        }
    }
}

fn no_list(id: &str) -> ApiError {
    IdKind::List.not_found(id)
}

async fn list_exists<'c, E>(
    executor: E,
    workspace_id: &str,
    list_id: &str,
) -> Result<bool, ApiError>
where
    E: sqlx::Executor<'c, Database = sqlx::Any>,
{
    if !IdKind::List.is_id(list_id) {
        return Ok(false);
    }
    let row = sqlx::query("select id from lists where workspace_id = $1 and id = $2")
        .bind(workspace_id)
        .bind(list_id)
        .fetch_optional(executor)
        .await?;
    Ok(row.is_some())
}

/// The ids among `wanted` that are prospects of the workspace.
async fn existing_ids(
    ctx: &Ctx,
    wanted: &[String],
) -> Result<std::collections::HashSet<String>, ApiError> {
    let mut found = std::collections::HashSet::with_capacity(wanted.len());
    for chunk in wanted.chunks(BATCH) {
        let mut sql = String::from("select id from prospects where workspace_id = ");
        let mut placeholders = Placeholders::new(ctx.db().backend());
        placeholders.one(&mut sql);
        sql.push_str(" and id in (");
        placeholders.list(&mut sql, chunk.len());
        sql.push(')');
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(ctx.workspace_id());
        for id in chunk {
            query = query.bind(id);
        }
        for row in query.fetch_all(ctx.db().pool()).await? {
            found.insert(row.try_get::<String, _>(0)?);
        }
    }
    Ok(found)
}

/// How many prospects a run over `subject` would score, checking the subject on the way: an
/// unknown list is a 404, an empty list and unknown prospect ids are 400s naming them.
pub async fn count(ctx: &Ctx, subject: Subject<'_>) -> Result<i64, ApiError> {
    match subject {
        Subject::List(list_id) => {
            if !list_exists(ctx.db().pool(), ctx.workspace_id(), list_id).await? {
                return Err(no_list(list_id));
            }
            let total: i64 = sqlx::query(
                "select count(*) as total from list_members m join prospects p on p.id = m.prospect_id \
                 where m.list_id = $1 and p.workspace_id = $2",
            )
            .bind(list_id)
            .bind(ctx.workspace_id())
            .fetch_one(ctx.db().pool())
            .await?
            .try_get("total")?;
            if total == 0 {
                return Err(ApiError::invalid_request(format!(
                    "The list `{list_id}` has no prospects; add prospects to it before scoring it."
                )));
            }
            Ok(total)
        }
        Subject::Prospects(prospect_ids) => {
            let found = existing_ids(ctx, prospect_ids).await?;
            let unknown: Vec<&String> = prospect_ids
                .iter()
                .filter(|id| !found.contains(*id))
                .collect();
            if !unknown.is_empty() {
                let shown = unknown
                    .iter()
                    .take(20)
                    .map(|id| format!("`{id}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let more = if unknown.len() > 20 {
                    format!(" and {} more", unknown.len() - 20)
                } else {
                    String::new()
                };
                let noun = if unknown.len() == 1 {
                    "is not a prospect"
                } else {
                    "are not prospects"
                };
                return Err(ApiError::invalid_request(format!(
                    "`prospect_ids`: {shown}{more} {noun} of this workspace; nothing was scored."
                ))
                .with_extra(
                    "unknown_ids",
                    unknown.into_iter().cloned().collect::<Vec<String>>(),
                ));
            }
            Ok(i64::try_from(prospect_ids.len()).unwrap_or(i64::MAX))
        }
    }
}

/// Loads the prospects of `subject`, packed (see [`Packed`]) and ordered by id. On PostgreSQL
/// the rows are locked as they are read, in id order, for the update that ends the run: two runs
/// over the same prospects then queue rather than deadlock. (`for no key update`, the lock an
/// update takes, because it does not conflict with the key-share locks the results' foreign keys
/// take on the same rows.)
async fn load(
    conn: &mut AnyConnection,
    backend: Backend,
    workspace_id: &str,
    subject: Subject<'_>,
) -> Result<Vec<AnyRow>, ApiError> {
    let packed = packed_prospect(backend);
    // Byte order on PostgreSQL too (`collate "C"`), the order `person_lock` locks people in and
    // Rust sorts ids in, so the chunks below and every other locker of prospects agree.
    let (order, lock) = match backend {
        Backend::Sqlite => ("p.id", ""),
        Backend::Postgres => (r#"p.id collate "C""#, " for no key update of p"),
    };
    match subject {
        Subject::List(list_id) => {
            let sql = format!(
                "select {packed} from list_members m join prospects p on p.id = m.prospect_id \
                 where m.list_id = $1 and p.workspace_id = $2 order by {order}{lock}"
            );
            Ok(sqlx::query(AssertSqlSafe(sql))
                .bind(list_id)
                .bind(workspace_id)
                .fetch_all(&mut *conn)
                .await?)
        }
        Subject::Prospects(prospect_ids) => {
            // Sorted chunks, each read in id order, come back in id order overall.
            let mut sorted = prospect_ids.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            let mut rows = Vec::with_capacity(sorted.len());
            for chunk in sorted.chunks(BATCH) {
                let mut sql = format!("select {packed} from prospects p where p.workspace_id = ");
                let mut placeholders = Placeholders::new(backend);
                placeholders.one(&mut sql);
                sql.push_str(" and p.id in (");
                placeholders.list(&mut sql, chunk.len());
                sql.push_str(") order by ");
                sql.push_str(order);
                sql.push_str(lock);
                let mut query = sqlx::query(AssertSqlSafe(sql)).bind(workspace_id);
                for id in chunk {
                    query = query.bind(id);
                }
                rows.extend(query.fetch_all(&mut *conn).await?);
            }
            Ok(rows)
        }
    }
}

/// The multi-row insert of `rows` results, seven values a row.
fn insert_sql(backend: Backend, rows: usize) -> String {
    let mut sql = String::with_capacity(110 + rows * 40);
    sql.push_str("insert into scoring_results (run_id, prospect_id, score, tier, matched, gates_failed, missing) values ");
    let mut placeholders = Placeholders::new(backend);
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        placeholders.list(&mut sql, 7);
        sql.push(')');
    }
    sql
}

/// A batch of results ready to bind: every text of the batch in one buffer, so scoring a
/// prospect allocates no strings of its own (four a prospect before: its id and three JSON
/// arrays).
#[derive(Default)]
struct Batch {
    text: Vec<u8>,
    rows: Vec<ResultRow>,
}

/// One result; its texts are ranges of [`Batch::text`].
struct ResultRow {
    prospect_id: std::ops::Range<usize>,
    score: i64,
    tier: Tier,
    matched: std::ops::Range<usize>,
    gates_failed: std::ops::Range<usize>,
    missing: std::ops::Range<usize>,
}

impl Batch {
    fn push_text(&mut self, text: &str) -> std::ops::Range<usize> {
        let start = self.text.len();
        self.text.extend_from_slice(text.as_bytes());
        start..self.text.len()
    }

    /// `items` as a JSON array, `[]` when empty.
    fn push_json<T: Serialize>(&mut self, items: &[T]) -> Result<std::ops::Range<usize>, ApiError> {
        let start = self.text.len();
        if items.is_empty() {
            self.text.extend_from_slice(b"[]");
        } else {
            serde_json::to_writer(&mut self.text, items).map_err(ApiError::internal)?;
        }
        Ok(start..self.text.len())
    }

    fn text(&self, range: &std::ops::Range<usize>) -> Result<&str, ApiError> {
        std::str::from_utf8(&self.text[range.clone()]).map_err(ApiError::internal)
    }

    fn clear(&mut self) {
        self.text.clear();
        self.rows.clear();
    }
}

/// What scores the prospects of a run, batch by batch.
struct Scoring<'t> {
    scorer: Scorer<'t>,
    scratch: Scratch,
    counts: TierCounts,
}

impl Scoring<'_> {
    /// Scores `rows` (packed prospects, see [`Packed`]) into `batch`, which must be empty.
    fn fill(&mut self, batch: &mut Batch, rows: &[AnyRow]) -> Result<(), ApiError> {
        batch.text.reserve(rows.len() * 64);
        batch.rows.reserve(rows.len());
        for row in rows {
            let text: &str = row.try_get(0)?;
            let packed: Packed<'_> = serde_json::from_str(text).map_err(ApiError::internal)?;
            let outcome = self.scorer.score(&packed.fields(), &mut self.scratch);
            self.counts.add(outcome.tier);
            let result = ResultRow {
                prospect_id: batch.push_text(&packed.id),
                score: outcome.score,
                tier: outcome.tier,
                matched: batch.push_json(&outcome.matched)?,
                gates_failed: batch.push_json(&outcome.gates_failed)?,
                missing: batch.push_json(&outcome.missing)?,
            };
            batch.rows.push(result);
        }
        Ok(())
    }
}

async fn insert_results(
    conn: &mut AnyConnection,
    backend: Backend,
    run_id: &str,
    batch: &Batch,
    full_sql: &Arc<str>,
) -> Result<(), ApiError> {
    let rows = &batch.rows;
    let sql: Arc<str> = if rows.len() == BATCH {
        full_sql.clone()
    } else {
        Arc::from(insert_sql(backend, rows.len()))
    };
    let mut query = sqlx::query(AssertSqlSafe(sql));
    for row in rows {
        query = query
            .bind(run_id)
            .bind(batch.text(&row.prospect_id)?)
            .bind(row.score)
            .bind(row.tier.as_str())
            .bind(batch.text(&row.matched)?)
            .bind(batch.text(&row.gates_failed)?)
            .bind(batch.text(&row.missing)?);
    }
    query.execute(&mut *conn).await?;
    Ok(())
}

/// Scores the prospects of `subject` against `targeting` inside the caller's transaction `conn`:
/// records the run (status `completed`), one result per prospect, and each prospect's latest
/// score, tier, targeting id and version and `scored_at`. The run's `credits_spent` is the
/// prospects scored times `unit_price`; the caller settles that much in the same transaction.
/// Its first statement is a write, so it may be the first thing a SQLite transaction does.
pub async fn score_prospects(
    ctx: &Ctx,
    conn: &mut AnyConnection,
    targeting: &Targeting,
    subject: Subject<'_>,
    unit_price: i64,
) -> Result<ScoringRun, ApiError> {
    let run_id = ids::new_id("scr");
    let workspace_id = ctx.workspace_id();
    let created_at = ctx.now_ms();
    let list_id = subject.list_id();
    sqlx::query(
        "insert into scoring_runs (id, workspace_id, targeting_id, targeting_version, list_id, status, created_at) \
         values ($1, $2, $3, $4, $5, $7, $6)",
    )
    .bind(&run_id)
    .bind(workspace_id)
    .bind(&targeting.id)
    .bind(targeting.version)
    .bind(list_id)
    .bind(created_at)
    .bind(RunStatus::Running.as_str())
    .execute(&mut *conn)
    .await?;
    if let Some(list_id) = list_id
        && !list_exists(&mut *conn, workspace_id, list_id).await?
    {
        return Err(no_list(list_id));
    }

    let prospects = load(conn, ctx.db().backend(), workspace_id, subject).await?;
    let mut scoring = Scoring {
        scorer: Scorer::new(&targeting.criteria, &targeting.gates, targeting.tiers),
        scratch: Scratch::default(),
        counts: TierCounts::default(),
    };
    let backend = ctx.db().backend();
    let full_sql: Arc<str> = Arc::from(insert_sql(backend, BATCH));
    // Two batches in turn: while the database inserts one, the next is scored into the other.
    // `biased`: the insert is polled first, so its statement is on its way before the scoring,
    // which never waits, takes the task. On SQLite the first poll hands the statement to the
    // connection's thread. On PostgreSQL a statement not yet prepared waits for its description
    // first, so the first full batch's insert goes out only once the next batch is scored; the
    // later ones, prepared by then, overlap as on SQLite.
    let mut chunks = prospects.chunks(BATCH);
    let mut inserting = Batch::default();
    let mut filling = Batch::default();
    if let Some(chunk) = chunks.next() {
        scoring.fill(&mut inserting, chunk)?;
    }
    while !inserting.rows.is_empty() {
        let next = chunks.next();
        let (inserted, filled) = tokio::join!(
            biased;
            insert_results(conn, backend, &run_id, &inserting, &full_sql),
            async { next.map_or(Ok(()), |chunk| scoring.fill(&mut filling, chunk)) },
        );
        inserted?;
        filled?;
        std::mem::swap(&mut inserting, &mut filling);
        filling.clear();
    }
    drop(prospects);
    let counts = scoring.counts;

    let completed_at = ctx.now_ms();
    let targeting_version = (targeting.id.as_str(), targeting.version);
    crate::prospects::scores::copy_from_run(conn, &run_id, targeting_version, completed_at).await?;

    let total = counts.total();
    let credits_spent = total.saturating_mul(unit_price);
    sqlx::query(
        "update scoring_runs set status = $10, total = $2, tier_a = $3, tier_b = $4, tier_c = $5, tier_d = $6, \
         disqualified = $7, credits_spent = $8, completed_at = $9 where id = $1",
    )
    .bind(&run_id)
    .bind(total)
    .bind(counts.a)
    .bind(counts.b)
    .bind(counts.c)
    .bind(counts.d)
    .bind(counts.disqualified)
    .bind(credits_spent)
    .bind(completed_at)
    .bind(RunStatus::Completed.as_str())
    .execute(&mut *conn)
    .await?;
    let data = serde_json::json!({"scoring_run_id": run_id, "targeting_id": targeting.id,
                                  "scored": total});
    events::record(
        conn,
        ctx.workspace_id(),
        completed_at,
        EventType::ScoringRunCompleted,
        data,
    )
    .await?;

    Ok(ScoringRun {
        id: run_id,
        status: RunStatus::Completed,
        targeting_id: targeting.id.clone(),
        targeting_version: targeting.version,
        list_id: list_id.map(str::to_owned),
        total,
        by_tier: counts,
        credits_spent,
        created_at: Timestamp(created_at),
        completed_at: Some(Timestamp(completed_at)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_prospects_parse_with_escapes_and_odd_sizes() {
        let text = r#"["prs_1", "VP \"Sales\"", null, "VP", null, "Acme", "acme.com", "Software", "120", "Berlin", null]"#;
        let packed: Packed<'_> = serde_json::from_str(text).expect("parse");
        let fields = packed.fields();
        assert_eq!(&*packed.id, "prs_1");
        assert_eq!(fields.title, Some("VP \"Sales\""));
        assert_eq!((fields.headline, fields.country), (None, None));
        assert_eq!(fields.company_size, Some(120));
        for (size, expected) in [
            ("42", Some(42)),
            ("null", None),
            ("\"many\"", None),
            ("12.5", None),
            ("true", None),
        ] {
            let text =
                format!(r#"["p", null, null, null, null, null, null, null, {size}, null, null]"#);
            let packed: Packed<'_> = serde_json::from_str(&text).expect("parse");
            assert_eq!(packed.company_size, expected, "{size}");
        }
    }

    #[test]
    fn placeholders_are_numbered_on_postgres_and_anonymous_on_sqlite() {
        assert_eq!(
            insert_sql(Backend::Postgres, 2),
            "insert into scoring_results (run_id, prospect_id, score, tier, matched, gates_failed, missing) values \
             ($1, $2, $3, $4, $5, $6, $7), ($8, $9, $10, $11, $12, $13, $14)"
        );
        assert!(
            insert_sql(Backend::Sqlite, 2)
                .ends_with("values (?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?)")
        );
    }
}
