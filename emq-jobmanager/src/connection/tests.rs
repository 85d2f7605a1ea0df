//! Every rule of the connection core, driven with a fake clock.

use super::*;
use emqp_proto::job::CallJob;
use emqp_proto::{Header, Headers};
use serde_json::json;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const SEED: u64 = 7;

fn cfg(concurrency: usize) -> Config {
    let mut c = Config::new(
        vec!["tcp://127.0.0.1:1".into(), "tcp://127.0.0.1:2".into()],
        QueueSpec::parse_cli("10:default,15:email").unwrap(),
        concurrency,
    );
    c.unix_micros_at_start = 1_000_000_000_000;
    c.id_seed = SEED;
    c
}

/// The first `n` ids a core seeded with `seed` hands out.
fn seeded_ids(seed: u64, n: usize) -> Vec<String> {
    let mut ids = MsgIds::seeded(seed);
    (0..n).map(|_| ids.next_id()).collect()
}

/// A connection plus a fake clock.
struct Harness {
    c: Connection,
    now: Duration,
}

impl Harness {
    fn new(concurrency: usize) -> (Harness, Vec<Action>) {
        Self::with(cfg(concurrency))
    }

    fn with(cfg: Config) -> (Harness, Vec<Action>) {
        let mut c = Connection::new(cfg);
        let mut a = Vec::new();
        c.start(Duration::ZERO, &mut a);
        (
            Harness {
                c,
                now: Duration::ZERO,
            },
            a,
        )
    }

    fn at(&mut self, t: Duration, input: Input) -> Vec<Action> {
        assert!(t >= self.now, "the fake clock goes forward");
        self.now = t;
        let mut a = Vec::new();
        self.c.handle(input, t, &mut a);
        self.check_invariant();
        a
    }

    fn msg(&mut self, t: Duration, cmd: Command) -> Vec<Action> {
        self.at(t, Input::Frames(Message::new(cmd).encode()))
    }

    /// The driver's loop with no input until `t`: sleep until
    /// `poll_timeout`, `handle_timeout` at exactly that instant, repeat.
    fn advance(&mut self, t: Duration) -> Vec<Action> {
        let mut all = Vec::new();
        for _ in 0..10_000 {
            match self.c.poll_timeout() {
                Some(d) if d <= t => {
                    let d = d.max(self.now);
                    self.now = d;
                    self.c.handle_timeout(d, &mut all);
                    self.check_invariant();
                }
                _ => {
                    self.now = t;
                    return all;
                }
            }
        }
        panic!("timers keep firing before {t:?}: {:?}", names(&all));
    }

    /// `handle_timeout` at the next deadline, which must be `expected`.
    fn fire_at(&mut self, expected: Duration) -> Vec<Action> {
        assert_eq!(self.c.poll_timeout(), Some(expected));
        self.advance(expected)
    }

    fn send_failed(&mut self, t: Duration, m: &Message) -> Vec<Action> {
        self.at(t, Input::SendFailed { message: m.clone() })
    }

    fn check_invariant(&self) {
        let c = self.c.slot_counts();
        let n = self.c.cfg.concurrency;
        assert!(c.offered + c.busy <= n, "{c:?}");
        assert_eq!(c.offered + c.busy + c.idle, n);
        // Never more than `concurrency` run; what is held and promised
        // stays within the window; nothing is held while a slot is free.
        assert!(
            c.busy + c.held + c.offered + c.extra <= n + self.c.cfg.prefetch.max(),
            "{c:?}"
        );
        assert!(
            c.held == 0 || c.busy == n,
            "held while a slot is free: {c:?}"
        );
    }

    /// ACK the INFORM found in `actions`.
    fn ack(&mut self, t: Duration, actions: &[Action]) -> Vec<Action> {
        let id = inform_msgid(actions).expect("an INFORM to ACK");
        self.msg(
            t,
            Command::Ack {
                acked_msgid: id,
                features: vec![],
            },
        )
    }
}

fn inform_msgid(actions: &[Action]) -> Option<String> {
    actions.iter().find_map(|a| match a {
        Action::Send(m) if matches!(m.command, Command::Inform(_)) => Some(m.msgid.clone()),
        _ => None,
    })
}

fn names(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .map(|a| match a {
            Action::Connect { .. } => "connect".to_string(),
            Action::Send(m) => m.command.name().to_string(),
            Action::StartJob(_) => "start".to_string(),
            Action::CancelJob { .. } => "cancel".to_string(),
            Action::KillAll => "kill-all".to_string(),
            Action::Exit(c) => format!("exit {c}"),
        })
        .collect()
}

fn count(actions: &[Action], name: &str) -> usize {
    names(actions).iter().filter(|n| *n == name).count()
}

fn starts(actions: &[Action]) -> Vec<JobStart> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::StartJob(j) => Some(j.clone()),
            _ => None,
        })
        .collect()
}

fn sent(actions: &[Action], name: &str) -> Vec<Message> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(m) if m.command.name() == name => Some(m.clone()),
            _ => None,
        })
        .collect()
}

fn replies(actions: &[Action]) -> Vec<Reply> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(Message {
                command: Command::Reply(r),
                ..
            }) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn outcome(r: &Reply) -> JobOutcome {
    JobOutcome::from_payload(&r.payload).unwrap()
}

fn call_job(handler: &str) -> Vec<u8> {
    Job::Call(CallJob {
        handler: handler.into(),
        args: json!([1]),
    })
    .to_message()
}

fn request(headers: Headers, message: Vec<u8>) -> Command {
    Command::Request(Request {
        queue: "default".into(),
        headers,
        message,
    })
}

fn req_msg(id: &str, headers: Headers) -> Input {
    Input::Frames(Message::with_msgid(id, request(headers, call_job("echo"))).encode())
}

fn finished(j: &JobStart, outcome: JobOutcome) -> Input {
    Input::JobFinished {
        slot: j.slot,
        run: j.run,
        outcome,
    }
}

fn failed(kind: ErrorKind) -> JobOutcome {
    JobOutcome::Error(JobError::new(kind, "boom"))
}

/// Started and registered (ACK at 10 ms), with `n` READYs sent.
fn registered(concurrency: usize) -> Harness {
    let (mut h, a) = Harness::new(concurrency);
    let a = h.ack(ms(10), &a);
    assert_eq!(count(&a, "READY"), concurrency);
    h
}

#[test]
fn start_connects_and_sends_one_inform_with_queues_worker_and_features() {
    let (mut h, a) = Harness::new(2);
    assert_eq!(names(&a), ["connect", "INFORM"]);
    let ids = seeded_ids(SEED, 2);
    let Action::Connect { endpoint, identity } = &a[0] else {
        panic!()
    };
    assert_eq!(endpoint, "tcp://127.0.0.1:1");
    assert_eq!(identity, &ids[0], "identity from the seeded ids");
    assert_eq!(h.c.identity(), ids[0]);
    let Action::Send(m) = &a[1] else { panic!() };
    let frames = m.clone().encode();
    assert_eq!(
        frames[3],
        ids[1].as_bytes(),
        "INFORM msgid from the seeded ids"
    );
    assert_eq!(frames[4], br#"[[10, "default"], [15, "email"]]"#);
    assert_eq!(frames[5], b"worker");
    assert_eq!(frames[6], b"job-ack,cancel");
    // Nothing more (no second INFORM, no READY, no HEARTBEAT) before the ACK timeout.
    assert_eq!(h.c.poll_timeout(), Some(ms(5000)));
    assert!(h.advance(ms(4999)).is_empty());
}

#[test]
fn the_same_seed_gives_the_same_frames_and_another_seed_other_ids() {
    let run = |seed: u64| {
        let mut c = cfg(2);
        c.id_seed = seed;
        let (mut h, a) = Harness::with(c);
        let mut all = a.clone();
        all.extend(h.ack(ms(10), &a));
        all.extend(h.at(ms(20), req_msg("j", Headers::new())));
        let s = starts(&all);
        all.extend(h.at(ms(30), finished(&s[0], JobOutcome::Value(json!(1)))));
        all.extend(h.advance(ms(3030)));
        all
    };
    let a = run(1);
    assert_eq!(
        names(&a),
        [
            "connect",
            "INFORM",
            "READY",
            "READY",
            "start",
            "REPLY",
            "READY",
            "HEARTBEAT"
        ]
    );
    assert_eq!(a, run(1));
    let ids = |a: &[Action]| -> Vec<String> {
        a.iter()
            .filter_map(|x| match x {
                Action::Send(m) => Some(m.msgid.clone()),
                _ => None,
            })
            .collect()
    };
    let (one, two) = (ids(&a), ids(&run(2)));
    assert!(one.iter().all(|id| !two.contains(id)), "{one:?} {two:?}");
    let mut unique = one.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), one.len(), "every msgid differs");
}

#[test]
fn no_ack_reconnects_with_fresh_identity_to_next_broker_and_informs_again() {
    let (mut h, a) = Harness::new(1);
    let first = h.c.identity().to_string();
    let a2 = h.fire_at(ms(5000));
    assert_eq!(names(&a2), ["connect", "INFORM"]);
    let Action::Connect { endpoint, identity } = &a2[0] else {
        panic!()
    };
    assert_eq!(endpoint, "tcp://127.0.0.1:2");
    assert_ne!(identity, &first);
    assert_ne!(inform_msgid(&a), inform_msgid(&a2));
    // An ACK of the new INFORM registers.
    let a3 = h.ack(ms(5100), &a2);
    assert_eq!(names(&a3), ["READY"]);
    // Third connect goes back to the first broker.
    let (mut h, _) = Harness::new(1);
    h.fire_at(ms(5000));
    let a = h.fire_at(ms(10000));
    assert!(matches!(&a[0], Action::Connect { endpoint, .. } if endpoint == "tcp://127.0.0.1:1"));
}

