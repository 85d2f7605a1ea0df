//! The control plane end to end, with real routers, job managers and
//! `emq-cli`: what issue 13 names beyond the single ops (those are in
//! `cli.rs`).
//!
//! - cancel of a running Python job kills its worker process, and the
//!   client gets a `cancelled` RESULT;
//! - a paused queue dispatches nothing, across a `kill -9` and restart of
//!   the router, until it is resumed;
//! - a dead letter retried runs again;
//! - a dead letter keeps its last error (and the job's stderr in it)
//!   across a `kill -9` and restart of the router;
//! - a delayed job runs no earlier than due, across a restart;
//! - a job for a queue nobody serves: sent to `default` and counted under
//!   its queue (0.3.13's rule, the default), or held in its queue until a
//!   job manager for it connects (`--unserved-queues hold`).
//!
//! "Nothing dispatched" is shown against an event, not a sleep: a job on
//! another queue, served by the same idle job manager, completes first.

use std::path::Path;
use std::time::{Duration, Instant};

use integration_tests::bins::{self, SENDER};
use integration_tests::client::Client;
use integration_tests::cluster::{start_jobmanager, start_router_on, Addrs};
use integration_tests::jobs::{self, count_lines, shell};
use integration_tests::process::{pid_alive, run, scratch_dir, wait_pids_gone};
use integration_tests::{poll_until, Spawn};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

fn cli(admin: &str, args: &[&str]) -> Value {
    let out = run(
        Spawn::new("emq-cli", bins::bin("emq-cli"))
            .args(["--admin", admin, "--json"])
            .args(args),
        WAIT,
    );
    assert_eq!(out.code(), Some(0), "emq-cli {args:?}: {}", out.describe());
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

fn journal_flags(dir: &Path) -> Vec<String> {
    vec![
        "--journal".into(),
        dir.join("router.journal").display().to_string(),
        "--retry-backoff".into(),
        "0.1".into(),
    ]
}

fn start(addrs: &Addrs, flags: &[String]) -> integration_tests::process::Proc {
    let f: Vec<&str> = flags.iter().map(String::as_str).collect();
    start_router_on(addrs, &f).expect("router starts")
}

fn submit(c: &mut Client, queue: &str, headers: &str, msg: Vec<u8>) -> String {
    let id = c.submit(queue, headers, msg);
    assert!(
        c.wait_for(WAIT, |c| c.acks.contains_key(&id)),
        "{id} not acknowledged: {:?}",
        c.rejects
    );
    id
}

/// Wait until `n` job managers are registered: a job for a queue no
/// connected worker serves is routed through `default`.
fn wait_registered(admin: &str, n: usize) {
    let registered = poll_until(WAIT, Duration::from_millis(100), || {
        let v = cli(admin, &["workers"]);
        (v["workers"].as_array().is_some_and(|w| w.len() == n)).then_some(())
    });
    assert!(registered.is_some(), "{n} job manager(s) registered");
}

#[test]
fn cancel_of_a_running_python_job_kills_its_process() {
    let dir = scratch_dir("cancel-python");
    let pids = dir.join("pids.txt");
    let addrs = Addrs::fresh();
    let flags = journal_flags(&dir);
    let mut router = start(&addrs, &flags);
    let mut jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "1"]);
    let mut c = Client::connect(&addrs.frontend);
    let id = submit(
        &mut c,
        "default",
        "reply-requested",
        jobs::run(
            "emq_test_jobs",
            "pid_then_sleep",
            json!([pids.display().to_string(), 60]),
            json!({}),
        ),
    );
    let pid: i32 = poll_until(WAIT, Duration::from_millis(50), || {
        std::fs::read_to_string(&pids)
            .ok()
            .and_then(|t| t.trim().parse().ok())
    })
    .expect("the job wrote its worker's pid");
    assert!(pid_alive(pid));
    let v = cli(&addrs.admin, &["cancel", &id]);
    assert_eq!(v["state"], "cancelling", "{v}");
    assert!(
        c.wait_for(WAIT, |c| c.results.contains_key(&id)),
        "no RESULT for the cancelled job"
    );
    let r = c.result(&id).unwrap().json();
    assert_eq!(r["error"]["kind"], "cancelled", "{r}");
    assert!(
        wait_pids_gone(&[pid], WAIT),
        "the Python worker {pid} still runs"
    );
    let v = cli(&addrs.admin, &["job", &id]);
    assert_eq!(v["job"]["state"], "cancelled", "{v}");
    // The slot works again, on a fresh worker process.
    let next = submit(
        &mut c,
        "default",
        "reply-requested",
        jobs::run("emq_test_jobs", "add", json!([2, 3]), json!({})),
    );
    assert!(c.wait_for(WAIT, |c| c.results.contains_key(&next)));
    assert_eq!(c.result(&next).unwrap().json(), json!({"value": 5}));
    jm.stop();
    router.stop();
}

