//! Completion (`router/completion.rs`): REPLYs, RESULTs, retries and their
//! backoff, REPLYs across a job manager reconnect.

use super::*;
use crate::router::MAX_REPLY_CREDIT;

// ----- completion -----------------------------------------------------------

#[test]
fn reply_completes_and_result_goes_to_reply_requested_client() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c1", "j1", "default", "reply-requested");
    let sent = h.reply("w1", "j1", r#"{"value": 1}"#, Some(ResultStatus::Ok));
    let rs = results(&sent, "c1");
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].orig_msgid, "j1");
    assert_eq!(rs[0].status, ResultStatus::Ok);
    assert_eq!(rs[0].payload, br#"{"value": 1}"#);
    assert_eq!(h.r.inflight_count(), 0);
    assert_eq!(h.r.stats().completed, 1);
}

#[test]
fn result_status_comes_from_third_frame_and_defaults_to_ok() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 2);
    h.request("c1", "j1", "default", "reply-requested");
    h.request("c1", "j2", "default", "reply-requested");
    // 0.3.13 two-frame REPLY
    let rs = results(&h.reply("w1", "j1", r#"{"value": 2}"#, None), "c1");
    assert_eq!(rs[0].status, ResultStatus::Ok);
    let rs = results(
        &h.reply(
            "w1",
            "j2",
            r#"{"error": {"kind": "exception", "message": "x"}}"#,
            Some(ResultStatus::Failed),
        ),
        "c1",
    );
    assert_eq!(rs[0].status, ResultStatus::Failed);
    assert_eq!(h.r.stats().failed, 1);
}

#[test]
fn no_result_without_reply_requested() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c1", "j1", "default", "");
    let sent = h.reply("w1", "j1", r#"{"value": 1}"#, Some(ResultStatus::Ok));
    assert!(sent.is_empty());
    assert_eq!(h.r.stats().completed, 1);
    assert_eq!(h.r.inflight_count(), 0);
}

#[test]
fn legacy_ready_completes_oldest_job_without_pending_reply() {
    let mut h = H::new();
    h.inform("old", "", &[]); // no job-ack
    for _ in 0..3 {
        h.ready("old");
    }
    h.request("c", "rr", "default", "reply-requested");
    h.request("c", "f1", "default", "");
    h.request("c", "f2", "default", "");
    assert_eq!(h.r.inflight_count(), 3);
    // READY: completes f1 (oldest fire-and-forget), rr still waits.
    h.ready("old");
    assert_eq!(h.r.inflight_count(), 2);
    assert_eq!(h.r.stats().completed, 1);
    // The REPLY of rr completes it precisely and forwards the result.
    let sent = h.reply("old", "rr", r#"{"value": 1}"#, None);
    assert_eq!(results(&sent, "c").len(), 1);
    // The READY after that REPLY frees rr's slot: f2 is still running.
    h.ready("old");
    assert_eq!(h.r.inflight_count(), 1);
    assert_eq!(h.r.stats().completed, 2);
    h.ready("old"); // f2's READY
    assert_eq!(h.r.inflight_count(), 0);
    assert_eq!(h.r.stats().completed, 3);
    // Further READYs just add slots.
    h.ready("old");
    assert_eq!(h.r.stats().completed, 3);
}

#[test]
fn job_ack_worker_ready_does_not_complete_anything() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "j", "default", "");
    h.ready("w1");
    assert_eq!(h.r.inflight_count(), 1);
    h.reply("w1", "j", "{}", Some(ResultStatus::Ok));
    assert_eq!(h.r.inflight_count(), 0);
}

#[test]
fn seed_form_reply_without_msgid_completes_oldest_reply_requested_job() {
    let mut h = H::new();
    h.inform("old", "", &[]);
    h.ready("old");
    h.ready("old");
    h.request("c", "a", "default", "");
    h.request("c", "b", "default", "reply-requested");
    let r = Reply {
        payload: br#"{"value": 9}"#.to_vec(),
        orig_msgid: None,
        status: None,
        credit: 0,
    };
    let sent = h.msg(Backend, "old", "x", Command::Reply(r));
    let rs = results(&sent, "c");
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].orig_msgid, "b");
}

