//! The core's timers: a table with one entry per deadline source, in the
//! order they fire. [`Router::poll_timeout`] is the earliest of their
//! deadlines; [`Router::handle_timeout`] fires only the entries that are
//! due, in table order — the ones that add journal records (retries,
//! schedule runs, result expiry) before the group commit — and then
//! checks whether a drain is over (it may be before its deadline, once
//! idle). Every deadline is read off an ordered structure in O(1) or
//! O(log n) — the liveness deadline off the pool's order of last-heard
//! workers — so neither call walks the workers or the jobs.

use std::time::Duration;

use super::Router;
use crate::event::Action;

/// A deadline source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// HEARTBEAT to every peer, while there are peers (`peers.rs`).
    Heartbeat,
    /// The quietest peer's silence limit (`peers.rs`).
    Liveness,
    /// The earliest end of a retry delay or a delayed job (`completion.rs`).
    Retry,
    /// The next built-in schedule run, unless draining (`schedules.rs`).
    Schedule,
    /// Probes of unreachable clients, expiry of held results (`results.rs`).
    Results,
    /// The next token of a queue or key a rate holds, the end of a
    /// restore's presumption (`flow.rs`).
    Flow,
    /// The earliest end of a unique key's window (`unique.rs`).
    Unique,
    /// The group commit, or the failing journal's next try (`durability.rs`).
    Journal,
    /// The drain deadline (`drain.rs`).
    Drain,
}

/// Every timer, in firing order.
pub(crate) const TIMERS: [Timer; 9] = [
    Timer::Heartbeat,
    Timer::Liveness,
    Timer::Retry,
    Timer::Schedule,
    Timer::Results,
    Timer::Flow,
    Timer::Unique,
    Timer::Journal,
    Timer::Drain,
];

impl Router {
    /// When `timer` is next due (`None`: not armed).
    pub(crate) fn deadline(&self, timer: Timer) -> Option<Duration> {
        match timer {
            Timer::Heartbeat => {
                let peers = !self.pool.workers.is_empty() || !self.schedulers.is_empty();
                peers.then_some(self.next_heartbeat)
            }
            Timer::Liveness => self.liveness_deadline(),
            Timer::Retry => self.store.delayed.first().map(|(due, _)| *due),
            Timer::Schedule => {
                if self.is_draining() {
                    None
                } else {
                    self.next_schedule_run()
                }
            }
            Timer::Results => self.results.deadline(self.cfg.results_keep_for),
            Timer::Flow => self.flow_deadline(),
            Timer::Unique => self.unique.deadline(),
            Timer::Journal => self.journal.deadline(self.is_draining()),
            Timer::Drain => self.drain_deadline,
        }
    }

    /// Fire `timer` (due at `now`).
    fn fire(&mut self, timer: Timer, now: Duration, out: &mut Vec<Action>) {
        match timer {
            Timer::Heartbeat => self.send_heartbeats(now, out),
            Timer::Liveness => self.sweep_dead_peers(now, out),
            Timer::Retry => self.requeue_due_retries(now, out),
            Timer::Schedule => self.run_schedules(now, out),
            Timer::Results => self.result_timers(now, out),
            Timer::Flow => self.fire_flow(now, out),
            Timer::Unique => self.unique_windows_due(now),
            Timer::Journal => self.flush_journal(now, out),
            // `maybe_exit` below.
            Timer::Drain => {}
        }
    }

    /// The timers due at `now`, in table order; then the drain check.
    pub(super) fn fire_due(&mut self, now: Duration, out: &mut Vec<Action>) {
        for timer in TIMERS {
            if self.deadline(timer).is_some_and(|t| t <= now) {
                self.fire(timer, now, out);
            }
        }
        self.maybe_exit(now, out);
    }
}
