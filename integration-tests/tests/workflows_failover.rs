//! A workflow and a batch across a PostgreSQL failover (issue 30; the
//! harness of `ha_postgres.rs`): a leader and a standby router on one
//! database, a job manager and a client connected to both. A chord of 20
//! Python nodes (each notes its run, sleeps, returns its tag) with a
//! Python callback, and a batch of 20 Python jobs with an `on_complete`
//! callback, are submitted to the leader; the queue holds half the batch,
//! then the chord, then the other half, so the leader is SIGKILLed with
//! both under way. The standby takes over and finishes both: the chord's
//! callback ran exactly once with the 20 results in order, the client got
//! one RESULT; the batch's callback ran exactly once with the final
//! counts; every node and job ran, never a third time, and a second time
//! only if the old leader had not journaled its end: running on the job
//! manager at the kill (at most its slots), or finished with its REPLY
//! lost with the leader (received, not yet committed: the new leader's
//! "unfinished job(s) queued again" count tells how many).

use std::path::Path;
use std::time::{Duration, Instant};

use emqp_proto::{Command, Message};
use integration_tests::admin::done_nodes;
use integration_tests::ha::{jobmanager, router, serves, wait_leader, wait_standby};
use integration_tests::jobs::{self, Tally};
use integration_tests::postgres::PgCluster;
use integration_tests::process::scratch_dir;
use integration_tests::{admin, poll_until, Addrs, Client};
use serde_json::{json, Value};

const NODES: usize = 20;
const JOBS: usize = 20;
/// The job manager's slots (`ha::jobmanager`): at most this many jobs are
/// in flight when the leader dies.
const SLOTS: usize = 4;

/// A Python job: append `tag` to `file`, sleep 0.3 s, return `tag`.
fn record_job(file: &Path, tag: &str) -> Vec<u8> {
    jobs::run(
        "emq_test_jobs",
        "record",
        json!([file.display().to_string(), tag, "-", 0.3]),
        json!({}),
    )
}

/// A Python callback appending what it received (its first argument) to
/// `file` as one JSON line.
fn callback(file: &Path) -> Value {
    json!(["run", {
        "path": "emq_test_jobs", "callable": "batch_done",
        "args": [file.display().to_string()], "kwargs": {},
    }])
}

