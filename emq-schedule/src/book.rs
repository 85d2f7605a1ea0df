//! The schedule book: every schedule the router keeps, and when each runs.

use std::collections::{BTreeMap, BTreeSet};

use emqp_proto::{Headers, Interval, Schedule};
use log::{debug, info};
use serde::Serialize;

use crate::cron;
use crate::entry::{is_schedule_directive, run_limit, Entry, Timing};
use crate::error::ScheduleError;
use crate::id::ScheduleId;
use crate::record;

/// A schedule whose time has come: the router turns it into a REQUEST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueRun {
    pub id: ScheduleId,
    pub queue: String,
    /// The schedule's headers without the schedule directives (`nohaste`,
    /// `run_count:N`): what the job's REQUEST should carry.
    pub headers: Headers,
    /// The job payload, as the SCHEDULE carried it.
    pub message: Vec<u8>,
    /// When this run was due (≤ the `now` it was returned for).
    pub scheduled_ms: i64,
    /// 1 for the first run of this schedule, 2 for the second, ...
    pub run_number: u64,
    /// The run limit is used up: the schedule was removed with this run.
    pub last: bool,
}

/// What the caller must write to its journal (see
/// [`ScheduleBook::take_changes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleChange {
    /// Create or replace the record `id` with `blob`.
    Put { id: ScheduleId, blob: Vec<u8> },
    /// Remove the record `id` (it may not exist: ignore that).
    Delete { id: ScheduleId },
}

/// One schedule, for the admin ROUTER_SHOW_SCHEDULERS reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduleInfo {
    pub id: ScheduleId,
    pub queue: String,
    /// The HEADERS frame text as sent.
    pub headers: String,
    /// The job payload (lossy UTF-8).
    pub message: String,
    /// Time between runs, for interval schedules (JSON: seconds, an
    /// integer when whole, e.g. `60` or `1.5`).
    pub interval_secs: Option<Interval>,
    /// The cron string, for cron schedules.
    pub cron: Option<String>,
    pub nohaste: bool,
    /// `run_count:N`: the total runs allowed; `None` = unlimited.
    pub run_limit: Option<u64>,
    pub runs_left: Option<u64>,
    /// `None`: no upcoming run can be computed (dormant).
    pub next_run_ms: Option<i64>,
    pub last_run_ms: Option<i64>,
    /// Runs made so far (kept across re-SCHEDULE and restarts).
    pub run_count: u64,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// Every schedule, keyed by [`ScheduleId`], with a time index.
///
/// Sans-IO: time is always passed in (unix milliseconds); nothing here
/// reads a clock, sleeps or does I/O. See the crate docs for the semantics.
#[derive(Debug, Clone, Default)]
pub struct ScheduleBook {
    entries: BTreeMap<ScheduleId, Entry>,
    /// `(next_run_ms, id)` of every schedule that has a next run.
    by_time: BTreeSet<(i64, ScheduleId)>,
    /// Ids whose journal record is out of date.
    dirty: BTreeSet<ScheduleId>,
}

impl ScheduleBook {
    pub fn new() -> ScheduleBook {
        ScheduleBook::default()
    }