#[test]
fn ack_sends_one_ready_per_slot_without_waiting_for_a_heartbeat() {
    let (mut h, a) = Harness::new(3);
    let a = h.ack(ms(10), &a);
    assert_eq!(names(&a), ["READY", "READY", "READY"]);
    assert!(h.c.is_registered());
    assert_eq!(
        h.c.slot_counts(),
        SlotCounts {
            offered: 3,
            idle: 0,
            busy: 0,
            extra: 0,
            held: 0
        }
    );
    // A duplicate ACK (or a 0.3.13 router's HEARTBEAT) adds no READY.
    let a = h.ack(
        ms(20),
        &[Action::Send(Message::new(Command::Inform(Inform {
            queues: QueueSpec::default(),
            peer_type: None,
            features: vec![],
        })))],
    );
    assert!(a.is_empty());
    assert!(h
        .msg(ms(30), Command::Heartbeat { timestamp: None })
        .is_empty());
}

#[test]
fn ack_with_another_msgid_is_accepted() {
    let (mut h, _) = Harness::new(1);
    let a = h.msg(
        ms(10),
        Command::Ack {
            acked_msgid: "something-else".into(),
            features: vec![],
        },
    );
    assert_eq!(names(&a), ["READY"]);
}

#[test]
fn malformed_frames_are_dropped_counted_and_do_not_count_as_router_life() {
    let mut h = registered(1);
    let deadline = h.c.poll_timeout();
    for (i, frames) in [
        vec![b"junk".to_vec()],
        vec![
            vec![],
            b"eMQP/0.9".to_vec(),
            b"READY".to_vec(),
            b"id".to_vec(),
        ],
        vec![
            vec![],
            b"eMQP/1.0".to_vec(),
            b"REQUEST".to_vec(),
            b"id".to_vec(),
        ],
    ]
    .into_iter()
    .enumerate()
    {
        assert!(h.at(ms(100 + i as u64), Input::Frames(frames)).is_empty());
    }
    assert_eq!(h.c.malformed_count(), 3);
    assert!(h.c.is_registered());
    assert_eq!(h.c.poll_timeout(), deadline);
    assert_eq!(h.c.slot_counts().offered, 1);
}

#[test]
fn request_runs_on_a_slot_and_finish_sends_reply_before_ready() {
    let mut h = registered(2);
    let a = h.at(ms(100), req_msg("job-1", Headers::new()));
    let s = starts(&a);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].msgid, "job-1");
    assert_eq!(
        s[0].timeout,
        Some(Duration::from_secs(300)),
        "0.3.13's GLOBAL_TIMEOUT by default"
    );
    assert!(matches!(&s[0].job, Job::Call(c) if c.handler == "echo"));
    assert_eq!(h.c.slot_counts().busy, 1);
    let a = h.at(ms(200), finished(&s[0], JobOutcome::Value(json!([1]))));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let r = &replies(&a)[0];
    assert_eq!(r.orig_msgid.as_deref(), Some("job-1"));
    assert_eq!(r.status, Some(ResultStatus::Ok));
    assert_eq!(r.payload, br#"{"value":[1]}"#);
    // The wire form is [payload, orig_msgid, status].
    let Action::Send(m) = &a[0] else { panic!() };
    let f = m.clone().encode();
    assert_eq!(&f[4..], [&br#"{"value":[1]}"#[..], b"job-1", b"ok"]);
}

#[test]
fn failed_job_replies_failed_then_ready() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    let a = h.at(ms(200), finished(&s[0], failed(ErrorKind::Exception)));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let r = &replies(&a)[0];
    assert_eq!(r.status, Some(ResultStatus::Failed));
    let JobOutcome::Error(e) = outcome(r) else {
        panic!()
    };
    assert_eq!(e.kind, ErrorKind::Exception);
    assert_eq!(e.attempts, Some(1));
}

#[test]
fn retry_count_is_the_routers_a_failing_job_runs_once_and_replies_failed_once() {
    let mut h = registered(1);
    let mut hd = Headers::new();
    hd.push(Header::RetryCount(2));
    let s = starts(&h.at(ms(100), req_msg("r", hd)));
    assert_eq!(s.len(), 1);
    let a = h.at(ms(1000), finished(&s[0], failed(ErrorKind::Exception)));
    assert_eq!(names(&a), ["REPLY", "READY"], "no local retry");
    let r = &replies(&a)[0];
    assert_eq!(r.orig_msgid.as_deref(), Some("r"));
    assert_eq!(r.status, Some(ResultStatus::Failed));
    let JobOutcome::Error(e) = outcome(r) else {
        panic!()
    };
    assert_eq!((e.kind, e.attempts), (ErrorKind::Exception, Some(1)));
    // Time passes (the router stays alive): the job is never started again.
    let mut later = Vec::new();
    for t in (2000..=20_000).step_by(2000) {
        h.msg(ms(t), Command::Heartbeat { timestamp: None });
        later.extend(h.advance(ms(t + 1000)));
    }
    assert_eq!(count(&later, "start"), 0, "{:?}", names(&later));
    assert_eq!(count(&later, "REPLY"), 0);
    assert_eq!(h.c.slot_counts().offered, 1);
}

#[test]
fn request_without_free_slot_replies_failed_and_never_exceeds_concurrency() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("a", Headers::new())));
    assert_eq!(s.len(), 1);
    let a = h.at(ms(110), req_msg("b", Headers::new()));
    assert_eq!(names(&a), ["REPLY"], "no start, no READY");
    let r = &replies(&a)[0];
    assert_eq!(r.orig_msgid.as_deref(), Some("b"));
    assert_eq!(r.status, Some(ResultStatus::Failed));
    assert_eq!(h.c.slot_counts().busy, 1);
}

#[test]
fn bad_payload_replies_bad_job_and_gives_the_slot_back() {
    let mut h = registered(1);
    let a = h.at(
        ms(100),
        Input::Frames(
            Message::with_msgid("bad", request(Headers::new(), b"not json".to_vec())).encode(),
        ),
    );
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!(e.kind, ErrorKind::BadJob);
    assert_eq!(h.c.slot_counts().offered, 1);
}

