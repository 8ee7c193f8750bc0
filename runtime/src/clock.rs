//! Time, behind a handle tests can move.
//!
//! Every time-dependent rule (key expiry, last-used throttling, idempotency windows, token
//! lifetimes) reads [`Clock::now_ms`] rather than the system clock, so a test can jump a day ahead
//! without sleeping. Times are integer milliseconds since the Unix epoch in storage and RFC 3339
//! UTC strings on the wire.
//!
//! A clock made with [`Clock::shared`] (`outreach serve --test-clock`) also carries an offset
//! stored in the database, so every instance on one database shows the same time; the
//! `test_clock` module reads and moves that stored offset. The in-process offset of
//! [`Clock::advance_ms`] stays separate, so tests that move one server's clock keep working.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The system clock plus an offset that only tests change.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
    /// The offset last read from the database, in a shared test clock; 0 otherwise.
    shared_offset_ms: Arc<AtomicI64>,
    shared: bool,
}

impl Clock {
    /// A shared test clock: the system clock plus the offset stored in the database, which
    /// `test_clock::advance` moves and [`Clock::sync`](crate::clock::Clock) re-reads.
    pub fn shared() -> Self {
        Self {
            shared: true,
            ..Self::default()
        }
    }

    /// Whether this is a shared test clock (`outreach serve --test-clock`).
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// Takes the offset read from the database (a shared test clock only; ignored otherwise).
    /// The stored offset only grows, so the larger of what this clock holds and what it is given
    /// is kept: requests that read the row at once may set what they read in any order, and one
    /// that read it before a move must not take this clock back in time (a gate that let a call
    /// through at the later time would see the sender's last call noted at an earlier one).
    pub fn set_shared_offset_ms(&self, ms: i64) {
        if self.shared {
            self.shared_offset_ms.fetch_max(ms, Ordering::Relaxed);
        }
    }

    pub fn now_ms(&self) -> i64 {
        let system = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        system
            + self.offset_ms.load(Ordering::Relaxed)
            + self.shared_offset_ms.load(Ordering::Relaxed)
    }

    /// This clock's time without the offset read from the database: what a shared test clock
    /// adds that offset to.
    pub fn unshared_now_ms(&self) -> i64 {
        self.now_ms() - self.shared_offset_ms()
    }

    /// The offset last read from the database (a shared test clock; 0 otherwise).
    pub fn shared_offset_ms(&self) -> i64 {
        self.shared_offset_ms.load(Ordering::Relaxed)
    }

    /// A clock that reads `ms` now and runs on from there: for a writer handed a time rather
    /// than a clock (an event's, say) that must hand a clock on.
    pub fn starting_at(ms: i64) -> Self {
        let clock = Self::default();
        clock.advance_ms(ms - clock.now_ms());
        clock
    }

    /// Moves this clock (and every clone of it) forward by `ms`.
    pub fn advance_ms(&self, ms: i64) {
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
    }
}

/// Formats epoch milliseconds as RFC 3339 UTC with millisecond precision.
pub fn rfc3339(ms: i64) -> String {
    let mut buffer = [0; RFC3339_LEN];
    match rfc3339_digits(ms, &mut buffer) {
        Some(text) => text.to_owned(),
        None => rfc3339_formatted(ms),
    }
}

/// `2025-01-31T09:30:00.000Z`
const RFC3339_LEN: usize = 24;

/// [`rfc3339`] written into `buffer`, for the years 0 to 9999 (`None` outside them): `time`
/// works out the calendar, and the fixed-width digits are written here rather than through a
/// format description, which interprets the description for every timestamp (a page of 200
/// prospects writes 400 of them).
fn rfc3339_digits(ms: i64, buffer: &mut [u8; RFC3339_LEN]) -> Option<&str> {
    let time = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()?;
    let year = u32::try_from(time.year())
        .ok()
        .filter(|year| *year <= 9999)?;
    let mut put = |at: usize, value: u32, width: usize| {
        let mut value = value;
        for index in (at..at + width).rev() {
            buffer[index] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, year, 4);
    put(5, u32::from(u8::from(time.month())), 2);
    put(8, u32::from(time.day()), 2);
    put(11, u32::from(time.hour()), 2);
    put(14, u32::from(time.minute()), 2);
    put(17, u32::from(time.second()), 2);
    put(20, u32::from(time.millisecond()), 3);
    for (at, separator) in [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (23, b'Z'),
    ] {
        buffer[at] = separator;
    }
    std::str::from_utf8(buffer).ok()
}

/// [`rfc3339`] through `time`'s formatting, for any year it can represent.
fn rfc3339_formatted(ms: i64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    let time =
        OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    time.format(&format).unwrap_or_default()
}

/// Parses an RFC 3339 timestamp into epoch milliseconds.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let time = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    i64::try_from(time.unix_timestamp_nanos() / 1_000_000).ok()
}

