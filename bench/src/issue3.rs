//! The issue 3 benchmark (`--phases issue3`): importing CSV rows against a plain batched insert of
//! the same rows, then scoring the imported prospects.
//!
//! 1. **Baseline.** A fresh SQLite database, migrated by `outreach migrate`, with a workspace made
//!    by the admin CLI. The rows are inserted into `prospects` with plain sqlx (the SQLite driver,
//!    the server's pragmas: WAL, `synchronous = normal`, foreign keys on), in one transaction, as
//!    multi-row `insert`s of [`BASELINE_BATCH`] rows with anonymous `?` placeholders (as the
//!    import's own batches use on SQLite). The columns are the ones an import of these rows
//!    writes: id, workspace, first and last name, company, title, profile URL, email, `tags`
//!    `'[]'`, `custom_fields` `'{}'`, `source` `'import'`, `search_text`, `do_not_contact` 0,
//!    created and updated times. Ids are of the `prs_` shape and sorted, like the import's. The
//!    rows are built before the clock starts; the time is `begin` to `commit`.
//! 2. **Import.** The release server on another fresh database, credits granted with the admin CLI,
//!    then one `POST /api/v1/imports` `{"csv": ..., "list_name": ...}` of the same rows as CSV. The
//!    time is from sending the request to having read the whole response (HTTP, JSON and CSV
//!    parsing, normalisation, deduplication, the inserts, the list members, the credits).
//! 3. **Scoring.** A targeting (`POST /api/v1/targetings`), then one `POST /api/v1/scoring-runs`
//!    over the import's list; the time is again request to response. (Between the two, the
//!    database is copied as the import left it, with `vacuum into`.)
//! 4. **Scoring's storage.** The run's stored results are written again into copies of the
//!    imported database, with nothing but SQLite in the way, in today's layout (the floor the run
//!    is held to) and in two that store less (`scoring_floor.rs`).
//!
//! `--rounds` rounds run on fresh databases, and each aim's figure is the median over them.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, ensure};
use bytes::Bytes;
use hyper::Method;
use serde_json::{Value, json};
use sqlx::Connection;

use crate::load::{self, Target};
use crate::{procfs, scoring_floor, service};

/// Rows per `insert` statement of the baseline (11 bound values each: 5,500 parameters).
const BASELINE_BATCH: usize = 500;
/// The aims of issue 3.
const IMPORT_RATIO_AIM: f64 = 0.7;
const SCORING_AIM: f64 = 200_000.0;
/// Issue 29: a scoring run against SQLite's floor for the writes it makes.
const FLOOR_RATIO_AIM: f64 = 0.9;

const FIRST: [&str; 16] = [
    "Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Fran", "John", "Kate", "Linus", "Meg",
    "Klaus", "Radia", "Tim", "Sophie", "Ken",
];
const LAST: [&str; 16] = [
    "Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "McCarthy", "Johnson",
    "Torvalds", "Hamilton", "Wirth", "Perlman", "Lee", "Wilson", "Thompson",
];
/// Titles. With no seniority, industry, size or location in the rows, the targeting below can give
/// at most 35 of its 110 points, so every prospect is `d` (a few distinct scores) or, for the
/// interns, `disqualified`: the scores are not spread as real ones are.
const TITLES: [&str; 8] = [
    "VP Engineering",
    "CTO",
    "Head of Engineering",
    "VP Sales",
    "Founder",
    "Engineering Intern",
    "Account Executive",
    "Marketing Director",
];

/// The targeting scored against: the one of `tests/api/scoring.rs` (`saas_profile`).
fn targeting() -> Value {
    json!({
        "name": "SaaS engineering leaders",
        "criteria": {
            "titles": {
                "include": [{"value": "VP Engineering", "points": 25}, {"value": "CTO", "points": 30}, {"value": "head of engineering", "points": 20}],
                "exclude": ["assistant"],
            },
            "seniorities": [{"value": "vp", "points": 15}, {"value": "c-level", "points": 20}],
            "departments": [{"value": "engineering", "points": 10}],
            "industries": [{"value": "software", "points": 20}, {"value": "financial services", "points": 10}],
            "company_sizes": [{"min": 50, "max": 500, "points": 15}, {"min": 501, "max": 5000, "points": 10}],
            "locations": [{"value": "germany", "points": 10}, {"value": "berlin", "points": 5}],
            "keywords": [{"value": "saas", "points": 5}, {"value": "machine learning", "points": 5}],
        },
        "gates": {
            "excluded_industries": ["gambling"],
            "excluded_domains": ["competitor.com"],
            "excluded_title_keywords": ["student", "intern"],
        },
        "tiers": {"a": 80, "b": 60, "c": 40},
    })
}

