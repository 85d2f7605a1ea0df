//! Why a SCHEDULE (or a journal record) was refused.

use std::fmt;

use emqp_proto::Interval;

/// A SCHEDULE that cannot be kept, or a journal record that cannot be
/// restored. Every variant names the offending value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleError {
    /// The cron string did not parse; `message` is the parser's own text.
    BadCron { cron: String, message: String },
    /// The cron string parsed but has no upcoming time (e.g. `0 0 30 2 *`).
    CronNeverFires { cron: String },
    /// An interval (> 0) and a cron string were both given; 0.3.13 sends
    /// interval `-1` when it sends a cron string.
    BothIntervalAndCron { interval: Interval, cron: String },
    /// Interval `-1` and an empty cron string: nothing says when to run.
    NeitherIntervalNorCron,
    /// Interval `0` would run the job on every poll. (Intervals that are
    /// not numbers, not finite, or out of range already failed to decode:
    /// see [`emqp_proto::IntervalError`].)
    ZeroInterval,
    /// A negative interval other than `-1`.
    NegativeInterval(Interval),
    /// An interval so large that no run time after now can be expressed
    /// in `i64` milliseconds (with `nohaste`).
    IntervalTooLarge(Interval),
    /// A `run_count:N` header whose N is not `-1` (unlimited) or positive.
    BadRunCount { value: String },
    /// A journal record that is not a schedule record this crate can read.
    BadRecord(String),
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScheduleError::BadCron { cron, message } => {
                write!(f, "bad cron expression {cron:?}: {message}")
            }
            ScheduleError::CronNeverFires { cron } => {
                write!(f, "cron expression {cron:?} has no upcoming run time")
            }
            ScheduleError::BothIntervalAndCron { interval, cron } => write!(
                f,
                "both an interval ({interval}s) and a cron expression ({cron:?}) given; \
                 send interval -1 with a cron expression"
            ),
            ScheduleError::NeitherIntervalNorCron => {
                write!(f, "neither an interval (> 0) nor a cron expression given")
            }
            ScheduleError::ZeroInterval => write!(f, "interval must be > 0 seconds, got 0"),
            ScheduleError::NegativeInterval(n) => write!(
                f,
                "interval must be > 0 seconds (or -1 with a cron expression), got {n}"
            ),
            ScheduleError::IntervalTooLarge(n) => write!(f, "interval {n}s is too large"),
            ScheduleError::BadRunCount { value } => write!(
                f,
                "bad run_count header value {value:?}: expected -1 (unlimited) or a positive integer"
            ),
            ScheduleError::BadRecord(why) => write!(f, "bad schedule record: {why}"),
        }
    }
}

impl std::error::Error for ScheduleError {}
