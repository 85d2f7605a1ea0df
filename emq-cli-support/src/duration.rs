//! Durations as every emq binary reads them, from a flag, an `EVENTMQ_*`
//! variable or a config file: one grammar, one parser.
//!
//! Grammar: optional blanks, a non-negative decimal number as Rust's `f64`
//! reads it (`5`, `0.25`, `.5`, `1e3`; not `inf`/`NaN`), an optional unit,
//! optional blanks. Units: `ms`, `s`, `m` (minutes), `h`; none means
//! seconds, so every plain number accepted before this module (all four
//! binaries read plain seconds) still means the same. The longest
//! duration is [`MAX_SECS`] (about 31 years): a longer one is a typo.
//!
//! Zero is decided once per setting, as a [`Zero`]: most durations take
//! it (`--drain-timeout 0`: do not wait; `--global-timeout 0`: no limit,
//! which the caller reads from the zero), a period or a wait that must
//! pass refuses it (`--heartbeat-interval`, `--timeout`). Where zero is
//! refused on the command line already, the flag's clap `value_parser` is
//! [`parse_positive_duration`] (a usage error, exit 2); where a binary
//! checks it with its settings, the flag takes [`parse_duration`] and
//! [`crate::Settings::duration`] applies the [`Zero`] to flag and setting
//! alike.

use std::fmt;
use std::time::Duration;

/// The longest duration accepted, in seconds.
pub const MAX_SECS: f64 = 1.0e9;

/// Why a duration did not parse.
#[derive(Debug, Clone, PartialEq)]
pub enum DurationError {
    /// Blank text.
    Empty,
    /// Not a number with an optional `ms`/`s`/`m`/`h` unit.
    NotANumber(String),
    /// Below zero.
    Negative(String),
    /// Zero where a positive duration is needed.
    Zero(String),
    /// More than [`MAX_SECS`].
    TooLong(String),
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Empty => write!(f, "empty duration"),
            DurationError::NotANumber(t) => write!(
                f,
                "{t:?} is not a duration (seconds, or a number with ms, s, m or h)"
            ),
            DurationError::Negative(t) => write!(f, "{t:?}: a duration cannot be negative"),
            DurationError::Zero(t) => write!(f, "{t:?}: must be a positive number of seconds"),
            DurationError::TooLong(t) => {
                write!(f, "{t:?}: longer than the {MAX_SECS:e} seconds allowed")
            }
        }
    }
}

impl std::error::Error for DurationError {}

/// `text` read by the grammar above (zero allowed).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(DurationError::Empty);
    }
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1.0e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    let bad = || DurationError::NotANumber(t.to_string());
    let number = number.trim_end();
    // f64's own parser also takes "inf", "NaN" and "infinity": only digits,
    // a point, an exponent and a sign are a number here.
    if number.is_empty()
        || !number
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
    {
        return Err(bad());
    }
    let v: f64 = number.parse().map_err(|_| bad())?;
    let secs = v * scale;
    if !secs.is_finite() {
        return Err(DurationError::TooLong(t.to_string()));
    }
    if secs < 0.0 {
        return Err(DurationError::Negative(t.to_string()));
    }
    if secs > MAX_SECS {
        return Err(DurationError::TooLong(t.to_string()));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// [`parse_duration`] that also refuses zero.
pub fn parse_positive_duration(text: &str) -> Result<Duration, DurationError> {
    let d = parse_duration(text)?;
    if d.is_zero() {
        return Err(DurationError::Zero(text.trim().to_string()));
    }
    Ok(d)
}

/// What zero means for one duration setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zero {
    /// Zero is a value like any other (the setting gives it its meaning,
    /// such as "no limit" or "at once").
    Allowed,
    /// Zero is an error: the duration must pass (a period, a lease).
    Refused,
}

impl Zero {
    /// Whether this rule admits `d`.
    pub fn admits(self, d: Duration) -> bool {
        self == Zero::Allowed || !d.is_zero()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> u128 {
        parse_duration(text).unwrap().as_millis()
    }

    #[test]
    fn plain_numbers_are_seconds_as_before() {
        assert_eq!(ms("5"), 5000);
        assert_eq!(ms(" 0.25 "), 250);
        assert_eq!(ms(".5"), 500);
        assert_eq!(ms("5."), 5000);
        assert_eq!(ms("1e3"), 1_000_000);
        assert_eq!(ms("+2"), 2000);
        assert_eq!(ms("0"), 0);
    }

    #[test]
    fn units() {
        assert_eq!(ms("250ms"), 250);
        assert_eq!(ms("1.5s"), 1500);
        assert_eq!(ms("2m"), 120_000);
        assert_eq!(ms("1h"), 3_600_000);
        assert_eq!(ms("3 s"), 3000);
        assert_eq!(ms("1e2ms"), 100);
    }

    #[test]
    fn rejects() {
        for bad in [
            "", "  ", "s", "ms", "abc", "5x", "1d", "inf", "NaN", "5 5", "5sm", "0x10",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
        assert!(matches!(
            parse_duration("-1"),
            Err(DurationError::Negative(_))
        ));
        assert!(matches!(
            parse_duration("1e10"),
            Err(DurationError::TooLong(_))
        ));
        assert!(matches!(
            parse_duration("1e400"),
            Err(DurationError::TooLong(_))
        ));
        assert!(parse_duration("1e9").is_ok());
        assert!(matches!(
            parse_positive_duration("0ms"),
            Err(DurationError::Zero(_))
        ));
    }

    #[test]
    fn zero_is_one_typed_choice() {
        assert!(Zero::Allowed.admits(Duration::ZERO));
        assert!(!Zero::Refused.admits(Duration::ZERO));
        assert!(Zero::Refused.admits(Duration::from_millis(1)));
        assert_eq!(parse_positive_duration("2"), Ok(Duration::from_secs(2)));
        let e = parse_positive_duration("0").unwrap_err().to_string();
        assert!(e.contains("positive"), "{e}");
        let e = parse_duration("soon").unwrap_err().to_string();
        assert!(e.contains("not a duration"), "{e}");
    }
}