fn json_lines(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn a_chord_and_a_batch_survive_a_leader_sigkill_callbacks_once() {
    let Some(pg) = PgCluster::start_or_skip("workflows across a failover") else {
        return;
    };
    let url = pg.create_database("wf_failover");
    let (a_addrs, b_addrs) = (Addrs::fresh(), Addrs::fresh());
    let mut a = router("router-a", &a_addrs, &url, &[]);
    wait_leader(&mut a);
    let mut b = router("router-b", &b_addrs, &url, &[]);
    wait_standby(&mut b);

    let dir = scratch_dir("wf-failover");
    let runs = dir.join("runs.txt");
    let chord_cb = dir.join("chord-callback.jsonl");
    let batch_cb = dir.join("batch-on-complete.jsonl");
    let mut client = Client::connect_all(&[&a_addrs.frontend, &b_addrs.frontend]);

    // The batch's first half, the chord, the batch's second half: the
    // queue's order, so the kill finds both under way.
    let batch = "wf-failover-batch";
    client.batch_op(
        batch,
        json!({ "op": "open", "on_complete": { "msg": callback(&batch_cb) } }),
    );
    let header = format!("batch:{batch}");
    let mut ids = Vec::new();
    for i in 0..JOBS / 2 {
        ids.push(client.submit("default", &header, record_job(&runs, &format!("b{i}"))));
    }
    let mut nodes: Vec<Value> = (0..NODES)
        .map(|i| {
            let tag = format!("m{i}");
            let msg: Value = serde_json::from_slice(&record_job(&runs, &tag)).unwrap();
            json!({ "id": tag, "msg": msg })
        })
        .collect();
    nodes.push(json!({
        "id": "cb",
        "msg": callback(&chord_cb),
        "after": (0..NODES).map(|i| format!("m{i}")).collect::<Vec<_>>(),
    }));
    let spec = serde_json::to_vec(&json!({ "nodes": nodes })).unwrap();
    let msg = Message::new(Command::Workflow { spec });
    let wf = msg.msgid.clone();
    client.send_frames(msg.encode());
    for i in JOBS / 2..JOBS {
        ids.push(client.submit("default", &header, record_job(&runs, &format!("b{i}"))));
    }
    assert!(
        client.wait_for(Duration::from_secs(30), |c| ids
            .iter()
            .chain([&wf])
            .all(|m| c.acks.contains_key(m))),
        "the workflow and every job acknowledged: {:?}",
        client.rejects
    );
    client.batch_op(batch, json!({ "op": "close" }));

    let backends = format!("{},{}", a_addrs.backend, b_addrs.backend);
    let mut jm = jobmanager("jm", &backends);
    // Kill when a quarter of the chord is done: the batch's first half is
    // done or nearly, its second half waits behind the chord.
    let (chord_before, batch_before) =
        poll_until(Duration::from_secs(90), Duration::from_millis(20), || {
            let n = done_nodes(&admin::workflow(&a_addrs.admin, &wf)?);
            let s = admin::batch(&a_addrs.admin, batch)?["succeeded"].as_u64()?;
            (n >= NODES / 4).then_some((n, s))
        })
        .expect("a quarter of the chord done");
    // What had run when the leader died (read just before the kill).
    let ran_before = jobs::count_lines(&runs);
    let killed_at = Instant::now();
    a.kill9();
    let ran_before: Vec<String> = ran_before.into_keys().collect();
    eprintln!(
        "leader killed: chord {chord_before}/{NODES} done, batch {batch_before}/{JOBS} \
         succeeded, {} runs",
        ran_before.len()
    );

    let served_after = poll_until(Duration::from_secs(20), Duration::from_millis(50), || {
        serves(&b_addrs, Duration::from_millis(200)).then(|| killed_at.elapsed())
    })
    .unwrap_or_else(|| panic!("the standby never served: {}", b.tail(30)));
    // The new leader holds the workflow. (Its done nodes are not compared
    // with the old leader's view: that view shows a node done once its
    // REPLY arrived, before its end is committed, and the new leader may
    // already have run some again by now.)
    admin::workflow(&b_addrs.admin, &wf).expect("the new leader holds the workflow");
    // What the new leader loaded as not finished: every job whose end the
    // old leader had not journaled (queued, in flight, or finished with
    // its REPLY lost with the leader).
    let line = b
        .wait_for_log_line("unfinished job(s) queued again", Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("{e}"));
    let unfinished: usize = line
        .split(" unfinished job(s)")
        .next()
        .and_then(|h| h.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a count in {line:?}"));
    let durable_done = NODES + JOBS - unfinished;
    assert!(
        durable_done <= ran_before.len(),
        "{durable_done} ends journaled, {} jobs had run: {line}",
        ran_before.len()
    );
    let v = admin::batch(&b_addrs.admin, batch).expect("the new leader holds the batch");
    assert_eq!(v["total"], json!(JOBS), "the restored jobs counted: {v}");
    assert_eq!(v["state"], "closed", "{v}");

    // Hellos until the workflow's RESULT comes from the new leader.
    let got = poll_until(Duration::from_secs(120), Duration::from_millis(50), || {
        client.hello();
        client.pump(Duration::from_millis(100));
        client.results.get(&wf).cloned()
    })
    .unwrap_or_else(|| panic!("the workflow's RESULT; new leader: {}", b.tail(40)));
    let v = poll_until(Duration::from_secs(120), Duration::from_millis(100), || {
        let v = admin::batch(&b_addrs.admin, batch)?;
        let cb = format!("{batch}/on-complete");
        (v["state"] == "finished"
            && admin::job_state(&b_addrs.admin, &cb).as_deref() == Some("done"))
        .then_some(v)
    })
    .unwrap_or_else(|| panic!("the batch finished, its callback done: {}", b.tail(40)));
    let finished_after = killed_at.elapsed();
    // A last look for a late duplicate RESULT.
    client.hello();
    client.pump(Duration::from_millis(500));
    let got_all = client.results.get(&wf).cloned().unwrap_or(got);

    // The chord: one RESULT, its callback ran once, with every result in
    // order (its value, and what it wrote).
    assert_eq!(got_all.len(), 1, "one RESULT: {got_all:?}");
    let value = got_all[0].json();
    let expected: Vec<String> = (0..NODES).map(|i| format!("m{i}")).collect();
    assert_eq!(value["value"], json!(expected), "the callback's value");
    let cb_runs = json_lines(&chord_cb);
    assert_eq!(
        cb_runs,
        vec![json!(expected)],
        "the chord's callback ran once"
    );
    let wv = admin::workflow(&b_addrs.admin, &wf).expect("the finished workflow");
    assert_eq!(wv["state"], "succeeded", "{wv}");
    assert_eq!(done_nodes(&wv), NODES + 1, "{wv}");

    // The batch: finished with its final counts, on_complete ran once
    // with them.
    assert_eq!(
        (
            v["succeeded"].clone(),
            v["failed"].clone(),
            v["pending"].clone()
        ),
        (json!(JOBS), json!(0), json!(0)),
        "{v}"
    );
    assert_eq!(
        json_lines(&batch_cb),
        vec![json!({"batch": batch, "event": "complete", "total": JOBS,
                    "succeeded": JOBS, "failed": 0, "failed_ids": []})],
        "the batch's on_complete ran once with the final counts"
    );

    // Every node and job ran; a second run only for those in flight at the
    // kill, never a third.
    let counts = jobs::count_lines(&runs);
    let tags: Vec<String> = (0..NODES)
        .map(|i| format!("m{i}"))
        .chain((0..JOBS).map(|i| format!("b{i}")))
        .collect();
    let tally = Tally::of(&tags, &counts);
    let mut twice: Vec<&String> = tags
        .iter()
        .filter(|t| counts.get(*t).copied().unwrap_or(0) > 1)
        .collect();
    twice.sort();
    // A job runs again only if the old leader had not journaled its end:
    // those running on the job manager at the kill (at most its slots) and
    // those whose REPLY the old leader got but had not yet committed when
    // it died (they had run before the kill yet were loaded unfinished).
    let replies_lost = ran_before.len().saturating_sub(durable_done);
    let twice_ran_before: Vec<&String> = twice
        .iter()
        .copied()
        .filter(|t| ran_before.contains(t))
        .collect();
    integration_tests::report(&format!(
        "FAULT HA workflow + batch across a leader kill -9 (PostgreSQL, lease TTL 3 s): chord \
         of {NODES} and batch of {JOBS} (Python jobs, 0.3 s, {SLOTS} slots); at the kill chord \
         {chord_before} done, batch {batch_before} succeeded (the old leader's views); standby \
         serving after {:.2} s; both finished {:.1} s after the kill; executions \
         {tally}; run twice: {twice:?} (of them finished before the kill: \
         {twice_ran_before:?}); {} had run at the kill, {durable_done} ends journaled \
         ({replies_lost} REPLYs lost with the leader); chord callback runs {}, batch \
         on_complete runs {}, RESULTs {}",
        served_after.as_secs_f64(),
        finished_after.as_secs_f64(),
        ran_before.len(),
        cb_runs.len(),
        json_lines(&batch_cb).len(),
        got_all.len(),
    ));
    assert_eq!(tally.lost, 0, "every node and job ran: {tally}");
    assert!(
        counts.values().all(|n| *n <= 2),
        "no job runs a third time: {counts:?}"
    );
    assert!(
        twice.len() - twice_ran_before.len() <= SLOTS,
        "only jobs running at the kill run again: {twice:?}, of them finished before it: \
         {twice_ran_before:?}"
    );
    assert!(
        twice_ran_before.len() <= replies_lost,
        "a job whose end the old leader had journaled ran again: {twice_ran_before:?}, \
         {replies_lost} REPLYs lost"
    );
    jm.stop();
    assert!(b.is_running(), "the new leader died: {}", b.tail(30));
}
