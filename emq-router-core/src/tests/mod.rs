//! Unit tests of the router rules, with a fake clock (plain `u64` micros).

use emqp_proto::{
    Command, Headers, Inform, JobResult, Message, PeerType, QueueSpec, Reject, RejectReason, Reply,
    Request, ResultStatus, Schedule,
};

use crate::config::SECOND;
use crate::event::{Action, Input, SendFailure, Socket};
use crate::journal::{BatchResult, JobRecord, Record, Restored};
use crate::{Config, Router};

use std::time::Duration;

use Socket::{Admin, Backend, Frontend};

/// Microseconds, for the fake clock.
pub(crate) fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

mod adoption;
mod control;
mod durability;
mod limits;
mod resent_replies;
mod results;

/// A router with a fake clock, and a fake journal store that commits
/// every batch (or fails it while `fail_journal` is set), as a driver
/// does after each input.
pub(crate) struct H {
    pub(crate) r: Router,
    pub(crate) now: Duration,
    /// Every record committed, in order.
    pub(crate) journal: Vec<Record>,
    pub(crate) fail_journal: Option<String>,
    /// While `fail_journal` is set: the store cannot tell whether the
    /// batch committed (`BatchResult::Uncertain`) instead of knowing it
    /// did not.
    pub(crate) uncertain: bool,
    /// REPLYs sent by [`H::reply`] so far (their msgids).
    replies: u64,
    /// The take-back key each backend identity's last ACK gave.
    keys: std::collections::HashMap<String, String>,
}

pub(crate) type Sent = (Socket, String, Message);

impl H {
    pub(crate) fn new() -> H {
        H::with(Config::default())
    }

    pub(crate) fn with(cfg: Config) -> H {
        H {
            r: Router::new(cfg),
            now: 1_000 * SECOND,
            journal: Vec::new(),
            fail_journal: None,
            uncertain: false,
            replies: 0,
            keys: Default::default(),
        }
    }

    pub(crate) fn input(&mut self, input: Input) -> Vec<Action> {
        let mut out = Vec::new();
        self.r.handle(input, self.now, &mut out);
        self.check();
        self.commit(&mut out);
        out
    }

    fn check(&self) {
        if let Err(e) = self.r.check_invariants() {
            panic!("invariant broken: {e}");
        }
    }

    /// Carry out the journal: commit the open batch (the group-commit
    /// timing has its own tests), feed each outcome back; the returned
    /// actions keep the batches.
    pub(crate) fn commit(&mut self, out: &mut Vec<Action>) {
        if !self.r.config().journal {
            return;
        }
        let mut i = 0;
        loop {
            if i == out.len() {
                let mut more = Vec::new();
                self.r.flush_journal_now(self.now, &mut more);
                if more.is_empty() {
                    return;
                }
                out.extend(more);
            }
            if let Action::Journal(b) = &out[i] {
                let (id, records) = (b.id, b.records.clone());
                let result = match &self.fail_journal {
                    None => {
                        self.journal.extend(records);
                        BatchResult::Committed
                    }
                    Some(e) if self.uncertain => BatchResult::Uncertain(e.clone()),
                    Some(e) => BatchResult::Failed(e.clone()),
                };
                let mut more = Vec::new();
                self.r.handle(
                    Input::JournalDone { batch: id, result },
                    self.now,
                    &mut more,
                );
                self.check();
                out.extend(more);
            }
            i += 1;
        }
    }

