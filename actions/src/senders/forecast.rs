//! When a sender may next call the network: the gate's rules in one place.
//!
//! The delivery gate lets a call through only inside the sender's working hours (and the
//! prospect's, when the sequence asks for it), while it is connected and not paused, with room
//! under the limits of its kind, and at least [`GAP_MS`]'s lower bound after its last call. Every
//! time a read shows ("the next send", "the first invitation goes out at", a queued reply's due
//! time) is worked out here from the same rules, so a forecast never names a moment the gate
//! would refuse: a Monday-to-Friday sender's next send is never a Sunday.
//!
//! A forecast is the earliest such moment as things stand; the gate may still place a call later
//! (behind other steps queued for the sender, or with the random part of the gap).

use std::ops::RangeInclusive;

use jiff::tz::TimeZone;
use outreach_runtime::prelude::ApiError;

use super::limits::{self, QuotaKind};
use super::{SenderRow, hours};

/// A sender acts at most once in this many milliseconds (a random gap in this range, measured
/// from its last call, refused or not), so a morning's work goes out spread over the morning,
/// never in a burst.
pub const GAP_MS: RangeInclusive<i64> = 30_000..=90_000;

/// The first instant at or after `after` inside the sender's working hours and, when given,
/// inside the same hours in the prospect's zone; `None` when there is none.
pub fn next_window(
    sender: &SenderRow,
    prospect_zone: Option<&TimeZone>,
    after: i64,
) -> Option<i64> {
    let mut at = after;
    for _ in 0..64 {
        let in_sender = hours::next_window(&sender.tz, &sender.schedule, at)?;
        let Some(zone) = prospect_zone else {
            return Some(in_sender);
        };
        let in_both = hours::next_window(zone, &sender.schedule, in_sender)?;
        if in_both == in_sender {
            return Some(in_sender);
        }
        at = in_both;
    }
    None
}

/// The earliest instant at or after `after` (and `now`) at which the gate would let `sender`
/// make a call of `kind` (of any kind when `None`), as things stand at `now`: after a pause, after
/// the limits of the kind have room again, after the gap since its last call, inside its working
/// hours (and the prospect's). `None` when no time can be promised: the account is not connected
/// or was deleted, a limit of the kind is 0, or it has no working hours.
pub async fn earliest_call(
    conn: &mut sqlx::AnyConnection,
    sender: &SenderRow,
    kind: Option<QuotaKind>,
    prospect_zone: Option<&TimeZone>,
    after: i64,
    now: i64,
) -> Result<Option<i64>, ApiError> {
    let mut at = after.max(now);
    if let Some(refusal) = limits::standing_refusal(sender, now) {
        match refusal.until_ms {
            Some(until) => at = at.max(until),
            None => return Ok(None),
        }
    }
    let usage = limits::usage(conn, sender, now).await?;
    // Per kind, when all of its limits have room again (`None`: never by itself).
    let mut free_at: [(QuotaKind, Option<i64>); 4] = [
        (QuotaKind::ConnectionRequest, Some(now)),
        (QuotaKind::Message, Some(now)),
        (QuotaKind::ProfileView, Some(now)),
        (QuotaKind::Inmail, Some(now)),
    ];
    for (limit_kind, _, limit) in usage.by_kind() {
        if limit.used < i64::from(limit.limit) {
            continue;
        }
        let until = limit.available_again_at.map(|at| at.ms());
        for (k, free) in &mut free_at {
            if *k == limit_kind {
                *free = match (*free, until) {
                    (Some(free), Some(until)) => Some(free.max(until)),
                    _ => None,
                };
            }
        }
    }
    let free = match kind {
        Some(kind) => free_at
            .iter()
            .find(|(k, _)| *k == kind)
            .and_then(|(_, free)| *free),
        None => free_at.iter().filter_map(|(_, free)| *free).min(),
    };
    let Some(free) = free else { return Ok(None) };
    at = at.max(free);
    if let Some(last) = sender.last_action_at {
        at = at.max(last + *GAP_MS.start());
    }
    Ok(next_window(sender, prospect_zone, at))
}
