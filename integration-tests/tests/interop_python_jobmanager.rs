//! The real EventMQ 0.3.13 job manager (from the venv) against OUR router,
//! with jobs submitted by the real 0.3.13 client library
//! (`eventmq.client.messages.defer_job` / `send_request`): every job runs,
//! on a job manager serving its queue, and queue weights pick the manager.
//!
//! Jobs append `tag label pid ppid` to a file; the ppid of a 0.3.13 worker
//! process is its job manager, so the file says which manager ran what.

use std::collections::HashMap;
use std::time::Duration;

use integration_tests::admin;
use integration_tests::cluster::{start_py_jobmanager, start_router};
use integration_tests::process::scratch_dir;
use integration_tests::python::{self, PyEnv};
use integration_tests::{jobs, poll_until, Addrs};
use serde_json::{json, Value};

/// Run `tests/python/eventmq_0313_client.py` with one JSON job per line; the msgids
/// it printed and how many REPLY acks it got.
fn py_submit(py: &PyEnv, addrs: &Addrs, lines: &[Value], wait_acks: f64) -> (Vec<String>, usize) {
    let out = py.run_client(&addrs.frontend, lines, wait_acks);
    let mut ids = Vec::new();
    let mut acks = None;
    for l in out.stdout.lines() {
        let v: Value = serde_json::from_str(l).unwrap_or(Value::Null);
        if let Some(id) = v.get("msgid") {
            ids.push(
                id.as_str()
                    .unwrap_or_else(|| panic!("no msgid: {l}"))
                    .to_string(),
            );
        }
        if v.get("done").is_some() {
            acks = v["acks"].as_u64();
        }
    }
    (ids, acks.expect("client printed its summary") as usize)
}

