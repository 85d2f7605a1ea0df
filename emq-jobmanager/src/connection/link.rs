//! The link: connecting, registering, heartbeats, and a connection lost.
//!
//! The rules (tests in `tests/link.rs`):
//! - connect → one INFORM `[queues, "worker", "job-ack,cancel"]`; no ACK within
//!   `ack_timeout` → a fresh connection (new identity, next broker), INFORM
//!   again. Said as a warning naming the address the first time at each
//!   address and then at attempts 2, 4, 8, ... with the count
//!   ([`no_router_note`]); the other attempts at DEBUG (no flood while
//!   no router runs).
//! - ACK → the REPLYs of the resend window again when the ACK lists
//!   `reply-resend` ([`resend`](super::resend)); `RUNNING [msgid...]`
//!   with the jobs still running from an earlier connection when it lists
//!   `adopt-running` (the router moves them onto this connection instead
//!   of delivering them again); queued REPLYs; then one READY per free
//!   slot. No waiting for a router HEARTBEAT (a 0.3.13 quirk).
//! - The ACK's `take-back=KEY` (an emq router's secret for this job
//!   manager) is kept and listed in the INFORM of every later connection
//!   (`job-ack,cancel,take-back=KEY`): only with it may the new identity
//!   take back the jobs that run across the reconnect (its REPLYs and
//!   RUNNING; docs/PROTOCOL.md, "Link resets"). It is never logged.
//! - Heartbeats every interval when nothing else was sent; any message from
//!   the router is a heartbeat; silence past interval × liveness
//!   ([`Liveness`](emqp_proto::heartbeat::Liveness)) → reconnect.
//! - Link down ([`Input::LinkDown`](super::Input::LinkDown) for the current connection; one for
//!   a connection already replaced is ignored): frames in transit on the
//!   TCP connection were lost and libzmq would heal it under the same
//!   identity, so neither side would notice. Registered or draining →
//!   the same as the router found silent: reconnect at once with a fresh
//!   identity to the next broker, INFORM, then (after the ACK) the
//!   REPLYs of the resend window, queued REPLYs and READYs for the free
//!   slots; running jobs keep running and reply on the new connection;
//!   the router drops the old identity at its next send to it and
//!   redelivers what it held there (a lost REQUEST). Waiting for an ACK →
//!   ignored: no slot was offered yet, and the ACK timeout covers a lost
//!   INFORM (a reconnect here would loop on a handshake that keeps
//!   failing). Leaving (shutdown) → the connection is kept (a new
//!   identity would make the router redeliver the running jobs) and the
//!   REPLYs of the resend window go out again on it.
//! - Malformed messages from the router are dropped and counted, with at
//!   most one warning per [`MALFORMED_LOG_EVERY`]; they are no sign of life.

use std::time::Duration;

use emqp_proto::command::{
    take_back_key, FEATURE_ADOPT_RUNNING, FEATURE_CANCEL, FEATURE_JOB_ACK, FEATURE_REPLY_CREDIT,
    FEATURE_REPLY_RESEND, FEATURE_TAKE_BACK,
};
use emqp_proto::heartbeat::timestamp_text;
use emqp_proto::{Command, Inform, Message, PeerType};
use log::{debug, info, warn};

use super::slots::Slot;
use super::{Action, Connection, Phase};

/// At most one warning about malformed messages per this long.
const MALFORMED_LOG_EVERY: Duration = Duration::from_secs(10);

/// Malformed messages from the router: counted, logged at most once per
/// [`MALFORMED_LOG_EVERY`].
#[derive(Debug, Default)]
pub(super) struct MalformedLog {
    pub(super) total: u64,
    unlogged: u64,
    last_logged: Option<Duration>,
}

