//! Batches with real processes (issue 30, Sidekiq Pro's model): a batch
//! opened with `on_success` and `on_complete` Python callbacks, 40 shell
//! jobs added with `batch:ID`, closed, on a router with a SQLite journal
//! that is killed (-9) while the jobs run. The restarted router counts
//! the restored jobs again and finishes the batch: every job ran (once,
//! or twice when its REPLY was lost with the router), each callback ran
//! exactly once with the batch's final counts, a job added after close is
//! refused `batch-closed`, the finished batch is still shown after one
//! more kill -9, and `emq-cli batch ID` shows the bar. And the
//! dashboard (headless Chromium) shows a batch's bar with its counts, and
//! a job's page links to its batch.

use std::collections::BTreeMap;
use std::time::Duration;

use emqp_proto::RejectReason;
use integration_tests::bins::target_dir;
use integration_tests::browser::{find_chromium, Browser};
use integration_tests::client::Client;
use integration_tests::cluster::{start_jobmanager, start_router_on};
use integration_tests::ports::free_port;
use integration_tests::process::{run, scratch_dir};
use integration_tests::{bins, in_ci, jobs, poll_until, Addrs, Spawn};
use serde_json::{json, Value};

const JOBS: usize = 40;
const SLOTS: usize = 4;

fn batch_view(addrs: &Addrs, id: &str) -> Option<Value> {
    integration_tests::admin::batch(&addrs.admin, id)
}

fn job_state(addrs: &Addrs, msgid: &str) -> Option<String> {
    integration_tests::admin::job_state(&addrs.admin, msgid)
}

