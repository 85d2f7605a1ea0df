//! The leader lease's driver: carries out what `emq_router_core::lease`
//! asks (take, renew, release) through the journal thread
//! (`pg_writer.rs`) and feeds the outcomes back; waits as a standby — no
//! socket bound — until the lease is ours. The timing rules live in the
//! core's `lease.rs`.

use std::time::{Duration, Instant};

use emq_journal::postgres::{Acquire, PgError};
use emq_router_core::lease::{Lease, LeaseAction, LeaseConfig, LeaseInput, StepDownReason};
use emq_transport::ShutdownSignal;

use crate::pg_writer::{PgWriter, Reply, Request};

/// This process's name in the lease row: host, pid and a random part (a
/// restarted router is a new holder, and never takes back a lease that
/// was its predecessor's).
pub(crate) fn holder_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    let rand = emqp_proto::msgid::random_seed() as u32;
    format!("{host}:{}:{rand:08x}", std::process::id())
}

/// What carrying out the lease's actions came to.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// The lease is ours at this epoch: load and serve.
    pub(crate) serve: Option<u64>,
    /// Stop serving now.
    pub(crate) step_down: Option<StepDownReason>,
}

pub(crate) struct Ha {
    lease: Lease,
    holder: String,
    start: Instant,
}

impl Ha {
    pub(crate) fn new(cfg: LeaseConfig, start: Instant) -> Ha {
        Ha {
            lease: Lease::new(cfg, start.elapsed()),
            holder: holder_id(),
            start,
        }
    }

    pub(crate) fn holder(&self) -> &str {
        &self.holder
    }

    pub(crate) fn poll_timeout(&self) -> Option<Duration> {
        self.lease.poll_timeout()
    }

    /// Wait as a standby until this router holds the lease (its epoch), or
    /// until a shutdown signal (`None`). Sleeps until the lease's next
    /// timer or a signal; the journal thread's calls are waited for here
    /// (nothing else is going on).
    pub(crate) fn wait_for_lease(
        &mut self,
        w: &mut PgWriter,
        signals: &ShutdownSignal,
    ) -> Option<u64> {
        w.drain();
        loop {
            if signals.requested() {
                self.shutdown(w);
                return None;
            }
            let o = self.due(w);
            if let Some(epoch) = o.serve {
                return Some(epoch);
            }
            let now = self.start.elapsed();
            let wait = self
                .lease
                .poll_timeout()
                .map_or(Duration::from_secs(1), |t| t.saturating_sub(now));
            let ms = i64::try_from(wait.as_micros().div_ceil(1000)).unwrap_or(i64::MAX);
            let mut items = [signals.poll_item()];
            let _ = zmq::poll(&mut items, ms);
        }
    }

    /// Timers due now (renewal, expiry, a standby's try), carried out. A
    /// renewal is handed to the journal thread; its reply comes back
    /// through [`Ha::renewed`].
    pub(crate) fn due(&mut self, w: &mut PgWriter) -> Outcome {
        let now = self.start.elapsed();
        let mut actions = Vec::new();
        if self.lease.poll_timeout().is_some_and(|t| t <= now) {
            self.lease.handle_timeout(now, &mut actions);
        }
        self.carry_out(actions, w)
    }

    /// The journal thread's answer to a renewal.
    pub(crate) fn renewed(&mut self, result: Result<(), PgError>, w: &mut PgWriter) -> Outcome {
        let input = match result {
            Ok(()) => LeaseInput::Renewed,
            Err(e) if e.is_fenced() => LeaseInput::Fenced,
            Err(e) => LeaseInput::Failed {
                error: e.to_string(),
            },
        };
        let mut actions = Vec::new();
        self.lease.handle(input, self.start.elapsed(), &mut actions);
        self.carry_out(actions, w)
    }

    /// A journal commit found the lease taken over.
    pub(crate) fn fenced(&mut self, w: &mut PgWriter) -> Outcome {
        let mut actions = Vec::new();
        self.lease
            .handle(LeaseInput::Fenced, self.start.elapsed(), &mut actions);
        self.carry_out(actions, w)
    }

    /// The router stops: release the lease if held (a standby takes over
    /// at its next try instead of waiting for the TTL).
    pub(crate) fn shutdown(&mut self, w: &mut PgWriter) {
        let mut actions = Vec::new();
        self.lease
            .handle(LeaseInput::Shutdown, self.start.elapsed(), &mut actions);
        self.carry_out(actions, w);
    }

    /// Step down on our own (the journal could not be loaded): give the
    /// lease up so that another router can try.
    pub(crate) fn give_up(&mut self, w: &mut PgWriter) {
        if let Some(Reply::Released(Err(e))) = w.call(Request::Release) {
            log::warn!("could not release the lease: {e}");
        }
        self.lease = Lease::new(*self.lease.config(), self.start.elapsed());
    }

    fn carry_out(&mut self, mut actions: Vec<LeaseAction>, w: &mut PgWriter) -> Outcome {
        let mut outcome = Outcome::default();
        let ttl = self.lease.config().ttl;
        while !actions.is_empty() {
            for a in std::mem::take(&mut actions) {
                let input = match a {
                    // Only a standby tries: nothing else is in flight, so
                    // the answer is waited for.
                    LeaseAction::TryAcquire => {
                        let holder = self.holder.clone();
                        match w.call(Request::TryAcquire { holder, ttl }) {
                            Some(Reply::Acquired(Ok(Acquire::Won { epoch }))) => {
                                LeaseInput::Acquired { epoch }
                            }
                            Some(Reply::Acquired(Ok(Acquire::Held {
                                holder,
                                epoch,
                                expires_in,
                            }))) => LeaseInput::HeldElsewhere {
                                holder,
                                epoch,
                                expires_in,
                            },
                            Some(Reply::Acquired(Err(e))) => LeaseInput::Failed {
                                error: e.to_string(),
                            },
                            other => LeaseInput::Failed {
                                error: format!("journal thread: unexpected {other:?}"),
                            },
                        }
                    }
                    // The leader renews while it serves: the answer comes
                    // back through the loop.
                    LeaseAction::Renew { .. } => {
                        w.send(Request::Renew { ttl });
                        continue;
                    }
                    LeaseAction::Release { epoch } => {
                        match w.call(Request::Release) {
                            Some(Reply::Released(Ok(()))) => {
                                log::info!("leader lease (epoch {epoch}) released")
                            }
                            Some(Reply::Released(Err(e))) => log::warn!(
                                "could not release the leader lease (epoch {epoch}): {e}; \
                                 a standby takes over when it expires"
                            ),
                            _ => {}
                        }
                        continue;
                    }
                    LeaseAction::Serve { epoch } => {
                        log::info!("leader lease taken (epoch {epoch}, holder {})", self.holder);
                        outcome.serve = Some(epoch);
                        continue;
                    }
                    LeaseAction::StepDown { epoch, reason } => {
                        log::warn!("leader lease (epoch {epoch}) lost: {reason}");
                        w.send(Request::ForgetLease);
                        outcome.serve = None;
                        outcome.step_down = Some(reason);
                        continue;
                    }
                };
                self.lease.handle(input, self.start.elapsed(), &mut actions);
            }
        }
        outcome
    }
}