    /// Timers due now, then the journal.
    pub(crate) fn timeout(&mut self) -> Vec<Action> {
        let mut out = Vec::new();
        self.r.handle_timeout(self.now, &mut out);
        self.check();
        self.commit(&mut out);
        out
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
        let frames = vec![
            client.as_bytes().to_vec(),
            vec![],
            b"eMQP/1.0".to_vec(),
            b"REQUEST".to_vec(),
            msgid.as_bytes().to_vec(),
            queue.as_bytes().to_vec(),
            headers.as_bytes().to_vec(),
            format!("[\"call\", {{\"handler\": \"echo\", \"args\": \"{msgid}\"}}]").into_bytes(),
        ];
        self.frames(Frontend, frames)
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

// ----- registration ---------------------------------------------------------

#[test]
fn inform_is_acked_with_its_msgid_then_heartbeat_and_worker_has_no_slot() {
    let mut h = H::new();
    let sent = h.inform("w1", r#"[[10, "default"]]"#, &[]);
    let m = to(&sent, Backend, "w1");
    assert_eq!(m.len(), 2, "{sent:?}");
    assert_eq!(
        m[0].command,
        Command::Ack {
            acked_msgid: "inform-w1".into(),
            features: vec![],
        }
    );
    assert!(matches!(
        m[1].command,
        Command::Heartbeat { timestamp: Some(_) }
    ));
    assert_ne!(m[0].msgid, "inform-w1");
    // 0 slots: a REQUEST is buffered, not dispatched.
    let sent = h.request("c1", "j1", "default", "");
    assert!(forwarded(&sent, "w1").is_empty());
    assert_eq!(h.r.buffered_count(), 1);
}

#[test]
fn empty_inform_queues_mean_the_default_queues() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    let v = admin(&mut h, Command::RouterShowWorkers);
    assert_eq!(
        v["connected_workers"]["w1"]["queues"],
        serde_json::json!([[10, "default"]])
    );
    let sent = h.request("c1", "j1", "default", "");
    assert_eq!(forwarded(&sent, "w1"), vec!["j1"]);
}

#[test]
fn configured_default_queues_apply_to_empty_inform() {
    let mut h = H::with(Config {
        default_queues: QueueSpec::parse_cli("10:default,20:email").unwrap(),
        ..Config::default()
    });
    worker(&mut h, "w1", "", 1);
    let sent = h.request("c1", "j1", "email", "");
    assert_eq!(forwarded(&sent, "w1"), vec!["j1"]);
}

#[test]
fn seed_csv_inform_and_features_are_recorded() {
    let mut h = H::new();
    h.inform("w1", "default,email", &["job-ack", "x"]);
    let v = admin(&mut h, Command::RouterShowWorkers);
    let w = &v["connected_workers"]["w1"];
    assert_eq!(
        w["queues"],
        serde_json::json!([[10, "default"], [10, "email"]])
    );
    assert_eq!(w["features"], serde_json::json!(["job-ack", "x"]));
    assert_eq!(w["available_slots"], 0);
}

#[test]
fn scheduler_inform_on_frontend_is_acked_and_listed() {
    let mut h = H::new();
    let inf = Inform {
        queues: QueueSpec(vec![]),
        peer_type: Some(PeerType::Scheduler),
        features: vec![],
    };
    let sent = h.msg(Frontend, "s1", "inf-s1", Command::Inform(inf));
    let m = to(&sent, Frontend, "s1");
    assert_eq!(
        m[0].command,
        Command::Ack {
            acked_msgid: "inf-s1".into(),
            features: vec![],
        }
    );
    let v = admin(&mut h, Command::RouterShowSchedulers);
    assert!(v["connected_schedulers"]["s1"]["hb"].is_number());
    assert_eq!(h.r.worker_count(), 0);
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

#[test]
fn schedule_goes_verbatim_to_newest_scheduler_unschedule_to_all() {
    let mut h = H::new();
    sched(&mut h, "s1");
    sched(&mut h, "s2");
    let out = h.input(Input::Frames {
        socket: Frontend,
        frames: schedule_frames("SCHEDULE"),
    });
    let sends: Vec<_> = out
        .iter()
        .filter_map(|a| match a {
            Action::Send {
                identity, frames, ..
            } => Some((identity.clone(), frames.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(sends.len(), 2, "one scheduler and the client's ack");
    assert_eq!(sends[0].0, b"s2");
    // Byte for byte, including the odd header spacing.
    assert_eq!(sends[0].1, schedule_frames("SCHEDULE")[1..].to_vec());
    assert_eq!(sends[1].0, b"c1");
    let sent = h.frames(Frontend, schedule_frames("UNSCHEDULE"));
    let to_schedulers: Vec<_> = sent.iter().filter(|(_, id, _)| id != "c1").collect();
    assert_eq!(to_schedulers.len(), 2);
    assert!(to_schedulers
        .iter()
        .all(|(_, _, m)| matches!(m.command, Command::Unschedule(_)) && m.msgid == "sch-1"));
    let acks = to(&sent, Frontend, "c1");
    assert!(
        acks.len() == 1 && is_ack_of(acks[0], "sch-1"),
        "UNSCHEDULE is acked"
    );
}

#[test]
fn schedule_without_scheduler_is_booked_and_acked() {
    let mut h = H::new();
    let s = Schedule {
        queue: "default".into(),
        headers: Headers::new(),
        interval: emqp_proto::Interval::Every { ms: 5_000 },
        message: b"[]".to_vec(),
        cron: String::new(),
    };
    let sent = h.msg(Frontend, "c1", "s", Command::Schedule(s));
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(is_ack_of(&sent[0].2, "s"));
    assert_eq!(h.r.schedules().len(), 1);
}

#[test]
fn scheduler_kbye_and_timeout_remove_it() {
    let mut h = H::new();
    sched(&mut h, "s1");
    sched(&mut h, "s2");
    h.msg(Frontend, "s1", "k", Command::Kbye);
    assert_eq!(h.r.scheduler_count(), 1);
    h.advance(10 * SECOND);
    assert_eq!(h.r.scheduler_count(), 0);
}

// ----- READY and dispatch ---------------------------------------------------

#[test]
fn ready_adds_one_slot_each() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 2);
    let v = admin(&mut h, Command::RouterShowWorkers);
    assert_eq!(v["connected_workers"]["w1"]["available_slots"], 2);
    assert_eq!(
        forwarded(&h.request("c", "a", "default", ""), "w1"),
        vec!["a"]
    );
    assert_eq!(
        forwarded(&h.request("c", "b", "default", ""), "w1"),
        vec!["b"]
    );
    assert!(forwarded(&h.request("c", "c", "default", ""), "w1").is_empty());
}

#[test]
fn ready_hands_out_oldest_buffered_job_of_highest_weight_queue_first() {
    let mut h = H::new();
    h.inform("w1", r#"[[10, "low"], [20, "high"]]"#, &["job-ack"]);
    h.request("c", "l1", "low", "");
    h.request("c", "l2", "low", "");
    h.request("c", "h1", "high", "");
    h.request("c", "h2", "high", "");
    let mut order = vec![];
    for _ in 0..4 {
        order.extend(forwarded(&h.ready("w1"), "w1"));
    }
    assert_eq!(order, vec!["h1", "h2", "l1", "l2"]);
    assert_eq!(h.r.buffered_count(), 0);
    // No slot was added while handing out jobs.
    let v = admin(&mut h, Command::RouterShowWorkers);
    assert_eq!(v["connected_workers"]["w1"]["available_slots"], 0);
}

#[test]
fn request_is_forwarded_unchanged_and_acked() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    let headers = "reply-requested, guarantee,retry-count:3,timeout:10,x-custom";
    let frames: Vec<Vec<u8>> = [
        "c1",
        "",
        "eMQP/1.0",
        "REQUEST",
        "job-1",
        "default",
        headers,
        "[\"run\", {\"path\": \"m\", \"callable\": \"f\"}]",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let out = h.input(Input::Frames {
        socket: Frontend,
        frames: frames.clone(),
    });
    match &out[0] {
        Action::Send {
            socket,
            identity,
            frames: f,
        } => {
            assert_eq!(*socket, Backend);
            assert_eq!(identity, b"w1");
            assert_eq!(
                f,
                &frames[1..].to_vec(),
                "frames must be forwarded unchanged"
            );
        }
        other => panic!("{other:?}"),
    }
    let sent = decode(out);
    let acks = to(&sent, Frontend, "c1");
    assert_eq!(acks.len(), 1);
    assert!(is_ack_of(acks[0], "job-1"));
}

#[test]
fn unknown_queue_routes_via_default_keeping_the_queue_frame() {
    let mut h = H::new();
    worker(&mut h, "w1", r#"[[10, "default"]]"#, 1);
    let sent = h.request("c1", "j", "no-such-queue", "");
    let m = to(&sent, Backend, "w1");
    let Command::Request(r) = &m[0].command else {
        panic!()
    };
    assert_eq!(r.queue, "no-such-queue");
    // Buffered ones too: buffered under default, handed to a default worker.
    h.request("c1", "j2", "other-unknown", "");
    let sent = h.ready("w1");
    assert_eq!(forwarded(&sent, "w1"), vec!["j2"]);
}

#[test]
fn least_recently_used_worker_among_equal_weights() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 5);
    worker(&mut h, "w2", "", 5);
    worker(&mut h, "w3", "", 5);
    let mut who = vec![];
    for i in 0..6 {
        let sent = h.request("c", &format!("j{i}"), "default", "");
        let (_, id, _) = sent.iter().find(|(s, _, _)| *s == Backend).unwrap();
        who.push(id.clone());
    }
    assert_eq!(who, vec!["w1", "w2", "w3", "w1", "w2", "w3"]);
}

#[test]
fn higher_weight_worker_first() {
    let mut h = H::new();
    worker(&mut h, "low", r#"[[10, "q"]]"#, 5);
    worker(&mut h, "high", r#"[[30, "q"]]"#, 2);
    let mut who = vec![];
    for i in 0..4 {
        let sent = h.request("c", &format!("j{i}"), "q", "");
        who.push(
            sent.iter()
                .find(|(s, _, _)| *s == Backend)
                .unwrap()
                .1
                .clone(),
        );
    }
    assert_eq!(who, vec!["high", "high", "low", "low"]);
}

#[test]
fn buffered_request_is_acked_at_once_and_dispatched_on_ready() {
    let mut h = H::new();
    h.inform("w1", "", &["job-ack"]);
    let sent = h.request("c1", "j1", "default", "");
    let m = to(&sent, Frontend, "c1");
    assert_eq!(m.len(), 1);
    assert!(is_ack_of(m[0], "j1"));
    assert!(forwarded(&sent, "w1").is_empty());
    let sent = h.ready("w1");
    assert_eq!(forwarded(&sent, "w1"), vec!["j1"]);
    // No second ack at dispatch.
    assert!(to(&sent, Frontend, "c1").is_empty());
}

#[test]
fn request_with_no_worker_at_all_is_buffered_and_acked() {
    let mut h = H::new();
    let sent = h.request("c1", "j1", "email", "");
    assert!(is_ack_of(to(&sent, Frontend, "c1")[0], "j1"));
    let v = admin(&mut h, Command::Status);
    assert_eq!(v["waiting_messages_by_queue"]["default"], 1);
}

#[test]
fn full_buffer_rejects_queue_full_never_silently() {
    let mut h = H::with(Config {
        hwm: 2,
        ..Config::default()
    });
    h.request("c", "a", "default", "");
    h.request("c", "b", "default", "");
    let sent = h.request("c", "x", "default", "");
    let rj = rejects(&sent, "c");
    assert_eq!(rj.len(), 1, "{sent:?}");
    assert_eq!(rj[0].orig_msgid, "x");
    assert_eq!(rj[0].reason, RejectReason::QueueFull);
    assert!(to(&sent, Frontend, "c").iter().all(|m| !is_ack_of(m, "x")));
    assert_eq!(h.r.stats().rejected_queue_full, 1);
    // Another queue has its own buffer.
    h.inform("e", r#"[[10, "email"]]"#, &[]);
    let sent = h.request("c", "y", "email", "");
    assert!(rejects(&sent, "c").is_empty());
}

// ----- malformed ------------------------------------------------------------

#[test]
fn malformed_request_with_msgid_gets_reject_malformed() {
    let mut h = H::new();
    let frames: Vec<Vec<u8>> = ["c1", "", "eMQP/1.0", "REQUEST", "bad-1", "default"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let sent = h.frames(Frontend, frames);
    let rj = rejects(&sent, "c1");
    assert_eq!(rj.len(), 1);
    assert_eq!(rj[0].orig_msgid, "bad-1");
    assert_eq!(rj[0].reason, RejectReason::Malformed);
    // Bad headers too.
    let mut frames: Vec<Vec<u8>> = [
        "c1",
        "",
        "eMQP/1.0",
        "REQUEST",
        "bad-2",
        "q",
        "retry-count:x",
        "{}",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let sent = h.frames(Frontend, frames.clone());
    assert_eq!(rejects(&sent, "c1")[0].orig_msgid, "bad-2");
    // Non-UTF-8 msgid: nothing to answer with, dropped.
    frames[4] = vec![0xff, 0xfe];
    frames[6] = b"".to_vec();
    frames[5] = vec![0xff];
    assert!(h.frames(Frontend, frames).is_empty());
    assert_eq!(h.r.stats().accepted, 0);
}

#[test]
fn garbage_on_every_socket_is_dropped_without_panic() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    let garbage: Vec<Vec<Vec<u8>>> = vec![
        vec![],
        vec![b"id".to_vec()],
        vec![b"id".to_vec(), b"x".to_vec()],
        vec![b"w1".to_vec(), vec![], b"eMQP/1.0".to_vec()],
        vec![
            b"w1".to_vec(),
            vec![],
            b"eMQP/9.9".to_vec(),
            b"READY".to_vec(),
            b"m".to_vec(),
        ],
        vec![
            b"w1".to_vec(),
            vec![],
            b"eMQP/1.0".to_vec(),
            b"NOPE".to_vec(),
            b"m".to_vec(),
        ],
        vec![
            b"w1".to_vec(),
            vec![],
            b"eMQP/1.0".to_vec(),
            b"INFORM".to_vec(),
            b"m".to_vec(),
            b"[[".to_vec(),
        ],
        vec![
            b"w1".to_vec(),
            vec![],
            b"eMQP/1.0".to_vec(),
            b"REPLY".to_vec(),
            b"m".to_vec(),
            b"p".to_vec(),
            b"o".to_vec(),
            b"weird".to_vec(),
        ],
        vec![vec![0xff], vec![0xff], vec![0xff], vec![0xff], vec![0xff]],
    ];
    for socket in [Frontend, Backend] {
        for g in &garbage {
            let sent = h.frames(socket, g.clone());
            assert!(sent.is_empty(), "{socket:?} {g:?} -> {sent:?}");
        }
    }
    // On the admin socket: dropped too, but answered `bad-request` (never
    // silence for an operator's tool).
    for g in &garbage {
        let sent = h.frames(Admin, g.clone());
        if g.is_empty() {
            assert!(sent.is_empty(), "no identity, no one to answer");
            continue;
        }
        assert_eq!(sent.len(), 1, "{g:?} -> {sent:?}");
        let Command::Reply(r) = &sent[0].2.command else {
            panic!("{sent:?}")
        };
        let v: serde_json::Value = serde_json::from_slice(&r.payload).unwrap();
        assert_eq!(v["ok"], false);
        assert_eq!(v["error"]["kind"], "bad-request", "{v}");
    }
    assert!(h.r.stats().malformed_dropped >= 24);
    // The worker is still fine.
    assert_eq!(
        forwarded(&h.request("c", "j", "default", ""), "w1"),
        vec!["j"]
    );
}

#[test]
fn wrong_commands_on_wrong_sockets_are_ignored() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    // a worker INFORM on the frontend, a REQUEST on the backend, READY on admin
    let inf = Inform {
        queues: QueueSpec::default(),
        peer_type: Some(PeerType::Worker),
        features: vec![],
    };
    assert!(h.msg(Frontend, "x", "i", Command::Inform(inf)).is_empty());
    let req = Request {
        queue: "default".into(),
        headers: Headers::new(),
        message: b"[]".to_vec(),
    };
    assert!(h.msg(Backend, "w1", "r", Command::Request(req)).is_empty());
    assert!(h.msg(Admin, "a", "r", Command::Ready).is_empty());
    assert_eq!(h.r.stats().accepted, 0);
}

// ----- completion -----------------------------------------------------------

#[test]
fn reply_completes_and_result_goes_to_reply_requested_client() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c1", "j1", "default", "reply-requested");
    let sent = h.reply("w1", "j1", r#"{"value": 1}"#, Some(ResultStatus::Ok));
    let rs = results(&sent, "c1");
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].orig_msgid, "j1");
    assert_eq!(rs[0].status, ResultStatus::Ok);
    assert_eq!(rs[0].payload, br#"{"value": 1}"#);
    assert_eq!(h.r.inflight_count(), 0);
    assert_eq!(h.r.stats().completed, 1);
}

#[test]
fn result_status_comes_from_third_frame_and_defaults_to_ok() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 2);
    h.request("c1", "j1", "default", "reply-requested");
    h.request("c1", "j2", "default", "reply-requested");
    // 0.3.13 two-frame REPLY
    let rs = results(&h.reply("w1", "j1", r#"{"value": 2}"#, None), "c1");
    assert_eq!(rs[0].status, ResultStatus::Ok);
    let rs = results(
        &h.reply(
            "w1",
            "j2",
            r#"{"error": {"kind": "exception", "message": "x"}}"#,
            Some(ResultStatus::Failed),
        ),
        "c1",
    );
    assert_eq!(rs[0].status, ResultStatus::Failed);
    assert_eq!(h.r.stats().failed, 1);
}

#[test]
fn no_result_without_reply_requested() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c1", "j1", "default", "");
    let sent = h.reply("w1", "j1", r#"{"value": 1}"#, Some(ResultStatus::Ok));
    assert!(sent.is_empty());
    assert_eq!(h.r.stats().completed, 1);
    assert_eq!(h.r.inflight_count(), 0);
}

#[test]
fn legacy_ready_completes_oldest_job_without_pending_reply() {
    let mut h = H::new();
    h.inform("old", "", &[]); // no job-ack
    for _ in 0..3 {
        h.ready("old");
    }
    h.request("c", "rr", "default", "reply-requested");
    h.request("c", "f1", "default", "");
    h.request("c", "f2", "default", "");
    assert_eq!(h.r.inflight_count(), 3);
    // READY: completes f1 (oldest fire-and-forget), rr still waits.
    h.ready("old");
    assert_eq!(h.r.inflight_count(), 2);
    assert_eq!(h.r.stats().completed, 1);
    // The REPLY of rr completes it precisely and forwards the result.
    let sent = h.reply("old", "rr", r#"{"value": 1}"#, None);
    assert_eq!(results(&sent, "c").len(), 1);
    // The READY after that REPLY frees rr's slot: f2 is still running.
    h.ready("old");
    assert_eq!(h.r.inflight_count(), 1);
    assert_eq!(h.r.stats().completed, 2);
    h.ready("old"); // f2's READY
    assert_eq!(h.r.inflight_count(), 0);
    assert_eq!(h.r.stats().completed, 3);
    // Further READYs just add slots.
    h.ready("old");
    assert_eq!(h.r.stats().completed, 3);
}

#[test]
fn job_ack_worker_ready_does_not_complete_anything() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "j", "default", "");
    h.ready("w1");
    assert_eq!(h.r.inflight_count(), 1);
    h.reply("w1", "j", "{}", Some(ResultStatus::Ok));
    assert_eq!(h.r.inflight_count(), 0);
}

#[test]
fn seed_form_reply_without_msgid_completes_oldest_reply_requested_job() {
    let mut h = H::new();
    h.inform("old", "", &[]);
    h.ready("old");
    h.ready("old");
    h.request("c", "a", "default", "");
    h.request("c", "b", "default", "reply-requested");
    let r = Reply {
        payload: br#"{"value": 9}"#.to_vec(),
        orig_msgid: None,
        status: None,
    };
    let sent = h.msg(Backend, "old", "x", Command::Reply(r));
    let rs = results(&sent, "c");
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].orig_msgid, "b");
}

#[test]
fn late_or_duplicate_reply_is_ignored_never_forwarded_twice() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c1", "j1", "default", "reply-requested");
    assert_eq!(results(&h.reply("w1", "j1", "{}", None), "c1").len(), 1);
    assert!(h.reply("w1", "j1", "{}", None).is_empty());
    assert!(h.reply("w1", "never-sent", "{}", None).is_empty());
    // A REPLY from another job manager for a job not on it is ignored
    // (it does not hold the job: no take-back key); the REPLY from the
    // worker it ran on completes it.
    worker(&mut h, "w2", "", 1);
    h.request("c1", "j2", "default", "reply-requested");
    let on = if h
        .r
        .pool
        .get(h.r.pool.id_of(b"w1").unwrap())
        .unwrap()
        .inflight
        .is_empty()
    {
        ("w2", "w1")
    } else {
        ("w1", "w2")
    };
    assert!(h.reply(on.1, "j2", "{}", None).is_empty());
    assert_eq!(h.r.stats().foreign_claims, 1);
    assert_eq!(results(&h.reply(on.0, "j2", "{}", None), "c1").len(), 1);
    assert_eq!(h.r.stats().results_forwarded, 2);
}

#[test]
fn client_gone_leaks_nothing() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("gone", "j1", "default", "reply-requested");
    let sent = h.reply("w1", "j1", "{}", None);
    assert_eq!(results(&sent, "gone").len(), 1);
    let out = h.input(Input::SendFailed {
        socket: Frontend,
        identity: b"gone".to_vec(),
        reason: SendFailure::HostUnreachable,
    });
    assert!(out.is_empty());
    assert!(h.r.unfinished_jobs().is_empty());
    assert_eq!(h.r.inflight_count(), 0);
    assert_eq!(h.r.worker_count(), 1);
}

// ----- redelivery -----------------------------------------------------------

#[test]
fn kbye_sends_unfinished_jobs_back_to_queue_front_in_order() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 2);
    h.request("c", "a", "default", "");
    h.request("c", "b", "default", "");
    h.request("c", "z", "default", ""); // buffered behind
    assert_eq!(h.r.buffered_count(), 1);
    h.msg(Backend, "w1", "k", Command::Kbye);
    assert_eq!(h.r.worker_count(), 0);
    assert_eq!(h.r.buffered_count(), 3);
    assert_eq!(h.r.stats().redelivered, 2);
    worker(&mut h, "w2", "", 0);
    let mut order = vec![];
    for _ in 0..3 {
        order.extend(forwarded(&h.ready("w2"), "w2"));
    }
    assert_eq!(order, vec!["a", "b", "z"]);
}