#[test]
fn a_paused_queue_dispatches_nothing_across_a_router_restart_until_resumed() {
    let dir = scratch_dir("pause-restart");
    let addrs = Addrs::fresh();
    let flags = journal_flags(&dir);
    let mut router = start(&addrs, &flags);
    let mut jm = start_jobmanager(
        "emq-jobmanager",
        &addrs.backend,
        &["--concurrency", "2", "--queues", "10:held,10:free"],
    );
    let mut c = Client::connect(&addrs.frontend);
    wait_registered(&addrs.admin, 1);
    let v = cli(&addrs.admin, &["pause", "held"]);
    assert_eq!(v["paused"], true);
    let held = submit(
        &mut c,
        "held",
        "reply-requested",
        jobs::call("echo", json!("held")),
    );
    // The same idle job manager serves `free`: once its job is done, a
    // dispatch of `held` would have happened.
    let free = submit(
        &mut c,
        "free",
        "reply-requested",
        jobs::call("echo", json!(1)),
    );
    assert!(c.wait_for(WAIT, |c| c.results.contains_key(&free)));
    assert!(!c.results.contains_key(&held));
    let v = cli(&addrs.admin, &["job", &held]);
    assert_eq!(v["job"]["state"], "queued", "{v}");
    assert_eq!(v["job"]["route"], "held", "{v}");
    // kill -9 and restart on the same journal: still paused.
    router.kill9();
    let mut router = start(&addrs, &flags);
    // The job manager registers again (after it finds the router silent).
    wait_registered(&addrs.admin, 1);
    let free2 = submit(
        &mut c,
        "free",
        "reply-requested",
        jobs::call("echo", json!(2)),
    );
    assert!(c.wait_for(WAIT, |c| c.results.contains_key(&free2)));
    let q = cli(&addrs.admin, &["queues"]);
    let held_q = q["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "held")
        .cloned()
        .unwrap_or_else(|| panic!("no queue held: {q}"));
    assert_eq!(held_q["paused"], true, "{q}");
    assert_eq!(held_q["depth"], 1, "{q}");
    // Resumed: it runs. (Its client identity is the same DEALER, so the
    // RESULT still reaches it.)
    cli(&addrs.admin, &["resume", "held"]);
    let done = poll_until(WAIT, Duration::from_millis(100), || {
        let v = cli(&addrs.admin, &["job", &held]);
        (v["job"]["state"] == "done").then_some(v)
    });
    assert!(done.is_some(), "the resumed job ran");
    jm.stop();
    router.stop();
}

#[test]
fn a_retried_dead_letter_runs_again() {
    let dir = scratch_dir("dead-retry");
    let flag = dir.join("now-it-works");
    let out = dir.join("ran.txt");
    let addrs = Addrs::fresh();
    let flags = journal_flags(&dir);
    let mut router = start(&addrs, &flags);
    let mut jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "1"]);
    let mut c = Client::connect(&addrs.frontend);
    let script = "test -f \"$1\" || exit 1; echo ran >> \"$2\"";
    let id = submit(
        &mut c,
        "default",
        "reply-requested,retry-count:1",
        shell(&[
            "sh",
            "-c",
            script,
            "sh",
            &flag.display().to_string(),
            &out.display().to_string(),
        ]),
    );
    assert!(c.wait_for(WAIT, |c| c.results.contains_key(&id)));
    assert_eq!(c.result(&id).unwrap().json()["error"]["attempts"], 2);
    let v = cli(&addrs.admin, &["dead", "list"]);
    assert_eq!(v["count"], 1, "{v}");
    std::fs::write(&flag, "").unwrap();
    let v = cli(&addrs.admin, &["dead", "retry", &id]);
    assert_eq!(v["retried"], 1, "{v}");
    let ran = poll_until(WAIT, Duration::from_millis(100), || {
        (count_lines(&out).get("ran").copied() == Some(1)).then_some(())
    });
    assert!(ran.is_some(), "the retried job ran");
    assert_eq!(cli(&addrs.admin, &["dead", "list"])["count"], 0);
    jm.stop();
    router.stop();
}