impl Connection {
    pub(super) fn connect(&mut self, now: Duration, out: &mut Vec<Action>) {
        if self.connected_once {
            self.broker_index = (self.broker_index + 1) % self.cfg.brokers.len();
        }
        self.connected_once = true;
        self.identity = self.ids.next_id();
        self.router_resends = false;
        self.router_takes_credit = false;
        self.withdraw_readies();
        if !self.held.is_empty() {
            warn!(
                "dropping {} held job(s), not started: the router redelivers the jobs of the \
                 connection it lost (running them too would run them twice)",
                self.held.len()
            );
            self.held.clear();
        }
        let endpoint = self.cfg.brokers[self.broker_index].clone();
        if self.unanswered_informs == 0 {
            info!(
                "connecting to {endpoint} as {} ({} slot(s))",
                self.identity, self.cfg.concurrency
            );
        } else {
            debug!("connecting to {endpoint} as {}", self.identity);
        }
        out.push(Action::Connect {
            endpoint,
            identity: self.identity.clone(),
        });
        let inform = Command::Inform(Inform {
            queues: self.cfg.queues.clone(),
            peer_type: Some(PeerType::Worker),
            features: [FEATURE_JOB_ACK.to_string(), FEATURE_CANCEL.to_string()]
                .into_iter()
                .chain(
                    self.take_back
                        .as_ref()
                        .map(|k| format!("{FEATURE_TAKE_BACK}{k}")),
                )
                .chain(self.cfg.about.to_features())
                .collect(),
        });
        let inform_msgid = self.send(inform, now, out);
        self.phase = Phase::AwaitingAck {
            inform_msgid,
            since: now,
        };
        self.last_received = now;
    }

    /// No ACK for our INFORM within `ack_timeout`: say so (not every
    /// time, [`no_router_note`]) and connect again.
    pub(super) fn inform_unanswered(&mut self, now: Duration, out: &mut Vec<Action>) {
        self.unanswered_informs = self.unanswered_informs.saturating_add(1);
        let endpoint = self.endpoint().to_string();
        match no_router_note(
            &endpoint,
            self.unanswered_informs,
            self.cfg.brokers.len(),
            self.cfg.ack_timeout,
        ) {
            Some(note) => warn!("{note}"),
            None => debug!(
                "no ACK for our INFORM at {endpoint} (attempt {}): reconnecting",
                self.unanswered_informs
            ),
        }
        self.connect(now, out);
    }

    pub(super) fn reconnect(&mut self, now: Duration, why: &str, out: &mut Vec<Action>) {
        warn!(
            "{why}: reconnecting (was {} on {})",
            self.identity,
            self.endpoint()
        );
        self.connect(now, out);
    }

    /// The router forgot (or never got) our READYs.
    pub(super) fn withdraw_readies(&mut self) {
        self.window.withdraw();
    }