/// A point in time as the API shows it: stored as epoch milliseconds, sent as RFC 3339 UTC with
/// milliseconds ([`rfc3339`]), and described as `{"type": "string", "format": "date-time"}` so
/// generated clients get a date type rather than a bare string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn ms(self) -> i64 {
        self.0
    }
}

impl From<i64> for Timestamp {
    fn from(ms: i64) -> Self {
        Self(ms)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&rfc3339(self.0))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut buffer = [0; RFC3339_LEN];
        match rfc3339_digits(self.0, &mut buffer) {
            Some(text) => serializer.serialize_str(text),
            None => serializer.serialize_str(&rfc3339_formatted(self.0)),
        }
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_rfc3339(&text).map(Self).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "`{text}` is not an RFC 3339 time such as `2025-01-31T09:30:00Z`"
            ))
        })
    }
}

impl JsonSchema for Timestamp {
    fn schema_name() -> Cow<'static, str> {
        "Timestamp".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "format": "date-time"})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digits written by hand are the ones `time`'s format description writes, across the
    /// calendar's corners; outside the four-digit years the format description is used.
    #[test]
    fn written_digits_match_the_format_description() {
        let day = 86_400_000_i64;
        let mut samples = vec![
            0,
            1,
            999,
            1_000,
            -1,
            -day,
            951_782_400_000,     // 2000-02-29
            4_107_542_399_999,   // 2100-02-28T23:59:59.999
            253_402_300_799_999, // 9999-12-31T23:59:59.999
            -62_167_219_200_000, // 0000-01-01
        ];
        let mut ms = -62_167_219_200_000_i64;
        while ms < 253_402_300_799_999 {
            samples.push(ms);
            // About 114 days and some hours, minutes, seconds and milliseconds at a time.
            ms += 9_876_543_211;
        }
        for ms in samples {
            let mut buffer = [0; RFC3339_LEN];
            assert_eq!(
                rfc3339_digits(ms, &mut buffer),
                Some(rfc3339_formatted(ms).as_str()),
                "{ms}"
            );
        }
        // Past 9999 and before year 0: no digits by hand.
        let mut buffer = [0; RFC3339_LEN];
        assert_eq!(rfc3339_digits(253_402_300_800_000, &mut buffer), None);
        assert_eq!(rfc3339_digits(-62_167_219_200_001, &mut buffer), None);
        assert_eq!(
            rfc3339(-62_167_219_200_001),
            rfc3339_formatted(-62_167_219_200_001)
        );
    }

    #[test]
    fn formats_and_parses_round_trip() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(
            parse_rfc3339("2023-11-14T22:13:20.123Z"),
            Some(1_700_000_000_123)
        );
        assert_eq!(
            parse_rfc3339("2023-11-14T23:13:20.123+01:00"),
            Some(1_700_000_000_123)
        );
        assert_eq!(parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn timestamps_travel_as_rfc3339() {
        let time = Timestamp(1_700_000_000_123);
        let json = serde_json::to_value(time).ok();
        assert_eq!(json, Some(serde_json::json!("2023-11-14T22:13:20.123Z")));
        let back: Option<Timestamp> = json.and_then(|json| serde_json::from_value(json).ok());
        assert_eq!(back, Some(time));
        assert!(serde_json::from_value::<Timestamp>(serde_json::json!("soon")).is_err());
    }

    #[test]
    fn advancing_moves_every_clone() {
        let clock = Clock::default();
        let other = clock.clone();
        let before = other.now_ms();
        clock.advance_ms(86_400_000);
        assert!(other.now_ms() - before >= 86_400_000);
    }

    #[test]
    fn only_a_shared_clock_takes_the_stored_offset() {
        let plain = Clock::default();
        plain.set_shared_offset_ms(86_400_000);
        assert!(!plain.is_shared());
        assert!(plain.now_ms() < Clock::default().now_ms() + 3_600_000);
        let shared = Clock::shared();
        let before = shared.now_ms();
        shared.set_shared_offset_ms(86_400_000);
        assert!(shared.now_ms() - before >= 86_400_000);
    }

    /// Two readers of the stored offset may set what they read in either order: the one that
    /// read it before a move never takes the clock back.
    #[test]
    fn a_stale_read_of_the_offset_never_takes_the_clock_back() {
        let shared = Clock::shared();
        shared.set_shared_offset_ms(300_000);
        let moved = shared.now_ms();
        shared.set_shared_offset_ms(60_000);
        assert!(shared.now_ms() >= moved);
        assert_eq!(shared.shared_offset_ms(), 300_000);
    }
}
