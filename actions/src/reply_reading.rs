//! How a prospect's reply is read: its classification (the rules `inbox_triage` acts on) and, for
//! an out-of-office notice, the day its writer says they are back.
//!
//! Both are pure functions of the text (and, for a date without a year or a weekday, of today),
//! so the same reply always reads the same. They sit low in the layers because two places read
//! replies: the inbound path holds an enrollment on an out-of-office reply the moment it arrives
//! (`delivery::inbound`), and a triage run classifies what arrived (`agents::triage`).

use std::sync::LazyLock;

use jiff::civil::{Date, Weekday};
use regex::Regex;

use crate::conversations::Classification;

/// The phrases each classification is recognised by, in the order they are tried: an
/// unsubscribe wins over anything else in the same text, an automatic absence notice over the
/// questions it often contains, a refusal over polite words.
const RULES: &[(Classification, &[&str])] = &[
    (
        Classification::Unsubscribe,
        &[
            "unsubscribe",
            "remove me",
            "take me off",
            "stop contacting",
            "stop messaging",
            "stop emailing",
            "stop sending",
            "do not contact",
            "don't contact",
            "dont contact",
            "do not message",
            "don't message",
            "opt out",
            "opt-out",
            "no more messages",
        ],
    ),
    (
        Classification::OutOfOffice,
        &[
            "out of office",
            "out of the office",
            "on vacation",
            "on holiday",
            "on leave",
            "parental leave",
            "away until",
            "away from the office",
            "limited access to",
            "automatic reply",
            "auto-reply",
            "autoreply",
            "i will be back",
            "i'll be back",
        ],
    ),
    (
        Classification::NotInterested,
        &[
            "not interested",
            "no thanks",
            "no thank you",
            "not a fit",
            "not a good fit",
            "not the right time",
            "not right now",
            "we're all set",
            "we are all set",
            "not looking",
            "pass on this",
            "no need",
            "not for us",
            "not for me",
            "no interest",
            "not at this time",
            "don't need",
            "dont need",
            "do not need",
            "not needed",
        ],
    ),
    (
        Classification::Positive,
        &[
            "interested",
            "sounds good",
            "sounds great",
            "let's talk",
            "lets talk",
            "let's chat",
            "happy to chat",
            "happy to talk",
            "love to",
            "would like to",
            "book a",
            "schedule",
            "set up a call",
            "a call",
            "demo",
            "meeting",
            "sure",
            "yes",
        ],
    ),
];

/// Words that turn a keen phrase after them into a refusal ("not sure", "not really
/// interested", "don't want a demo").
const NEGATIONS: &[&str] = &[
    "not", "no", "never", "don't", "dont", "doesn't", "won't", "isn't", "aren't", "can't",
    "cannot", "hardly",
];

/// Classifies one message by the rules; returns the classification and the phrase that decided
/// it (`?` for a question recognised by its question mark). A keen phrase with a negation up to
/// three words before it, in the same clause, is a refusal.
pub fn classify(text: &str) -> (Classification, &'static str) {
    let lowered = text.to_lowercase();
    let normalised = normalise(&lowered);
    let words: Vec<&str> = normalised.split(' ').filter(|w| !w.is_empty()).collect();
    for (classification, phrases) in RULES {
        if *classification == Classification::Positive && lowered.contains('?') {
            // A question that is also keen ("could we set up a call?") is answered as a
            // question: it asks for something.
            continue;
        }
        for phrase in *phrases {
            let wanted = normalise(phrase);
            let wanted: Vec<&str> = wanted.split(' ').collect();
            let Some(at) = words
                .windows(wanted.len())
                .position(|window| window == wanted.as_slice())
            else {
                continue;
            };
            let negated = words[at.saturating_sub(3)..at]
                .iter()
                .rev()
                .take_while(|word| **word != BREAK)
                .any(|word| NEGATIONS.contains(word));
            if *classification == Classification::Positive && negated {
                return (Classification::NotInterested, phrase);
            }
            return (*classification, phrase);
        }
    }
    if lowered.contains('?') {
        return (Classification::Question, "?");
    }
    (Classification::Unclear, "")
}

/// Where a sentence or clause ends, as a word of its own: a negation does not reach past it.
const BREAK: &str = "|";

/// Lowercase words separated by single spaces (apostrophes kept), so phrases match whole words;
/// `.`, `,`, `!`, `;`, `:` and dashes between words become [`BREAK`].
fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_alphanumeric() || c == '\'' || c == '-' {
            out.push(c);
        } else {
            if !out.ends_with(' ') {
                out.push(' ');
            }
            if matches!(c, '.' | ',' | '!' | ';' | ':' | '—' | '–') && !out.ends_with("| ") {
                out.push_str("| ");
            }
        }
    }
    out.trim().to_owned()
}

/// The latest a return date may be: further out is more likely a misreading than a plan.
const MAX_RETURN_DAYS: i64 = 90;

static ISO_DATE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(\d{4})-(\d{2})-(\d{2})\b").expect("a valid pattern"));
static DAY_MONTH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"\b(\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+({MONTHS})\b\.?(?:,?\s+(\d{{4}}))?"
    ))
    .expect("a valid pattern")
});
static MONTH_DAY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"\b({MONTHS})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}}))?"
    ))
    .expect("a valid pattern")
});
static WEEKDAY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:until|till|back on|back|return on|returning on|returning)\s+(?:next\s+)?(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b")
        .expect("a valid pattern")
});
static IN_DAYS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:back in|for|in)\s+(\d{1,2}|one|two|three|four|five|six|seven|eight|nine|ten)\s+(day|days|week|weeks)\b")
        .expect("a valid pattern")
});

