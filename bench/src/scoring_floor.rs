//! Scoring's storage against SQLite's own floor (part of `--phases issue3`): what the writes of a
//! scoring run cost with nothing else in the way, and what two layouts that store less would cost.
//!
//! Each layout starts from a copy of the database as the import left it (before any scoring;
//! `vacuum into`, taken while the server runs), and writes the very results the server's run
//! stored (read back from its database afterwards), with plain sqlx on one connection (the
//! server's pragmas), in one transaction, timed `begin` to `commit`. It writes them twice, as two
//! runs with ids of the server's shape: the first over unscored prospects, like the server's run
//! (the floor that run is held to), the second over the prospects the first scored (what a
//! workspace's later runs cost, and what one more run adds to the file).
//!
//! - **today**: what a run writes now. The run's row, one `scoring_results` row per prospect
//!   (multi-row inserts of [`BATCH`]; the table and its three indexes), then the run's own
//!   statement that copies each score and tier to its prospect ([`copy_scores_to_prospects`]:
//!   the row and its score and tier indexes).
//! - **packed**: one row per batch of [`BATCH`] results (`scoring_result_packs`, the results as
//!   one JSON array) and each prospect's latest score in a narrow table of its own
//!   (`prospect_scores`, `without rowid`, keyed by prospect, with the `(workspace, score)` index
//!   `list_prospects` sorts by), written with an upsert, in place of the prospects' columns. No
//!   row per result.
//! - **ordered**: `packed`, plus one narrow row per result (`scoring_result_order`, `without
//!   rowid`, keyed by `(run, score desc, prospect)`, with its tier and its pack), so a page by
//!   score is a range scan as today, and an index by prospect, which the cascade from a deleted
//!   prospect (and so the erasure of its packed result) would need.
//!
//! Then pages of `list_scoring_results` (25 results at the start, the middle and the end, best
//! score first, and the first page of tier `d`) are read from each layout as that layout would
//! answer them, and every field of every result must be the same in every layout: a layout that
//! cannot keep the action's answers does not count.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, ensure};
use outreach_actions::prospects::scores::copy_scores_to_prospects;
use outreach_runtime::prelude::Backend;
use serde_json::Value;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{Connection, Row as _, SqliteConnection};

/// Results per multi-row insert and per pack: the server's own batch.
const BATCH: usize = 500;
/// Results per page read.
const PAGE: usize = 25;
/// Reads of each page; the median is reported.
const PAGE_READS: usize = 5;
/// The tier of the tier-filtered page read.
const PAGE_TIER: &str = "d";

/// One stored result, as the server's run wrote it.
pub struct StoredResult {
    prospect_id: String,
    score: i64,
    tier: String,
    matched: String,
    gates_failed: String,
    missing: String,
}

/// What the server's run was over, and what it stored.
pub struct ServerRun {
    id: String,
    workspace_id: String,
    targeting_id: String,
    targeting_version: i64,
    results: Vec<StoredResult>,
}

impl ServerRun {
    pub fn len(&self) -> usize {
        self.results.len()
    }

    /// The ids of the two runs each layout writes: the server's own, then one of the same shape.
    fn run_ids(&self) -> [String; 2] {
        let mut second = self.id.clone();
        second.pop();
        second.push(if self.id.ends_with('0') { '1' } else { '0' });
        [self.id.clone(), second]
    }
}

/// The storage layouts compared.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Layout {
    Today,
    Packed,
    Ordered,
}

impl Layout {
    pub const ALL: [Layout; 3] = [Layout::Today, Layout::Packed, Layout::Ordered];

    pub fn name(self) -> &'static str {
        match self {
            Layout::Today => "today",
            Layout::Packed => "packed",
            Layout::Ordered => "ordered",
        }
    }
}

/// One layout's figures.
pub struct Measured {
    pub layout: Layout,
    /// The writes' wall time: the first run (over unscored prospects), then the second.
    pub writes: [Duration; 2],
    /// The bytes the second run added to the database file (its pages, after a checkpoint):
    /// what one more run stores.
    pub bytes_added: u64,
    /// The median time of each page read, by its name.
    pub pages: Vec<(String, Duration)>,
}

/// A connection to the SQLite database at `path` with the server's pragmas (WAL, `synchronous =
/// normal`, foreign keys on), as the issue3 phase's baseline and the layouts write through.
pub async fn connect(path: &Path) -> anyhow::Result<SqliteConnection> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true);
    Ok(SqliteConnection::connect_with(&options).await?)
}

