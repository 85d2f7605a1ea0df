//! The control plane (`router/control.rs`) on the fake clock: lookups,
//! listing, cancel, pause, purge, dead letters, drain, delayed jobs.

use super::*;
use crate::journal::FinishedRecord;
use serde_json::{json, Value};

/// Send an ADMIN request; the answer object.
fn op(h: &mut H, req: Value) -> Value {
    let frames = crate::router::admin_request("adm-1", &req).encode_routed(b"adm".to_vec());
    let sent = h.frames(Admin, frames);
    let m = to(&sent, Admin, "adm");
    assert_eq!(m.len(), 1, "one answer: {sent:?}");
    let Command::Reply(r) = &m[0].command else {
        panic!("no REPLY: {sent:?}")
    };
    assert_eq!(r.orig_msgid.as_deref(), Some("adm-1"));
    serde_json::from_slice(&r.payload).unwrap()
}

fn ok(h: &mut H, req: Value) -> Value {
    let v = op(h, req.clone());
    assert_eq!(v["ok"], true, "{req} -> {v}");
    v
}

fn err(h: &mut H, req: Value) -> String {
    let v = op(h, req.clone());
    assert_eq!(v["ok"], false, "{req} -> {v}");
    v["error"]["kind"].as_str().unwrap().to_string()
}

fn durable() -> H {
    H::with(Config {
        journal: true,
        epoch_unix_micros: 1_700_000_000_000_000,
        ..Config::default()
    })
}

fn journaled(h: &H, f: impl Fn(&Record) -> bool) -> usize {
    h.journal.iter().filter(|r| f(r)).count()
}

#[test]
fn unknown_ops_and_bad_arguments_are_bad_requests_never_silence() {
    let mut h = durable();
    assert_eq!(err(&mut h, json!({"op": "frobnicate"})), "bad-request");
    assert_eq!(err(&mut h, json!({"nop": 1})), "bad-request");
    assert_eq!(err(&mut h, json!({"op": "job"})), "bad-request");
    assert_eq!(
        err(&mut h, json!({"op": "jobs", "limit": 0})),
        "bad-request"
    );
    assert_eq!(
        err(&mut h, json!({"op": "jobs", "state": "sleeping"})),
        "bad-request"
    );
    assert_eq!(err(&mut h, json!(["not", "an", "object"])), "bad-request");
    assert_eq!(
        err(&mut h, json!({"op": "job", "msgid": "nope"})),
        "not-found"
    );
    let v = ok(&mut h, json!({"op": "status"}));
    assert!(v["counters"].is_object() && v["version"].is_string(), "{v}");
}