#[test]
fn late_or_duplicate_reply_is_ignored_never_forwarded_twice() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c1", "j1", "default", "reply-requested");
    assert_eq!(results(&h.reply("w1", "j1", "{}", None), "c1").len(), 1);
    assert!(h.reply("w1", "j1", "{}", None).is_empty());
    assert!(h.reply("w1", "never-sent", "{}", None).is_empty());
    // A REPLY from another job manager for a job not on it is ignored
    // (it does not hold the job: no take-back key); the REPLY from the
    // worker it ran on completes it.
    worker(&mut h, "w2", "", 1);
    h.request("c1", "j2", "default", "reply-requested");
    let on = if h
        .r
        .pool
        .get(h.r.pool.id_of(b"w1").unwrap())
        .unwrap()
        .inflight
        .is_empty()
    {
        ("w2", "w1")
    } else {
        ("w1", "w2")
    };
    assert!(h.reply(on.1, "j2", "{}", None).is_empty());
    assert_eq!(h.r.stats().foreign_claims, 1);
    assert_eq!(results(&h.reply(on.0, "j2", "{}", None), "c1").len(), 1);
    assert_eq!(h.r.stats().results_forwarded, 2);
}

#[test]
fn client_gone_leaks_nothing() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("gone", "j1", "default", "reply-requested");
    let sent = h.reply("w1", "j1", "{}", None);
    assert_eq!(results(&sent, "gone").len(), 1);
    let out = h.input(Input::SendFailed {
        socket: Frontend,
        identity: b"gone".to_vec(),
        reason: SendFailure::HostUnreachable,
    });
    assert!(out.is_empty());
    assert!(h.r.unfinished_jobs().is_empty());
    assert_eq!(h.r.inflight_count(), 0);
    assert_eq!(h.r.worker_count(), 1);
}

// ----- retries --------------------------------------------------------------

#[test]
fn failed_reply_with_retry_count_retries_with_doubling_backoff_then_dead_letters() {
    let mut h = H::with(Config {
        journal: true,
        ..Config::default()
    });
    worker(&mut h, "w1", "", 1);
    h.request("c", "r", "default", "reply-requested,retry-count:2");
    let fail = r#"{"error": {"kind": "exception", "message": "boom"}}"#;
    // try 1 fails → retry after 1 s
    let sent = h.reply("w1", "r", fail, Some(ResultStatus::Failed));
    assert!(results(&sent, "c").is_empty());
    assert!(forwarded(&h.ready("w1"), "w1").is_empty());
    assert_eq!(h.r.delayed_count(), 1);
    assert!(forwarded(&h.advance(SECOND - us(1)), "w1").is_empty());
    assert_eq!(forwarded(&h.advance(us(1)), "w1"), vec!["r"]);
    // try 2 fails → retry after 2 s
    h.reply("w1", "r", fail, Some(ResultStatus::Failed));
    h.ready("w1");
    assert!(forwarded(&h.advance(2 * SECOND - us(1)), "w1").is_empty());
    assert_eq!(forwarded(&h.advance(us(1)), "w1"), vec!["r"]);
    // try 3 fails → retries exhausted → dead letter, failed RESULT with the last error
    let sent = h.reply("w1", "r", fail, Some(ResultStatus::Failed));
    let rs = results(&sent, "c");
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].status, ResultStatus::Failed);
    // The last error, with `attempts` counting the executions (3 = 1 + 2
    // retries: the router is the only one retrying).
    let v: serde_json::Value = serde_json::from_slice(&rs[0].payload).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"error": {"kind": "exception", "message": "boom", "attempts": 3}})
    );
    assert_eq!(h.r.stats().retried, 2);
    assert_eq!(h.r.stats().dead_lettered, 1);
    assert!(h.r.unfinished_jobs().is_empty());
    // The journal keeps why it died (the last error), so that a restart
    // lists it too.
    let journaled = h.journal.iter().find_map(|r| match r {
        Record::DeadLettered { msgid, error, .. } if msgid == "r" => Some(error.clone()),
        _ => None,
    });
    assert_eq!(journaled, Some(Some(rs[0].payload.clone())));
}

#[test]
fn retry_that_succeeds_gives_ok_result() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "r", "default", "reply-requested,retry-count:5");
    h.reply("w1", "r", "{}", Some(ResultStatus::Failed));
    h.ready("w1");
    h.advance(SECOND);
    let rs = results(
        &h.reply("w1", "r", r#"{"value": 1}"#, Some(ResultStatus::Ok)),
        "c",
    );
    assert_eq!(rs[0].status, ResultStatus::Ok);
    assert_eq!(h.r.stats().dead_lettered, 0);
}