/// Copies the SQLite database at `from` into the new file `to` with `vacuum into`: a consistent
/// copy taken through a connection of its own, while the server still has the database open.
pub async fn copy_database(from: &Path, to: &Path) -> anyhow::Result<()> {
    let mut conn = connect(from).await?;
    sqlx::query("vacuum into ?")
        .bind(to.to_str().context("a path that is not UTF-8")?)
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    Ok(())
}

/// Reads back the one run the server stored in `path`, its results in prospect id order.
pub async fn read_server_run(path: &Path) -> anyhow::Result<ServerRun> {
    let mut conn = connect(path).await?;
    let run =
        sqlx::query("select id, workspace_id, targeting_id, targeting_version from scoring_runs")
            .fetch_one(&mut conn)
            .await?;
    let id: String = run.try_get("id")?;
    let results = sqlx::query(
        "select prospect_id, score, tier, matched, gates_failed, missing from scoring_results \
         where run_id = ? order by prospect_id",
    )
    .bind(&id)
    .fetch_all(&mut conn)
    .await?
    .iter()
    .map(|row| {
        Ok(StoredResult {
            prospect_id: row.try_get(0)?,
            score: row.try_get(1)?,
            tier: row.try_get(2)?,
            matched: row.try_get(3)?,
            gates_failed: row.try_get(4)?,
            missing: row.try_get(5)?,
        })
    })
    .collect::<Result<Vec<_>, sqlx::Error>>()?;
    let server_run = ServerRun {
        id,
        workspace_id: run.try_get("workspace_id")?,
        targeting_id: run.try_get("targeting_id")?,
        targeting_version: run.try_get("targeting_version")?,
        results,
    };
    conn.close().await?;
    Ok(server_run)
}

fn rows_sql(head: &str, columns: usize, rows: usize) -> String {
    let row = format!("({})", vec!["?"; columns].join(", "));
    format!("{head} values {}", vec![row.as_str(); rows].join(", "))
}

fn now_ms() -> anyhow::Result<i64> {
    Ok(i64::try_from(
        SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis(),
    )?)
}

/// The tables a layout adds (created before the clock starts).
const PACKED_TABLES: &str = "
create table scoring_result_packs (
    run_id text not null references scoring_runs (id) on delete cascade,
    pack integer not null,
    results text not null,
    primary key (run_id, pack)
) without rowid;
create table prospect_scores (
    prospect_id text primary key references prospects (id) on delete cascade,
    workspace_id text not null,
    score integer not null,
    tier text not null,
    targeting_id text not null,
    targeting_version integer not null,
    scored_at integer not null
) without rowid;
create index prospect_scores_score_idx on prospect_scores (workspace_id, score desc, prospect_id desc);
";

const ORDER_TABLE: &str = "
create table scoring_result_order (
    run_id text not null references scoring_runs (id) on delete cascade,
    score integer not null,
    prospect_id text not null references prospects (id) on delete cascade,
    tier text not null,
    pack integer not null,
    primary key (run_id, score desc, prospect_id)
) without rowid;
create index scoring_result_order_prospect_idx on scoring_result_order (prospect_id);
";

const RESULTS_HEAD: &str = "insert into scoring_results (run_id, prospect_id, score, tier, matched, gates_failed, missing)";
const LATEST_HEAD: &str = "insert into prospect_scores (prospect_id, workspace_id, score, tier, targeting_id, targeting_version, scored_at)";
const LATEST_UPSERT: &str = " on conflict (prospect_id) do update set workspace_id = excluded.workspace_id, \
     score = excluded.score, tier = excluded.tier, targeting_id = excluded.targeting_id, \
     targeting_version = excluded.targeting_version, scored_at = excluded.scored_at";
const ORDER_HEAD: &str =
    "insert into scoring_result_order (run_id, score, prospect_id, tier, pack)";