    /// Handle a SCHEDULE at `now_ms`.
    ///
    /// A new schedule's first run is at `now_ms` (the router runs it on its
    /// next [`due`](Self::due) call), or with the `nohaste` header one
    /// interval later / at the next cron time. Re-sending a SCHEDULE with
    /// the same queue and message keeps its id: if headers, interval and
    /// cron are also the same nothing changes (no extra run, timing kept);
    /// otherwise headers and timing are replaced, the first run is computed
    /// as for a new schedule and the run limit starts over, while
    /// `run_count`, `last_run_ms` and `created_ms` are kept.
    pub fn schedule(&mut self, sched: &Schedule, now_ms: i64) -> Result<ScheduleId, ScheduleError> {
        let timing = Timing::from_frames(sched.interval, &sched.cron)?;
        let limit = run_limit(&sched.headers)?;
        // A cron string must have an upcoming time even when the first run
        // is immediate: otherwise the schedule would go dormant after it.
        let after = timing.first_after(now_ms);
        let first = match (after, &timing) {
            (None, Timing::Cron { text, .. }) => {
                return Err(ScheduleError::CronNeverFires { cron: text.clone() })
            }
            _ if !sched.headers.nohaste() => now_ms,
            (Some(t), _) => t,
            (None, Timing::Interval { .. }) => {
                return Err(ScheduleError::IntervalTooLarge(timing.interval()))
            }
        };
        let id = ScheduleId::from(sched);

        if let Some(e) = self.entries.get_mut(&id) {
            if e.same_spec(sched) {
                debug!("schedule {id}: SCHEDULE repeated unchanged, keeping its timing");
                return Ok(id);
            }
            if let Some(old) = e.next_run_ms {
                self.by_time.remove(&(old, id.clone()));
            }
            e.headers = sched.headers.clone();
            e.timing = timing;
            e.run_limit = limit;
            e.runs_left = limit;
            e.next_run_ms = Some(first);
            e.updated_ms = now_ms;
            info!(
                "schedule {id} on queue {:?} updated: {}, next run at {first}",
                e.queue,
                describe(&e.timing)
            );
        } else {
            info!(
                "schedule {id} on queue {:?} created: {}, first run at {first}",
                sched.queue,
                describe(&timing)
            );
            self.entries.insert(
                id.clone(),
                Entry {
                    queue: sched.queue.clone(),
                    headers: sched.headers.clone(),
                    message: sched.message.clone(),
                    timing,
                    run_limit: limit,
                    runs_left: limit,
                    next_run_ms: Some(first),
                    last_run_ms: None,
                    run_count: 0,
                    created_ms: now_ms,
                    updated_ms: now_ms,
                },
            );
        }
        self.by_time.insert((first, id.clone()));
        self.dirty.insert(id.clone());
        Ok(id)
    }

    /// Handle an UNSCHEDULE (pass the frame: only queue and message count,
    /// as in 0.3.13) or remove by id. `false` if there was no such schedule.
    pub fn unschedule<K: Into<ScheduleId>>(&mut self, key: K) -> bool {
        let id = key.into();
        match self.entries.remove(&id) {
            Some(e) => {
                if let Some(t) = e.next_run_ms {
                    self.by_time.remove(&(t, id.clone()));
                }
                info!(
                    "schedule {id} on queue {:?} removed after {} run(s)",
                    e.queue, e.run_count
                );
                self.dirty.insert(id);
                true
            }
            None => {
                debug!("UNSCHEDULE for unknown schedule {id}");
                false
            }
        }
    }

    /// Every schedule whose next run is ≤ `now_ms`, each once, in order of
    /// due time; each is advanced past `now_ms` (or removed when its run
    /// limit is used up). A schedule that missed several runs (router down,
    /// or `due` not called for a while) is returned once.
    pub fn due(&mut self, now_ms: i64) -> Vec<DueRun> {
        let ready: Vec<(i64, ScheduleId)> = self
            .by_time
            .iter()
            .take_while(|(t, _)| *t <= now_ms)
            .cloned()
            .collect();
        let mut out = Vec::with_capacity(ready.len());
        for key in ready {
            self.by_time.remove(&key);
            let (scheduled_ms, id) = key;
            let Some(e) = self.entries.get_mut(&id) else {
                continue;
            };
            e.run_count += 1;
            e.last_run_ms = Some(now_ms);
            let last = match e.runs_left.as_mut() {
                Some(n) => {
                    *n = n.saturating_sub(1);
                    *n == 0
                }
                None => false,
            };
            let run = DueRun {
                id: id.clone(),
                queue: e.queue.clone(),
                headers: Headers(
                    e.headers
                        .0
                        .iter()
                        .filter(|h| !is_schedule_directive(h))
                        .cloned()
                        .collect(),
                ),
                message: e.message.clone(),
                scheduled_ms,
                run_number: e.run_count,
                last,
            };
            if last {
                info!(
                    "schedule {id} on queue {:?}: run {} of {}, limit reached, removed",
                    e.queue,
                    e.run_count,
                    e.run_limit.unwrap_or(0)
                );
                self.entries.remove(&id);
            } else {
                e.next_run_ms = e.timing.after_run(scheduled_ms, now_ms);
                match e.next_run_ms {
                    Some(next) => {
                        debug!(
                            "schedule {id} on queue {:?}: run {} (due {scheduled_ms}, now {now_ms}), next at {next}",
                            e.queue, e.run_count
                        );
                        self.by_time.insert((next, id.clone()));
                    }
                    None => info!(
                        "schedule {id} on queue {:?}: run {}, no later run time can be computed; dormant",
                        e.queue, e.run_count
                    ),
                }
            }
            self.dirty.insert(id);
            out.push(run);
        }
        out
    }

    /// The earliest next run of all schedules: when to call [`due`](Self::due)
    /// next. `None` when nothing is scheduled.
    pub fn next_wakeup(&self) -> Option<i64> {
        self.by_time.first().map(|(t, _)| *t)
    }