#[test]
fn backoff_doubles_and_is_capped() {
    let cfg = Config {
        retry_backoff_base: us(100),
        retry_backoff_max: us(500),
        ..Config::default()
    };
    assert_eq!(
        (1..=5).map(|n| cfg.backoff(n)).collect::<Vec<_>>(),
        [100, 200, 400, 500, 500].map(us)
    );
    assert_eq!(cfg.backoff(1000), us(500));
    let d = Config::default();
    assert_eq!(d.backoff(1), SECOND);
    assert_eq!(d.backoff(10), 60 * SECOND);
}

#[test]
fn failed_reply_without_retry_count_completes_as_failed() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "f", "default", "reply-requested");
    let rs = results(&h.reply("w1", "f", "{}", Some(ResultStatus::Failed)), "c");
    assert_eq!(rs[0].status, ResultStatus::Failed);
    assert_eq!(h.r.stats().dead_lettered, 0);
    assert_eq!(h.r.stats().failed, 1);
}

// ----- REPLY across a job manager reconnect ---------------------------------

#[test]
fn reply_from_new_identity_completes_job_in_flight_on_old_identity() {
    let mut h = H::new();
    worker(&mut h, "old", "", 1);
    h.request("c", "j1", "default", "reply-requested");
    assert_eq!(h.r.inflight_count(), 1);
    // The job manager reconnects (new identity) before the router notices.
    reconnected(&mut h, "old", "new", 1);
    let sent = h.reply("new", "j1", r#"{"value": 1}"#, Some(ResultStatus::Ok));
    let rs = results(&sent, "c");
    assert_eq!(rs.len(), 1, "{sent:?}");
    assert_eq!(rs[0].payload, br#"{"value": 1}"#);
    assert_eq!(h.r.inflight_count(), 0);
    assert!(h.r.unfinished_jobs().is_empty());
    // Slots come from READYs only: the old worker's count is untouched.
    let old = h.r.pool.get(h.r.pool.id_of(b"old").unwrap()).unwrap();
    assert_eq!(old.slots, 0);
    // The old identity times out later: nothing is redelivered.
    let mut sent = Vec::new();
    for _ in 0..20 {
        h.heartbeat("new");
        sent.extend(h.advance(SECOND));
    }
    assert_eq!(h.r.worker_count(), 1);
    assert!(forwarded(&sent, "new").is_empty(), "{sent:?}");
    // A second REPLY (from either identity) is ignored: one RESULT only.
    assert!(results(&h.reply("new", "j1", "{}", None), "c").is_empty());
    assert_eq!(h.r.stats().results_forwarded, 1);
    assert_eq!(h.r.stats().completed, 1);
}

#[test]
fn reply_from_new_identity_completes_job_requeued_after_old_worker_timed_out() {
    let mut h = H::new();
    worker(&mut h, "old", "", 1);
    h.request("c", "j1", "default", "reply-requested");
    // The new connection registers but has no free slot yet.
    reconnected(&mut h, "old", "new", 0);
    for _ in 0..10 {
        h.heartbeat("new");
        h.advance(SECOND);
    }
    assert_eq!(h.r.worker_count(), 1, "old identity timed out");
    assert_eq!(h.r.buffered_count(), 1, "job requeued");
    let sent = h.reply("new", "j1", "{}", Some(ResultStatus::Ok));
    assert_eq!(results(&sent, "c").len(), 1, "{sent:?}");
    assert_eq!(h.r.buffered_count(), 0);
    assert!(h.r.unfinished_jobs().is_empty());
    // The next READY does not redeliver it.
    let sent = h.ready("new");
    assert!(forwarded(&sent, "new").is_empty());
    assert!(h.reply("new", "j1", "{}", None).is_empty());
    assert_eq!(h.r.stats().results_forwarded, 1);
}

#[test]
fn reply_from_new_identity_for_job_redelivered_elsewhere_completes_once() {
    let mut h = H::new();
    // Redelivered to another job manager, which fails it: waits for a retry.
    lost_then_failed(
        &mut h,
        "reply-requested,retry-count:3",
        "old",
        "other",
        "f1",
    );
    // The first run's REPLY arrives on the old job manager's new identity.
    reconnected(&mut h, "old", "new", 0);
    let sent = h.reply("new", "j1", r#"{"value": 2}"#, Some(ResultStatus::Ok));
    assert_eq!(results(&sent, "c").len(), 1);
    assert_eq!(h.r.delayed_count(), 0);
    assert!(h.r.store.find("j1").is_none());
    let sent = h.advance(10 * SECOND);
    assert!(forwarded(&sent, "other").is_empty());
}

#[test]
fn legacy_worker_reply_for_job_elsewhere_is_still_ignored() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "j1", "default", "reply-requested");
    h.inform("legacy", "", &[]);
    assert!(h.reply("legacy", "j1", "{}", None).is_empty());
    assert_eq!(h.r.inflight_count(), 1);
}

// ----- credit in a REPLY (`reply-credit`, router/peers.rs "Slots") ----------

/// A REPLY carrying `credit` READYs (the fourth frame).
fn reply_with_credit(h: &mut H, worker: &str, orig: &str, credit: u32) -> Vec<Sent> {
    let r = Reply {
        credit,
        ..Reply::result(b"{}".to_vec(), orig.to_string(), ResultStatus::Ok)
    };
    h.msg(Backend, worker, &format!("rep-{orig}"), Command::Reply(r))
}

#[test]
fn a_reply_with_credit_completes_its_job_then_counts_as_that_many_readys() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c1", "j1", "default", "reply-requested");
    h.request("c1", "j2", "default", "");
    h.request("c1", "j3", "default", "");
    assert_eq!(h.r.inflight_count(), 1, "one slot: j1 runs, j2 and j3 wait");
    // The REPLY of j1 with one READY in it: j1's result, and j2 at once
    // on the slot it freed (no READY message).
    let sent = reply_with_credit(&mut h, "w1", "j1", 1);
    assert_eq!(results(&sent, "c1").len(), 1);
    assert_eq!(forwarded(&sent, "w1"), ["j2"]);
    assert_eq!((h.r.stats().completed, h.r.inflight_count()), (1, 1));
    // Two READYs in one REPLY: j3, and a free slot left over.
    let sent = reply_with_credit(&mut h, "w1", "j2", 2);
    assert_eq!(forwarded(&sent, "w1"), ["j3"]);
    let sent = h.request("c1", "j4", "default", "");
    assert_eq!(
        forwarded(&sent, "w1"),
        ["j4"],
        "the second READY was a slot"
    );
    // A REPLY without credit frees nothing: j5 waits for a READY.
    h.reply("w1", "j3", "{}", Some(ResultStatus::Ok));
    let sent = h.request("c1", "j5", "default", "");
    assert!(forwarded(&sent, "w1").is_empty(), "{sent:?}");
    assert_eq!(forwarded(&h.ready("w1"), "w1"), ["j5"]);
}

