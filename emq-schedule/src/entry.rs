//! One schedule as the book keeps it ([`Entry`]): its timing (an interval
//! or a cron expression, [`Timing`], validated from the SCHEDULE's frames),
//! its run limit (the `run_count:N` header, [`run_limit`]) and its state.
//! Plain data with its rules; the book (`book.rs`) holds the entries and
//! the journal record (`record.rs`) encodes one, each importing this
//! module and not each other's internals.

use emqp_proto::{Header, Headers, Interval, Schedule};

use crate::cron;
use crate::error::ScheduleError;

/// When a schedule runs.
#[derive(Debug, Clone)]
pub(crate) enum Timing {
    /// Every `ms` (> 0) milliseconds.
    Interval { ms: i64 },
    Cron {
        text: String,
        cron: Box<croner::Cron>,
    },
}

impl Timing {
    /// Validate the interval / cron frames of a SCHEDULE.
    pub(crate) fn from_frames(
        interval: Interval,
        cron_text: &str,
    ) -> Result<Timing, ScheduleError> {
        let cron_text = cron_text.trim();
        let ms = match interval {
            Interval::Unset => None,
            Interval::Every { ms } => Some(ms),
        };
        match ms {
            None if cron_text.is_empty() => Err(ScheduleError::NeitherIntervalNorCron),
            None => match cron::parse(cron_text) {
                Ok(c) => Ok(Timing::Cron {
                    text: cron_text.to_string(),
                    cron: Box::new(c),
                }),
                Err(message) => Err(ScheduleError::BadCron {
                    cron: cron_text.to_string(),
                    message,
                }),
            },
            Some(0) => Err(ScheduleError::ZeroInterval),
            Some(ms) if ms < 0 => Err(ScheduleError::NegativeInterval(interval)),
            Some(_) if !cron_text.is_empty() => Err(ScheduleError::BothIntervalAndCron {
                interval,
                cron: cron_text.to_string(),
            }),
            Some(ms) => Ok(Timing::Interval { ms }),
        }
    }

    /// The first run time strictly after `now_ms` for a schedule that has
    /// not run yet (`nohaste`): one interval from now, or the next cron time.
    pub(crate) fn first_after(&self, now_ms: i64) -> Option<i64> {
        match self {
            Timing::Interval { ms, .. } => now_ms.checked_add(*ms),
            Timing::Cron { cron, .. } => cron::next_after(cron, now_ms),
        }
    }

    /// The run after the one that was due at `scheduled_ms` and ran at
    /// `now_ms`. Always > `now_ms`, or `None` (out of range: dormant).
    ///
    /// Interval: fixed rate while the book keeps up (`scheduled + interval`,
    /// so a late poll does not shift later runs); once a whole interval was
    /// missed (router down or stalled), the missed runs collapse into the one
    /// just made and the schedule re-anchors at `now + interval`.
    /// Cron: the next cron time after `now` (missed times are skipped).
    pub(crate) fn after_run(&self, scheduled_ms: i64, now_ms: i64) -> Option<i64> {
        let next = match self {
            Timing::Interval { ms, .. } => match scheduled_ms.checked_add(*ms) {
                Some(t) if t > now_ms => Some(t),
                _ => now_ms.checked_add(*ms),
            },
            Timing::Cron { cron, .. } => cron::next_after(cron, now_ms),
        };
        next.filter(|t| *t > now_ms)
    }

    pub(crate) fn interval(&self) -> Interval {
        match self {
            Timing::Interval { ms } => Interval::Every { ms: *ms },
            Timing::Cron { .. } => Interval::Unset,
        }
    }

    pub(crate) fn cron_text(&self) -> &str {
        match self {
            Timing::Interval { .. } => "",
            Timing::Cron { text, .. } => text,
        }
    }
}

/// The run limit of a SCHEDULE: 0.3.13's `run_count:N` header (`run-count:N`
/// is accepted too). `-1` or absent: unlimited; `N > 0`: N runs in total,
/// the immediate (haste) run included. The last such header wins, as in
/// 0.3.13.
pub(crate) fn run_limit(headers: &Headers) -> Result<Option<u64>, ScheduleError> {
    let mut limit = None;
    for h in &headers.0 {
        if let Header::Other(s) = h {
            if let Some(v) = s
                .strip_prefix("run_count:")
                .or_else(|| s.strip_prefix("run-count:"))
            {
                let v = v.trim();
                limit = match v.parse::<i64>() {
                    Ok(-1) => None,
                    Ok(n) if n > 0 => Some(n.unsigned_abs()),
                    _ => {
                        return Err(ScheduleError::BadRunCount {
                            value: v.to_string(),
                        })
                    }
                };
            }
        }
    }
    Ok(limit)
}

/// Whether `h` is a directive of the book (`nohaste`, the run limit),
/// not a header the runs carry.
pub(crate) fn is_schedule_directive(h: &Header) -> bool {
    match h {
        Header::NoHaste => true,
        Header::Other(s) => s.starts_with("run_count:") || s.starts_with("run-count:"),
        _ => false,
    }
}

/// One schedule.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) queue: String,
    /// The HEADERS frame as sent (directives included).
    pub(crate) headers: Headers,
    pub(crate) message: Vec<u8>,
    pub(crate) timing: Timing,
    pub(crate) run_limit: Option<u64>,
    pub(crate) runs_left: Option<u64>,
    pub(crate) next_run_ms: Option<i64>,
    pub(crate) last_run_ms: Option<i64>,
    pub(crate) run_count: u64,
    pub(crate) created_ms: i64,
    pub(crate) updated_ms: i64,
}

impl Entry {
    /// Whether SCHEDULE `s` asks for what this entry already is.
    pub(crate) fn same_spec(&self, s: &Schedule) -> bool {
        self.headers.encode() == s.headers.encode()
            && self.timing.interval() == s.interval
            && self.timing.cron_text() == s.cron.trim()
    }
}
