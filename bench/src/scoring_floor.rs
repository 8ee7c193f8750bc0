//! Scoring's storage against SQLite's own floor (part of `--phases issue3`): what the writes of a
//! scoring run cost with nothing else in the way, and what two layouts that store less would cost.
//!
//! Each layout starts from a copy of the database as the import left it (before any scoring), and
//! writes the very results the server's run stored (read back from its database afterwards), with
//! plain sqlx on one connection (the server's pragmas), in one transaction, timed `begin` to
//! `commit`:
//!
//! - **today**: what a run writes now. The run's row, one `scoring_results` row per prospect
//!   (multi-row inserts of [`BATCH`]; the table and its three indexes), then the run's own
//!   statement that copies each score and tier to its prospect
//!   ([`copy_scores_to_prospects`]: the row and its score and tier indexes). The run's rate
//!   against this one is the "scoring against the same-run floor".
//! - **packed**: one row per batch of [`BATCH`] results (`scoring_result_packs`, the results as one
//!   JSON array) and each prospect's latest score in a narrow table of its own (`prospect_scores`,
//!   `without rowid`, keyed by prospect, with the `(workspace, score)` index that `list_prospects`
//!   sorts by), in place of the prospects' columns. No row per result.
//! - **ordered**: `packed`, plus one narrow row per result in a single B-tree
//!   (`scoring_result_order`, `without rowid`, keyed by `(run, score desc, prospect)`, naming the
//!   pack), so a page by score is a range scan, as today.
//!
//! Then a page of `list_scoring_results` (25 results at the start, the middle and the end, best
//! score first) is read from each layout as that layout would answer it, and the pages must hold
//! the same prospects in the same order: a layout that cannot keep the action's answers does not
//! count.

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
/// The run id the layouts write under (each in its own copy of the database).
const RUN_ID: &str = "scr_floor";

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
    workspace_id: String,
    targeting_id: String,
    targeting_version: i64,
    results: Vec<StoredResult>,
}

impl ServerRun {
    pub fn len(&self) -> usize {
        self.results.len()
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

/// One layout's figures: the writes' wall time, and the median time of a page at each offset.
pub struct Measured {
    pub layout: Layout,
    pub writes: Duration,
    pub pages: Vec<(usize, Duration)>,
    /// The bytes the layout added to the database file (its pages, after a checkpoint).
    pub bytes_added: u64,
}

async fn connect(path: &Path) -> anyhow::Result<SqliteConnection> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true);
    Ok(SqliteConnection::connect_with(&options).await?)
}

/// Copies a SQLite database that no process has open (its `-wal` too, if there is one).
pub fn copy_database(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::copy(from, to).with_context(|| format!("copy {}", from.display()))?;
    let wal = |path: &Path| {
        let mut name = path.as_os_str().to_owned();
        name.push("-wal");
        std::path::PathBuf::from(name)
    };
    if wal(from).exists() {
        std::fs::copy(wal(from), wal(to))?;
    }
    Ok(())
}

/// Reads back the one run the server stored in `path`, its results in prospect id order.
pub async fn read_server_run(path: &Path) -> anyhow::Result<ServerRun> {
    let mut conn = connect(path).await?;
    let run =
        sqlx::query("select id, workspace_id, targeting_id, targeting_version from scoring_runs")
            .fetch_one(&mut conn)
            .await?;
    let run_id: String = run.try_get("id")?;
    let results = sqlx::query(
        "select prospect_id, score, tier, matched, gates_failed, missing from scoring_results \
         where run_id = ? order by prospect_id",
    )
    .bind(&run_id)
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
    prospect_id text not null,
    pack integer not null,
    primary key (run_id, score desc, prospect_id)
) without rowid;
";

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

/// A pack read back: its entries, in the order they were written.
type Entry = (String, i64, String, Value, Value, Value);