#[test]
fn a_dead_letter_keeps_its_error_across_a_restart() {
    let dir = scratch_dir("dead-error");
    let addrs = Addrs::fresh();
    let flags = journal_flags(&dir);
    let mut router = start(&addrs, &flags);
    let mut jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "1"]);
    let mut c = Client::connect(&addrs.frontend);
    let id = submit(
        &mut c,
        "default",
        "reply-requested,retry-count:1",
        shell(&["sh", "-c", "echo why-it-died >&2; exit 3"]),
    );
    assert!(c.wait_for(WAIT, |c| c.results.contains_key(&id)));
    let error_of = |admin: &str| {
        let v = cli(admin, &["job", &id]);
        assert_eq!(v["job"]["state"], "dead-lettered", "{v}");
        for key in ["error", "last_error"] {
            assert!(
                v["job"][key].to_string().contains("why-it-died"),
                "{key} names the job's stderr: {v}"
            );
        }
        let d = cli(admin, &["dead", "list"]);
        assert_eq!(d["dead_letters"][0]["msgid"], id.as_str(), "{d}");
        assert!(
            d["dead_letters"][0]["error"]
                .to_string()
                .contains("why-it-died"),
            "{d}"
        );
        v["job"]["error"].clone()
    };
    let before = error_of(&addrs.admin);
    router.kill9();
    let mut router = start(&addrs, &flags);
    assert_eq!(
        error_of(&addrs.admin),
        before,
        "the same error after a restart"
    );
    let out = run(
        Spawn::new("emq-cli", bins::bin("emq-cli"))
            .args(["--admin", &addrs.admin])
            .args(["dead", "list"]),
        WAIT,
    );
    assert!(
        out.stdout.contains(&id) && out.stdout.contains("exited with status 3"),
        "the table shows the error's message (`-` before): {}",
        out.describe()
    );
    jm.stop();
    router.stop();
}

#[test]
fn a_delayed_job_runs_no_earlier_than_due_across_a_restart() {
    let dir = scratch_dir("delay-restart");
    let out = dir.join("ran.txt");
    let addrs = Addrs::fresh();
    let flags = journal_flags(&dir);
    let mut router = start(&addrs, &flags);
    let mut c = Client::connect(&addrs.frontend);
    let t0 = Instant::now();
    let id = submit(
        &mut c,
        "default",
        "delay:6",
        shell(&[
            "sh",
            "-c",
            "echo ran >> \"$1\"",
            "sh",
            &out.display().to_string(),
        ]),
    );
    // 6 s, not 3: emq-cli's answer must come back before the delay ends,
    // also on a loaded 2-core machine.
    let v = cli(&addrs.admin, &["job", &id]);
    assert!(
        t0.elapsed() < Duration::from_secs(6),
        "emq-cli took {:?}",
        t0.elapsed()
    );
    assert_eq!(v["job"]["state"], "delayed", "{v}");
    router.kill9();
    let mut router = start(&addrs, &flags);
    let mut jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "1"]);
    let ran = poll_until(WAIT, Duration::from_millis(20), || {
        count_lines(&out).get("ran").copied().map(|_| t0.elapsed())
    })
    .expect("the delayed job ran after the restart");
    assert!(
        ran >= Duration::from_secs(6),
        "ran {ran:?} after its acceptance, before its delay of 6 s"
    );
    jm.stop();
    router.stop();
}

/// A router (no journal, `--unserved-queues unserved`) with one job
/// manager, serving only `default`, registered.
fn default_only(
    unserved: &str,
) -> (
    Addrs,
    integration_tests::process::Proc,
    integration_tests::process::Proc,
) {
    let addrs = Addrs::fresh();
    let flags = ["--journal", "none", "--unserved-queues", unserved].map(String::from);
    let router = start(&addrs, &flags);
    let jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--queues", "default"]);
    wait_registered(&addrs.admin, 1);
    (addrs, router, jm)
}

