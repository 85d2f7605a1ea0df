//! emq-cli against real routers.
//!
//! - `interop_0313_*`: the real EventMQ 0.3.13 router (from the venv):
//!   status, workers, schedules and shutdown through its own admin
//!   commands, everything else exit 4. Runs now.
//! - `admin_*`: our router's control plane (ADMIN), through emq-cli.

use std::time::Duration;

use integration_tests::bins::{self, SENDER};
use integration_tests::cluster::{start_jobmanager, start_py_router, start_router};
use integration_tests::process::run;
use integration_tests::{admin, jobs, poll_until, python, Client, RunOutput, Spawn};
use serde_json::{json, Value};

const CLI: &str = "emq-cli";
/// Longest one emq-cli run may take (its own --timeout is 5 s per answer).
const RUN_LIMIT: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(20);

/// Run emq-cli against `admin_addr` with stdin not a terminal.
fn cli(admin_addr: &str, args: &[&str]) -> RunOutput {
    run(
        Spawn::new(CLI, bins::bin(CLI))
            .args(["--admin", admin_addr])
            .args(args),
        RUN_LIMIT,
    )
}

/// Run emq-cli and expect `code`.
fn cli_code(admin_addr: &str, args: &[&str], code: i32) -> RunOutput {
    let out = cli(admin_addr, args);
    assert_eq!(
        out.code(),
        Some(code),
        "emq-cli {}: {}",
        args.join(" "),
        out.describe()
    );
    out
}

/// Run `emq-cli --json ARGS`, expect exit 0, parse the answer.
fn cli_json(admin_addr: &str, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = cli_code(admin_addr, &all, 0);
    let v: Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("emq-cli --json {args:?}: not JSON ({e}): {}", out.stdout));
    assert_eq!(v["ok"], true, "{v}");
    v
}

fn msgids(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} list in {v}"))
        .iter()
        .map(|j| j["msgid"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Submit `n` jobs to `queue` and wait for their acknowledgements.
fn submit_acked(
    client: &mut Client,
    queue: &str,
    headers: &str,
    payloads: Vec<Vec<u8>>,
) -> Vec<String> {
    let ids: Vec<String> = payloads
        .into_iter()
        .map(|p| client.submit(queue, headers, p))
        .collect();
    assert!(
        client.wait_for(WAIT, |c| ids.iter().all(|i| c.acks.contains_key(i))),
        "not every job was acknowledged: acks {:?}, rejects {:?}",
        client.acks,
        client.rejects
    );
    ids
}

// ----- EventMQ 0.3.13 --------------------------------------------------------

#[test]
fn interop_0313_status_workers_schedules_unsupported_and_shutdown() {
    let Some(py) = python::venv("interop_0313_status_workers_schedules_unsupported_and_shutdown")
    else {
        return;
    };
    let (mut router, addrs) = start_py_router(&py);
    let _jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "2"]);
    let workers = admin::wait_idle_workers(&addrs.admin, 1, 2, WAIT)
        .expect("the 0.3.13 router lists our job manager");
    let worker_id = workers[0].id.clone();

    let out = cli_code(&addrs.admin, &["status"], 0);
    assert!(
        out.stdout.starts_with("router: EventMQ 0.3.13"),
        "{}",
        out.describe()
    );
    // --json: 0.3.13's STATUS object as it sent it (no "counters").
    let v: Value = serde_json::from_str(
        cli_code(&addrs.admin, &["--json", "status"], 0)
            .stdout
            .trim(),
    )
    .expect("JSON");
    assert!(
        v.get("waiting_messages_by_queue").is_some() && v.get("counters").is_none(),
        "{v}"
    );

    let out = cli_code(&addrs.admin, &["workers"], 0);
    assert!(out.stdout.starts_with("WORKER"), "{}", out.describe());
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with(&worker_id))
        .unwrap_or_else(|| panic!("no row for {worker_id}: {}", out.stdout));
    assert!(
        row.contains("default") && row.trim_end().ends_with('2'),
        "{row}"
    );
    let v: Value = serde_json::from_str(
        cli_code(&addrs.admin, &["--json", "workers"], 0)
            .stdout
            .trim(),
    )
    .expect("JSON");
    assert!(v["connected_workers"].get(&worker_id).is_some(), "{v}");

    let out = cli_code(&addrs.admin, &["schedules"], 0);
    assert!(
        out.stdout.contains("no scheduler connected"),
        "{}",
        out.describe()
    );

    // No control plane: exit 4 and a clear message, for every other op.
    for args in [
        &["cancel", "some-msgid"][..],
        &["queues"],
        &["jobs"],
        &["dead", "list"],
        &["pause", "q"],
    ] {
        let out = cli_code(&addrs.admin, args, 4);
        assert!(
            out.stderr.contains("EventMQ 0.3.13") && out.stderr.contains("does not support"),
            "{}",
            out.describe()
        );
    }

    // shutdown = DISCONNECT: acknowledged, and the router exits.
    let out = cli_code(&addrs.admin, &["shutdown"], 0);
    assert!(out.stdout.contains("shutting down"), "{}", out.describe());
    assert!(
        router.wait_exit(WAIT).is_some(),
        "the 0.3.13 router still runs after DISCONNECT; stderr:\n{}",
        router.tail(20)
    );
}

