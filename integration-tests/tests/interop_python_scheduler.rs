//! The real EventMQ 0.3.13 `emq-scheduler` (from the venv, with its Redis:
//! Debian's redis-server, started and stopped by the test) registered with
//! our router: the router forwards SCHEDULE and UNSCHEDULE to it (the rule
//! in `emq-router-core/src/router/schedules.rs`), the scheduler sends a
//! REQUEST every interval, our job manager runs it.
//!
//! One schedule ("A") is made with 0.3.13's client (`schedule()`), another
//! ("B") with `emq-sender --schedule-interval`; both every second. A runs
//! at least twice, one interval apart; then `emq-sender --unschedule`
//! removes it, and while B runs three more times A does not run again.
//! The scheduler's own log (DEBUG, 0.3.13's default) says which schedule
//! it ran when, and Redis holds what it keeps.

use std::time::Duration;

use integration_tests::admin::query;
use integration_tests::bins::{self, bin};
use integration_tests::cluster::{start_jobmanager, start_router};
use integration_tests::process::{run, scratch_dir};
use integration_tests::python::{self, pythonpath};
use integration_tests::redis::RedisServer;
use integration_tests::{poll_until, Spawn};
use serde_json::{json, Value};

const T: &str = "interop_python_scheduler";
const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);

/// Times (unix seconds) at which the job `stamp(path, tag)` ran with `tag`.
fn runs_of(path: &std::path::Path, tag: &str) -> Vec<f64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(t, _)| *t == tag)
        .map(|(_, when)| when.trim().parse().expect("a time"))
        .collect()
}

/// The job of schedule `tag`, as `emq-sender --python ... --args` gives it.
fn sender_job_args(runs: &str, tag: &str) -> Vec<String> {
    vec![
        "--python".into(),
        "emq_test_jobs.stamp".into(),
        "--args".into(),
        json!([runs, tag]).to_string(),
    ]
}

