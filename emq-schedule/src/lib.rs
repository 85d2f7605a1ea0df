//! Schedules kept by the emq router itself: SCHEDULE / UNSCHEDULE from
//! clients (0.3.13 frames: queue, headers, interval in seconds or `-1`,
//! message, cron string), with no separate scheduler process.
//!
//! Sans-IO: a [`ScheduleBook`] is a plain state machine. Time is passed in
//! as unix milliseconds (`i64`); cron strings are evaluated in UTC. The
//! router calls [`ScheduleBook::due`] when [`ScheduleBook::next_wakeup`]
//! comes, sends a REQUEST for each [`DueRun`], and writes
//! [`ScheduleBook::take_changes`] to its journal
//! (`put_schedule(id, blob)` / `delete_schedule(id)`); at start it feeds
//! every journalled blob to [`ScheduleBook::restore`].
//!
//! # Semantics
//!
//! - **Identity.** A schedule is identified by a stable hash of its queue
//!   and message bytes ([`ScheduleId`], SHA-256 hex). Re-sending the same
//!   SCHEDULE never duplicates it: unchanged, it is a no-op (no extra run,
//!   timing kept — so clients that re-send their schedules at every start
//!   do not get extra runs); with other headers / interval / cron, those
//!   are replaced and the timing starts over. UNSCHEDULE matches on queue +
//!   message only. (0.3.13 hashed the job's args/kwargs/path/callable, not
//!   the queue, and ran a re-sent SCHEDULE at once every time.)
//! - **Timing.** Interval > 0 with an empty cron string, or interval `-1`
//!   with a cron string; anything else is a typed [`ScheduleError`].
//!   Intervals are kept in milliseconds: 0.3.13 clients send
//!   `str(interval_secs)`, so `interval_secs=1.5` arrives as `1.5` and runs
//!   every 1500 ms (see [`emqp_proto::Interval`] for what decodes). Cron strings: 5 fields (`*/5 * * * *`, second 0),
//!   6 fields croniter style (seconds last), or `@hourly` etc.; see
//!   [`cron`] for details.
//! - **First run.** Without `nohaste`: at once (the first `due(now)` after
//!   the SCHEDULE), for cron schedules too, as 0.3.13 did. With `nohaste`:
//!   one interval later, or at the next cron time.
//! - **Later runs.** Interval: fixed rate (`due + interval`) while the book
//!   keeps up; if a whole interval was missed, the next run is
//!   `now + interval`. Cron: the next cron time after `now`.
//! - **Missed runs** (router down, or `due` called late) collapse into one
//!   run: `due(now)` returns each schedule at most once.
//! - **Run limit.** 0.3.13's `run_count:N` header (also `run-count:N`): N
//!   runs in total, the immediate one included, after which the schedule is
//!   removed (the last [`DueRun`] has `last: true`, and a `Delete` change
//!   follows). `-1` or no header: unlimited; other values are refused. 0.3.13
//!   honoured it for interval schedules only; here it works for cron too.
//!   `run_count` in [`ScheduleInfo`] is the number of runs made so far.
//! - **Job headers.** A [`DueRun`] carries the schedule's headers minus the
//!   schedule directives (`nohaste`, `run_count:N`).

#![forbid(unsafe_code)]

pub mod book;
pub mod cron;
mod entry;
pub mod error;
pub mod id;
mod record;

pub use book::{DueRun, ScheduleBook, ScheduleChange, ScheduleInfo};
pub use error::ScheduleError;
pub use id::ScheduleId;
