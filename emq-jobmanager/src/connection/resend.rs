//! REPLYs sent again after a reconnect (emq routers only).
//!
//! The rule (docs/PROTOCOL.md, "Link resets"):
//! - A REPLY handed to the socket can still be lost: with the TCP
//!   connection that carried it (a reset that libzmq heals under the same
//!   routing id, so neither side sees a silence), or with a connection
//!   that died unnoticed for up to interval × liveness. Its job would then
//!   stay in flight at the router until the router drops this identity,
//!   and then run a second time.
//! - So the core keeps a copy of every REPLY it sent during the last
//!   interval × liveness (the time a dead connection can go unnoticed)
//!   plus the ACK timeout (the wait for the ACK of the next connection,
//!   after which the copies go out: without it, a REPLY lost just before
//!   the router fell silent would be too old once the ACK came), bounded
//!   by [`Config::resend_max_replies`] and
//!   [`Config::resend_max_bytes`] of payload: beyond that the oldest
//!   copies are forgotten (counted, and logged at most once per
//!   [`FORGOTTEN_LOG_EVERY`]). A forgotten job is not lost: the router
//!   redelivers the jobs of the identity it dropped (at least once).
//! - After a reconnect (a link down, the router silent, the router's
//!   KBYE, no ACK), once the new INFORM is ACKed, the copies still in
//!   their window go out again on the new connection, as they were (same
//!   msgid), before the queued REPLYs and the READYs. On a link down
//!   while leaving (SIGTERM: the connection is kept, libzmq reconnects it
//!   under the same identity) they go out again on the same connection.
//! - Only to a router whose ACK listed `reply-resend`
//!   ([`FEATURE_REPLY_RESEND`]): an emq router takes a REPLY it already
//!   took (same msgid, or a job that finished) at most once, while a
//!   0.3.13 router would forward a duplicate to the client. Copies are
//!   kept only while connected to such a router, and dropped when the
//!   next router does not list it.
//! - A REPLY whose send failed is not a copy: it waits in the queue of
//!   REPLYs to send, and becomes a copy when it is sent.
//!
//! [`Config::resend_max_replies`]: super::Config::resend_max_replies
//! [`Config::resend_max_bytes`]: super::Config::resend_max_bytes
//! [`FEATURE_REPLY_RESEND`]: emqp_proto::command::FEATURE_REPLY_RESEND

use std::collections::VecDeque;
use std::time::Duration;

use emqp_proto::{Command, Message};
use log::info;

/// At most one log line about forgotten copies per this long.
pub const FORGOTTEN_LOG_EVERY: Duration = Duration::from_secs(60);

/// How long a copy is kept: heartbeat interval × liveness + ACK timeout
/// (see the module documentation).
pub fn window(cfg: &super::Config) -> Duration {
    cfg.heartbeat_interval
        .saturating_mul(cfg.heartbeat_liveness.max(1))
        .saturating_add(cfg.ack_timeout)
}

/// The REPLYs sent in the resend window, oldest first.
#[derive(Debug)]
pub(super) struct SentReplies {
    /// How long a copy is kept ([`window`]).
    window: Duration,
    max_replies: usize,
    max_bytes: usize,
    /// `(sent at, the REPLY as sent)`.
    copies: VecDeque<(Duration, Message)>,
    /// Payload bytes of `copies`.
    bytes: usize,
    /// Copies dropped for the bounds before their window ended.
    forgotten: u64,
    /// Of those, not logged yet.
    unlogged: u64,
    last_logged: Option<Duration>,
}

fn payload_len(m: &Message) -> usize {
    match &m.command {
        Command::Reply(r) => r.payload.len(),
        _ => 0,
    }
}

/// `into` becomes a copy of `from`, reusing `into`'s buffers when both
/// are REPLYs.
fn copy_into(into: &mut Message, from: &Message) {
    into.msgid.clone_from(&from.msgid);
    match (&mut into.command, &from.command) {
        (Command::Reply(a), Command::Reply(b)) => {
            a.payload.clone_from(&b.payload);
            a.orig_msgid.clone_from(&b.orig_msgid);
            a.status = b.status;
            // A REPLY sent again never carries credit: its READYs were
            // for the connection it first went out on.
            a.credit = 0;
        }
        (a, b) => *a = b.clone(),
    }
}

impl SentReplies {
    pub(super) fn new(window: Duration, max_replies: usize, max_bytes: usize) -> SentReplies {
        SentReplies {
            window,
            max_replies,
            max_bytes,
            copies: VecDeque::new(),
            bytes: 0,
            forgotten: 0,
            unlogged: 0,
            last_logged: None,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.copies.len()
    }

    /// Copies dropped for the bounds so far.
    pub(super) fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// Keep a copy of `reply`, sent now; the oldest go when over a bound.
    pub(super) fn keep(&mut self, reply: &Message, now: Duration) {
        self.expire(now);
        let len = payload_len(reply);
        if self.max_replies == 0 || len > self.max_bytes {
            self.note_forgotten(1, now);
            return;
        }
        let mut dropped = 0;
        // The last copy forgotten holds the new one: at the bound (many
        // jobs a second) a copy then costs no allocation.
        let mut spare = None;
        while self.copies.len() >= self.max_replies || self.bytes + len > self.max_bytes {
            let Some((_, old)) = self.copies.pop_front() else {
                break;
            };
            self.bytes -= payload_len(&old);
            dropped += 1;
            spare = Some(old);
        }
        self.note_forgotten(dropped, now);
        self.bytes += len;
        let copy = match spare {
            Some(mut m) => {
                copy_into(&mut m, reply);
                m
            }
            None => reply.clone(),
        };
        self.copies.push_back((now, copy));
    }

    /// A REPLY whose send failed is not a copy (it is queued to be sent).
    pub(super) fn unsent(&mut self, msgid: &str) {
        if let Some(i) = self.copies.iter().rposition(|(_, m)| m.msgid == msgid) {
            if let Some((_, m)) = self.copies.remove(i) {
                self.bytes -= payload_len(&m);
            }
        }
    }

    /// Drop the copies whose window ended.
    pub(super) fn expire(&mut self, now: Duration) {
        while let Some((sent, m)) = self.copies.front() {
            if now.saturating_sub(*sent) <= self.window {
                break;
            }
            self.bytes -= payload_len(m);
            self.copies.pop_front();
        }
    }

    /// The copies still in their window, oldest first (they stay kept: a
    /// resend can be lost too).
    pub(super) fn in_window(&mut self, now: Duration) -> Vec<Message> {
        self.expire(now);
        self.copies.iter().map(|(_, m)| m.clone()).collect()
    }

    /// Forget every copy (the router does not take resent REPLYs).
    pub(super) fn clear(&mut self) {
        self.copies.clear();
        self.bytes = 0;
    }

    fn note_forgotten(&mut self, n: u64, now: Duration) {
        if n == 0 {
            return;
        }
        self.forgotten += n;
        self.unlogged += n;
        let due = match self.last_logged {
            None => true,
            Some(t) => now.saturating_sub(t) >= FORGOTTEN_LOG_EVERY,
        };
        if due {
            info!(
                "{} REPLY copy(ies) forgotten before their resend window of {:?} ended (at most \
                 {} REPLYs and {} bytes are kept); if the link drops now, the router redelivers \
                 those jobs instead",
                self.unlogged, self.window, self.max_replies, self.max_bytes
            );
            self.unlogged = 0;
            self.last_logged = Some(now);
        }
    }
}
