//! Every rule of the connection core, driven with a fake clock.

use super::*;
use emqp_proto::job::CallJob;
use emqp_proto::{Header, Headers};
use serde_json::json;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn cfg(concurrency: usize) -> Config {
    let mut c = Config::new(
        vec!["tcp://127.0.0.1:1".into(), "tcp://127.0.0.1:2".into()],
        QueueSpec::parse_cli("10:default,15:email").unwrap(),
        concurrency,
    );
    c.unix_time_at_start = 1_000_000.0;
    c
}

/// A connection plus a fake clock and the router's view of our credit.
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
        let a = c.start(Duration::ZERO);
        (
            Harness {
                c,
                now: Duration::ZERO,
            },
            a,
        )
    }

    fn at(&mut self, t: Duration, input: Input) -> Vec<Action> {
        self.now = t;
        let a = self.c.handle(input, t);
        self.check_invariant();
        a
    }

    fn msg(&mut self, t: Duration, cmd: Command) -> Vec<Action> {
        self.at(t, Input::Message(Message::new(cmd)))
    }

    fn tick(&mut self, t: Duration) -> Vec<Action> {
        self.at(t, Input::Tick)
    }

    fn check_invariant(&self) {
        let c = self.c.slot_counts();
        assert!(c.offered + c.busy <= self.c.cfg.concurrency, "{c:?}");
        assert_eq!(c.offered + c.busy + c.idle, self.c.cfg.concurrency);
    }

    /// ACK the INFORM found in `actions`.
    fn ack(&mut self, t: Duration, actions: &[Action]) -> Vec<Action> {
        let id = inform_msgid(actions).expect("an INFORM to ACK");
        self.msg(t, Command::Ack { acked_msgid: id })
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
    Input::Message(Message::with_msgid(id, request(headers, call_job("echo"))))
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

/// Started and registered, with `n` READYs sent.
fn registered(concurrency: usize) -> Harness {
    let (mut h, a) = Harness::new(concurrency);
    let a = h.ack(ms(10), &a);
    assert_eq!(count(&a, "READY"), concurrency);
    h
}

#[test]
fn start_connects_and_sends_one_inform_with_queues_worker_and_job_ack() {
    let (mut h, a) = Harness::new(2);
    assert_eq!(names(&a), ["connect", "INFORM"]);
    let Action::Connect { endpoint, identity } = &a[0] else {
        panic!()
    };
    assert_eq!(endpoint, "tcp://127.0.0.1:1");
    assert_eq!(identity.len(), 36);
    let Action::Send(m) = &a[1] else { panic!() };
    let frames = m.clone().encode();
    assert_eq!(frames[4], br#"[[10, "default"], [15, "email"]]"#);
    assert_eq!(frames[5], b"worker");
    assert_eq!(frames[6], b"job-ack");
    // Nothing more (no second INFORM, no READY, no HEARTBEAT) before the ACK timeout.
    for t in (100..4900).step_by(100) {
        assert!(h.tick(ms(t)).is_empty(), "at {t} ms");
    }
}

#[test]
fn no_ack_reconnects_with_fresh_identity_to_next_broker_and_informs_again() {
    let (mut h, a) = Harness::new(1);
    let first = h.c.identity().to_string();
    let a2 = h.tick(ms(5000));
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
    h.tick(ms(5000));
    let a = h.tick(ms(10000));
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
            busy: 0
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
        },
    );
    assert_eq!(names(&a), ["READY"]);
}

#[test]
fn request_runs_on_a_slot_and_finish_sends_reply_before_ready() {
    let mut h = registered(2);
    let a = h.at(ms(100), req_msg("job-1", Headers::new()));
    let s = starts(&a);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].msgid, "job-1");
    assert_eq!(s[0].attempt, 1);
    assert_eq!(s[0].timeout, None);
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
        Input::Message(Message::with_msgid(
            "bad",
            request(Headers::new(), b"not json".to_vec()),
        )),
    );
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!(e.kind, ErrorKind::BadJob);
    assert_eq!(h.c.slot_counts().offered, 1);
}

#[test]
fn heartbeat_every_interval_only_when_nothing_else_was_sent() {
    let mut h = registered(1);
    // READYs went out at 10 ms; keep the router alive.
    assert!(h.tick(ms(2000)).is_empty());
    h.msg(ms(2500), Command::Heartbeat { timestamp: None });
    let a = h.tick(ms(3010));
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
    let ts: f64 = ts.parse().unwrap();
    assert!((ts - 1_000_003.01).abs() < 0.001, "{ts}");
    assert!(h.tick(ms(3100)).is_empty());
    // Something else sent (a REPLY + READY) postpones the next heartbeat.
    let s = starts(&h.at(ms(4000), req_msg("j", Headers::new())));
    h.msg(ms(5000), Command::Heartbeat { timestamp: None });
    h.at(ms(5500), finished(&s[0], JobOutcome::Value(json!(1))));
    assert!(h.tick(ms(6100)).is_empty());
    assert_eq!(names(&h.tick(ms(8500))), ["HEARTBEAT"]);
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
        assert_eq!(count(&h.tick(ms(2000 * (i + 1) + 2)), "connect"), 0);
    }
}