    /// Send `command` under a fresh msgid; returns the msgid.
    pub(super) fn send(
        &mut self,
        command: Command,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> String {
        let msg = Message::with_msgid(self.ids.next_id(), command);
        let msgid = msg.msgid.clone();
        self.send_message(msg, now, out);
        msgid
    }

    pub(super) fn send_message(&mut self, msg: Message, now: Duration, out: &mut Vec<Action>) {
        if self.router_resends && matches!(msg.command, Command::Reply(_)) {
            self.sent_replies.keep(&msg, now);
        }
        self.last_sent = now;
        out.push(Action::Send(msg));
    }

    pub(super) fn send_heartbeat(&mut self, now: Duration, out: &mut Vec<Action>) {
        let micros = self
            .cfg
            .unix_micros_at_start
            .saturating_add(now.as_micros() as u64);
        let hb = Command::Heartbeat {
            timestamp: Some(timestamp_text(micros)),
        };
        self.send(hb, now, out);
    }

    pub(super) fn on_message(&mut self, msg: Message, now: Duration, out: &mut Vec<Action>) {
        if !matches!(msg.command, Command::Heartbeat { .. }) {
            debug!("received {} {}", msg.command.name(), msg.msgid);
        }
        if !matches!(msg.command, Command::Disconnect) {
            self.last_received = now;
        }
        match msg.command {
            Command::Ack {
                acked_msgid,
                features,
            } => self.on_ack(&acked_msgid, &features, now, out),
            Command::Heartbeat { .. } => {}
            Command::Request(req) => self.on_request(msg.msgid, req, now, out),
            Command::Cancel { orig_msgid } => self.on_cancel(&orig_msgid, now, out),
            Command::Kbye | Command::Disconnect => {
                let said = if matches!(msg.command, Command::Kbye) {
                    "KBYE"
                } else {
                    "DISCONNECT"
                };
                self.on_router_leaving(said, now);
            }
            other => debug!("ignoring {} from the router", other.name()),
        }
    }

    pub(super) fn on_malformed(&mut self, why: &str, now: Duration) {
        let m = &mut self.malformed;
        m.total += 1;
        let due = match m.last_logged {
            None => true,
            Some(t) => now.saturating_sub(t) >= MALFORMED_LOG_EVERY,
        };
        if due {
            if m.unlogged > 0 {
                warn!(
                    "ignoring a malformed message from the router: {why} \
                     ({} more since the last warning)",
                    m.unlogged
                );
            } else {
                warn!("ignoring a malformed message from the router: {why}");
            }
            m.unlogged = 0;
            m.last_logged = Some(now);
        } else {
            m.unlogged += 1;
        }
    }

    fn on_ack(&mut self, acked: &str, features: &[String], now: Duration, out: &mut Vec<Action>) {
        let Phase::AwaitingAck { inform_msgid, .. } = &self.phase else {
            debug!("ignoring ACK of {acked}: not waiting for one");
            return;
        };
        if acked != inform_msgid {
            warn!("ACK names {acked}, our INFORM was {inform_msgid}; accepting it");
        }
        self.phase = Phase::Registered;
        if self.unanswered_informs > 0 {
            info!(
                "a router answered at {} after {} unanswered INFORM(s)",
                self.endpoint(),
                self.unanswered_informs
            );
            self.unanswered_informs = 0;
        }
        if let Some(key) = take_back_key(features) {
            self.take_back = Some(key.to_string());
        }
        self.router_resends = features.iter().any(|f| f == FEATURE_REPLY_RESEND);
        self.router_takes_credit = features.iter().any(|f| f == FEATURE_REPLY_CREDIT);
        if !self.router_resends && self.sent_replies.len() > 0 {
            debug!(
                "forgetting {} sent REPLY(s): this router does not take REPLYs sent again",
                self.sent_replies.len()
            );
            self.sent_replies.clear();
        }
        let resent = self.resend_replies(now, out);
        let running = if features.iter().any(|f| f == FEATURE_ADOPT_RUNNING) {
            self.announce_running(now, out)
        } else {
            0
        };
        info!(
            "registered with {} as {} ({} queued result(s), {resent} recent result(s) sent again, \
             {running} running job(s) announced)",
            self.endpoint(),
            self.identity,
            self.pending_replies.len()
        );
        self.flush(now, out);
    }

    /// `RUNNING [msgid...]`: the jobs still running from an earlier
    /// connection, so that the router moves them onto this one instead of
    /// delivering them again (see the module documentation). How many.
    fn announce_running(&mut self, now: Duration, out: &mut Vec<Action>) -> usize {
        let orig_msgids: Vec<String> = self
            .slots
            .iter()
            .filter_map(|s| match s {
                Slot::Busy(r) => Some(r.msgid.clone()),
                Slot::Free => None,
            })
            .collect();
        let n = orig_msgids.len();
        if n > 0 {
            self.send(Command::Running { orig_msgids }, now, out);
        }
        n
    }

    /// The socket lost its connection (see the module documentation).
    pub(super) fn on_link_down(&mut self, identity: &str, now: Duration, out: &mut Vec<Action>) {
        if identity != self.identity {
            debug!("link down of {identity}, a connection already replaced: ignored");
            return;
        }
        match self.phase {
            Phase::Registered | Phase::Draining => {
                self.reconnect(now, "connection to the router lost (link down)", out)
            }
            Phase::ShuttingDown { .. } => {
                let n = self.resend_replies(now, out);
                warn!(
                    "connection to the router lost while leaving; keeping {} (libzmq reconnects \
                     it), {n} recent result(s) sent again",
                    self.identity
                );
            }
            Phase::AwaitingAck { .. } => debug!(
                "link down before the ACK: ignored (the ACK timeout of {:?} covers it)",
                self.cfg.ack_timeout
            ),
            Phase::Waiting { .. } | Phase::Stopped => {
                debug!("link down while not connected to a router: ignored")
            }
        }
    }
}

/// The warning for the `attempt`-th INFORM in a row left without an ACK
/// (at `endpoint`, one of `brokers` addresses tried in turn), or `None`
/// when this attempt is only worth a DEBUG line: the first round over the
/// addresses is said in full, then attempts 2, 4, 8, ... with the count.
pub(super) fn no_router_note(
    endpoint: &str,
    attempt: u32,
    brokers: usize,
    ack_timeout: Duration,
) -> Option<String> {
    let first_round = usize::try_from(attempt).is_ok_and(|a| a <= brokers);
    if !first_round && !attempt.is_power_of_two() {
        return None;
    }
    let count = if attempt > 1 {
        format!(" ({attempt} attempts so far)")
    } else {
        String::new()
    };
    Some(format!(
        "no router answered at {endpoint} within {} s \u{2014} is emq-router running with \
         --backend there? Trying again{count}",
        ack_timeout.as_secs_f64()
    ))
}
