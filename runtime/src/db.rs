//! The storage pool: one code path over SQLite and PostgreSQL.
//!
//! sqlx's `Any` driver lets every query be written once with `$1` placeholders (both backends
//! accept them) and run on whichever database `DATABASE_URL` names. The few places where the
//! backends need different SQL ask [`Db::backend`] and keep both versions side by side. SQLite is
//! the default so `serve` works on a fresh machine: the file is created, put in WAL mode and
//! migrated on start. Each backend has its own migration folder because DDL types differ.
//!
//! One exception to "every query through the pool": on SQLite, sqlx runs each connection on its
//! own thread, so every statement is a message to that thread and back (two context switches
//! and two futex wakes). For the one read every request makes, the credential, that hand-off
//! cost several times the indexed lookup itself. [`Db::read_in_place`] runs such a short read on
//! the calling thread instead, on a small set of query-only `rusqlite` connections to the same
//! file (rusqlite links the same `libsqlite3-sys` as sqlx, so there is one SQLite in the
//! binary). WAL lets them read beside the writer, and each statement runs in its own read
//! transaction, so it sees everything committed before it began: nothing is cached. Writes, and
//! every other read, stay on the pool.
//!
//! A list page is the other case where the pool's hand-off dominates: sqlx's worker thread copies
//! every value of every row (`sqlite3_value_dup`), sends the rows over, and each is copied again
//! into an `AnyRow`. [`Db::read_blocking`] runs a longer read on the same query-only connections,
//! on tokio's blocking threads (one hand-off per page, not per row, and no runtime worker is held
//! up by a slow filter), reading each value once, straight into its Rust type.
//!
//! On PostgreSQL the pool pings every connection it takes back, a second round trip per query;
//! the credential read every request makes goes through [`crate::batched_reads`] instead.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{AnyPool, Connection as _, Executor};

use crate::batched_reads::BatchedReads;

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/postgres");

/// Which database is behind the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// The backend a connection (or a transaction, through `&mut *tx`) talks to: what SQL that
    /// differs between them (`for update` on PostgreSQL) asks.
    pub fn of(conn: &sqlx::AnyConnection) -> Self {
        if conn.backend_name().eq_ignore_ascii_case("postgresql") {
            Self::Postgres
        } else {
            Self::Sqlite
        }
    }
}

/// A transaction begun by [`Db::begin_write`].
pub type WriteTx = sqlx::Transaction<'static, sqlx::Any>;

/// A cheap, cloneable handle on the connection pool.
#[derive(Debug, Clone)]
pub struct Db {
    pool: AnyPool,
    backend: Backend,
    /// SQLite on a file only: the connections [`Db::read_in_place`] reads with.
    in_place: Option<Arc<InPlaceReaders>>,
    /// SQLite on a file only: the one connection this process's write transactions run on, one
    /// after the other (see [`Db::begin_write`]).
    writer: Option<AnyPool>,
    /// PostgreSQL only: the lanes [`Db::batched_reads`] reads with.
    batched: Option<Arc<BatchedReads>>,
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
            // SQLite has one writer at a time; a handful of connections serve readers in
            // parallel.
            Backend::Sqlite => sqlite_pool(8, options.clone()).await?,
            Backend::Postgres => {
                AnyPoolOptions::new()
                    .max_connections(16)
                    // sqlx pings a connection before every checkout by default: a second round
                    // trip to the server for every query. Only a connection idle long enough for
                    // a server restart or a dropped TCP session to be likely is pinged now.
                    .test_before_acquire(false)
                    .before_acquire(|conn, meta| {
                        Box::pin(async move {
                            if meta.idle_for >= PING_AFTER_IDLE {
                                conn.ping().await?;
                            }
                            Ok(true)
                        })
                    })
                    .acquire_timeout(Duration::from_secs(30))
                    .connect_with(options.clone())
                    .await?
            }
        };
        let in_place = match backend {
            Backend::Sqlite => InPlaceReaders::for_url(url).map(Arc::new),
            Backend::Postgres => None,
        };
        let writer = match backend {
            Backend::Sqlite if !is_memory(url) => Some(sqlite_pool(1, options).await?),
            _ => None,
        };
        let batched = match backend {
            Backend::Postgres => {
                let options = PgConnectOptions::from_str(url)?;
                Some(Arc::new(BatchedReads::start(&options)))
            }
            Backend::Sqlite => None,
        };
        Ok(Self {
            pool,
            backend,
            in_place,
            writer,
            batched,
        })
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
    ///
    /// SQLite admits one writer at a time, and a connection that finds the write lock taken
    /// polls for it under `busy_timeout` with growing sleeps (1, 2, 5, 10 ms...): while several
    /// writers wait, the lock sits free most of the time and they wake late. So this process's
    /// write transactions run on a pool of their own with one connection, whose checkout queue
    /// hands it to the next waiter the moment a transaction ends (`busy_timeout` still arbitrates
    /// between processes). Its page cache also stays warm: SQLite empties a connection's cache
    /// whenever another connection wrote, which with writes spread over the reading pool was
    /// every transaction.
    pub async fn begin_write(&self) -> Result<WriteTx, sqlx::Error> {
        match (self.backend, &self.writer) {
            (Backend::Sqlite, Some(writer)) => writer.begin_with("BEGIN IMMEDIATE").await,
            (Backend::Sqlite, None) => self.pool.begin_with("BEGIN IMMEDIATE").await,
            (Backend::Postgres, _) => self.pool.begin().await,
        }
    }

    /// Where a write of one statement outside a transaction goes: on a SQLite file, the writing
    /// connection of [`Db::begin_write`], for the reason given there (on the reading pool such a
    /// write polls for the lock and can starve for the whole `busy_timeout` while this process's
    /// transactions follow one another: a lease renewal that starves loses its lease); the pool
    /// otherwise. Never call it while holding a [`Db::begin_write`] transaction: that would wait
    /// for itself.
    pub fn writes(&self) -> &AnyPool {
        match (self.backend, &self.writer) {
            (Backend::Sqlite, Some(writer)) => writer,
            _ => &self.pool,
        }
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Runs a short read on the calling thread, on SQLite (see the module header); `None` on
    /// PostgreSQL and in-memory SQLite, where the caller uses the pool. It blocks the thread for
    /// as long as the statement runs, so keep it to indexed lookups of a row or two.
    pub fn read_in_place<T>(
        &self,
        read: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T>,
    ) -> Option<Result<T, rusqlite::Error>> {
        let readers = self.in_place.as_ref()?;
        Some(readers.with_connection(read))
    }

    /// Runs a read of any length on a query-only SQLite connection on one of tokio's blocking
    /// threads (see the module header); `None` on PostgreSQL and in-memory SQLite, where the
    /// caller uses the pool. At most [`BLOCKING_READS`] callers hold a turn at once; the rest wait.
    /// (A read whose caller went away runs to its end without a turn, so a burst of cancelled
    /// requests can briefly run a few more.)
    pub async fn read_blocking<T, E>(
        &self,
        read: impl FnOnce(&rusqlite::Connection) -> Result<T, E> + Send + 'static,
    ) -> Option<Result<T, E>>
    where
        T: Send + 'static,
        E: From<rusqlite::Error> + Send + 'static,
    {
        let readers = Arc::clone(self.in_place.as_ref()?);
        // The semaphore is never closed, so acquiring only waits.
        let _turn = readers.blocking.acquire().await.ok()?;
        let reading = Arc::clone(&readers);
        let result = tokio::task::spawn_blocking(move || {
            reading
                .with_connection(|connection| Ok(read(connection)))
                .unwrap_or_else(|error| Err(E::from(error)))
        })
        .await;
        match result {
            Ok(result) => Some(result),
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // Blocking tasks are only cancelled when the runtime shuts down.
            Err(error) => panic!("a blocking read did not run: {error}"),
        }
    }

    /// The batched one-row lookups of [`crate::batched_reads`], on PostgreSQL; `None` on SQLite,
    /// where [`Db::read_in_place`] does that job.
    pub fn batched_reads(&self) -> Option<&BatchedReads> {
        self.batched.as_deref()
    }

    pub async fn close(&self) {
        if let Some(batched) = &self.batched {
            batched.close();
        }
        self.pool.close().await;
    }
}

