//! The real `emq-jobmanager` binary against a fake ROUTER socket bound in
//! the test on 127.0.0.1. Every wait is bounded; the job manager process is
//! stopped when a test ends, however it ends (emq-testkit's `Proc`).

#![forbid(unsafe_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use emq_testkit::fake::{ack, is_ready, reply_of};
use emq_testkit::process::{pid_alive as running, run_to_exit, scratch_dir, wait_pids_gone};
use emq_testkit::{Proc, Spawn};
use emqp_proto::job::{ErrorKind, JobOutcome};
use emqp_proto::{Command as Cmd, Headers, Message, Request};
use serde_json::{json, Value};

// The fake ROUTER: emq-testkit's (bound on a free port; next/expect skip
// heartbeats and keep the job manager alive; register ACKs the INFORM;
// readies counts READYs; expect_ready/expect_reply take the next message).
use emq_testkit::FakeRouter as Router;

const BIN: &str = env!("CARGO_BIN_EXE_emq-jobmanager");

/// The job manager against `endpoint` with `args`, logging at debug.
fn start_jm(endpoint: &str, args: &[&str]) -> Proc {
    start_jm_env(Some(endpoint), args, &[])
}

/// The job manager with `--broker endpoint` (if given), `args` and `env`
/// (the kit's Spawn: no inherited `EVENTMQ_*`, no machine config file).
fn start_jm_env(endpoint: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> Proc {
    let broker: &[&str] = match endpoint {
        Some(ep) => &["--broker", ep],
        None => &[],
    };
    Spawn::new("emq-jobmanager", BIN)
        .args(broker)
        .args(args)
        .env("RUST_LOG", "debug")
        .envs(env.iter().copied())
        .spawn()
}

/// The exit code once `jm` exits within 10 s.
fn exit_code(jm: &mut Proc) -> Option<i32> {
    jm.wait_exit(Duration::from_secs(10)).and_then(|s| s.code())
}

#[test]
fn inform_ready_request_reply_and_sigterm_kbye_exit_0() {
    let r = Router::new();
    // One READY per free slot (no credit window): the READYs are counted.
    let mut jm = start_jm(
        &r.endpoint,
        &[
            "--prefetch",
            "0",
            "--concurrency",
            "2",
            "--queues",
            "10:default,15:email",
            "--heartbeat-interval",
            "0.5",
        ],
    );
    // INFORM frames exactly.
    let frames = r.recv_raw(Duration::from_secs(10)).expect("INFORM");
    assert_eq!(frames.len(), 8, "{frames:?}");
    assert_eq!(frames[1], b"");
    assert_eq!(frames[2], b"eMQP/1.0");
    assert_eq!(frames[3], b"INFORM");
    assert_eq!(frames[4].len(), 36);
    assert_eq!(frames[5], br#"[[10, "default"], [15, "email"]]"#);
    assert_eq!(frames[6], b"worker");
    // job-ack,cancel, then who it is (host, pid, slots, version).
    let features = String::from_utf8(frames[7].clone()).unwrap();
    assert!(features.starts_with("job-ack,cancel,host="), "{features}");
    assert!(
        features.contains(&format!(",pid={},", jm.pid()))
            && features.ends_with(&format!(",version={}", env!("CARGO_PKG_VERSION"))),
        "{features}"
    );
    let id = frames[0].clone();
    assert_eq!(id.len(), 36, "uuid4 identity");
    // Nothing before the ACK, then READY x concurrency (no router HEARTBEAT needed).
    assert!(r.next(Duration::from_millis(700), None).is_none());
    r.send(&id, ack(std::str::from_utf8(&frames[4]).unwrap()));
    assert_eq!(r.readies(Duration::from_millis(1500), &id), 2);

    // call echo: REPLY [payload, msgid, ok] then READY.
    r.request(
        &id,
        "req-echo",
        "reply-requested",
        json!(["call", {"handler": "echo", "args": {"a": 1}}]),
    );
    let (_, m) = r.expect("REPLY", Some(&id));
    let frames = m.clone().encode();
    assert_eq!(
        &frames[4..],
        [&br#"{"value":{"a":1}}"#[..], b"req-echo", b"ok"]
    );
    r.expect_ready(&id);

    // A Python job (stdlib), even without reply-requested (job-ack: always a REPLY).
    r.request(
        &id,
        "req-py",
        "",
        json!(["run", {"path": "os.path", "callable": "join", "args": ["a", "b"]}]),
    );
    assert_eq!(
        r.expect_reply(&id),
        (
            "req-py".into(),
            "ok".into(),
            JobOutcome::Value(json!("a/b"))
        )
    );
    r.expect_ready(&id);

    // A failing shell job.
    r.request(
        &id,
        "req-sh",
        "",
        json!(["shell", {"argv": ["sh", "-c", "echo x; exit 4"]}]),
    );
    let (mid, status, out) = r.expect_reply(&id);
    assert_eq!((mid.as_str(), status.as_str()), ("req-sh", "failed"));
    let JobOutcome::Error(e) = out else { panic!() };
    assert_eq!(
        (e.kind, e.exit_status, e.stdout.as_deref()),
        (ErrorKind::Exit, Some(4), Some("x\n"))
    );
    r.expect_ready(&id);

    // A bad payload: failed bad-job, the slot comes back.
    r.send_msg(
        &id,
        Message::with_msgid(
            "req-bad",
            Cmd::Request(Request {
                queue: "default".into(),
                headers: Headers::new(),
                message: b"{nope".to_vec(),
            }),
        ),
    );
    let (_, status, out) = r.expect_reply(&id);
    assert_eq!(status, "failed");
    assert!(matches!(out, JobOutcome::Error(e) if e.kind == ErrorKind::BadJob));
    r.expect_ready(&id);

    // SIGTERM: KBYE, exit 0.
    jm.terminate();
    let (kid, m) = r.expect("KBYE", Some(&id));
    assert_eq!(kid, id);
    assert_eq!(m.command, Cmd::Kbye);
    assert_eq!(exit_code(&mut jm), Some(0));
}

#[test]
fn timed_out_job_frees_its_slot_exactly_once() {
    let r = Router::new();
    let _jm = start_jm(
        &r.endpoint,
        &["--concurrency", "1", "--heartbeat-interval", "1"],
    );
    let id = r.register();
    assert_eq!(r.readies(Duration::from_millis(1000), &id), 1);
    let t = Instant::now();
    r.request(
        &id,
        "slow",
        "reply-requested,timeout:1",
        json!(["shell", {"argv": ["sleep", "30"]}]),
    );
    let (mid, status, out) = r.expect_reply(&id);
    assert_eq!((mid.as_str(), status.as_str()), ("slow", "failed"));
    let JobOutcome::Error(e) = out else { panic!() };
    assert_eq!(e.kind, ErrorKind::Timeout);
    assert!(t.elapsed() >= Duration::from_millis(900) && t.elapsed() < Duration::from_secs(6));
    // Exactly one READY for the freed slot.
    assert_eq!(r.readies(Duration::from_millis(1500), &id), 1);
    // And the slot works again.
    r.request(&id, "after", "", json!(["call", {"handler": "noop"}]));
    assert_eq!(r.expect_reply(&id).2, JobOutcome::Value(Value::Null));
    assert_eq!(r.readies(Duration::from_millis(800), &id), 1);
}

#[test]
fn heartbeat_timeout_reconnects_with_new_identity_and_delivers_the_running_job_reply() {
    let r = Router::new();
    let _jm = start_jm(
        &r.endpoint,
        &[
            "--concurrency",
            "1",
            "--heartbeat-interval",
            "0.3",
            "--heartbeat-liveness",
            "3",
        ],
    );
    let id1 = r.register();
    assert_eq!(r.readies(Duration::from_millis(200), &id1), 1);
    // A job that outlives the connection; then the router goes silent.
    r.request(
        &id1,
        "across",
        "reply-requested",
        json!(["shell", {"argv": ["sh", "-c", "sleep 2; echo done"]}]),
    );
    let t = Instant::now();
    let (id2, m) = r.expect("a new INFORM", None);
    assert!(matches!(m.command, Cmd::Inform(_)), "{m:?}");
    assert_ne!(id2, id1, "fresh identity");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "reconnected after ~0.9 s of silence"
    );
    r.send(&id2, ack(&m.msgid));
    // The slot is busy: no READY until the job's REPLY, which comes on the new connection.
    let (rid, m) = r.expect("REPLY", Some(&id2));
    assert_eq!(rid, id2);
    let (mid, status, out) = reply_of(&m);
    assert_eq!((mid.as_str(), status.as_str()), ("across", "ok"));
    let JobOutcome::Value(v) = out else { panic!() };
    assert_eq!(v["stdout"], json!("done\n"));
    let (rid, m) = r.expect("READY", Some(&id2));
    assert_eq!(rid, id2);
    assert!(is_ready(&m));
    assert_eq!(r.readies(Duration::from_millis(800), &id2), 0);
}

#[test]
fn router_kbye_during_a_job_gets_its_reply_on_the_same_connection_then_a_new_inform() {
    let r = Router::new();
    let _jm = start_jm(
        &r.endpoint,
        &[
            "--concurrency",
            "2",
            "--heartbeat-interval",
            "0.5",
            "--reconnect-delay",
            "0.2",
        ],
    );
    let id1 = r.register();
    assert_eq!(r.readies(Duration::from_millis(700), &id1), 2);
    r.request(
        &id1,
        "draining",
        "",
        json!(["shell", {"argv": ["sh", "-c", "sleep 1; echo done"]}]),
    );
    // KBYE right behind it: the job manager reads them in order, so the
    // job is running when the KBYE is handled.
    r.send(&id1, Cmd::Kbye);
    // The REPLY comes on the same connection, with no READY after it.
    let (rid, m) = r.expect("REPLY", Some(&id1));
    assert_eq!(rid, id1, "same identity");
    let (mid, status, _) = reply_of(&m);
    assert_eq!((mid.as_str(), status.as_str()), ("draining", "ok"));
    // Then a new INFORM under a new identity (nothing else before it).
    let (id2, m) = r.expect("a new INFORM", None);
    assert!(matches!(m.command, Cmd::Inform(_)), "{m:?}");
    assert_ne!(id2, id1);
    r.send(&id2, ack(&m.msgid));
    assert_eq!(r.readies(Duration::from_millis(700), &id2), 2);
}

#[test]
fn a_result_over_max_message_size_is_replied_result_too_large() {
    let r = Router::new();
    let _jm = start_jm(
        &r.endpoint,
        &["--concurrency", "1", "--max-message-size", "1000"],
    );
    let id = r.register();
    assert_eq!(r.readies(Duration::from_millis(500), &id), 1);
    r.request(
        &id,
        "big",
        "reply-requested",
        json!(["call", {"handler": "echo", "args": "x".repeat(2000)}]),
    );
    let (mid, status, out) = r.expect_reply(&id);
    assert_eq!((mid.as_str(), status.as_str()), ("big", "failed"));
    let JobOutcome::Error(e) = out else { panic!() };
    assert_eq!(e.kind, ErrorKind::ResultTooLarge);
    assert!(e.message.contains("1000 bytes"), "{}", e.message);
    r.expect_ready(&id);
    // A result under the limit still goes out as is.
    r.request(
        &id,
        "small",
        "",
        json!(["call", {"handler": "echo", "args": "x"}]),
    );
    assert_eq!(r.expect_reply(&id).2, JobOutcome::Value(json!("x")));
}

#[test]
fn unacked_inform_is_resent_on_a_fresh_connection() {
    let r = Router::new();
    let _jm = start_jm(&r.endpoint, &["--ack-timeout", "0.5"]);
    let (id1, m1) = r.expect("INFORM", None);
    assert!(matches!(m1.command, Cmd::Inform(_)));
    let (id2, m2) = r.expect("second INFORM", None);
    assert!(matches!(m2.command, Cmd::Inform(_)));
    assert_ne!(id1, id2);
    assert_ne!(m1.msgid, m2.msgid);
    r.send(&id2, ack(&m2.msgid));
    assert_eq!(
        r.readies(Duration::from_millis(1000), &id2),
        4,
        "default concurrency 4"
    );
}

/// A shell job that writes its pid to `pidfile` (atomically), then runs
/// `rest`.
fn marked_shell(pidfile: &Path, rest: &str) -> Value {
    let script = format!(
        "echo $$ > {0}.tmp; mv {0}.tmp {0}; {rest}",
        pidfile.display()
    );
    json!(["shell", {"argv": ["sh", "-c", script]}])
}

#[test]
fn sigterm_during_a_job_sends_its_reply_then_kbye_and_exits_0() {
    let dir = scratch_dir("sigterm");
    let pidfile = dir.join("pid");
    let r = Router::new();
    let mut jm = start_jm(
        &r.endpoint,
        &["--concurrency", "1", "--heartbeat-interval", "1"],
    );
    let id = r.register();
    assert_eq!(r.readies(Duration::from_millis(500), &id), 1);
    r.request(
        &id,
        "finishing",
        "",
        marked_shell(&pidfile, "sleep 1; echo ok"),
    );
    // The job is running when the signal arrives.
    assert_eq!(pids_written(&r, &id, &pidfile).len(), 1);
    jm.terminate();
    // The job's REPLY first (no KBYE while it runs: a router would
    // redeliver it at once), then KBYE, nothing after it.
    assert_eq!(r.expect_reply(&id).1, "ok");
    let (_, m) = r.expect("KBYE", Some(&id));
    assert_eq!(m.command, Cmd::Kbye);
    assert_eq!(exit_code(&mut jm), Some(0));
    while let Some(frames) = r.recv_raw(Duration::from_millis(100)) {
        let (_, m) = Message::decode_routed(frames).unwrap();
        assert!(!is_ready(&m), "READY after SIGTERM");
    }
}

#[test]
fn grace_period_expiry_kills_the_job_and_exits_0() {
    let dir = scratch_dir("grace");
    let pidfile = dir.join("pid");
    let r = Router::new();
    // KILL_GRACE_PERIOD, 0.3.13's name, sets --grace-period.
    let mut jm = start_jm_env(
        Some(&r.endpoint),
        &["--concurrency", "1"],
        &[("EVENTMQ_KILL_GRACE_PERIOD", "0.5")],
    );
    let id = r.register();
    assert_eq!(r.readies(Duration::from_millis(500), &id), 1);
    r.request(&id, "stuck", "", marked_shell(&pidfile, "sleep 30"));
    let pids = pids_written(&r, &id, &pidfile);
    let t = Instant::now();
    jm.terminate();
    // Killed at the end of the grace period, no REPLY for it: the KBYE
    // makes the router redeliver it.
    assert_eq!(r.expect("KBYE", Some(&id)).1.command, Cmd::Kbye);
    assert_eq!(exit_code(&mut jm), Some(0));
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(5),
        "the grace period of 0.5 s, took {took:?}"
    );
    assert!(all_gone(&pids), "the job was killed");
    while let Some(frames) = r.recv_raw(Duration::from_millis(100)) {
        let (_, m) = Message::decode_routed(frames).unwrap();
        assert!(
            !matches!(m.command, Cmd::Reply(_)),
            "no REPLY for a killed job: {m:?}"
        );
    }
}

#[test]
fn eventmq_environment_settings_in_0_3_13_form() {
    let r = Router::new();
    let _jm = start_jm_env(
        None,
        &[],
        &[
            ("EVENTMQ_WORKER_ADDR", &r.endpoint),
            ("EVENTMQ_QUEUES", r#"[[20, "high"], [10, "default"]]"#),
            ("EVENTMQ_CONCURRENT_JOBS", "3"),
        ],
    );
    let frames = r.recv_raw(Duration::from_secs(10)).expect("INFORM");
    assert_eq!(frames[3], b"INFORM");
    assert_eq!(frames[5], br#"[[20, "high"], [10, "default"]]"#);
    let id = frames[0].clone();
    r.send(&id, ack(std::str::from_utf8(&frames[4]).unwrap()));
    assert_eq!(r.readies(Duration::from_millis(1000), &id), 3);
}

#[test]
fn help_and_bad_flags() {
    let out = run_to_exit(
        Spawn::new("emq-jobmanager", BIN).arg("--help"),
        Duration::from_secs(10),
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    let text = out.stdout;
    for flag in [
        "--broker",
        "--queues",
        "--concurrency",
        "--python",
        "--grace-period",
        "--heartbeat-interval",
        "--heartbeat-liveness",
        "--global-timeout",
        "--subprocess-setup-func",
        "--job-entry-func",
        "--job-exit-func",
        "--max-job-count",
        "GLOBAL_TIMEOUT",
        "KILL_GRACE_PERIOD",
        "MAX_JOB_COUNT",
        "EVENTMQ_",
    ] {
        assert!(text.contains(flag), "--help mentions {flag}");
    }
    let out = run_to_exit(
        Spawn::new("emq-jobmanager", BIN).args(["--broker", "localhost:1"]),
        Duration::from_secs(10),
    );
    assert_eq!(out.code(), Some(2), "{}", out.describe());
    assert!(out.stderr.contains("tcp://"), "{}", out.stderr);
}

#[test]
fn python_workers_die_with_a_killed_job_manager() {
    let r = Router::new();
    let mut jm = start_jm(
        &r.endpoint,
        &["--concurrency", "1", "--heartbeat-interval", "1"],
    );
    let id = r.register();
    assert_eq!(r.readies(Duration::from_millis(500), &id), 1);
    r.request(
        &id,
        "pid",
        "",
        json!(["run", {"path": "os", "callable": "getpid"}]),
    );
    let JobOutcome::Value(v) = r.expect_reply(&id).2 else {
        panic!("expected a value")
    };
    let worker = v.as_i64().unwrap() as i32;
    assert!(running(worker));
    assert!(jm.kill9().is_some(), "the job manager died of SIGKILL");
    assert!(
        wait_pids_gone(&[worker], Duration::from_secs(5)),
        "Python worker outlived its job manager"
    );
}

/// `kill -9` of the job manager takes a running shell job's whole process
/// group with it (the command and what it started in the background),
/// instead of leaving it to run past its timeout while the router
/// redelivers the job.
#[test]
fn shell_jobs_die_with_a_killed_job_manager() {
    let pidfile = scratch_dir("kill9").join("pids");
    let r = Router::new();
    let mut jm = start_jm(
        &r.endpoint,
        &["--concurrency", "1", "--heartbeat-interval", "1"],
    );
    let id = r.register();
    assert_eq!(r.readies(Duration::from_millis(500), &id), 1);
    let script = format!(
        "sleep 77 & echo $$ $! > {0}.tmp; mv {0}.tmp {0}; wait",
        pidfile.display()
    );
    r.request(
        &id,
        "sleeper",
        "timeout:60",
        json!(["shell", {"argv": ["sh", "-c", script]}]),
    );
    let pids = pids_written(&r, &id, &pidfile);
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|&p| running(p)));
    assert!(jm.kill9().is_some(), "the job manager died of SIGKILL");
    wait_pids_gone(&pids, Duration::from_secs(5));
    for p in pids {
        assert!(
            !running(p),
            "shell job process {p} outlived its job manager"
        );
    }
}

/// The library's job manager in this process (inline handlers cannot be
/// registered on the binary's command line), against the fake router: an
/// inline handler's batch is answered REPLY then READY per job, a failure
/// under `retry-count` is run once and replied failed (retries are the
/// router's), and a stop still sends KBYE.
#[test]
fn inline_handlers_answer_a_batch_run_once_under_retry_count_and_keep_slot_accounting() {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    let r = Router::new();
    let calls = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&calls);
    let jm = emq_jobmanager::JobManager::builder()
        .broker(r.endpoint.clone())
        .concurrency(2)
        // One READY per free slot (no credit window): the READYs are
        // counted.
        .prefetch(emq_jobmanager::connection::Prefetch::Off)
        .inline_handler("double", |v: Value| {
            Ok(json!(v.as_i64().ok_or("not a number")? * 2))
        })
        .inline_handler("flaky", move |_| {
            // Fails on its first call only.
            match seen.fetch_add(1, Ordering::SeqCst) {
                0 => Err("first call fails".into()),
                n => Ok(json!(n)),
            }
        })
        .python(emq_jobmanager::python::PythonConfig {
            prestart: false,
            ..Default::default()
        })
        .build()
        .unwrap();
    let (stop_jm, stop) = emq_transport::ShutdownSignal::manual().unwrap();
    let thread = std::thread::spawn(move || jm.run(&stop_jm).unwrap());

    let id = r.register();
    assert_eq!(r.readies(Duration::from_millis(700), &id), 2);
    // Two jobs at once, one per READY: each answered REPLY then READY.
    r.request(
        &id,
        "d1",
        "",
        json!(["call", {"handler": "double", "args": 21}]),
    );
    r.request(
        &id,
        "d2",
        "",
        json!(["call", {"handler": "double", "args": "x"}]),
    );
    let mut replies = Vec::new();
    let mut readys = 0;
    while replies.len() < 2 || readys < 2 {
        let (_, m) = r.expect("REPLY or READY", Some(&id));
        if is_ready(&m) {
            assert_eq!(readys, replies.len() - 1, "READY follows its REPLY");
            readys += 1;
        } else {
            replies.push(reply_of(&m));
        }
    }
    replies.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        replies[0],
        ("d1".into(), "ok".into(), JobOutcome::Value(json!(42)))
    );
    assert_eq!(replies[1].1, "failed");
    assert!(matches!(&replies[1].2, JobOutcome::Error(e) if e.message == "not a number"));

    // Fails: one failed REPLY, no local retry (the router owns retries).
    r.request(
        &id,
        "f1",
        "retry-count:1",
        json!(["call", {"handler": "flaky"}]),
    );
    let (mid, status, out) = r.expect_reply(&id);
    assert_eq!((mid.as_str(), status.as_str()), ("f1", "failed"));
    let JobOutcome::Error(e) = out else { panic!() };
    assert_eq!(
        (e.message.as_str(), e.attempts),
        ("first call fails", Some(1))
    );
    r.expect_ready(&id);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // Nothing more: exactly one READY per finished job.
    assert!(r.next(Duration::from_millis(300), Some(&id)).is_none());

    stop.trigger();
    let (_, m) = r.expect("KBYE", Some(&id));
    assert_eq!(m.command, Cmd::Kbye);
    assert_eq!(thread.join().unwrap(), 0);
}

