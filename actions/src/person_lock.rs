//! The one lock rule of outreach state, and the type that keeps it.
//!
//! **A transaction that writes a person's outreach state (their enrollments and their history,
//! their approval items, their conversation and its messages, the prospect row itself) first
//! locks every person it will touch, at once and in id order, with [`lock`]; only [`lock`] makes
//! a [`PersonTx`], and the owners' verbs take one, so forgetting the lock does not compile.**
//!
//! The rest follows from that sentence:
//!
//! - Two writers of the same person take turns; writers of different people never meet on a
//!   person's rows. After its people, a transaction may take any of their rows in any order, then
//!   the shared rows that come after people: a sender (its quota and gap), a sequence. The shared
//!   rows a priced or agent transaction takes first (the workspace's balance, an agent run's row)
//!   come before people, and no one takes them after a person.
//! - "Id order" is byte order (`collate "C"` on PostgreSQL), the order Rust sorts ids in, so every
//!   statement that locks prospects agrees with every other (a scoring run's too).
//! - A job holds no row of its own before the domain's: the runtime fences a job's transaction
//!   at commit, as its last statement (`outreach_runtime::jobs`). The step job locks its person
//!   like any other writer and decides under that lock, so a change made before it took the lock
//!   is seen, and a change made after finds the job ended and enqueues a new one.
//! - Rows of people a transaction did not lock are taken only with `skip locked` ([`try_lock`]: a
//!   run queueing its sender's other due steps), never waited for.
//! - A change to a whole sequence's people (stopping it, editing its content, deleting a draft)
//!   locks the people of its live enrollments first ([`lock_of_sequence`]), then the sequence's
//!   row, and then locks anyone enrolled in between, without waiting
//!   ([`PersonTx::confirm_of_sequence`]); enrolling takes the sequence's row, so after it nobody
//!   can be. Activating, pausing and resuming write only the sequence's row, which a step job
//!   reads `for share` as it decides, after its person (`sequences::fetch_row_for_step`).
//! - A deadlock or serialization failure that slips through anyway (a writer of prospect rows
//!   outside this rule: an import's rewrite, a list's normalisation) is retried in place by
//!   dispatch and by the worker.
//!
//! What the type proves is that the transaction took people's locks; which people, the callers
//! say (each locks the people it then names), and `conversations::conversation_for` checks.
//!
//! On PostgreSQL the lock is the prospect's row, taken `for no key update`: two writers of one
//! person take turns, while rows that merely reference a prospect (a message, an enrollment) can
//! still be inserted beside it. On SQLite it takes nothing: the write transaction holds the whole
//! database. The type is the same on both, so the rule is checked on both.

use std::ops::{Deref, DerefMut};

use outreach_runtime::prelude::{ApiError, Backend};
use sqlx::AnyConnection;

/// A transaction that holds the locks of some people ([`lock`]). It derefs to the connection,
/// so reads and other tables' writes go through it as through any transaction.
pub struct PersonTx<'c> {
    conn: &'c mut AnyConnection,
    people: Vec<String>,
}

impl PersonTx<'_> {
    /// Whether this transaction locked `prospect_id`.
    pub fn holds(&self, prospect_id: &str) -> bool {
        self.people
            .binary_search_by(|held| held.as_str().cmp(prospect_id))
            .is_ok()
    }

    /// The people it locked, in id order.
    pub fn people(&self) -> &[String] {
        &self.people
    }
}

impl Deref for PersonTx<'_> {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        self.conn
    }
}

impl DerefMut for PersonTx<'_> {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        self.conn
    }
}

/// Locks `people` (prospect ids of the workspace) in the caller's transaction, all in one
/// statement in id order, and hands back the transaction as a [`PersonTx`]. Ids that name no
/// prospect (deleted meanwhile) lock nothing; the verbs that follow find their rows gone.
pub async fn lock<'c, 'p>(
    conn: &'c mut AnyConnection,
    workspace_id: &str,
    people: impl IntoIterator<Item = &'p str>,
) -> Result<PersonTx<'c>, ApiError> {
    let people = sorted(people);
    take(conn, workspace_id, &people, "").await?;
    Ok(PersonTx { conn, people })
}