/// One pack: the batch's results as a JSON array of `[prospect_id, score, tier, matched,
/// gates_failed, missing]` (the three lists are stored JSON already, so they go in as they are).
fn pack(results: &[StoredResult]) -> anyhow::Result<String> {
    let mut text = String::with_capacity(results.len() * 96);
    text.push('[');
    for (index, result) in results.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        text.push('[');
        text.push_str(&serde_json::to_string(&result.prospect_id)?);
        text.push(',');
        text.push_str(&result.score.to_string());
        text.push(',');
        text.push_str(&serde_json::to_string(&result.tier)?);
        for list in [&result.matched, &result.gates_failed, &result.missing] {
            text.push(',');
            text.push_str(list);
        }
        text.push(']');
    }
    text.push(']');
    Ok(text)
}

/// A pack's entry read back.
type Entry = (String, i64, String, Value, Value, Value);

/// One result of a page, every field the action answers.
#[derive(Debug, PartialEq)]
struct PageItem {
    prospect_id: String,
    names: (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ),
    score: i64,
    tier: String,
    lists: (Value, Value, Value),
}

impl PageItem {
    fn of(names: &sqlx::sqlite::SqliteRow, entry: Entry) -> anyhow::Result<Self> {
        let (prospect_id, score, tier, matched, gates_failed, missing) = entry;
        Ok(Self {
            prospect_id,
            names: (
                names.try_get("first_name")?,
                names.try_get("last_name")?,
                names.try_get("title")?,
                names.try_get("company_name")?,
            ),
            score,
            tier,
            lists: (matched, gates_failed, missing),
        })
    }
}