#[test]
fn a_result_over_the_max_message_size_becomes_a_result_too_large_failure() {
    let mut c = cfg(1);
    c.max_message_size = Some(1000);
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    // `{"value":"x…"}` is 12 bytes plus the string: 988 x's are exactly the limit.
    let s = starts(&h.at(ms(100), req_msg("fits", Headers::new())));
    let a = h.at(
        ms(200),
        finished(&s[0], JobOutcome::Value(json!("x".repeat(988)))),
    );
    assert_eq!(names(&a), ["REPLY", "READY"]);
    assert_eq!(replies(&a)[0].payload.len(), 1000);
    assert_eq!(replies(&a)[0].status, Some(ResultStatus::Ok));

    let s = starts(&h.at(ms(300), req_msg("big", Headers::new())));
    let a = h.at(
        ms(400),
        finished(&s[0], JobOutcome::Value(json!("x".repeat(989)))),
    );
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let r = &replies(&a)[0];
    assert_eq!(r.orig_msgid.as_deref(), Some("big"));
    assert_eq!(r.status, Some(ResultStatus::Failed));
    assert!(r.payload.len() <= 1000);
    let text = String::from_utf8(r.payload.clone()).unwrap();
    assert!(text.contains(r#""kind":"result-too-large""#), "{text}");
    let JobOutcome::Error(e) = outcome(r) else {
        panic!()
    };
    assert_eq!(e.kind, ErrorKind::ResultTooLarge);
    assert!(
        e.message.contains("1001 bytes") && e.message.contains("1000 bytes"),
        "size and limit in {:?}",
        e.message
    );
    assert_eq!(e.attempts, Some(1));

    // A failure that is too big (a shell job's huge stdout) too.
    let s = starts(&h.at(ms(500), req_msg("big-error", Headers::new())));
    let mut err = JobError::new(ErrorKind::Exit, "exit status 1");
    err.stdout = Some("y".repeat(5000));
    let a = h.at(ms(600), finished(&s[0], JobOutcome::Error(err)));
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!(e.kind, ErrorKind::ResultTooLarge);
}

#[test]
fn max_message_size_defaults_to_16_mib_and_none_is_unlimited() {
    assert_eq!(cfg(1).max_message_size, Some(16 * 1024 * 1024));
    let mut c = cfg(1);
    c.max_message_size = None;
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    let a = h.at(
        ms(200),
        finished(&s[0], JobOutcome::Value(json!("x".repeat(100_000)))),
    );
    assert_eq!(replies(&a)[0].status, Some(ResultStatus::Ok));
}

#[test]
fn heartbeat_every_interval_only_when_nothing_else_was_sent() {
    let mut h = registered(1);
    // READYs went out at 10 ms: the next heartbeat is due at 3010 ms.
    assert_eq!(h.c.poll_timeout(), Some(ms(3010)));
    assert!(h.advance(ms(2000)).is_empty());
    // Keep the router alive.
    h.msg(ms(2500), Command::Heartbeat { timestamp: None });
    let a = h.fire_at(ms(3010));
    assert_eq!(names(&a), ["HEARTBEAT"]);
    let Action::Send(Message {
        command: Command::Heartbeat {
            timestamp: Some(ts),
        },
        ..
    }) = &a[0]
    else {
        panic!()
    };
    assert_eq!(ts, "1000003.01");
    assert_eq!(h.c.poll_timeout(), Some(ms(6010)));
    // Something else sent (a REPLY + READY) postpones the next heartbeat.
    let s = starts(&h.at(ms(4000), req_msg("j", Headers::new())));
    h.msg(ms(5000), Command::Heartbeat { timestamp: None });
    h.at(ms(5500), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(h.c.poll_timeout(), Some(ms(8500)));
    assert!(h.advance(ms(8499)).is_empty());
    assert_eq!(names(&h.advance(ms(8500))), ["HEARTBEAT"]);
}

#[test]
fn any_router_message_counts_as_a_heartbeat() {
    let mut h = registered(2);
    // Only REQUESTs, no HEARTBEATs, for 20 s: no reconnect.
    for i in 0..10u64 {
        let a = h.at(
            ms(2000 * (i + 1)),
            req_msg(&format!("j{i}"), Headers::new()),
        );
        let s = starts(&a);
        h.at(
            ms(2000 * (i + 1) + 1),
            finished(&s[0], JobOutcome::Value(json!(null))),
        );
        assert_eq!(count(&h.advance(ms(2000 * (i + 1) + 1999)), "connect"), 0);
    }
}

#[test]
fn router_silence_reconnects_to_next_broker_with_new_identity_ready_only_for_free_slots() {
    let mut h = registered(2);
    let old = h.c.identity().to_string();
    let s = starts(&h.at(ms(100), req_msg("long", Headers::new())));
    // Heartbeats go out at 3010, 6010, 9010 ms; the router stays silent.
    assert_eq!(
        names(&h.advance(ms(9100))),
        ["HEARTBEAT", "HEARTBEAT", "HEARTBEAT"],
        "9 s after the last message at 100 ms: not dead yet"
    );
    let a = h.fire_at(ms(9100) + Duration::from_micros(1));
    assert_eq!(names(&a), ["connect", "INFORM"]);
    let Action::Connect { endpoint, identity } = &a[0] else {
        panic!()
    };
    assert_eq!(endpoint, "tcp://127.0.0.1:2");
    assert_ne!(identity, &old);
    assert!(!h.c.is_registered());
    // After the ACK: READY only for the one free slot.
    let a2 = h.ack(ms(9200), &a);
    assert_eq!(names(&a2), ["READY"]);
    // The job that ran across the reconnect replies on the new connection.
    let a3 = h.at(ms(9300), finished(&s[0], JobOutcome::Value(json!("done"))));
    assert_eq!(names(&a3), ["REPLY", "READY"]);
    assert_eq!(replies(&a3)[0].orig_msgid.as_deref(), Some("long"));
    assert_eq!(h.c.slot_counts().offered, 2);
}

#[test]
fn reply_of_a_job_finishing_while_disconnected_waits_for_the_ack() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    let a = h.advance(ms(9101));
    assert_eq!(names(&a).last().map(String::as_str), Some("INFORM"));
    let done = h.at(ms(9200), finished(&s[0], JobOutcome::Value(json!(7))));
    assert!(
        done.is_empty(),
        "no REPLY/READY before the ACK: {:?}",
        names(&done)
    );
    let a2 = h.ack(ms(9300), &a);
    assert_eq!(names(&a2), ["REPLY", "READY"]);
    assert_eq!(replies(&a2)[0].orig_msgid.as_deref(), Some("j"));
}

#[test]
fn kbye_or_disconnect_with_no_job_running_reconnects_after_the_delay() {
    for cmd in [Command::Kbye, Command::Disconnect] {
        let mut h = registered(2);
        let old = h.c.identity().to_string();
        assert!(h.msg(ms(100), cmd.clone()).is_empty());
        assert_eq!(h.c.slot_counts().offered, 0, "the router forgot our READYs");
        assert!(!h.c.is_draining());
        assert!(h.advance(ms(1099)).is_empty());
        let a = h.fire_at(ms(1100));
        assert_eq!(names(&a), ["connect", "INFORM"]);
        assert_ne!(h.c.identity(), old);
        assert_eq!(names(&h.ack(ms(1200), &a)), ["READY", "READY"]);
    }
}

#[test]
fn kbye_while_jobs_run_finishes_them_on_the_same_connection_then_reconnects() {
    for cmd in [Command::Kbye, Command::Disconnect] {
        let mut h = registered(3);
        let old = h.c.identity().to_string();
        let a1 = starts(&h.at(ms(100), req_msg("a", Headers::new())));
        let b1 = starts(&h.at(ms(110), req_msg("b", Headers::new())));
        assert!(h.msg(ms(200), cmd.clone()).is_empty());
        assert!(h.c.is_draining());
        assert_eq!(
            h.c.slot_counts(),
            SlotCounts {
                offered: 0,
                idle: 1,
                busy: 2,
                extra: 0,
                held: 0
            }
        );
        // No reconnect while the jobs run: the next deadline is a heartbeat.
        assert_eq!(h.c.poll_timeout(), Some(ms(3010)));
        let a = h.at(ms(1000), finished(&a1[0], JobOutcome::Value(json!("A"))));
        assert_eq!(names(&a), ["REPLY"], "no READY to a router that left");
        assert_eq!(replies(&a)[0].orig_msgid.as_deref(), Some("a"));
        assert_eq!(h.c.identity(), old, "same connection");
        assert!(h.c.is_draining());
        h.msg(ms(2000), Command::Heartbeat { timestamp: None });
        assert_eq!(
            names(&h.advance(ms(4000))),
            ["HEARTBEAT"],
            "the link is kept"
        );
        let a = h.at(ms(4500), finished(&b1[0], failed(ErrorKind::Exception)));
        assert_eq!(names(&a), ["REPLY"]);
        assert_eq!(replies(&a)[0].status, Some(ResultStatus::Failed));
        assert_eq!(h.c.identity(), old);
        assert!(!h.c.is_draining());
        // Then the reconnect, after the delay, as with no jobs.
        assert!(h.advance(ms(5499)).is_empty());
        let a = h.fire_at(ms(5500));
        assert_eq!(names(&a), ["connect", "INFORM"]);
        assert!(
            matches!(&a[0], Action::Connect { endpoint, .. } if endpoint == "tcp://127.0.0.1:2")
        );
        assert_ne!(h.c.identity(), old);
        assert_eq!(names(&h.ack(ms(5600), &a)), ["READY", "READY", "READY"]);
    }
}

#[test]
fn router_silence_while_draining_reconnects_and_the_reply_waits_for_the_ack() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    h.msg(ms(200), Command::Kbye);
    assert!(h.c.is_draining());
    assert_eq!(
        names(&h.advance(ms(9200))),
        ["HEARTBEAT", "HEARTBEAT", "HEARTBEAT"]
    );
    let a = h.fire_at(ms(9200) + Duration::from_micros(1));
    assert_eq!(names(&a), ["connect", "INFORM"]);
    assert!(!h.c.is_draining());
    assert!(h
        .at(ms(9300), finished(&s[0], JobOutcome::Value(json!(1))))
        .is_empty());
    let a2 = h.ack(ms(9400), &a);
    assert_eq!(names(&a2), ["REPLY", "READY"]);
    assert_eq!(replies(&a2)[0].orig_msgid.as_deref(), Some("j"));
}

#[test]
fn a_reply_whose_send_failed_is_sent_again_at_the_heartbeat_deadline() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    let a = h.at(ms(500), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let reply = sent(&a, "REPLY").remove(0);
    assert!(h.send_failed(ms(500), &reply).is_empty());
    assert_eq!(h.c.slot_counts().offered, 1, "the READY went out");
    h.msg(ms(2000), Command::Heartbeat { timestamp: None });
    // In place of the HEARTBEAT, the same REPLY again.
    let a = h.fire_at(ms(3500));
    assert_eq!(names(&a), ["REPLY"]);
    assert_eq!(sent(&a, "REPLY")[0], reply);
    // Sent once: the next deadline is a plain HEARTBEAT.
    h.msg(ms(5000), Command::Heartbeat { timestamp: None });
    assert_eq!(names(&h.fire_at(ms(6500))), ["HEARTBEAT"]);
}

#[test]
fn a_reply_whose_send_failed_goes_out_before_the_next_reply() {
    let mut h = registered(2);
    let a = starts(&h.at(ms(100), req_msg("a", Headers::new())));
    let b = starts(&h.at(ms(100), req_msg("b", Headers::new())));
    let out = h.at(ms(200), finished(&a[0], JobOutcome::Value(json!("A"))));
    let ready_a = sent(&out, "READY").remove(0);
    h.send_failed(ms(200), &sent(&out, "REPLY")[0]);
    h.send_failed(ms(200), &ready_a);
    assert_eq!(
        h.c.slot_counts(),
        SlotCounts {
            offered: 0,
            idle: 1,
            busy: 1,
            extra: 0,
            held: 0
        }
    );
    let out = h.at(ms(300), finished(&b[0], JobOutcome::Value(json!("B"))));
    assert_eq!(names(&out), ["REPLY", "REPLY", "READY", "READY"]);
    let ids: Vec<_> = replies(&out)
        .iter()
        .map(|r| r.orig_msgid.clone().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b"], "the lost REPLY first");
    assert_eq!(h.c.slot_counts().offered, 2);
}

#[test]
fn a_ready_whose_send_failed_frees_its_slot_unoffered_and_is_offered_again() {
    let (mut h, a) = Harness::new(2);
    let a = h.ack(ms(10), &a);
    let readies = sent(&a, "READY");
    assert_eq!(readies.len(), 2);
    assert!(h.send_failed(ms(10), &readies[1]).is_empty());
    assert_eq!(
        h.c.slot_counts(),
        SlotCounts {
            offered: 1,
            idle: 1,
            busy: 0,
            extra: 0,
            held: 0
        }
    );
    h.msg(ms(1000), Command::Heartbeat { timestamp: None });
    // Offered again at the heartbeat deadline, in place of the HEARTBEAT.
    let a = h.fire_at(ms(3010));
    assert_eq!(names(&a), ["READY"]);
    assert_eq!(h.c.slot_counts().offered, 2);

    // Lost again and again: re-offered at each deadline, never over-counted.
    let mut t = 3010;
    for _ in 0..3 {
        let r = sent(&a, "READY");
        let r = r.first().expect("a READY");
        h.send_failed(ms(t), r);
        assert_eq!(h.c.slot_counts().idle, 1);
        h.msg(ms(t + 1000), Command::Heartbeat { timestamp: None });
        t += 3000;
        assert_eq!(names(&h.fire_at(ms(t))), ["READY"]);
    }
    assert_eq!(h.c.slot_counts().offered, 2);
    // A failed HEARTBEAT or INFORM changes nothing (their timers cover them).
    let hb = Message::new(Command::Heartbeat { timestamp: None });
    assert!(h.send_failed(ms(t), &hb).is_empty());
    assert_eq!(h.c.slot_counts().offered, 2);
}

#[test]
fn a_ready_lost_just_before_a_reconnect_is_not_counted_twice() {
    let mut h = registered(1);
    // Router silent since the ACK at 10 ms: a new connection at 9010 ms.
    let a = h.advance(ms(9011));
    assert_eq!(count(&a, "connect"), 1);
    // The READY of the old connection is reported lost after the reconnect.
    let stale = Message::new(Command::Ready);
    h.send_failed(ms(9011), &stale);
    assert_eq!(h.c.slot_counts().idle, 1);
    let a2 = h.ack(ms(9100), &a);
    assert_eq!(names(&a2), ["READY"]);
}

#[test]
fn shutdown_lets_running_jobs_finish_with_heartbeats_then_says_kbye_and_exits_0() {
    let mut h = registered(2);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    // No KBYE yet: the router would redeliver the running job at once.
    let a = h.at(ms(200), Input::Shutdown);
    assert!(names(&a).is_empty(), "{:?}", names(&a));
    assert!(h.c.is_shutting_down());
    // No new jobs.
    assert!(starts(&h.at(ms(300), req_msg("late", Headers::new()))).is_empty());
    // Heartbeats go on (the router must not take us for dead), no
    // reconnects; the grace period ends at 30.2 s.
    let a = h.advance(ms(20_000));
    assert!(count(&a, "HEARTBEAT") >= 6, "{:?}", names(&a));
    assert_eq!(count(&a, "connect"), 0);
    let a = h.at(ms(21_000), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "KBYE", "exit 0"], "REPLY but no READY");
    assert_eq!(h.c.poll_timeout(), None, "stopped");
    assert!(h.advance(ms(40_000)).is_empty());
}

#[test]
fn shutdown_with_nothing_running_exits_at_once() {
    let mut h = registered(2);
    assert_eq!(names(&h.at(ms(100), Input::Shutdown)), ["KBYE", "exit 0"]);
    assert_eq!(h.c.poll_timeout(), None);
}

#[test]
fn grace_period_expiry_kills_jobs_says_kbye_without_replies_and_exits_0() {
    let mut c = cfg(2);
    c.grace_period = Duration::from_secs(5);
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    h.at(ms(100), req_msg("a", Headers::new()));
    h.at(ms(100), req_msg("b", Headers::new()));
    h.at(ms(200), Input::Shutdown);
    let a = h.advance(ms(5199));
    assert!(
        names(&a).iter().all(|n| n == "HEARTBEAT"),
        "{:?}",
        names(&a)
    );
    let a = h.fire_at(ms(5200));
    // No REPLY for the killed jobs (they did not fail: we left); the KBYE
    // makes the router redeliver them elsewhere.
    assert_eq!(names(&a), ["kill-all", "KBYE", "exit 0"]);
}

#[test]
fn replies_queued_while_disconnected_are_flushed_before_kbye_on_shutdown() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    assert_eq!(count(&h.advance(ms(9101)), "connect"), 1);
    assert!(h
        .at(ms(9200), finished(&s[0], JobOutcome::Value(json!(1))))
        .is_empty());
    assert_eq!(
        names(&h.at(ms(9300), Input::Shutdown)),
        ["REPLY", "KBYE", "exit 0"]
    );
}

