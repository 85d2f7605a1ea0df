//! Batches (`router/batch.rs`): live counts, callbacks once, add after
//! close refused, failure → on_complete only, retries counted once at
//! their final outcome, restore from journal rows.

use super::workflow::restored_from;
use super::*;
use crate::journal::StateKind;
use serde_json::{json, Value};

fn durable() -> H {
    H::with(Config {
        journal: true,
        epoch_unix_micros: 1_700_000_000_000_000,
        ..Config::default()
    })
}

fn callback(tag: &str) -> Value {
    json!({ "msg": ["call", { "handler": "echo", "args": [tag] }] })
}

fn batch_cmd(h: &mut H, client: &str, id: &str, spec: Value) -> Vec<Sent> {
    let spec = serde_json::to_vec(&spec).unwrap();
    h.msg(Frontend, client, id, Command::Batch { spec })
}

fn open(h: &mut H, id: &str) -> Vec<Sent> {
    let spec =
        json!({ "op": "open", "on_success": callback("ok"), "on_complete": callback("done") });
    batch_cmd(h, "c1", id, spec)
}

fn close(h: &mut H, id: &str) -> Vec<Sent> {
    batch_cmd(h, "c1", id, json!({ "op": "close" }))
}

fn view(h: &mut H, id: &str) -> Value {
    let req = serde_json::to_vec(&json!({ "op": "batch", "id": id })).unwrap();
    admin(h, Command::Admin { request: req })
}

fn counts(h: &mut H, id: &str) -> (u64, u64, u64, u64) {
    let v = view(h, id);
    let b = &v["batch"];
    let n = |k: &str| b[k].as_u64().unwrap_or_else(|| panic!("{k}: {v}"));
    (n("pending"), n("succeeded"), n("failed"), n("total"))
}

/// The REQUESTs forwarded to worker `id`: (msgid, MSG as JSON).
fn requests(sent: &[Sent], id: &str) -> Vec<(String, Value)> {
    to(sent, Backend, id)
        .into_iter()
        .filter_map(|m| match &m.command {
            Command::Request(r) => {
                Some((m.msgid.clone(), serde_json::from_slice(&r.message).unwrap()))
            }
            _ => None,
        })
        .collect()
}

