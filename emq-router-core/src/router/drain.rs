//! Drain: the orderly shutdown.
//!
//! DISCONNECT on the admin socket, or [`crate::Input::Shutdown`] (SIGTERM,
//! SIGINT), starts it: KBYE goes to every worker and scheduler, new
//! REQUESTs and SCHEDULEs are refused `shutting-down`, buffered jobs are
//! no longer handed out, INFORMs are ignored. Workers keep their entries
//! and their HEARTBEATs: an emq job manager told KBYE finishes the jobs it
//! runs and sends their REPLYs on the same connection before it leaves,
//! so their results reach the clients. [`Action::Exit`] is emitted when no
//! job is in flight and the journal has written everything (so every
//! acknowledgement and RESULT went out), or when `drain_timeout` has
//! passed. Unfinished jobs stay in the journal.
//!
//! Stepping down ([`Router::step_down`]) is the abrupt form, for a router
//! that lost its leader lease (see [`crate::lease`]): KBYE to every peer and
//! nothing else — no drain, no more journal batches (they could not commit)
//! — after which the driver closes the sockets and drops the core. The
//! journal keeps every unfinished job for the router that took over.

use std::time::Duration;

use emqp_proto::Command;

use super::{frames_of, Router};
use crate::event::Action;

impl Router {
    pub(super) fn start_shutdown(&mut self, why: &str, now: Duration, out: &mut Vec<Action>) {
        if self.is_draining() {
            return;
        }
        self.drain_deadline = Some(now.saturating_add(self.cfg.drain_timeout));
        log::info!(
            "shutting down ({why}): KBYE to {} worker(s) and {} scheduler(s); {} job(s) in flight, {} buffered",
            self.pool.workers.len(),
            self.schedulers.len(),
            self.inflight_count(),
            self.buffered_count() + self.delayed_count()
        );
        for (socket, identity) in self.peers() {
            let f = frames_of(self.ids.next_id(), Command::Kbye);
            self.send(socket, identity, f, out);
        }
    }

    /// Stop serving at once (the leader lease is lost): KBYE to every
    /// worker and scheduler, then nothing more — the core is finished and
    /// the driver drops it. Jobs in flight and buffered stay in the
    /// journal for the next leader; held acknowledgements are never sent.
    pub fn step_down(&mut self, why: &str, out: &mut Vec<Action>) {
        if self.exited {
            return;
        }
        log::warn!(
            "stepping down ({why}): KBYE to {} worker(s) and {} scheduler(s); {} job(s) in flight \
             and {} buffered stay in the journal for the next leader; {} held \
             acknowledgement(s) or result(s) are not sent",
            self.pool.workers.len(),
            self.schedulers.len(),
            self.inflight_count(),
            self.buffered_count() + self.delayed_count(),
            self.journal.held_count()
        );
        for (socket, identity) in self.peers() {
            let f = frames_of(self.ids.next_id(), Command::Kbye);
            self.send(socket, identity, f, out);
        }
        self.exited = true;
    }

    pub(super) fn maybe_exit(&mut self, now: Duration, out: &mut Vec<Action>) {
        let Some(deadline) = self.drain_deadline else {
            return;
        };
        if self.exited {
            return;
        }
        let idle = self.pool.inflight_total == 0 && self.journal.is_idle();
        if idle || now >= deadline {
            self.exited = true;
            if self.pool.inflight_total > 0 {
                log::warn!(
                    "drain timeout: {} job(s) still in flight are kept as unfinished",
                    self.pool.inflight_total
                );
            }
            if !self.journal.is_idle() {
                log::warn!(
                    "drain timeout: {} acknowledgement(s) or result(s) still wait for the journal and are not sent",
                    self.journal.held_count()
                );
            }
            out.push(Action::Exit);
        }
    }
}