/// This thread's voluntary context switches (each one a sleep that
/// ended: a wake-up).
fn voluntary_switches(task: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/self/task/{task}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

/// An idle job manager sleeps until its next heartbeat (3 s here) or
/// input: its loop's thread wakes at most a few times in 2 s (it woke
/// every 200 ms, ten times, when it looked at a shutdown flag on a timer).
/// A stop wakes it at once.
#[test]
fn an_idle_job_manager_sleeps_until_its_heartbeat_and_a_stop_wakes_it() {
    let r = Router::new();
    let jm = emq_jobmanager::JobManager::builder()
        .broker(r.endpoint.clone())
        .concurrency(1)
        .prefetch(emq_jobmanager::connection::Prefetch::Off)
        .python(emq_jobmanager::python::PythonConfig {
            prestart: false,
            ..Default::default()
        })
        .build()
        .unwrap();
    let (stop_jm, stop) = emq_transport::ShutdownSignal::manual().unwrap();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let me = std::fs::read_link("/proc/thread-self").unwrap();
        tid_tx
            .send(me.file_name().unwrap().to_string_lossy().into_owned())
            .unwrap();
        jm.run(&stop_jm).unwrap()
    });
    let task = tid_rx.recv().unwrap();
    let id = r.register();
    assert_eq!(r.readies(Duration::from_millis(700), &id), 1);
    let before = voluntary_switches(&task);
    std::thread::sleep(Duration::from_secs(2));
    let woke = voluntary_switches(&task) - before;
    assert!(woke <= 4, "an idle job manager woke {woke} times in 2 s");
    let asked = Instant::now();
    stop.trigger();
    let (_, m) = r.expect("KBYE", Some(&id));
    assert_eq!(m.command, Cmd::Kbye);
    assert_eq!(thread.join().unwrap(), 0);
    assert!(asked.elapsed() < Duration::from_secs(1));
}

