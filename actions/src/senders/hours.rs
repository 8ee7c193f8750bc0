//! Working hours in the sender's time zone, and the next instant a sender may act.
//!
//! A window is a range of wall-clock times, not a duration: an instant is inside working hours when
//! the clock on the wall in the sender's zone shows a time in `[start, end)` on a weekday that has
//! that window. This one rule decides every DST case without a special branch:
//! - a window 09:00-17:00 on a DST day is still 09:00-17:00 local (so 7 or 9 hours of UTC if it
//!   spans the change, 8 otherwise);
//! - on a spring-forward day a bound inside the gap (02:30 in Europe/Berlin on the last Sunday of
//!   March) never shows on the wall, so the window opens at the first instant after the gap
//!   (03:00), not an hour "later" (03:30, jiff's `compatible`);
//! - on a fall-back day a window over the repeated hour is open through both passes of it.
//!
//! Zones come from jiff's bundled tz database (the `tzdb-bundle-always` feature), so a server and
//! the tests answer alike whatever the machine's tzdata holds. Everything here is pure: no clock,
//! no database, so it is unit-tested across DST changes below.

use jiff::civil::{Date, DateTime, Weekday};
use jiff::tz::{AmbiguousOffset, TimeZone};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use outreach_runtime::prelude::ApiError;

/// The most windows one day may have.
pub const MAX_WINDOWS_PER_DAY: usize = 4;

const MINUTES_PER_DAY: u32 = 24 * 60;
const DAY_MS: i64 = 86_400_000;

/// One working window of a day, in the sender's local time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
// The list field that holds it describes it; a tool shows no line per item.
#[schemars(description = "")]
pub struct Window {
    #[schemars(regex(pattern = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"))]
    pub start: String,
    /// After `start`; `24:00` is midnight.
    #[schemars(regex(pattern = r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$"))]
    pub end: String,
}

/// Working windows per weekday. A day left out, or given an empty list, is not a working day.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkingHours {
    #[serde(default)]
    #[schemars(length(max = 4))]
    pub monday: Vec<Window>,
    #[serde(default)]
    #[schemars(length(max = 4))]
    pub tuesday: Vec<Window>,
    #[serde(default)]
    #[schemars(length(max = 4))]
    pub wednesday: Vec<Window>,
    #[serde(default)]
    #[schemars(length(max = 4))]
    pub thursday: Vec<Window>,
    #[serde(default)]
    #[schemars(length(max = 4))]
    pub friday: Vec<Window>,
    #[serde(default)]
    #[schemars(length(max = 4))]
    pub saturday: Vec<Window>,
    #[serde(default)]
    #[schemars(length(max = 4))]
    pub sunday: Vec<Window>,
}

impl WorkingHours {
    /// Monday to Friday, 09:00 to 17:00: what a sender gets when none are given.
    pub fn office() -> Self {
        let day = || {
            vec![Window {
                start: "09:00".to_owned(),
                end: "17:00".to_owned(),
            }]
        };
        Self {
            monday: day(),
            tuesday: day(),
            wednesday: day(),
            thursday: day(),
            friday: day(),
            saturday: Vec::new(),
            sunday: Vec::new(),
        }
    }