#[test]
fn removed_worker_jobs_go_straight_to_a_free_worker() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "a", "default", "");
    worker(&mut h, "w2", "", 1);
    let sent = h.msg(Backend, "w1", "k", Command::Kbye);
    assert_eq!(forwarded(&sent, "w2"), vec!["a"]);
    let Command::Request(r) = &to(&sent, Backend, "w2")[0].command else {
        panic!()
    };
    assert_eq!(r.queue, "default");
}

#[test]
fn heartbeat_timeout_removes_worker_and_redelivers() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "a", "default", "");
    worker(&mut h, "w2", "", 0);
    // w2 keeps talking, w1 is silent past 3 s × 3.
    for _ in 0..3 {
        h.advance(3 * SECOND);
        h.heartbeat("w2");
    }
    assert_eq!(h.r.worker_count(), 2, "not yet: exactly 9 s of silence");
    h.advance(SECOND);
    assert_eq!(h.r.worker_count(), 1);
    assert!(h.r.pool.id_of(b"w1").is_none());
    let sent = h.ready("w2");
    assert_eq!(forwarded(&sent, "w2"), vec!["a"]);
}

#[test]
fn send_failure_to_worker_removes_it_and_requeues_the_job_first() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.inform("w2", "", &["job-ack"]);
    h.request("c", "b", "default", ""); // to w1
    h.request("c", "later", "default", ""); // buffered
    let out = h.input(Input::SendFailed {
        socket: Backend,
        identity: b"w1".to_vec(),
        reason: SendFailure::HostUnreachable,
    });
    assert!(decode(out).is_empty());
    assert_eq!(h.r.worker_count(), 1);
    let sent = h.ready("w2");
    assert_eq!(forwarded(&sent, "w2"), vec!["b"]);
    // EAGAIN (peer at HWM) counts as failure as well.
    let _ = h.input(Input::SendFailed {
        socket: Backend,
        identity: b"w2".to_vec(),
        reason: SendFailure::WouldBlock,
    });
    assert_eq!(h.r.worker_count(), 0);
    assert_eq!(h.r.buffered_count(), 2);
}