/// The Python interpreter: the project venv's when `EMQ_PY_VENV` is set
/// (only the standard library is needed), else `python3`.
fn interpreter() -> String {
    match std::env::var("EMQ_PY_VENV") {
        Ok(v) if !v.is_empty() => format!("{v}/bin/python"),
        _ => "python3".to_string(),
    }
}

/// Wait (bounded, keeping the connection alive) for a job to write its
/// pids to `path` (a temporary name renamed into place); nothing else may
/// arrive meanwhile.
fn pids_written(r: &Router, id: &[u8], path: &Path) -> Vec<i32> {
    let t = Instant::now();
    while !path.exists() && t.elapsed() < Duration::from_secs(10) {
        if let Some((_, m)) = r.next(Duration::from_millis(20), Some(id)) {
            panic!("unexpected {m:?} while the job runs");
        }
    }
    std::fs::read_to_string(path)
        .expect("the job wrote its pids")
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// Whether every one of `pids` is gone within 10 s.
fn all_gone(pids: &[i32]) -> bool {
    wait_pids_gone(pids, Duration::from_secs(10))
}

/// The REPLY to a cancelled job: exactly the documented payload.
fn expect_cancelled_reply(r: &Router, id: &[u8], msgid: &str) {
    let (_, m) = r.expect("the cancelled REPLY", Some(id));
    let Cmd::Reply(_) = &m.command else {
        panic!("expected REPLY, got {m:?}")
    };
    assert_eq!(
        &m.clone().encode()[4..],
        [
            &br#"{"error":{"kind":"cancelled","message":"cancelled by the router","attempts":1}}"#
                [..],
            msgid.as_bytes(),
            b"failed"
        ]
    );
    r.expect_ready(id);
}

fn cancel(r: &Router, id: &[u8], msgid: &str) {
    r.send(
        id,
        Cmd::Cancel {
            orig_msgid: msgid.into(),
        },
    );
}

#[test]
fn cancel_kills_a_running_shell_job_and_the_freed_slot_runs_the_next_job() {
    let dir = scratch_dir("cancel-sh");
    let pidfile = dir.join("pids");
    let r = Router::new();
    let _jm = start_jm(
        &r.endpoint,
        &["--concurrency", "1", "--heartbeat-interval", "1"],
    );
    let id = r.register();
    assert_eq!(r.readies(Duration::from_millis(500), &id), 1);
    let script = format!(
        "sleep 30 & echo $$ $! > {0}.tmp; mv {0}.tmp {0}; wait",
        pidfile.display()
    );
    r.request(
        &id,
        "long",
        "reply-requested",
        json!(["shell", {"argv": ["sh", "-c", script]}]),
    );
    let pids = pids_written(&r, &id, &pidfile);
    assert_eq!(pids.len(), 2, "the shell and its sleep 30");
    assert!(pids.iter().all(|&p| running(p)));
    let t = Instant::now();
    cancel(&r, &id, "long");
    expect_cancelled_reply(&r, &id, "long");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(all_gone(&pids), "the cancelled job's processes are gone");
    // A CANCEL for a job no longer running is ignored: the next message is
    // the REPLY of the next job, on the freed slot.
    cancel(&r, &id, "long");
    r.request(
        &id,
        "after",
        "",
        json!(["shell", {"argv": ["echo", "next"]}]),
    );
    let (mid, status, out) = r.expect_reply(&id);
    assert_eq!((mid.as_str(), status.as_str()), ("after", "ok"));
    let JobOutcome::Value(v) = out else { panic!() };
    assert_eq!(v["stdout"], json!("next\n"));
    r.expect_ready(&id);
}

#[test]
fn cancel_kills_a_running_python_job_and_the_next_python_job_runs() {
    let dir = scratch_dir("cancel-py");
    std::fs::write(
        dir.join("emqcanceljobs.py"),
        "import os, time\n\
         def sleep_marked(path, secs):\n\
         \x20   with open(path + '.tmp', 'w') as f:\n\
         \x20       f.write(str(os.getpid()))\n\
         \x20   os.rename(path + '.tmp', path)\n\
         \x20   time.sleep(secs)\n\
         \x20   return 'slept'\n",
    )
    .unwrap();
    let marker = dir.join("pid");
    let r = Router::new();
    let python = interpreter();
    let pythonpath = dir.to_string_lossy().into_owned();
    let _jm = start_jm_env(
        Some(&r.endpoint),
        &[
            "--concurrency",
            "1",
            "--heartbeat-interval",
            "1",
            "--python",
            &python,
        ],
        &[("PYTHONPATH", &pythonpath)],
    );
    let id = r.register();
    assert_eq!(r.readies(Duration::from_millis(500), &id), 1);
    r.request(
        &id,
        "nap",
        "reply-requested",
        json!(["run", {"path": "emqcanceljobs", "callable": "sleep_marked",
                       "args": [marker.to_string_lossy(), 30]}]),
    );
    // The job is inside time.sleep on the slot's worker process.
    let pids = pids_written(&r, &id, &marker);
    assert_eq!(pids.len(), 1);
    let worker = pids[0];
    assert!(running(worker));
    cancel(&r, &id, "nap");
    expect_cancelled_reply(&r, &id, "nap");
    assert!(all_gone(&[worker]), "the worker process is gone");
    // The slot's next Python job runs, on a fresh worker process.
    r.request(
        &id,
        "next",
        "",
        json!(["run", {"path": "os", "callable": "getpid"}]),
    );
    let (mid, status, out) = r.expect_reply(&id);
    assert_eq!((mid.as_str(), status.as_str()), ("next", "ok"));
    let JobOutcome::Value(v) = out else { panic!() };
    let fresh = v.as_i64().unwrap() as i32;
    assert_ne!(fresh, worker);
    assert!(running(fresh));
    r.expect_ready(&id);
}

/// Collect `n` REPLYs (READYs skipped), by request msgid, with the time each
/// arrived.
fn replies_by_msgid(
    r: &Router,
    id: &[u8],
    n: usize,
) -> std::collections::HashMap<String, (String, JobOutcome, Instant)> {
    let mut out = std::collections::HashMap::new();
    while out.len() < n {
        let (_, m) = r.expect("REPLY", Some(id));
        if is_ready(&m) {
            continue;
        }
        let (mid, status, outcome) = reply_of(&m);
        assert!(
            out.insert(mid.clone(), (status, outcome, Instant::now()))
                .is_none(),
            "two REPLYs for {mid}"
        );
    }
    out
}

fn timeout_error(o: &JobOutcome) -> &str {
    match o {
        JobOutcome::Error(e) if e.kind == ErrorKind::Timeout => &e.message,
        other => panic!("expected a timeout failure, got {other:?}"),
    }
}

/// A job's `"timeout"` field gives its timeout when it has no
/// `timeout:N` header; the header wins over it; both win over
/// `--global-timeout`.
#[test]
fn a_jobs_timeout_field_stops_it_and_its_timeout_header_wins_over_it() {
    let r = Router::new();
    let _jm = start_jm(
        &r.endpoint,
        &[
            "--concurrency",
            "3",
            "--heartbeat-interval",
            "1",
            "--global-timeout",
            "30",
        ],
    );
    let id = r.register();
    assert_eq!(r.readies(Duration::from_millis(500), &id), 3);
    let t = Instant::now();
    r.request(
        &id,
        "field",
        "",
        json!(["shell", {"argv": ["sleep", "30"], "timeout": 1}]),
    );
    r.request(
        &id,
        "header",
        "timeout:1",
        json!(["shell", {"argv": ["sleep", "30"], "timeout": 30}]),
    );
    r.request(
        &id,
        "quick",
        "",
        json!(["shell", {"argv": ["echo", "in time"], "timeout": 5}]),
    );
    let got = replies_by_msgid(&r, &id, 3);
    for mid in ["field", "header"] {
        let (status, outcome, at) = &got[mid];
        assert_eq!(status, "failed", "{mid}");
        assert_eq!(
            timeout_error(outcome),
            "job ran past its timeout of 1 s and was killed"
        );
        let took = at.duration_since(t);
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_secs(6),
            "{mid}: {took:?}"
        );
    }
    let (status, outcome, _) = &got["quick"];
    assert_eq!(status, "ok");
    let JobOutcome::Value(v) = outcome else {
        panic!()
    };
    assert_eq!(v["stdout"], json!("in time\n"));
}

