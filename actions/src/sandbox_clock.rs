//! The shared test clock's two test helpers: `get_clock` reads it, and `advance_clock` plays an
//! interval out, as a Stripe test clock does.
//!
//! Moving the clock alone would let each job that fell due inside the interval run once, at its
//! end: a week's jump gave each sender one action. So [`play_out`] moves the clock from one moment
//! something falls due to the next (a job's `run_at`, a sandbox person's acceptance or reply),
//! runs there what is due ([`worker::drain`], the job worker's own loop) and hands over the
//! sandbox's events, until the interval's end. Every step, acceptance, reply and delivery thus
//! happens at its own simulated time, in order, with the gate (working hours, gaps, limits)
//! applied at that time, because the gate is what set the job's `run_at`.
//!
//! The periodic pollers (`network_poll`, `unipile_sync`) are no stops of their own: they would
//! make one every few minutes, and the sandbox's events are stops already. They still run at
//! every stop where they are due.
//!
//! The call answers once the interval is played out: a month of one sender's outreach is a few
//! hundred stops, each a few milliseconds. Other instances' workers may run jobs meanwhile; a
//! stop waits (up to 30 s) for the jobs running under a living lease to end before the clock
//! moves on, so they see their own time (a worker that claims a job in the instant between that
//! wait and the move runs it a stop late; a job of a dead process is not waited for).

use std::time::Duration;

use outreach_runtime::prelude::{
    ApiError, Clock, Config, Ctx, Db, JobArgs, Timestamp, action, jobs, test_clock, worker,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::delivery::inbound::deliver_due;
use crate::delivery::unipile::SyncJob;
use crate::network::sandbox::Sandbox;
use crate::network::{Network, network_for};
use crate::senders::PollJob;

/// The most `advance_clock` moves at once: a year.
pub const MAX_ADVANCE_SECONDS: i64 = 366 * 24 * 3600;

/// The jobs that run every few minutes whatever happens: not stops of their own.
const PERIODIC_KINDS: [&str; 2] = [PollJob::KIND, SyncJob::KIND];

/// How many rounds of due work one stop runs at most: a job that keeps falling due at the same
/// moment cannot hold the clock still for ever.
const ROUNDS_PER_STOP: usize = 200;

/// How long a stop waits for jobs that other workers are running to end.
const RUNNING_WAIT: Duration = Duration::from_secs(30);

/// The input of `advance_clock`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AdvanceClockInput {
    #[schemars(range(min = 1, max = 31_622_400))]
    pub seconds: i64,
}

/// The service's time after `advance_clock`, and what the interval held.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ClockNow {
    /// The new time, which every instance on the database now shows.
    pub now: Timestamp,
    /// The time when the call started: the interval played out runs from here to `now`.
    pub started_at: Timestamp,
    /// Sandbox events that fell due and were delivered for this workspace (acceptances, replies).
    pub delivered_events: u64,
}

/// What a played-out interval held.
#[derive(Debug, Default)]
pub struct PlayedOut {
    pub from_ms: i64,
    pub now_ms: i64,
    pub stops: u64,
    pub jobs_run: u64,
    /// Events delivered for the workspace the play-out was asked for.
    pub delivered_events: u64,
}

/// Moves the shared test clock by `seconds` (checked) without playing the interval out, and
/// answers the new time: for `outreach admin sandbox advance-clock`, whose server's own workers
/// then run what is due at the new time.
pub async fn advance(db: &Db, clock: &Clock, seconds: i64) -> Result<i64, ApiError> {
    check_seconds(seconds)?;
    test_clock::advance(db, clock, seconds * 1000).await
}

fn check_seconds(seconds: i64) -> Result<(), ApiError> {
    if (1..=MAX_ADVANCE_SECONDS).contains(&seconds) {
        return Ok(());
    }
    Err(ApiError::invalid_request(format!(
        "`seconds` must be between 1 and {MAX_ADVANCE_SECONDS} (a year); the clock only moves forward."
    )))
}

/// Plays out `seconds` of the shared test clock (see the module header): moves it from one due
/// moment to the next up to `now + seconds`, running at each what is due there. `workspace_id`
/// is the caller's, whose delivered events are counted; every workspace's work is played out,
/// since the clock is the database's.
pub async fn play_out(
    db: &Db,
    clock: &Clock,
    config: std::sync::Arc<Config>,
    workspace_id: &str,
    seconds: i64,
) -> Result<PlayedOut, ApiError> {
    check_seconds(seconds)?;
    // One play-out at a time on the database: concurrent calls each move the clock by their own
    // amount, one after the other, and no two interleave their stops.
    let lease = test_clock::hold_play(db, clock).await?;
    let played = play_out_held(db, clock, config, workspace_id, seconds).await;
    if let Err(error) = lease.release().await {
        // The lease lapses on its own within seconds; what was played stands.
        tracing::warn!(error = %error.message, "could not release the test clock's play lease");
    }
    played
}

async fn play_out_held(
    db: &Db,
    clock: &Clock,
    config: std::sync::Arc<Config>,
    workspace_id: &str,
    seconds: i64,
) -> Result<PlayedOut, ApiError> {
    let start_offset_ms = test_clock::offset_ms(db, clock).await?;
    let from_ms = clock.now_ms();
    let end_ms = from_ms + seconds * 1000;
    let network = network_for(&config, db, clock).ok();
    let mut played = PlayedOut {
        from_ms,
        ..PlayedOut::default()
    };
    // What is already due runs now, before the clock moves past it.
    run_due(
        db,
        clock,
        &config,
        network.as_ref(),
        workspace_id,
        &mut played,
    )
    .await?;
    loop {
        let next = next_stop(db, clock.now_ms()).await?;
        let last = next.is_none_or(|at| at >= end_ms);
        if last {
            // The end is an amount of offset, not a time: the real time the play-out took is
            // not taken from the amount asked for.
            test_clock::raise_offset_to(db, clock, start_offset_ms + seconds * 1000).await?;
        } else if let Some(at) = next {
            test_clock::advance_to(db, clock, at).await?;
        }
        played.stops += 1;
        run_due(
            db,
            clock,
            &config,
            network.as_ref(),
            workspace_id,
            &mut played,
        )
        .await?;
        if last {
            break;
        }
    }
    played.now_ms = clock.now_ms();
    Ok(played)
}