#[test]
fn the_real_0_3_13_scheduler_runs_and_stops_schedules_forwarded_by_our_router() {
    let Some(py) = python::venv(T) else {
        return;
    };
    if !py.require_module(T, "redis") {
        return;
    }
    let Some(redis) = RedisServer::start(T) else {
        return;
    };
    let (_router, addrs) = start_router(&[]);
    let _jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "2"]);
    let mut scheduler = Spawn::new("py-emq-scheduler", py.scheduler_script())
        .env("EVENTMQ_SCHEDULER_ADDR", &addrs.frontend)
        .env("EVENTMQ_RQ_HOST", "127.0.0.1")
        .env("EVENTMQ_RQ_PORT", redis.port().to_string())
        .env("PYTHONPATH", pythonpath())
        .env("PYTHONUNBUFFERED", "1")
        .spawn();
    let show_schedulers = || {
        query(
            &addrs.admin,
            emqp_proto::Command::RouterShowSchedulers,
            Duration::from_secs(5),
        )
    };
    let registered = poll_until(WAIT, POLL, || {
        let v = show_schedulers().ok()?;
        let n = v["connected_schedulers"].as_object().map_or(0, |m| m.len());
        (n == 1).then_some(v)
    });
    assert!(
        registered.is_some(),
        "the 0.3.13 scheduler did not register with the router; its log:\n{}",
        scheduler.tail(30)
    );

    let runs = scratch_dir("runs").join("runs.log");
    let runs_s = runs.display().to_string();
    // A: 0.3.13's client library; the router answers REPLY [msgid]
    let out = py.run_client_until_acked(
        &addrs.frontend,
        &[json!({"via": "schedule", "func": "emq_test_jobs.stamp",
                 "args": [runs_s, "A"], "interval_secs": 1})],
        20.0,
    );
    assert!(
        out.stdout.contains("\"done\": true, \"acks\": 1"),
        "SCHEDULE A acknowledged: {}",
        out.describe()
    );
    // B: emq-sender (the same frames as 0.3.13's schedule())
    let sender = |extra: &[&str], job: Vec<String>| {
        let out = run(
            Spawn::new("emq-sender", bin(bins::SENDER))
                .args(["--broker", &addrs.frontend])
                .args(extra)
                .args(job),
            Duration::from_secs(30),
        );
        assert_eq!(out.code(), Some(0), "emq-sender: {}", out.describe());
    };
    sender(&["--schedule-interval", "1"], sender_job_args(&runs_s, "B"));

    // Both went to the scheduler peer, not into the router's own book.
    let v = show_schedulers().unwrap();
    assert_eq!(
        v["schedules"],
        json!([]),
        "nothing booked by the router: {v}"
    );

    // A runs at least twice, one interval apart
    let a = poll_until(WAIT, POLL, || {
        let a = runs_of(&runs, "A");
        (a.len() >= 2).then_some(a)
    })
    .unwrap_or_else(|| {
        panic!(
            "A ran {:?}; scheduler log:\n{}",
            runs_of(&runs, "A"),
            scheduler.tail(30)
        )
    });
    let gap = a[1] - a[0];
    assert!(
        (0.5..5.0).contains(&gap),
        "A's first two runs {gap:.3} s apart, for an interval of 1 s"
    );
    // The scheduler keeps both in Redis.
    let kept = poll_until(WAIT, POLL, || {
        let l = redis.list("interval_jobs").ok()?;
        (l.len() == 2).then_some(l)
    })
    .unwrap_or_else(|| panic!("Redis holds {:?}", redis.list("interval_jobs")));

    // Unschedule A with emq-sender: the router hands it to the scheduler.
    sender(&["--unschedule"], sender_job_args(&runs_s, "A"));
    scheduler
        .wait_for_log_line("Received new UNSCHEDULE request", WAIT)
        .unwrap();
    let b_then = runs_of(&runs, "B").len();
    poll_until(WAIT, POLL, || {
        (runs_of(&runs, "B").len() >= b_then + 3).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "B stopped running too; scheduler log:\n{}",
            scheduler.tail(30)
        )
    });

    // From the scheduler's log: every time it sent A (besides the first run,
    // sent on SCHEDULE itself: 0.3.13's haste mode) was before the
    // UNSCHEDULE; every one of those runs ran once, and no other.
    let log = scheduler.stderr();
    let unscheduled_at = log
        .find("Received new UNSCHEDULE request")
        .expect("UNSCHEDULE in the log");
    let is_run_of = |line: &str, tag: &str| {
        line.contains(" - Running ") && line.contains(&format!("\"{tag}\"]"))
    };
    let a_sent_before = log[..unscheduled_at]
        .lines()
        .filter(|l| is_run_of(l, "A"))
        .count();
    let a_sent_after = log[unscheduled_at..]
        .lines()
        .filter(|l| is_run_of(l, "A"))
        .count();
    assert_eq!(a_sent_after, 0, "the scheduler sent A after UNSCHEDULE");
    let a_runs = runs_of(&runs, "A");
    assert_eq!(
        a_runs.len(),
        1 + a_sent_before,
        "A ran once per REQUEST the scheduler sent (the first on SCHEDULE)"
    );
    assert!(
        log[unscheduled_at..]
            .lines()
            .filter(|l| is_run_of(l, "B"))
            .count()
            >= 3,
        "B kept running"
    );

    // Redis: A's schedule is gone, B's is kept.
    let hash_of = |tag: &str| -> String {
        let line = log
            .lines()
            .find(|l| is_run_of(l, tag))
            .unwrap_or_else(|| panic!("no run of {tag} in the log"));
        let rest = &line[line.find(" - Running ").unwrap() + " - Running ".len()..];
        rest.split_whitespace().next().unwrap().to_string()
    };
    let (hash_a, hash_b) = (hash_of("A"), hash_of("B"));
    let mut want = vec![hash_a.clone(), hash_b.clone()];
    want.sort();
    let mut kept = kept;
    kept.sort();
    assert_eq!(kept, want, "Redis kept both schedules by their hash");
    assert_eq!(redis.list("interval_jobs").unwrap(), vec![hash_b.clone()]);
    assert_eq!(redis.cli(&["EXISTS", &hash_a]).unwrap(), "0");
    let stored: Value = serde_json::from_str(&redis.cli(&["GET", &hash_b]).unwrap()).unwrap();
    assert_eq!(stored[2], "1", "B's SCHEDULE frames, interval 1: {stored}");
    integration_tests::report(&format!(
        "interop 0.3.13 emq-scheduler (Redis on port {}): A ran {} times, first two {gap:.2} s \
         apart, none after UNSCHEDULE; B ran {} times",
        redis.port(),
        a_runs.len(),
        runs_of(&runs, "B").len()
    ));
    drop(redis);
}