fn callback(path: &std::path::Path) -> Value {
    json!({ "msg": ["run", {
        "path": "emq_test_jobs", "callable": "batch_done",
        "args": [path.display().to_string()], "kwargs": {},
    }]})
}

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn a_batch_of_40_survives_a_router_kill9_each_callback_once() {
    let dir = scratch_dir("batches");
    let journal = dir.join("router.journal").display().to_string();
    let runs = dir.join("runs.log");
    let succ = dir.join("on-success.jsonl");
    let comp = dir.join("on-complete.jsonl");
    let addrs = Addrs::fresh();
    let mut router = start_router_on(&addrs, &["--journal", &journal]).expect("router starts");
    let mut client = Client::connect(&addrs.frontend);
    let id = "it-batch-1";
    client.batch_op(
        id,
        json!({ "op": "open", "on_success": callback(&succ), "on_complete": callback(&comp) }),
    );
    let runs_s = runs.display().to_string();
    let mut ids = Vec::new();
    for i in 0..JOBS {
        let job = jobs::shell(&[
            "sh",
            "-c",
            "echo $0 >> \"$1\"; sleep 0.3",
            &i.to_string(),
            &runs_s,
        ]);
        ids.push(client.submit("default", &format!("batch:{id}"), job));
    }
    assert!(
        client.wait_for(Duration::from_secs(30), |c| ids
            .iter()
            .all(|m| c.acks.contains_key(m))),
        "every job acknowledged: {:?}",
        client.rejects
    );
    client.batch_op(id, json!({ "op": "close" }));
    // Closed: a job naming the batch is refused.
    let late = client.submit("default", &format!("batch:{id}"), jobs::shell(&["true"]));
    assert!(client.wait_for(Duration::from_secs(20), |c| c.rejects.contains_key(&late)));
    assert_eq!(client.rejects[&late][0].reason, RejectReason::BatchClosed);
    let v = batch_view(&addrs, id).expect("the batch's view");
    assert_eq!(
        (v["state"].clone(), v["total"].clone()),
        (json!("closed"), json!(JOBS))
    );

    let slots = SLOTS.to_string();
    let mut jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["-J", &slots]);
    let done_before = poll_until(Duration::from_secs(60), Duration::from_millis(20), || {
        let n = batch_view(&addrs, id)?["succeeded"].as_u64()?;
        (n as usize >= JOBS / 4).then_some(n)
    })
    .expect("a quarter of the batch done");
    router.kill9();
    drop(router);
    // Jobs that had started by the kill (each writes its line first).
    let started_before = std::fs::read_to_string(&runs)
        .map(|t| t.lines().count())
        .unwrap_or(0);
    let mut router = start_router_on(&addrs, &["--journal", &journal]).expect("router restarts");
    let v = batch_view(&addrs, id).expect("the restarted router holds the batch");
    // Not compared with `done_before`: the view counts a job as it reads
    // its REPLY, before its end is committed; such a job is restored
    // unfinished and runs again (bounded below).
    let restored_done = v["succeeded"].as_u64().unwrap_or(0) as usize;
    assert_eq!(
        v["total"],
        json!(JOBS),
        "the restored jobs counted again: {v}"
    );
    assert_eq!(v["state"], "closed", "{v}");

    let v = poll_until(Duration::from_secs(90), Duration::from_millis(50), || {
        let v = batch_view(&addrs, id)?;
        (v["state"] == "finished").then_some(v)
    })
    .expect("the batch finished");
    assert_eq!(
        (
            v["succeeded"].clone(),
            v["failed"].clone(),
            v["pending"].clone()
        ),
        (json!(JOBS), json!(0), json!(0)),
        "{v}"
    );
    // Both callbacks finished: their files hold what ran.
    for cb in ["on-success", "on-complete"] {
        let m = format!("{id}/{cb}");
        poll_until(Duration::from_secs(60), Duration::from_millis(50), || {
            (job_state(&addrs, &m)? == "done").then_some(())
        })
        .unwrap_or_else(|| panic!("{m} done"));
    }
    for (path, event) in [(&succ, "success"), (&comp, "complete")] {
        let got = lines(path);
        assert_eq!(got.len(), 1, "{event} ran once: {got:?}");
        assert_eq!(
            got[0],
            json!({"batch": id, "event": event, "total": JOBS, "succeeded": JOBS,
                   "failed": 0, "failed_ids": []})
        );
    }

    // Each job ran at least once; twice only when it may have: started
    // before the kill without its end committed, or on its way to a slot.
    let text = std::fs::read_to_string(&runs).expect("runs log");
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for l in text.lines() {
        *counts
            .entry(l.trim().parse().expect("a job number"))
            .or_default() += 1;
    }
    assert_eq!(counts.len(), JOBS, "every job ran: {counts:?}");
    let twice = counts.values().filter(|n| **n > 1).count();
    let may_run_again = started_before.saturating_sub(restored_done) + SLOTS;
    assert!(
        twice <= may_run_again && counts.values().all(|n| *n <= 2),
        "only jobs whose end the journal did not hold run again (at most \
         {may_run_again}: {started_before} started before the kill, {restored_done} restored \
         done, {SLOTS} slots): {counts:?}"
    );
    // Killed once more: the finished batch is still shown, callbacks not
    // run again.
    router.kill9();
    drop(router);
    let _router = start_router_on(&addrs, &["--journal", &journal]).expect("router restarts");
    let v = batch_view(&addrs, id).expect("the finished batch survives a restart");
    assert_eq!(
        (v["state"].clone(), v["succeeded"].clone()),
        (json!("finished"), json!(JOBS)),
        "{v}"
    );
    // A job run after the restart: the job manager is back, and the
    // callbacks did not come again meanwhile.
    let mut probe = Client::connect(&addrs.frontend);
    let p = probe.submit("default", "reply-requested", jobs::shell(&["true"]));
    assert!(probe.wait_for(Duration::from_secs(60), |c| c.finished(&p)));
    for path in [&succ, &comp] {
        assert_eq!(lines(path).len(), 1, "{path:?}");
    }
    let out = run(
        Spawn::new("emq-cli", bins::bin("emq-cli")).args(["--admin", &addrs.admin, "batch", id]),
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    assert!(
        out.stdout.starts_with(&format!("batch {id}: finished")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains(&format!("{JOBS} of {JOBS} ended: {JOBS} succeeded")),
        "{}",
        out.stdout
    );
    println!(
        "batch of {JOBS} across a router kill -9 (SQLite journal): {done_before} succeeded \
         before the kill, {restored_done} after restore, {twice} run twice (in flight at the \
         kill), on_success and on_complete once each"
    );
    jm.stop();
}

#[test]
fn the_dashboard_shows_a_batch_bar_and_a_job_links_to_its_batch() {
    let chromium = match find_chromium() {
        Some(p) => p,
        None if in_ci() => panic!("chromium is not installed and CI=true"),
        None => {
            eprintln!("SKIPPED: no chromium on PATH (apt-get install chromium)");
            return;
        }
    };
    let addrs = Addrs::fresh();
    let http = format!("127.0.0.1:{}", free_port());
    let _router = start_router_on(&addrs, &["--http", &http, "--unserved-queues", "hold"])
        .expect("router starts");
    let mut jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["-J", "2"]);
    let mut client = Client::connect(&addrs.frontend);
    let id = "dash-batch";
    client.batch_op(id, json!({ "op": "open", "description": "nightly import" }));
    let header = format!("batch:{id}");
    let ok1 = client.submit("default", &header, jobs::shell(&["true"]));
    client.submit("default", &header, jobs::shell(&["true"]));
    client.submit("default", &header, jobs::shell(&["false"]));
    // Nobody serves this queue: it stays pending.
    client.submit("nobody", &header, jobs::shell(&["true"]));
    let v = poll_until(Duration::from_secs(60), Duration::from_millis(50), || {
        let v = batch_view(&addrs, id)?;
        (v["succeeded"] == 2 && v["failed"] == 1).then_some(v)
    })
    .expect("three of the four jobs ended");
    assert_eq!(
        (v["pending"].clone(), v["total"].clone()),
        (json!(1), json!(4))
    );

    let mut b = Browser::launch(&chromium).expect("chromium starts");
    b.goto(&format!("http://{http}/#/job/{ok1}")).unwrap();
    b.wait_for(
        "the job's batch link",
        "document.querySelector('#job-batch')",
        Duration::from_secs(30),
    )
    .unwrap();
    b.click("#job-batch").unwrap();
    let counts = b
        .wait_for(
            "the batch's counts",
            "(document.querySelector('#batch-counts') || {}).textContent",
            Duration::from_secs(30),
        )
        .unwrap();
    assert_eq!(
        counts, "3 of 4 ended · 2 succeeded · 1 failed · 1 pending",
        "{counts}"
    );
    let widths = b
        .eval(
            "[...document.querySelectorAll('#batch-bar span')].map(s => s.className + ' ' + \
             Math.round(100 * s.getBoundingClientRect().width / \
             document.querySelector('#batch-bar').getBoundingClientRect().width)).join(', ')",
        )
        .unwrap();
    assert_eq!(widths, "ok 50, failed 25", "the bar: {widths}");
    let text = b.eval("document.body.innerText").unwrap();
    assert!(
        text.as_str().unwrap_or("").contains("nightly import"),
        "{text}"
    );
    b.screenshot(&target_dir().join("screenshots").join("batch-1400.png"))
        .unwrap();
    // Cancel the batch: confirmed, its pending job is cancelled and the
    // batch ends with it counted failed.
    b.click("button[data-action=cancel]").unwrap();
    b.wait_for(
        "the confirmation dialog",
        "document.getElementById('confirm').open",
        Duration::from_secs(30),
    )
    .unwrap();
    b.click("#confirm button[value=ok]").unwrap();
    let counts = b
        .wait_for(
            "the cancelled batch's counts",
            "document.querySelector('#batch-cancelled') && \
             (document.querySelector('#batch-counts') || {}).textContent.startsWith('4 of 4') && \
             document.querySelector('#batch-counts').textContent",
            Duration::from_secs(30),
        )
        .unwrap();
    assert_eq!(
        counts, "4 of 4 ended · 2 succeeded · 2 failed · 0 pending",
        "{counts}"
    );
    let v = batch_view(&addrs, id).expect("the batch is still known");
    assert_eq!(v["state"], "finished", "{v}");
    assert!(v["cancelled_at_unix_ms"].is_u64(), "{v}");
    assert_eq!(
        b.eval("document.querySelectorAll('button[data-action=cancel]').length")
            .unwrap(),
        json!(0),
        "no cancel button on a finished batch"
    );
    jm.stop();
}