#[test]
fn timeout_cancels_the_job_frees_the_slot_once_and_replies_timeout() {
    let mut h = registered(1);
    let mut hd = Headers::new();
    hd.push(Header::Timeout(2));
    let s = starts(&h.at(ms(100), req_msg("t", hd)));
    assert_eq!(s[0].timeout, Some(Duration::from_secs(2)));
    assert_eq!(h.c.poll_timeout(), Some(ms(2100)));
    h.at(
        ms(150),
        Input::JobStarted {
            slot: 0,
            run: s[0].run,
        },
    );
    h.msg(ms(1000), Command::Heartbeat { timestamp: None });
    // 2 s from the start at 150 ms, before the heartbeat at 3010 ms.
    assert!(h.advance(ms(2149)).is_empty());
    let a = h.fire_at(ms(2150));
    assert_eq!(
        a,
        vec![Action::CancelJob {
            slot: 0,
            run: s[0].run,
            reason: CancelReason::Timeout,
        }]
    );
    assert_eq!(h.c.poll_timeout(), Some(ms(3010)), "cancel once");
    assert_eq!(
        h.c.slot_counts().busy,
        1,
        "busy until the pool confirms the kill"
    );
    let a = h.at(ms(2300), finished(&s[0], failed(ErrorKind::Crash)));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!(e.kind, ErrorKind::Timeout);
    // A second report of the same run frees nothing.
    assert!(h
        .at(ms(2400), finished(&s[0], failed(ErrorKind::Crash)))
        .is_empty());
    assert_eq!(h.c.slot_counts().offered, 1);
}

#[test]
fn a_timed_out_job_with_retry_count_is_not_run_again() {
    let mut h = registered(1);
    let mut hd = Headers::new();
    hd.push(Header::RetryCount(1));
    hd.push(Header::Timeout(1));
    let s = starts(&h.at(ms(100), req_msg("t", hd)));
    assert_eq!(names(&h.fire_at(ms(1100))), ["cancel"]);
    let a = h.at(ms(1150), finished(&s[0], failed(ErrorKind::Crash)));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!((e.kind, e.attempts), (ErrorKind::Timeout, Some(1)));
    h.msg(ms(1500), Command::Heartbeat { timestamp: None });
    assert_eq!(count(&h.advance(ms(5000)), "start"), 0);
}

/// A REQUEST with `headers` and the `echo` call job with `extra` fields.
fn req_with(id: &str, headers: Headers, extra: serde_json::Value) -> Input {
    let mut fields = json!({"handler": "echo"});
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        fields[k] = v;
    }
    let payload = serde_json::to_vec(&json!(["call", fields])).unwrap();
    Input::Frames(Message::with_msgid(id, request(headers, payload)).encode())
}

fn timeout_header(n: u64) -> Headers {
    let mut hd = Headers::new();
    hd.push(Header::Timeout(n));
    hd
}

#[test]
fn a_jobs_timeout_is_its_header_else_its_payload_field_else_the_global_timeout() {
    let mut c = cfg(6);
    c.default_timeout = Some(Duration::from_secs(50));
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    let secs = |n| Some(Duration::from_secs(n));
    let cases = [
        // The header wins over the payload's field.
        (timeout_header(2), json!({"timeout": 30}), secs(2)),
        (Headers::new(), json!({"timeout": 30}), secs(30)),
        (Headers::new(), json!({"timeout": 0.5}), Some(ms(500))),
        // timeout:0 and "timeout": 0 name no timeout: the next one counts.
        (timeout_header(0), json!({"timeout": 7}), secs(7)),
        (timeout_header(0), json!({"timeout": 0}), secs(50)),
        (Headers::new(), json!({}), secs(50)),
    ];
    for (i, (headers, extra, want)) in cases.into_iter().enumerate() {
        let id = format!("t{i}");
        let s = starts(&h.at(ms(100), req_with(&id, headers, extra.clone())));
        assert_eq!(s[0].timeout, want, "{extra}");
    }
    // The earliest deadline is the 0.5 s one, from its start.
    h.at(ms(200), Input::JobStarted { slot: 2, run: 3 });
    assert_eq!(h.c.poll_timeout(), Some(ms(700)));
    let a = h.advance(ms(700));
    assert_eq!(
        a,
        vec![Action::CancelJob {
            slot: 2,
            run: 3,
            reason: CancelReason::Timeout,
        }]
    );
    let a = h.at(
        ms(710),
        Input::JobFinished {
            slot: 2,
            run: 3,
            outcome: failed(ErrorKind::Crash),
        },
    );
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!(
        (e.kind, e.message.as_str()),
        (
            ErrorKind::Timeout,
            "job ran past its timeout of 0.5 s and was killed"
        )
    );
}