/// Writes one run of `results` in `layout` into `conn` (the layout's tables made); returns the
/// time from `begin` to `commit`.
async fn write_run(
    conn: &mut SqliteConnection,
    layout: Layout,
    run: &ServerRun,
    run_id: &str,
) -> anyhow::Result<Duration> {
    let now = now_ms()?;
    let full_results = rows_sql(RESULTS_HEAD, 7, BATCH);
    let full_latest = rows_sql(LATEST_HEAD, 7, BATCH) + LATEST_UPSERT;
    let full_order = rows_sql(ORDER_HEAD, 5, BATCH);
    let statement = |full: &str, head: &str, columns: usize, rows: usize| {
        if rows == BATCH {
            full.to_owned()
        } else {
            rows_sql(head, columns, rows)
        }
    };

    let started = Instant::now();
    let mut tx = conn.begin().await?;
    sqlx::query(
        "insert into scoring_runs (id, workspace_id, targeting_id, targeting_version, list_id, status, created_at) \
         values (?, ?, ?, ?, null, 'running', ?)",
    )
    .bind(run_id)
    .bind(&run.workspace_id)
    .bind(&run.targeting_id)
    .bind(run.targeting_version)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    for (pack_number, chunk) in run.results.chunks(BATCH).enumerate() {
        let pack_number = i64::try_from(pack_number)?;
        if layout == Layout::Today {
            let sql = statement(&full_results, RESULTS_HEAD, 7, chunk.len());
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for result in chunk {
                query = query
                    .bind(run_id)
                    .bind(&result.prospect_id)
                    .bind(result.score)
                    .bind(&result.tier)
                    .bind(&result.matched)
                    .bind(&result.gates_failed)
                    .bind(&result.missing);
            }
            query.execute(&mut *tx).await?;
            continue;
        }
        sqlx::query("insert into scoring_result_packs (run_id, pack, results) values (?, ?, ?)")
            .bind(run_id)
            .bind(pack_number)
            .bind(pack(chunk)?)
            .execute(&mut *tx)
            .await?;
        let sql = if chunk.len() == BATCH {
            full_latest.clone()
        } else {
            rows_sql(LATEST_HEAD, 7, chunk.len()) + LATEST_UPSERT
        };
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for result in chunk {
            query = query
                .bind(&result.prospect_id)
                .bind(&run.workspace_id)
                .bind(result.score)
                .bind(&result.tier)
                .bind(&run.targeting_id)
                .bind(run.targeting_version)
                .bind(now);
        }
        query.execute(&mut *tx).await?;
        if layout == Layout::Ordered {
            let sql = statement(&full_order, ORDER_HEAD, 5, chunk.len());
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for result in chunk {
                query = query
                    .bind(run_id)
                    .bind(result.score)
                    .bind(&result.prospect_id)
                    .bind(&result.tier)
                    .bind(pack_number);
            }
            query.execute(&mut *tx).await?;
        }
    }
    if layout == Layout::Today {
        sqlx::query(copy_scores_to_prospects(Backend::Sqlite))
            .bind(run_id)
            .bind(&run.targeting_id)
            .bind(run.targeting_version)
            .bind(now)
            .execute(&mut *tx)
            .await?;
    }
    sqlx::query(
        "update scoring_runs set status = 'completed', total = ?, completed_at = ? where id = ?",
    )
    .bind(i64::try_from(run.results.len())?)
    .bind(now)
    .bind(run_id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(started.elapsed())
}

/// The file's size after a checkpoint.
async fn file_size(conn: &mut SqliteConnection, path: &Path) -> anyhow::Result<u64> {
    sqlx::query("pragma wal_checkpoint(truncate)")
        .execute(&mut *conn)
        .await?;
    Ok(std::fs::metadata(path)?.len())
}

const NAMES: &str = "p.first_name, p.last_name, p.title, p.company_name";

/// One page of `list_scoring_results` as `layout` answers it: `limit` results from `offset`,
/// best score first, of tier `tier` if given; with the count the action answers too.
async fn page(
    conn: &mut SqliteConnection,
    layout: Layout,
    run_id: &str,
    tier: Option<&str>,
    offset: usize,
) -> anyhow::Result<Vec<PageItem>> {
    let (limit, offset) = (i64::try_from(PAGE)?, i64::try_from(offset)?);
    let filter = if tier.is_some() {
        "run_id = ? and tier = ?"
    } else {
        "run_id = ?"
    };
    let bind = |sql: String| {
        let query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(run_id.to_owned());
        match tier {
            Some(tier) => query.bind(tier.to_owned()),
            None => query,
        }
    };
    match layout {
        Layout::Today => {
            // The action's own statement (`actions/src/scoring/mod.rs`) and its count.
            let rows = bind(format!(
                "select r.prospect_id, {NAMES}, r.score, r.tier, r.matched, r.gates_failed, r.missing \
                 from scoring_results r join prospects p on p.id = r.prospect_id where r.{} \
                 order by r.score desc, r.prospect_id limit ? offset ?",
                filter.replace(" and ", " and r.")
            ))
            .bind(limit)
            .bind(offset)
            .fetch_all(&mut *conn)
            .await?;
            bind(format!(
                "select count(*) from scoring_results where {filter}"
            ))
            .fetch_one(&mut *conn)
            .await?;
            rows.iter()
                .map(|row| {
                    let list = |column: &str| -> anyhow::Result<Value> {
                        Ok(serde_json::from_str(&row.try_get::<String, _>(column)?)?)
                    };
                    let entry = (
                        row.try_get("prospect_id")?,
                        row.try_get("score")?,
                        row.try_get("tier")?,
                        list("matched")?,
                        list("gates_failed")?,
                        list("missing")?,
                    );
                    PageItem::of(row, entry)
                })
                .collect()
        }
        Layout::Ordered => {
            let rows = bind(format!(
                "select o.prospect_id, o.pack, {NAMES} from scoring_result_order o \
                 join prospects p on p.id = o.prospect_id where o.{} \
                 order by o.score desc, o.prospect_id limit ? offset ?",
                filter.replace(" and ", " and o.")
            ))
            .bind(limit)
            .bind(offset)
            .fetch_all(&mut *conn)
            .await?;
            bind(format!(
                "select count(*) from scoring_result_order where {filter}"
            ))
            .fetch_one(&mut *conn)
            .await?;
            let mut numbers: Vec<i64> = rows
                .iter()
                .map(|row| row.try_get("pack"))
                .collect::<Result<_, _>>()?;
            numbers.sort_unstable();
            numbers.dedup();
            let mut packs = std::collections::HashMap::new();
            for number in numbers {
                let text: String = sqlx::query_scalar(
                    "select results from scoring_result_packs where run_id = ? and pack = ?",
                )
                .bind(run_id)
                .bind(number)
                .fetch_one(&mut *conn)
                .await?;
                packs.insert(number, serde_json::from_str::<Vec<Entry>>(&text)?);
            }
            let mut page = Vec::with_capacity(rows.len());
            for row in &rows {
                let id: String = row.try_get("prospect_id")?;
                let number: i64 = row.try_get("pack")?;
                let entry = packs[&number]
                    .iter()
                    .find(|entry| entry.0 == id)
                    .context("a result missing from its pack")?
                    .clone();
                page.push(PageItem::of(row, entry)?);
            }
            Ok(page)
        }
        Layout::Packed => {
            // No row per result: every pack of the run is read and decoded, the entries ordered,
            // the page cut, and the page's prospects looked up. (This assumes deleting a prospect
            // also takes its entry out of its pack, as what was recorded about a deleted person
            // must go with them; otherwise the cut would first have to drop the entries whose
            // prospect is gone.)
            let texts: Vec<String> = sqlx::query_scalar(
                "select results from scoring_result_packs where run_id = ? order by pack",
            )
            .bind(run_id)
            .fetch_all(&mut *conn)
            .await?;
            let mut entries: Vec<Entry> = Vec::new();
            for text in &texts {
                entries.extend(
                    serde_json::from_str::<Vec<Entry>>(text)?
                        .into_iter()
                        .filter(|entry| tier.is_none_or(|tier| entry.2 == tier)),
                );
            }
            entries.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let start = usize::try_from(offset)?.min(entries.len());
            let end = (start + PAGE).min(entries.len());
            let mut page = Vec::with_capacity(end - start);
            for entry in entries.drain(start..end) {
                let names = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "select {NAMES} from prospects p where p.id = ?"
                )))
                .bind(&entry.0)
                .fetch_one(&mut *conn)
                .await?;
                page.push(PageItem::of(&names, entry)?);
            }
            Ok(page)
        }
    }
}

