//! OUR job manager (and sender) against the real EventMQ 0.3.13 router:
//! 0.3.13 clients' jobs, in 0.3.13's job format, run unchanged on ours.

use std::time::Duration;

use integration_tests::admin;
use integration_tests::bins::{self, SENDER};
use integration_tests::cluster::{start_jobmanager, start_py_router};
use integration_tests::process::{run, scratch_dir};
use integration_tests::python::{self, PyEnv};
use integration_tests::{jobs, Addrs, Spawn};
use serde_json::{json, Value};

fn py_submit(py: &PyEnv, addrs: &Addrs, lines: &[Value]) -> Vec<String> {
    let out = py.run_client(&addrs.frontend, lines, 1.0);
    out.stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v.get("msgid").and_then(Value::as_str).map(String::from))
        .collect()
}

#[test]
fn our_jobmanager_runs_python_client_jobs_from_the_python_router() {
    let Some(py) = python::venv("our_jobmanager_runs_python_client_jobs_from_the_python_router")
    else {
        return;
    };
    let (mut router, addrs) = start_py_router(&py);
    let mut jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "2"]);
    admin::wait_idle_workers(&addrs.admin, 1, 2, Duration::from_secs(30))
        .expect("the 0.3.13 router lists our job manager with 2 free slots");

    let dir = scratch_dir("py-router");
    let file = dir.join("records.txt");
    let f = file.display().to_string();
    let lines = vec![
        // defer_job of a function, fire and forget
        json!({"func": "emq_test_jobs.record", "args": [f, "fn-1", "default"]}),
        // defer_job with reply_requested, guarantee, retry_count, timeout headers
        json!({"func": "emq_test_jobs.record", "args": [f, "fn-2"], "kwargs": {"label": "hdrs"},
               "reply_requested": true, "guarantee": true, "retry_count": 2, "timeout": 30}),
        // a method of a class: path "emq_test_jobs:Recorder", class_args
        json!({"func": "emq_test_jobs:Recorder.write", "class_args": [f], "class_kwargs": {"prefix": "cls-"},
               "args": ["3"], "kwargs": {"label": "method"}}),
        // a failing job must not stop the next one
        json!({"func": "emq_test_jobs.fail", "args": ["expected failure"], "reply_requested": true}),
        // send_request with a hand-built 0.3.13 message, unknown queue → default
        json!({"via": "send_request", "queue": "no-such-queue",
               "message": ["run", {"path": "emq_test_jobs", "callable": "record", "args": [f, "raw-4", "fallback"]}]}),
    ];
    let ids = py_submit(&py, &addrs, &lines);
    assert_eq!(ids.len(), lines.len());

    let recs = jobs::wait_records(&file, 4, Duration::from_secs(40));
    let tags: Vec<(&str, &str)> = recs
        .iter()
        .map(|r| (r[0].as_str(), r[1].as_str()))
        .collect();
    for want in [
        ("fn-1", "default"),
        ("fn-2", "hdrs"),
        ("cls-3", "method"),
        ("raw-4", "fallback"),
    ] {
        assert!(tags.contains(&want), "missing {want:?} in {tags:?}");
    }

    // Our sender against the 0.3.13 router: it never acks buffered jobs and
    // never returns results, so --no-ack (fire and forget).
    let out = run(
        Spawn::new("emq-sender", bins::bin(SENDER)).args([
            "--broker",
            &addrs.frontend,
            "--no-ack",
            "--python",
            "emq_test_jobs.record",
            "--args",
            &json!([f, "sender-5", "ours"]).to_string(),
        ]),
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    let recs = jobs::wait_records(&file, 5, Duration::from_secs(30));
    assert!(recs.iter().any(|r| r[0] == "sender-5"), "{recs:?}");

    // The other two job kinds through the 0.3.13 router: a shell job (it
    // appends a record in the same format) and a Rust `call` job, whose
    // completion the 0.3.13 router logs when our job-ack REPLY reaches it.
    let sender = |extra: &[&str]| {
        let mut args = vec!["--broker", addrs.frontend.as_str(), "--no-ack"];
        args.extend_from_slice(extra);
        let out = run(
            Spawn::new("emq-sender", bins::bin(SENDER)).args(args),
            Duration::from_secs(30),
        );
        assert_eq!(out.code(), Some(0), "{}", out.describe());
        out.stdout.trim().to_string()
    };
    let shell_line = format!("echo shell-6 shell $$ $PPID >> '{f}'");
    sender(&["--shell", "--", "sh", "-c", &shell_line]);
    let recs = jobs::wait_records(&file, 6, Duration::from_secs(30));
    assert!(recs.iter().any(|r| r[0] == "shell-6"), "{recs:?}");
    let call_id = sender(&["--call", "echo", "--args", "[7]"]);
    assert_eq!(
        call_id.len(),
        36,
        "the sender printed the msgid: {call_id:?}"
    );
    let completed = format!("Completed default job with msgid: {call_id}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !router.stderr().contains(&completed) {
        assert!(
            std::time::Instant::now() < deadline,
            "the 0.3.13 router never saw the call job {call_id} complete:\n{}",
            router.tail(30)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Every slot given back means no job is still running: only then is
    // the count of runs final.
    admin::wait_idle_workers(&addrs.admin, 1, 2, Duration::from_secs(15))
        .expect("our READYs gave the slots back");
    assert_eq!(jobs::read_records(&file).len(), 6, "each job ran once");
    assert!(jm.is_running(), "our job manager died: {}", jm.tail(30));
    assert!(
        router.is_running(),
        "0.3.13 router died: {}",
        router.tail(30)
    );
    let rlog = router.stderr();
    let raised: Vec<&str> = rlog
        .lines()
        .filter(|l| {
            l.starts_with("Traceback") || l.contains(" ERROR - ") || l.contains(" CRITICAL - ")
        })
        .collect();
    assert!(
        raised.is_empty(),
        "0.3.13 router complained:\n{}",
        raised.join("\n")
    );

    // An orderly stop: our job manager says KBYE and the 0.3.13 router drops it.
    let st = jm.stop();
    assert!(
        st.is_some_and(|s| s.success()),
        "job manager exit on SIGTERM: {st:?}"
    );
    admin::wait_workers(&addrs.admin, Duration::from_secs(10), |w| w.is_empty())
        .expect("the 0.3.13 router forgot our job manager after KBYE");
}

/// The credit window against 0.3.13's router: it counts every READY as a
/// free slot, hands out one job per READY, and the job manager runs the
/// jobs it holds beyond its slots, each once, never more than its slots
/// at a time.
#[test]
fn our_jobmanager_with_a_credit_window_works_with_the_python_router() {
    let Some(py) = python::venv("our_jobmanager_with_a_credit_window_works_with_the_python_router")
    else {
        return;
    };
    let (mut router, addrs) = start_py_router(&py);
    let mut jm = start_jobmanager(
        "emq-jobmanager",
        &addrs.backend,
        &["--concurrency", "2", "--prefetch", "6"],
    );
    admin::wait_idle_workers(&addrs.admin, 1, 8, Duration::from_secs(30))
        .expect("the 0.3.13 router counts 2 slots + 6 credit as 8 free slots");

    let dir = scratch_dir("py-router-window");
    let file = dir.join("records.txt");
    let f = file.display().to_string();
    let n = 24;
    let lines: Vec<Value> = (0..n)
        .map(|i| json!({"func": "emq_test_jobs.record", "args": [f, format!("w-{i}"), "window", 0.05]}))
        .collect();
    let ids = py_submit(&py, &addrs, &lines);
    assert_eq!(ids.len(), n);
    let recs = jobs::wait_records(&file, n, Duration::from_secs(60));
    let mut tags: Vec<&str> = recs.iter().map(|r| r[0].as_str()).collect();
    tags.sort_unstable();
    tags.dedup();
    assert_eq!(tags.len(), n, "every job ran once: {recs:?}");
    // At most 2 at a time: the records came from 2 worker processes.
    let mut pids: Vec<&str> = recs.iter().map(|r| r[2].as_str()).collect();
    pids.sort_unstable();
    pids.dedup();
    assert!(
        pids.len() <= 2,
        "jobs ran in {} processes: {pids:?}",
        pids.len()
    );
    // All credit back: no job runs or is held any more (a job writes its
    // record before its REPLY and READY), and a 0.3.13 router redelivers
    // nothing, so the count is final.
    admin::wait_idle_workers(&addrs.admin, 1, 8, Duration::from_secs(15))
        .expect("the credit is back once the jobs are done");
    assert_eq!(jobs::read_records(&file).len(), n, "each job ran once");
    assert!(jm.is_running(), "our job manager died: {}", jm.tail(30));
    assert!(
        router.is_running(),
        "0.3.13 router died: {}",
        router.tail(30)
    );
    let rlog = router.stderr();
    assert!(
        !rlog
            .lines()
            .any(|l| l.starts_with("Traceback") || l.contains(" ERROR - ")),
        "0.3.13 router complained:\n{}",
        router.tail(30)
    );
    let st = jm.stop();
    assert!(st.is_some_and(|s| s.success()), "job manager exit: {st:?}");
}