#[test]
fn a_job_for_an_unserved_queue_is_visible_and_held_with_hold() {
    let dir = scratch_dir("unserved");
    let out = dir.join("ran.txt");
    let job = |tag: &str| jobs::shell_record(&out, tag, "0");
    let ran = |tag: &str| count_lines(&out).keys().any(|k| k.starts_with(tag));
    let queue_of = |admin: &str, name: &str| {
        let v = cli(admin, &["queues"]);
        v["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("queue {name} not listed: {v}"))
    };
    // 0.3.13's rule (the default): run by the default job manager, counted
    // under its own queue, logged.
    let (addrs, mut router, mut jm) = default_only("default");
    let mut c = Client::connect(&addrs.frontend);
    submit(&mut c, "mail", "", job("to-default"));
    let done = poll_until(WAIT, Duration::from_millis(50), || {
        ran("to-default").then_some(())
    });
    assert!(done.is_some(), "run through default");
    assert_eq!(queue_of(&addrs.admin, "mail")["routed_to_default"], 1);
    router
        .wait_for_log_line("no connected job manager serves it", WAIT)
        .expect("logged");
    jm.stop();
    router.stop();

    // --unserved-queues hold: waits in its own queue while only a default
    // job manager is there, runs once a "mail" job manager connects.
    let (addrs, mut router, mut jm) = default_only("hold");
    let mut c = Client::connect(&addrs.frontend);
    submit(&mut c, "mail", "", job("held"));
    // An event, not a sleep: a default job submitted after it runs first.
    submit(&mut c, "default", "", job("after"));
    let done = poll_until(WAIT, Duration::from_millis(50), || {
        ran("after").then_some(())
    });
    assert!(done.is_some());
    assert!(!ran("held"), "the held job went to the default job manager");
    let q = queue_of(&addrs.admin, "mail");
    assert_eq!(
        (q["depth"].as_u64(), q["workers"].as_u64()),
        (Some(1), Some(0)),
        "{q}"
    );
    let mut mail = start_jobmanager("emq-jobmanager", &addrs.backend, &["--queues", "mail"]);
    let done = poll_until(WAIT, Duration::from_millis(50), || {
        ran("held").then_some(())
    });
    assert!(
        done.is_some(),
        "the held job runs once a mail job manager connects"
    );
    mail.stop();
    jm.stop();
    router.stop();
}

/// Issue 26 item 5, the submitter told: emq-sender (which sends the
/// `notices` header) prints the router's NOTICE on stderr, one line naming
/// the job and the queue, for a job sent to `default` (which runs, exit 0)
/// and, with `--unserved-queues hold`, for a job held in its queue.
#[test]
fn emq_sender_is_told_when_its_job_goes_to_default_or_is_held() {
    let sender = |frontend: &str, wait: bool| {
        let mut args = vec!["--broker", frontend, "--timeout", "30", "-q", "nobody"];
        if wait {
            args.push("--wait");
        }
        args.extend(["--call", "echo", "--args", "7"]);
        run(
            Spawn::new("emq-sender", bins::bin(SENDER)).args(args),
            Duration::from_secs(60),
        )
    };
    let notice_line = |stderr: &str| {
        stderr
            .lines()
            .find(|l| l.starts_with("emq-sender: job ") && l.contains("\"nobody\""))
            .map(str::to_string)
    };
    let (addrs, mut router, mut jm) = default_only("default");
    let out = sender(&addrs.frontend, true);
    assert_eq!(out.code(), Some(0), "the job runs: {}", out.describe());
    assert!(out.stdout.contains('7'), "{}", out.describe());
    let line = notice_line(&out.stderr).unwrap_or_else(|| panic!("no notice: {}", out.describe()));
    assert!(
        line.contains("sent it to \"default\"") && line.contains("--unserved-queues hold"),
        "{line}"
    );
    jm.stop();
    router.stop();

    let (addrs, mut router, mut jm) = default_only("hold");
    let out = sender(&addrs.frontend, false);
    assert_eq!(out.code(), Some(0), "accepted: {}", out.describe());
    let line = notice_line(&out.stderr).unwrap_or_else(|| panic!("no notice: {}", out.describe()));
    assert!(line.contains("holds it there"), "{line}");
    jm.stop();
    router.stop();
}

/// Issue 32: a finished job's time is told apart — how long it waited
/// (accepted → started) and how long it ran (started → finished) — in
/// `emq-cli job`, `emq-cli jobs` (WAITED and RAN columns) and the admin
/// JSON, from the start time the router keeps with the finished job
/// (journaled: the same after a `kill -9` and restart).
#[test]
fn a_finished_job_shows_how_long_it_waited_and_ran_apart() {
    let dir = scratch_dir("waited-ran");
    let addrs = Addrs::fresh();
    let flags = journal_flags(&dir);
    let mut router = start(&addrs, &flags);
    let mut c = Client::connect(&addrs.frontend);
    // No job manager yet: the job waits.
    let id = submit(
        &mut c,
        "default",
        "reply-requested",
        shell(&["sh", "-c", "sleep 0.7"]),
    );
    let queued_at = Instant::now();
    // It waits at least 0.5 s: seen queued until then.
    let waited = poll_until(WAIT, Duration::from_millis(100), || {
        let v = cli(&addrs.admin, &["job", &id]);
        assert_eq!(v["job"]["state"], "queued", "{v}");
        (queued_at.elapsed() >= Duration::from_millis(500)).then_some(())
    });
    assert!(waited.is_some());
    let mut jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "1"]);
    assert!(c.wait_for(WAIT, |c| c.results.contains_key(&id)));
    let times = |admin: &str| {
        let v = cli(admin, &["job", &id]);
        let j = &v["job"];
        assert_eq!(j["state"], "done", "{v}");
        let n = |k: &str| j[k].as_u64().unwrap_or_else(|| panic!("{k}: {v}"));
        assert!(n("waited_ms") >= 500, "waited at least 0.5 s: {v}");
        assert!(n("ran_ms") >= 700, "ran the 0.7 s sleep: {v}");
        assert!(
            n("ran_ms") < n("finished_at_ms") - n("accepted_at_ms"),
            "ran is not the time since acceptance: {v}"
        );
        assert_eq!(n("started_at_ms") - n("accepted_at_ms"), n("waited_ms"));
        assert_eq!(n("finished_at_ms") - n("started_at_ms"), n("ran_ms"));
        (n("started_at_ms"), n("waited_ms"), n("ran_ms"))
    };
    let before = times(&addrs.admin);
    // The jobs list has them too.
    let listed = cli(&addrs.admin, &["jobs", "--state", "done"]);
    assert_eq!(listed["jobs"][0]["ran_ms"], before.2, "{listed}");
    router.kill9();
    let mut router = start(&addrs, &flags);
    assert_eq!(times(&addrs.admin), before, "the same after a restart");
    // The text views.
    let text = |args: &[&str]| {
        let out = run(
            Spawn::new("emq-cli", bins::bin("emq-cli"))
                .args(["--admin", &addrs.admin])
                .args(args),
            WAIT,
        );
        assert_eq!(out.code(), Some(0), "{}", out.describe());
        out.stdout
    };
    let age = |ms: u64| {
        // `emq-cli`'s own short form for under a minute.
        if ms < 1000 {
            format!("{ms}ms")
        } else {
            format!("{}s", ms / 1000)
        }
    };
    let view = text(&["job", &id]);
    for line in [
        format!("waited:   {}\n", age(before.1)),
        format!("ran:      {}\n", age(before.2)),
    ] {
        assert!(view.contains(&line), "{line:?} in:\n{view}");
    }
    assert!(view.contains("started: "), "{view}");
    let table = text(&["jobs", "--state", "done"]);
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("WAITED") && header.contains("RAN"),
        "{table}"
    );
    let row = table.lines().find(|l| l.contains(&id)).expect("its row");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert!(
        cells.contains(&age(before.1).as_str()) && cells.contains(&age(before.2).as_str()),
        "waited {} and ran {} in {row:?}",
        age(before.1),
        age(before.2)
    );
    jm.stop();
    router.stop();
}
