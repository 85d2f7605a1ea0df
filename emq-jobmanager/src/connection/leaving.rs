//! Leaving: the router leaves (KBYE, DISCONNECT), or we do (shutdown).
//!
//! The rules (tests in `tests/leaving.rs`):
//! - KBYE/DISCONNECT from the router → no more READYs; running jobs go on
//!   on the same connection and identity, and each REPLY goes out on it; once
//!   no job runs (at once if none did) → reconnect after `reconnect_delay`
//!   (new identity, next broker). Router silence meanwhile → reconnect at
//!   once, as above (the REPLYs then wait for the next ACK).
//! - Shutdown → no more READYs; running jobs get `grace_period` and their
//!   REPLYs go out as usual; KBYE only when leaving — once no job runs, or
//!   at the end of the grace period, when the rest are killed without a
//!   REPLY (the router redelivers them elsewhere on the KBYE) — then the
//!   process exits 0. (A KBYE at the start would make the router
//!   redeliver the running jobs while they still run: twice.)

use std::time::Duration;

use emqp_proto::Command;
use log::{info, warn};

use super::slots::Slot;
use super::{Action, Connection, Phase};

impl Connection {
    pub(super) fn on_router_leaving(&mut self, said: &str, now: Duration) {
        if self.is_shutting_down() || matches!(self.phase, Phase::Draining | Phase::Waiting { .. })
        {
            return;
        }
        self.withdraw_readies();
        let busy = self.busy();
        let held = self.held.len();
        if self.phase == Phase::Registered && busy + held > 0 {
            warn!(
                "router {} said {said}; finishing {busy} running and {held} held job(s) on this \
                 connection, then reconnecting",
                self.endpoint()
            );
            self.phase = Phase::Draining;
        } else {
            warn!(
                "router {} said {said}; reconnecting in {:?}",
                self.endpoint(),
                self.cfg.reconnect_delay
            );
            self.phase = Phase::Waiting {
                until: now + self.cfg.reconnect_delay,
            };
        }
    }

    /// SIGTERM/SIGINT: no more READYs; running jobs get the grace period
    /// and their REPLYs go out as usual on this connection. KBYE is said
    /// only when leaving (every job done, or the grace period over): a
    /// router removes a worker on KBYE and redelivers what it still holds,
    /// so a KBYE at the start would make every running job run twice.
    pub(super) fn on_shutdown(&mut self, now: Duration, out: &mut Vec<Action>) {
        if self.is_shutting_down() {
            return;
        }
        let busy = self.busy();
        info!(
            "shutting down: no new jobs, {busy} running and {} held job(s) get {:?}, then KBYE to {}",
            self.held.len(),
            self.cfg.grace_period,
            self.endpoint()
        );
        while let Some(reply) = self.pending_replies.pop_front() {
            self.send_message(reply, now, out);
        }
        self.phase = Phase::ShuttingDown {
            deadline: now + self.cfg.grace_period,
        };
        self.maybe_exit(now, out);
    }

    pub(super) fn maybe_exit(&mut self, now: Duration, out: &mut Vec<Action>) {
        if self.busy() == 0 && self.held.is_empty() {
            info!("no jobs running; KBYE and exit");
            self.send(Command::Kbye, now, out);
            self.phase = Phase::Stopped;
            out.push(Action::Exit(0));
        }
    }

    /// End of the grace period: kill what still runs, without a REPLY for
    /// it (the job did not fail: the job manager left), and say KBYE: the
    /// router redelivers the jobs still in flight to another job manager.
    pub(super) fn kill_remaining(&mut self, now: Duration, out: &mut Vec<Action>) {
        warn!(
            "grace period over; killing {} running job(s) and dropping {} held, which the router \
             redelivers after our KBYE",
            self.busy(),
            self.held.len()
        );
        out.push(Action::KillAll);
        self.held.clear();
        for slot in 0..self.slots.len() {
            if let Slot::Busy(_) = &self.slots[slot] {
                self.slots[slot] = Slot::Free;
            }
        }
        self.send(Command::Kbye, now, out);
        self.phase = Phase::Stopped;
        out.push(Action::Exit(0));
    }
}
