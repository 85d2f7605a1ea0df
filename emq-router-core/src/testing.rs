//! The one test driver of the router core: how a test carries the core
//! through its inputs, on a clock it owns.
//!
//! Rule: a driver carries out the actions of one call in order. A send
//! that fails goes back in at once as `SendFailed`, its actions after the
//! ones already there; a journal batch goes to the store, whose outcome
//! goes back in as `JournalDone` — at once, or later when the store
//! answers later; once every action is carried out, `Flushed` follows if
//! sends were handed out (its actions carried out in turn), unless the
//! router has exited; timers run only when due. The order is: input, its
//! journal outcomes, `Flushed`, timers. Tests choose only what their
//! world does with a send or a batch ([`Effects`]), when `Flushed`
//! follows ([`Flush`]: after the call's actions; before the next input,
//! so that a test can report failed sends itself; or after a batch of
//! inputs, as a driver that reads many messages), and whether the open
//! journal batch is emitted at once instead of on the group-commit timer
//! ([`Driver::commit_at_once`]). Used by the core's unit tests, the
//! property tests, the examples and the two-core simulation of the
//! integration tests (feature `testing`).

use std::time::Duration;

use crate::event::{Action, Input, SendFailure, Socket};
use crate::journal::{Batch, BatchResult};
use crate::Router;

/// The frames of a message from (or to) `identity`: the routing envelope,
/// `eMQP/1.0`, then `parts` (command, msgid, ...).
pub fn frames(identity: &[u8], parts: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut f = vec![identity.to_vec(), vec![], b"eMQP/1.0".to_vec()];
    f.extend(parts.iter().map(|p| p.to_vec()));
    f
}

/// What the test's world does with the router's actions.
pub trait Effects {
    /// Carry out one send; `Err` when it failed (fed back as `SendFailed`).
    fn send(
        &mut self,
        _now: Duration,
        _socket: Socket,
        _identity: &[u8],
        _frames: &[Vec<u8>],
    ) -> Result<(), SendFailure> {
        Ok(())
    }

    /// Hand a batch to the store: its outcome now, or `None` when the
    /// store answers later (the test then feeds `Input::JournalDone`).
    fn journal(&mut self, now: Duration, batch: &Batch) -> Option<BatchResult>;

    /// The router asked to exit.
    fn exit(&mut self, _now: Duration) {}
}

/// A store that commits every batch at once and keeps nothing.
#[derive(Debug, Default)]
pub struct CommitAll;

impl Effects for CommitAll {
    fn journal(&mut self, _now: Duration, _batch: &Batch) -> Option<BatchResult> {
        Some(BatchResult::Committed)
    }
}

/// When `Flushed` follows the sends of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// Once the call's actions are carried out (failed sends were reported
    /// by [`Effects::send`]).
    AfterActions,
    /// Before the next input or timeout that is not itself a report of the
    /// last call (`SendFailed`, `JournalDone`): the test reports failed
    /// sends in between.
    BeforeNext,
    /// When the caller calls [`Driver::flushed`], after a batch of inputs
    /// (as a driver that reads many messages before it flushes).
    Batched,
}

/// The rules of driving a router, and what they keep between calls (the
/// router is the caller's, passed to every call).
#[derive(Debug)]
pub struct Driver {
    flush: Flush,
    /// Emit the open journal batch at the end of every call, whatever the
    /// group-commit timing says (its timing has tests of its own).
    pub commit_at_once: bool,
    /// Check the router's invariants after every call into it.
    pub check: bool,
    /// Sends were handed out and `Flushed` has not followed yet.
    unflushed: bool,
    /// Actions carried out so far.
    actions: u64,
}

/// An invariant the router broke, and after what.
pub type Broken = String;

impl Driver {
    pub fn new(flush: Flush) -> Driver {
        Driver {
            flush,
            commit_at_once: false,
            check: true,
            unflushed: false,
            actions: 0,
        }
    }

    /// Actions carried out so far (a position in the router's action order).
    pub fn actions(&self) -> u64 {
        self.actions
    }

