//! PostgreSQL for the load phases: a fresh database for `pg-rest` and `pg-mcp`, dropped at the
//! end, and `pg-ceiling`, PostgreSQL's own rate for the credential statement every request makes
//! (run by `pgbench`), which bounds what a request on PostgreSQL can reach.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, ensure};
use sqlx::{Connection, PgConnection};

/// A database made for this run on the server of `--postgres-url`.
pub struct FreshDatabase {
    admin_url: String,
    name: String,
    pub url: String,
}

impl FreshDatabase {
    /// Creates `outreach_bench_<pid>_<nanos>` beside the database `admin_url` names.
    pub async fn create(admin_url: &str) -> anyhow::Result<Self> {
        let (server, _) = admin_url
            .rsplit_once('/')
            .filter(|(server, _)| server.contains("://"))
            .context("--postgres-url must be postgres://user@host:port/database")?;
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.subsec_nanos();
        let name = format!("outreach_bench_{}_{nanos}", std::process::id());
        let mut conn = PgConnection::connect(admin_url)
            .await
            .with_context(|| format!("could not connect to {admin_url}"))?;
        sqlx::query(sqlx::AssertSqlSafe(format!("create database {name}")))
            .execute(&mut conn)
            .await?;
        conn.close().await?;
        Ok(Self {
            admin_url: admin_url.to_owned(),
            url: format!("{server}/{name}"),
            name,
        })
    }

    /// Drops the database (the server using it must have stopped).
    pub async fn drop_database(self) -> anyhow::Result<()> {
        ensure!(
            self.name.starts_with("outreach_bench_"),
            "not a bench database"
        );
        let mut conn = PgConnection::connect(&self.admin_url).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "drop database if exists {} with (force)",
            self.name
        )))
        .execute(&mut conn)
        .await?;
        conn.close().await?;
        Ok(())
    }
}

/// PostgreSQL's own ceiling for the credential read: `pgbench` running the server's own statement
/// for one API key (`outreach_runtime::auth::api_key_sql`; the server batches concurrent ones with
/// `= any($1)`, which only makes its side cheaper) for the database's first key, prepared, over
/// `connections` plain-text connections (as the server's) for `seconds`; its transactions per
/// second.
pub async fn credential_query_tps(
    url: &str,
    dir: &std::path::Path,
    connections: usize,
    seconds: u64,
) -> anyhow::Result<f64> {
    let mut conn = PgConnection::connect(url).await?;
    let (hash, environment): (String, String) =
        sqlx::query_as("select key_hash, environment from api_keys order by created_at limit 1")
            .fetch_one(&mut conn)
            .await?;
    conn.close().await?;
    let script = dir.join("credential.sql");
    let sql = outreach_runtime::auth::api_key_sql();
    ensure!(
        sql.contains("$2") && !sql.contains("$3"),
        "the credential statement's parameters changed: {sql}"
    );
    // The values as pgbench variables, which `-M prepared` sends as bound parameters, as the
    // server sends its own.
    std::fs::write(
        &script,
        format!(
            "{};\n",
            sql.replace("$1", ":hash").replace("$2", ":environment")
        ),
    )?;
    let output = tokio::process::Command::new("pgbench")
        .env("PGSSLMODE", "disable")
        .args(["-n", "-M", "prepared", "-j", "2"])
        .args([
            "-D",
            &format!("hash={hash}"),
            "-D",
            &format!("environment={environment}"),
        ])
        .args(["-c", &connections.to_string(), "-T", &seconds.to_string()])
        .arg("-f")
        .arg(&script)
        .arg(url)
        .output()
        .await
        .context("could not run pgbench (the postgresql-client package)")?;
    let text = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success(),
        "pgbench failed: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let failed = text
        .lines()
        .find_map(|line| line.strip_prefix("number of failed transactions: "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or("0");
    ensure!(
        failed == "0",
        "pgbench: {failed} failed transactions\n{text}"
    );
    text.lines()
        .find_map(|line| line.strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|tps| tps.parse().ok())
        .with_context(|| format!("no tps in pgbench's output:\n{text}"))
}
