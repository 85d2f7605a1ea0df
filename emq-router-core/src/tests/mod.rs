//! Unit tests of the router rules, with a fake clock (plain `u64` micros).
//!
//! This module holds the harness ([`H`]: a router, a fake clock and a fake
//! journal store) and the helpers every test file shares; the tests sit in
//! one file per rule, mirroring `router/*.rs` (`intake.rs`, `peers.rs`,
//! `dispatch.rs`, `completion.rs`, `results.rs`, `schedules.rs`,
//! `control.rs`, `durability.rs`, `drain.rs`, `snapshot.rs`, `traces.rs`,
//! `unique.rs`, `workflow.rs`), plus
//! `adoption.rs`, `resent_replies.rs` and `limits.rs` for the rules that
//! span several.

use emqp_proto::{
    Command, Headers, Inform, JobResult, Message, PeerType, QueueSpec, Reject, RejectReason, Reply,
    Request, ResultStatus, Schedule,
};

use crate::config::SECOND;
use crate::event::{Action, Input, SendFailure, Socket};
use crate::journal::{Batch, BatchResult, JobRecord, Record, Restored};
use crate::testing::{Driver, Effects, Flush};
use crate::{Config, Router};

use std::time::Duration;

use Socket::{Admin, Backend, Frontend};

/// Microseconds, for the fake clock.
pub(crate) fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

mod acks;
mod adoption;
mod batch;
mod completion;
mod control;
mod dispatch;
mod drain;
mod durability;
mod flow;
mod intake;
mod limits;
mod peers;
mod progress;
mod resent_replies;
mod results;
mod schedules;
mod snapshot;
mod timers;
mod traces;
mod unique;
mod workflow;

/// A router with a fake clock, and a fake journal store that commits
/// every batch (or fails it while `fail_journal` is set), driven by the
/// one test driver (`crate::testing`), which commits the open batch after
/// every input. The sends a call returns are carried out by the test: it
/// reports the ones that failed (`SendFailed`) before its next input or
/// tick, which [`Input::Flushed`] precedes (`Flush::BeforeNext`).
pub(crate) struct H {
    d: Driver,
    pub(crate) r: Router,
    pub(crate) now: Duration,
    store: Store,
    /// REPLYs sent by [`H::reply`] so far (their msgids).
    replies: u64,
    /// The take-back key each backend identity's last ACK gave.
    keys: std::collections::HashMap<String, String>,
}

/// The fake journal store.
#[derive(Default)]
pub(crate) struct Store {
    /// Every record committed, in order.
    pub(crate) journal: Vec<Record>,
    pub(crate) fail_journal: Option<String>,
    /// While `fail_journal` is set: the store cannot tell whether the
    /// batch committed (`BatchResult::Uncertain`) instead of knowing it
    /// did not.
    pub(crate) uncertain: bool,
}

impl Effects for Store {
    fn journal(&mut self, _now: Duration, b: &Batch) -> Option<BatchResult> {
        Some(match &self.fail_journal {
            None => {
                self.journal.extend(b.records.iter().cloned());
                BatchResult::Committed
            }
            Some(e) if self.uncertain => BatchResult::Uncertain(e.clone()),
            Some(e) => BatchResult::Failed(e.clone()),
        })
    }
}

impl std::ops::Deref for H {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store
    }
}

impl std::ops::DerefMut for H {
    fn deref_mut(&mut self) -> &mut Store {
        &mut self.store
    }
}

pub(crate) type Sent = (Socket, String, Message);

impl H {
    pub(crate) fn new() -> H {
        H::with(Config::default())
    }

    pub(crate) fn with(cfg: Config) -> H {
        let mut d = Driver::new(Flush::BeforeNext);
        d.commit_at_once = true;
        H {
            d,
            r: Router::new(cfg),
            now: 1_000 * SECOND,
            store: Store::default(),
            replies: 0,
            keys: Default::default(),
        }
    }

    pub(crate) fn input(&mut self, input: Input) -> Vec<Action> {
        let mut out = Vec::new();
        let result = self
            .d
            .input(&mut self.r, input, self.now, &mut self.store, &mut out);
        result.unwrap_or_else(|e| panic!("{e}"));
        out
    }

    /// Timers due now, then the journal.
    pub(crate) fn timeout(&mut self) -> Vec<Action> {
        let mut out = Vec::new();
        let result = self
            .d
            .timeout(&mut self.r, self.now, &mut self.store, &mut out);
        result.unwrap_or_else(|e| panic!("{e}"));
        out
    }