/// Locks those of `people` that no other transaction holds, without waiting for the others
/// (`skip locked`), and hands back the transaction as a [`PersonTx`] holding only them: for a
/// transaction that already holds its own people and touches others' rows on the side (a run
/// queueing its sender's other due steps), which must never wait for a person. On SQLite every
/// one is held.
pub async fn try_lock<'c, 'p>(
    conn: &'c mut AnyConnection,
    workspace_id: &str,
    people: impl IntoIterator<Item = &'p str>,
) -> Result<PersonTx<'c>, ApiError> {
    let mut people = sorted(people);
    if let Some(mut held) = take(conn, workspace_id, &people, " skip locked").await? {
        held.sort_unstable();
        people = held;
    }
    Ok(PersonTx { conn, people })
}

/// Ids in byte order, once each.
fn sorted<'p>(people: impl IntoIterator<Item = &'p str>) -> Vec<String> {
    let mut people: Vec<String> = people.into_iter().map(str::to_owned).collect();
    people.sort_unstable();
    people.dedup();
    people
}

/// The lock itself, on PostgreSQL (`None` on SQLite, or for nobody): the people's prospect rows
/// in byte order, `for no key update` with `then` after it; answers the ids it locked.
async fn take(
    conn: &mut AnyConnection,
    workspace_id: &str,
    people: &[String],
    then: &str,
) -> Result<Option<Vec<String>>, ApiError> {
    if people.is_empty() || Backend::of(conn) != Backend::Postgres {
        return Ok(None);
    }
    // Prospect ids are base62: a comma list is one bind however many people there are.
    let locked = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "select id from prospects where workspace_id = $1 \
         and id = any(string_to_array($2, ',')) order by id collate \"C\" for no key update{then}"
    )))
    .bind(workspace_id)
    .bind(people.join(","))
    .fetch_all(&mut *conn)
    .await?;
    Ok(Some(locked))
}

/// The people (`prs_...`) of a sequence's live enrollments.
async fn people_of_sequence(
    conn: &mut AnyConnection,
    workspace_id: &str,
    sequence_id: &str,
) -> Result<Vec<String>, ApiError> {
    Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "select distinct prospect_id from enrollments where workspace_id = $1 and sequence_id = $2 \
         and status in {}",
        crate::step_jobs::LIVE_SQL
    )))
    .bind(workspace_id)
    .bind(sequence_id)
    .fetch_all(&mut *conn)
    .await?)
}

impl PersonTx<'_> {
    /// Checks, once a change to a whole sequence holds the sequence's row, that it holds every
    /// person of the sequence's live enrollments ([`lock_of_sequence`] read them before it held
    /// the row, and someone may have been enrolled between the two). A newcomer is locked now if
    /// no one holds them (`skip locked`: whoever enrolled them has committed, since enrolling
    /// takes the sequence's row too, so they are normally free); one another transaction holds
    /// makes the call a transient conflict, which dispatch runs again in place, without waiting
    /// for a person while holding the sequence.
    pub async fn confirm_of_sequence(
        &mut self,
        workspace_id: &str,
        sequence_id: &str,
    ) -> Result<(), ApiError> {
        let people = people_of_sequence(self.conn, workspace_id, sequence_id).await?;
        let missing: Vec<String> = people
            .into_iter()
            .filter(|person| !self.holds(person))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let taken = take(self.conn, workspace_id, &missing, " skip locked")
            .await?
            .unwrap_or_else(|| missing.clone());
        if let Some(held) = missing.iter().find(|person| !taken.contains(person)) {
            return Err(ApiError::contention(format!(
                "`{held}` was enrolled in sequence `{sequence_id}` while this call changed it, and \
                 another call holds them"
            )));
        }
        self.people.extend(missing);
        self.people.sort_unstable();
        Ok(())
    }
}

/// Locks the people of a sequence's live enrollments ([`lock`]), as a change to the whole
/// sequence must before it locks the sequence's row; once it holds the row, it calls
/// [`PersonTx::confirm_of_sequence`].
pub async fn lock_of_sequence<'c>(
    conn: &'c mut AnyConnection,
    workspace_id: &str,
    sequence_id: &str,
) -> Result<PersonTx<'c>, ApiError> {
    let people = people_of_sequence(conn, workspace_id, sequence_id).await?;
    lock(conn, workspace_id, people.iter().map(String::as_str)).await
}