#[test]
fn no_router_is_exit_1() {
    let addr = integration_tests::ports::free_endpoint();
    let out = cli_code(&addr, &["--timeout", "0.5", "status"], 1);
    assert!(
        out.stderr.contains("no answer to STATUS"),
        "{}",
        out.describe()
    );
}

// ----- emq: the control plane ------------------------------------------------

#[test]
fn admin_status_queues_workers_drain() {
    let (_router, addrs) = start_router(&[]);
    let _jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "2"]);
    let w = admin::wait_idle_workers(&addrs.admin, 1, 2, WAIT).expect("worker ready");
    let worker = w[0].id.clone();

    let v = cli_json(&addrs.admin, &["status"]);
    let version = v["version"]
        .as_str()
        .unwrap_or_else(|| panic!("no version: {v}"));
    assert!(v["counters"].is_object(), "{v}");
    let out = cli_code(&addrs.admin, &["status"], 0);
    let first = out.stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("router:") && first.ends_with(&format!(" emq {version}")),
        "{}",
        out.describe()
    );
    assert!(out.stdout.contains("\naccepted:"), "{}", out.stdout);

    let v = cli_json(&addrs.admin, &["workers"]);
    let ids: Vec<&str> = v["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .filter_map(|w| w["identity"].as_str())
        .collect();
    assert_eq!(ids, [worker.as_str()], "{v}");

    // Work done shows in queues.
    let mut client = Client::connect(&addrs.frontend);
    let id = client.submit_reply("default", jobs::call("echo", json!({"n": 1})));
    client
        .wait_finished(std::slice::from_ref(&id), WAIT)
        .expect("echo job done");
    let v = cli_json(&addrs.admin, &["queues"]);
    let q = v["queues"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["name"] == "default"))
        .unwrap_or_else(|| panic!("no default queue: {v}"));
    assert_eq!(q["processed"], 1, "{q}");
    let out = cli_code(&addrs.admin, &["queues"], 0);
    assert!(out.stdout.starts_with("QUEUE"), "{}", out.describe());

    // drain / undrain a worker; an unknown worker is not-found (3).
    let out = cli_code(&addrs.admin, &["drain", &worker], 0);
    assert!(out.stdout.contains("draining"), "{}", out.describe());
    let v = cli_json(&addrs.admin, &["workers"]);
    assert_eq!(v["workers"][0]["draining"], true, "{v}");
    let out = cli_code(&addrs.admin, &["workers"], 0);
    assert!(
        out.stdout
            .lines()
            .any(|l| l.split_whitespace().any(|c| c == worker) && l.contains("yes")),
        "{}",
        out.stdout
    );
    cli_code(&addrs.admin, &["undrain", &worker], 0);
    assert_eq!(
        cli_json(&addrs.admin, &["workers"])["workers"][0]["draining"],
        false
    );
    let out = cli_code(&addrs.admin, &["drain", "no-such-worker"], 3);
    assert!(out.stderr.contains("not-found"), "{}", out.describe());
}