#[test]
fn reply_credit_is_bounded_and_counts_for_a_late_reply_too() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c1", "j1", "default", "");
    h.reply("w1", "j1", "{}", Some(ResultStatus::Ok));
    // The slot is not free until a READY: k0 waits.
    assert!(forwarded(&h.request("c1", "k0", "default", ""), "w1").is_empty());
    // A REPLY of a job not in flight (a duplicate) still carries its READYs.
    let sent = reply_with_credit(&mut h, "w1", "j1", 1);
    assert_eq!(forwarded(&sent, "w1"), ["k0"]);
    assert!(forwarded(&h.request("c1", "k1", "default", ""), "w1").is_empty());
    // A credit past the bound counts as the bound: k1 takes one READY of
    // it, and the rest are free slots.
    let r = Reply {
        credit: u32::MAX,
        ..Reply::result(b"{}".to_vec(), "k0".into(), ResultStatus::Ok)
    };
    let sent = h.msg(Backend, "w1", "rep-big", Command::Reply(r));
    assert_eq!(forwarded(&sent, "w1"), ["k1"]);
    let mut taken = 0;
    for i in 0..MAX_REPLY_CREDIT + 10 {
        let sent = h.request("c1", &format!("m{i}"), "default", "");
        taken += forwarded(&sent, "w1").len() as u32;
    }
    assert_eq!(taken, MAX_REPLY_CREDIT - 1);
}
