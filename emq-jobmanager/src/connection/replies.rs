//! Replies: one REPLY per delivered job, kept until it is sent, and what
//! goes out at a flush point.
//!
//! The rules (tests in `tests/replies.rs`):
//! - Every delivered REQUEST gets exactly one `REPLY [payload, orig_msgid,
//!   status]` (`failed` with the error, `attempts: 1`, when it failed). It
//!   goes out at once on a connection the router listens on (registered,
//!   draining or leaving), after any REPLY queued before it; otherwise it
//!   waits for the next ACK.
//! - A result whose payload is bigger than `max_message_size` (the router
//!   disconnects a peer that sends a bigger frame) is replaced by a failed
//!   REPLY of kind `result-too-large` giving the size and the limit.
//! - Send failures: a REPLY that could not be sent is queued again, never
//!   dropped; a READY that could not be sent is no credit (the slot or
//!   window place is offered again). Both go out again at the next flush
//!   point: the next ACK, the next finished job, or the heartbeat deadline
//!   (in place of the HEARTBEAT).
//! - A flush point sends the queued REPLYs, then (registered) READYs up
//!   to `concurrency` + the credit window ([`window`](super::window)).
//! - **Credit in the REPLY**: to a router whose ACK listed `reply-credit`
//!   ([`FEATURE_REPLY_CREDIT`]), the READYs of a flush point that comes
//!   right after a REPLY (the last message out) go in that REPLY's credit
//!   frame instead of messages of their own — one message per finished
//!   job where there were two. The router counts them after the REPLY,
//!   as it would the READYs that follow it. Such a REPLY that cannot be
//!   sent takes its credit with it (each counts as a READY not sent); the
//!   copy kept for the resend window carries none. Any other router (a
//!   0.3.13 one) gets READY messages as before.
//!
//! [`FEATURE_REPLY_CREDIT`]: emqp_proto::command::FEATURE_REPLY_CREDIT
//! - After a reconnect the REPLYs of the resend window go out again to a
//!   router that takes them ([`resend`](super::resend)).

use std::time::Duration;

use emqp_proto::job::{ErrorKind, JobError, JobOutcome};
use emqp_proto::{Command, Message, Reply, ResultStatus};
use log::{debug, warn};

use super::slots::Slot;
use super::{Action, Connection, Phase};

impl Connection {
    /// The REPLY of a finished job: sent now on a connection the router
    /// listens on (after anything queued before it), else queued.
    pub(super) fn queue_or_send_reply(
        &mut self,
        msgid: &str,
        outcome: JobOutcome,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let reply = self.reply_message(msgid, outcome);
        match self.phase {
            Phase::Registered | Phase::Draining | Phase::ShuttingDown { .. } => {
                self.pending_replies.push_back(reply);
                while let Some(r) = self.pending_replies.pop_front() {
                    self.send_message(r, now, out);
                }
            }
            _ => {
                debug!(msgid:% = msgid; "result of {msgid} queued until the router ACKs us");
                self.pending_replies.push_back(reply);
            }
        }
    }

    /// `REPLY [payload, msgid, status]`; a payload over the router's limit
    /// becomes a `result-too-large` failure.
    fn reply_message(&mut self, msgid: &str, outcome: JobOutcome) -> Message {
        let mut outcome = outcome;
        if let JobOutcome::Error(e) = &mut outcome {
            e.attempts = Some(1);
        }
        let mut payload = outcome.to_payload();
        if let Some(limit) = self.cfg.max_message_size {
            if payload.len() > limit {
                warn!(
                    msgid:% = msgid;
                    "result of job {msgid} is {} bytes, over the maximum message size of \
                     {limit} bytes; replying failed (result-too-large) instead",
                    payload.len()
                );
                let mut e = JobError::new(
                    ErrorKind::ResultTooLarge,
                    format!(
                        "the job's result is {} bytes, larger than the maximum message size \
                         of {limit} bytes",
                        payload.len()
                    ),
                );
                e.attempts = Some(1);
                outcome = JobOutcome::Error(e);
                payload = outcome.to_payload();
            }
        }
        let status = if outcome.is_ok() {
            ResultStatus::Ok
        } else {
            ResultStatus::Failed
        };
        Message::with_msgid(
            self.ids.next_id(),
            Command::Reply(Reply::result(payload, msgid.to_string(), status)),
        )
    }

    /// Send queued REPLYs, and (registered) READYs up to `concurrency` +
    /// the window: one for every free slot without one, and as many more
    /// as the window allows. Whether anything was sent.
    pub(super) fn flush(&mut self, now: Duration, out: &mut Vec<Action>) -> bool {
        let before = out.len();
        if matches!(
            self.phase,
            Phase::Registered | Phase::Draining | Phase::ShuttingDown { .. }
        ) {
            while let Some(reply) = self.pending_replies.pop_front() {
                self.send_message(reply, now, out);
            }
        }
        if self.phase == Phase::Registered {
            let concurrency = self.cfg.concurrency;
            let running_since = self.slots.iter().filter_map(|s| match s {
                Slot::Busy(r) => Some(r.started),
                Slot::Free => None,
            });
            let extra = self.window.extra(concurrency, running_since, now);
            let have = self.busy() + self.held.len() + self.window.credit();
            let readies = (concurrency + extra).saturating_sub(have);
            for _ in 0..readies {
                self.window.ready_sent(now);
            }
            let in_reply = match out.last_mut() {
                Some(Action::Send(Message {
                    command: Command::Reply(r),
                    ..
                })) if self.router_takes_credit && readies > 0 && r.status.is_some() => Some(r),
                _ => None,
            };
            if let Some(r) = in_reply {
                r.credit += u32::try_from(readies).unwrap_or(u32::MAX);
            } else {
                for _ in 0..readies {
                    self.send(Command::Ready, now, out);
                }
            }
        }
        out.len() > before
    }

    /// The REPLYs of the resend window again, as they were sent (the
    /// router takes each at most once); they stay kept. How many.
    pub(super) fn resend_replies(&mut self, now: Duration, out: &mut Vec<Action>) -> usize {
        if !self.router_resends {
            return 0;
        }
        let copies = self.sent_replies.in_window(now);
        let n = copies.len();
        if n > 0 {
            self.last_sent = now;
            out.extend(copies.into_iter().map(Action::Send));
        }
        n
    }

    pub(super) fn on_send_failed(&mut self, mut message: Message) {
        match &mut message.command {
            Command::Reply(r) => {
                warn!(
                    msgid:% = message.msgid;
                    "a REPLY ({}) could not be sent; queued to be sent again",
                    message.msgid
                );
                // Its credit was READYs not sent.
                for _ in 0..std::mem::take(&mut r.credit) {
                    self.window.ready_failed();
                }
                self.sent_replies.unsent(&message.msgid);
                self.pending_replies.push_back(message);
            }
            Command::Ready => {
                // Any outstanding READY stands for any free slot.
                if self.window.ready_failed() {
                    warn!("a READY could not be sent; it will be offered again");
                } else {
                    debug!("a READY could not be sent; no credit was counting on it");
                }
            }
            Command::Heartbeat { .. } => debug!("a HEARTBEAT could not be sent"),
            Command::Progress(p) => debug!(
                msgid:% = p.orig_msgid;
                "a PROGRESS of job {} could not be sent (the next one replaces it)",
                p.orig_msgid
            ),
            other => warn!("{} could not be sent (its timer covers it)", other.name()),
        }
    }
}