fn ok(h: &mut H, w: &str, msgid: &str) -> Vec<Sent> {
    let mut sent = h.reply(w, msgid, r#"{"value": 1}"#, Some(ResultStatus::Ok));
    sent.extend(h.ready(w));
    sent
}

fn fail(h: &mut H, w: &str, msgid: &str) -> Vec<Sent> {
    let e = r#"{"error": {"kind": "exception", "message": "boom"}}"#;
    let mut sent = h.reply(w, msgid, e, Some(ResultStatus::Failed));
    sent.extend(h.ready(w));
    sent
}

fn accepted_count(records: &[Record], msgid: &str) -> usize {
    records
        .iter()
        .filter(|r| matches!(r, Record::Accepted(j) if j.msgid == msgid))
        .count()
}

/// Jobs of a batch ending within one open journal batch: the batch's row
/// is encoded once, when that journal batch is taken, with the counts of
/// all of them, and committed with their own records.
#[test]
fn a_batch_row_is_encoded_once_per_journal_batch_however_many_jobs_end_in_it() {
    let mut h = durable();
    worker(&mut h, "w1", "", 8);
    open(&mut h, "b1");
    for j in ["j1", "j2", "j3"] {
        h.request("c1", j, "default", "batch:b1");
    }
    let rows = |h: &H| {
        h.journal
            .iter()
            .filter(
                |r| matches!(r, Record::PutState { kind: StateKind::Batch, id, .. } if id == "b1"),
            )
            .count()
    };
    let (before, encoded) = (rows(&h), h.r.batches.dirty_rows_encoded);
    h.d.commit_at_once = false;
    ok(&mut h, "w1", "j1");
    ok(&mut h, "w1", "j2");
    fail(&mut h, "w1", "j3");
    assert_eq!(
        rows(&h),
        before,
        "nothing committed before the batch is due"
    );
    assert_eq!(
        h.r.batches.dirty_rows_encoded, encoded,
        "nothing encoded yet"
    );
    h.tick();
    assert_eq!(h.r.batches.dirty_rows_encoded, encoded + 1);
    assert_eq!(rows(&h), before + 1);
    let Some(Record::PutState { blob, .. }) =
        h.journal.iter().rev().find(
            |r| matches!(r, Record::PutState { kind: StateKind::Batch, id, .. } if id == "b1"),
        )
    else {
        unreachable!()
    };
    let b = crate::batch::Batch::decode(blob).unwrap();
    assert_eq!((b.succeeded, b.failed), (2, 1));
    // The jobs' own records are in the same commit.
    let n = h.journal.len();
    assert!(h.journal[n.saturating_sub(8)..]
        .iter()
        .any(|r| matches!(r, Record::Finished { record, .. } if record.job.msgid == "j3")));
}

/// Three jobs from two clients: live counts as they end; the callbacks
/// (on_success, then on_complete) are submitted once, when the batch is
/// closed and its last job ended, with the batch's status first in their
/// args; the batch row is written with each end and deleted at the end.
#[test]
fn counts_and_both_callbacks_once_after_close_and_last_job() {
    let mut h = durable();
    worker(&mut h, "w1", "", 8);
    let sent = open(&mut h, "b1");
    assert!(to(&sent, Frontend, "c1").iter().any(|m| is_ack_of(m, "b1")));
    assert!(h.journal.iter().any(|r| matches!(r,
        Record::PutState { kind: StateKind::Batch, id, .. } if id == "b1")));
    h.request("c1", "j1", "default", "batch:b1");
    h.request("c2", "j2", "default", "reply-requested,batch:b1");
    h.request("c2", "j3", "default", "batch:b1");
    // Sent again (same msgid, queue and message): the same job, not a new one.
    h.request("c2", "j3", "default", "batch:b1");
    assert_eq!(counts(&mut h, "b1"), (3, 0, 0, 3));
    let sent = ok(&mut h, "w1", "j1");
    assert!(requests(&sent, "w1").is_empty());
    assert_eq!(counts(&mut h, "b1"), (2, 1, 0, 3));
    close(&mut h, "b1");
    assert_eq!(view(&mut h, "b1")["batch"]["state"], "closed");
    let sent = ok(&mut h, "w1", "j2");
    assert!(requests(&sent, "w1").is_empty(), "j3 still pending");
    let sent = ok(&mut h, "w1", "j3");
    let reqs = requests(&sent, "w1");
    let ids: Vec<&str> = reqs.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(ids, ["b1/on-success", "b1/on-complete"], "{sent:?}");
    let status = json!({"batch": "b1", "event": "success", "total": 3, "succeeded": 3,
                        "failed": 0, "failed_ids": []});
    assert_eq!(reqs[0].1[1]["args"], json!([status, "ok"]));
    assert_eq!(reqs[1].1[1]["args"][0]["event"], "complete");
    let v = view(&mut h, "b1");
    assert_eq!(v["batch"]["state"], "finished");
    assert_eq!(v["batch"]["callbacks"]["on_success"]["state"], "submitted");
    assert!(h.journal.iter().any(|r| matches!(r,
        Record::PutState { kind: StateKind::Batch, id, blob }
            if id == "b1" && crate::batch::Batch::decode(blob).unwrap().finished_unix_ms.is_some())));
    // The callbacks' ends change nothing; nothing is submitted again.
    let mut sent = ok(&mut h, "w1", "b1/on-success");
    sent.extend(ok(&mut h, "w1", "b1/on-complete"));
    assert!(requests(&sent, "w1").is_empty());
    assert_eq!(accepted_count(&h.journal, "b1/on-success"), 1);
    assert_eq!(accepted_count(&h.journal, "b1/on-complete"), 1);
    let req = serde_json::to_vec(&json!({ "op": "status" })).unwrap();
    assert_eq!(
        admin(&mut h, Command::Admin { request: req })["batches"],
        json!({"held": 0, "opened": 1, "finished": 1})
    );
    // A job's view links to its batch.
    let req = serde_json::to_vec(&json!({ "op": "job", "msgid": "b1/on-complete" })).unwrap();
    assert_eq!(
        admin(&mut h, Command::Admin { request: req })["job"]["batch"],
        "b1"
    );
}

/// A job retried then failed for good is counted once, failed, at its
/// last outcome; on_complete runs, on_success does not, and its callback
/// gets the failed msgid.
#[test]
fn failure_after_retries_counts_once_and_skips_on_success() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    open(&mut h, "b2");
    h.request("c1", "ok1", "default", "batch:b2");
    h.request("c1", "bad", "default", "batch:b2,retry-count:1");
    close(&mut h, "b2");
    ok(&mut h, "w1", "ok1");
    // First try fails: a retry is due, not an end.
    fail(&mut h, "w1", "bad");
    assert_eq!(counts(&mut h, "b2"), (1, 1, 0, 2));
    let sent = h.advance(SECOND);
    assert_eq!(forwarded(&sent, "w1"), ["bad"]);
    let sent = fail(&mut h, "w1", "bad");
    let reqs = requests(&sent, "w1");
    let ids: Vec<&str> = reqs.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(ids, ["b2/on-complete"], "{sent:?}");
    let arg = &reqs[0].1[1]["args"][0];
    assert_eq!(
        (
            arg["succeeded"].clone(),
            arg["failed"].clone(),
            arg["failed_ids"].clone()
        ),
        (json!(1), json!(1), json!(["bad"]))
    );
    let v = view(&mut h, "b2");
    assert_eq!(
        (v["batch"]["failed"].clone(), v["batch"]["total"].clone()),
        (json!(1), json!(2))
    );
    assert_eq!(v["batch"]["callbacks"]["on_success"]["state"], "skipped");
    assert_eq!(accepted_count(&h.journal, "b2/on-success"), 0);
}