#[test]
fn lost_deliveries_beyond_max_attempts_dead_letter_with_failed_result() {
    let mut h = H::with(Config {
        max_attempts: 3,
        ..Config::default()
    });
    h.request("c", "doomed", "default", "reply-requested");
    for i in 0..3 {
        let w = format!("w{i}");
        worker(&mut h, &w, "", 1);
        assert_eq!(h.r.inflight_count(), 1);
        let sent = h.msg(Backend, &w, "k", Command::Kbye);
        if i < 2 {
            assert!(results(&sent, "c").is_empty());
        } else {
            let rs = results(&sent, "c");
            assert_eq!(rs.len(), 1);
            assert_eq!(rs[0].status, ResultStatus::Failed);
            let v: serde_json::Value = serde_json::from_slice(&rs[0].payload).unwrap();
            assert_eq!(v["error"]["kind"], "dead-lettered");
            assert_eq!(v["error"]["attempts"], 3);
        }
    }
    assert_eq!(h.r.stats().dead_lettered, 1);
    assert!(h.r.unfinished_jobs().is_empty());
    let v = admin(&mut h, Command::Status);
    assert_eq!(v["dead_letter"]["count"], 1);
    assert_eq!(v["dead_letter"]["recent"][0]["msgid"], "doomed");
}

// ----- retries --------------------------------------------------------------

#[test]
fn failed_reply_with_retry_count_retries_with_doubling_backoff_then_dead_letters() {
    let mut h = H::with(Config {
        journal: true,
        ..Config::default()
    });
    worker(&mut h, "w1", "", 1);
    h.request("c", "r", "default", "reply-requested,retry-count:2");
    let fail = r#"{"error": {"kind": "exception", "message": "boom"}}"#;
    // try 1 fails → retry after 1 s
    let sent = h.reply("w1", "r", fail, Some(ResultStatus::Failed));
    assert!(results(&sent, "c").is_empty());
    assert!(forwarded(&h.ready("w1"), "w1").is_empty());
    assert_eq!(h.r.delayed_count(), 1);
    assert!(forwarded(&h.advance(SECOND - us(1)), "w1").is_empty());
    assert_eq!(forwarded(&h.advance(us(1)), "w1"), vec!["r"]);
    // try 2 fails → retry after 2 s
    h.reply("w1", "r", fail, Some(ResultStatus::Failed));
    h.ready("w1");
    assert!(forwarded(&h.advance(2 * SECOND - us(1)), "w1").is_empty());
    assert_eq!(forwarded(&h.advance(us(1)), "w1"), vec!["r"]);
    // try 3 fails → retries exhausted → dead letter, failed RESULT with the last error
    let sent = h.reply("w1", "r", fail, Some(ResultStatus::Failed));
    let rs = results(&sent, "c");
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].status, ResultStatus::Failed);
    // The last error, with `attempts` counting the executions (3 = 1 + 2
    // retries: the router is the only one retrying).
    let v: serde_json::Value = serde_json::from_slice(&rs[0].payload).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"error": {"kind": "exception", "message": "boom", "attempts": 3}})
    );
    assert_eq!(h.r.stats().retried, 2);
    assert_eq!(h.r.stats().dead_lettered, 1);
    assert!(h.r.unfinished_jobs().is_empty());
    // The journal keeps why it died (the last error), so that a restart
    // lists it too.
    let journaled = h.journal.iter().find_map(|r| match r {
        Record::DeadLettered { msgid, error, .. } if msgid == "r" => Some(error.clone()),
        _ => None,
    });
    assert_eq!(journaled, Some(Some(rs[0].payload.clone())));
}

#[test]
fn retry_that_succeeds_gives_ok_result() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "r", "default", "reply-requested,retry-count:5");
    h.reply("w1", "r", "{}", Some(ResultStatus::Failed));
    h.ready("w1");
    h.advance(SECOND);
    let rs = results(
        &h.reply("w1", "r", r#"{"value": 1}"#, Some(ResultStatus::Ok)),
        "c",
    );
    assert_eq!(rs[0].status, ResultStatus::Ok);
    assert_eq!(h.r.stats().dead_lettered, 0);
}

#[test]
fn backoff_doubles_and_is_capped() {
    let cfg = Config {
        retry_backoff_base: us(100),
        retry_backoff_max: us(500),
        ..Config::default()
    };
    assert_eq!(
        (1..=5).map(|n| cfg.backoff(n)).collect::<Vec<_>>(),
        [100, 200, 400, 500, 500].map(us)
    );
    assert_eq!(cfg.backoff(1000), us(500));
    let d = Config::default();
    assert_eq!(d.backoff(1), SECOND);
    assert_eq!(d.backoff(10), 60 * SECOND);
}

#[test]
fn failed_reply_without_retry_count_completes_as_failed() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "f", "default", "reply-requested");
    let rs = results(&h.reply("w1", "f", "{}", Some(ResultStatus::Failed)), "c");
    assert_eq!(rs[0].status, ResultStatus::Failed);
    assert_eq!(h.r.stats().dead_lettered, 0);
    assert_eq!(h.r.stats().failed, 1);
}

// ----- heartbeats -----------------------------------------------------------

#[test]
fn heartbeats_go_to_workers_and_schedulers_every_interval_with_unix_time() {
    let mut h = H::with(Config {
        epoch_unix_micros: 1_796_000_000_000_000,
        ..Config::default()
    });
    h.now = us(500_000); // 0.5 s after start
    h.inform("w1", "", &[]);
    sched(&mut h, "s1");
    let sent = h.tick();
    assert_eq!(sent.len(), 2);
    for (_, _, m) in &sent {
        let Command::Heartbeat {
            timestamp: Some(ts),
        } = &m.command
        else {
            panic!("{m:?}")
        };
        assert_eq!(ts, "1796000000.5");
    }
    assert!(h.advance(SECOND).is_empty());
    h.heartbeat("w1");
    assert!(h.advance(SECOND).is_empty());
    assert_eq!(h.advance(SECOND).len(), 2);
}

#[test]
fn any_message_counts_as_heartbeat() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 0);
    for _ in 0..5 {
        h.advance(5 * SECOND);
        h.ready("w1");
    }
    // even malformed ones
    h.advance(5 * SECOND);
    h.frames(
        Backend,
        vec![
            b"w1".to_vec(),
            vec![],
            b"eMQP/1.0".to_vec(),
            b"BOGUS".to_vec(),
            b"x".to_vec(),
        ],
    );
    h.advance(5 * SECOND);
    assert_eq!(h.r.worker_count(), 1);
    h.advance(5 * SECOND);
    assert_eq!(h.r.worker_count(), 0);
}

#[test]
fn messages_from_unknown_workers_get_nothing() {
    let mut h = H::new();
    h.request("c", "j", "default", "");
    for cmd in [
        Command::Ready,
        Command::Heartbeat { timestamp: None },
        Command::Kbye,
        Command::Reply(Reply::result(b"{}".to_vec(), "j".into(), ResultStatus::Ok)),
    ] {
        assert!(h.msg(Backend, "ghost", "m", cmd).is_empty());
    }
    assert_eq!(h.r.worker_count(), 0);
    assert_eq!(h.r.buffered_count(), 1);
}

#[test]
fn reconnect_with_new_identity_is_a_new_worker() {
    let mut h = H::new();
    worker(&mut h, "w-old", "", 1);
    h.request("c", "a", "default", "");
    worker(&mut h, "w-new", "", 1);
    assert_eq!(h.r.worker_count(), 2);
    // The old one times out, its job goes to the new one.
    for _ in 0..4 {
        h.advance(3 * SECOND);
        h.heartbeat("w-new");
    }
    assert_eq!(h.r.worker_count(), 1);
    assert_eq!(h.r.inflight_count(), 1);
    let id = h.r.pool.id_of(b"w-new").unwrap();
    assert_eq!(h.r.pool.get(id).unwrap().inflight.len(), 1);
}

#[test]
fn second_inform_from_same_identity_re_registers() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 2);
    h.request("c", "a", "default", "");
    let sent = h.inform("w1", r#"[[10, "default"]]"#, &["job-ack"]);
    assert!(matches!(
        to(&sent, Backend, "w1")[0].command,
        Command::Ack { .. }
    ));
    assert_eq!(h.r.worker_count(), 1);
    assert_eq!(h.r.buffered_count(), 1);
    assert_eq!(forwarded(&h.ready("w1"), "w1"), vec!["a"]);
}

// ----- admin and shutdown ---------------------------------------------------