/// Writes `run`'s results in `layout` into the database at `path` (a copy as the import left it);
/// returns the time from `begin` to `commit`.
async fn write(path: &Path, layout: Layout, run: &ServerRun) -> anyhow::Result<Duration> {
    let mut conn = connect(path).await?;
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
    let now = now_ms()?;
    let full_results = rows_sql(
        "insert into scoring_results (run_id, prospect_id, score, tier, matched, gates_failed, missing)",
        7,
        BATCH,
    );
    let full_latest = rows_sql(
        "insert into prospect_scores (prospect_id, workspace_id, score, tier, targeting_id, targeting_version, scored_at)",
        7,
        BATCH,
    );
    let full_order = rows_sql(
        "insert into scoring_result_order (run_id, score, prospect_id, pack)",
        4,
        BATCH,
    );
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
    .bind(RUN_ID)
    .bind(&run.workspace_id)
    .bind(&run.targeting_id)
    .bind(run.targeting_version)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    for (pack_number, chunk) in run.results.chunks(BATCH).enumerate() {
        match layout {
            Layout::Today => {
                let sql = statement(
                    &full_results,
                    "insert into scoring_results (run_id, prospect_id, score, tier, matched, gates_failed, missing)",
                    7,
                    chunk.len(),
                );
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
                for result in chunk {
                    query = query
                        .bind(RUN_ID)
                        .bind(&result.prospect_id)
                        .bind(result.score)
                        .bind(&result.tier)
                        .bind(&result.matched)
                        .bind(&result.gates_failed)
                        .bind(&result.missing);
                }
                query.execute(&mut *tx).await?;
            }
            Layout::Packed | Layout::Ordered => {
                sqlx::query(
                    "insert into scoring_result_packs (run_id, pack, results) values (?, ?, ?)",
                )
                .bind(RUN_ID)
                .bind(i64::try_from(pack_number)?)
                .bind(pack(chunk)?)
                .execute(&mut *tx)
                .await?;
                let sql = statement(
                    &full_latest,
                    "insert into prospect_scores (prospect_id, workspace_id, score, tier, targeting_id, targeting_version, scored_at)",
                    7,
                    chunk.len(),
                );
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
                    let sql = statement(
                        &full_order,
                        "insert into scoring_result_order (run_id, score, prospect_id, pack)",
                        4,
                        chunk.len(),
                    );
                    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
                    for result in chunk {
                        query = query
                            .bind(RUN_ID)
                            .bind(result.score)
                            .bind(&result.prospect_id)
                            .bind(i64::try_from(pack_number)?);
                    }
                    query.execute(&mut *tx).await?;
                }
            }
        }
    }
    if layout == Layout::Today {
        sqlx::query(copy_scores_to_prospects(Backend::Sqlite))
            .bind(RUN_ID)
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
    .bind(RUN_ID)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    let took = started.elapsed();
    sqlx::query("pragma wal_checkpoint(truncate)")
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    Ok(took)
}