    fn days(&self) -> [(&'static str, &[Window]); 7] {
        [
            ("monday", &self.monday),
            ("tuesday", &self.tuesday),
            ("wednesday", &self.wednesday),
            ("thursday", &self.thursday),
            ("friday", &self.friday),
            ("saturday", &self.saturday),
            ("sunday", &self.sunday),
        ]
    }

    /// Checks every window (400 naming the day and window) and returns the hours with each day's
    /// windows sorted, and the minutes form [`next_send_at`] works on.
    pub fn check(mut self) -> Result<(Self, Schedule), ApiError> {
        let mut schedule = Schedule::default();
        for (index, (day, windows)) in self.days().into_iter().enumerate() {
            if windows.len() > MAX_WINDOWS_PER_DAY {
                return Err(ApiError::invalid_request(format!(
                    "`working_hours.{day}` has {} windows; a day takes at most {MAX_WINDOWS_PER_DAY}.",
                    windows.len()
                )));
            }
            let mut minutes = Vec::with_capacity(windows.len());
            for (position, window) in windows.iter().enumerate() {
                let field = format!("working_hours.{day}[{position}]");
                let start = parse_hhmm(&window.start, &format!("{field}.start"), false)?;
                let end = parse_hhmm(&window.end, &format!("{field}.end"), true)?;
                if end <= start {
                    return Err(ApiError::invalid_request(format!(
                        "`{field}` ends at {} before it starts at {}; `end` must be after `start` on the same day.",
                        window.end, window.start
                    )));
                }
                minutes.push((start, end, position));
            }
            minutes.sort_unstable();
            for pair in minutes.windows(2) {
                let ((start_a, end_a, a), (start_b, _, b)) = (pair[0], pair[1]);
                if start_b < end_a {
                    return Err(ApiError::invalid_request(format!(
                        "`working_hours.{day}` windows {a} ({}-{}) and {b} ({}-{}) overlap; give each time once.",
                        hhmm(start_a),
                        hhmm(end_a),
                        hhmm(start_b),
                        hhmm(pair[1].1),
                    )));
                }
            }
            schedule.days[index] = minutes.iter().map(|&(s, e, _)| (s, e)).collect();
        }
        // Stored sorted, so the API shows each day in time order.
        for (windows, minutes) in [
            &mut self.monday,
            &mut self.tuesday,
            &mut self.wednesday,
            &mut self.thursday,
            &mut self.friday,
            &mut self.saturday,
            &mut self.sunday,
        ]
        .into_iter()
        .zip(&schedule.days)
        {
            *windows = minutes
                .iter()
                .map(|&(start, end)| Window {
                    start: hhmm(start),
                    end: hhmm(end),
                })
                .collect();
        }
        Ok((self, schedule))
    }
}

/// Working hours as minutes of the day, `[start, end)`, sorted, Monday first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schedule {
    days: [Vec<(u32, u32)>; 7],
}

impl Schedule {
    fn windows(&self, weekday: Weekday) -> &[(u32, u32)] {
        &self.days[usize::from(weekday.to_monday_zero_offset().unsigned_abs())]
    }

    fn is_empty(&self) -> bool {
        self.days.iter().all(Vec::is_empty)
    }
}

/// `HH:MM` into minutes of the day; `24:00` only where `end_of_day` allows it.
fn parse_hhmm(text: &str, field: &str, end_of_day: bool) -> Result<u32, ApiError> {
    let bad = || {
        ApiError::invalid_request(format!(
            "`{field}` is `{text}`; give a 24-hour time `HH:MM` such as `09:00`{}.",
            if end_of_day { " (or `24:00`)" } else { "" }
        ))
    };
    let (hours, minutes) = text.split_once(':').ok_or_else(bad)?;
    if hours.len() != 2 || minutes.len() != 2 {
        return Err(bad());
    }
    let hours: u32 = hours.parse().map_err(|_| bad())?;
    let minutes: u32 = minutes.parse().map_err(|_| bad())?;
    let total = hours * 60 + minutes;
    if minutes >= 60 || total > MINUTES_PER_DAY || (total == MINUTES_PER_DAY && !end_of_day) {
        return Err(bad());
    }
    Ok(total)
}

