//! One-row lookups by key on PostgreSQL, batched, on connections of their own.
//!
//! Every request reads its credential afresh, and on PostgreSQL that read went through sqlx's
//! pool, which pings each connection when it goes back (`PoolConnection::return_to_pool` in
//! sqlx-core 0.9 sends a Sync and waits for the answer, whatever the pool's options): two round
//! trips to the server per request where one is needed. On two cores a second round trip costs
//! about a fifth of what a request can do.
//!
//! So the one read every request makes runs here instead. A few lanes (tasks) each own one
//! connection that never returns to a pool, so nothing pings it. A lookup is sent to a lane
//! (round robin); the lane takes every lookup waiting for it, runs one statement per distinct
//! query for all their keys (`... = any($1)`), and answers each lookup with its row. A request
//! still reads after it arrived: a batch only gathers lookups that were already waiting when its
//! statement was sent, so nothing is cached and a revoked key fails on its next call.
//!
//! Because the lane owns the connection, a request that goes away mid-read leaves no connection
//! half-read: the lane finishes the statement and drops the answer. A connection that fails (an
//! I/O error, or the server ending the session, not a statement refused) is closed and opened
//! again; a statement that failed so on a connection kept from earlier is tried once more on a
//! new one, since the server may have restarted while it sat idle. Opening a connection and
//! running a statement each give up after 30 seconds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgRow};
use sqlx::{Connection as _, Row as _};
use tokio::sync::{mpsc, oneshot, watch};

/// Lanes, each with one connection. Two cores are kept busy by two, and each batches what
/// queued while its last statement ran; more would only add connections.
const LANES: usize = 2;

/// At most this many lookups in one statement.
const MAX_BATCH: usize = 256;

/// A statement that takes longer than this is given up and its connection closed: a lookup by
/// an indexed key answers in milliseconds, so this only catches a connection that went silent.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// Opening a lane's connection is given up after this long (the pool's checkout waits as long).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The column every batched statement adds last: the key its row answers.
pub const KEY_COLUMN: &str = "lookup_key";

/// Hands lookups to the lanes. Cheap to share; the lanes end when it is closed, or dropped (their
/// inboxes close).
#[derive(Debug)]
pub struct BatchedReads {
    lanes: Vec<mpsc::UnboundedSender<Lookup>>,
    next: AtomicUsize,
    closed: watch::Sender<bool>,
}

/// What a lane does with a lookup's row (or its absence) or the error its statement met.
type Answer = Box<dyn FnOnce(Result<Option<&PgRow>, &sqlx::Error>) + Send>;

/// One waiting lookup: its statement (with its parameters after `$1`), its key, and what to do
/// with the row found (or not) or the error met.
struct Lookup {
    sql: &'static str,
    params_after_keys: Vec<String>,
    key: String,
    answer: Answer,
}

impl BatchedReads {
    /// Starts the lanes; each connects on its first lookup. Call from inside a tokio runtime.
    pub fn start(options: &PgConnectOptions) -> Self {
        let (closed, watching) = watch::channel(false);
        let lanes = (0..LANES)
            .map(|_| {
                let (lane, inbox) = mpsc::unbounded_channel();
                tokio::spawn(run_lane(options.clone(), inbox, watching.clone()));
                lane
            })
            .collect();
        Self {
            lanes,
            next: AtomicUsize::new(0),
            closed,
        }
    }

    /// Reads the row of `sql` whose [`KEY_COLUMN`] is `key`, decoded by `decode`. `sql` takes
    /// the keys as `$1` (a `text[]`, as in `where t.hash = any($1)`) and `params_after_keys` as
    /// `$2` onwards, and selects [`KEY_COLUMN`] last.
    pub async fn read<T: Send + 'static>(
        &self,
        sql: &'static str,
        params_after_keys: Vec<String>,
        key: String,
        decode: fn(&PgRow) -> Result<T, sqlx::Error>,
    ) -> Result<Option<T>, sqlx::Error> {
        let (sender, receiver) = oneshot::channel();
        let answer: Answer = Box::new(move |row: Result<Option<&PgRow>, &sqlx::Error>| {
            let decoded = match row {
                Ok(Some(row)) => decode(row).map(Some),
                Ok(None) => Ok(None),
                Err(error) => Err(sqlx::Error::Protocol(format!("batched read: {error}"))),
            };
            // The caller may have gone away; its answer is dropped.
            let _ = sender.send(decoded);
        });
        let lane = self.next.fetch_add(1, Ordering::Relaxed) % self.lanes.len();
        let lookup = Lookup {
            sql,
            params_after_keys,
            key,
            answer,
        };
        if self.lanes[lane].send(lookup).is_err() {
            return Err(sqlx::Error::PoolClosed);
        }
        receiver.await.unwrap_or(Err(sqlx::Error::PoolClosed))
    }

    /// Ends the lanes: each closes its connection once the statement it runs has answered.
    pub fn close(&self) {
        self.closed.send_replace(true);
    }
}