#[test]
fn admin_status_has_the_0_3_13_fields_and_ours() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "a", "default", "");
    h.request("c", "b", "default", "");
    h.now += 2 * SECOND;
    h.reply("w1", "a", "{}", None);
    h.request("c", "c", "default", "");
    let v = admin(&mut h, Command::Status);
    for k in [
        "inflight_messages_by_queue",
        "latency_messages_by_queue",
        "max_latency_messages_by_queue",
        "waiting_messages_by_queue",
        "processed_messages_by_queue",
        "processed_messages_by_worker",
        "dead_letter",
        "inflight_messages_by_worker",
        "counters",
    ] {
        assert!(v.get(k).is_some(), "missing {k}: {v}");
    }
    assert_eq!(v["inflight_messages_by_queue"]["default"], 2);
    assert_eq!(v["waiting_messages_by_queue"]["default"], 2);
    assert_eq!(v["max_latency_messages_by_queue"]["default"], 2000);
    assert_eq!(v["latency_messages_by_queue"]["default"], 1000);
    assert_eq!(v["processed_messages_by_queue"]["default"], 1);
    assert_eq!(v["processed_messages_by_worker"]["w1"], 1);
    assert_eq!(v["inflight_messages_by_worker"]["w1"], 0);
    assert_eq!(v["counters"]["accepted"], 3);
    assert_eq!(v["dead_letter"]["count"], 0);
}

#[test]
fn admin_show_workers_and_schedulers() {
    let mut h = H::new();
    worker(&mut h, "w1", r#"[[10, "default"], [15, "email"]]"#, 2);
    sched(&mut h, "s1");
    let v = admin(&mut h, Command::RouterShowWorkers);
    let w = &v["connected_workers"]["w1"];
    assert_eq!(
        w["queues"],
        serde_json::json!([[10, "default"], [15, "email"]])
    );
    assert_eq!(w["available_slots"], 2);
    assert!(w["hb"].is_number());
    assert_eq!(
        v["connected_queues"]["email"],
        serde_json::json!([[15, "w1"]])
    );
    h.msg(Backend, "w1", "k", Command::Kbye);
    let v = admin(&mut h, Command::RouterShowWorkers);
    assert_eq!(v["connected_queues"]["default"], serde_json::json!([]));
    let v = admin(&mut h, Command::RouterShowSchedulers);
    assert!(v["connected_schedulers"]["s1"].is_object());
    // anything else is ignored
    assert!(h.msg(Admin, "adm", "x", Command::Ready).is_empty());
}

#[test]
fn admin_disconnect_acks_kbyes_everyone_rejects_new_work_and_exits_when_drained() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    sched(&mut h, "s1");
    h.request("c", "busy", "default", "reply-requested");
    h.request("c", "queued", "default", "");
    let out = h.input(Input::Frames {
        socket: Admin,
        frames: Message::with_msgid("admin:d", Command::Disconnect).encode_routed(b"adm".to_vec()),
    });
    assert!(!out.contains(&Action::Exit), "a job is still in flight");
    let sent = decode(out);
    assert_eq!(
        to(&sent, Admin, "adm")[0].command,
        Command::Ack {
            acked_msgid: "admin:d".into(),
            features: vec![],
        }
    );
    assert_eq!(to(&sent, Backend, "w1")[0].command, Command::Kbye);
    assert_eq!(to(&sent, Frontend, "s1")[0].command, Command::Kbye);
    assert!(h.r.is_draining());
    // New work is refused.
    let rj = rejects(&h.request("c", "new", "default", ""), "c");
    assert_eq!(rj[0].reason, RejectReason::ShuttingDown);
    // READY does not hand out the buffered job; heartbeats go on, so the
    // job manager finishing its job does not take the router for dead.
    assert!(forwarded(&h.ready("w1"), "w1").is_empty());
    let sent = h.advance(3 * SECOND);
    assert!(!sent.is_empty());
    assert!(
        sent.iter()
            .all(|(_, _, m)| matches!(m.command, Command::Heartbeat { .. })),
        "{sent:?}"
    );
    // The in-flight job finishes → result forwarded → exit.
    let out = h.input(Input::Frames {
        socket: Backend,
        frames: Message::with_msgid(
            "rep",
            Command::Reply(Reply::result(
                b"{}".to_vec(),
                "busy".into(),
                ResultStatus::Ok,
            )),
        )
        .encode_routed(b"w1".to_vec()),
    });
    assert_eq!(out.last(), Some(&Action::Exit));
    assert_eq!(results(&decode(out), "c").len(), 1);
    // Buffered jobs are kept for the journal.
    let left = h.r.unfinished_jobs();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].msgid, "queued");
    assert_eq!(h.r.buffered_count(), 1);
    // Exit is emitted once.
    assert!(!h.timeout().contains(&Action::Exit));
}

#[test]
fn shutdown_input_with_nothing_in_flight_exits_at_once() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    let out = h.input(Input::Shutdown);
    assert_eq!(out.last(), Some(&Action::Exit));
    assert_eq!(decode(out)[0].2.command, Command::Kbye);
}

#[test]
fn step_down_kbyes_every_peer_and_releases_nothing_held() {
    let mut h = H::with(Config {
        journal: true,
        ..Config::default()
    });
    worker(&mut h, "w1", "", 1);
    sched(&mut h, "s1");
    h.request("c", "running", "default", "");
    // A REQUEST whose batch is never committed (the lease is lost first):
    // its acknowledgement is held.
    let mut out = Vec::new();
    h.r.handle(
        Input::Frames {
            socket: Frontend,
            frames: vec![
                b"c".to_vec(),
                vec![],
                b"eMQP/1.0".to_vec(),
                b"REQUEST".to_vec(),
                b"held".to_vec(),
                b"default".to_vec(),
                vec![],
                b"[]".to_vec(),
            ],
        },
        h.now,
        &mut out,
    );
    assert!(
        !decode(out).iter().any(|(_, _, m)| is_ack_of(m, "held")),
        "not acknowledged before its commit"
    );
    let mut out = Vec::new();
    h.r.step_down("lease lost", &mut out);
    assert!(h.r.has_exited());
    let sent = decode(out.clone());
    assert!(
        out.iter().all(|a| matches!(a, Action::Send { .. })),
        "no batch, no exit: {out:?}"
    );
    assert_eq!(to(&sent, Backend, "w1")[0].command, Command::Kbye);
    assert_eq!(to(&sent, Frontend, "s1")[0].command, Command::Kbye);
    assert_eq!(sent.len(), 2, "KBYEs only: {sent:?}");
    // Stepping down twice says nothing more.
    let mut again = Vec::new();
    h.r.step_down("lease lost", &mut again);
    assert!(again.is_empty());
}

#[test]
fn drain_timeout_exits_with_jobs_still_in_flight_kept() {
    let mut h = H::with(Config {
        drain_timeout: 5 * SECOND,
        ..Config::default()
    });
    worker(&mut h, "w1", "", 1);
    h.request("c", "slow", "default", "");
    assert!(!h.input(Input::Shutdown).contains(&Action::Exit));
    h.now += 4 * SECOND;
    assert!(!h.timeout().contains(&Action::Exit));
    h.now += SECOND;
    assert!(h.timeout().contains(&Action::Exit));
    assert_eq!(h.r.unfinished_jobs().len(), 1);
}

// ----- journal seam and restore ---------------------------------------------

#[test]
fn journal_ops_are_emitted_when_enabled() {
    let mut h = H::with(Config {
        journal: true,
        max_attempts: 1,
        ..Config::default()
    });
    worker(&mut h, "w1", "", 1);
    let out = h.input(Input::Frames {
        socket: Frontend,
        frames: Message::with_msgid(
            "j1",
            Command::Request(Request {
                queue: "nowhere".into(),
                headers: Headers::parse(b"reply-requested").unwrap(),
                message: b"[1]".to_vec(),
            }),
        )
        .encode_routed(b"c".to_vec()),
    });
    let Action::Journal(batch) = &out[0] else {
        panic!("journal batch must come first: {out:?}")
    };
    assert!(matches!(&batch.records[0], Record::Accepted(_)));
    assert!(
        !decode(out.clone()).iter().any(|(s, _, _)| *s == Frontend) || {
            let first_send = out.iter().position(|a| {
                matches!(
                    a,
                    Action::Send {
                        socket: Frontend,
                        ..
                    }
                )
            });
            let done = 0;
            first_send.is_some_and(|p| p > done)
        },
        "the ack follows the batch: {out:?}"
    );
    let Record::Accepted(job) = &h.journal[0] else {
        panic!("{:?}", h.journal)
    };
    let job = job.clone();
    assert_eq!(job.msgid, "j1");
    assert_eq!(job.queue, "nowhere");
    assert_eq!(job.route, "default");
    assert_eq!(job.payload, b"[1]");
    assert_eq!(job.headers, b"reply-requested");
    let out = h.input(Input::Frames {
        socket: Backend,
        frames: Message::with_msgid(
            "r",
            Command::Reply(Reply::result(b"{}".to_vec(), "j1".into(), ResultStatus::Ok)),
        )
        .encode_routed(b"w1".to_vec()),
    });
    assert!(!out.is_empty());
    assert!(finished_in_journal(&h, "j1"));
    h.ready("w1");
    h.request("c", "j2", "default", "");
    h.input(Input::SendFailed {
        socket: Backend,
        identity: b"w1".to_vec(),
        reason: SendFailure::HostUnreachable,
    });
    assert!(h
        .journal
        .iter()
        .any(|r| matches!(r, Record::DeadLettered { msgid, .. } if msgid == "j2")));
}

#[test]
fn journal_is_silent_when_disabled() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    let out = h.input(Input::Frames {
        socket: Frontend,
        frames: Message::with_msgid(
            "j1",
            Command::Request(Request {
                queue: "default".into(),
                headers: Headers::new(),
                message: b"[1]".to_vec(),
            }),
        )
        .encode_routed(b"c".to_vec()),
    });
    assert!(!out.iter().any(|a| matches!(a, Action::Journal(_))));
}

