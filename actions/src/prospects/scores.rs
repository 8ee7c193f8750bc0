//! The prospects' latest scores: the one statement that writes them, copied from a scoring
//! run's results when the run ends.
//!
//! The results are scoring's table; the columns they are copied to (`score`, `tier`,
//! `targeting_id`, `targeting_version`, `scored_at`) are the prospect's, so the write is here,
//! with the prospects' other verbs, and scoring calls it.

use outreach_runtime::prelude::{ApiError, Backend};
use sqlx::AnyConnection;

/// The statement that copies a run's scores to its prospects: `$1` the run, `$2` and `$3` the
/// targeting's id and version, `$4` the time.
///
/// On SQLite the run's results are read in prospect id order, from an ordered subquery. Joined
/// directly, SQLite's planner read them through the page index, best score first, and so visited
/// the prospects and their score and tier indexes at random: 0.1-0.25 s more of a 1.6-2.1 s run
/// over 100,000 prospects with spread scores (bench/RESULTS.md, issue 13 round 6). The
/// subquery's order makes it take the primary key instead; the scoring suite checks that plan.
/// PostgreSQL joins the results by hash, where an order would only add a sort.
pub fn copy_scores_to_prospects(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => {
            "update prospects set score = r.score, tier = r.tier, targeting_id = $2, targeting_version = $3, \
             scored_at = $4 from (select prospect_id, score, tier from scoring_results where run_id = $1 \
             order by prospect_id) r where r.prospect_id = prospects.id"
        }
        Backend::Postgres => {
            "update prospects set score = r.score, tier = r.tier, targeting_id = $2, targeting_version = $3, \
             scored_at = $4 from scoring_results r where r.run_id = $1 and r.prospect_id = prospects.id"
        }
    }
}

/// Copies a finished run's scores to its prospects, in the caller's transaction (the run locked
/// them in id order as it read them).
pub(crate) async fn copy_from_run(
    conn: &mut AnyConnection,
    run_id: &str,
    (targeting_id, targeting_version): (&str, i64),
    at: i64,
) -> Result<(), ApiError> {
    sqlx::query(copy_scores_to_prospects(Backend::of(conn)))
        .bind(run_id)
        .bind(targeting_id)
        .bind(targeting_version)
        .bind(at)
        .execute(&mut *conn)
        .await?;
    Ok(())
}
