//! The INTERVAL frame of SCHEDULE / UNSCHEDULE: seconds between runs, as
//! text, or `-1` when the CRON frame says when.
//!
//! What is accepted: EventMQ 0.3.13's client sends `str(interval_secs)`,
//! so an `int` gives `60` and a `float` gives `60.0`, `1.5`, `0.25`,
//! `1e-05` or `1e+20`. (0.3.13's own scheduler then does `int(text)`, which
//! fails on every float form; emq takes them.) Any decimal or exponent form
//! with an optional sign and surrounding whitespace is decoded, rounded to
//! the nearest millisecond, the unit of the schedule book. A value that
//! rounds to exactly -1 s is the "no interval" marker. Refused, with an
//! [`IntervalError`]: text that is not a number, `inf` / `nan`, a non-zero
//! value that rounds to 0 ms, and a value whose milliseconds do not fit an
//! `i64` (e.g. `1e20`). `0` and negative values other than `-1` decode, so
//! that the schedule book can refuse them with its own reason.

use std::fmt;

use serde::{Serialize, Serializer};

/// A SCHEDULE's interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Interval {
    /// `-1` on the wire (and the three-frame SCHEDULE form): no interval,
    /// the CRON frame says when to run.
    Unset,
    /// Run every `ms` milliseconds, as sent: may be 0 or negative, which no
    /// schedule can use. `-1000` is written `-1`, so it decodes as
    /// [`Interval::Unset`]; decoding never yields it.
    Every { ms: i64 },
}

/// Why an INTERVAL frame was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalError {
    /// Not a decimal number (e.g. `abc`, empty).
    NotANumber,
    /// `inf`, `-inf` or `nan`.
    NotFinite,
    /// Not zero, but less than half a millisecond from it.
    BelowOneMillisecond,
    /// More milliseconds than an `i64` holds (about 292 million years).
    TooLarge,
}

impl fmt::Display for IntervalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IntervalError::NotANumber => "not a number of seconds",
            IntervalError::NotFinite => "not a finite number",
            IntervalError::BelowOneMillisecond => "below the 1 ms resolution",
            IntervalError::TooLarge => "too large",
        })
    }
}

impl std::error::Error for IntervalError {}

impl Interval {
    /// `n` whole seconds; `-1` is [`Interval::Unset`].
    pub fn from_secs(n: i64) -> Result<Interval, IntervalError> {
        if n == -1 {
            return Ok(Interval::Unset);
        }
        n.checked_mul(1000)
            .map(|ms| Interval::Every { ms })
            .ok_or(IntervalError::TooLarge)
    }

    /// Seconds as a float, rounded to the nearest millisecond.
    pub fn from_secs_f64(secs: f64) -> Result<Interval, IntervalError> {
        if !secs.is_finite() {
            return Err(IntervalError::NotFinite);
        }
        let ms = (secs * 1000.0).round();
        if ms == 0.0 && secs != 0.0 {
            return Err(IntervalError::BelowOneMillisecond);
        }
        // -2^63 is an i64, 2^63 (what i64::MAX rounds to) is not.
        if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&ms) {
            return Err(IntervalError::TooLarge);
        }
        let ms = ms as i64;
        Ok(if ms == -1000 {
            Interval::Unset
        } else {
            Interval::Every { ms }
        })
    }

    /// Decode the frame's text (see the module doc).
    pub fn parse(text: &str) -> Result<Interval, IntervalError> {
        let t = text.trim();
        if let Some(exact) = parse_decimal(t) {
            return exact;
        }
        // Exponent forms (`1e-05`, `1e+20`) go through f64; Rust's float
        // syntax also takes `inf`, `nan` and `infinity`, which are refused
        // as not finite rather than as not a number.
        let f: f64 = t.parse().map_err(|_| IntervalError::NotANumber)?;
        Interval::from_secs_f64(f)
    }

    /// The milliseconds between runs, or `None` for [`Interval::Unset`].
    pub fn millis(self) -> Option<i64> {
        match self {
            Interval::Unset => None,
            Interval::Every { ms } => Some(ms),
        }
    }
}