const MONTHS: &str = "january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec";

fn month_number(name: &str) -> Option<i8> {
    let key = name.get(..3)?;
    let months = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    months
        .iter()
        .position(|month| *month == key)
        .and_then(|index| i8::try_from(index + 1).ok())
}

fn small_number(word: &str) -> Option<i64> {
    let words = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    word.parse().ok().or_else(|| {
        words
            .iter()
            .position(|known| *known == word)
            .and_then(|index| i64::try_from(index + 1).ok())
    })
}

/// The day an out-of-office reply says its writer is back, as the start of that day (UTC,
/// epoch ms): an ISO date (`2027-03-10`), a day and a month in either order (`10 March`,
/// `March 10th, 2027`; without a year, the next such day from today), a weekday after `until`,
/// `back`, `returning` and the like (the next such day after today), or `back in 2 weeks`; of
/// several (`from 3 March to 10 March`), the latest. `None` when the text names none, or only
/// days in the past or more than 90 days ahead.
pub fn return_date(text: &str, now_ms: i64) -> Option<i64> {
    let lowered = text.to_lowercase();
    let today = jiff::Timestamp::from_millisecond(now_ms)
        .ok()?
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let in_range = |date: Date| {
        let days = today.until(date).ok()?.get_days();
        (0..=MAX_RETURN_DAYS)
            .contains(&i64::from(days))
            .then_some(date)
    };
    let dated = |year: Option<i16>, month: i8, day: i8| -> Option<Date> {
        match year {
            Some(year) => Date::new(year, month, day).ok(),
            None => {
                let this_year = Date::new(today.year(), month, day).ok()?;
                if this_year >= today {
                    Some(this_year)
                } else {
                    Date::new(today.year() + 1, month, day).ok()
                }
            }
        }
    };
    // Every date the text names; a notice that says "from 3 March to 10 March" means the later.
    let mut found: Vec<Date> = Vec::new();
    for c in ISO_DATE.captures_iter(&lowered) {
        let parts = (c[1].parse().ok(), c[2].parse().ok(), c[3].parse().ok());
        if let (Some(year), Some(month), Some(day)) = parts {
            found.extend(dated(Some(year), month, day));
        }
    }
    for c in DAY_MONTH.captures_iter(&lowered) {
        let year = c.get(3).and_then(|y| y.as_str().parse().ok());
        if let (Some(month), Ok(day)) = (month_number(&c[2]), c[1].parse()) {
            found.extend(dated(year, month, day));
        }
    }
    for c in MONTH_DAY.captures_iter(&lowered) {
        let year = c.get(3).and_then(|y| y.as_str().parse().ok());
        if let (Some(month), Ok(day)) = (month_number(&c[1]), c[2].parse()) {
            found.extend(dated(year, month, day));
        }
    }
    for c in WEEKDAY.captures_iter(&lowered) {
        let wanted = match &c[1] {
            "monday" => Weekday::Monday,
            "tuesday" => Weekday::Tuesday,
            "wednesday" => Weekday::Wednesday,
            "thursday" => Weekday::Thursday,
            "friday" => Weekday::Friday,
            "saturday" => Weekday::Saturday,
            _ => Weekday::Sunday,
        };
        found.extend(today.nth_weekday(1, wanted).ok());
    }
    for c in IN_DAYS.captures_iter(&lowered) {
        let Some(count) = small_number(&c[1]) else {
            continue;
        };
        let days = if c[2].starts_with("week") {
            count * 7
        } else {
            count
        };
        found.extend(today.checked_add(jiff::Span::new().days(days)).ok());
    }
    let found = found.into_iter().filter_map(in_range).max()?;
    Some(
        found
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()?
            .timestamp()
            .as_millisecond(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2027-03-03T10:00:00Z, a Wednesday.
    const NOW: i64 = 1_804_068_000_000;

    fn day(text: &str) -> Option<String> {
        return_date(text, NOW).map(|ms| {
            jiff::Timestamp::from_millisecond(ms)
                .expect("a time")
                .to_zoned(jiff::tz::TimeZone::UTC)
                .date()
                .to_string()
        })
    }

    #[test]
    fn return_dates_are_read_in_the_common_forms() {
        for (text, expected) in [
            (
                "I am out of the office until 2027-03-10.",
                Some("2027-03-10"),
            ),
            ("Out of office, back on 15 March.", Some("2027-03-15")),
            ("On vacation until March 20th, 2027", Some("2027-03-20")),
            ("Away until Mar. 9", Some("2027-03-09")),
            ("On holiday, back Monday", Some("2027-03-08")),
            (
                "Automatic reply: I'll be back in 2 weeks",
                Some("2027-03-17"),
            ),
            ("Parental leave until 2 April", Some("2027-04-02")),
            ("Out of office from 3 March to 10 March", Some("2027-03-10")),
            ("On leave from Monday, back on Friday", Some("2027-03-05")),
            ("Out of office", None),
            // A day past, or too far ahead, is no plan to rely on.
            ("Back on 2027-02-01", None),
            ("On leave until 2027-12-01", None),
        ] {
            assert_eq!(day(text).as_deref(), expected, "{text}");
        }
        assert_eq!(NOW % 86_400_000, 10 * 3_600_000);
    }
}