#[test]
fn no_global_timeout_lets_a_job_without_one_run_for_ever() {
    let mut c = cfg(1);
    c.default_timeout = None;
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    let s = starts(&h.at(ms(100), req_msg("forever", Headers::new())));
    assert_eq!(s[0].timeout, None);
    h.at(
        ms(150),
        Input::JobStarted {
            slot: 0,
            run: s[0].run,
        },
    );
    // Only the heartbeat timers remain (the router keeps talking).
    for t in (1..=400).map(|k| ms(k * 1000)) {
        h.msg(t, Command::Heartbeat { timestamp: None });
        assert_eq!(count(&h.advance(t + ms(500)), "cancel"), 0);
    }
    assert_eq!(h.c.slot_counts().busy, 1);
}

#[test]
fn a_bad_payload_timeout_is_a_bad_job() {
    let mut h = registered(1);
    let a = h.at(
        ms(100),
        req_with("neg", Headers::new(), json!({"timeout": -3})),
    );
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!(e.kind, ErrorKind::BadJob);
    assert!(e.message.contains("timeout"), "{}", e.message);
}

#[test]
fn works_with_a_0_3_13_router_flow() {
    // ACK, HEARTBEATs every 3 s, a REQUEST with 0.3.13 headers and payload.
    let (mut h, a) = Harness::new(2);
    let id = inform_msgid(&a).unwrap();
    let a = h.at(
        ms(50),
        Input::Frames(
            Message::with_msgid(
                "0cd877dd",
                Command::Ack {
                    acked_msgid: id,
                    features: vec![],
                },
            )
            .encode(),
        ),
    );
    assert_eq!(count(&a, "READY"), 2);
    h.msg(
        ms(3000),
        Command::Heartbeat {
            timestamp: Some("1796217053.0917153".into()),
        },
    );
    let payload = br#"["run", {"callable": "noop", "path": "pyemq_jobs", "args": [], "kwargs": {}, "class_args": [], "class_kwargs": {}}]"#;
    let a = h.at(
        ms(3100),
        Input::Frames(
            Message::with_msgid(
                "df85c496",
                request(
                    Headers::parse(b"reply-requested").unwrap(),
                    payload.to_vec(),
                ),
            )
            .encode(),
        ),
    );
    let s = starts(&a);
    assert!(matches!(&s[0].job, Job::Run(r) if r.callable == "noop"));
}

fn cancel(msgid: &str) -> Command {
    Command::Cancel {
        orig_msgid: msgid.into(),
    }
}

fn cancel_job(j: &JobStart) -> Action {
    Action::CancelJob {
        slot: j.slot,
        run: j.run,
        reason: CancelReason::Router,
    }
}

/// The exact payload of the REPLY to a cancelled job.
const CANCELLED_PAYLOAD: &[u8] =
    br#"{"error":{"kind":"cancelled","message":"cancelled by the router","attempts":1}}"#;

#[test]
fn cancel_stops_the_job_and_once_it_ends_replies_cancelled_then_ready() {
    let mut h = registered(2);
    let s = starts(&h.at(ms(100), req_msg("c", Headers::new())));
    let other = starts(&h.at(ms(110), req_msg("other", Headers::new())));
    // The CANCEL frame as the router sends it.
    let frames = Message::with_msgid("x1", cancel("c")).encode();
    assert_eq!(&frames[2..], [&b"CANCEL"[..], b"x1", b"c"]);
    let a = h.at(ms(200), Input::Frames(frames));
    assert_eq!(a, vec![cancel_job(&s[0])], "only this job is stopped");
    assert_eq!(h.c.slot_counts().busy, 2, "busy until the pool reports it");
    // The pool reports the killed job (a shell job killed by SIGKILL).
    let a = h.at(ms(300), finished(&s[0], failed(ErrorKind::Exit)));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let Action::Send(m) = &a[0] else { panic!() };
    assert_eq!(
        &m.clone().encode()[4..],
        [CANCELLED_PAYLOAD, b"c", b"failed"]
    );
    // Exactly once: a second report, a late CANCEL, change nothing.
    assert!(h
        .at(ms(400), finished(&s[0], failed(ErrorKind::Exit)))
        .is_empty());
    assert!(h.msg(ms(500), cancel("c")).is_empty());
    // The other job is untouched and replies as usual.
    let a = h.at(ms(600), finished(&other[0], JobOutcome::Value(json!(2))));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    assert_eq!(replies(&a)[0].status, Some(ResultStatus::Ok));
    assert_eq!(h.c.slot_counts().offered, 2);
}

#[test]
fn a_second_cancel_sends_no_second_kill_and_the_job_is_replied_once() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("c", Headers::new())));
    assert_eq!(h.msg(ms(200), cancel("c")), vec![cancel_job(&s[0])]);
    assert!(h.msg(ms(250), cancel("c")).is_empty());
    let a = h.at(ms(300), finished(&s[0], failed(ErrorKind::Crash)));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    assert_eq!(replies(&a)[0].payload, CANCELLED_PAYLOAD);
    // A new job on the freed slot is not hit by the old CANCEL.
    let s2 = starts(&h.at(ms(400), req_msg("next", Headers::new())));
    assert_eq!(s2[0].slot, s[0].slot);
    let a = h.at(ms(500), finished(&s2[0], JobOutcome::Value(json!("n"))));
    assert_eq!(replies(&a)[0].status, Some(ResultStatus::Ok));
}

#[test]
fn a_job_that_succeeds_before_the_kill_reaches_it_is_replied_with_its_result() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("c", Headers::new())));
    assert_eq!(h.msg(ms(200), cancel("c")), vec![cancel_job(&s[0])]);
    // Its result was already on its way when the kill was ordered.
    let a = h.at(ms(210), finished(&s[0], JobOutcome::Value(json!("done"))));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let r = &replies(&a)[0];
    assert_eq!(
        (r.payload.as_slice(), r.status),
        (&br#"{"value":"done"}"#[..], Some(ResultStatus::Ok))
    );
}

#[test]
fn cancel_of_a_job_not_running_here_is_ignored() {
    let mut h = registered(2);
    let s = starts(&h.at(ms(100), req_msg("a", Headers::new())));
    assert!(h.msg(ms(200), cancel("never-delivered")).is_empty());
    // Finished, its REPLY sent: a CANCEL that crossed it is ignored.
    assert_eq!(
        names(&h.at(ms(300), finished(&s[0], JobOutcome::Value(json!(1))))),
        ["REPLY", "READY"]
    );
    assert!(h.msg(ms(400), cancel("a")).is_empty());
    assert_eq!(
        h.c.slot_counts(),
        SlotCounts {
            offered: 2,
            idle: 0,
            busy: 0,
            extra: 0,
            held: 0
        }
    );
    // A CANCEL counts as router life, like any message.
    assert_eq!(h.c.poll_timeout(), Some(ms(3300)));
}

#[test]
fn cancel_and_timeout_stop_a_job_once_and_the_reply_says_cancelled() {
    let mut hd = Headers::new();
    hd.push(Header::Timeout(1));
    // The timeout fires first; the CANCEL then sends no second kill.
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("t", hd.clone())));
    assert_eq!(names(&h.fire_at(ms(1100))), ["cancel"]);
    assert!(h.msg(ms(1150), cancel("t")).is_empty());
    let a = h.at(ms(1200), finished(&s[0], failed(ErrorKind::Timeout)));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    assert_eq!(replies(&a)[0].payload, CANCELLED_PAYLOAD);
    // The CANCEL comes first; the timeout then fires no kill.
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("t", hd)));
    assert_eq!(h.msg(ms(500), cancel("t")), vec![cancel_job(&s[0])]);
    h.msg(ms(2000), Command::Heartbeat { timestamp: None });
    assert_eq!(count(&h.advance(ms(2500)), "cancel"), 0);
    let a = h.at(ms(2600), finished(&s[0], failed(ErrorKind::Cancelled)));
    assert_eq!(replies(&a)[0].payload, CANCELLED_PAYLOAD);
}

#[test]
fn cancel_while_leaving_stops_the_job_and_its_reply_still_goes_out() {
    // After the router's KBYE: the REPLY on the same connection, no READY.
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("k", Headers::new())));
    h.msg(ms(200), Command::Kbye);
    assert!(h.c.is_draining());
    assert_eq!(h.msg(ms(300), cancel("k")), vec![cancel_job(&s[0])]);
    let a = h.at(ms(400), finished(&s[0], failed(ErrorKind::Exit)));
    assert_eq!(names(&a), ["REPLY"]);
    assert_eq!(replies(&a)[0].payload, CANCELLED_PAYLOAD);
    // During our own shutdown: the REPLY, then the exit.
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("s", Headers::new())));
    assert!(names(&h.at(ms(200), Input::Shutdown)).is_empty());
    assert_eq!(h.msg(ms(300), cancel("s")), vec![cancel_job(&s[0])]);
    let a = h.at(ms(400), finished(&s[0], failed(ErrorKind::Exit)));
    assert_eq!(names(&a), ["REPLY", "KBYE", "exit 0"]);
    assert_eq!(replies(&a)[0].payload, CANCELLED_PAYLOAD);
}