fn hhmm(minutes: u32) -> String {
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

/// The zone of an IANA name from the bundled database, or a 400 naming it.
pub fn zone(name: &str, field: &str) -> Result<TimeZone, ApiError> {
    let name = name.trim();
    TimeZone::get(name).map_err(|_| {
        ApiError::invalid_request(format!(
            "`{field}` is `{name}`, which is not an IANA time zone; give a name such as `Europe/Berlin` or `America/New_York`."
        ))
    })
}

/// The instant of epoch milliseconds `ms` (clamped into jiff's range).
fn instant(ms: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_millisecond(ms).unwrap_or(if ms < 0 {
        jiff::Timestamp::MIN
    } else {
        jiff::Timestamp::MAX
    })
}

/// The local date of `ms` in `tz`, as `YYYY-MM-DD`.
pub fn local_day(tz: &TimeZone, ms: i64) -> String {
    instant(ms).to_zoned(tz.clone()).date().to_string()
}

/// The first instant of the local day after the one holding `ms` (the next local midnight, or the
/// first instant of that day when midnight falls in a gap).
pub fn next_midnight(tz: &TimeZone, ms: i64) -> i64 {
    let date = instant(ms).to_zoned(tz.clone()).date();
    date.tomorrow()
        .ok()
        .and_then(|day| start_of(tz, day))
        .unwrap_or(ms + DAY_MS)
}

/// The first instant of the local day holding `ms`.
pub fn day_start(tz: &TimeZone, ms: i64) -> i64 {
    let date = instant(ms).to_zoned(tz.clone()).date();
    start_of(tz, date).unwrap_or(ms - DAY_MS)
}

fn start_of(tz: &TimeZone, date: Date) -> Option<i64> {
    first_at_or_after(tz, date.to_datetime(jiff::civil::Time::midnight()), None)
}

/// The first instant whose wall-clock time in `tz` is `dt` or, when `dt` falls in a gap, the
/// instant the gap ends; only instants after `after_ms` count on a fall-back day.
fn first_at_or_after(tz: &TimeZone, dt: DateTime, after_ms: Option<i64>) -> Option<i64> {
    let ambiguous = tz.to_ambiguous_timestamp(dt);
    let ms = match ambiguous.offset() {
        AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(dt).ok()?.as_millisecond(),
        AmbiguousOffset::Fold { before, after } => {
            let first = before.to_timestamp(dt).ok()?.as_millisecond();
            let second = after.to_timestamp(dt).ok()?.as_millisecond();
            match after_ms {
                Some(after_ms) if first <= after_ms => second,
                _ => first,
            }
        }
        AmbiguousOffset::Gap { before, .. } => {
            // `dt` read with the offset before the gap lies at or after the transition; the
            // transition itself is the first instant the wall clock shows a later time.
            let past = before.to_timestamp(dt).ok()?;
            let nudged = past
                .checked_add(jiff::SignedDuration::from_millis(1))
                .ok()?;
            tz.preceding(nudged)
                .next()
                .map_or(past, |transition| transition.timestamp())
                .as_millisecond()
        }
    };
    Some(ms)
}

/// The first instant at or after `after_ms` inside the working hours of `schedule` in `tz`, or
/// `None` when the schedule has no window at all. Jitter is the caller's.
pub fn next_window(tz: &TimeZone, schedule: &Schedule, after_ms: i64) -> Option<i64> {
    if schedule.is_empty() {
        return None;
    }
    let mut at = after_ms;
    // Each turn moves `at` forward to a window start or the next day; a week with any window
    // ends the search within a few dozen turns.
    for _ in 0..200 {
        let zoned = instant(at).to_zoned(tz.clone());
        let date = zoned.date();
        let time = zoned.time();
        let second_of_day = u32::from(time.hour().unsigned_abs()) * 3600
            + u32::from(time.minute().unsigned_abs()) * 60
            + u32::from(time.second().unsigned_abs());
        let mut next = None;
        for &(start, end) in schedule.windows(date.weekday()) {
            if second_of_day >= end * 60 {
                continue;
            }
            if second_of_day >= start * 60 {
                return Some(at);
            }
            let start_dt = date.to_datetime(jiff::civil::time(
                i8::try_from(start / 60).ok()?,
                i8::try_from(start % 60).ok()?,
                0,
                0,
            ));
            next = first_at_or_after(tz, start_dt, Some(at)).filter(|&ms| ms > at);
            break;
        }
        at = match next {
            Some(ms) => ms,
            None => {
                // Nothing more on the wall clock today, unless the clock is turned back before
                // midnight (the repeated hour may hold a window again): look there first.
                let tomorrow = next_midnight(tz, at);
                let turn = tz
                    .following(instant(at))
                    .next()
                    .map(|transition| transition.timestamp().as_millisecond())
                    .filter(|&turn| turn > at && turn < tomorrow);
                match turn {
                    Some(turn) => turn,
                    None if tomorrow <= at => at + 60_000,
                    None => tomorrow,
                }
            }
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> i64 {
        text.parse::<jiff::Timestamp>()
            .map(|ts| ts.as_millisecond())
            .unwrap_or_else(|error| panic!("{text}: {error}"))
    }

    fn at(tz: &TimeZone, ms: i64) -> String {
        instant(ms)
            .to_zoned(tz.clone())
            .strftime("%Y-%m-%d %H:%M %Z")
            .to_string()
    }

    fn window(start: &str, end: &str) -> Window {
        Window {
            start: start.to_owned(),
            end: end.to_owned(),
        }
    }

    fn every_day(start: &str, end: &str) -> Schedule {
        let day = vec![window(start, end)];
        WorkingHours {
            monday: day.clone(),
            tuesday: day.clone(),
            wednesday: day.clone(),
            thursday: day.clone(),
            friday: day.clone(),
            saturday: day.clone(),
            sunday: day,
        }
        .check()
        .map(|(_, schedule)| schedule)
        .expect("valid hours")
    }

    fn office() -> Schedule {
        WorkingHours::office().check().expect("valid").1
    }

    #[test]
    fn inside_a_window_is_now_and_before_one_is_its_start() {
        let berlin = zone("Europe/Berlin", "timezone").expect("zone");
        // Tuesday 2026-11-24 10:00 CET is inside 09:00-17:00.
        let inside = ms("2026-11-24T09:00:00Z");
        assert_eq!(next_window(&berlin, &office(), inside), Some(inside));
        // 07:00 local waits for 09:00 local.
        let early = next_window(&berlin, &office(), ms("2026-11-24T06:00:00Z"));
        assert_eq!(
            early.map(|t| at(&berlin, t)).as_deref(),
            Some("2026-11-24 09:00 CET")
        );
        // 17:00 local exactly is outside ([start, end)): the next day's 09:00.
        let closing = next_window(&berlin, &office(), ms("2026-11-24T16:00:00Z"));
        assert_eq!(
            closing.map(|t| at(&berlin, t)).as_deref(),
            Some("2026-11-25 09:00 CET")
        );
    }

    #[test]
    fn friday_evening_waits_for_monday() {
        let berlin = zone("Europe/Berlin", "timezone").expect("zone");
        let friday_evening = ms("2026-11-27T18:00:00Z");
        let next = next_window(&berlin, &office(), friday_evening);
        assert_eq!(
            next.map(|t| at(&berlin, t)).as_deref(),
            Some("2026-11-30 09:00 CET")
        );
    }

    #[test]
    fn windows_keep_local_time_across_both_berlin_changes() {
        let berlin = zone("Europe/Berlin", "timezone").expect("zone");
        let daily = every_day("09:00", "17:00");
        // Saturday 2026-03-28 20:00 CET; Sunday 29 March is the spring-forward day.
        let spring = next_window(&berlin, &daily, ms("2026-03-28T19:00:00Z"));
        assert_eq!(
            spring,
            Some(ms("2026-03-29T07:00:00Z")),
            "09:00 CEST is 07:00 UTC"
        );
        // Saturday 2026-10-24 20:00 CEST; Sunday 25 October falls back.
        let autumn = next_window(&berlin, &daily, ms("2026-10-24T18:00:00Z"));
        assert_eq!(
            autumn,
            Some(ms("2026-10-25T08:00:00Z")),
            "09:00 CET is 08:00 UTC"
        );
    }

    #[test]
    fn a_start_in_the_spring_gap_opens_when_the_gap_ends() {
        let berlin = zone("Europe/Berlin", "timezone").expect("zone");
        let night = every_day("02:30", "05:00");
        // 2026-03-29: clocks jump from 02:00 CET to 03:00 CEST (01:00 UTC); 02:30 never shows.
        let next = next_window(&berlin, &night, ms("2026-03-28T23:00:00Z"));
        assert_eq!(next, Some(ms("2026-03-29T01:00:00Z")));
        assert_eq!(
            next.map(|t| at(&berlin, t)).as_deref(),
            Some("2026-03-29 03:00 CEST")
        );
        // A window wholly inside the gap does not exist that day.
        let lost = every_day("02:10", "02:50");
        let next = next_window(&berlin, &lost, ms("2026-03-28T23:00:00Z"));
        assert_eq!(
            next.map(|t| at(&berlin, t)).as_deref(),
            Some("2026-03-30 02:10 CEST")
        );
    }

    #[test]
    fn the_repeated_autumn_hour_is_open_on_both_passes() {
        let berlin = zone("Europe/Berlin", "timezone").expect("zone");
        let small_hours = every_day("02:15", "02:45");
        // 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00 UTC); 02:15 shows twice.
        let first = next_window(&berlin, &small_hours, ms("2026-10-24T22:00:00Z"));
        assert_eq!(first, Some(ms("2026-10-25T00:15:00Z")), "02:15 CEST");
        // After the first pass's window closed, the second pass opens it again.
        let second = next_window(&berlin, &small_hours, ms("2026-10-25T00:50:00Z"));
        assert_eq!(second, Some(ms("2026-10-25T01:15:00Z")), "02:15 CET");
        let after = next_window(&berlin, &small_hours, ms("2026-10-25T01:50:00Z"));
        assert_eq!(
            after.map(|t| at(&berlin, t)).as_deref(),
            Some("2026-10-26 02:15 CET")
        );
    }

    #[test]
    fn new_york_changes_on_its_own_dates() {
        let new_york = zone("America/New_York", "timezone").expect("zone");
        let daily = every_day("09:00", "17:00");
        // 2026-03-08 is New York's spring-forward Sunday (Berlin changes three weeks later).
        let spring = next_window(&new_york, &daily, ms("2026-03-08T05:00:00Z"));
        assert_eq!(spring, Some(ms("2026-03-08T13:00:00Z")), "09:00 EDT");
        let before = next_window(&new_york, &daily, ms("2026-03-07T05:00:00Z"));
        assert_eq!(before, Some(ms("2026-03-07T14:00:00Z")), "09:00 EST");
        // 2026-11-01 falls back at 02:00, before the window opens: 09:00 EST is 14:00 UTC.
        let autumn = next_window(&new_york, &daily, ms("2026-11-01T05:00:00Z"));
        assert_eq!(autumn, Some(ms("2026-11-01T14:00:00Z")));
    }

    #[test]
    fn several_windows_and_midnight_ends() {
        let utc = zone("UTC", "timezone").expect("zone");
        let hours = WorkingHours {
            monday: vec![window("13:00", "24:00"), window("08:00", "12:00")],
            ..WorkingHours::default()
        };
        let (sorted, schedule) = hours.check().expect("valid");
        assert_eq!(
            sorted.monday,
            vec![window("08:00", "12:00"), window("13:00", "24:00")]
        );
        // Monday 2026-11-23 12:30 waits for 13:00; 23:59 is inside; then next Monday 08:00.
        assert_eq!(
            next_window(&utc, &schedule, ms("2026-11-23T12:30:00Z")),
            Some(ms("2026-11-23T13:00:00Z"))
        );
        let late = ms("2026-11-23T23:59:30Z");
        assert_eq!(next_window(&utc, &schedule, late), Some(late));
        assert_eq!(
            next_window(&utc, &schedule, ms("2026-11-24T00:00:00Z")),
            Some(ms("2026-11-30T08:00:00Z"))
        );
        assert_eq!(next_window(&utc, &Schedule::default(), late), None);
    }

    #[test]
    fn bad_hours_are_named() {
        let check = |hours: WorkingHours| hours.check().err().map(|error| error.message);
        let message = check(WorkingHours {
            tuesday: vec![window("17:00", "09:00")],
            ..WorkingHours::default()
        });
        assert!(message.is_some_and(|m| m.contains("working_hours.tuesday[0]")));
        let message = check(WorkingHours {
            friday: vec![window("09:00", "12:00"), window("11:00", "13:00")],
            ..WorkingHours::default()
        });
        assert!(message.is_some_and(|m| m.contains("overlap")));
        for bad in ["9:00", "25:00", "09:60", "24:00", "nine"] {
            let message = check(WorkingHours {
                monday: vec![window(bad, "23:00")],
                ..WorkingHours::default()
            });
            assert!(
                message.is_some_and(|m| m.contains("working_hours.monday[0].start")),
                "{bad}"
            );
        }
        assert!(
            zone("Mars/Olympus", "timezone").is_err_and(|e| e.message.contains("Mars/Olympus"))
        );
    }

    #[test]
    fn local_days_and_midnights_follow_the_zone() {
        let berlin = zone("Europe/Berlin", "timezone").expect("zone");
        let late = ms("2026-11-24T23:30:00Z");
        assert_eq!(local_day(&berlin, late), "2026-11-25");
        assert_eq!(next_midnight(&berlin, late), ms("2026-11-25T23:00:00Z"));
        assert_eq!(day_start(&berlin, late), ms("2026-11-24T23:00:00Z"));
        // The spring-forward day is 23 hours long.
        let spring = ms("2026-03-29T10:00:00Z");
        assert_eq!(
            next_midnight(&berlin, spring) - day_start(&berlin, spring),
            23 * 3_600_000
        );
    }
}