#[test]
fn python_jobmanagers_run_python_client_jobs_on_their_queues() {
    let Some(py) = python::venv("python_jobmanagers_run_python_client_jobs_on_their_queues") else {
        return;
    };
    let (mut router, addrs) = start_router(&[]);
    let a = start_py_jobmanager(
        &py,
        "py-jm-a",
        &addrs.backend,
        r#"[[10, "qa"], [10, "default"]]"#,
        2,
    );
    let b = start_py_jobmanager(&py, "py-jm-b", &addrs.backend, r#"[[10, "qb"]]"#, 2);
    // 0.3.13 sends READY only after the router's first HEARTBEAT (3 s).
    admin::wait_idle_workers(&addrs.admin, 2, 4, Duration::from_secs(30))
        .expect("two 0.3.13 job managers with 2 slots each");

    let dir = scratch_dir("py-jm");
    let file = dir.join("records.txt");
    let f = file.display().to_string();
    let mut lines = Vec::new();
    let mut expect: HashMap<String, &str> = HashMap::new();
    for i in 0..6 {
        for (queue, label) in [("qa", "qa"), ("qb", "qb"), ("nosuch", "fallback")] {
            if label == "fallback" && i >= 2 {
                continue;
            }
            let tag = format!("{label}-{i}");
            let line = if i % 2 == 0 {
                json!({"via": "defer_job", "func": "emq_test_jobs.record", "args": [f, tag, label],
                       "queue": queue, "reply_requested": i % 4 == 0})
            } else {
                json!({"via": "send_request", "queue": queue, "reply_requested": true,
                       "message": ["run", {"path": "emq_test_jobs", "callable": "record",
                                           "args": [f, tag], "kwargs": {"label": label}}]})
            };
            lines.push(line);
            expect.insert(tag, label);
        }
    }
    let (ids, acks) = py_submit(&py, &addrs, &lines, 3.0);
    assert_eq!(ids.len(), lines.len());
    assert_eq!(
        acks,
        lines.len(),
        "our router acknowledges every accepted REQUEST"
    );

    let recs = jobs::wait_records(&file, expect.len(), Duration::from_secs(40));
    // All four slots given back: no job is still running, so a count taken
    // now is final (a duplicate run would show in it).
    admin::wait_idle_workers(&addrs.admin, 2, 4, Duration::from_secs(15))
        .expect("the 0.3.13 job managers gave their slots back");
    let recs_again = jobs::read_records(&file);
    assert_eq!(recs_again.len(), recs.len(), "extra runs: {recs_again:?}");
    let mut seen = HashMap::new();
    for r in &recs {
        let (tag, label, ppid) = (&r[0], &r[1], r[3].parse::<i32>().unwrap());
        *seen.entry(tag.clone()).or_insert(0) += 1;
        let want = expect
            .get(tag.as_str())
            .unwrap_or_else(|| panic!("unexpected record {r:?}"));
        assert_eq!(label, want);
        let manager = if ppid == a.pid() {
            "a"
        } else if ppid == b.pid() {
            "b"
        } else {
            panic!(
                "record {r:?} from neither job manager (a={}, b={})",
                a.pid(),
                b.pid()
            )
        };
        let allowed = match *want {
            "qa" | "fallback" => "a",
            _ => "b",
        };
        assert_eq!(manager, allowed, "job {tag} ran on the wrong job manager");
    }
    assert!(seen.values().all(|n| *n == 1), "{seen:?}");
    integration_tests::report(&format!(
        "INTEROP our router + two 0.3.13 job managers (queues qa+default / qb): {} jobs from the \
         0.3.13 client ran once each on the right manager, {acks} acks",
        recs.len()
    ));

    admin::wait_idle_workers(&addrs.admin, 2, 4, Duration::from_secs(10))
        .expect("slots back after the jobs");
    assert!(router.is_running());
    drop((a, b));
}

#[test]
fn queue_weights_pick_the_heavier_python_jobmanager() {
    let Some(py) = python::venv("queue_weights_pick_the_heavier_python_jobmanager") else {
        return;
    };
    let (_router, addrs) = start_router(&[]);
    let heavy = start_py_jobmanager(&py, "py-jm-heavy", &addrs.backend, r#"[[20, "qw"]]"#, 1);
    let light = start_py_jobmanager(&py, "py-jm-light", &addrs.backend, r#"[[5, "qw"]]"#, 1);
    admin::wait_idle_workers(&addrs.admin, 2, 2, Duration::from_secs(30))
        .expect("two job managers");

    let dir = scratch_dir("weights");
    let file = dir.join("records.txt");
    let f = file.display().to_string();
    // One at a time, each after the previous finished: both are idle every
    // time, so the weight decides.
    for i in 0..4 {
        let tag = format!("seq-{i}");
        let (ids, _) = py_submit(
            &py,
            &addrs,
            &[json!({"func": "emq_test_jobs.record", "args": [f, tag, "qw"], "queue": "qw"})],
            0.2,
        );
        assert_eq!(ids.len(), 1);
        jobs::wait_records(&file, i + 1, Duration::from_secs(20));
        admin::wait_idle_workers(&addrs.admin, 2, 2, Duration::from_secs(10))
            .expect("both idle again");
    }
    // Two slow jobs at once: the second overflows to the lighter manager.
    let (ids, _) = py_submit(
        &py,
        &addrs,
        &[
            json!({"func": "emq_test_jobs.record", "args": [f, "par-0", "qw", 1.5], "queue": "qw"}),
            json!({"func": "emq_test_jobs.record", "args": [f, "par-1", "qw", 1.5], "queue": "qw"}),
        ],
        0.2,
    );
    assert_eq!(ids.len(), 2);
    let recs = jobs::wait_records(&file, 6, Duration::from_secs(30));
    let on = |tag: &str| {
        let r = recs
            .iter()
            .find(|r| r[0] == tag)
            .unwrap_or_else(|| panic!("{tag} missing: {recs:?}"));
        let ppid: i32 = r[3].parse().unwrap();
        if ppid == heavy.pid() {
            "heavy"
        } else if ppid == light.pid() {
            "light"
        } else {
            "unknown"
        }
    };
    for i in 0..4 {
        assert_eq!(
            on(&format!("seq-{i}")),
            "heavy",
            "weight 20 beats weight 5: {recs:?}"
        );
    }
    let mut par = [on("par-0"), on("par-1")];
    par.sort();
    assert_eq!(
        par,
        ["heavy", "light"],
        "overflow goes to the lighter one: {recs:?}"
    );
}

#[test]
fn python_jobmanager_killed_mid_run_loses_no_job() {
    let Some(py) = python::venv("python_jobmanager_killed_mid_run_loses_no_job") else {
        return;
    };
    // 0.3.13 beats every 3 s; declare it dead after 6 s of silence.
    let (_router, addrs) =
        start_router(&["--heartbeat-interval", "1", "--heartbeat-liveness", "6"]);
    let mut a = start_py_jobmanager(&py, "py-jm-a", &addrs.backend, r#"[[10, "default"]]"#, 2);
    let mut b = start_py_jobmanager(&py, "py-jm-b", &addrs.backend, r#"[[10, "default"]]"#, 2);
    admin::wait_idle_workers(&addrs.admin, 2, 4, Duration::from_secs(30))
        .expect("two 0.3.13 job managers");

    let dir = scratch_dir("py-kill");
    let file = dir.join("records.txt");
    let f = file.display().to_string();
    let n = 40;
    let tags: Vec<String> = (0..n).map(|i| format!("pk{i}")).collect();
    let lines: Vec<Value> = tags
        .iter()
        .map(|t| json!({"func": "emq_test_jobs.record", "args": [f, t, "-", 0.2]}))
        .collect();
    let (ids, acks) = py_submit(&py, &addrs, &lines, 1.0);
    assert_eq!((ids.len(), acks), (n, n));
    jobs::wait_records(&file, n / 4, Duration::from_secs(30));
    let a_pid = a.pid();
    // The whole job manager dies, worker processes included.
    a.kill9_group();
    let before = jobs::read_records(&file).len();
    eprintln!("killed the 0.3.13 job manager a (pid {a_pid}) after {before} records");
    let done = poll_until(Duration::from_secs(60), Duration::from_millis(200), || {
        let c = jobs::count_lines(&file);
        tags.iter().all(|t| c.contains_key(t)).then_some(c)
    });
    let tally = jobs::Tally::of(&tags, &jobs::count_lines(&file));
    integration_tests::report(&format!(
        "FAULT kill-9 of a 0.3.13 job manager (whole process group, {n} jobs): executions: {tally}"
    ));
    assert!(
        done.is_some(),
        "jobs lost with the 0.3.13 job manager: {tally}"
    );
    assert!(b.is_running(), "job manager b died: {}", b.tail(30));
    admin::wait_idle_workers(&addrs.admin, 1, 2, Duration::from_secs(20))
        .expect("only b is left, idle");
}
