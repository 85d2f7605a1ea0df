//! What a client keeps to recover from a lost connection, and when it
//! sends it again: a sans-IO core (no socket, no clock: time is a
//! parameter), driven by [`crate::client::Client`].
//!
//! **The rule** (docs/PROTOCOL.md, "Failover"): every REQUEST, SCHEDULE
//! and UNSCHEDULE is kept, frames and msgid, until the router answers it
//! (ack, REJECT or RESULT). Once a connection serves after one was lost,
//! the client says hello (`HEARTBEAT`: the router sends again the results
//! it holds for this identity) and sends every unanswered message again,
//! in the order they were first sent, under the same msgid:
//! - at once when a connection comes up after one went down (a router
//!   restarted, or a standby took over after the leader's connection was
//!   dropped);
//! - [`SETTLE`] after a connection that was up goes down **while another
//!   still is** — a failover list whose leader froze: the standby took the
//!   lease and serves (its connection came up) before the heartbeat gave
//!   up on the frozen leader's connection; what went into that connection
//!   (the DEALER spreads messages over every live connection) goes to the
//!   router that serves. The pause lets libzmq drop the dead connection's
//!   pipe first: it does so a moment after reporting the drop, and a
//!   message sent in between could go into that pipe and be lost.
//!
//! A `REJECT duplicate-msgid` for a message sent again (after a reconnect,
//! or after a `journal-uncertain` answer) means the router had taken it:
//! it is reported as accepted. The router treats the same msgid as the
//! same job, so nothing runs twice because of a resend (the at-least-once
//! rule of docs/PROTOCOL.md still applies to the run itself).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use emq_transport::LinkEvent;
use emqp_proto::RejectReason;

use crate::event::Event;

/// Time between a connection's drop (another still up) and sending again
/// what was not answered (see the module documentation).
pub const SETTLE: Duration = Duration::from_millis(200);

/// Messages to send again now, after the hello, on `endpoint`'s side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Again {
    /// The connection that serves (the one that came up, or one still up).
    pub endpoint: String,
    /// Every unanswered message, in the order first sent.
    pub messages: Vec<Vec<Vec<u8>>>,
}

/// The client's books (see the module documentation).
#[derive(Debug, Default)]
pub struct Track {
    /// Keep unanswered messages (off for fire and forget).
    enabled: bool,
    /// Unanswered REQUEST / SCHEDULE / UNSCHEDULE frames by msgid, with
    /// their send order.
    unanswered: HashMap<String, (u64, Vec<Vec<u8>>)>,
    order: BTreeMap<u64, String>,
    next: u64,
    /// msgids sent again (after a reconnect or a `journal-uncertain`).
    resent: HashSet<String>,
    /// RESULTs to confirm with RECEIVED.
    receipts: Vec<String>,
    /// A connection went down since unanswered messages were last sent.
    lost: bool,
    /// A connection has been up at least once.
    connected: bool,
    /// Connections up now, by endpoint.
    up: BTreeSet<String>,
    /// When to send again after a drop while another connection is up.
    again_at: Option<Instant>,
}

impl Track {
    /// Books that keep unanswered messages.
    pub fn new() -> Track {
        Track {
            enabled: true,
            ..Track::default()
        }
    }

