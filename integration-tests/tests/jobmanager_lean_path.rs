//! The job manager's lean Python path end to end (issue 29): once a
//! slot's worker has run a job, the socket loop writes its requests and
//! reads its answers itself. Through the real router and job manager:
//! many jobs on one slot, a cancel of a running job (its worker killed,
//! the slot works again on a fresh one), and a worker killed mid-job (a
//! `crash` result, the slot works again), and a timeout — each after jobs
//! that put the slot's worker on the lean path.

use std::time::{Duration, Instant};

use integration_tests::bins;
use integration_tests::client::Client;
use integration_tests::cluster::{start_jobmanager, start_router_on, Addrs};
use integration_tests::jobs;
use integration_tests::process::{pid_alive, run, scratch_dir, wait_pids_gone};
use integration_tests::{poll_until, Spawn};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

/// Submit a Python job with reply-requested and wait for its result.
fn run_job(c: &mut Client, callable: &str, args: Value) -> Value {
    let id = submit(c, callable, args);
    assert!(
        c.wait_for(WAIT, |c| c.results.contains_key(&id)),
        "no result for {callable}"
    );
    c.result(&id).unwrap().json()
}

fn submit(c: &mut Client, callable: &str, args: Value) -> String {
    submit_with(c, "reply-requested", callable, args)
}

fn submit_with(c: &mut Client, headers: &str, callable: &str, args: Value) -> String {
    let msg = jobs::run("emq_test_jobs", callable, args, json!({}));
    let id = c.submit("default", headers, msg);
    assert!(
        c.wait_for(WAIT, |c| c.acks.contains_key(&id)),
        "{id} not acknowledged"
    );
    id
}

/// Start `pid_then_sleep` and wait until its worker wrote its pid.
fn start_sleeper(c: &mut Client, pids: &std::path::Path) -> (String, i32) {
    let _ = std::fs::remove_file(pids);
    let id = submit(c, "pid_then_sleep", json!([pids.display().to_string(), 60]));
    let pid: i32 = poll_until(WAIT, Duration::from_millis(20), || {
        std::fs::read_to_string(pids)
            .ok()
            .and_then(|t| t.trim().parse().ok())
    })
    .expect("the job wrote its worker's pid");
    assert!(pid_alive(pid));
    (id, pid)
}

fn warm(c: &mut Client, n: i64) {
    for i in 0..n {
        assert_eq!(run_job(c, "add", json!([i, 1])), json!({"value": i + 1}));
    }
}

#[test]
fn python_jobs_cancels_and_deaths_through_the_socket_loop() {
    let dir = scratch_dir("lean-path");
    let pids = dir.join("pid.txt");
    let addrs = Addrs::fresh();
    let mut router = start_router_on(&addrs, &["--journal", "none"]).expect("router starts");
    let mut jm = start_jobmanager(
        "emq-jobmanager",
        &addrs.backend,
        &["--concurrency", "1", "--heartbeat-interval", "6"],
    );
    let mut c = Client::connect(&addrs.frontend);

    warm(&mut c, 50);

    // A cancel of a job running on the lean path kills its worker.
    let (id, pid) = start_sleeper(&mut c, &pids);
    let out = run(
        Spawn::new("emq-cli", bins::bin("emq-cli")).args(["--admin", &addrs.admin, "cancel", &id]),
        WAIT,
    );
    assert_eq!(out.code(), Some(0), "emq-cli cancel: {}", out.describe());
    assert!(
        c.wait_for(WAIT, |c| c.results.contains_key(&id)),
        "no RESULT for the cancelled job"
    );
    let r = c.result(&id).unwrap().json();
    assert_eq!(r["error"]["kind"], "cancelled", "{r}");
    assert!(wait_pids_gone(&[pid], WAIT), "the worker {pid} still runs");
    warm(&mut c, 20);

    // A worker killed mid-job: the job is a crash, the slot goes on.
    let (id, pid) = start_sleeper(&mut c, &pids);
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    assert!(
        c.wait_for(WAIT, |c| c.results.contains_key(&id)),
        "no RESULT for the job whose worker died"
    );
    let r = c.result(&id).unwrap().json();
    assert_eq!(r["error"]["kind"], "crash", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("died while running the job")),
        "{r}"
    );
    warm(&mut c, 20);

    // A timeout of a job on the lean path kills its worker in time (well
    // before the loop's next heartbeat, 6 s here, would wake it).
    let _ = std::fs::remove_file(&pids);
    let sent = Instant::now();
    let id = submit_with(
        &mut c,
        "reply-requested,timeout:1",
        "pid_then_sleep",
        json!([pids.display().to_string(), 60]),
    );
    assert!(
        c.wait_for(WAIT, |c| c.results.contains_key(&id)),
        "no RESULT for the job that timed out"
    );
    let took = sent.elapsed();
    let r = c.result(&id).unwrap().json();
    assert_eq!(r["error"]["kind"], "timeout", "{r}");
    assert!(
        took < Duration::from_millis(4500),
        "a 1 s timeout took {took:?} (the loop slept to its heartbeat?)"
    );
    warm(&mut c, 5);

    jm.stop();
    router.stop();
}