/// One lane: waits for lookups, and answers every one waiting with as few statements as there
/// are distinct queries among them.
async fn run_lane(
    options: PgConnectOptions,
    mut inbox: mpsc::UnboundedReceiver<Lookup>,
    mut closed: watch::Receiver<bool>,
) {
    let mut connection: Option<PgConnection> = None;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        tokio::select! {
            received = inbox.recv_many(&mut batch, MAX_BATCH) => {
                if received == 0 {
                    break;
                }
            }
            _ = closed.wait_for(|closed| *closed) => break,
        }
        while let Some(first) = batch.first() {
            let (sql, params) = (first.sql, first.params_after_keys.clone());
            let (group, rest): (Vec<Lookup>, Vec<Lookup>) = batch
                .drain(..)
                .partition(|lookup| lookup.sql == sql && lookup.params_after_keys == params);
            batch = rest;
            answer_group(&mut connection, &options, sql, &params, group).await;
        }
    }
    if let Some(connection) = connection {
        let _ = connection.close().await;
    }
}

/// Runs one statement for `group`'s keys and answers each lookup with its row.
async fn answer_group(
    connection: &mut Option<PgConnection>,
    options: &PgConnectOptions,
    sql: &'static str,
    params_after_keys: &[String],
    group: Vec<Lookup>,
) {
    let keys: Vec<String> = group.iter().map(|lookup| lookup.key.clone()).collect();
    match fetch(connection, options, sql, params_after_keys, &keys).await {
        Ok(rows) => {
            let mut by_key: HashMap<String, PgRow> = HashMap::with_capacity(rows.len());
            for row in rows {
                match row.try_get::<String, _>(KEY_COLUMN) {
                    Ok(key) => {
                        by_key.insert(key, row);
                    }
                    Err(error) => {
                        for lookup in group {
                            (lookup.answer)(Err(&error));
                        }
                        return;
                    }
                }
            }
            for lookup in group {
                (lookup.answer)(Ok(by_key.get(&lookup.key)));
            }
        }
        Err(error) => {
            for lookup in group {
                (lookup.answer)(Err(&error));
            }
        }
    }
}

/// The rows of `sql` for `keys`, on the lane's connection (opened if there is none). A failed
/// connection is closed; a statement that failed on a connection kept from earlier is tried once
/// more on a new one, unless it failed by taking too long (a silent server is not asked twice).
async fn fetch(
    connection: &mut Option<PgConnection>,
    options: &PgConnectOptions,
    sql: &'static str,
    params_after_keys: &[String],
    keys: &[String],
) -> Result<Vec<PgRow>, sqlx::Error> {
    let had_connection = connection.is_some();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let open = match connection {
            Some(open) => open,
            None => {
                let opened =
                    tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(options))
                        .await
                        .map_err(|_| timed_out("opening a connection took too long"))??;
                connection.insert(opened)
            }
        };
        let mut query = sqlx::query(sql).bind(keys);
        for value in params_after_keys {
            query = query.bind(value);
        }
        let (failure, may_retry) =
            match tokio::time::timeout(STATEMENT_TIMEOUT, query.fetch_all(open)).await {
                Ok(Ok(rows)) => return Ok(rows),
                // The server refused the statement: the connection itself is fine.
                Ok(Err(error)) if !connection_lost(&error) => return Err(error),
                Ok(Err(error)) => (error, true),
                Err(_) => (timed_out("the statement did not answer in time"), false),
            };
        *connection = None;
        if !(had_connection && attempt == 1 && may_retry) {
            return Err(failure);
        }
    }
}

/// Whether `error` means the connection is gone: an I/O or protocol failure, or the server ending
/// the session (SQLSTATE class 08, connection exception, or 57P, such as an administrator's
/// shutdown or `idle_session_timeout`), which sqlx reports as a database error.
fn connection_lost(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(error) => error
            .code()
            .is_some_and(|code| code.starts_with("08") || code.starts_with("57P")),
        _ => true,
    }
}

fn timed_out(what: &str) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        what.to_owned(),
    ))
}