/// `[+-]digits[.digits]` decoded exactly (no float rounding), or `None`
/// for any other syntax. Rounds half away from zero to the millisecond.
fn parse_decimal(t: &str) -> Option<Result<Interval, IntervalError>> {
    let (neg, rest) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (int, frac) = rest.split_once('.').unwrap_or((rest, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return None;
    }
    let int = int.trim_start_matches('0');
    if int.len() > 19 {
        return Some(Err(IntervalError::TooLarge));
    }
    let whole: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let frac = frac.as_bytes();
    let digit = |i: usize| frac.get(i).map_or(0, |d| i128::from(d - b'0'));
    let round_up = i128::from(digit(3) >= 5);
    let abs = whole * 1000 + digit(0) * 100 + digit(1) * 10 + digit(2) + round_up;
    if abs == 0 && (whole != 0 || frac.iter().any(|d| *d != b'0')) {
        return Some(Err(IntervalError::BelowOneMillisecond));
    }
    let ms = if neg { -abs } else { abs };
    Some(match i64::try_from(ms) {
        Ok(-1000) => Ok(Interval::Unset),
        Ok(ms) => Ok(Interval::Every { ms }),
        Err(_) => Err(IntervalError::TooLarge),
    })
}

/// The frame text: `-1`, whole seconds (`60`), or seconds with up to three
/// decimals (`1.5`, `0.25`, `-0.001`).
impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = match *self {
            Interval::Unset => return f.write_str("-1"),
            Interval::Every { ms } => ms,
        };
        let sign = if ms < 0 { "-" } else { "" };
        let abs = ms.unsigned_abs();
        let (secs, frac) = (abs / 1000, abs % 1000);
        if frac == 0 {
            write!(f, "{sign}{secs}")
        } else {
            let digits = format!("{frac:03}");
            write!(f, "{sign}{secs}.{}", digits.trim_end_matches('0'))
        }
    }
}

/// A JSON number of seconds: `-1`, an integer when whole, else a float.
impl Serialize for Interval {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Interval::Unset => s.serialize_i64(-1),
            Interval::Every { ms } if ms % 1000 == 0 => s.serialize_i64(ms / 1000),
            Interval::Every { ms } => s.serialize_f64(ms as f64 / 1000.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every(ms: i64) -> Result<Interval, IntervalError> {
        Ok(Interval::Every { ms })
    }

    #[test]
    fn what_python_0_3_13_sends_decodes() {
        // str(int) and str(float) of interval_secs, as schedule() sends it.
        for (text, want) in [
            ("60", every(60_000)),
            ("60.0", every(60_000)),
            ("1.5", every(1_500)),
            ("0.5", every(500)),
            ("0.1", every(100)),
            ("0.001", every(1)),
            ("1e-03", every(1)),
            ("2.5e+3", every(2_500_000)),
            (" 7 ", every(7_000)),
            ("+3", every(3_000)),
            ("-1", Ok(Interval::Unset)),
            ("-1.0", Ok(Interval::Unset)),
            ("-1.0004", Ok(Interval::Unset)),
            ("0", every(0)),
            ("-0.0", every(0)),
            ("-5", every(-5_000)),
            ("-0.5", every(-500)),
            ("1.0005", every(1_001)),
            ("9223372036854775", every(9_223_372_036_854_775_000)),
        ] {
            assert_eq!(Interval::parse(text), want, "{text:?}");
        }
    }

    #[test]
    fn the_rest_is_refused_with_a_reason() {
        use IntervalError::*;
        for (text, want) in [
            ("abc", NotANumber),
            ("", NotANumber),
            ("1.5s", NotANumber),
            ("1,5", NotANumber),
            ("0x10", NotANumber),
            ("inf", NotFinite),
            ("-inf", NotFinite),
            ("nan", NotFinite),
            ("Infinity", NotFinite),
            ("0.0004", BelowOneMillisecond),
            ("-1e-05", BelowOneMillisecond),
            ("1e20", TooLarge),
            ("1e+20", TooLarge),
            ("-1e20", TooLarge),
            ("9223372036854776", TooLarge),
            ("9223372036854775807", TooLarge),
            ("1e400", NotFinite),
        ] {
            assert_eq!(Interval::parse(text), Err(want), "{text:?}");
            assert!(!want.to_string().is_empty());
        }
    }

    #[test]
    fn the_frame_text_round_trips() {
        for (i, text) in [
            (Interval::Unset, "-1"),
            (Interval::Every { ms: 60_000 }, "60"),
            (Interval::Every { ms: 1_500 }, "1.5"),
            (Interval::Every { ms: 250 }, "0.25"),
            (Interval::Every { ms: 1 }, "0.001"),
            (Interval::Every { ms: -500 }, "-0.5"),
            (Interval::Every { ms: 0 }, "0"),
            (Interval::Every { ms: i64::MAX }, "9223372036854775.807"),
            (Interval::Every { ms: i64::MIN }, "-9223372036854775.808"),
        ] {
            assert_eq!(i.to_string(), text);
            assert_eq!(Interval::parse(text), Ok(i), "{text}");
        }
    }

    #[test]
    fn json_is_seconds_an_integer_when_whole() {
        let j = |i: Interval| serde_json::to_string(&i).unwrap();
        assert_eq!(j(Interval::Unset), "-1");
        assert_eq!(j(Interval::Every { ms: 60_000 }), "60");
        assert_eq!(j(Interval::Every { ms: 1_500 }), "1.5");
    }
}