/// A tiny deterministic generator for the accounting fuzz test.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn slot_accounting_holds_under_random_events_and_send_failures() {
    for seed in 0..40u64 {
        let mut rng = Lcg(seed);
        let conc = 1 + rng.next(4) as usize;
        let (mut h, mut last) = Harness::new(conc);
        let mut t = 0u64;
        let mut running: Vec<JobStart> = Vec::new();
        // The router's view: credit = READYs received - REQUESTs sent, per connection.
        let mut credit: i64 = 0;
        let mut n = 0;
        // Per job, the msgids of the REPLY messages sent for it: one (a
        // copy sent again after a reconnect is the same message).
        let mut delivered_replies: std::collections::HashMap<String, Vec<String>> =
            std::collections::HashMap::new();
        // Jobs the router cancelled, and the kills ordered (one per run).
        let mut cancelled = std::collections::HashSet::new();
        let mut kills = std::collections::HashSet::new();
        for _ in 0..400 {
            t += 1 + rng.next(1500);
            let now = ms(t);
            let input = match rng.next(9) {
                0 => match inform_msgid(&last) {
                    Some(id) => Input::Frames(
                        Message::new(Command::Ack {
                            acked_msgid: id,
                            features: if rng.next(2) == 0 {
                                vec![]
                            } else {
                                vec![FEATURE_REPLY_RESEND.into()]
                            },
                        })
                        .encode(),
                    ),
                    None => Input::Frames(vec![b"junk".to_vec()]),
                },
                1 | 2 if credit > 0 || rng.next(10) == 0 => {
                    n += 1;
                    credit = (credit - 1).max(0);
                    let mut hd = Headers::new();
                    if rng.next(3) == 0 {
                        hd.push(Header::Timeout(1 + rng.next(3)));
                    }
                    if rng.next(3) == 0 {
                        hd.push(Header::RetryCount(rng.next(3) as u32));
                    }
                    req_msg(&format!("j{n}"), hd)
                }
                3 | 4 if !running.is_empty() => {
                    let j = running.remove(rng.next(running.len() as u64) as usize);
                    let o = if rng.next(2) == 0 {
                        JobOutcome::Value(json!(1))
                    } else {
                        failed(ErrorKind::Exception)
                    };
                    finished(&j, o)
                }
                5 if !running.is_empty() && rng.next(2) == 0 => {
                    // The job keeps running until the pool reports it.
                    let j = &running[rng.next(running.len() as u64) as usize];
                    let target = if rng.next(4) == 0 {
                        "unknown"
                    } else {
                        &j.msgid
                    };
                    if target == j.msgid {
                        cancelled.insert(j.msgid.clone());
                    }
                    Input::Frames(Message::new(cancel(target)).encode())
                }
                5 => Input::Frames(Message::new(Command::Heartbeat { timestamp: None }).encode()),
                6 if rng.next(20) == 0 => {
                    // The router that says KBYE forgets our READYs.
                    credit = 0;
                    Input::Frames(Message::new(Command::Kbye).encode())
                }
                7 if rng.next(10) == 0 => Input::LinkDown {
                    identity: h.c.identity().to_string(),
                },
                _ => Input::Frames(Message::new(Command::Heartbeat { timestamp: None }).encode()),
            };
            let mut a = h.at(now, input);
            a.extend(h.advance(now));
            // The driver: carry out the actions; some sends fail, and go
            // back in as input right after the batch.
            let mut failures = Vec::new();
            for act in &a {
                match act {
                    Action::Connect { .. } => credit = 0,
                    Action::Send(m) if rng.next(6) == 0 => failures.push(m.clone()),
                    Action::Send(m) if m.command == Command::Ready => credit += 1,
                    Action::Send(Message {
                        msgid: reply_msgid,
                        command: Command::Reply(r),
                    }) => {
                        let msgid = r.orig_msgid.clone().unwrap();
                        if cancelled.contains(&msgid) && r.status == Some(ResultStatus::Failed) {
                            assert_eq!(r.payload, CANCELLED_PAYLOAD, "seed {seed}: {msgid}");
                        }
                        let sent = delivered_replies.entry(msgid).or_default();
                        if !sent.contains(reply_msgid) {
                            sent.push(reply_msgid.clone());
                        }
                    }
                    Action::StartJob(j) => running.push(j.clone()),
                    Action::CancelJob { slot, run, .. } => {
                        assert!(
                            running.iter().any(|j| (j.slot, j.run) == (*slot, *run)),
                            "seed {seed}: a kill for a job not running"
                        );
                        assert!(kills.insert(*run), "seed {seed}: run {run} killed twice");
                    }
                    _ => {}
                }
            }
            for m in failures {
                assert!(h.send_failed(now, &m).is_empty());
            }
            if inform_msgid(&a).is_some() {
                last = a.clone();
            }
            let c = h.c.slot_counts();
            assert!(
                credit <= c.offered as i64,
                "seed {seed}: credit {credit} > {c:?}"
            );
            assert!(running.len() <= conc, "seed {seed}");
        }
        for (job, sent) in &delivered_replies {
            assert_eq!(
                sent.len(),
                1,
                "seed {seed}: job {job} replied twice: {sent:?}"
            );
        }
    }
}

// ---- the credit window (window.rs sizes it; these are the core's rules) --

fn with_prefetch(concurrency: usize, prefetch: Prefetch) -> Harness {
    let mut c = cfg(concurrency);
    c.prefetch = prefetch;
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    h
}

/// Each REQUEST named in `ids` at `t`; the jobs started.
fn requests(h: &mut Harness, t: Duration, ids: &[&str]) -> Vec<JobStart> {
    let mut s = Vec::new();
    for id in ids {
        s.extend(starts(&h.at(t, req_msg(id, Headers::new()))));
    }
    s
}

#[test]
fn fixed_prefetch_holds_jobs_beyond_the_slots_and_runs_them_in_order_never_more_than_the_slots() {
    let mut c = cfg(2);
    c.prefetch = Prefetch::Fixed(3);
    let (mut h, a) = Harness::with(c);
    assert_eq!(count(&h.ack(ms(10), &a), "READY"), 5, "2 slots + 3");
    let s = requests(&mut h, ms(100), &["a", "b", "c", "d", "e"]);
    assert_eq!(
        s.iter().map(|j| j.msgid.as_str()).collect::<Vec<_>>(),
        ["a", "b"],
        "two run, three are held"
    );
    assert_eq!(
        h.c.slot_counts(),
        SlotCounts {
            offered: 0,
            idle: 0,
            busy: 2,
            extra: 0,
            held: 3
        }
    );
    // A finished job: its REPLY, the oldest held job on its slot, one
    // READY (credit + held + running back to 5).
    let a = h.at(ms(200), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "start", "READY"]);
    assert_eq!(starts(&a)[0].msgid, "c");
    assert_eq!(starts(&a)[0].slot, s[0].slot);
    assert_eq!(h.c.slot_counts().held, 2);
}

#[test]
fn off_sends_one_ready_per_free_slot_whatever_was_measured() {
    let mut h = with_prefetch(2, Prefetch::Off);
    for i in 0..50u64 {
        let t = ms(100 + i);
        let s = starts(&h.at(t, req_msg(&format!("j{i}"), Headers::new())));
        let a = h.at(t, finished(&s[0], JobOutcome::Value(json!(1))));
        assert_eq!(names(&a), ["REPLY", "READY"]);
    }
    assert_eq!(h.c.slot_counts().offered, 2);
    assert_eq!(h.c.slot_counts().extra, 0);
}

#[test]
fn adaptive_window_opens_for_short_jobs_and_stays_shut_for_long_ones() {
    // Short jobs: 1 ms round trip (READY → REQUEST), 100 µs each, 2 slots:
    // 2 × (2 − 1) × 1 ms / 100 µs = 20, capped at 10.
    let mut h = with_prefetch(2, Prefetch::Adaptive { cap: 10 });
    let mut t = ms(11);
    let mut readies = 0;
    for i in 0..20 {
        let s = starts(&h.at(t, req_msg(&format!("s{i}"), Headers::new())));
        assert_eq!(s.len(), 1, "a slot is free");
        t += Duration::from_micros(100);
        let a = h.at(t, finished(&s[0], JobOutcome::Value(json!(1))));
        readies += count(&a, "READY");
        t += ms(1);
    }
    assert_eq!(h.c.window().round_trip(), Some(ms(1)));
    assert_eq!(h.c.slot_counts().extra, 10, "the cap beyond 2 free slots");
    assert_eq!(readies, 20 + 10);

    // Long jobs (2 s each, on a fresh job manager): never more than one
    // READY per free slot.
    let mut h = with_prefetch(2, Prefetch::Adaptive { cap: 10 });
    let mut t = ms(11);
    for i in 0..10 {
        let s = starts(&h.at(t, req_msg(&format!("l{i}"), Headers::new())));
        t += ms(2000);
        h.msg(t, Command::Heartbeat { timestamp: None });
        let a = h.at(t, finished(&s[0], JobOutcome::Value(json!(1))));
        assert_eq!(names(&a), ["REPLY", "READY"], "job {i}");
        t += ms(1);
    }
    assert_eq!(h.c.slot_counts().extra, 0);
}