/// `GLOBAL_TIMEOUT` (here from `EVENTMQ_GLOBAL_TIMEOUT`) stops a Python
/// job and a shell job that name no timeout; the slot's Python worker is
/// replaced and runs the next job.
#[test]
fn global_timeout_stops_python_and_shell_jobs_that_name_no_timeout() {
    let r = Router::new();
    let python = interpreter();
    let _jm = start_jm_env(
        Some(&r.endpoint),
        &[
            "--concurrency",
            "2",
            "--heartbeat-interval",
            "1",
            "--python",
            &python,
        ],
        &[("EVENTMQ_GLOBAL_TIMEOUT", "1")],
    );
    let id = r.register();
    assert_eq!(r.readies(Duration::from_millis(500), &id), 2);
    let t = Instant::now();
    r.request(
        &id,
        "py",
        "reply-requested",
        json!(["run", {"path": "time", "callable": "sleep", "args": [30]}]),
    );
    r.request(&id, "sh", "", json!(["shell", {"argv": ["sleep", "30"]}]));
    let got = replies_by_msgid(&r, &id, 2);
    for mid in ["py", "sh"] {
        let (status, outcome, at) = &got[mid];
        assert_eq!(status, "failed", "{mid}");
        assert_eq!(
            timeout_error(outcome),
            "job ran past its timeout of 1 s and was killed (the job manager's default, \
             GLOBAL_TIMEOUT: change it with --global-timeout or EVENTMQ_GLOBAL_TIMEOUT, or \
             give the job a timeout:N header)",
            "the job named no timeout: the message says where 1 s came from"
        );
        let took = at.duration_since(t);
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_secs(6),
            "{mid}: {took:?}"
        );
    }
    r.request(
        &id,
        "next",
        "",
        json!(["run", {"path": "os.path", "callable": "join", "args": ["a", "b"]}]),
    );
    let got = replies_by_msgid(&r, &id, 1);
    assert_eq!(got["next"].1, JobOutcome::Value(json!("a/b")));
}