/// After close a REQUEST naming the batch is refused `batch-closed`, as
/// one naming no batch; open and close sent again are acknowledged; an
/// open of a held id with other callbacks, a bad spec, a close of an
/// unknown batch are refused, typed; nothing of a refusal is journaled.
#[test]
fn add_after_close_and_bad_batch_commands_are_refused() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    open(&mut h, "b3");
    h.request("c1", "in", "default", "batch:b3");
    let sent = open(&mut h, "b3");
    assert!(
        to(&sent, Frontend, "c1").iter().any(|m| is_ack_of(m, "b3")),
        "open again"
    );
    close(&mut h, "b3");
    let sent = close(&mut h, "b3");
    assert!(
        to(&sent, Frontend, "c1").iter().any(|m| is_ack_of(m, "b3")),
        "close again"
    );
    let before = h.journal.len();
    for (msgid, headers) in [("late", "batch:b3"), ("nobatch", "batch:zz")] {
        let sent = h.request("c1", msgid, "default", headers);
        let rj = rejects(&sent, "c1");
        assert_eq!(rj.len(), 1, "{sent:?}");
        assert_eq!(rj[0].reason, RejectReason::BatchClosed, "{msgid}");
    }
    let other = json!({ "op": "open", "on_complete": callback("x") });
    let bad = [
        ("b3", other, RejectReason::DuplicateMsgid),
        ("zz", json!({ "op": "close" }), RejectReason::NotFound),
        ("b4", json!({ "op": "shut" }), RejectReason::Malformed),
        (
            "b4",
            json!({ "op": "open", "on_sucess": {} }),
            RejectReason::Malformed,
        ),
        ("b/5", json!({ "op": "open" }), RejectReason::Malformed),
        (
            "b6",
            json!({ "op": "open", "on_success": { "msg": ["shell", {"argv": ["true"]}] } }),
            RejectReason::Malformed,
        ),
    ];
    for (id, spec, reason) in bad {
        let sent = batch_cmd(&mut h, "c1", id, spec);
        let rj = rejects(&sent, "c1");
        assert_eq!(rj.len(), 1, "{id}: {sent:?}");
        assert_eq!(rj[0].reason, reason, "{id}");
    }
    assert_eq!(h.journal.len(), before);
    assert_eq!(counts(&mut h, "b3"), (1, 0, 0, 1));
    // An empty batch closed runs its callbacks at once.
    open(&mut h, "empty");
    let sent = close(&mut h, "empty");
    let ids: Vec<String> = requests(&sent, "w1").into_iter().map(|r| r.0).collect();
    assert!(ids.is_empty(), "w1 is busy with 'in': {ids:?}");
    assert_eq!(h.r.buffered_count(), 2, "{sent:?}");
    assert_eq!(view(&mut h, "empty")["batch"]["state"], "finished");
}