#[test]
fn a_long_running_job_stops_new_credit_beyond_the_slots() {
    let mut h = with_prefetch(2, Prefetch::Adaptive { cap: 10 });
    let mut t = ms(11);
    for i in 0..20 {
        let s = starts(&h.at(t, req_msg(&format!("s{i}"), Headers::new())));
        t += Duration::from_micros(100);
        h.at(t, finished(&s[0], JobOutcome::Value(json!(1))));
        t += ms(1);
    }
    assert_eq!(h.c.slot_counts().extra, 10);
    // One job turns long on one slot (both slots busy with jobs taken
    // from the credit, the rest held).
    let long = starts(&h.at(t, req_msg("long", Headers::new())));
    let short = starts(&h.at(t, req_msg("short", Headers::new())));
    assert_eq!(long.len() + short.len(), 2);
    // 50 ms later, the short one ends: the long one has run 500 times the
    // mean, so its slot no longer counts, and the other is kept for held
    // jobs: no window.
    t += ms(50);
    h.msg(t, Command::Heartbeat { timestamp: None });
    let a = h.at(t, finished(&short[0], JobOutcome::Value(json!(1))));
    assert_eq!(
        names(&a),
        ["REPLY"],
        "no READY: credit + running is already past the window"
    );
    // Credit cannot be taken back: 2 + 10 before, one job done, none
    // announced for it.
    let c = h.c.slot_counts();
    assert_eq!(c.busy + c.held + c.offered + c.extra, 11, "{c:?}");
}

#[test]
fn cancel_of_a_held_job_replies_cancelled_at_once_and_frees_its_place() {
    let mut h = with_prefetch(1, Prefetch::Fixed(2));
    let s = requests(&mut h, ms(100), &["run", "held-1", "held-2"]);
    assert_eq!(s.len(), 1);
    let a = h.msg(ms(150), cancel("held-1"));
    assert_eq!(names(&a), ["REPLY", "READY"], "no kill: it never started");
    let r = &replies(&a)[0];
    assert_eq!(r.orig_msgid.as_deref(), Some("held-1"));
    assert_eq!(r.payload, CANCELLED_PAYLOAD);
    let a = h.at(ms(200), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "start", "READY"]);
    assert_eq!(starts(&a)[0].msgid, "held-2", "held-1 is gone");
}