    /// Carry out the actions of a call made outside the driver.
    pub(crate) fn commit(&mut self, out: &mut Vec<Action>) {
        let result = self
            .d
            .carry_out(&mut self.r, 0, self.now, &mut self.store, out);
        result.unwrap_or_else(|e| panic!("{e}"));
    }

    pub(crate) fn frames(&mut self, socket: Socket, frames: Vec<Vec<u8>>) -> Vec<Sent> {
        decode(self.input(Input::Frames { socket, frames }))
    }

    pub(crate) fn msg(&mut self, socket: Socket, id: &str, msgid: &str, cmd: Command) -> Vec<Sent> {
        let frames = Message::with_msgid(msgid, cmd).encode_routed(id.as_bytes().to_vec());
        self.frames(socket, frames)
    }

    pub(crate) fn inform(&mut self, id: &str, queues: &str, features: &[&str]) -> Vec<Sent> {
        let inf = Inform {
            queues: QueueSpec::from_inform_frame(queues.as_bytes()).unwrap(),
            peer_type: Some(PeerType::Worker),
            features: features.iter().map(|s| s.to_string()).collect(),
        };
        let sent = self.msg(Backend, id, &format!("inform-{id}"), Command::Inform(inf));
        for (socket, to, m) in &sent {
            if let (Backend, Command::Ack { features, .. }) = (socket, &m.command) {
                if let Some(key) = emqp_proto::command::take_back_key(features) {
                    self.keys.insert(to.clone(), key.to_string());
                }
            }
        }
        sent
    }

    /// The take-back key the ACK to `id` gave.
    pub(crate) fn key(&self, id: &str) -> String {
        self.keys
            .get(id)
            .cloned()
            .unwrap_or_else(|| panic!("no key for {id}"))
    }

    /// `old`'s job manager on a new connection `new`: INFORM with
    /// `features` and the key `old` was given.
    pub(crate) fn reconnect(&mut self, old: &str, new: &str, features: &[&str]) -> Vec<Sent> {
        let key = format!("take-back={}", self.key(old));
        let mut all: Vec<&str> = features.to_vec();
        all.push(&key);
        self.inform(new, "", &all)
    }

    pub(crate) fn ready(&mut self, id: &str) -> Vec<Sent> {
        self.msg(Backend, id, "rdy", Command::Ready)
    }

    pub(crate) fn request(
        &mut self,
        client: &str,
        msgid: &str,
        queue: &str,
        headers: &str,
    ) -> Vec<Sent> {
        let payload = format!("[\"call\", {{\"handler\": \"echo\", \"args\": \"{msgid}\"}}]");
        let parts: &[&[u8]] = &[
            b"REQUEST",
            msgid.as_bytes(),
            queue.as_bytes(),
            headers.as_bytes(),
            payload.as_bytes(),
        ];
        self.frames(Frontend, crate::testing::frames(client.as_bytes(), parts))
    }

    /// A worker's REPLY, under a msgid of its own (`rep-N`, as every
    /// worker sends), for `orig`.
    pub(crate) fn reply(
        &mut self,
        worker: &str,
        orig: &str,
        payload: &str,
        status: Option<ResultStatus>,
    ) -> Vec<Sent> {
        self.replies += 1;
        let msgid = format!("rep-{}", self.replies);
        self.reply_as(worker, &msgid, orig, payload, status)
    }

    /// A worker's REPLY under the message msgid `msgid` (the same msgid
    /// again: a REPLY sent again after a reconnect).
    pub(crate) fn reply_as(
        &mut self,
        worker: &str,
        msgid: &str,
        orig: &str,
        payload: &str,
        status: Option<ResultStatus>,
    ) -> Vec<Sent> {
        let r = Reply {
            payload: payload.as_bytes().to_vec(),
            orig_msgid: Some(orig.to_string()),
            status,
            credit: 0,
        };
        self.msg(Backend, worker, msgid, Command::Reply(r))
    }

    pub(crate) fn tick(&mut self) -> Vec<Sent> {
        decode(self.timeout())
    }

    pub(crate) fn advance(&mut self, micros: Duration) -> Vec<Sent> {
        self.now += micros;
        self.tick()
    }