#[test]
fn restore_queues_recovered_jobs_without_ack_and_dispatches_them() {
    let mut h = H::new();
    let job = |msgid: &str| JobRecord {
        msgid: msgid.into(),
        client: b"c-old".to_vec(),
        queue: "odd".into(),
        route: "default".into(),
        headers: b"reply-requested".to_vec(),
        payload: b"[\"x\"]".to_vec(),
        attempts: 1,
        accepted_at_unix_ms: 5,
        run_at_unix_ms: None,
    };
    let mut out = Vec::new();
    let n = h.r.restore(
        Restored {
            jobs: vec![job("r1"), job("r2")],
            ..Restored::default()
        },
        h.now,
        &mut out,
    );
    assert_eq!(n.jobs, 2);
    assert!(out.is_empty(), "no ack for restored jobs");
    assert_eq!(h.r.buffered_count(), 2);
    h.r.check_invariants().unwrap();
    worker(&mut h, "w1", "", 0);
    let sent = h.ready("w1");
    assert_eq!(forwarded(&sent, "w1"), vec!["r1"]);
    let Command::Request(r) = &to(&sent, Backend, "w1")[0].command else {
        panic!()
    };
    assert_eq!(r.queue, "odd");
    // New jobs come after the restored ones.
    h.request("c", "new", "default", "");
    let ids: Vec<String> = h.r.unfinished_jobs().into_iter().map(|j| j.msgid).collect();
    assert_eq!(ids, ["r1", "r2", "new"]);
    // A result for a restored reply-requested job goes to the old client.
    let rs = results(&h.reply("w1", "r1", "{}", None), "c-old");
    assert_eq!(rs.len(), 1);
}

#[test]
fn decoded_message_input_works_like_frames() {
    let mut h = H::new();
    h.input(Input::Message {
        socket: Backend,
        identity: b"w1".to_vec(),
        message: Message::with_msgid(
            "i",
            Command::Inform(Inform {
                queues: QueueSpec(vec![]),
                peer_type: None,
                features: vec![],
            }),
        ),
    });
    h.input(Input::Message {
        socket: Backend,
        identity: b"w1".to_vec(),
        message: Message::new(Command::Ready),
    });
    let out = h.input(Input::Message {
        socket: Frontend,
        identity: b"c".to_vec(),
        message: Message::with_msgid(
            "j",
            Command::Request(Request {
                queue: "default".into(),
                headers: Headers::parse(b"reply-requested").unwrap(),
                message: b"{}".to_vec(),
            }),
        ),
    });
    let sent = decode(out);
    assert_eq!(forwarded(&sent, "w1"), vec!["j"]);
    assert!(is_ack_of(to(&sent, Frontend, "c")[0], "j"));
}

// ----- REPLY across a job manager reconnect ---------------------------------