#[test]
fn router_silence_reconnects_to_next_broker_with_new_identity_ready_only_for_free_slots() {
    let mut h = registered(2);
    let old = h.c.identity().to_string();
    let s = starts(&h.at(ms(100), req_msg("long", Headers::new())));
    // Heartbeats go out at 3 s and 6 s, the router stays silent.
    assert_eq!(names(&h.tick(ms(3100))), ["HEARTBEAT"]);
    assert_eq!(names(&h.tick(ms(6200))), ["HEARTBEAT"]);
    assert!(
        h.tick(ms(9000)).is_empty(),
        "9 s after the last message at 100 ms? not yet"
    );
    let a = h.tick(ms(9100));
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
    let a = h.tick(ms(9100));
    assert_eq!(names(&a), ["connect", "INFORM"]);
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
fn kbye_or_disconnect_from_router_reconnects_after_the_delay() {
    for cmd in [Command::Kbye, Command::Disconnect] {
        let mut h = registered(2);
        let old = h.c.identity().to_string();
        assert!(h.msg(ms(100), cmd.clone()).is_empty());
        assert_eq!(h.c.slot_counts().offered, 0, "the router forgot our READYs");
        assert!(h.tick(ms(600)).is_empty());
        let a = h.tick(ms(1100));
        assert_eq!(names(&a), ["connect", "INFORM"]);
        assert_ne!(h.c.identity(), old);
        assert_eq!(names(&h.ack(ms(1200), &a)), ["READY", "READY"]);
    }
}

#[test]
fn shutdown_sends_kbye_lets_running_jobs_finish_and_exits_0() {
    let mut h = registered(2);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    let a = h.at(ms(200), Input::Shutdown);
    assert_eq!(names(&a), ["KBYE"]);
    assert!(h.c.is_shutting_down());
    // No new jobs after KBYE.
    assert!(starts(&h.at(ms(300), req_msg("late", Headers::new()))).is_empty());
    // No heartbeats, no reconnects while leaving.
    assert!(h.tick(ms(20_000)).is_empty());
    let a = h.at(ms(21_000), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "exit 0"], "REPLY but no READY");
    assert!(h.tick(ms(40_000)).is_empty(), "stopped");
}

#[test]
fn shutdown_with_nothing_running_exits_at_once() {
    let mut h = registered(2);
    assert_eq!(names(&h.at(ms(100), Input::Shutdown)), ["KBYE", "exit 0"]);
}

#[test]
fn grace_period_expiry_kills_jobs_replies_failed_and_exits_0() {
    let mut c = cfg(2);
    c.grace_period = Duration::from_secs(5);
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    h.at(ms(100), req_msg("a", Headers::new()));
    h.at(ms(100), req_msg("b", Headers::new()));
    h.at(ms(200), Input::Shutdown);
    assert!(h.tick(ms(5100)).is_empty());
    let a = h.tick(ms(5200));
    assert_eq!(names(&a), ["kill-all", "REPLY", "REPLY", "exit 0"]);
    for r in replies(&a) {
        assert_eq!(r.status, Some(ResultStatus::Failed));
    }
}

#[test]
fn replies_queued_while_disconnected_are_flushed_before_kbye_on_shutdown() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    h.msg(ms(200), Command::Kbye);
    h.at(ms(300), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(
        names(&h.at(ms(400), Input::Shutdown)),
        ["REPLY", "KBYE", "exit 0"]
    );
}

#[test]
fn retry_count_retries_locally_then_replies_failed_with_attempts() {
    let mut h = registered(1);
    let mut hd = Headers::new();
    hd.push(Header::RetryCount(2));
    let mut s = starts(&h.at(ms(100), req_msg("r", hd)));
    for attempt in 1..=2u32 {
        assert_eq!(s[0].attempt, attempt);
        let a = h.at(
            ms(1000 * attempt as u64),
            finished(&s[0], failed(ErrorKind::Exception)),
        );
        assert!(
            a.is_empty(),
            "no REPLY/READY while retrying: {:?}",
            names(&a)
        );
        assert!(
            h.tick(ms(1000 * attempt as u64 + 100)).is_empty(),
            "backoff"
        );
        s = starts(&h.tick(ms(1000 * attempt as u64 + 200)));
        assert_eq!(s.len(), 1);
        assert_eq!(h.c.slot_counts().busy, 1);
    }
    assert_eq!(s[0].attempt, 3);
    let a = h.at(ms(5000), finished(&s[0], failed(ErrorKind::Exception)));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!(e.attempts, Some(3));
}