#[test]
fn admin_jobs_job_and_cancel() {
    // No job manager: the jobs stay queued.
    let (_router, addrs) = start_router(&[]);
    let mut client = Client::connect(&addrs.frontend);
    let ids = submit_acked(
        &mut client,
        "cli",
        "",
        (0..3)
            .map(|i| jobs::call("echo", json!({"marker": format!("cli-marker-{i}")})))
            .collect(),
    );

    let v = cli_json(&addrs.admin, &["jobs", "--queue", "cli"]);
    let mut listed = msgids(&v, "jobs");
    listed.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(listed, want, "{v}");
    assert!(
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["state"] == "queued"),
        "{v}"
    );
    // Newest first by default, oldest first with --oldest.
    assert_eq!(
        msgids(
            &cli_json(&addrs.admin, &["jobs", "-q", "cli", "--oldest"]),
            "jobs"
        )[0],
        ids[0]
    );
    assert_eq!(
        msgids(&cli_json(&addrs.admin, &["jobs", "-q", "cli"]), "jobs")[0],
        ids[2]
    );
    // Filters.
    let v = cli_json(&addrs.admin, &["jobs", "--contains", "cli-marker-1"]);
    assert_eq!(msgids(&v, "jobs"), [ids[1].clone()], "{v}");
    assert!(msgids(
        &cli_json(&addrs.admin, &["jobs", "-q", "cli", "--state", "done"]),
        "jobs"
    )
    .is_empty());
    // --all pages through (one job a page) to the same three.
    let v = cli_json(
        &addrs.admin,
        &["jobs", "-q", "cli", "--limit", "1", "--all"],
    );
    assert_eq!(msgids(&v, "jobs").len(), 3, "{v}");
    assert_eq!(v["next_cursor"], Value::Null, "{v}");
    let out = cli_code(&addrs.admin, &["jobs", "-q", "cli", "--limit", "1"], 0);
    assert!(
        out.stderr.contains("--all"),
        "a note says more pages follow: {}",
        out.describe()
    );

    // One job, human view and JSON.
    let out = cli_code(&addrs.admin, &["job", &ids[0]], 0);
    for want in ["msgid:", "state:", "queued", "cli-marker-0", "ago"] {
        assert!(out.stdout.contains(want), "{want}: {}", out.stdout);
    }
    let v = cli_json(&addrs.admin, &["job", &ids[0]]);
    assert_eq!(v["job"]["msgid"], ids[0].as_str());

    // cancel a queued job: cancelled at once; again: conflict (3).
    let out = cli_code(&addrs.admin, &["cancel", &ids[0]], 0);
    assert!(
        out.stdout.contains("cancelled (was queued)"),
        "{}",
        out.describe()
    );
    assert_eq!(
        cli_json(&addrs.admin, &["job", &ids[0]])["job"]["state"],
        "cancelled"
    );
    let out = cli_code(&addrs.admin, &["cancel", &ids[0]], 3);
    assert!(out.stderr.contains("conflict"), "{}", out.describe());
    // --json on a refusal: the answer on stdout too.
    let out = cli_code(&addrs.admin, &["--json", "job", "no-such-msgid"], 3);
    let v: Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    assert_eq!(v["error"]["kind"], "not-found", "{v}");
    assert!(out.stderr.contains("not-found"), "{}", out.describe());
}