/// One page of `list_scoring_results` as `layout` answers it: the prospect ids, best score first,
/// with each one's name (joined from `prospects`, as the action does) and its matched criteria.
async fn page(
    conn: &mut SqliteConnection,
    layout: Layout,
    offset: usize,
) -> anyhow::Result<Vec<(String, String, Value)>> {
    let (limit, offset) = (i64::try_from(PAGE)?, i64::try_from(offset)?);
    match layout {
        Layout::Today => {
            // The action's own statement (`actions/src/scoring/mod.rs`) and its count.
            let rows = sqlx::query(
                "select r.prospect_id, p.first_name, p.last_name, p.title, p.company_name, r.score, r.tier, r.matched, \
                 r.gates_failed, r.missing from scoring_results r join prospects p on p.id = r.prospect_id \
                 where r.run_id = ? order by r.score desc, r.prospect_id limit ? offset ?",
            )
            .bind(RUN_ID)
            .bind(limit)
            .bind(offset)
            .fetch_all(&mut *conn)
            .await?;
            let _: i64 =
                sqlx::query_scalar("select count(*) from scoring_results r where r.run_id = ?")
                    .bind(RUN_ID)
                    .fetch_one(&mut *conn)
                    .await?;
            rows.iter()
                .map(|row| {
                    let matched: String = row.try_get(7)?;
                    Ok((
                        row.try_get(0)?,
                        row.try_get(1)?,
                        serde_json::from_str(&matched)?,
                    ))
                })
                .collect()
        }
        Layout::Ordered => {
            let rows = sqlx::query(
                "select o.prospect_id, o.pack, p.first_name from scoring_result_order o \
                 join prospects p on p.id = o.prospect_id where o.run_id = ? \
                 order by o.score desc, o.prospect_id limit ? offset ?",
            )
            .bind(RUN_ID)
            .bind(limit)
            .bind(offset)
            .fetch_all(&mut *conn)
            .await?;
            let _: i64 =
                sqlx::query_scalar("select count(*) from scoring_result_order where run_id = ?")
                    .bind(RUN_ID)
                    .fetch_one(&mut *conn)
                    .await?;
            let mut packs: Vec<i64> = rows
                .iter()
                .map(|row| row.try_get(1))
                .collect::<Result<_, _>>()?;
            packs.sort_unstable();
            packs.dedup();
            let mut page = Vec::with_capacity(rows.len());
            let mut texts = std::collections::HashMap::new();
            for number in packs {
                let text: String = sqlx::query_scalar(
                    "select results from scoring_result_packs where run_id = ? and pack = ?",
                )
                .bind(RUN_ID)
                .bind(number)
                .fetch_one(&mut *conn)
                .await?;
                texts.insert(number, text);
            }
            let decoded: std::collections::HashMap<i64, Vec<Entry>> = texts
                .iter()
                .map(|(number, text)| Ok((*number, serde_json::from_str(text)?)))
                .collect::<anyhow::Result<_>>()?;
            for row in &rows {
                let id: String = row.try_get(0)?;
                let number: i64 = row.try_get(1)?;
                let entry = decoded[&number]
                    .iter()
                    .find(|entry| entry.0 == id)
                    .context("a result missing from its pack")?;
                page.push((id, row.try_get(2)?, entry.3.clone()));
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
            .bind(RUN_ID)
            .fetch_all(&mut *conn)
            .await?;
            let mut entries: Vec<Entry> = Vec::new();
            for text in &texts {
                entries.extend(serde_json::from_str::<Vec<Entry>>(text)?);
            }
            entries.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let start = usize::try_from(offset)?.min(entries.len());
            let cut = &entries[start..(start + PAGE).min(entries.len())];
            let mut page = Vec::with_capacity(cut.len());
            for entry in cut {
                let name: String =
                    sqlx::query_scalar("select first_name from prospects where id = ?")
                        .bind(&entry.0)
                        .fetch_one(&mut *conn)
                        .await?;
                page.push((entry.0.clone(), name, entry.3.clone()));
            }
            Ok(page)
        }
    }
}

/// Writes `run` in each layout into its own copy of `imported` (the database as the import left
/// it), then reads pages from each; fails if two layouts answer a page differently.
pub async fn measure(
    dir: &Path,
    imported: &Path,
    run: &ServerRun,
) -> anyhow::Result<Vec<Measured>> {
    let count = run.results.len();
    let offsets = [0, count / 2, count.saturating_sub(PAGE)];
    let mut measured = Vec::new();
    let mut answers: Vec<Vec<Vec<(String, String, Value)>>> = Vec::new();
    for layout in Layout::ALL {
        let path = dir.join(format!("floor-{}.db", layout.name()));
        copy_database(imported, &path)?;
        let size_before = {
            let mut conn = connect(&path).await?;
            sqlx::query("pragma wal_checkpoint(truncate)")
                .execute(&mut conn)
                .await?;
            conn.close().await?;
            std::fs::metadata(&path)?.len()
        };
        let writes = write(&path, layout, run).await?;
        let bytes_added = std::fs::metadata(&path)?.len().saturating_sub(size_before);
        let mut conn = connect(&path).await?;
        let mut pages = Vec::new();
        let mut layout_answers = Vec::new();
        for offset in offsets {
            let mut times = Vec::with_capacity(PAGE_READS);
            let mut answer = Vec::new();
            for _ in 0..PAGE_READS {
                let started = Instant::now();
                answer = page(&mut conn, layout, offset).await?;
                times.push(started.elapsed());
            }
            times.sort_unstable();
            pages.push((offset, times[PAGE_READS / 2]));
            ensure!(
                answer.len() == PAGE.min(count - offset.min(count)),
                "{} answered {} results at offset {offset}",
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
            pages,
            bytes_added,
        });
        std::fs::remove_file(&path).ok();
    }
    Ok(measured)
}