#[test]
fn retry_that_succeeds_replies_ok() {
    let mut h = registered(1);
    let mut hd = Headers::new();
    hd.push(Header::RetryCount(3));
    let s = starts(&h.at(ms(100), req_msg("r", hd)));
    h.at(ms(200), finished(&s[0], failed(ErrorKind::Crash)));
    let s = starts(&h.tick(ms(400)));
    let a = h.at(ms(500), finished(&s[0], JobOutcome::Value(json!("ok"))));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    assert_eq!(replies(&a)[0].status, Some(ResultStatus::Ok));
}

#[test]
fn bad_job_kinds_are_not_retried() {
    let mut h = registered(1);
    let mut hd = Headers::new();
    hd.push(Header::RetryCount(3));
    let s = starts(&h.at(ms(100), req_msg("r", hd)));
    let a = h.at(ms(200), finished(&s[0], failed(ErrorKind::UnknownHandler)));
    assert_eq!(names(&a), ["REPLY", "READY"]);
}

#[test]
fn timeout_cancels_the_job_frees_the_slot_once_and_replies_timeout() {
    let mut h = registered(1);
    let mut hd = Headers::new();
    hd.push(Header::Timeout(2));
    let s = starts(&h.at(ms(100), req_msg("t", hd)));
    assert_eq!(s[0].timeout, Some(Duration::from_secs(2)));
    h.at(
        ms(150),
        Input::JobStarted {
            slot: 0,
            run: s[0].run,
        },
    );
    h.msg(ms(1000), Command::Heartbeat { timestamp: None });
    assert!(h.tick(ms(2100)).is_empty(), "2 s from the start at 150 ms");
    let a = h.tick(ms(2150));
    assert_eq!(
        a,
        vec![Action::CancelJob {
            slot: 0,
            run: s[0].run
        }]
    );
    assert!(h.tick(ms(2200)).is_empty(), "cancel once");
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
fn timed_out_job_is_retried_when_retry_count_allows() {
    let mut h = registered(1);
    let mut hd = Headers::new();
    hd.push(Header::RetryCount(1));
    hd.push(Header::Timeout(1));
    let s = starts(&h.at(ms(100), req_msg("t", hd)));
    assert_eq!(names(&h.tick(ms(1100))), ["cancel"]);
    assert!(h
        .at(ms(1150), finished(&s[0], failed(ErrorKind::Crash)))
        .is_empty());
    let s2 = starts(&h.tick(ms(1400)));
    assert_eq!(s2[0].attempt, 2);
    assert_ne!(s2[0].run, s[0].run);
    h.msg(ms(1500), Command::Heartbeat { timestamp: None });
    assert_eq!(names(&h.tick(ms(2400))), ["cancel"]);
    let a = h.at(ms(2450), finished(&s2[0], failed(ErrorKind::Crash)));
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!((e.kind, e.attempts), (ErrorKind::Timeout, Some(2)));
}

#[test]
fn works_with_a_0_3_13_router_flow() {
    // ACK, HEARTBEATs every 3 s, a REQUEST with 0.3.13 headers and payload.
    let (mut h, a) = Harness::new(2);
    let id = inform_msgid(&a).unwrap();
    let a = h.at(
        ms(50),
        Input::Message(Message::with_msgid(
            "0cd877dd",
            Command::Ack { acked_msgid: id },
        )),
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
        Input::Message(Message::with_msgid(
            "df85c496",
            request(
                Headers::parse(b"reply-requested").unwrap(),
                payload.to_vec(),
            ),
        )),
    );
    let s = starts(&a);
    assert!(matches!(&s[0].job, Job::Run(r) if r.callable == "noop"));
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
fn slot_accounting_holds_under_random_events() {
    for seed in 0..40u64 {
        let mut rng = Lcg(seed);
        let conc = 1 + rng.next(4) as usize;
        let (mut h, mut last) = Harness::new(conc);
        let mut t = 0u64;
        let mut running: Vec<JobStart> = Vec::new();
        // The router's view: credit = READYs received - REQUESTs sent, per connection.
        let mut credit: i64 = 0;
        let mut n = 0;
        for _ in 0..400 {
            t += 1 + rng.next(1500);
            let now = ms(t);
            let input = match rng.next(9) {
                0 => inform_msgid(&last)
                    .map(|id| Input::Message(Message::new(Command::Ack { acked_msgid: id })))
                    .unwrap_or(Input::Tick),
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
                5 => Input::Message(Message::new(Command::Heartbeat { timestamp: None })),
                6 if rng.next(20) == 0 => {
                    credit = 0;
                    Input::Message(Message::new(Command::Kbye))
                }
                _ => Input::Tick,
            };
            let a = h.at(now, input);
            for act in &a {
                match act {
                    Action::Connect { .. } => credit = 0,
                    Action::Send(m) if m.command == Command::Ready => credit += 1,
                    Action::StartJob(j) => running.push(j.clone()),
                    _ => {}
                }
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
    }
}
