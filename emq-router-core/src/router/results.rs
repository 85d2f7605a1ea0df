//! Results until delivered: a `reply-requested` job's RESULT is kept —
//! journaled, in the batch that records the job's end — until it is
//! delivered to its client, so that a result produced just before a
//! router crash or a failover still reaches the client afterwards.
//!
//! - **Delivered.** ZeroMQ has no delivery receipts: a send that succeeds
//!   on the ROUTER socket (ROUTER_MANDATORY, the client's identity
//!   connected) only means the message is in a pipe of this process,
//!   which a SIGKILL loses. So a job submitted with the `result-receipt`
//!   header is delivered when its client says so: `RECEIVED [msgid...]`
//!   (emq-sender, the Python client). For any other job (0.3.13 clients,
//!   older emq clients) "delivered" is the best the router can know: the
//!   RESULT was handed to the socket for a connected client and no send
//!   failure came back for that client before the driver said it flushed
//!   (`Input::Flushed`: every send carried out, every failure reported).
//! - **Sending.** A RESULT leaves once its journal batch commits (the
//!   durability rule). A send that fails (client not connected, or its
//!   pipe full) leaves the result unsent and its client *unreachable*;
//!   the result goes out again when the client is reachable: at once
//!   when any message comes from that identity (clients keep their
//!   identity across reconnects: a DEALER reconnects under the identity
//!   of its socket), else when a probe — the oldest unsent result, sent
//!   after [`PROBE_FIRST`], then at doubling intervals up to
//!   [`PROBE_MAX`] — goes through. Results restored from the journal
//!   start unsent, their clients unreachable.
//! - **A client says it reconnected** with a `HEARTBEAT` on the frontend
//!   (emq clients send one when a connection comes up after one was
//!   lost, see docs/PROTOCOL.md): every result of that client not yet delivered is
//!   sent again — unsent ones, and `result-receipt` ones already sent
//!   but not receipted (they may have been lost with the old
//!   connection). A client may so get a RESULT twice; results name their
//!   job, and clients keep the first.
//! - **Receipts.** `RECEIVED` from the result's client (the identity it
//!   is held for) releases it, whatever its state; a receipt for anything
//!   else is ignored.
//! - **One per msgid.** A REQUEST whose msgid has a held result is refused
//!   `duplicate-msgid` (a client that sends a REQUEST again after a
//!   reconnect learns that it was taken); a new result for a held msgid
//!   (a dead letter retried and finished again) replaces the old one.
//! - **Bounds.** At most `Config::results_keep` results and
//!   `Config::results_keep_bytes` payload bytes are held, none longer than
//!   `Config::results_keep_for`; beyond that the oldest is dropped
//!   undelivered (logged, counted in `results_dropped`, and forgotten by
//!   the journal: `Record::ResultReleased`). A single result bigger than
//!   the byte bound is sent once and not held (counted as dropped).
//!   Memory and journal rows are bounded by the same numbers.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use emqp_proto::headers::{frame_has, RESULT_RECEIPT};
use emqp_proto::{Command, JobResult, ResultStatus};

use super::durability::Tag;
use super::{frames_of, Router};
use crate::event::{Action, Socket};
use crate::jobs::Job;
use crate::journal::{Record, ResultRecord};
use crate::util::{ident, FastMap};

/// First probe of an unreachable client, after this long.
pub(crate) const PROBE_FIRST: Duration = Duration::from_millis(250);
/// Probes of an unreachable client double their interval up to this.
pub(crate) const PROBE_MAX: Duration = Duration::from_secs(8);

/// Where a held result is on its way to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Its send waits for the journal batch that holds its record.
    Committing,
    /// Handed to the driver since the last input; delivered (or, with
    /// `result-receipt`, sent) unless a send failure for its client
    /// comes back first.
    Handed,
    /// `result-receipt`: on the wire, waiting for `RECEIVED`.
    Sent,
    /// Not sent: its client was unreachable, or the router restarted.
    Unsent,
}

