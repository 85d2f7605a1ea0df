//! EventMQ 0.3.13's worker-process settings on our job manager, end to
//! end: our router, our job manager running a small Django-like project
//! (`tests/python/djangoish`) with `--subprocess-setup-func`,
//! `--job-entry-func`, `--job-exit-func` and `--max-job-count`, and a test
//! client with `reply-requested`. The project's jobs fail unless the setup
//! function ran in their worker process; the hooks log every call to an
//! events file and count it in module state that the jobs return.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use integration_tests::admin;
use integration_tests::bins::{self, JOBMANAGER};
use integration_tests::cluster::start_router;
use integration_tests::process::scratch_dir;
use integration_tests::{python, Client, Proc, Spawn};
use serde_json::{json, Value};

const JOBS: usize = 20;
const MAX_JOB_COUNT: usize = 3;
const CONCURRENCY: usize = 2;

/// Our job manager serving `queue`, with the project's events file.
fn jobmanager(name: &str, backend: &str, queue: &str, events: &Path, extra: &[&str]) -> Proc {
    Spawn::new(name, bins::bin(JOBMANAGER))
        .args(["--broker", backend, "--python", &python::job_python()])
        .args(["--queues", queue, "--concurrency", &CONCURRENCY.to_string()])
        .args(extra)
        .env("PYTHONPATH", python::pythonpath())
        .env("DJANGOISH_EVENTS", events)
        .spawn()
}

fn record_job(token: &str) -> Vec<u8> {
    json!(["run", {"path": "djangoish.jobs", "callable": "record", "args": [token]}])
        .to_string()
        .into_bytes()
}

/// The events file: `(pid, event)` in write order.
fn events(path: &Path) -> Vec<(i64, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (pid, what) = l.split_once(' ').expect("<pid> <event>");
            (pid.parse().expect("a pid"), what.to_string())
        })
        .collect()
}

#[test]
fn a_django_like_project_runs_with_its_setup_and_hooks_on_workers_recycled_after_max_job_count() {
    let (_router, addrs) = start_router(&[]);
    let dir = scratch_dir("djangoish");
    let events_file = dir.join("events");
    let control_events = dir.join("control-events");
    let _jm = jobmanager(
        "emq-jobmanager",
        &addrs.backend,
        "default",
        &events_file,
        &[
            "--subprocess-setup-func",
            "djangoish.setup",
            "--job-entry-func",
            "djangoish.db.entry",
            "--job-exit-func",
            "djangoish.db.exit",
            "--max-job-count",
            &MAX_JOB_COUNT.to_string(),
        ],
    );
    // The control: the same project without its setup function.
    let _control = jobmanager(
        "emq-jobmanager-nosetup",
        &addrs.backend,
        "nosetup",
        &control_events,
        &[
            "--job-entry-func",
            "djangoish.db.entry",
            "--job-exit-func",
            "djangoish.db.exit",
        ],
    );
    admin::wait_idle_workers(
        &addrs.admin,
        2,
        2 * CONCURRENCY as i64,
        Duration::from_secs(30),
    )
    .expect("both job managers register with their slots");

    let mut client = Client::connect(&addrs.frontend);
    let tokens: Vec<String> = (0..JOBS).map(|i| format!("t{i:02}")).collect();
    let ids: Vec<String> = tokens
        .iter()
        .map(|t| client.submit_reply("default", record_job(t)))
        .collect();
    let control = client.submit_reply("nosetup", record_job("control"));
    let mut all = ids.clone();
    all.push(control.clone());
    client
        .wait_finished(&all, Duration::from_secs(60))
        .unwrap_or_else(|left| panic!("no RESULT for {left:?}"));
    assert!(client.rejects.is_empty(), "{:?}", client.rejects);
    assert_eq!(client.duplicate_results(), Vec::<String>::new());

    // Without the setup function the project's job fails, as a Django ORM
    // job does without django.setup().
    let failed = client.result(&control).expect("a RESULT").json();
    assert_eq!(failed["error"]["kind"], json!("exception"), "{failed}");
    assert_eq!(
        failed["error"]["message"],
        json!("AppRegistryNotReady: Apps aren't loaded yet."),
        "{failed}"
    );

    // Every job once, with the project set up once in its worker process,
    // its entry hook run before it and the exit hook after each earlier
    // job of that process.
    let mut jobs_by_pid: BTreeMap<i64, Vec<Value>> = BTreeMap::new();
    for (token, id) in tokens.iter().zip(&ids) {
        let r = client.result(id).expect("a RESULT").json();
        let v = &r["value"];
        assert_eq!(v["token"], json!(token), "{r}");
        assert_eq!(v["setup_calls"], json!(1), "{r}");
        assert_eq!(v["entries"], v["queries"], "one entry per job: {r}");
        assert_eq!(
            v["exits"].as_i64().unwrap() + 1,
            v["entries"].as_i64().unwrap(),
            "an exit after every earlier job: {r}"
        );
        jobs_by_pid
            .entry(v["pid"].as_i64().unwrap())
            .or_default()
            .push(v.clone());
    }
    // Workers recycled: no process ran more than MAX_JOB_COUNT jobs.
    for (pid, jobs) in &jobs_by_pid {
        assert!(
            jobs.len() <= MAX_JOB_COUNT,
            "worker {pid} ran {} jobs: {jobs:?}",
            jobs.len()
        );
    }
    let workers = jobs_by_pid.len();
    assert!(
        workers >= JOBS.div_ceil(MAX_JOB_COUNT),
        "{JOBS} jobs at most {MAX_JOB_COUNT} per worker on {workers} worker processes"
    );
    integration_tests::report(&format!(
        "djangoish: {JOBS} jobs on {workers} worker processes (MAX_JOB_COUNT {MAX_JOB_COUNT}, \
         {CONCURRENCY} slots)"
    ));

    // The events file, per worker process: setup first and once, then
    // entry, job, exit for each job; every token exactly once overall.
    let mut per_pid: HashMap<i64, Vec<String>> = HashMap::new();
    for (pid, what) in events(&events_file) {
        per_pid.entry(pid).or_default().push(what);
    }
    let mut seen: Vec<String> = Vec::new();
    for (pid, evs) in &per_pid {
        assert_eq!(evs[0], "setup", "worker {pid}: {evs:?}");
        let rest = &evs[1..];
        assert_eq!(rest.len() % 3, 0, "worker {pid}: {evs:?}");
        for triple in rest.chunks(3) {
            assert_eq!(triple[0], "entry", "worker {pid}: {evs:?}");
            let token = triple[1]
                .strip_prefix("job ")
                .unwrap_or_else(|| panic!("worker {pid}: {evs:?}"));
            assert_eq!(triple[2], "exit", "worker {pid}: {evs:?}");
            seen.push(token.to_string());
        }
        assert!(rest.len() / 3 <= MAX_JOB_COUNT, "worker {pid}: {evs:?}");
    }
    seen.sort();
    assert_eq!(seen, tokens, "every job ran exactly once");
    // Workers that ran no job yet (started to replace a retired one) only
    // logged their setup; the ones that ran jobs are those of the results.
    for pid in jobs_by_pid.keys() {
        assert!(per_pid.contains_key(pid), "worker {pid} left no events");
    }

    // In the control, entry and exit ran around the failed job.
    let control_evs: Vec<String> = events(&control_events)
        .into_iter()
        .map(|(_, w)| w)
        .collect();
    assert_eq!(control_evs, ["entry", "exit"]);
}