/// A PostgreSQL connection idle at least this long is pinged before it is handed out.
const PING_AFTER_IDLE: Duration = Duration::from_secs(10);

/// At most this many idle in-place readers are kept: one per thread that reads at the same
/// moment (the runtime's workers and [`BLOCKING_READS`]), with room to spare.
const IN_PLACE_READERS: usize = 8;

/// At most this many [`Db::read_blocking`] reads run at once: beyond the cores there are, more
/// would only take turns on them, and each would hold a connection.
pub const BLOCKING_READS: usize = 4;

/// The query-only SQLite connections of [`Db::read_in_place`] and [`Db::read_blocking`], opened
/// as they are first needed.
#[derive(Debug)]
struct InPlaceReaders {
    path: PathBuf,
    idle: Mutex<Vec<rusqlite::Connection>>,
    /// Turns for [`Db::read_blocking`].
    blocking: tokio::sync::Semaphore,
}

impl InPlaceReaders {
    /// The file behind a SQLite URL, or `None` for an in-memory database (which a second
    /// connection would not see).
    fn for_url(url: &str) -> Option<Self> {
        if is_memory(url) {
            return None;
        }
        let options = SqliteConnectOptions::from_str(url).ok()?;
        Some(Self {
            path: options.get_filename().to_path_buf(),
            idle: Mutex::new(Vec::new()),
            blocking: tokio::sync::Semaphore::new(BLOCKING_READS),
        })
    }

    /// Runs `read` on an idle connection (or a new one), then keeps the connection for the next
    /// read while fewer than [`IN_PLACE_READERS`] are kept.
    fn with_connection<T>(
        &self,
        read: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let connection = match idle {
            Some(connection) => connection,
            None => self.open()?,
        };
        let result = read(&connection);
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < IN_PLACE_READERS {
            idle.push(connection);
        }
        result
    }

    fn open(&self) -> rusqlite::Result<rusqlite::Connection> {
        use rusqlite::OpenFlags;
        // Read-write flags with `query_only`, rather than a read-only open: a read-only
        // connection cannot recover the WAL index if it is the first to open the file.
        let connection = rusqlite::Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        connection.busy_timeout(Duration::from_secs(10))?;
        connection.pragma_update(None, "query_only", true)?;
        Ok(connection)
    }
}

/// Adds `mode=rwc` so a missing SQLite file is created rather than refused.
fn is_memory(url: &str) -> bool {
    url.contains(":memory:") || url.contains("mode=memory")
}

/// A pool of `connections` to a SQLite database, each in WAL mode with a busy timeout.
async fn sqlite_pool(connections: u32, options: AnyConnectOptions) -> Result<AnyPool, sqlx::Error> {
    AnyPoolOptions::new()
        .max_connections(connections)
        .min_connections(1)
        // A local file does not drop connections; the liveness ping sqlx sends before each
        // checkout is a round trip to the connection's thread on every query.
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
        .await
}

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