#[test]
fn a_job_is_found_by_msgid_in_every_state() {
    let mut h = durable();
    h.request("c", "j1", "default", "reply-requested");
    let v = ok(&mut h, json!({"op": "job", "msgid": "j1"}));
    let j = &v["job"];
    assert_eq!(j["state"], "queued", "{v}");
    assert_eq!(j["queue"], "default");
    assert_eq!(j["headers"], "reply-requested");
    assert_eq!(j["attempts"], 0);
    assert_eq!(j["client"], "c");
    assert!(j["payload"].as_str().unwrap().contains("echo"));
    assert!(j["accepted_at_ms"].as_u64().unwrap() >= 1_700_000_000_000);
    worker(&mut h, "w1", "", 1);
    h.now += SECOND;
    let j = ok(&mut h, json!({"op": "job", "msgid": "j1"}))["job"].clone();
    assert_eq!(j["state"], "in-flight");
    assert_eq!(j["worker"], "w1");
    assert_eq!(j["attempts"], 1);
    assert_eq!(j["running_ms"], 1000);
    h.reply("w1", "j1", r#"{"value": 42}"#, None);
    let j = ok(&mut h, json!({"op": "job", "msgid": "j1"}))["job"].clone();
    assert_eq!(j["state"], "done", "{j}");
    assert_eq!(j["result"], json!({"value": 42}));
    assert!(j["finished_at_ms"].as_u64().is_some());
    assert_eq!(
        journaled(
            &h,
            |r| matches!(r, Record::Finished { record, .. } if record.job.msgid == "j1" && record.outcome == "done")
        ),
        1
    );
    // Failed for good → dead-lettered, found there.
    h.ready("w1");
    h.request("c", "j2", "default", "");
    h.reply(
        "w1",
        "j2",
        r#"{"error": {"kind": "exception", "message": "x"}}"#,
        Some(ResultStatus::Failed),
    );
    let j = ok(&mut h, json!({"op": "job", "msgid": "j2"}))["job"].clone();
    assert_eq!(
        j["state"], "failed",
        "no retry-count: failed, not dead: {j}"
    );
    assert_eq!(j["last_error"]["kind"], "exception");
}

#[test]
fn jobs_are_listed_by_queue_state_and_payload_in_pages() {
    let mut h = durable();
    for i in 0..7 {
        let q = if i % 2 == 0 { "even" } else { "odd" };
        h.request("c", &format!("j{i}"), q, "");
    }
    let v = ok(&mut h, json!({"op": "jobs", "queue": "even"}));
    let ids: Vec<&str> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["msgid"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["j6", "j4", "j2", "j0"], "newest first");
    let v = ok(&mut h, json!({"op": "jobs", "order": "oldest", "limit": 3}));
    let ids: Vec<&str> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["msgid"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["j0", "j1", "j2"]);
    let cursor = v["next_cursor"].as_str().unwrap().to_string();
    let v = ok(
        &mut h,
        json!({"op": "jobs", "order": "oldest", "limit": 3, "cursor": cursor}),
    );
    let ids: Vec<&str> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["msgid"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["j3", "j4", "j5"]);
    let v = ok(&mut h, json!({"op": "jobs", "contains": "\"j5\""}));
    let ids: Vec<&str> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["msgid"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["j5"]);
    let v = ok(&mut h, json!({"op": "jobs", "state": "done"}));
    assert_eq!(v["jobs"], json!([]));
    assert_eq!(v["next_cursor"], Value::Null);
}

#[test]
fn cancel_removes_a_waiting_job_and_tells_its_client() {
    let mut h = durable();
    h.request("c", "j1", "default", "reply-requested");
    let sent = h.msg(
        Admin,
        "adm",
        "a",
        Command::Admin {
            request: br#"{"op": "cancel", "msgid": "j1"}"#.to_vec(),
        },
    );
    let rs = results(&sent, "c");
    assert_eq!(rs.len(), 1, "{sent:?}");
    assert_eq!(rs[0].status, ResultStatus::Failed);
    let v: Value = serde_json::from_slice(&rs[0].payload).unwrap();
    assert_eq!(v["error"]["kind"], "cancelled");
    assert_eq!(h.r.buffered_count(), 0);
    let j = ok(&mut h, json!({"op": "job", "msgid": "j1"}))["job"].clone();
    assert_eq!(j["state"], "cancelled");
    assert_eq!(
        err(&mut h, json!({"op": "cancel", "msgid": "j1"})),
        "conflict"
    );
    assert_eq!(h.r.stats().cancelled, 1);
    // A worker coming later gets nothing.
    worker(&mut h, "w1", "", 1);
    assert_eq!(h.r.inflight_count(), 0);
}

#[test]
fn cancel_of_a_running_job_goes_to_its_job_manager_and_ends_cancelled_without_retry() {
    let mut h = durable();
    h.inform("w1", "", &["job-ack", "cancel"]);
    h.ready("w1");
    h.request("c", "r1", "default", "reply-requested,retry-count:3");
    let sent = h.msg(
        Admin,
        "adm",
        "a",
        Command::Admin {
            request: br#"{"op": "cancel", "msgid": "r1"}"#.to_vec(),
        },
    );
    let cancels: Vec<&Message> = to(&sent, Backend, "w1")
        .into_iter()
        .filter(|m| matches!(&m.command, Command::Cancel { orig_msgid } if orig_msgid == "r1"))
        .collect();
    assert_eq!(cancels.len(), 1, "{sent:?}");
    let j = ok(&mut h, json!({"op": "job", "msgid": "r1"}))["job"].clone();
    assert_eq!(j["state"], "cancelling");
    let sent = h.reply(
        "w1",
        "r1",
        r#"{"error": {"kind": "cancelled", "message": "cancelled by the router"}}"#,
        Some(ResultStatus::Failed),
    );
    assert_eq!(results(&sent, "c").len(), 1);
    assert_eq!(h.r.delayed_count(), 0, "no retry of a cancelled job");
    assert_eq!(
        ok(&mut h, json!({"op": "job", "msgid": "r1"}))["job"]["state"],
        "cancelled"
    );
    // A 0.3.13 job manager cannot cancel.
    h.inform("old", "", &[]);
    h.ready("old");
    h.request("c", "r2", "default", "");
    assert_eq!(
        err(&mut h, json!({"op": "cancel", "msgid": "r2"})),
        "unsupported"
    );
}

#[test]
fn a_paused_queue_buffers_and_dispatches_nothing_until_resumed_and_stays_paused_across_a_restart() {
    let mut h = durable();
    worker(&mut h, "w1", r#"[[10, "default"]]"#, 2);
    assert_eq!(
        ok(&mut h, json!({"op": "pause", "queue": "default"}))["paused"],
        true
    );
    let sent = h.request("c", "p1", "default", "");
    assert!(forwarded(&sent, "w1").is_empty());
    assert!(
        to(&sent, Frontend, "c").iter().any(|m| is_ack_of(m, "p1")),
        "accepted"
    );
    let q = ok(&mut h, json!({"op": "queues"}));
    let d = q["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "default")
        .unwrap()
        .clone();
    assert_eq!(d["paused"], true);
    assert_eq!(d["depth"], 1);
    assert_eq!(
        journaled(&h, |r| matches!(
            r,
            Record::QueuePaused { paused: true, .. }
        )),
        1
    );
    // A restart with the journal's state: still paused.
    let mut h2 = durable();
    let mut out = Vec::new();
    h2.r.restore(
        Restored {
            jobs: h.r.unfinished_jobs(),
            paused_queues: vec!["default".into()],
            ..Restored::default()
        },
        h2.now,
        &mut out,
    );
    worker(&mut h2, "w1", r#"[[10, "default"]]"#, 2);
    assert_eq!(h2.r.inflight_count(), 0, "paused across the restart");
    let sent = decode({
        let v = crate::router::admin_request("x", &json!({"op": "resume", "queue": "default"}));
        h2.input(Input::Frames {
            socket: Admin,
            frames: v.encode_routed(b"adm".to_vec()),
        })
    });
    assert_eq!(forwarded(&sent, "w1"), vec!["p1"], "resume dispatches");
}

#[test]
fn purge_cancels_every_waiting_job_of_a_queue_and_leaves_running_ones() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    for i in 0..4 {
        h.request("c", &format!("j{i}"), "default", "reply-requested");
    }
    assert_eq!(h.r.inflight_count(), 1);
    let v = ok(&mut h, json!({"op": "purge", "queue": "default"}));
    assert_eq!(v["purged"], 3);
    assert_eq!(h.r.buffered_count(), 0);
    assert_eq!(h.r.inflight_count(), 1, "the running job is not touched");
    assert_eq!(h.r.stats().cancelled, 3);
}

#[test]
fn dead_letters_are_retried_or_discarded_one_or_all() {
    let mut h = H::with(Config {
        journal: true,
        max_attempts: 1,
        ..Config::default()
    });
    for i in 0..3 {
        h.inform(&format!("w{i}"), "", &["job-ack"]);
        h.ready(&format!("w{i}"));
        h.request("c", &format!("d{i}"), "default", "");
        h.msg(Backend, &format!("w{i}"), "k", Command::Kbye);
    }
    assert_eq!(h.r.stats().dead_lettered, 3);
    let v = ok(&mut h, json!({"op": "dead"}));
    assert_eq!(v["count"], 3);
    assert_eq!(v["dead_letters"][0]["msgid"], "d2", "newest first");
    // Issue 32: `jobs --state dead-lettered` (offered by emq-cli) lists
    // them too, in either order, instead of a bad-request.
    let v = ok(&mut h, json!({"op": "jobs", "state": "dead-lettered"}));
    let msgids = |v: &Value| -> Vec<String> {
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["msgid"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(msgids(&v), ["d2", "d1", "d0"], "{v}");
    assert_eq!(v["jobs"][0]["state"], "dead-lettered");
    let v = ok(
        &mut h,
        json!({"op": "jobs", "state": "dead-lettered", "order": "oldest", "limit": 2}),
    );
    assert_eq!(msgids(&v), ["d0", "d1"], "{v}");
    assert_eq!(v["next_cursor"], "2");
    // Retry one: runs again.
    let v = ok(&mut h, json!({"op": "dead-retry", "msgid": "d1"}));
    assert_eq!(v["retried"], 1);
    worker(&mut h, "w9", "", 1);
    assert_eq!(
        ok(&mut h, json!({"op": "job", "msgid": "d1"}))["job"]["state"],
        "in-flight"
    );
    assert_eq!(
        journaled(
            &h,
            |r| matches!(r, Record::DeadLetterRemoved { msgid } if msgid == "d1")
        ),
        1
    );
    assert_eq!(
        err(&mut h, json!({"op": "dead-retry", "msgid": "d1"})),
        "not-found"
    );
    // Discard all matching a filter.
    let v = ok(
        &mut h,
        json!({"op": "dead-discard", "all": true, "contains": "d0"}),
    );
    assert_eq!(v["discarded"], 1);
    assert_eq!(ok(&mut h, json!({"op": "dead"}))["count"], 1);
    assert_eq!(err(&mut h, json!({"op": "dead-discard"})), "bad-request");
}

#[test]
fn a_drained_worker_finishes_its_job_and_gets_nothing_new_until_undrained() {
    let mut h = durable();
    worker(&mut h, "w1", "", 2);
    h.request("c", "a", "default", "");
    assert_eq!(
        ok(&mut h, json!({"op": "drain", "worker": "w1"}))["draining"],
        true
    );
    let sent = h.request("c", "b", "default", "");
    assert!(forwarded(&sent, "w1").is_empty());
    let w = ok(&mut h, json!({"op": "workers"}));
    assert_eq!(w["workers"][0]["draining"], true);
    assert_eq!(w["workers"][0]["running"][0]["msgid"], "a");
    h.reply("w1", "a", "{}", None);
    let sent = h.ready("w1");
    assert!(
        forwarded(&sent, "w1").is_empty(),
        "drained: READY kept as a slot"
    );
    let sent = decode({
        let v = crate::router::admin_request("x", &json!({"op": "undrain", "worker": "w1"}));
        h.input(Input::Frames {
            socket: Admin,
            frames: v.encode_routed(b"adm".to_vec()),
        })
    });
    assert_eq!(forwarded(&sent, "w1"), vec!["b"]);
    assert_eq!(
        err(&mut h, json!({"op": "drain", "worker": "nobody"})),
        "not-found"
    );
}

#[test]
fn one_set_of_counts_finished_is_done_plus_failed_plus_dead_lettered_in_every_view() {
    let mut h = durable();
    worker(&mut h, "w1", "", 3);
    let failed = r#"{"error": {"kind": "exception", "message": "boom"}}"#;
    h.request("c", "ok", "default", "");
    h.request("c", "bad", "default", "");
    h.request("c", "dead", "default", "retry-count:1");
    h.reply("w1", "ok", r#"{"value": 1}"#, Some(ResultStatus::Ok));
    h.reply("w1", "bad", failed, Some(ResultStatus::Failed));
    h.reply("w1", "dead", failed, Some(ResultStatus::Failed));
    h.ready("w1");
    // Its retry comes due (the worker beating meanwhile) and fails again.
    for _ in 0..120 {
        h.heartbeat("w1");
        h.advance(Duration::from_secs(1));
        if h.r.delayed_count() == 0 {
            break;
        }
    }
    assert_eq!(h.r.delayed_count(), 0);
    h.reply("w1", "dead", failed, Some(ResultStatus::Failed));
    let q = ok(&mut h, json!({"op": "queues"}))["queues"][0].clone();
    assert_eq!(
        (
            &q["finished"],
            &q["processed"],
            &q["failed"],
            &q["dead_lettered"]
        ),
        (&json!(3), &json!(1), &json!(1), &json!(1)),
        "{q}"
    );
    let s = admin(&mut h, Command::Status);
    assert_eq!(
        s["processed_messages_by_queue"]["default"], q["finished"],
        "{s}"
    );
    let c = &s["counters"];
    assert_eq!(
        (&c["completed"], &c["failed"], &c["dead_lettered"]),
        (&json!(2), &json!(1), &json!(1)),
        "{c}"
    );
}

#[test]
fn a_failed_or_cancelled_job_is_queued_again_by_requeue_and_nothing_else_is() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    let failed = r#"{"error": {"kind": "exception", "message": "boom"}}"#;
    h.request("c", "f1", "default", "");
    h.reply("w1", "f1", failed, Some(ResultStatus::Failed));
    h.request("c", "ok1", "default", "");
    h.ready("w1");
    h.reply("w1", "ok1", r#"{"value": 1}"#, Some(ResultStatus::Ok));
    h.request("c", "c1", "paused-q", "");
    ok(&mut h, json!({"op": "cancel", "msgid": "c1"}));
    assert_eq!(
        ok(&mut h, json!({"op": "job", "msgid": "f1"}))["job"]["state"],
        "failed"
    );
    // The failed job: accepted again, journaled, delivered to the worker.
    let before = journaled(&h, |r| matches!(r, Record::Accepted(_)));
    let sent = {
        let v = crate::router::admin_request("rq", &json!({"op": "requeue", "msgid": "f1"}));
        h.input(Input::Frames {
            socket: Admin,
            frames: v.encode_routed(b"adm".to_vec()),
        });
        h.ready("w1")
    };
    assert_eq!(forwarded(&sent, "w1"), vec!["f1"], "{sent:?}");
    assert_eq!(
        journaled(&h, |r| matches!(r, Record::Accepted(_))),
        before + 1
    );
    assert_eq!(
        ok(&mut h, json!({"op": "job", "msgid": "f1"}))["job"]["state"],
        "in-flight"
    );
    // The cancelled one too.
    let v = ok(&mut h, json!({"op": "requeue", "msgid": "c1"}));
    assert_eq!(
        (&v["was"], &v["state"]),
        (&json!("cancelled"), &json!("queued")),
        "{v}"
    );
    // Not: running, finished ok, unknown.
    assert_eq!(
        err(&mut h, json!({"op": "requeue", "msgid": "f1"})),
        "conflict"
    );
    assert_eq!(
        err(&mut h, json!({"op": "requeue", "msgid": "ok1"})),
        "conflict"
    );
    assert_eq!(
        err(&mut h, json!({"op": "requeue", "msgid": "nope"})),
        "not-found"
    );
}

#[test]
fn a_unique_msgid_prefix_names_its_job_and_an_ambiguous_one_lists_the_candidates() {
    let mut h = durable();
    h.request("c", "abcd-1111", "default", "");
    h.request("c", "abcd-2222", "default", "");
    h.request("c", "ffff-0000", "default", "");
    // Unique: the job's view, a cancel.
    let v = ok(&mut h, json!({"op": "job", "msgid": "ffff"}));
    assert_eq!(v["job"]["msgid"], "ffff-0000");
    let v = ok(&mut h, json!({"op": "cancel", "msgid": "abcd-1"}));
    assert_eq!(
        v["msgid"].as_str().unwrap_or("abcd-1111"),
        "abcd-1111",
        "{v}"
    );
    // A finished (cancelled) job is found by its prefix too.
    let v = ok(&mut h, json!({"op": "job", "msgid": "abcd-11"}));
    assert_eq!(v["job"]["state"], "cancelled", "{v}");
    // Ambiguous: a bad-request naming both.
    let e = op(&mut h, json!({"op": "job", "msgid": "abcd"}));
    assert_eq!(e["error"]["kind"], "bad-request", "{e}");
    let m = e["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("msgid prefix abcd is ambiguous: 2 jobs begin with it: abcd-1111, abcd-2222"),
        "{m}"
    );
    // Too short, or matching nothing: not-found as before.
    assert_eq!(
        err(&mut h, json!({"op": "job", "msgid": "ff"})),
        "not-found"
    );
    assert_eq!(
        err(&mut h, json!({"op": "job", "msgid": "zzzz"})),
        "not-found"
    );
}

#[test]
fn workers_show_who_they_are_and_a_name_drains_as_the_identity_does() {
    let mut h = durable();
    let about = [
        "job-ack",
        "name=mail",
        "host=box1",
        "pid=42",
        "slots=4",
        "version=0.1.0",
    ];
    h.inform("w1", "", &about);
    h.inform("w2", "", &["job-ack"]);
    let w = ok(&mut h, json!({"op": "workers"}));
    let w1 = &w["workers"][0];
    assert_eq!(w1["identity"], "w1");
    assert_eq!(w1["name"], "mail@box1");
    assert_eq!(w1["pid"], 42);
    assert_eq!(w1["concurrency"], 4);
    assert_eq!(w1["version"], "0.1.0");
    assert_eq!(
        w1["features"],
        json!(["job-ack"]),
        "who it is is not a feature"
    );
    assert_eq!(w["workers"][1]["name"], Value::Null);
    // A job it runs names it too.
    h.ready("w1");
    h.request("c", "j-on-w1", "default", "");
    let j = ok(&mut h, json!({"op": "job", "msgid": "j-on-w1"}))["job"].clone();
    assert_eq!(
        (&j["worker"], &j["worker_name"]),
        (&json!("w1"), &json!("mail@box1")),
        "{j}"
    );
    // Its job manager again on a new identity: the same name.
    h.inform("w3", "", &about);
    let w = ok(&mut h, json!({"op": "workers"}));
    let names: Vec<&Value> = w["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| &w["name"])
        .collect();
    assert_eq!(
        names,
        [&json!("mail@box1"), &Value::Null, &json!("mail@box1")]
    );
    // Two workers named so: ambiguous, their identities listed.
    let e = op(&mut h, json!({"op": "drain", "worker": "mail@box1"}));
    assert_eq!(e["error"]["kind"], "bad-request", "{e}");
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("2 workers are named mail@box1") && msg.contains("w1, w3"),
        "{msg}"
    );
    h.msg(Backend, "w1", "k", Command::Kbye);
    for name in ["mail@box1", "mail"] {
        let d = ok(&mut h, json!({"op": "drain", "worker": name}));
        assert_eq!(d["draining"], true, "{d}");
    }
    let w = ok(&mut h, json!({"op": "workers"}));
    assert_eq!(w["workers"][1]["identity"], "w3");
    assert_eq!(w["workers"][1]["draining"], true);
}

#[test]
fn a_delayed_job_is_acknowledged_at_once_and_runs_no_earlier_than_due_even_after_a_restart() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    let sent = h.request("c", "late", "default", "delay:2.5");
    assert!(to(&sent, Frontend, "c")
        .iter()
        .any(|m| is_ack_of(m, "late")));
    assert!(forwarded(&sent, "w1").is_empty());
    let j = ok(&mut h, json!({"op": "job", "msgid": "late"}))["job"].clone();
    assert_eq!(j["state"], "delayed");
    let run_at = j["run_at_ms"].as_u64().unwrap();
    let Some(Record::Accepted(rec)) = h
        .journal
        .iter()
        .find(|r| matches!(r, Record::Accepted(j) if j.msgid == "late"))
        .cloned()
    else {
        panic!("{:?}", h.journal)
    };
    assert_eq!(rec.run_at_unix_ms, Some(run_at));
    h.heartbeat("w1");
    assert!(forwarded(&h.advance(2 * SECOND), "w1").is_empty());
    // Restart half a second before it is due: it still waits.
    let mut h2 = durable();
    h2.now = h.now;
    let mut out = Vec::new();
    h2.r.restore(
        Restored {
            jobs: vec![rec.clone()],
            ..Restored::default()
        },
        h2.now,
        &mut out,
    );
    worker(&mut h2, "w1", "", 1);
    assert_eq!(h2.r.inflight_count(), 0);
    assert!(forwarded(&h2.advance(SECOND / 2 - us(1)), "w1").is_empty());
    assert_eq!(forwarded(&h2.advance(us(1)), "w1"), vec!["late"]);
    // A bad delay is refused.
    let sent = h.request("c", "bad", "default", "delay:soon");
    assert_eq!(rejects(&sent, "c")[0].reason, RejectReason::Malformed);
}

#[test]
fn schedules_are_listed_and_removed_by_id() {
    let mut h = durable();
    h.msg(
        Frontend,
        "c",
        "s1",
        Command::Schedule(Schedule {
            queue: "default".into(),
            headers: Headers::new(),
            interval: emqp_proto::Interval::Every { ms: 60_000 },
            message: b"[]".to_vec(),
            cron: String::new(),
        }),
    );
    let v = ok(&mut h, json!({"op": "schedules"}));
    let id = v["schedules"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(
        ok(&mut h, json!({"op": "unschedule", "id": id}))["removed"],
        id.as_str()
    );
    assert!(h.r.schedules().is_empty());
    assert_eq!(
        err(&mut h, json!({"op": "unschedule", "id": id})),
        "not-found"
    );
}

#[test]
fn state_changes_are_refused_while_the_journal_fails() {
    let mut h = durable();
    h.request("c", "j", "default", "");
    h.fail_journal = Some("disk full".into());
    h.request("c", "k", "default", "");
    assert_eq!(
        err(&mut h, json!({"op": "pause", "queue": "default"})),
        "journal-unavailable"
    );
    assert_eq!(
        err(&mut h, json!({"op": "cancel", "msgid": "j"})),
        "journal-unavailable"
    );
    ok(&mut h, json!({"op": "job", "msgid": "j"}));
}

#[test]
fn finished_jobs_are_kept_up_to_the_count() {
    let mut h = H::with(Config {
        retain_finished: 2,
        ..Config::default()
    });
    worker(&mut h, "w1", "", 1);
    for i in 0..3 {
        h.request("c", &format!("f{i}"), "default", "");
        h.reply("w1", &format!("f{i}"), "{}", None);
        h.ready("w1");
    }
    assert_eq!(
        err(&mut h, json!({"op": "job", "msgid": "f0"})),
        "not-found"
    );
    ok(&mut h, json!({"op": "job", "msgid": "f2"}));
    let v = ok(&mut h, json!({"op": "jobs", "state": "done"}));
    assert_eq!(v["jobs"].as_array().unwrap().len(), 2);
}

fn queue_view(h: &mut H, name: &str) -> Value {
    let v = ok(h, json!({"op": "queues"}));
    v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == name)
        .unwrap_or_else(|| panic!("queue {name} not listed: {v}"))
        .clone()
}

/// Issue 26 item 5, EventMQ 0.3.13's rule (the default): a job for a
/// queue nobody serves goes to `default` — and is counted under its own
/// queue, which admin `queues` lists.
#[test]
fn a_job_for_an_unserved_queue_goes_to_default_and_is_counted() {
    let mut h = H::new();
    worker(&mut h, "w1", r#"[[10, "default"]]"#, 2);
    let sent = h.request("c", "j1", "mail", "");
    assert_eq!(forwarded(&sent, "w1"), vec!["j1"]);
    let q = queue_view(&mut h, "mail");
    assert_eq!(q["routed_to_default"], 1, "{q}");
    assert_eq!(q["workers"], 0, "{q}");
    assert_eq!(queue_view(&mut h, "default")["routed_to_default"], 0);
}

/// `--unserved-queues hold`: the job waits in its own queue (listed, no
/// workers) while only a default job manager is connected, and goes to
/// the first job manager that serves its queue.
#[test]
fn with_hold_a_job_for_an_unserved_queue_waits_for_its_job_manager() {
    let mut h = H::with(Config {
        unserved: crate::config::Unserved::Hold,
        ..Config::default()
    });
    worker(&mut h, "w1", r#"[[10, "default"]]"#, 2);
    let sent = h.request("c", "j1", "mail", "");
    assert!(to(&sent, Frontend, "c").iter().any(|m| is_ack_of(m, "j1")));
    assert!(forwarded(&sent, "w1").is_empty(), "not sent to default");
    assert!(forwarded(&h.ready("w1"), "w1").is_empty());
    let q = queue_view(&mut h, "mail");
    assert_eq!(
        (q["depth"].as_u64(), q["workers"].as_u64()),
        (Some(1), Some(0)),
        "{q}"
    );
    assert_eq!(q["routed_to_default"], 0);
    h.inform("w2", r#"[[10, "mail"]]"#, &["job-ack"]);
    assert_eq!(forwarded(&h.ready("w2"), "w2"), vec!["j1"]);
    // A served queue is unaffected.
    assert_eq!(
        forwarded(&h.request("c", "j2", "default", ""), "w1"),
        vec!["j2"]
    );
}

/// Issue 32: a finished job's time is told apart — waited (accepted →
/// started) and ran (started → finished) — from the dispatch time the
/// router keeps on the finished job, journaled with its finish and
/// restored; a queue's counters and run-time histogram move with it.
#[test]
fn a_finished_job_keeps_its_start_so_wait_and_run_are_apart_across_a_restore() {
    let mut h = durable();
    let accepted_ms = 1_700_000_000_000 + h.now.as_millis() as u64;
    h.request("c", "j1", "default", "reply-requested");
    h.now += 5 * SECOND;
    worker(&mut h, "w1", "", 1);
    let j = ok(&mut h, json!({"op": "job", "msgid": "j1"}))["job"].clone();
    assert_eq!(j["state"], "in-flight", "{j}");
    assert_eq!(j["waited_ms"], 5000, "{j}");
    assert_eq!(j["started_at_ms"], accepted_ms + 5000, "{j}");
    h.now += 3 * SECOND;
    h.reply("w1", "j1", r#"{"value": 1}"#, None);
    let j = ok(&mut h, json!({"op": "job", "msgid": "j1"}))["job"].clone();
    assert_eq!(j["state"], "done", "{j}");
    assert_eq!(j["started_at_ms"], accepted_ms + 5000, "{j}");
    assert_eq!(j["waited_ms"], 5000, "{j}");
    assert_eq!(j["ran_ms"], 3000, "{j}");
    assert_eq!(j["finished_at_ms"], accepted_ms + 8000, "{j}");
    // The same in the jobs list.
    let listed = ok(&mut h, json!({"op": "jobs", "state": "done"}));
    assert_eq!(listed["jobs"][0]["ran_ms"], 3000, "{listed}");
    // A job cancelled while it waited never started: no start, no run.
    h.request("c", "j2", "default", "");
    ok(&mut h, json!({"op": "cancel", "msgid": "j2"}));
    let j2 = ok(&mut h, json!({"op": "job", "msgid": "j2"}))["job"].clone();
    assert_eq!(j2["state"], "cancelled", "{j2}");
    assert!(j2.get("started_at_ms").is_none(), "{j2}");
    assert!(j2.get("ran_ms").is_none(), "{j2}");
    // The queue counted one accepted... two, one start, one 3 s run.
    let q = ok(&mut h, json!({"op": "queues"}))["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "default")
        .unwrap()
        .clone();
    assert_eq!(q["accepted"], 2, "{q}");
    assert_eq!(q["started"], 1, "{q}");
    assert_eq!(q["run_time"]["count"], 1, "{q}");
    assert_eq!(q["run_time"]["sum_us"], 3_000_000, "{q}");
    // The journal has the start with the finish.
    let finished: Vec<&FinishedRecord> = h
        .journal
        .iter()
        .filter_map(|r| match r {
            Record::Finished { record, .. } => Some(record),
            _ => None,
        })
        .collect();
    assert_eq!(finished.len(), 2);
    assert_eq!(finished[0].started_at_unix_ms, Some(accepted_ms + 5000));
    assert_eq!(finished[1].started_at_unix_ms, None);
    // A restart with the journal's finished jobs: the times survive.
    let mut h2 = durable();
    h2.now = h.now + 60 * SECOND;
    let mut out = Vec::new();
    h2.r.restore(
        Restored {
            finished: finished.into_iter().cloned().collect(),
            ..Restored::default()
        },
        h2.now,
        &mut out,
    );
    let j = ok(&mut h2, json!({"op": "job", "msgid": "j1"}))["job"].clone();
    assert_eq!(j["waited_ms"], 5000, "{j}");
    assert_eq!(j["ran_ms"], 3000, "{j}");
    assert_eq!(j["started_at_ms"], accepted_ms + 5000, "{j}");
}