/// Writes `run` in each layout, twice, into its own copy of `imported` (the database as the
/// import left it), then reads pages from each; fails if two layouts answer a page differently.
pub async fn measure(
    dir: &Path,
    imported: &Path,
    run: &ServerRun,
) -> anyhow::Result<Vec<Measured>> {
    let count = run.results.len();
    let tier_count = run
        .results
        .iter()
        .filter(|result| result.tier == PAGE_TIER)
        .count();
    let pages: [(String, Option<&str>, usize); 4] = [
        ("start".to_owned(), None, 0),
        ("middle".to_owned(), None, count / 2),
        ("end".to_owned(), None, count.saturating_sub(PAGE)),
        (format!("tier {PAGE_TIER}"), Some(PAGE_TIER), 0),
    ];
    let run_ids = run.run_ids();
    let mut measured = Vec::new();
    let mut answers: Vec<Vec<Vec<PageItem>>> = Vec::new();
    for layout in Layout::ALL {
        let path = dir.join(format!("floor-{}.db", layout.name()));
        std::fs::remove_file(&path).ok();
        copy_database(imported, &path).await?;
        let mut conn = connect(&path).await?;
        match layout {
            Layout::Today => {}
            Layout::Packed => {
                sqlx::raw_sql(PACKED_TABLES).execute(&mut conn).await?;
            }
            Layout::Ordered => {
                sqlx::raw_sql(PACKED_TABLES).execute(&mut conn).await?;
                sqlx::raw_sql(ORDER_TABLE).execute(&mut conn).await?;
            }
        }
        let first = write_run(&mut conn, layout, run, &run_ids[0]).await?;
        let size = file_size(&mut conn, &path).await?;
        let second = write_run(&mut conn, layout, run, &run_ids[1]).await?;
        let bytes_added = file_size(&mut conn, &path).await?.saturating_sub(size);
        let writes = [first, second];
        let mut times = Vec::new();
        let mut layout_answers = Vec::new();
        for (name, tier, offset) in &pages {
            let mut reads = Vec::with_capacity(PAGE_READS);
            let mut answer = Vec::new();
            for _ in 0..PAGE_READS {
                let started = Instant::now();
                answer = page(&mut conn, layout, &run_ids[1], *tier, *offset).await?;
                reads.push(started.elapsed());
            }
            reads.sort_unstable();
            times.push((name.clone(), reads[PAGE_READS / 2]));
            let of = if tier.is_some() { tier_count } else { count };
            ensure!(
                answer.len() == PAGE.min(of.saturating_sub(*offset)),
                "{} answered {} results for the page `{name}`",
                layout.name(),
                answer.len()
            );
            layout_answers.push(answer);
        }
        conn.close().await?;
        if let Some(first) = answers.first() {
            ensure!(
                *first == layout_answers,
                "the {} layout's pages differ from today's",
                layout.name()
            );
        }
        answers.push(layout_answers);
        measured.push(Measured {
            layout,
            writes,
            bytes_added,
            pages: times,
        });
        std::fs::remove_file(&path).ok();
    }
    Ok(measured)
}