/// kill -9 twice: with jobs pending (the new router counts the restored
/// jobs again and keeps the ended ones' counts), then after the
/// callbacks were accepted (they are restored jobs, not submitted again;
/// the callbacks and the row's finished state are one journal batch; the
/// finished batch is still shown).
#[test]
fn restore_counts_again_and_runs_each_callback_once() {
    let mut h = durable();
    worker(&mut h, "w1", "", 8);
    open(&mut h, "b7");
    for j in ["j1", "j2", "j3"] {
        h.request("c1", j, "default", "batch:b7");
    }
    ok(&mut h, "w1", "j1");
    fail(&mut h, "w1", "j2");
    close(&mut h, "b7");
    // kill -9: only the journal survives.
    let mut h2 = durable();
    let mut out = Vec::new();
    let c = h2.r.restore(restored_from(&h.journal), h2.now, &mut out);
    assert_eq!((c.jobs, c.batches), (1, 1));
    assert_eq!(counts(&mut h2, "b7"), (1, 1, 1, 3));
    assert_eq!(view(&mut h2, "b7")["batch"]["state"], "closed");
    worker(&mut h2, "w2", "", 8);
    let sent = ok(&mut h2, "w2", "j3");
    let ids: Vec<String> = requests(&sent, "w2").into_iter().map(|r| r.0).collect();
    assert_eq!(ids, ["b7/on-complete"]);
    // Killed again with the callback in flight.
    let all = [h.journal.clone(), h2.journal.clone()].concat();
    let mut h3 = durable();
    let c = h3.r.restore(restored_from(&all), h3.now, &mut out);
    assert_eq!((c.jobs, c.batches), (1, 0));
    // Finished, and still known after the restart, with its counts.
    let v = view(&mut h3, "b7");
    assert_eq!(v["batch"]["state"], "finished", "{v}");
    assert_eq!(counts(&mut h3, "b7"), (0, 2, 1, 3));
    worker(&mut h3, "w3", "", 8);
    let sent = ok(&mut h3, "w3", "b7/on-complete");
    assert!(requests(&sent, "w3").is_empty());
    let all = [all, h3.journal.clone()].concat();
    assert_eq!(accepted_count(&all, "b7/on-complete"), 1);
    assert_eq!(accepted_count(&all, "b7/on-success"), 0);
}

/// A batch closed with nothing pending whose router died before the
/// callbacks were written (its row says closed, no job restored): the
/// new router submits them at start.
#[test]
fn restored_closed_batch_with_nothing_pending_submits_its_callbacks() {
    let mut h = durable();
    let mut b = crate::batch::Batch::open(
        "b8",
        None,
        Some(serde_json::from_value(callback("c")).unwrap()),
        String::new(),
        1,
    )
    .unwrap();
    b.closed_unix_ms = Some(2);
    b.succeeded = 4;
    let rows = [Record::PutState {
        kind: StateKind::Batch,
        id: "b8".into(),
        blob: b.encode(),
    }];
    let mut out = Vec::new();
    let c = h.r.restore(restored_from(&rows), h.now, &mut out);
    assert_eq!((c.jobs, c.batches), (0, 0));
    assert_eq!(h.r.buffered_count(), 1);
    worker(&mut h, "w1", "", 1);
    assert_eq!(accepted_count(&h.journal, "b8/on-complete"), 1);
    assert!(h.journal.iter().any(|r| matches!(r,
        Record::PutState { kind: StateKind::Batch, id, blob }
            if id == "b8" && crate::batch::Batch::decode(blob).unwrap().finished_unix_ms.is_some())));
}

/// A failed job of an open batch run again (dead-retry) is pending again,
/// not a new job; its success then counts as one.
#[test]
fn dead_retry_of_a_failed_job_is_pending_again_not_new() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    open(&mut h, "b9");
    h.request("c1", "x", "default", "batch:b9");
    fail(&mut h, "w1", "x");
    assert_eq!(counts(&mut h, "b9"), (0, 0, 1, 1));
    let req = serde_json::to_vec(&json!({ "op": "requeue", "msgid": "x" })).unwrap();
    let v = admin(&mut h, Command::Admin { request: req });
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(counts(&mut h, "b9"), (1, 0, 0, 1));
    ok(&mut h, "w1", "x");
    assert_eq!(counts(&mut h, "b9"), (0, 1, 0, 1));
}