/// One prospect row, already in the normalised form the import stores.
struct Row {
    first: &'static str,
    last: &'static str,
    company: String,
    title: &'static str,
    profile_url: String,
    email: String,
}

impl Row {
    fn search_text(&self) -> String {
        format!(
            "{} {} | {} | {}",
            self.first, self.last, self.company, self.title
        )
        .to_lowercase()
    }
}

/// `count` distinct rows (distinct profile URLs and emails, so an import creates every one).
fn rows(count: usize) -> Vec<Row> {
    (0..count)
        .map(|i| {
            let first = FIRST[i % FIRST.len()];
            let last = LAST[(i / FIRST.len()) % LAST.len()];
            let company_number = i % 5_000;
            Row {
                first,
                last,
                company: format!("Company {company_number}"),
                title: TITLES[(i / 7) % TITLES.len()],
                profile_url: format!("linkedin.com/in/{}-{i}", first.to_lowercase()),
                email: format!("{}{i}@co{company_number}.com", first.to_lowercase()),
            }
        })
        .collect()
}

/// The rows as CSV text with a header the import recognises.
fn csv(rows: &[Row]) -> String {
    let mut text = String::with_capacity(rows.len() * 100);
    text.push_str("First Name,Last Name,Company,Title,LinkedIn URL,Email\n");
    for row in rows {
        text.push_str(&format!(
            "{},{},{},{},{},{}\n",
            row.first, row.last, row.company, row.title, row.profile_url, row.email
        ));
    }
    text
}

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Sorted `prs_` ids (20 base62 characters), distinct per row.
fn ids(count: usize) -> Vec<String> {
    let mut state: u64 = 0x5EED_1234_ABCD_0001;
    let mut ids: Vec<String> = (0..count)
        .map(|_| {
            let mut id = String::with_capacity(24);
            id.push_str("prs_");
            for _ in 0..2 {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut x = state;
                x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                let mut bits = x ^ (x >> 31);
                for _ in 0..10 {
                    id.push(char::from(BASE62[(bits % 62) as usize]));
                    bits /= 62;
                }
            }
            id
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// A fresh database migrated by the server binary, with one workspace; returns its id.
async fn fresh_database(bin: &Path, database_url: &str) -> anyhow::Result<String> {
    let output = tokio::process::Command::new(bin)
        .args(["migrate", "--database-url", database_url])
        .env_remove("DATABASE_URL")
        .output()
        .await?;
    ensure!(
        output.status.success(),
        "`outreach migrate` failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let created = service::admin(
        bin,
        database_url,
        &[
            "workspace",
            "create",
            "--name",
            "Bench",
            "--owner-email",
            "bench@example.com",
        ],
    )
    .await?;
    Ok(created["workspace_id"]
        .as_str()
        .context("no workspace_id")?
        .to_owned())
}

/// The baseline: a plain batched insert of `rows` in one transaction; returns the wall time taken
/// and the CPU time this process (SQLite runs on a thread of it) spent meanwhile.
async fn baseline_insert(
    db_path: &Path,
    workspace_id: &str,
    rows: &[Row],
) -> anyhow::Result<(Duration, Duration)> {
    let mut conn = scoring_floor::connect(db_path).await?;
    let ids = ids(rows.len());
    ensure!(ids.len() == rows.len(), "duplicate ids");
    let search: Vec<String> = rows.iter().map(Row::search_text).collect();
    let now = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis())?;
    let sql = |count: usize| {
        let mut sql = String::from(
            "insert into prospects (id, workspace_id, first_name, last_name, company_name, title, profile_url, \
             email, tags, custom_fields, source, search_text, do_not_contact, created_at, updated_at) values ",
        );
        for row in 0..count {
            if row > 0 {
                sql.push_str(", ");
            }
            sql.push_str("(?, ?, ?, ?, ?, ?, ?, ?, '[]', '{}', 'import', ?, 0, ?, ?)");
        }
        sql
    };
    let full = sql(BASELINE_BATCH);
    let cpu_before = procfs::cpu_time_self()?;
    let started = Instant::now();
    let mut tx = conn.begin().await?;
    for ((rows, ids), search) in rows
        .chunks(BASELINE_BATCH)
        .zip(ids.chunks(BASELINE_BATCH))
        .zip(search.chunks(BASELINE_BATCH))
    {
        let partial;
        let statement = if rows.len() == BASELINE_BATCH {
            full.as_str()
        } else {
            partial = sql(rows.len());
            partial.as_str()
        };
        let mut query = sqlx::query(sqlx::AssertSqlSafe(statement));
        for ((row, id), search) in rows.iter().zip(ids).zip(search) {
            query = query
                .bind(id)
                .bind(workspace_id)
                .bind(row.first)
                .bind(row.last)
                .bind(&row.company)
                .bind(row.title)
                .bind(&row.profile_url)
                .bind(&row.email)
                .bind(search)
                .bind(now)
                .bind(now);
        }
        query.execute(&mut *tx).await?;
    }
    tx.commit().await?;
    let took = started.elapsed();
    let cpu = procfs::cpu_time_self()?.saturating_sub(cpu_before);
    let (count,): (i64,) = sqlx::query_as("select count(*) from prospects where workspace_id = ?")
        .bind(workspace_id)
        .fetch_one(&mut conn)
        .await?;
    ensure!(
        usize::try_from(count)? == rows.len(),
        "the baseline inserted {count} rows, expected {}",
        rows.len()
    );
    conn.close().await?;
    Ok((took, cpu))
}

/// One timed request: status, body and wall time, plus the server's CPU time meanwhile.
struct Timed {
    body: Value,
    wall: Duration,
    server_cpu: Duration,
}

async fn timed_post(target: &Target, server_pid: u32, what: &str) -> anyhow::Result<Timed> {
    let cpu_before = procfs::cpu_time(server_pid)?;
    let started = Instant::now();
    let (status, body) = load::probe(target).await?;
    let wall = started.elapsed();
    let server_cpu = procfs::cpu_time(server_pid)?.saturating_sub(cpu_before);
    ensure!(
        status.is_success(),
        "{what} answered {status}: {:.2000}",
        String::from_utf8_lossy(&body)
    );
    let body: Value = serde_json::from_slice(&body).with_context(|| {
        format!(
            "{what} answered no JSON: {:.500}",
            String::from_utf8_lossy(&body)
        )
    })?;
    Ok(Timed {
        body,
        wall,
        server_cpu,
    })
}

fn post(
    addr: std::net::SocketAddr,
    path: &str,
    bearer: &str,
    body: Vec<u8>,
) -> anyhow::Result<Target> {
    Target {
        method: Method::POST,
        body: Bytes::from(body),
        ..Target::get(addr, path)
    }
    .header("authorization", bearer)?
    .header("content-type", "application/json")
}

/// One round's figures.
struct RoundFigures {
    import_ratio: f64,
    scoring_rate: f64,
    /// The scoring run's rate over today's layout's floor rate.
    scoring_vs_floor: f64,
    /// Each layout's write rates, prospects/s: the first run, the second.
    layout_rates: Vec<(scoring_floor::Layout, f64, f64)>,
}

/// Runs `rounds` rounds of the measurements (each on fresh databases), prints each round's tables,
/// then the median of each aim's figure over the rounds.
pub async fn run(
    bin: &Path,
    dir: &Path,
    count: usize,
    rounds: usize,
    load_average: fn() -> String,
) -> anyhow::Result<()> {
    let rounds = rounds.max(1);
    let mut figures = Vec::with_capacity(rounds);
    for number in 1..=rounds {
        println!(
            "» issue 3, round {number} of {rounds}; load average {}",
            load_average()
        );
        let round_dir = dir.join(format!("issue3-round{number}"));
        std::fs::create_dir_all(&round_dir)?;
        figures.push(round(bin, &round_dir, count, load_average).await?);
        std::fs::remove_dir_all(&round_dir).ok();
    }
    let median = |figure: &dyn Fn(&RoundFigures) -> f64| {
        let values: Vec<f64> = figures.iter().map(figure).collect();
        let shown: Vec<String> = values.iter().map(|value| format!("{value:.2}")).collect();
        (crate::median(values).unwrap_or(0.0), shown.join(", "))
    };
    let mark = |ok: bool| if ok { "met" } else { "MISSED" };
    println!();
    println!(
        "issue 3 and issue 29 aims, medians of {rounds} rounds (each round's figure in brackets):"
    );
    let (import, each) = median(&|f| f.import_ratio);
    println!(
        "- [{}] import >= {IMPORT_RATIO_AIM:.1} of the same round's batched insert: {import:.2} ({each})",
        mark(import >= IMPORT_RATIO_AIM)
    );
    let (floor, each) = median(&|f| f.scoring_vs_floor);
    println!(
        "- [{}] scoring >= {FLOOR_RATIO_AIM:.1} of the same round's SQLite floor for its writes: {floor:.2} ({each})",
        mark(floor >= FLOOR_RATIO_AIM)
    );
    let (rate, each) = median(&|f| f.scoring_rate);
    println!(
        "- [{}] scoring >= {SCORING_AIM:.0} prospects/s: {rate:.0} ({each})",
        mark(rate >= SCORING_AIM)
    );
    for layout in scoring_floor::Layout::ALL {
        let rates = |second: bool| {
            median(&|f| {
                f.layout_rates.iter().find(|(l, _, _)| *l == layout).map_or(
                    0.0,
                    |(_, first, later)| if second { *later } else { *first },
                )
            })
        };
        let ((first, first_each), (second, second_each)) = (rates(false), rates(true));
        println!(
            "- writes alone, layout `{}`: first run {first:.0} prospects/s ({first_each}), second run {second:.0} ({second_each})",
            layout.name()
        );
    }
    Ok(())
}

/// One round: the baseline, the import, the scoring run, and scoring's storage layouts.
async fn round(
    bin: &Path,
    dir: &Path,
    count: usize,
    load_average: fn() -> String,
) -> anyhow::Result<RoundFigures> {
    let rows = rows(count);

    // 1. The baseline.
    let base_path = dir.join("baseline.db");
    let base_url = format!("sqlite://{}", base_path.display());
    let workspace_id = fresh_database(bin, &base_url).await?;
    println!(
        "» baseline: plain batched sqlx insert ({BASELINE_BATCH} rows per statement, `?` placeholders, one transaction)"
    );
    let (baseline, baseline_cpu) = baseline_insert(&base_path, &workspace_id, &rows).await?;
    let baseline_rate = count as f64 / baseline.as_secs_f64();
    println!(
        "  {count} rows in {:.3} s: {baseline_rate:.0} rows/s",
        baseline.as_secs_f64()
    );
    std::fs::remove_file(&base_path).ok();

    // 2. The import.
    let db_path = dir.join("import.db");
    let database_url = format!("sqlite://{}", db_path.display());
    let workspace_id = fresh_database(bin, &database_url).await?;
    let credits = i64::try_from(count)?.saturating_mul(3);
    service::admin(
        bin,
        &database_url,
        &[
            "credits",
            "grant",
            "--workspace",
            &workspace_id,
            "--amount",
            &credits.to_string(),
        ],
    )
    .await?;
    let key = service::admin(
        bin,
        &database_url,
        &[
            "key",
            "create",
            "--workspace",
            &workspace_id,
            "--email",
            "bench@example.com",
            "--name",
            "bench",
            "--scopes",
            "read,write",
        ],
    )
    .await?;
    let bearer = format!("Bearer {}", key["key"].as_str().context("no key")?);
    let server = service::start_server(bin, &database_url, &dir.join("server-issue3.log")).await?;
    println!("  server pid {} at http://{}", server.pid, server.addr);

    let csv = csv(&rows);
    drop(rows);
    let body = serde_json::to_vec(&json!({"csv": csv, "list_name": "Bench import"}))?;
    println!(
        "» import: POST /api/v1/imports, one CSV of {count} rows ({:.1} MiB body)",
        body.len() as f64 / 1_048_576.0
    );
    // The price function alone (parse, normalise, look up duplicates; nothing written): where the
    // import's time goes before its writes.
    let mut estimate_body: Value = serde_json::from_slice(&body)?;
    estimate_body["estimate_only"] = json!(true);
    let estimate = timed_post(
        &post(
            server.addr,
            "/api/v1/imports",
            &bearer,
            serde_json::to_vec(&estimate_body)?,
        )?,
        server.pid,
        "POST /api/v1/imports (estimate_only)",
    )
    .await?;
    drop(estimate_body);
    println!(
        "  estimate_only (parse, normalise, duplicate lookup; no writes): {:.3} s, {}",
        estimate.wall.as_secs_f64(),
        estimate.body
    );
    let import = timed_post(
        &post(server.addr, "/api/v1/imports", &bearer, body)?,
        server.pid,
        "POST /api/v1/imports",
    )
    .await?;
    let created = import.body["created"].as_u64().unwrap_or(0);
    ensure!(
        created == count as u64,
        "the import created {created} prospects, expected {count}: {:.1000}",
        import.body.to_string()
    );
    let list_id = import.body["list_id"]
        .as_str()
        .context("the import has no list_id")?
        .to_owned();
    let import_rate = count as f64 / import.wall.as_secs_f64();
    println!(
        "  created {created} in {:.3} s: {import_rate:.0} rows/s, {:.2} of the baseline; credits spent {}",
        import.wall.as_secs_f64(),
        import_rate / baseline_rate,
        import.body["credits_spent"]
    );
    // The database as the import left it, for the storage layouts (step 4).
    let imported = dir.join("imported.db");
    scoring_floor::copy_database(&db_path, &imported).await?;

    // 3. Scoring.
    let made = timed_post(
        &post(
            server.addr,
            "/api/v1/targetings",
            &bearer,
            serde_json::to_vec(&targeting())?,
        )?,
        server.pid,
        "POST /api/v1/targetings",
    )
    .await?;
    let targeting_id = made.body["id"]
        .as_str()
        .context("no targeting id")?
        .to_owned();
    println!("» scoring: POST /api/v1/scoring-runs over the import's list {list_id}");
    let scoring = timed_post(
        &post(
            server.addr,
            "/api/v1/scoring-runs",
            &bearer,
            serde_json::to_vec(&json!({"targeting_id": targeting_id, "list_id": list_id}))?,
        )?,
        server.pid,
        "POST /api/v1/scoring-runs",
    )
    .await?;
    let scored = scoring.body["total"].as_u64().unwrap_or(0);
    ensure!(
        scored == count as u64,
        "the run scored {scored} prospects, expected {count}: {}",
        scoring.body
    );
    let scoring_rate = count as f64 / scoring.wall.as_secs_f64();
    println!(
        "  scored {scored} in {:.3} s: {scoring_rate:.0} prospects/s; by tier {}",
        scoring.wall.as_secs_f64(),
        scoring.body["by_tier"]
    );
    // The allocator gives freed memory back after a short delay; the end figure is read after it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (hwm_kib, rss_kib) = procfs::rss_kib(server.pid)?;
    server.stop().await?;

    // 4. Scoring's storage: the run's own results written again in each layout, with nothing
    // but SQLite in the way.
    println!(
        "» scoring's storage: the run's results written in each layout (see scoring_floor.rs)"
    );
    let server_run = scoring_floor::read_server_run(&db_path).await?;
    ensure!(
        server_run.len() == count,
        "the server's run stored {} results, expected {count}",
        server_run.len()
    );
    let layouts = scoring_floor::measure(dir, &imported, &server_run).await?;
    drop(server_run);
    std::fs::remove_file(&imported).ok();
    println!("load average at the end: {}", load_average());

    let ratio = import_rate / baseline_rate;
    println!();
    println!("| step | rows | wall time | rows/s | vs baseline | server CPU |");
    println!("|---|---:|---:|---:|---:|---:|");
    println!(
        "| baseline: batched sqlx insert, {BASELINE_BATCH} rows/statement, one transaction | {count} | {:.3} s | {baseline_rate:.0} | 1.00 | {:.2} s (harness process) |",
        baseline.as_secs_f64(),
        baseline_cpu.as_secs_f64()
    );
    println!(
        "| import estimate_only: parse, normalise, duplicate lookup, no writes | {count} | {:.3} s | {:.0} | {:.2} | {:.2} s |",
        estimate.wall.as_secs_f64(),
        count as f64 / estimate.wall.as_secs_f64(),
        baseline.as_secs_f64() / estimate.wall.as_secs_f64(),
        estimate.server_cpu.as_secs_f64()
    );
    println!(
        "| import: POST /api/v1/imports, CSV, list_name | {count} | {:.3} s | {import_rate:.0} | {ratio:.2} | {:.2} s |",
        import.wall.as_secs_f64(),
        import.server_cpu.as_secs_f64()
    );
    println!(
        "| scoring: POST /api/v1/scoring-runs, list of {count} | {count} | {:.3} s | {scoring_rate:.0} | - | {:.2} s |",
        scoring.wall.as_secs_f64(),
        scoring.server_cpu.as_secs_f64()
    );
    println!();
    let rate = |took: Duration| count as f64 / took.as_secs_f64();
    let today = layouts
        .iter()
        .find(|measured| measured.layout == scoring_floor::Layout::Today)
        .context("no figure for today's layout")?;
    // The server's run scored unscored prospects: its floor is the first write.
    let scoring_vs_floor = scoring_rate / rate(today.writes[0]);
    let page_names: Vec<&str> = today.pages.iter().map(|(name, _)| name.as_str()).collect();
    println!(
        "| scoring's writes alone, layout | first run: wall, prospects/s, vs today | scoring run vs this floor | second run: wall, prospects/s, vs today | bytes added by the second run | pages ({}) |",
        page_names.join(" / ")
    );
    println!("|---|---|---:|---|---:|---|");
    for measured in &layouts {
        let pages: Vec<String> = measured
            .pages
            .iter()
            .map(|(_, took)| format!("{:.2} ms", took.as_secs_f64() * 1000.0))
            .collect();
        println!(
            "| {} | {:.3} s, {:.0}/s, {:.2} | {:.2} | {:.3} s, {:.0}/s, {:.2} | {:.1} MiB | {} |",
            measured.layout.name(),
            measured.writes[0].as_secs_f64(),
            rate(measured.writes[0]),
            today.writes[0].as_secs_f64() / measured.writes[0].as_secs_f64(),
            scoring_rate / rate(measured.writes[0]),
            measured.writes[1].as_secs_f64(),
            rate(measured.writes[1]),
            today.writes[1].as_secs_f64() / measured.writes[1].as_secs_f64(),
            measured.bytes_added as f64 / 1_048_576.0,
            pages.join(" / ")
        );
    }
    println!();
    println!(
        "server peak RSS (VmHWM) {:.1} MiB, RSS 3 s after the scoring run {:.1} MiB; scoring by tier {}",
        hwm_kib as f64 / 1024.0,
        rss_kib as f64 / 1024.0,
        scoring.body["by_tier"]
    );
    let mark = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "- [{}] server peak RSS < 100 MiB: {:.1} MiB",
        mark(hwm_kib < 100 * 1024),
        hwm_kib as f64 / 1024.0
    );
    println!(
        "- [{}] server RSS after the run < 64 MiB: {:.1} MiB",
        mark(rss_kib < 64 * 1024),
        rss_kib as f64 / 1024.0
    );
    Ok(RoundFigures {
        import_ratio: ratio,
        scoring_rate,
        scoring_vs_floor,
        layout_rates: layouts
            .iter()
            .map(|measured| {
                (
                    measured.layout,
                    rate(measured.writes[0]),
                    rate(measured.writes[1]),
                )
            })
            .collect(),
    })
}