    /// Feed one input and carry out its actions; every action is also
    /// appended to `out`.
    pub fn input(
        &mut self,
        r: &mut Router,
        input: Input,
        now: Duration,
        fx: &mut impl Effects,
        out: &mut Vec<Action>,
    ) -> Result<(), Broken> {
        if self.flush == Flush::BeforeNext
            && !matches!(input, Input::SendFailed { .. } | Input::JournalDone { .. })
        {
            self.flushed(r, now, fx, out)?;
        }
        let start = out.len();
        r.handle(input, now, out);
        self.checked(r, || "an input".into())?;
        self.carry_out(r, start, now, fx, out)
    }

    /// Timers due at `now` (whether due or not), and their actions.
    pub fn timeout(
        &mut self,
        r: &mut Router,
        now: Duration,
        fx: &mut impl Effects,
        out: &mut Vec<Action>,
    ) -> Result<(), Broken> {
        if self.flush == Flush::BeforeNext {
            self.flushed(r, now, fx, out)?;
        }
        let start = out.len();
        r.handle_timeout(now, out);
        self.checked(r, || "timers".into())?;
        self.carry_out(r, start, now, fx, out)
    }

    /// Whether a timer is due at `now` on a router that has not exited.
    pub fn due(r: &Router, now: Duration) -> bool {
        !r.has_exited() && r.poll_timeout().is_some_and(|t| t <= now)
    }

    /// `Input::Flushed` if sends were handed out since the last one.
    pub fn flushed(
        &mut self,
        r: &mut Router,
        now: Duration,
        fx: &mut impl Effects,
        out: &mut Vec<Action>,
    ) -> Result<(), Broken> {
        if !std::mem::take(&mut self.unflushed) || r.has_exited() {
            return Ok(());
        }
        let start = out.len();
        r.handle(Input::Flushed, now, out);
        self.checked(r, || "Flushed".into())?;
        self.carry_out(r, start, now, fx, out)
    }

    fn checked(&self, r: &Router, what: impl FnOnce() -> String) -> Result<(), Broken> {
        if !self.check {
            return Ok(());
        }
        r.check_invariants()
            .map_err(|e| format!("invariant broken: {e} after {}", what()))
    }

    /// Carry out `out[start..]` in order, appending what each report back
    /// brings; then the open batch (`commit_at_once`) and `Flushed`
    /// (`Flush::AfterActions`). The other calls end with it; a test calls
    /// it for the actions of a call made outside the driver
    /// (`Router::restore`).
    pub fn carry_out(
        &mut self,
        r: &mut Router,
        start: usize,
        now: Duration,
        fx: &mut impl Effects,
        out: &mut Vec<Action>,
    ) -> Result<(), Broken> {
        let mut i = start;
        loop {
            if i == out.len() {
                if self.commit_at_once && r.config().journal {
                    r.flush_journal_now(now, out);
                    if i < out.len() {
                        continue;
                    }
                }
                if self.flush == Flush::AfterActions {
                    // Carries out its own actions, and `Flushed` again
                    // after their sends.
                    self.flushed(r, now, fx, out)?;
                }
                return Ok(());
            }
            self.actions += 1;
            match &out[i] {
                Action::Send {
                    socket,
                    identity,
                    frames,
                } => {
                    self.unflushed = true;
                    if let Err(reason) = fx.send(now, *socket, identity, frames) {
                        let failed = Input::SendFailed {
                            socket: *socket,
                            identity: identity.clone(),
                            reason,
                        };
                        r.handle(failed, now, out);
                        self.checked(r, || "a failed send".into())?;
                    }
                }
                Action::Journal(batch) => {
                    if let Some(result) = fx.journal(now, batch) {
                        let done = Input::JournalDone {
                            batch: batch.id,
                            result,
                        };
                        r.handle(done, now, out);
                        self.checked(r, || "a journal outcome".into())?;
                    }
                }
                Action::Exit => fx.exit(now),
                // A span is the driver's to export; nothing to feed back.
                Action::JobSpan(_) => {}
            }
            i += 1;
        }
    }
}