/// The journal fails while the last job's end accepts the callbacks: they
/// are taken out with their failed batch, accepted again, and once the
/// journal works again each is written and run once.
#[test]
fn callbacks_of_a_failed_journal_batch_are_accepted_again_once() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    open(&mut h, "bj");
    h.request("c1", "j", "default", "batch:bj");
    close(&mut h, "bj");
    h.fail_journal = Some("disk full".into());
    let sent = ok(&mut h, "w1", "j");
    assert!(
        requests(&sent, "w1").is_empty(),
        "nothing dispatched while failing"
    );
    assert_eq!(view(&mut h, "bj")["batch"]["state"], "finished");
    h.fail_journal = None;
    let mut sent = Vec::new();
    for _ in 0..20 {
        sent.extend(h.advance(SECOND));
    }
    let ids: Vec<String> = requests(&sent, "w1").into_iter().map(|r| r.0).collect();
    assert_eq!(ids, ["bj/on-success"], "{sent:?}");
    ok(&mut h, "w1", "bj/on-success");
    assert_eq!(accepted_count(&h.journal, "bj/on-success"), 1);
    assert_eq!(accepted_count(&h.journal, "bj/on-complete"), 1);
    assert!(h.journal.iter().any(|r| matches!(r,
        Record::PutState { kind: StateKind::Batch, id, blob }
            if id == "bj" && crate::batch::Batch::decode(blob).unwrap().finished_unix_ms.is_some())));
}

/// A job of a batch whose journal batch fails was never accepted: it is
/// not pending (its client gets `journal-unavailable`).
#[test]
fn a_job_refused_by_a_failed_journal_batch_is_not_pending() {
    let mut h = durable();
    open(&mut h, "bk");
    h.fail_journal = Some("disk full".into());
    let sent = h.request("c1", "m", "default", "batch:bk");
    let rj = rejects(&sent, "c1");
    assert_eq!(rj.len(), 1, "{sent:?}");
    assert_eq!(rj[0].reason, RejectReason::JournalUnavailable);
    h.fail_journal = None;
    assert_eq!(counts(&mut h, "bk"), (0, 0, 0, 0));
}

/// Only the last `FINISHED_KEPT` finished batches are kept: the oldest's
/// row is deleted when one more finishes, and a restart keeps the same.
#[test]
fn finished_batches_past_the_last_1000_are_forgotten_rows_deleted() {
    let mut h = durable();
    let n = crate::router::batch::FINISHED_KEPT + 1;
    for i in 0..n {
        let id = format!("f{i}");
        batch_cmd(&mut h, "c1", &id, json!({ "op": "open" }));
        close(&mut h, &id);
    }
    assert!(h.journal.iter().any(|r| matches!(r,
        Record::DeleteState { kind: StateKind::Batch, id } if id == "f0")));
    assert_eq!(view(&mut h, "f0")["error"]["kind"], "not-found");
    let mut h2 = durable();
    let mut out = Vec::new();
    h2.r.restore(restored_from(&h.journal), h2.now, &mut out);
    assert_eq!(
        view(&mut h2, &format!("f{}", n - 1))["batch"]["state"],
        "finished"
    );
    assert_eq!(view(&mut h2, "f1")["batch"]["state"], "finished");
}

fn cancel(h: &mut H, id: &str) -> Value {
    let req = serde_json::to_vec(&json!({ "op": "cancel", "msgid": id })).unwrap();
    admin(h, Command::Admin { request: req })
}