    /// Every schedule, in id order.
    pub fn list(&self) -> Vec<ScheduleInfo> {
        self.entries.iter().map(|(id, e)| info_of(id, e)).collect()
    }

    pub fn get(&self, id: &ScheduleId) -> Option<ScheduleInfo> {
        self.entries.get(id).map(|e| info_of(id, e))
    }

    pub fn contains(&self, id: &ScheduleId) -> bool {
        self.entries.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The journal record of schedule `id` (versioned JSON), or `None` if
    /// there is no such schedule.
    pub fn to_blob(&self, id: &ScheduleId) -> Option<Vec<u8>> {
        self.entries.get(id).map(|e| record::encode(id, e))
    }

    /// Put a journalled schedule back (at router start), replacing one with
    /// the same id. Its run state is kept: a run that fell due while the
    /// router was down — however many — is due now, once. If the record's
    /// next run is further away than the schedule allows from `now_ms` (the
    /// clock went back), it is pulled in to one interval from now / the
    /// next cron time. A restored schedule is not reported by
    /// [`take_changes`](Self::take_changes) unless that adjustment changed it.
    ///
    /// An error means the record is unusable (the caller should log it and
    /// delete it from the journal).
    pub fn restore(&mut self, blob: &[u8], now_ms: i64) -> Result<ScheduleId, ScheduleError> {
        let (id, mut e) = record::decode(blob)?;
        let stored = e.next_run_ms;
        let adjusted = match &e.timing {
            Timing::Interval { ms, .. } => {
                let latest = now_ms.checked_add(*ms);
                match (stored, latest) {
                    (Some(t), Some(l)) if t > l => Some(l),
                    _ => stored,
                }
            }
            Timing::Cron { cron, .. } => match stored {
                Some(t) if t <= now_ms => Some(t),
                _ => cron::next_after(cron, now_ms),
            },
        };
        e.next_run_ms = adjusted;
        if let Some(old) = self.entries.remove(&id) {
            if let Some(t) = old.next_run_ms {
                self.by_time.remove(&(t, id.clone()));
            }
        }
        if let Some(t) = adjusted {
            self.by_time.insert((t, id.clone()));
        }
        if adjusted != stored {
            self.dirty.insert(id.clone());
        }
        info!(
            "schedule {id} on queue {:?} restored: {}, next run at {:?}, {} run(s) so far",
            e.queue,
            describe(&e.timing),
            adjusted,
            e.run_count
        );
        self.entries.insert(id.clone(), e);
        Ok(id)
    }

    /// What changed since the last call, for the journal: `Put` with the
    /// current record of every schedule created, replaced or run, `Delete`
    /// for every schedule removed. In id order; only the latest state of
    /// each id.
    pub fn take_changes(&mut self) -> Vec<ScheduleChange> {
        let dirty = std::mem::take(&mut self.dirty);
        dirty
            .into_iter()
            .map(|id| match self.entries.get(&id) {
                Some(e) => ScheduleChange::Put {
                    blob: record::encode(&id, e),
                    id,
                },
                None => ScheduleChange::Delete { id },
            })
            .collect()
    }

    /// Whether [`take_changes`](Self::take_changes) would return anything.
    pub fn has_changes(&self) -> bool {
        !self.dirty.is_empty()
    }
}

fn describe(t: &Timing) -> String {
    match t {
        Timing::Interval { .. } => format!("every {}s", t.interval()),
        Timing::Cron { text, .. } => format!("cron {text:?} (UTC)"),
    }
}

fn info_of(id: &ScheduleId, e: &Entry) -> ScheduleInfo {
    ScheduleInfo {
        id: id.clone(),
        queue: e.queue.clone(),
        headers: e.headers.encode(),
        message: String::from_utf8_lossy(&e.message).into_owned(),
        interval_secs: match e.timing {
            Timing::Interval { .. } => Some(e.timing.interval()),
            Timing::Cron { .. } => None,
        },
        cron: match &e.timing {
            Timing::Interval { .. } => None,
            Timing::Cron { text, .. } => Some(text.clone()),
        },
        nohaste: e.headers.nohaste(),
        run_limit: e.run_limit,
        runs_left: e.runs_left,
        next_run_ms: e.next_run_ms,
        last_run_ms: e.last_run_ms,
        run_count: e.run_count,
        created_ms: e.created_ms,
        updated_ms: e.updated_ms,
    }
}
