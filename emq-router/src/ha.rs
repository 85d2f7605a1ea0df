//! The PostgreSQL journal with its leader lease, as one journal port: it
//! carries out what `emq_router_core::lease` asks (take, renew, release)
//! through the journal thread (`pg_writer.rs`) and feeds the outcomes
//! back; waits as a standby — no socket bound — until the lease is ours;
//! while serving, its timers join the loop's one deadline and a lost
//! lease comes out as [`Event::StepDown`]. The timing rules live in the
//! core's `lease.rs`.

use std::time::{Duration, Instant};

use emq_journal::postgres::{Acquire, PgError};
use emq_router_core::journal::{Batch, BatchResult, Restored};
use emq_router_core::lease::{Lease, LeaseAction, LeaseConfig, LeaseInput, StepDownReason};
use emq_transport::ShutdownSignal;

use crate::journal_port::{Event, JournalPort, LoadError};
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
struct Outcome {
    /// The lease is ours at this epoch: load and serve.
    serve: Option<u64>,
    /// Stop serving now.
    step_down: Option<StepDownReason>,
}

/// The PostgreSQL journal thread and the lease core that decides when
/// this router may use it.
pub(crate) struct LeasedPg {
    lease: Lease,
    w: PgWriter,
    holder: String,
    start: Instant,
}

impl LeasedPg {
    pub(crate) fn new(w: PgWriter, cfg: LeaseConfig, start: Instant) -> LeasedPg {
        LeasedPg {
            lease: Lease::new(cfg, start.elapsed()),
            w,
            holder: holder_id(),
            start,
        }
    }

    pub(crate) fn holder(&self) -> &str {
        &self.holder
    }

    /// Wait as a standby until this router holds the lease (its epoch), or
    /// until a shutdown signal (`None`). Sleeps until the lease's next
    /// timer or a signal; the journal thread's calls are waited for here
    /// (nothing else is going on).
    pub(crate) fn wait_for_lease(&mut self, signals: &ShutdownSignal) -> Option<u64> {
        self.w.drain();
        loop {
            if signals.requested() {
                self.shutdown();
                return None;
            }
            let o = self.due();
            if let Some(epoch) = o.serve {
                return Some(epoch);
            }
            let now = self.start.elapsed();
            let wait = self
                .lease
                .poll_timeout()
                .map_or(Duration::from_secs(1), |t| t.saturating_sub(now));
            let mut items = [signals.poll_item()];
            let _ = emq_transport::poll::poll(&mut items, Some(wait));
        }
    }

    /// Timers due now (renewal, expiry, a standby's try), carried out. A
    /// renewal is handed to the journal thread; its reply comes back
    /// through [`LeasedPg::renewed`].
    fn due(&mut self) -> Outcome {
        let now = self.start.elapsed();
        let mut actions = Vec::new();
        if self.lease.poll_timeout().is_some_and(|t| t <= now) {
            self.lease.handle_timeout(now, &mut actions);
        }
        self.carry_out(actions)
    }

    /// The journal thread's answer to a renewal.
    fn renewed(&mut self, result: Result<(), PgError>) -> Outcome {
        let input = match result {
            Ok(()) => LeaseInput::Renewed,
            Err(e) if e.is_fenced() => LeaseInput::Fenced,
            Err(e) => LeaseInput::Failed {
                error: e.to_string(),
            },
        };
        self.feed(input)
    }

    fn feed(&mut self, input: LeaseInput) -> Outcome {
        let mut actions = Vec::new();
        self.lease.handle(input, self.start.elapsed(), &mut actions);
        self.carry_out(actions)
    }

    /// The router stops: release the lease if held (a standby takes over
    /// at its next try instead of waiting for the TTL).
    pub(crate) fn shutdown(&mut self) {
        self.feed(LeaseInput::Shutdown);
    }

    /// Step down on our own (the journal could not be loaded): give the
    /// lease up so that another router can try.
    fn give_up(&mut self) {
        if let Some(Reply::Released(Err(e))) = self.w.call(Request::Release) {
            log::warn!("could not release the lease: {e}");
        }
        self.lease = Lease::new(*self.lease.config(), self.start.elapsed());
    }

    fn carry_out(&mut self, mut actions: Vec<LeaseAction>) -> Outcome {
        let mut outcome = Outcome::default();
        let ttl = self.lease.config().ttl;
        while !actions.is_empty() {
            for a in std::mem::take(&mut actions) {
                let input = match a {
                    // Only a standby tries: nothing else is in flight, so
                    // the answer is waited for.
                    LeaseAction::TryAcquire => {
                        let holder = self.holder.clone();
                        match self.w.call(Request::TryAcquire { holder, ttl }) {
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
                        self.w.send(Request::Renew { ttl });
                        continue;
                    }
                    LeaseAction::Release { epoch } => {
                        match self.w.call(Request::Release) {
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
                        self.w.send(Request::ForgetLease);
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

impl JournalPort for LeasedPg {
    fn describe(&self) -> String {
        self.w.describe().to_string()
    }

    /// A standby that took over must have the journal before it binds; a
    /// journal it cannot read makes it give the lease up.
    fn load(&mut self) -> Result<Option<Restored>, LoadError> {
        match self.w.call(Request::Load) {
            Some(Reply::Loaded(Ok(r))) => Ok(Some(r)),
            other => {
                let e = match other {
                    Some(Reply::Loaded(Err(e))) => e.to_string(),
                    other => format!("journal thread: unexpected {other:?}"),
                };
                log::error!(
                    "cannot load the journal after taking the lease: {e}; giving the lease up"
                );
                self.give_up();
                Err(LoadError::GaveUp)
            }
        }
    }

    /// Every commit goes through the journal thread; the outcome comes
    /// back through [`JournalPort::next_event`].
    fn append(&mut self, batch: Batch) {
        self.w.send(Request::Append(batch));
    }

    /// The lease first: a router whose lease ran out must not take in (or
    /// answer) anything more. Then what the journal thread did.
    fn next_event(&mut self) -> Option<Event> {
        if let Some(reason) = self.due().step_down {
            return Some(Event::StepDown(reason));
        }
        while let Some(reply) = self.w.try_recv() {
            match reply {
                // Taken over: the batch is neither acknowledged nor
                // refused; the router steps down.
                Reply::Appended { result: Err(e), .. } if e.is_fenced() => {
                    let reason = self.feed(LeaseInput::Fenced).step_down;
                    return Some(Event::StepDown(reason.unwrap_or(StepDownReason::Fenced)));
                }
                Reply::Appended { batch, result, .. } => {
                    let result = match result {
                        Ok(()) => BatchResult::Committed,
                        // The connection broke while the commit was on
                        // its way: its jobs may run (journal-uncertain).
                        Err(e) if e.may_have_committed() => BatchResult::Uncertain(e.to_string()),
                        Err(e) => BatchResult::Failed(e.to_string()),
                    };
                    return Some(Event::Done { batch, result });
                }
                Reply::Renewed(r) => {
                    if let Some(reason) = self.renewed(r).step_down {
                        return Some(Event::StepDown(reason));
                    }
                }
                other => log::debug!("journal thread: {other:?} ignored"),
            }
        }
        None
    }

    fn poll_item(&self) -> Option<zmq::PollItem<'static>> {
        Some(self.w.poll_item())
    }

    fn deadline(&self) -> Option<Duration> {
        self.lease.poll_timeout()
    }

    fn counts(&self) -> Option<(u64, u64)> {
        Some((self.w.batches, self.w.records))
    }

    fn stop(&mut self) {
        self.shutdown();
    }
}