/// One held result.
#[derive(Debug)]
struct Held {
    seq: u64,
    client: Vec<u8>,
    status: ResultStatus,
    payload: Vec<u8>,
    receipt: bool,
    /// Core time it was held (for `results_keep_for`).
    held_at: Duration,
    state: Delivery,
}

/// A client with held results.
#[derive(Debug, Default)]
struct ClientResults {
    /// `(seq, msgid)` of its results, oldest first; entries of released
    /// results are dropped lazily (from the front, and when walked).
    order: VecDeque<(u64, String)>,
    held: usize,
    unsent: usize,
    /// Unreachable: the next probe's time and the interval after it.
    probe: Option<(Duration, Duration)>,
}

/// Held results (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct Results {
    held: FastMap<String, Held>,
    /// `(seq, msgid)` oldest first, for the bounds (stale entries dropped
    /// lazily from the front).
    order: VecDeque<(u64, String)>,
    clients: FastMap<Vec<u8>, ClientResults>,
    /// Unreachable clients by their next probe.
    probes: BTreeSet<(Duration, Vec<u8>)>,
    /// msgids handed since the last `Input::Flushed` (may hold stale
    /// entries).
    handed: Vec<(u64, String)>,
    bytes: usize,
    next_seq: u64,
    /// Results replaced by a newer one for the same msgid.
    pub(crate) replaced: u64,
}

/// What a result costs against `results_keep_bytes`.
fn cost(msgid: &str, payload: &[u8]) -> usize {
    msgid.len() + payload.len()
}

impl Results {
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn holds(&self, msgid: &str) -> bool {
        self.held.contains_key(msgid)
    }

    /// Clients with unsent results that could not be reached.
    pub(crate) fn unreachable_clients(&self) -> usize {
        self.probes.len()
    }

    fn is_live(&self, seq: u64, msgid: &str) -> bool {
        self.held.get(msgid).is_some_and(|h| h.seq == seq)
    }