#[test]
fn admin_pause_resume_purge() {
    let (_router, addrs) = start_router(&[]);
    let _jm = start_jobmanager(
        "emq-jobmanager",
        &addrs.backend,
        &["--concurrency", "1", "--queues", "10:pq"],
    );
    admin::wait_idle_workers(&addrs.admin, 1, 1, WAIT).expect("worker ready");

    let out = cli_code(&addrs.admin, &["pause", "pq"], 0);
    assert!(out.stdout.contains("queue pq paused"), "{}", out.describe());
    let mut client = Client::connect(&addrs.frontend);
    let id = client.submit_reply("pq", jobs::call("echo", json!("paused")));
    assert!(client.wait_for(WAIT, |c| c.acks.contains_key(&id)), "ack");
    // An unpaused queue with an idle worker dispatches in the same step
    // that acknowledges; paused, the job waits.
    let v = cli_json(&addrs.admin, &["job", &id]);
    assert_eq!(v["job"]["state"], "queued", "{v}");
    let v = cli_json(&addrs.admin, &["queues"]);
    let q = v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "pq")
        .cloned();
    assert_eq!(
        q.as_ref().map(|q| q["paused"].clone()),
        Some(json!(true)),
        "{v}"
    );

    let out = cli_code(&addrs.admin, &["resume", "pq"], 0);
    assert!(
        out.stdout.contains("queue pq resumed"),
        "{}",
        out.describe()
    );
    client
        .wait_finished(std::slice::from_ref(&id), WAIT)
        .expect("runs once resumed");

    // purge: refused without --yes when stdin is not a terminal (2), then
    // with --yes every waiting job goes.
    cli_code(&addrs.admin, &["pause", "pq"], 0);
    let waiting = submit_acked(
        &mut client,
        "pq",
        "",
        vec![jobs::call("noop", Value::Null); 2],
    );
    let out = cli_code(&addrs.admin, &["purge", "pq"], 2);
    assert!(out.stderr.contains("--yes"), "{}", out.describe());
    assert_eq!(
        cli_json(&addrs.admin, &["job", &waiting[0]])["job"]["state"],
        "queued"
    );
    let out = cli_code(&addrs.admin, &["purge", "pq", "--yes"], 0);
    assert!(
        out.stdout.contains("purged 2 waiting job(s) of queue pq"),
        "{}",
        out.describe()
    );
    for id in &waiting {
        assert_eq!(
            cli_json(&addrs.admin, &["job", id])["job"]["state"],
            "cancelled"
        );
    }
}

#[test]
fn admin_dead_letters_list_retry_discard() {
    let (_router, addrs) =
        start_router(&["--retry-backoff", "0.05", "--retry-backoff-max", "0.05"]);
    let _jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "2"]);
    admin::wait_idle_workers(&addrs.admin, 1, 2, WAIT).expect("worker ready");
    let mut client = Client::connect(&addrs.frontend);
    let id = client.submit(
        "default",
        "retry-count:1,reply-requested",
        jobs::shell(&["sh", "-c", "echo dead-marker >&2; exit 3"]),
    );
    client
        .wait_finished(std::slice::from_ref(&id), WAIT)
        .expect("the job fails for good");

    let dead_ids = |addr: &str| msgids(&cli_json(addr, &["dead", "list"]), "dead_letters");
    assert_eq!(dead_ids(&addrs.admin), [id.as_str()]);
    let out = cli_code(&addrs.admin, &["dead", "list", "--queue", "default"], 0);
    assert!(
        out.stdout.starts_with("MSGID") && out.stdout.contains(&id),
        "{}",
        out.describe()
    );
    assert!(msgids(
        &cli_json(&addrs.admin, &["dead", "list", "--queue", "other"]),
        "dead_letters"
    )
    .is_empty());
    let v = cli_json(&addrs.admin, &["job", &id]);
    assert_eq!(v["job"]["state"], "dead-lettered", "{v}");

    // retry: back on its queue, fails twice more, dead again.
    let out = cli_code(&addrs.admin, &["dead", "retry", &id], 0);
    assert!(
        out.stdout.contains("retried 1 dead letter(s)"),
        "{}",
        out.describe()
    );
    let again = poll_until(WAIT, Duration::from_millis(100), || {
        let v = cli_json(&addrs.admin, &["job", &id]);
        (v["job"]["state"] == "dead-lettered").then_some(v)
    });
    assert!(
        again.is_some(),
        "the retried job did not end dead-lettered again"
    );

    // discard --all: needs --yes without a terminal; then the list is empty.
    let out = cli_code(&addrs.admin, &["dead", "discard", "--all"], 2);
    assert!(out.stderr.contains("--yes"), "{}", out.describe());
    let out = cli_code(
        &addrs.admin,
        &[
            "dead",
            "discard",
            "--all",
            "--contains",
            "dead-marker",
            "--yes",
        ],
        0,
    );
    assert!(
        out.stdout.contains("discarded 1 dead letter(s)"),
        "{}",
        out.describe()
    );
    assert!(dead_ids(&addrs.admin).is_empty());
    let out = cli_code(&addrs.admin, &["dead", "retry", &id], 3);
    assert!(out.stderr.contains("not-found"), "{}", out.describe());
}

