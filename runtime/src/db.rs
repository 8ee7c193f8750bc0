//! The storage pool: one code path over SQLite and PostgreSQL.
//!
//! sqlx's `Any` driver lets every query be written once with `$1` placeholders (both backends
//! accept them) and run on whichever database `DATABASE_URL` names. The few places where the
//! backends need different SQL ask [`Db::backend`] and keep both versions side by side. SQLite is
//! the default so `serve` works on a fresh machine: the file is created, put in WAL mode and
//! migrated on start. Each backend has its own migration folder because DDL types differ.

use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, Executor};

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/postgres");

/// Which database is behind the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A cheap, cloneable handle on the connection pool.
#[derive(Debug, Clone)]
pub struct Db {
    pool: AnyPool,
    backend: Backend,
}

impl Db {
    /// Connects to `url` (`sqlite://file.db`, `sqlite::memory:` or `postgres://...`), creating a
    /// SQLite file if it does not exist yet.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else {
            anyhow::bail!("DATABASE_URL must start with sqlite: or postgres://, got `{url}`");
        };
        let options = match backend {
            Backend::Sqlite => AnyConnectOptions::from_str(&sqlite_url(url))?,
            Backend::Postgres => AnyConnectOptions::from_str(url)?,
        };
        let pool = match backend {
            Backend::Sqlite => {
                AnyPoolOptions::new()
                    // SQLite has one writer at a time; a handful of connections serve readers
                    // in parallel while `busy_timeout` queues writers instead of failing them.
                    .max_connections(8)
                    .min_connections(1)
                    // A local file does not drop connections; the liveness ping sqlx sends before
                    // each checkout is a round trip to the connection's thread on every query.
                    .test_before_acquire(false)
                    .acquire_timeout(Duration::from_secs(30))
                    .after_connect(|conn, _meta| {
                        Box::pin(async move {
                            conn.execute(
                                "pragma journal_mode = wal; pragma synchronous = normal; \
                                 pragma foreign_keys = on; pragma busy_timeout = 10000;",
                            )
                            .await?;
                            Ok(())
                        })
                    })
                    .connect_with(options)
                    .await?
            }
            Backend::Postgres => {
                AnyPoolOptions::new()
                    .max_connections(16)
                    .acquire_timeout(Duration::from_secs(30))
                    .connect_with(options)
                    .await?
            }
        };
        Ok(Self { pool, backend })
    }

    /// Applies the pending migrations of this backend.
    pub async fn migrate(&self) -> anyhow::Result<()> {
        match self.backend {
            Backend::Sqlite => SQLITE_MIGRATIONS.run(&self.pool).await?,
            Backend::Postgres => POSTGRES_MIGRATIONS.run(&self.pool).await?,
        }
        Ok(())
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Begins a transaction that will write. On SQLite it takes the write lock at once
    /// (`BEGIN IMMEDIATE`): a transaction that read first could not upgrade its snapshot while
    /// another writer is active, and would fail instead of waiting its turn.
    pub async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            Backend::Postgres => self.pool.begin().await,
        }
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Adds `mode=rwc` so a missing SQLite file is created rather than refused.
fn sqlite_url(url: &str) -> String {
    if url.contains(":memory:") || url.contains("mode=") {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&mode=rwc")
    } else {
        format!("{url}?mode=rwc")
    }
}

/// Whether an error is a violation of the named unique constraint (or unique index), so call sites
/// can map it to `conflict` without string-matching elsewhere.
pub fn is_unique_violation(error: &sqlx::Error, constraint: &str) -> bool {
    let sqlx::Error::Database(db_error) = error else {
        return false;
    };
    if !matches!(db_error.kind(), sqlx::error::ErrorKind::UniqueViolation) {
        return false;
    }
    // PostgreSQL names the constraint; SQLite names the columns in its message.
    db_error.constraint().is_none_or(|name| name == constraint)
}