    /// Keep unanswered messages or not (forgetting those kept).
    pub fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
        if !on {
            self.unanswered.clear();
            self.order.clear();
        }
    }

    /// A message that the router answers was sent: keep it until then.
    pub fn sent(&mut self, msgid: &str, frames: &[Vec<u8>]) {
        if !self.enabled {
            return;
        }
        if let Some((seq, _)) = self.unanswered.remove(msgid) {
            self.order.remove(&seq);
        }
        let seq = self.next;
        self.next += 1;
        self.order.insert(seq, msgid.to_string());
        self.unanswered
            .insert(msgid.to_string(), (seq, frames.to_vec()));
    }

    /// A connection has been up at least once (a router, or something
    /// speaking ZMTP, answered at an address).
    pub fn ever_connected(&self) -> bool {
        self.connected
    }

    /// How many messages wait for an answer.
    pub fn unanswered(&self) -> usize {
        self.unanswered.len()
    }

    /// Keep the books of one event from the router; the event as the
    /// caller should see it (a `duplicate-msgid` for a message sent again
    /// is an acceptance).
    pub fn noted(&mut self, ev: Event) -> Event {
        let ev = match ev {
            // Says nothing of whether the REQUEST was answered.
            Event::Notice(_) => return ev,
            Event::Rejected {
                msgid,
                reason: RejectReason::DuplicateMsgid,
                ..
            } if self.resent.contains(&msgid) => Event::Accepted { msgid },
            other => other,
        };
        if let Some(m) = ev.msgid() {
            let m = m.to_string();
            if let Some((seq, _)) = self.unanswered.remove(&m) {
                self.order.remove(&seq);
            }
            match &ev {
                Event::Accepted { .. } | Event::Duplicate { .. } => {}
                // Sent again by the caller: a later duplicate-msgid means
                // the router had stored it.
                Event::Rejected {
                    reason: RejectReason::JournalUncertain,
                    ..
                } => {
                    self.resent.insert(m.clone());
                }
                _ => {
                    self.resent.remove(&m);
                }
            }
            if matches!(ev, Event::Result { .. }) {
                self.receipts.push(m);
            }
        }
        ev
    }

    /// RESULTs read and not confirmed yet.
    pub fn receipts(&self) -> usize {
        self.receipts.len()
    }

    /// Take the RESULTs to confirm now.
    pub fn take_receipts(&mut self) -> Vec<String> {
        std::mem::take(&mut self.receipts)
    }

    /// A connection came up or went down at `now`: what to send again at
    /// once, if anything (see the module documentation; a drop while
    /// another connection is up is sent again at [`Track::wake_at`]).
    pub fn link(&mut self, ev: LinkEvent, now: Instant) -> Option<Again> {
        match ev {
            LinkEvent::Up(endpoint) => {
                self.up.insert(endpoint.clone());
                let first = !self.connected;
                self.connected = true;
                if first || !self.lost {
                    return None;
                }
                Some(self.send_again(endpoint))
            }
            LinkEvent::Down(endpoint) => {
                let was_up = self.up.remove(&endpoint);
                self.lost = true;
                if was_up && !self.up.is_empty() {
                    self.again_at = Some(now + SETTLE);
                }
                None
            }
        }
    }

    /// When [`Track::due`] has something to send, if ever.
    pub fn wake_at(&self) -> Option<Instant> {
        self.again_at
    }

    /// What to send again at `now` after a drop while another connection
    /// was up (see [`Track::link`]).
    pub fn due(&mut self, now: Instant) -> Option<Again> {
        let at = self.again_at?;
        if now < at {
            return None;
        }
        self.again_at = None;
        if !self.lost {
            return None; // sent already, on a connection that came up
        }
        // Nothing up: the next connection to come up sends.
        let endpoint = self.up.first()?.clone();
        Some(self.send_again(endpoint))
    }

    fn send_again(&mut self, endpoint: String) -> Again {
        self.lost = false;
        self.again_at = None;
        let mut messages = Vec::with_capacity(self.order.len());
        for m in self.order.values() {
            if let Some((_, f)) = self.unanswered.get(m) {
                self.resent.insert(m.clone());
                messages.push(f.clone());
            }
        }
        Again { endpoint, messages }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(e: &str) -> LinkEvent {
        LinkEvent::Up(e.into())
    }

    fn down(e: &str) -> LinkEvent {
        LinkEvent::Down(e.into())
    }

    fn frames(m: &str) -> Vec<Vec<u8>> {
        vec![b"REQUEST".to_vec(), m.as_bytes().to_vec()]
    }

    fn track_with(msgids: &[&str]) -> Track {
        let mut t = Track::new();
        for m in msgids {
            t.sent(m, &frames(m));
        }
        t
    }

    fn accepted(m: &str) -> Event {
        Event::Accepted { msgid: m.into() }
    }

    fn rejected(m: &str, reason: RejectReason) -> Event {
        Event::Rejected {
            msgid: m.into(),
            reason,
            text: String::new(),
        }
    }

    #[test]
    fn a_reconnect_after_a_loss_sends_every_unanswered_message_in_order() {
        let t0 = Instant::now();
        let mut t = track_with(&[]);
        assert_eq!(t.link(up("A"), t0), None, "the first connection");
        for m in ["m1", "m2", "m3"] {
            t.sent(m, &frames(m));
        }
        assert_eq!(t.noted(accepted("m2")), accepted("m2"));
        assert_eq!(t.link(down("A"), t0), None);
        assert_eq!(t.wake_at(), None, "nothing else up: wait for a connection");
        let again = t.link(up("B"), t0).expect("sent again on B");
        assert_eq!(again.endpoint, "B");
        assert_eq!(again.messages, [frames("m1"), frames("m3")]);
        // A duplicate-msgid for one sent again: the router had it.
        assert_eq!(
            t.noted(rejected("m1", RejectReason::DuplicateMsgid)),
            accepted("m1")
        );
        assert_eq!(t.unanswered(), 1);
        assert_eq!(t.link(up("A"), t0), None, "no loss since: nothing again");
    }

    /// Issue 26 item 2: the standby's connection comes up while the frozen
    /// leader's is still up; when the heartbeat drops the leader's, what
    /// was not answered goes again after SETTLE, to the standby.
    #[test]
    fn a_drop_while_another_connection_is_up_sends_again_after_settle() {
        let t0 = Instant::now();
        let mut t = track_with(&[]);
        assert_eq!(t.link(up("A"), t0), None);
        t.sent("m1", &frames("m1"));
        assert_eq!(t.link(up("B"), t0), None, "no loss: nothing again");
        t.sent("m2", &frames("m2"));
        let dropped = t0 + Duration::from_secs(3);
        assert_eq!(t.link(down("A"), dropped), None, "not at once");
        assert_eq!(t.wake_at(), Some(dropped + SETTLE));
        assert_eq!(t.due(dropped + SETTLE - Duration::from_millis(1)), None);
        let again = t.due(dropped + SETTLE).expect("sent again once settled");
        assert_eq!(again.endpoint, "B");
        assert_eq!(again.messages, [frames("m1"), frames("m2")]);
        assert_eq!(t.wake_at(), None);
        assert_eq!(t.due(dropped + SETTLE * 2), None, "once");
    }

    /// A and B up, m1 sent, A dropped at `t0`.
    fn a_dropped_with_b_up(t0: Instant) -> Track {
        let mut t = track_with(&[]);
        t.link(up("A"), t0);
        t.link(up("B"), t0);
        t.sent("m1", &frames("m1"));
        t.link(down("A"), t0);
        t
    }

    #[test]
    fn a_connection_up_before_the_settle_time_sends_at_once_and_only_once() {
        let t0 = Instant::now();
        let mut t = a_dropped_with_b_up(t0);
        let again = t.link(up("A"), t0 + Duration::from_millis(50));
        assert_eq!(again.map(|a| a.messages), Some(vec![frames("m1")]));
        assert_eq!(t.due(t0 + SETTLE), None);
    }

    #[test]
    fn a_drop_of_the_last_connection_waits_for_the_next_one() {
        let t0 = Instant::now();
        let mut t = a_dropped_with_b_up(t0);
        t.link(down("B"), t0 + Duration::from_millis(10));
        assert_eq!(t.due(t0 + SETTLE), None, "nothing up");
        let again = t.link(up("B"), t0 + Duration::from_secs(1));
        assert_eq!(again.map(|a| a.endpoint), Some("B".to_string()));
    }

    #[test]
    fn journal_uncertain_then_duplicate_msgid_is_an_acceptance() {
        let mut t = track_with(&["m1", "m2"]);
        let ev = t.noted(rejected("m1", RejectReason::JournalUncertain));
        assert_eq!(ev, rejected("m1", RejectReason::JournalUncertain));
        t.sent("m1", &frames("m1"));
        assert_eq!(
            t.noted(rejected("m1", RejectReason::DuplicateMsgid)),
            accepted("m1")
        );
        // A duplicate-msgid for a message never sent again is a refusal.
        assert_eq!(
            t.noted(rejected("m2", RejectReason::DuplicateMsgid)),
            rejected("m2", RejectReason::DuplicateMsgid)
        );
        assert_eq!(t.unanswered(), 0);
    }

    #[test]
    fn results_are_confirmed_and_nothing_is_kept_when_disabled() {
        let mut t = track_with(&["m1"]);
        t.noted(Event::Result {
            msgid: "m1".into(),
            status: emqp_proto::ResultStatus::Ok,
            payload: vec![],
        });
        assert_eq!(t.take_receipts(), ["m1"]);
        assert_eq!(t.receipts(), 0);
        t.set_enabled(false);
        t.sent("m2", &frames("m2"));
        assert_eq!(t.unanswered(), 0);
    }
}