    pub(crate) fn heartbeat(&mut self, id: &str) -> Vec<Sent> {
        self.msg(
            Backend,
            id,
            "hb",
            Command::Heartbeat {
                timestamp: Some("1.0".into()),
            },
        )
    }
}

pub(crate) fn decode(actions: Vec<Action>) -> Vec<Sent> {
    actions
        .iter()
        .filter_map(|a| a.message())
        .map(|(s, id, m)| (s, String::from_utf8_lossy(id).into_owned(), m))
        .collect()
}

fn to<'a>(sent: &'a [Sent], socket: Socket, id: &str) -> Vec<&'a Message> {
    sent.iter()
        .filter(|(s, i, _)| *s == socket && i == id)
        .map(|(_, _, m)| m)
        .collect()
}

/// Whether the journal got a `Finished` (or `Completed`) record of `msgid`.
pub(crate) fn finished_in_journal(h: &H, msgid: &str) -> bool {
    h.journal.iter().any(|r| match r {
        Record::Completed { msgid: m } => m == msgid,
        Record::Finished { record, .. } => record.job.msgid == msgid,
        _ => false,
    })
}

/// REQUEST msgids forwarded to worker `id`.
fn forwarded(sent: &[Sent], id: &str) -> Vec<String> {
    to(sent, Backend, id)
        .into_iter()
        .filter(|m| matches!(m.command, Command::Request(_)))
        .map(|m| m.msgid.clone())
        .collect()
}

fn is_ack_of(m: &Message, msgid: &str) -> bool {
    matches!(&m.command, Command::Reply(r) if r.payload == msgid.as_bytes() && r.orig_msgid.is_none())
}

fn results(sent: &[Sent], client: &str) -> Vec<JobResult> {
    to(sent, Frontend, client)
        .into_iter()
        .filter_map(|m| match &m.command {
            Command::Result(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn rejects(sent: &[Sent], client: &str) -> Vec<Reject> {
    to(sent, Frontend, client)
        .into_iter()
        .filter_map(|m| match &m.command {
            Command::Reject(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// Worker `id` on `queues` with `slots` READYs.
fn worker(h: &mut H, id: &str, queues: &str, slots: usize) {
    h.inform(id, queues, &["job-ack"]);
    for _ in 0..slots {
        h.ready(id);
    }
}

/// `old`'s job manager again, on the new identity `new` (a job-ack worker
/// with `slots` READYs), presenting `old`'s take-back key.
fn reconnected(h: &mut H, old: &str, new: &str, slots: usize) {
    h.reconnect(old, new, &["job-ack"]);
    for _ in 0..slots {
        h.ready(new);
    }
}

fn admin(h: &mut H, cmd: Command) -> serde_json::Value {
    let sent = h.msg(Admin, "adm", "admin:1", cmd);
    let m = to(&sent, Admin, "adm");
    let Command::Reply(r) = &m[0].command else {
        panic!("no REPLY: {sent:?}")
    };
    serde_json::from_slice(&r.payload).unwrap()
}

/// Job `j1` of client `c` (`headers`) is lost with worker `lost` (its
/// KBYE), redelivered to worker `then`, which fails it with the REPLY
/// message `reply_msgid`: the job waits for a retry, with one lost
/// delivery counted.
pub(crate) fn lost_then_failed(
    h: &mut H,
    headers: &str,
    lost: &str,
    then: &str,
    reply_msgid: &str,
) {
    worker(h, lost, "", 1);
    h.request("c", "j1", "default", headers);
    h.msg(Backend, lost, "k", Command::Kbye);
    worker(h, then, "", 1);
    assert_eq!(h.r.inflight_count(), 1);
    let fail = r#"{"error": {"kind": "exception", "message": "boom"}}"#;
    h.reply_as(then, reply_msgid, "j1", fail, Some(ResultStatus::Failed));
    assert_eq!(h.r.delayed_count(), 1);
    assert_eq!(h.r.stats().retried, 1);
}

fn sched(h: &mut H, id: &str) {
    let inf = Inform {
        queues: QueueSpec(vec![]),
        peer_type: Some(PeerType::Scheduler),
        features: vec![],
    };
    h.msg(Frontend, id, "inf", Command::Inform(inf));
}

fn schedule_frames(cmd: &str) -> Vec<Vec<u8>> {
    [
        "c1",
        "",
        "eMQP/1.0",
        cmd,
        "sch-1",
        "default",
        "guarantee, nohaste",
        "60",
        "[\"run\", {}]",
        "",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}