/// The next moment after `now_ms` something falls due: a waiting job (but the pollers) or a
/// sandbox person's acceptance or reply, in any workspace.
async fn next_stop(db: &Db, now_ms: i64) -> Result<Option<i64>, ApiError> {
    let job = jobs::next_due_after(db, now_ms, &PERIODIC_KINDS).await?;
    let event = Sandbox::next_due_after(db, now_ms).await?;
    Ok([job, event].into_iter().flatten().min())
}

/// Runs what is due now until nothing is: the jobs, then the sandbox's events (which may enqueue
/// jobs due at once, an accepted invitation's next step), after waiting for jobs other workers
/// run.
async fn run_due(
    db: &Db,
    clock: &Clock,
    config: &std::sync::Arc<Config>,
    network: Option<&Network>,
    workspace_id: &str,
    played: &mut PlayedOut,
) -> Result<(), ApiError> {
    for round in 0..ROUNDS_PER_STOP {
        let ran = worker::drain(db, clock, config.clone()).await;
        played.jobs_run += ran.len() as u64;
        let mut delivered = 0;
        if let Some(network) = network {
            for workspace in Sandbox::workspaces_due(db, clock.now_ms()).await? {
                let count = deliver_due(network, db, clock, &workspace).await?;
                if workspace == workspace_id {
                    played.delivered_events += count;
                }
                delivered += count;
            }
        }
        if ran.is_empty() && delivered == 0 {
            // Nothing left here: the jobs other workers run end before the clock moves on,
            // and what they leave due runs in another round.
            wait_for_running(db).await?;
            if round + 1 == ROUNDS_PER_STOP || !jobs::any_due(db, clock.now_ms()).await? {
                break;
            }
        }
    }
    Ok(())
}

/// Waits (a bounded time) until no job is running on any instance.
async fn wait_for_running(db: &Db) -> Result<(), ApiError> {
    let started = std::time::Instant::now();
    while jobs::running_count(db).await? > 0 && started.elapsed() < RUNNING_WAIT {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// Move the test clock forward, playing out everything the interval holds.
///
/// Every step, acceptance, reply and delivery due inside the interval happens at its own simulated
/// time, in order. Needs `outreach serve --test-clock`, else a 409 `invalid_state`.
///
/// Test helper (outside production only), like a Stripe test clock: working hours, gaps and limits
/// apply at each moment, and the call answers when the interval is played out (a month takes
/// seconds). Moves the clock of every instance on the database.
#[action(
    scope = "write",
    idempotent,
    test_helper,
    http = "POST /sandbox/clock/advance"
)]
pub async fn advance_clock(ctx: Ctx, input: AdvanceClockInput) -> Result<ClockNow, ApiError> {
    let played = play_out(
        ctx.db(),
        ctx.clock(),
        ctx.config_handle(),
        ctx.workspace_id(),
        input.seconds,
    )
    .await?;
    tracing::info!(
        stops = played.stops,
        jobs_run = played.jobs_run,
        "advance_clock played out its interval"
    );
    Ok(ClockNow {
        now: Timestamp(played.now_ms),
        started_at: Timestamp(played.from_ms),
        delivered_events: played.delivered_events,
    })
}

outreach_runtime::prelude::example!(advance_clock,
    request: {"seconds": 86400},
    response: {"delivered_events": 2, "now": "2026-11-24T18:22:30.065Z", "started_at": "2026-11-23T18:22:30.010Z"}
);

outreach_runtime::prelude::parity!(advance_clock, write,
    ok: {"seconds": 1},
    fails: {"seconds": 0} => INVALID_REQUEST
);

/// The input of `get_clock`: nothing.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetClockInput {}

/// The service's time, as every instance on the database shows it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ClockReading {
    /// The service's time now.
    pub now: Timestamp,
    /// Whether the clock can be moved (`outreach serve --test-clock`).
    pub test_clock: bool,
    /// How far the test clock is ahead of the system's, in seconds (0 without a test clock).
    pub ahead_seconds: i64,
}

/// Read the test clock.
///
/// The service's time (which `advance_clock` moves), whether a test clock runs, and how far ahead
/// of real time it is.
///
/// Test helper (outside production only). Reading it does not move it.
#[action(scope = "read", test_helper, http = "GET /sandbox/clock")]
pub async fn get_clock(ctx: Ctx, _input: GetClockInput) -> Result<ClockReading, ApiError> {
    let clock = ctx.clock();
    clock.sync(ctx.db()).await?;
    Ok(ClockReading {
        now: Timestamp(clock.now_ms()),
        test_clock: clock.is_shared(),
        ahead_seconds: clock.shared_offset_ms().max(0) / 1000,
    })
}

outreach_runtime::prelude::example!(get_clock,
    request: {},
    response: {"ahead_seconds": 2592000, "now": "2026-12-24T18:22:30.065Z", "test_clock": true}
);

outreach_runtime::prelude::parity!(get_clock, timed_read,
    ok: {},
    fails: {"seconds": 1} => INVALID_REQUEST
);
