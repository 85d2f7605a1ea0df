//! Cron strings as 0.3.13 clients send them, evaluated in UTC.
//!
//! Accepted forms:
//! - 5 fields `minute hour day-of-month month day-of-week` (the 0.3.13 /
//!   croniter form, e.g. `*/5 * * * *`): run at second 0 — we prefix `0 `
//!   for the seconds field the parser wants;
//! - 6 fields in **croniter order, seconds last**
//!   (`minute hour dom month dow second`): 0.3.13 used croniter, whose
//!   sixth field is seconds, so a 0.3.13 client's 6-field string means that;
//!   it is reordered to the parser's seconds-first form;
//! - `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@hourly`.
//!
//! Fields follow POSIX/Vixie cron (day of week 0-7, 0 and 7 = Sunday;
//! names `MON`, `JAN`; day-of-month and day-of-week both restricted = either
//! matches), as croniter does; `a/n` (croniter's "from a, every n") is
//! accepted. Evaluation is by the `croner` crate.

use chrono::{DateTime, Utc};
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

/// Parse `text` (already trimmed, non-empty) into a cron evaluator, or the
/// parser's message.
pub(crate) fn parse(text: &str) -> Result<Cron, String> {
    let parser = CronParser::builder()
        .seconds(Seconds::Required)
        .year(Year::Disallowed)
        .sloppy_ranges(true)
        .build();
    let normalized = if text.starts_with('@') {
        text.to_string()
    } else {
        let fields: Vec<&str> = text.split_whitespace().collect();
        match fields.len() {
            5 => format!("0 {}", fields.join(" ")),
            6 => format!("{} {}", fields[5], fields[..5].join(" ")),
            n => {
                return Err(format!(
                    "expected 5 fields (minute hour day-of-month month day-of-week) \
                     or 6 (the same plus seconds last, croniter style), got {n}"
                ))
            }
        }
    };
    parser.parse(&normalized).map_err(|e| e.to_string())
}

/// The first cron time strictly after `now_ms` (unix ms), in unix ms; `None`
/// when there is none the parser can find (or the time is out of range).
pub(crate) fn next_after(cron: &Cron, now_ms: i64) -> Option<i64> {
    let secs = now_ms.div_euclid(1000);
    let t: DateTime<Utc> = DateTime::from_timestamp(secs, 0)?;
    let next = cron.find_next_occurrence(&t, false).ok()?;
    let ms = next.timestamp().checked_mul(1000)?;
    // `next` > `t` (whole seconds) and `now_ms` < `t` + 1 s, so `ms` > now_ms;
    // checked anyway so a parser quirk cannot make a schedule fire twice.
    (ms > now_ms).then_some(ms)
}

/// The latest cron time at or before `now_ms` (unix ms), in unix ms; `None`
/// when there is none the parser can find.
pub(crate) fn latest_at_or_before(cron: &Cron, now_ms: i64) -> Option<i64> {
    let secs = now_ms.div_euclid(1000);
    let t: DateTime<Utc> = DateTime::from_timestamp(secs, 0)?;
    let prev = cron.find_previous_occurrence(&t, true).ok()?;
    let ms = prev.timestamp().checked_mul(1000)?;
    (ms <= now_ms).then_some(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_796_217_600_000; // 2026-12-02T13:20:00Z (a Wednesday)

    #[test]
    fn five_fields_run_at_second_zero() {
        let c = parse("*/5 * * * *").unwrap();
        assert_eq!(next_after(&c, T0), Some(T0 + 300_000));
        assert_eq!(next_after(&c, T0 - 1), Some(T0));
        assert_eq!(next_after(&c, T0 + 1), Some(T0 + 300_000));
    }

    #[test]
    fn six_fields_are_croniter_order_seconds_last() {
        // every minute at second 30
        let c = parse("* * * * * 30").unwrap();
        assert_eq!(next_after(&c, T0), Some(T0 + 30_000));
        assert_eq!(next_after(&c, T0 + 30_000), Some(T0 + 90_000));
    }

    #[test]
    fn nicknames_names_and_sloppy_steps() {
        let h = parse("@hourly").unwrap();
        assert_eq!(next_after(&h, T0), Some(T0 + 40 * 60_000));
        let s = parse("0/15 * * * *").unwrap();
        assert_eq!(next_after(&s, T0), Some(T0 + 10 * 60_000));
        assert!(parse("0 9 * JAN mon").is_ok());
    }

    #[test]
    fn sunday_is_zero_and_seven() {
        // 2026-12-06 is a Sunday.
        let sunday_midnight = 1_796_515_200_000;
        for s in ["0 0 * * 0", "0 0 * * 7", "0 0 * * SUN"] {
            assert_eq!(
                next_after(&parse(s).unwrap(), T0),
                Some(sunday_midnight),
                "{s}"
            );
        }
    }

    #[test]
    fn bad_strings_give_the_parsers_message() {
        for s in [
            "* * * *",
            "* * * * * * *",
            "61 * * * *",
            "x * * * *",
            "@never",
        ] {
            let e = parse(s).unwrap_err();
            assert!(!e.is_empty(), "{s}");
        }
    }

    #[test]
    fn the_latest_time_at_or_before() {
        let c = parse("*/5 * * * *").unwrap();
        assert_eq!(latest_at_or_before(&c, T0), Some(T0));
        assert_eq!(latest_at_or_before(&c, T0 + 1), Some(T0));
        assert_eq!(latest_at_or_before(&c, T0 - 1), Some(T0 - 300_000));
        assert_eq!(latest_at_or_before(&c, i64::MIN), None);
    }

    #[test]
    fn impossible_dates_have_no_next_time() {
        let c = parse("0 0 30 2 *").unwrap();
        assert_eq!(next_after(&c, T0), None);
    }

    #[test]
    fn extreme_times_do_not_panic() {
        let c = parse("* * * * *").unwrap();
        assert_eq!(next_after(&c, i64::MAX), None);
        assert_eq!(next_after(&c, i64::MIN), None);
    }
}