/// Admin `cancel` of a batch: closed (no job joins), its waiting jobs
/// cancelled at once, its running one stopped by its job manager; they
/// count failed, so on_success is skipped and on_complete runs once, when
/// the running one has stopped; cancelling it again is a conflict.
#[test]
fn cancelling_a_batch_cancels_its_jobs_and_runs_on_complete_once() {
    let mut h = durable();
    h.inform("w1", "", &["job-ack", "cancel"]);
    h.ready("w1");
    open(&mut h, "b9");
    for j in ["j1", "j2", "j3"] {
        h.request("c1", j, "default", "batch:b9");
    }
    ok(&mut h, "w1", "j1");
    // One slot: j2 runs, j3 waits.
    assert_eq!(h.r.inflight_count(), 1);
    let v = cancel(&mut h, "b9");
    assert_eq!(v["state"], "cancelling", "{v}");
    assert_eq!(v["jobs"][0]["msgid"], "j2");
    assert_eq!(v["jobs"][0]["state"], "cancelling");
    assert_eq!(v["jobs"][1]["msgid"], "j3");
    assert_eq!(v["jobs"][1]["state"], "cancelled");
    let b = view(&mut h, "b9")["batch"].clone();
    assert_eq!(b["state"], "closed", "{b}");
    assert!(b["cancelled_at_unix_ms"].is_u64(), "{b}");
    assert_eq!(counts(&mut h, "b9"), (1, 1, 1, 3));
    // No job joins a cancelled batch.
    let sent = h.request("c1", "j4", "default", "batch:b9");
    let rj = rejects(&sent, "c1");
    assert_eq!(rj.len(), 1, "{sent:?}");
    assert_eq!(rj[0].reason, RejectReason::BatchClosed);
    // j2's job manager stops it: the batch ends, on_complete only.
    let e = r#"{"error": {"kind": "cancelled", "message": "cancelled by the router"}}"#;
    let mut sent = h.reply("w1", "j2", e, Some(ResultStatus::Failed));
    sent.extend(h.ready("w1"));
    let reqs = requests(&sent, "w1");
    let ids: Vec<&str> = reqs.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(ids, ["b9/on-complete"], "{sent:?}");
    assert_eq!(
        reqs[0].1[1]["args"][0],
        json!({"batch": "b9", "event": "complete", "total": 3, "succeeded": 1,
               "failed": 2, "failed_ids": ["j3", "j2"]})
    );
    assert_eq!(view(&mut h, "b9")["batch"]["state"], "finished");
    let req = serde_json::to_vec(&json!({ "op": "cancel", "msgid": "b9" })).unwrap();
    let sent = h.msg(Admin, "adm", "admin:2", Command::Admin { request: req });
    let r = to(&sent, Admin, "adm");
    let Command::Reply(r) = &r[0].command else {
        panic!("{sent:?}")
    };
    let v: Value = serde_json::from_slice(&r.payload).unwrap();
    assert_eq!(v["error"]["kind"], "conflict", "{v}");
    assert_eq!(accepted_count(&h.journal, "b9/on-complete"), 1);
    assert_eq!(accepted_count(&h.journal, "b9/on-success"), 0);
}

/// A router killed while a cancelled batch's running job was being
/// stopped: the new one restores the batch cancelled, cancels the
/// restored job instead of running it again, and runs on_complete once.
#[test]
fn a_batch_cancelled_before_a_restart_stays_cancelled() {
    let mut h = durable();
    h.inform("w1", "", &["job-ack", "cancel"]);
    h.ready("w1");
    open(&mut h, "b10");
    h.request("c1", "j1", "default", "batch:b10");
    assert_eq!(cancel(&mut h, "b10")["state"], "cancelling");
    // kill -9: only the journal survives.
    let mut h2 = durable();
    let mut out = Vec::new();
    let c = h2.r.restore(restored_from(&h.journal), h2.now, &mut out);
    assert_eq!(
        (c.jobs, c.batches),
        (1, 0),
        "j1 restored, the batch finished"
    );
    h2.inform("w2", "", &["job-ack", "cancel"]);
    let mut sent = Vec::new();
    for _ in 0..4 {
        sent.extend(h2.ready("w2"));
    }
    let ids: Vec<String> = requests(&sent, "w2").into_iter().map(|r| r.0).collect();
    assert_eq!(ids, ["b10/on-complete"], "j1 is not run again");
    let b = view(&mut h2, "b10")["batch"].clone();
    assert_eq!(b["state"], "finished", "{b}");
    assert_eq!(b["failed"], 1, "{b}");
    assert!(b["cancelled_at_unix_ms"].is_u64(), "{b}");
    let all = [h.journal.clone(), h2.journal.clone()].concat();
    assert_eq!(accepted_count(&all, "b10/on-complete"), 1);
}