#[test]
fn admin_schedules_and_unschedule() {
    let (_router, addrs) = start_router(&[]);
    let out = run(
        Spawn::new("emq-sender", bins::bin(SENDER)).args([
            "--broker",
            &addrs.frontend,
            "--schedule-interval",
            "3600",
            "--nohaste",
            "--queue",
            "cron-q",
            "--call",
            "noop",
        ]),
        RUN_LIMIT,
    );
    assert_eq!(out.code(), Some(0), "emq-sender: {}", out.describe());

    let v = cli_json(&addrs.admin, &["schedules"]);
    let list = v["schedules"].as_array().expect("schedules");
    assert_eq!(list.len(), 1, "{v}");
    assert_eq!(list[0]["queue"], "cron-q");
    let sid = list[0]["id"].as_str().expect("an id").to_string();
    let out = cli_code(&addrs.admin, &["schedules"], 0);
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with(&sid))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(row.contains("every 1h00m") && row.contains("in "), "{row}");

    let out = cli_code(&addrs.admin, &["unschedule", &sid], 0);
    assert!(
        out.stdout.contains(&format!("removed schedule {sid}")),
        "{}",
        out.describe()
    );
    assert!(cli_json(&addrs.admin, &["schedules"])["schedules"]
        .as_array()
        .unwrap()
        .is_empty());
    let out = cli_code(&addrs.admin, &["unschedule", &sid], 3);
    assert!(out.stderr.contains("not-found"), "{}", out.describe());
}

/// `emq-sender --unschedule` of a schedule the router does not hold (a
/// typo) gets `REJECT not-found` and exits 3; the right one is removed
/// (exit 0), and removing it again is not-found too (issue 26 item 9).
#[test]
fn unschedule_of_no_such_schedule_is_refused_not_found() {
    let (_router, addrs) = start_router(&[]);
    let sender = |extra: &[&str], queue: &str, code: i32| {
        let out = run(
            Spawn::new("emq-sender", bins::bin(SENDER))
                .args(["--broker", &addrs.frontend, "--queue", queue])
                .args(extra)
                .args(["--call", "noop"]),
            RUN_LIMIT,
        );
        assert_eq!(
            out.code(),
            Some(code),
            "emq-sender {extra:?}: {}",
            out.describe()
        );
        out
    };
    sender(&["--schedule-interval", "3600", "--nohaste"], "cron-q", 0);
    let out = sender(&["--unschedule"], "cron-typo", 3);
    assert!(out.stderr.contains("not-found"), "{}", out.describe());
    assert_eq!(
        cli_json(&addrs.admin, &["schedules"])["schedules"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    sender(&["--unschedule"], "cron-q", 0);
    assert!(cli_json(&addrs.admin, &["schedules"])["schedules"]
        .as_array()
        .unwrap()
        .is_empty());
    sender(&["--unschedule"], "cron-q", 3);
}

#[test]
fn admin_shutdown_stops_the_router() {
    let (mut router, addrs) = start_router(&[]);
    let out = cli_code(&addrs.admin, &["shutdown"], 0);
    assert!(out.stdout.contains("shutting down"), "{}", out.describe());
    let status = router.wait_exit(WAIT).unwrap_or_else(|| {
        panic!(
            "the router still runs after shutdown; stderr:\n{}",
            router.tail(20)
        )
    });
    assert_eq!(status.code(), Some(0), "{}", router.tail(20));
}