#[test]
fn reply_from_new_identity_completes_job_in_flight_on_old_identity() {
    let mut h = H::new();
    worker(&mut h, "old", "", 1);
    h.request("c", "j1", "default", "reply-requested");
    assert_eq!(h.r.inflight_count(), 1);
    // The job manager reconnects (new identity) before the router notices.
    reconnected(&mut h, "old", "new", 1);
    let sent = h.reply("new", "j1", r#"{"value": 1}"#, Some(ResultStatus::Ok));
    let rs = results(&sent, "c");
    assert_eq!(rs.len(), 1, "{sent:?}");
    assert_eq!(rs[0].payload, br#"{"value": 1}"#);
    assert_eq!(h.r.inflight_count(), 0);
    assert!(h.r.unfinished_jobs().is_empty());
    // Slots come from READYs only: the old worker's count is untouched.
    let old = h.r.pool.get(h.r.pool.id_of(b"old").unwrap()).unwrap();
    assert_eq!(old.slots, 0);
    // The old identity times out later: nothing is redelivered.
    let mut sent = Vec::new();
    for _ in 0..20 {
        h.heartbeat("new");
        sent.extend(h.advance(SECOND));
    }
    assert_eq!(h.r.worker_count(), 1);
    assert!(forwarded(&sent, "new").is_empty(), "{sent:?}");
    // A second REPLY (from either identity) is ignored: one RESULT only.
    assert!(results(&h.reply("new", "j1", "{}", None), "c").is_empty());
    assert_eq!(h.r.stats().results_forwarded, 1);
    assert_eq!(h.r.stats().completed, 1);
}

#[test]
fn reply_from_new_identity_completes_job_requeued_after_old_worker_timed_out() {
    let mut h = H::new();
    worker(&mut h, "old", "", 1);
    h.request("c", "j1", "default", "reply-requested");
    // The new connection registers but has no free slot yet.
    reconnected(&mut h, "old", "new", 0);
    for _ in 0..10 {
        h.heartbeat("new");
        h.advance(SECOND);
    }
    assert_eq!(h.r.worker_count(), 1, "old identity timed out");
    assert_eq!(h.r.buffered_count(), 1, "job requeued");
    let sent = h.reply("new", "j1", "{}", Some(ResultStatus::Ok));
    assert_eq!(results(&sent, "c").len(), 1, "{sent:?}");
    assert_eq!(h.r.buffered_count(), 0);
    assert!(h.r.unfinished_jobs().is_empty());
    // The next READY does not redeliver it.
    let sent = h.ready("new");
    assert!(forwarded(&sent, "new").is_empty());
    assert!(h.reply("new", "j1", "{}", None).is_empty());
    assert_eq!(h.r.stats().results_forwarded, 1);
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

#[test]
fn reply_from_new_identity_for_job_redelivered_elsewhere_completes_once() {
    let mut h = H::new();
    // Redelivered to another job manager, which fails it: waits for a retry.
    lost_then_failed(
        &mut h,
        "reply-requested,retry-count:3",
        "old",
        "other",
        "f1",
    );
    // The first run's REPLY arrives on the old job manager's new identity.
    reconnected(&mut h, "old", "new", 0);
    let sent = h.reply("new", "j1", r#"{"value": 2}"#, Some(ResultStatus::Ok));
    assert_eq!(results(&sent, "c").len(), 1);
    assert_eq!(h.r.delayed_count(), 0);
    assert!(h.r.store.find("j1").is_none());
    let sent = h.advance(10 * SECOND);
    assert!(forwarded(&sent, "other").is_empty());
}

#[test]
fn legacy_worker_reply_for_job_elsewhere_is_still_ignored() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "j1", "default", "reply-requested");
    h.inform("legacy", "", &[]);
    assert!(h.reply("legacy", "j1", "{}", None).is_empty());
    assert_eq!(h.r.inflight_count(), 1);
}

// ----- journal: attempts, dead letters --------------------------------------

#[test]
fn redelivery_journals_the_attempt_count() {
    let mut h = H::with(Config {
        journal: true,
        ..Config::default()
    });
    worker(&mut h, "w1", "", 1);
    h.input(Input::Frames {
        socket: Frontend,
        frames: Message::with_msgid(
            "j1",
            Command::Request(Request {
                queue: "default".into(),
                headers: Headers::new(),
                message: b"[1]".to_vec(),
            }),
        )
        .encode_routed(b"c".to_vec()),
    });
    assert!(!h
        .journal
        .iter()
        .any(|r| matches!(r, Record::Attempt { .. })));
    h.msg(Backend, "w1", "k", Command::Kbye);
    h.inform("w2", "", &["job-ack"]);
    let out = h.input(Input::Frames {
        socket: Backend,
        frames: Message::with_msgid("r", Command::Ready).encode_routed(b"w2".to_vec()),
    });
    assert!(h
        .journal
        .iter()
        .any(|r| matches!(r, Record::Attempt { msgid, attempts: 2 } if msgid == "j1")));
    assert!(out.iter().any(|a| matches!(
        a,
        Action::Send {
            socket: Backend,
            ..
        }
    )));
}

#[test]
fn restored_attempt_counts_keep_counting_lost_deliveries() {
    let mut h = H::with(Config {
        max_attempts: 3,
        ..Config::default()
    });
    let job = JobRecord {
        msgid: "r1".into(),
        client: b"c".to_vec(),
        queue: "default".into(),
        route: "default".into(),
        headers: b"reply-requested".to_vec(),
        payload: b"[]".to_vec(),
        attempts: 2,
        accepted_at_unix_ms: 5,
        run_at_unix_ms: None,
    };
    let mut out = Vec::new();
    h.r.restore(
        Restored {
            jobs: vec![job],
            ..Restored::default()
        },
        h.now,
        &mut out,
    );
    h.r.check_invariants().unwrap();
    worker(&mut h, "w1", "", 1);
    // One earlier delivery was lost; losing this one makes 2, the next 3.
    h.msg(Backend, "w1", "k", Command::Kbye);
    assert_eq!(h.r.buffered_count(), 1);
    worker(&mut h, "w2", "", 1);
    let sent = h.msg(Backend, "w2", "k", Command::Kbye);
    assert_eq!(results(&sent, "c").len(), 1, "dead-lettered: {sent:?}");
    assert_eq!(h.r.stats().dead_lettered, 1);
}

#[test]
fn journal_dead_letters_are_listed_on_the_admin_socket() {
    let mut h = H::with(Config {
        epoch_unix_micros: 1_700_000_000_000_000,
        ..Config::default()
    });
    let n = h.r.restore_dead_letters(vec![crate::DeadLetter {
        job: JobRecord {
            msgid: "old-dead".into(),
            client: b"c".to_vec(),
            queue: "default".into(),
            route: "default".into(),
            headers: vec![],
            payload: b"[]".to_vec(),
            attempts: 5,
            accepted_at_unix_ms: 1_600_000_000_000,
            run_at_unix_ms: None,
        },
        reason: "delivery lost 5 times".into(),
        error: None,
        at_unix_ms: 1_700_000_000_000,
    }]);
    assert_eq!(n, 1);
    let v = admin(&mut h, Command::Status);
    assert_eq!(v["dead_letter"]["count"], 1, "{v}");
    assert_eq!(v["dead_letter"]["recent"][0]["msgid"], "old-dead");
    assert_eq!(v["dead_letter"]["recent"][0]["age_ms"], 1_000_000, "{v}");
    h.r.check_invariants().unwrap();
}

// ----- built-in schedules ---------------------------------------------------

/// Unix microseconds at the fake clock's zero.
const EPOCH: u64 = 1_700_000_000_000_000;

fn sched_h() -> H {
    H::with(Config {
        epoch_unix_micros: EPOCH,
        journal: true,
        ..Config::default()
    })
}

fn schedule_msg(queue: &str, headers: &str, interval: i64, cron: &str, body: &str) -> Command {
    Command::Schedule(Schedule {
        queue: queue.into(),
        headers: Headers::parse(headers.as_bytes()).unwrap(),
        interval: emqp_proto::Interval::from_secs(interval).unwrap(),
        message: body.as_bytes().to_vec(),
        cron: cron.into(),
    })
}

/// REQUESTs forwarded to `id` (msgid, queue, headers, payload).
fn forwarded_requests(sent: &[Sent], id: &str) -> Vec<(String, Request)> {
    to(sent, Backend, id)
        .into_iter()
        .filter_map(|m| match &m.command {
            Command::Request(r) => Some((m.msgid.clone(), r.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn interval_schedule_enqueues_and_dispatches_at_the_right_ticks() {
    let mut h = sched_h();
    worker(&mut h, "w1", "", 5);
    let sent = h.msg(
        Frontend,
        "c1",
        "s1",
        schedule_msg(
            "default",
            "guarantee",
            10,
            "",
            r#"["call", {"handler": "noop"}]"#,
        ),
    );
    assert!(is_ack_of(to(&sent, Frontend, "c1")[0], "s1"), "{sent:?}");
    // Not run before a tick (the core is consulted on ticks only)...
    assert!(forwarded(&sent, "w1").is_empty());
    // ...and at once on the next tick (no nohaste).
    let sent = h.advance(us(100_000));
    let reqs = forwarded_requests(&sent, "w1");
    assert_eq!(reqs.len(), 1, "{sent:?}");
    let (msgid, req) = &reqs[0];
    assert_ne!(msgid, "s1", "a generated msgid");
    assert_eq!(req.queue, "default");
    assert_eq!(req.message, br#"["call", {"handler": "noop"}]"#);
    let first = msgid.clone();
    for _ in 0..98 {
        h.heartbeat("w1");
        assert!(forwarded(&h.advance(us(100_000)), "w1").is_empty());
    }
    h.heartbeat("w1");
    let sent = h.advance(us(100_000));
    assert_eq!(forwarded(&sent, "w1").len(), 1, "second run 10 s later");
    assert_eq!(h.r.stats().scheduled_runs, 2);
    // Completing a scheduled job sends nothing to any client.
    let sent = h.reply("w1", &first, "{}", Some(ResultStatus::Ok));
    assert!(sent.iter().all(|(s, _, _)| *s != Frontend), "{sent:?}");
    assert_eq!(h.r.stats().completed, 1);
}

#[test]
fn scheduled_runs_are_journalled_as_accepted_jobs_with_the_schedule_record() {
    let mut h = sched_h();
    let out = h.input(Input::Frames {
        socket: Frontend,
        frames: Message::with_msgid("s1", schedule_msg("default", "", 60, "", "[1]"))
            .encode_routed(b"c1".to_vec()),
    });
    let put = out
        .iter()
        .position(|a| matches!(a, Action::Journal(b) if matches!(b.records[..], [Record::PutSchedule { .. }])))
        .expect("schedule journalled");
    let ack = out
        .iter()
        .position(|a| matches!(a, Action::Send { .. }))
        .unwrap();
    assert!(put < ack, "journal before the ack");
    h.now += us(100_000);
    let before = h.journal.len();
    h.timeout();
    let accepted: Vec<&JobRecord> = h.journal[before..]
        .iter()
        .filter_map(|r| match r {
            Record::Accepted(j) => Some(j),
            _ => None,
        })
        .collect();
    assert_eq!(accepted.len(), 1, "{:?}", h.journal);
    assert!(accepted[0].client.is_empty());
    assert_eq!(accepted[0].payload, b"[1]");
    assert!(h.journal[before..]
        .iter()
        .any(|r| matches!(r, Record::PutSchedule { .. })));
    assert_eq!(h.r.buffered_count(), 1, "no worker yet: buffered");
}

#[test]
fn nohaste_schedule_first_runs_one_interval_later() {
    let mut h = sched_h();
    worker(&mut h, "w1", "", 5);
    h.msg(
        Frontend,
        "c1",
        "s1",
        schedule_msg("default", "nohaste", 2, "", "[]"),
    );
    let mut runs = Vec::new();
    for i in 0..50 {
        h.heartbeat("w1");
        if !forwarded(&h.advance(us(100_000)), "w1").is_empty() {
            runs.push(i);
        }
    }
    // Ticks at +0.1 s .. +5.0 s: runs at +2.0 s and +4.0 s.
    assert_eq!(runs, vec![19, 39]);
    // The directive is not forwarded to the worker.
    let sent = {
        h.ready("w1");
        let mut got = Vec::new();
        for _ in 0..25 {
            h.heartbeat("w1");
            got.extend(h.advance(us(100_000)));
        }
        got
    };
    let reqs = forwarded_requests(&sent, "w1");
    assert!(!reqs.is_empty());
    assert!(!reqs[0].1.headers.nohaste());
}

#[test]
fn same_schedule_twice_is_one_schedule() {
    let mut h = sched_h();
    worker(&mut h, "w1", "", 10);
    for m in ["s1", "s2"] {
        let sent = h.msg(Frontend, "c1", m, schedule_msg("default", "", 5, "", "[7]"));
        assert!(is_ack_of(&sent[0].2, m));
    }
    assert_eq!(h.r.schedules().len(), 1);
    let sent = h.advance(us(100_000));
    assert_eq!(forwarded(&sent, "w1").len(), 1, "one run, not two");
    let v = admin(&mut h, Command::RouterShowSchedulers);
    assert_eq!(v["schedules"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["schedules"][0]["queue"], "default");
    assert_eq!(v["schedules"][0]["interval_secs"], 5);
    assert_eq!(v["schedules"][0]["run_count"], 1);
    assert!(v["connected_schedulers"].as_object().unwrap().is_empty());
}

#[test]
fn unschedule_stops_the_schedule() {
    let mut h = sched_h();
    worker(&mut h, "w1", "", 10);
    h.msg(
        Frontend,
        "c1",
        "s1",
        schedule_msg("default", "", 1, "", "[7]"),
    );
    assert_eq!(forwarded(&h.advance(us(100_000)), "w1").len(), 1);
    let Command::Schedule(s) = schedule_msg("default", "", 1, "", "[7]") else {
        unreachable!()
    };
    let out = h.input(Input::Frames {
        socket: Frontend,
        frames: Message::with_msgid("u1", Command::Unschedule(s.clone()))
            .encode_routed(b"c1".to_vec()),
    });
    assert!(h
        .journal
        .iter()
        .any(|r| matches!(r, Record::DeleteSchedule { .. })));
    let sent = decode(out);
    assert!(to(&sent, Frontend, "c1").iter().any(|m| is_ack_of(m, "u1")));
    // Unscheduling again: nothing matches, the client is told so.
    let again = h.msg(Frontend, "c1", "u2", Command::Unschedule(s));
    let rj = rejects(&again, "c1");
    assert_eq!(rj.len(), 1, "{again:?}");
    assert_eq!(rj[0].orig_msgid, "u2");
    assert_eq!(rj[0].reason, RejectReason::NotFound);
    assert!(h.r.schedules().is_empty());
    for _ in 0..30 {
        h.heartbeat("w1");
        assert!(forwarded(&h.advance(us(100_000)), "w1").is_empty());
    }
}

#[test]
fn schedules_restored_from_journal_ops_run_a_missed_run_once() {
    let mut h = sched_h();
    let mut records: std::collections::BTreeMap<String, Vec<u8>> = Default::default();
    let keep = |out: &[Action], records: &mut std::collections::BTreeMap<String, Vec<u8>>| {
        for a in out {
            let Action::Journal(b) = a else { continue };
            for r in &b.records {
                match r {
                    Record::PutSchedule { id, blob } => {
                        records.insert(id.clone(), blob.clone());
                    }
                    Record::DeleteSchedule { id } => {
                        records.remove(id);
                    }
                    _ => {}
                }
            }
        }
    };
    let out = h.input(Input::Frames {
        socket: Frontend,
        frames: Message::with_msgid("s1", schedule_msg("default", "", 10, "", "[1]"))
            .encode_routed(b"c1".to_vec()),
    });
    keep(&out, &mut records);
    h.now += us(100_000);
    let out = h.timeout();
    keep(&out, &mut records);
    assert_eq!(h.r.stats().scheduled_runs, 1);
    assert_eq!(records.len(), 1);
    // The router is down for a minute (6 runs missed); a new one restores.
    let mut h2 = H::with(Config {
        epoch_unix_micros: EPOCH + (h.now + 60 * SECOND).as_micros() as u64,
        journal: true,
        ..Config::default()
    });
    h2.now = us(0);
    let mut out = Vec::new();
    let mut bad = records.clone().into_iter().collect::<Vec<_>>();
    bad.push(("bogus".into(), b"not a record".to_vec()));
    let n = h2.r.restore(
        Restored {
            schedules: bad,
            ..Restored::default()
        },
        Duration::ZERO,
        &mut out,
    );
    assert_eq!(n.schedules, 1);
    h2.commit(&mut out);
    assert!(h2
        .journal
        .contains(&Record::DeleteSchedule { id: "bogus".into() }));
    worker(&mut h2, "w1", "", 10);
    let sent = h2.advance(us(100_000));
    assert_eq!(forwarded(&sent, "w1").len(), 1, "the missed run, once");
    for _ in 0..50 {
        h2.heartbeat("w1");
        assert!(forwarded(&h2.advance(us(100_000)), "w1").is_empty());
    }
    let v = admin(&mut h2, Command::RouterShowSchedulers);
    assert_eq!(v["schedules"][0]["run_count"], 2, "{v}");
}

#[test]
fn bad_cron_or_interval_is_rejected_malformed_with_the_reason() {
    let mut h = sched_h();
    let sent = h.msg(
        Frontend,
        "c1",
        "s1",
        schedule_msg("default", "", -1, "not a cron", "[]"),
    );
    let rj = rejects(&sent, "c1");
    assert_eq!(rj.len(), 1, "{sent:?}");
    assert_eq!(rj[0].orig_msgid, "s1");
    assert_eq!(rj[0].reason, RejectReason::Malformed);
    assert!(rj[0].text.contains("cron"), "{}", rj[0].text);
    let sent = h.msg(
        Frontend,
        "c1",
        "s2",
        schedule_msg("default", "", 0, "", "[]"),
    );
    assert_eq!(rejects(&sent, "c1")[0].reason, RejectReason::Malformed);
    assert!(h.r.schedules().is_empty());
}

#[test]
fn with_an_external_scheduler_schedule_is_forwarded_not_booked() {
    let mut h = sched_h();
    sched(&mut h, "s1");
    let sent = h.frames(Frontend, schedule_frames("SCHEDULE"));
    assert_eq!(sent.len(), 2, "forwarded, and acked to the client");
    assert_eq!(sent[0].1, "s1");
    assert!(is_ack_of(&sent[1].2, "sch-1") && sent[1].1 == "c1");
    assert!(h.r.schedules().is_empty());
    // Booked while no scheduler is connected; UNSCHEDULE with one connected
    // goes to it and removes the built-in schedule too.
    h.msg(Frontend, "s1", "k", Command::Kbye);
    let sent = h.frames(Frontend, schedule_frames("SCHEDULE"));
    assert!(is_ack_of(&sent[0].2, "sch-1"));
    assert_eq!(h.r.schedules().len(), 1);
    sched(&mut h, "s2");
    let sent = h.frames(Frontend, schedule_frames("UNSCHEDULE"));
    assert_eq!(sent.len(), 2, "forwarded, and acked to the client");
    assert_eq!(sent[0].1, "s2");
    assert!(is_ack_of(&sent[1].2, "sch-1") && sent[1].1 == "c1");
    assert!(h.r.schedules().is_empty());
}

#[test]
fn no_scheduled_runs_while_shutting_down() {
    let mut h = sched_h();
    h.msg(
        Frontend,
        "c1",
        "s1",
        schedule_msg("default", "", 1, "", "[]"),
    );
    h.input(Input::Shutdown);
    h.advance(5 * SECOND);
    assert_eq!(h.r.stats().scheduled_runs, 0);
    let sent = h.msg(
        Frontend,
        "c1",
        "s2",
        schedule_msg("default", "", 1, "", "[2]"),
    );
    assert_eq!(rejects(&sent, "c1")[0].reason, RejectReason::ShuttingDown);
}

// ----- metrics ----------------------------------------------------------------

#[test]
fn metrics_count_per_queue_and_the_latency_histogram() {
    let mut h = H::new();
    worker(&mut h, "w1", r#"[[10, "default"], [5, "mail"]]"#, 1);
    h.request("c", "j1", "default", "");
    h.now += us(3_000); // 3 ms
    h.reply("w1", "j1", "{}", Some(ResultStatus::Ok));
    h.ready("w1");
    h.request("c", "j2", "mail", "retry-count:1");
    h.reply("w1", "j2", "{}", Some(ResultStatus::Failed));
    h.ready("w1");
    h.request("c", "j3", "mail", "");
    h.msg(Backend, "w1", "k", Command::Kbye);
    let text = crate::metrics::render(&h.r.snapshot(h.now));
    for line in [
        r#"emq_jobs_processed_total{queue="default"} 1"#,
        r#"emq_jobs_processed_total{queue="mail"} 0"#,
        r#"emq_jobs_retried_total{queue="mail"} 1"#,
        r#"emq_jobs_redelivered_total{queue="mail"} 1"#,
        r#"emq_queue_depth{queue="mail"} 1"#,
        r#"emq_queue_depth{queue="default"} 0"#,
        r#"emq_queue_retry_waiting{queue="mail"} 1"#,
        r#"emq_job_latency_seconds_bucket{queue="default",le="0.0025"} 0"#,
        r#"emq_job_latency_seconds_bucket{queue="default",le="0.005"} 1"#,
        r#"emq_job_latency_seconds_bucket{queue="default",le="+Inf"} 1"#,
        r#"emq_job_latency_seconds_count{queue="default"} 1"#,
        "emq_connected_workers 0",
        "# TYPE emq_job_latency_seconds histogram",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    // Admin's processed count keeps its meaning (finished jobs).
    let v = admin(&mut h, Command::Status);
    assert_eq!(v["processed_messages_by_queue"]["default"], 1, "{v}");
}

#[test]
fn latency_histogram_buckets_are_cumulative_and_bounded() {
    let mut hist = crate::metrics::Histogram::default();
    for us in [50, 100, 101, 60_000_000, 60_000_001] {
        hist.observe(us);
    }
    let c = hist.cumulative();
    assert_eq!(c[0], 2, "≤ 100 µs");
    assert_eq!(c[1], 3);
    assert_eq!(*c.last().unwrap(), 4, "≤ 60 s");
    assert_eq!(hist.count, 5, "+Inf");
}

/// Rough core throughput (run with `--release -- --ignored --nocapture`):
/// REQUEST → dispatch → REPLY → READY for 200k jobs over 4 job-ack workers.
#[test]
#[ignore]
fn core_throughput() {
    let mut r = Router::new(Config::default());
    let mut out = Vec::with_capacity(64);
    let workers: Vec<Vec<u8>> = (0..4).map(|i| format!("w{i}").into_bytes()).collect();
    for w in &workers {
        let f = frames_routed(
            w,
            &["INFORM", "i", r#"[[10, "default"]]"#, "worker", "job-ack"],
        );
        r.handle(
            Input::Frames {
                socket: Backend,
                frames: f,
            },
            Duration::ZERO,
            &mut out,
        );
        for _ in 0..16 {
            r.handle(
                Input::Frames {
                    socket: Backend,
                    frames: frames_routed(w, &["READY", "r"]),
                },
                Duration::ZERO,
                &mut out,
            );
        }
    }
    out.clear();
    let n = 200_000u64;
    let t = std::time::Instant::now();
    for i in 0..n {
        let msgid = format!("job-{i}");
        let f = frames_routed(
            b"client",
            &[
                "REQUEST",
                &msgid,
                "default",
                "reply-requested",
                "[\"call\", {}]",
            ],
        );
        r.handle(
            Input::Frames {
                socket: Frontend,
                frames: f,
            },
            us(i),
            &mut out,
        );
        let mut to_worker = None;
        for a in out.drain(..) {
            if let Action::Send {
                socket: Backend,
                identity,
                ..
            } = a
            {
                to_worker = Some(identity);
            }
        }
        let w = to_worker.expect("dispatched");
        let f = frames_routed(&w, &["REPLY", "rep", "{}", &msgid, "ok"]);
        r.handle(
            Input::Frames {
                socket: Backend,
                frames: f,
            },
            us(i),
            &mut out,
        );
        r.handle(
            Input::Frames {
                socket: Backend,
                frames: frames_routed(&w, &["READY", "r"]),
            },
            us(i),
            &mut out,
        );
        out.clear();
    }
    let el = t.elapsed();
    assert_eq!(r.stats().completed, n);
    eprintln!(
        "core: {n} jobs in {el:?} = {:.0} jobs/s",
        n as f64 / el.as_secs_f64()
    );
}

fn frames_routed(id: &[u8], parts: &[&str]) -> Vec<Vec<u8>> {
    let mut f = vec![id.to_vec(), vec![], b"eMQP/1.0".to_vec()];
    f.extend(parts.iter().map(|p| p.as_bytes().to_vec()));
    f
}