    /// Keep a result (replacing one held for the same msgid).
    #[allow(clippy::too_many_arguments)]
    fn hold(
        &mut self,
        msgid: String,
        client: Vec<u8>,
        status: ResultStatus,
        payload: Vec<u8>,
        receipt: bool,
        held_at: Duration,
        state: Delivery,
    ) -> u64 {
        if self.release(&msgid).is_some() {
            self.replaced += 1;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.bytes += cost(&msgid, &payload);
        let c = self.clients.entry(client.clone()).or_default();
        c.order.push_back((seq, msgid.clone()));
        c.held += 1;
        if state == Delivery::Unsent {
            c.unsent += 1;
        }
        self.order.push_back((seq, msgid.clone()));
        self.held.insert(
            msgid,
            Held {
                seq,
                client,
                status,
                payload,
                receipt,
                held_at,
                state,
            },
        );
        seq
    }

    /// Forget a result; it, if it was held.
    fn release(&mut self, msgid: &str) -> Option<Held> {
        let h = self.held.remove(msgid)?;
        self.bytes -= cost(msgid, &h.payload);
        let held = &self.held;
        let live = |(seq, m): &(u64, String)| held.get(m).is_some_and(|h| h.seq == *seq);
        while self.order.front().is_some_and(|e| !live(e)) {
            self.order.pop_front();
        }
        if let Some(c) = self.clients.get_mut(&h.client) {
            c.held -= 1;
            if h.state == Delivery::Unsent {
                c.unsent -= 1;
            }
            while c.order.front().is_some_and(|e| !live(e)) {
                c.order.pop_front();
            }
            if c.held == 0 {
                if let Some((at, _)) = c.probe {
                    self.probes.remove(&(at, h.client.clone()));
                }
                self.clients.remove(&h.client);
            }
        }
        Some(h)
    }

    /// Move a held result to `state`, keeping its client's unsent count.
    fn set_state(&mut self, msgid: &str, state: Delivery) {
        let Some(h) = self.held.get_mut(msgid) else {
            return;
        };
        let was = std::mem::replace(&mut h.state, state);
        if let Some(c) = self.clients.get_mut(&h.client) {
            if was == Delivery::Unsent {
                c.unsent -= 1;
            }
            if state == Delivery::Unsent {
                c.unsent += 1;
            }
        }
        if state == Delivery::Handed {
            self.handed.push((h.seq, msgid.to_string()));
        }
    }

    /// Mark `client` unreachable (first probe after [`PROBE_FIRST`]),
    /// unless it already is.
    fn unreachable(&mut self, client: &[u8], now: Duration) {
        let Some(c) = self.clients.get_mut(client) else {
            return;
        };
        if c.probe.is_none() {
            let at = now.saturating_add(PROBE_FIRST);
            c.probe = Some((at, PROBE_FIRST));
            self.probes.insert((at, client.to_vec()));
        }
    }

    /// `client` is reachable: no more probes. Whether it had been
    /// unreachable.
    fn reachable(&mut self, client: &[u8]) -> bool {
        let Some(c) = self.clients.get_mut(client) else {
            return false;
        };
        match c.probe.take() {
            Some((at, _)) => {
                self.probes.remove(&(at, client.to_vec()));
                true
            }
            None => false,
        }
    }

    /// The live msgids of `client`'s results in `states`, oldest first.
    fn of_client(&mut self, client: &[u8], states: &[Delivery]) -> Vec<String> {
        let Some(c) = self.clients.get_mut(client) else {
            return Vec::new();
        };
        let held = &self.held;
        c.order
            .retain(|(seq, m)| held.get(m).is_some_and(|h| h.seq == *seq));
        c.order
            .iter()
            .filter(|(_, m)| held.get(m).is_some_and(|h| states.contains(&h.state)))
            .map(|(_, m)| m.clone())
            .collect()
    }

    /// The oldest held result: `(msgid, held_at)`.
    fn oldest(&mut self) -> Option<(String, Duration)> {
        let held = &self.held;
        while let Some((seq, m)) = self.order.front() {
            match held.get(m) {
                Some(h) if h.seq == *seq => return Some((m.clone(), h.held_at)),
                _ => {
                    self.order.pop_front();
                }
            }
        }
        None
    }

    /// When the next probe or expiry is due.
    pub(crate) fn deadline(&self, keep_for: Duration) -> Option<Duration> {
        let probe = self.probes.first().map(|(at, _)| *at);
        let expiry = self
            .order
            .iter()
            .find_map(|(seq, m)| {
                self.held
                    .get(m)
                    .filter(|h| h.seq == *seq)
                    .map(|h| h.held_at)
            })
            .map(|at| at.saturating_add(keep_for));
        match (probe, expiry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Check the books (see `invariants.rs`); `committing` is the number
    /// of held sends in the journal queue tagged with a live result.
    pub(crate) fn check(&self, keep: usize, keep_bytes: usize) -> Result<(), String> {
        if self.held.len() > keep || self.bytes > keep_bytes {
            return Err(format!(
                "{} results of {} bytes held, over the bounds {keep} / {keep_bytes}",
                self.held.len(),
                self.bytes
            ));
        }
        let bytes: usize = self.held.iter().map(|(m, h)| cost(m, &h.payload)).sum();
        if bytes != self.bytes {
            return Err(format!("results bytes {} counted {}", self.bytes, bytes));
        }
        let live_order = self
            .order
            .iter()
            .filter(|(s, m)| self.is_live(*s, m))
            .count();
        if live_order != self.held.len() {
            return Err(format!(
                "results order lists {live_order} live of {} held",
                self.held.len()
            ));
        }
        for (client, c) in &self.clients {
            let mine: Vec<&Held> = self.held.values().filter(|h| h.client == *client).collect();
            if mine.is_empty() || mine.len() != c.held {
                return Err(format!(
                    "client {} counts {} results, holds {}",
                    ident(client),
                    c.held,
                    mine.len()
                ));
            }
            let unsent = mine.iter().filter(|h| h.state == Delivery::Unsent).count();
            if unsent != c.unsent {
                return Err(format!(
                    "client {} counts {} unsent, has {unsent}",
                    ident(client),
                    c.unsent
                ));
            }
            let listed = c.order.iter().filter(|(s, m)| self.is_live(*s, m)).count();
            if listed != c.held {
                return Err(format!(
                    "client {} lists {listed} of its {} results",
                    ident(client),
                    c.held
                ));
            }
            if c.unsent > 0 && c.probe.is_none() {
                return Err(format!(
                    "client {} has {} unsent results and no probe",
                    ident(client),
                    c.unsent
                ));
            }
            if let Some((at, _)) = c.probe {
                if !self.probes.contains(&(at, client.clone())) {
                    return Err(format!("client {} probe not scheduled", ident(client)));
                }
            }
        }
        for (at, client) in &self.probes {
            if self.clients.get(client).and_then(|c| c.probe).map(|p| p.0) != Some(*at) {
                return Err(format!("stale probe of client {}", ident(client)));
            }
        }
        if self
            .held
            .values()
            .any(|h| !self.clients.contains_key(&h.client))
        {
            return Err("a held result's client is not indexed".into());
        }
        let handed = self
            .held
            .values()
            .filter(|h| h.state == Delivery::Handed)
            .count();
        let listed: std::collections::HashSet<&(u64, String)> = self
            .handed
            .iter()
            .filter(|(s, m)| {
                self.held
                    .get(m)
                    .is_some_and(|h| h.seq == *s && h.state == Delivery::Handed)
            })
            .collect();
        if listed.len() != handed {
            return Err(format!(
                "{handed} results handed, {} in the handed list",
                listed.len()
            ));
        }
        Ok(())
    }

    /// Held results in state `state` with their `(msgid, seq)`.
    pub(crate) fn in_state(&self, state: Delivery) -> impl Iterator<Item = (&str, u64)> {
        self.held
            .iter()
            .filter(move |(_, h)| h.state == state)
            .map(|(m, h)| (m.as_str(), h.seq))
    }
}

impl Router {
    /// A finished `reply-requested` job's RESULT: held (journaled with the
    /// job's end) and sent once the batch commits.
    pub(super) fn send_result(
        &mut self,
        job: &Job,
        status: ResultStatus,
        payload: Vec<u8>,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let receipt = frame_has(job.headers(), RESULT_RECEIPT);
        let (msgid, client) = (job.msgid().to_string(), job.client().to_vec());
        self.send_result_for(msgid, client, receipt, status, payload, now, out);
    }

    /// `RESULT [msgid, status, payload]` to `client`, held until
    /// delivered (`receipt`: until its `RECEIVED`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send_result_for(
        &mut self,
        msgid: String,
        client: Vec<u8>,
        receipt: bool,
        status: ResultStatus,
        payload: Vec<u8>,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        self.stats.results_forwarded += 1;
        if cost(&msgid, &payload) > self.cfg.results_keep_bytes {
            // Holding it would evict every other result: sent once, as is.
            self.stats.results_dropped += 1;
            if self.drop_log.allow(now) {
                log::warn!(
                    "result of job {msgid} ({} bytes) is over --results-keep-bytes: sent once, \
                     not kept until delivered",
                    payload.len()
                );
            }
            let frames = result_frames(self, &msgid, status, payload);
            self.send_after_journal(Socket::Frontend, client, frames, None, out);
            return;
        }
        let unix_ms = self.unix_ms(now);
        if self.journal.enabled() {
            self.journal.record(
                Record::ResultHeld(ResultRecord {
                    msgid: msgid.clone(),
                    client: client.clone(),
                    status,
                    payload: payload.clone(),
                    receipt,
                    held_at_unix_ms: unix_ms,
                }),
                None,
            );
        }
        let frames = result_frames(self, &msgid, status, payload.clone());
        let seq = self.results.hold(
            msgid.clone(),
            client.clone(),
            status,
            payload,
            receipt,
            now,
            Delivery::Committing,
        );
        let action = Action::Send {
            socket: Socket::Frontend,
            identity: client,
            frames,
        };
        if let Some(action) = self.journal.hold(action, Tag::Result(msgid.clone(), seq)) {
            self.results.set_state(&msgid, Delivery::Handed);
            out.push(action);
        }
        self.trim_results(now);
    }

    /// A held RESULT send left the journal queue (its batch committed).
    pub(super) fn result_released(&mut self, msgid: &str, seq: u64) {
        if self.results.is_live(seq, msgid)
            && self.results.held.get(msgid).map(|h| h.state) == Some(Delivery::Committing)
        {
            self.results.set_state(msgid, Delivery::Handed);
        }
    }

    /// `Input::Flushed`: results handed since the last flush went out
    /// (no failure was reported for their client): delivered (or, with
    /// `result-receipt`, waiting for `RECEIVED`); a client that had been
    /// unreachable gets the rest of its results.
    pub(super) fn confirm_results(&mut self, out: &mut Vec<Action>) {
        if self.results.handed.is_empty() {
            return;
        }
        let handed = std::mem::take(&mut self.results.handed);
        let mut back: Vec<Vec<u8>> = Vec::new();
        for (seq, msgid) in handed {
            let Some(h) = self.results.held.get(&msgid) else {
                continue;
            };
            if h.seq != seq || h.state != Delivery::Handed {
                continue;
            }
            let client = h.client.clone();
            if h.receipt {
                self.results.set_state(&msgid, Delivery::Sent);
            } else {
                self.results.release(&msgid);
                self.stats.results_delivered += 1;
                self.journal.record(Record::ResultReleased { msgid }, None);
            }
            if self.results.reachable(&client) {
                back.push(client);
            }
        }
        for client in back {
            log::debug!(
                "client {} reachable again: sending its held results",
                ident(&client)
            );
            self.emit_results(&client, &[Delivery::Unsent], out);
        }
    }

    /// Send `client`'s results in `states` (now handed).
    fn emit_results(&mut self, client: &[u8], states: &[Delivery], out: &mut Vec<Action>) -> usize {
        let msgids = self.results.of_client(client, states);
        for m in &msgids {
            self.resend_result(client, m, out);
        }
        msgids.len()
    }

    /// Send the held result of `msgid` to `client` again (now handed).
    fn resend_result(&mut self, client: &[u8], msgid: &str, out: &mut Vec<Action>) {
        let Some(h) = self.results.held.get(msgid) else {
            return;
        };
        let (status, payload) = (h.status, h.payload.clone());
        let frames = result_frames(self, msgid, status, payload);
        self.results.set_state(msgid, Delivery::Handed);
        self.stats.results_resent += 1;
        out.push(Action::Send {
            socket: Socket::Frontend,
            identity: client.to_vec(),
            frames,
        });
    }

    /// A send to `client` on the frontend failed: its results handed since
    /// the last flush were not delivered; it is unreachable.
    pub(super) fn results_send_failed(&mut self, client: &[u8], now: Duration) {
        if !self.results.clients.contains_key(client) {
            return;
        }
        let handed: Vec<(u64, String)> = self
            .results
            .handed
            .iter()
            .filter(|(s, m)| {
                self.results.held.get(m).is_some_and(|h| {
                    h.seq == *s && h.client == client && h.state == Delivery::Handed
                })
            })
            .cloned()
            .collect();
        for (_, m) in &handed {
            self.results.set_state(m, Delivery::Unsent);
        }
        if self
            .results
            .clients
            .get(client)
            .is_some_and(|c| c.unsent > 0)
        {
            self.results.unreachable(client, now);
        }
    }

    /// Any message from `client` on the frontend: it is connected; if it
    /// was unreachable, its unsent results go out.
    pub(super) fn results_client_seen(&mut self, client: &[u8], out: &mut Vec<Action>) {
        if self.results.clients.is_empty() || !self.results.reachable(client) {
            return;
        }
        let n = self.emit_results(client, &[Delivery::Unsent], out);
        if n > 0 {
            log::debug!("client {} is back: {n} held result(s) sent", ident(client));
        }
    }

    /// `HEARTBEAT` from a client on the frontend: it (re)connected, so
    /// every result of it not yet delivered goes out again.
    pub(super) fn results_client_hello(&mut self, client: &[u8], out: &mut Vec<Action>) {
        self.results.reachable(client);
        let n = self.emit_results(client, &[Delivery::Unsent, Delivery::Sent], out);
        if n > 0 {
            log::debug!(
                "client {} (re)connected: {n} undelivered result(s) sent again",
                ident(client)
            );
        }
    }

    /// `RECEIVED [msgid...]` from `client`: those results are delivered.
    pub(super) fn on_received(&mut self, client: &[u8], msgids: Vec<String>) {
        for msgid in msgids {
            let ours = self
                .results
                .held
                .get(&msgid)
                .is_some_and(|h| h.client == client);
            if !ours {
                log::debug!(
                    "RECEIVED for {msgid} from {}: no such result held for it",
                    ident(client)
                );
                continue;
            }
            self.results.release(&msgid);
            self.stats.results_delivered += 1;
            self.journal.record(Record::ResultReleased { msgid }, None);
        }
    }

    /// Probes due at `now`, and results past their bounds.
    pub(super) fn result_timers(&mut self, now: Duration, out: &mut Vec<Action>) {
        self.gone_summary(now);
        while let Some((at, client)) = self.results.probes.first().cloned() {
            if at > now {
                break;
            }
            self.results.probes.remove(&(at, client.clone()));
            let probe = self.results.of_client(&client, &[Delivery::Unsent]);
            let Some(c) = self.results.clients.get_mut(&client) else {
                continue;
            };
            let Some(first) = probe.first() else {
                c.probe = None;
                continue;
            };
            let interval = c.probe.map_or(PROBE_FIRST, |(_, i)| i);
            let next = now.saturating_add(interval);
            c.probe = Some((next, interval.saturating_mul(2).min(PROBE_MAX)));
            self.results.probes.insert((next, client.clone()));
            self.resend_result(&client, first, out);
        }
        self.trim_results(now);
    }

    /// Drop the oldest results beyond the bounds (count, bytes, age).
    fn trim_results(&mut self, now: Duration) {
        let (keep, keep_bytes, keep_for) = (
            self.cfg.results_keep,
            self.cfg.results_keep_bytes,
            self.cfg.results_keep_for,
        );
        while let Some((msgid, held_at)) = self.results.oldest() {
            let over = if self.results.len() > keep {
                "--results-keep"
            } else if self.results.bytes() > keep_bytes {
                "--results-keep-bytes"
            } else if held_at.saturating_add(keep_for) <= now {
                "--results-keep-for"
            } else {
                break;
            };
            let Some(h) = self.results.release(&msgid) else {
                break;
            };
            self.stats.results_dropped += 1;
            if self.drop_log.allow(now) {
                log::warn!(
                    "result of job {msgid} for client {} dropped undelivered ({over}; \
                     {} byte(s), held {} s)",
                    ident(&h.client),
                    h.payload.len(),
                    now.saturating_sub(held_at).as_secs()
                );
            }
            self.journal.record(Record::ResultReleased { msgid }, None);
        }
    }

    /// Results a journal held: unsent, their clients probed at once.
    pub(super) fn restore_results(&mut self, records: Vec<ResultRecord>, now: Duration) -> usize {
        let now_ms = self.unix_ms(now);
        let n = records.len();
        self.stats.restored_results += n as u64;
        for r in records {
            let age = Duration::from_millis(now_ms.saturating_sub(r.held_at_unix_ms));
            let client = r.client.clone();
            self.results.hold(
                r.msgid,
                r.client,
                r.status,
                r.payload,
                r.receipt,
                now.saturating_sub(age),
                Delivery::Unsent,
            );
            if let Some(c) = self.results.clients.get_mut(&client) {
                if c.probe.is_none() {
                    c.probe = Some((now, PROBE_FIRST));
                    self.results.probes.insert((now, client));
                }
            }
        }
        self.trim_results(now);
        n
    }
}

fn result_frames(
    r: &mut Router,
    msgid: &str,
    status: ResultStatus,
    payload: Vec<u8>,
) -> crate::event::Frames {
    frames_of(
        r.ids.next_id(),
        Command::Result(JobResult {
            orig_msgid: msgid.to_string(),
            status,
            payload,
        }),
    )
}
