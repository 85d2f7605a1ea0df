//! The typed error every decoding path returns.

use std::fmt;

use crate::interval::IntervalError;

/// Why a list of frames is not a valid eMQP message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer frames than the envelope or the command body needs.
    TooFewFrames {
        /// The command being decoded, or `None` for the envelope.
        command: Option<&'static str>,
        expected: usize,
        got: usize,
    },
    /// A message with a fixed number of frames had another number (a
    /// published message on a SUB socket has exactly two, see
    /// [`crate::published`]).
    WrongFrameCount {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// The first frame (after the identity on a ROUTER) is not empty.
    MissingDelimiter,
    /// The protocol frame is not `eMQP/1.0`.
    BadProtocolVersion(String),
    /// The command frame names no command of eMQP/1.0 or its extensions.
    UnknownCommand(String),
    /// A numeric field (interval, retry count, timeout, weight) did not parse.
    BadNumber { field: &'static str, value: String },
    /// A JSON field (INFORM queue list, job payload) did not parse.
    BadJson { field: &'static str, reason: String },
    /// A text field was not UTF-8.
    NotUtf8 { field: &'static str },
    /// A field had a value outside its set (peer type, result status, ...).
    BadValue { field: &'static str, value: String },
    /// The INTERVAL frame of a SCHEDULE / UNSCHEDULE (`value`, at most 80
    /// characters) is not an interval this crate can represent.
    BadInterval {
        value: String,
        reason: IntervalError,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::TooFewFrames {
                command: Some(c),
                expected,
                got,
            } => write!(
                f,
                "too few frames for {c}: expected at least {expected}, got {got}"
            ),
            DecodeError::TooFewFrames {
                command: None,
                expected,
                got,
            } => write!(f, "too few frames: expected at least {expected}, got {got}"),
            DecodeError::WrongFrameCount {
                what,
                expected,
                got,
            } => write!(f, "a {what} has {expected} frames, got {got}"),
            DecodeError::MissingDelimiter => write!(f, "missing empty delimiter frame"),
            DecodeError::BadProtocolVersion(v) => write!(f, "bad protocol version {v:?}"),
            DecodeError::UnknownCommand(c) => write!(f, "unknown command {c:?}"),
            DecodeError::BadNumber { field, value } => {
                write!(f, "bad number in {field}: {value:?}")
            }
            DecodeError::BadJson { field, reason } => write!(f, "bad JSON in {field}: {reason}"),
            DecodeError::NotUtf8 { field } => write!(f, "{field} is not UTF-8"),
            DecodeError::BadValue { field, value } => write!(f, "bad value for {field}: {value:?}"),
            DecodeError::BadInterval { value, reason } => {
                write!(f, "bad interval {value:?}: {reason}")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Text of at most 80 chars for error messages, lossily decoded.
pub(crate) fn excerpt(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    if s.chars().count() > 80 {
        let mut t: String = s.chars().take(77).collect();
        t.push_str("...");
        t
    } else {
        s.into_owned()
    }
}

/// Decode a frame as UTF-8 text, naming the field on failure.
pub(crate) fn utf8(frame: Vec<u8>, field: &'static str) -> Result<String, DecodeError> {
    String::from_utf8(frame).map_err(|_| DecodeError::NotUtf8 { field })
}

/// Borrowing twin of [`utf8`].
pub(crate) fn utf8_ref<'a>(frame: &'a [u8], field: &'static str) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(frame).map_err(|_| DecodeError::NotUtf8 { field })
}