#[test]
fn kbye_runs_the_held_jobs_on_the_same_connection_before_reconnecting() {
    let mut h = with_prefetch(1, Prefetch::Fixed(2));
    let old = h.c.identity().to_string();
    let s = requests(&mut h, ms(100), &["a", "b", "c"]);
    assert!(h.msg(ms(200), Command::Kbye).is_empty());
    assert!(h.c.is_draining());
    let a = h.at(ms(300), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(
        names(&a),
        ["REPLY", "start"],
        "no READY to a router that left"
    );
    let b = starts(&a);
    let a = h.at(ms(400), finished(&b[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "start"]);
    let c = starts(&a);
    assert_eq!(c[0].msgid, "c");
    assert!(h.c.is_draining());
    let a = h.at(ms(500), finished(&c[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY"]);
    assert!(!h.c.is_draining());
    assert_eq!(h.c.identity(), old, "every REPLY on the same connection");
    assert_eq!(names(&h.fire_at(ms(1500))), ["connect", "INFORM"]);
}

#[test]
fn shutdown_runs_held_jobs_within_the_grace_period_then_kbye() {
    let mut h = with_prefetch(1, Prefetch::Fixed(1));
    let s = requests(&mut h, ms(100), &["a", "b"]);
    assert!(h.at(ms(150), Input::Shutdown).is_empty());
    let a = h.at(ms(200), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "start"]);
    let b = starts(&a);
    let a = h.at(ms(300), finished(&b[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "KBYE", "exit 0"]);
}

#[test]
fn grace_period_expiry_drops_held_jobs_unstarted_before_the_kbye() {
    let mut c = cfg(1);
    c.prefetch = Prefetch::Fixed(2);
    c.grace_period = Duration::from_secs(5);
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    requests(&mut h, ms(100), &["a", "b", "c"]);
    h.at(ms(200), Input::Shutdown);
    let a = h.advance(ms(5200));
    assert_eq!(
        names(&a)
            .into_iter()
            .filter(|n| n != "HEARTBEAT")
            .collect::<Vec<_>>(),
        ["kill-all", "KBYE", "exit 0"],
        "no REPLY and no start for the held jobs: the router redelivers them"
    );
}

#[test]
fn a_reconnect_drops_held_jobs_unstarted_and_offers_only_the_free_slots_and_the_window() {
    let mut h = with_prefetch(1, Prefetch::Fixed(2));
    let s = requests(&mut h, ms(100), &["a", "b", "c"]);
    // Router silent: 9 s after its last message.
    let a = h.advance(ms(9101));
    assert_eq!(count(&a, "connect"), 1);
    assert_eq!(h.c.slot_counts().held, 0);
    let a = h.ack(ms(9200), &a);
    assert_eq!(
        names(&a),
        ["READY", "READY"],
        "slot busy: the window's 2 only"
    );
    // The running job's REPLY goes out on the new connection, then a READY.
    let a = h.at(ms(9300), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "READY"]);
}

#[test]
fn a_ready_whose_send_failed_is_no_credit_and_goes_out_again() {
    let mut h = with_prefetch(1, Prefetch::Fixed(2));
    assert_eq!(h.c.window().credit(), 3);
    let ready = Message::new(Command::Ready);
    h.send_failed(ms(20), &ready);
    assert_eq!(h.c.window().credit(), 2);
    let a = h.advance(ms(3010));
    assert_eq!(names(&a), ["READY"], "in place of the HEARTBEAT");
    assert_eq!(h.c.window().credit(), 3);
}

// ---- link down, and REPLYs sent again (resend.rs) ------------------------

impl Harness {
    /// ACK the INFORM in `actions` as an emq router does: listing
    /// `reply-resend`.
    fn ack_resend(&mut self, t: Duration, actions: &[Action]) -> Vec<Action> {
        let id = inform_msgid(actions).expect("an INFORM to ACK");
        self.msg(
            t,
            Command::Ack {
                acked_msgid: id,
                features: vec![FEATURE_REPLY_RESEND.into()],
            },
        )
    }

    /// The driver's socket monitor: the current connection went down.
    fn link_down(&mut self, t: Duration) -> Vec<Action> {
        let identity = self.c.identity().to_string();
        self.at(t, Input::LinkDown { identity })
    }
}

/// Started and registered with an emq router (ACK with `reply-resend` at
/// 10 ms), `n` READYs sent.
fn registered_resend(concurrency: usize) -> Harness {
    let (mut h, a) = Harness::new(concurrency);
    let a = h.ack_resend(ms(10), &a);
    assert_eq!(count(&a, "READY"), concurrency);
    h
}

/// The REPLYs sent in `actions`, as messages (msgid included).
fn reply_msgs(actions: &[Action]) -> Vec<Message> {
    sent(actions, "REPLY")
}

#[test]
fn link_down_reconnects_at_once_and_running_jobs_reply_on_the_new_connection() {
    for router_resends in [false, true] {
        let mut h = if router_resends {
            registered_resend(2)
        } else {
            registered(2)
        };
        let old = h.c.identity().to_string();
        let s = starts(&h.at(ms(100), req_msg("long", Headers::new())));
        let a = h.link_down(ms(200));
        assert_eq!(names(&a), ["connect", "INFORM"]);
        let Action::Connect { endpoint, identity } = &a[0] else {
            panic!()
        };
        assert_eq!(endpoint, "tcp://127.0.0.1:2", "the next broker");
        assert_ne!(identity, &old, "a fresh identity");
        assert_eq!(h.c.slot_counts().busy, 1, "the job keeps running");
        assert_eq!(h.c.slot_counts().offered, 0, "the router forgot our READYs");
        // Finished before the ACK: its REPLY waits for it.
        assert!(h
            .at(ms(250), finished(&s[0], JobOutcome::Value(json!(1))))
            .is_empty());
        let a2 = if router_resends {
            h.ack_resend(ms(300), &a)
        } else {
            h.ack(ms(300), &a)
        };
        assert_eq!(names(&a2), ["REPLY", "READY", "READY"], "{router_resends}");
        assert_eq!(replies(&a2)[0].orig_msgid.as_deref(), Some("long"));
    }
}

/// After a reconnect, a router whose ACK lists `adopt-running` gets
/// `RUNNING` with the jobs still running (before the READYs), so that it
/// does not deliver them again; one that does not list it gets nothing
/// of the kind; with nothing running there is no RUNNING.
#[test]
fn running_jobs_are_announced_after_a_reconnect_to_a_router_that_adopts_them() {
    for adopts in [true, false] {
        let mut h = registered(3);
        let s1 = starts(&h.at(ms(100), req_msg("long-1", Headers::new())));
        starts(&h.at(ms(110), req_msg("long-2", Headers::new())));
        let a = h.link_down(ms(200));
        assert_eq!(names(&a), ["connect", "INFORM"]);
        let id = inform_msgid(&a).unwrap();
        let features = if adopts {
            vec![FEATURE_ADOPT_RUNNING.into()]
        } else {
            vec![]
        };
        let a2 = h.msg(
            ms(300),
            Command::Ack {
                acked_msgid: id,
                features,
            },
        );
        if !adopts {
            assert_eq!(names(&a2), ["READY"], "no RUNNING");
            continue;
        }
        assert_eq!(
            names(&a2),
            ["RUNNING", "READY"],
            "RUNNING before the READYs"
        );
        let running = sent(&a2, "RUNNING");
        let Command::Running { orig_msgids } = &running[0].command else {
            panic!()
        };
        assert_eq!(orig_msgids, &["long-1", "long-2"]);
        // The next reconnect, with nothing running: no RUNNING.
        h.at(ms(400), finished(&s1[0], JobOutcome::Value(json!(1))));
        let a = h.link_down(ms(500));
        let id = inform_msgid(&a).unwrap();
        let a3 = h.msg(
            ms(600),
            Command::Ack {
                acked_msgid: id,
                features: vec![FEATURE_ADOPT_RUNNING.into()],
            },
        );
        assert_eq!(
            names(&a3),
            ["RUNNING", "READY", "READY"],
            "long-2 still runs"
        );
    }
}

#[test]
fn link_down_of_a_replaced_connection_or_before_the_ack_is_ignored() {
    let mut h = registered_resend(1);
    let old = h.c.identity().to_string();
    let a = h.link_down(ms(100));
    assert_eq!(names(&a), ["connect", "INFORM"]);
    // Waiting for the ACK: the ACK timeout covers a lost INFORM.
    assert!(h.link_down(ms(150)).is_empty());
    // A late event of the replaced socket.
    assert!(h.at(ms(160), Input::LinkDown { identity: old }).is_empty());
    let a2 = h.ack_resend(ms(200), &a);
    assert_eq!(names(&a2), ["READY"]);
    // After the router said KBYE (no job running): the reconnect is due anyway.
    h.msg(ms(300), Command::Kbye);
    assert!(h.link_down(ms(310)).is_empty());
    assert_eq!(names(&h.fire_at(ms(1300))), ["connect", "INFORM"]);
}

#[test]
fn link_down_while_draining_reconnects_and_the_reply_waits_for_the_ack() {
    let mut h = registered_resend(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    h.msg(ms(200), Command::Kbye);
    assert!(h.c.is_draining());
    let a = h.link_down(ms(300));
    assert_eq!(names(&a), ["connect", "INFORM"]);
    assert!(h
        .at(ms(400), finished(&s[0], JobOutcome::Value(json!(1))))
        .is_empty());
    assert_eq!(names(&h.ack_resend(ms(500), &a)), ["REPLY", "READY"]);
}

/// The REPLYs of the last interval × liveness + ACK timeout (14 s) go
/// out again, as they were, after the ACK of every reconnect (link down,
/// router silence, KBYE), before the queued REPLYs and the READYs; no
/// longer once their window ended.
#[test]
fn recent_replies_go_out_again_after_each_reconnect_within_their_window() {
    let mut h = registered_resend(2);
    let s = starts(&h.at(ms(100), req_msg("a", Headers::new())));
    let first = h.at(ms(200), finished(&s[0], JobOutcome::Value(json!("A"))));
    assert_eq!(names(&first), ["REPLY", "READY"]);
    let reply_a = reply_msgs(&first).remove(0);
    let s = starts(&h.at(ms(300), req_msg("b", Headers::new())));
    assert_eq!(h.c.resend_counts(), (1, 0));

    // Link down: b finishes while the INFORM waits for its ACK.
    let a = h.link_down(ms(400));
    h.at(ms(450), finished(&s[0], failed(ErrorKind::Exception)));
    let a2 = h.ack_resend(ms(500), &a);
    assert_eq!(names(&a2), ["REPLY", "REPLY", "READY", "READY"]);
    let r = reply_msgs(&a2);
    assert_eq!(r[0], reply_a, "the copy of a, as sent (same msgid)");
    assert_eq!(replies(&a2)[1].orig_msgid.as_deref(), Some("b"));
    assert_eq!(h.c.resend_counts(), (2, 0));

    // Router silence 9 s after its last message (the ACK at 500 ms): both
    // again (a was sent at 200 ms, b at 500 ms: within 14 s of 9.6 s).
    assert_eq!(resend::window(&h.c.cfg), ms(14_000));
    let a = h.advance(ms(9501));
    assert_eq!(names(&a).last().map(String::as_str), Some("INFORM"));
    let a3 = h.ack_resend(ms(9600), &a);
    assert_eq!(names(&a3), ["REPLY", "REPLY", "READY", "READY"]);
    assert_eq!(reply_msgs(&a3)[0], reply_a);

    // KBYE, reconnect 1 s later: the windows (14 s from 200 and 500 ms)
    // are over.
    h.msg(ms(14_500), Command::Kbye);
    let a = h.fire_at(ms(15_500));
    assert_eq!(names(&a), ["connect", "INFORM"]);
    let a4 = h.ack_resend(ms(15_600), &a);
    assert_eq!(names(&a4), ["READY", "READY"]);
    assert_eq!(h.c.resend_counts(), (0, 0));
}

/// A 0.3.13 router would forward a REPLY it got twice to the client: the
/// copies go only to a router whose ACK listed `reply-resend`, and are
/// dropped when the next router does not list it.
#[test]
fn nothing_is_sent_again_to_a_router_without_reply_resend() {
    // Never kept for such a router.
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("a", Headers::new())));
    h.at(ms(200), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(h.c.resend_counts(), (0, 0));
    let a = h.link_down(ms(300));
    assert_eq!(names(&h.ack_resend(ms(400), &a)), ["READY"]);

    // Kept for an emq router, dropped on reaching one that does not list it.
    let mut h = registered_resend(1);
    let s = starts(&h.at(ms(100), req_msg("a", Headers::new())));
    h.at(ms(200), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(h.c.resend_counts(), (1, 0));
    let a = h.link_down(ms(300));
    assert_eq!(names(&h.ack(ms(400), &a)), ["READY"]);
    assert_eq!(h.c.resend_counts(), (0, 0));
}

/// At most `resend_max_replies` copies and `resend_max_bytes` of payload:
/// the oldest go first (counted); a REPLY bigger than the byte bound is
/// never kept.
#[test]
fn the_copies_are_bounded_oldest_forgotten_first() {
    let mut c = cfg(1);
    c.resend_max_replies = 2;
    c.resend_max_bytes = 200;
    let (mut h, a) = Harness::with(c);
    h.ack_resend(ms(10), &a);
    let mut sent_replies = Vec::new();
    for (i, id) in ["a", "b", "c"].iter().enumerate() {
        let t = 100 * (i as u64 + 1);
        let s = starts(&h.at(ms(t), req_msg(id, Headers::new())));
        let a = h.at(ms(t + 50), finished(&s[0], JobOutcome::Value(json!(id))));
        sent_replies.push(reply_msgs(&a).remove(0));
    }
    assert_eq!(h.c.resend_counts(), (2, 1), "a forgotten");
    let a = h.link_down(ms(400));
    let a2 = h.ack_resend(ms(500), &a);
    assert_eq!(reply_msgs(&a2), sent_replies[1..].to_vec());
    // A result of 300 bytes is over the byte bound: not kept, and the two
    // others stay.
    let s = starts(&h.at(ms(600), req_msg("big", Headers::new())));
    h.at(
        ms(650),
        finished(&s[0], JobOutcome::Value(json!("x".repeat(300)))),
    );
    assert_eq!(h.c.resend_counts(), (2, 2));
}

/// A REPLY whose send failed is queued, not a copy: after the reconnect
/// it goes out once.
#[test]
fn a_reply_whose_send_failed_goes_out_once_after_the_reconnect() {
    let mut h = registered_resend(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    let a = h.at(ms(200), finished(&s[0], JobOutcome::Value(json!(1))));
    let r = reply_msgs(&a).remove(0);
    h.send_failed(ms(200), &r);
    assert_eq!(h.c.resend_counts(), (0, 0));
    let a = h.link_down(ms(300));
    let a2 = h.ack_resend(ms(400), &a);
    assert_eq!(names(&a2), ["REPLY", "READY"]);
    assert_eq!(reply_msgs(&a2), vec![r]);
    assert_eq!(h.c.resend_counts(), (1, 0), "a copy once sent");
}

/// Leaving (SIGTERM) keeps the connection (a new identity would make the
/// router redeliver the jobs still running): a link down sends the recent
/// REPLYs again on it, and the running job's REPLY follows as usual.
#[test]
fn link_down_while_leaving_sends_the_recent_replies_again_on_the_same_connection() {
    let mut h = registered_resend(2);
    let id = h.c.identity().to_string();
    let s1 = starts(&h.at(ms(100), req_msg("a", Headers::new())));
    let s2 = starts(&h.at(ms(110), req_msg("b", Headers::new())));
    let a = h.at(ms(200), finished(&s1[0], JobOutcome::Value(json!(1))));
    let reply_a = reply_msgs(&a).remove(0);
    assert!(h.at(ms(300), Input::Shutdown).is_empty());
    let a = h.link_down(ms(400));
    assert_eq!(names(&a), ["REPLY"]);
    assert_eq!(reply_msgs(&a), vec![reply_a]);
    assert_eq!(h.c.identity(), id, "same connection");
    let a = h.at(ms(500), finished(&s2[0], JobOutcome::Value(json!(2))));
    assert_eq!(names(&a), ["REPLY", "KBYE", "exit 0"]);
}
