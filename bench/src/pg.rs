//! A fresh PostgreSQL database for the `pg-rest` and `pg-mcp` phases, dropped at the end.

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
