//! Flow control (`router/flow.rs`) on the fake clock: the headers, every
//! limit, no head-of-line blocking, fairness, priorities and aging, loss,
//! adoption, retries, the journal and a restart.

use super::*;
use serde_json::{json, Value};

const Q: &str = r#"[[10, "q"]]"#;

fn op(h: &mut H, req: Value) -> Value {
    let frames = crate::router::admin_request("adm-1", &req).encode_routed(b"adm".to_vec());
    let sent = h.frames(Admin, frames);
    let m = to(&sent, Admin, "adm");
    let Command::Reply(r) = &m[0].command else {
        panic!("no REPLY: {sent:?}")
    };
    serde_json::from_slice(&r.payload).unwrap()
}

fn ok(h: &mut H, req: Value) -> Value {
    let v = op(h, req.clone());
    assert_eq!(v["ok"], true, "{req} -> {v}");
    v
}

fn limits(h: &mut H, policy: Value) {
    let mut req = json!({"op": "limits-set", "queue": "q"});
    for (k, v) in policy.as_object().unwrap() {
        req[k] = v.clone();
    }
    ok(h, req);
}

/// Submit `msgid` of key `key` (`""`: none) to queue `q`; the msgids
/// dispatched by it.
fn submit(h: &mut H, msgid: &str, key: &str, extra: &str) -> Vec<String> {
    let mut headers = String::new();
    if !key.is_empty() {
        headers = format!("key:{key}");
    }
    if !extra.is_empty() {
        if !headers.is_empty() {
            headers.push(',');
        }
        headers.push_str(extra);
    }
    let sent = h.request("c", msgid, "q", &headers);
    sent.iter()
        .filter(|(s, _, _)| *s == Backend)
        .filter_map(|(_, _, m)| match &m.command {
            Command::Request(_) => Some(m.msgid.clone()),
            _ => None,
        })
        .collect()
}

fn dispatched(sent: &[Sent]) -> Vec<String> {
    sent.iter()
        .filter(|(s, _, _)| *s == Backend)
        .filter_map(|(_, _, m)| match &m.command {
            Command::Request(_) => Some(m.msgid.clone()),
            _ => None,
        })
        .collect()
}

fn done(h: &mut H, w: &str, msgid: &str) -> Vec<String> {
    dispatched(&h.reply(w, msgid, "{}", None))
}

fn waiting(h: &mut H, msgid: &str) -> String {
    let v = ok(h, json!({"op": "job", "msgid": msgid}));
    v["job"]["waiting"].as_str().unwrap_or("").to_string()
}

fn durable() -> H {
    H::with(Config {
        journal: true,
        epoch_unix_micros: 1_796_652_309_000_000,
        ..Config::default()
    })
}

// ----- headers ----------------------------------------------------------------

#[test]
fn key_and_priority_are_checked_at_intake_and_forwarded_unchanged() {
    let mut h = H::new();
    worker(&mut h, "w1", Q, 1);
    let long = format!("key:{}", "k".repeat(129));
    let sent = h.request("c", "j1", "q", &long);
    let r = rejects(&sent, "c");
    assert_eq!(r.len(), 1, "{sent:?}");
    assert_eq!(r[0].reason, RejectReason::Malformed);
    assert!(r[0].text.contains("128 bytes"), "{}", r[0].text);
    for bad in ["priority:10", "priority:x", "key:"] {
        let sent = h.request("c", "j2", "q", bad);
        assert_eq!(rejects(&sent, "c").len(), 1, "{bad}");
    }
    assert_eq!(h.r.stats().rejected_malformed, 4);
    let at_limit = format!("key:{},priority:9,x-other", "k".repeat(128));
    let sent = h.request("c", "j3", "q", &at_limit);
    let Command::Request(req) = &to(&sent, Backend, "w1")[0].command else {
        panic!("{sent:?}")
    };
    assert_eq!(req.headers.encode(), at_limit);
}

// ----- concurrency --------------------------------------------------------------

#[test]
fn concurrency_per_key_holds_and_other_keys_pass_the_held_ones() {
    let mut h = H::new();
    worker(&mut h, "w1", Q, 10);
    limits(&mut h, json!({"concurrency_per_key": 2}));
    let mut started = Vec::new();
    for i in 1..=5 {
        started.extend(submit(&mut h, &format!("a{i}"), "acme", ""));
    }
    // No head-of-line blocking: b's jobs go past acme's held ones.
    started.extend(submit(&mut h, "b1", "bolt", ""));
    started.extend(submit(&mut h, "b2", "bolt", ""));
    assert_eq!(started, ["a1", "a2", "b1", "b2"]);
    assert_eq!(waiting(&mut h, "a3"), "limited: key acme at 2/2 running");
    // A held job takes no slot: 6 of 10 slots are free.
    let v = admin(&mut h, Command::RouterShowWorkers);
    assert_eq!(v["connected_workers"]["w1"]["available_slots"], 6);
    // One ends, the next of the key starts, never more than 2.
    assert_eq!(done(&mut h, "w1", "a1"), ["a3"]);
    assert_eq!(done(&mut h, "w1", "b1"), Vec::<String>::new());
    assert_eq!(done(&mut h, "w1", "a2"), ["a4"]);
    assert_eq!(done(&mut h, "w1", "a3"), ["a5"]);
    let show = ok(&mut h, json!({"op": "limits-show", "queue": "q"}));
    let q = &show["limits"][0];
    assert_eq!(q["text"], "concurrency-per-key=2");
    assert_eq!(q["running"], 3);
    let acme = q["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key"] == "acme")
        .unwrap();
    assert_eq!(acme["running"], 2);
}

#[test]
fn queue_concurrency_holds_across_keys() {
    let mut h = H::new();
    worker(&mut h, "w1", Q, 10);
    limits(&mut h, json!({"concurrency": 3}));
    let mut started = Vec::new();
    for i in 1..=5 {
        started.extend(submit(&mut h, &format!("j{i}"), &format!("k{i}"), ""));
    }
    assert_eq!(started, ["j1", "j2", "j3"]);
    assert_eq!(waiting(&mut h, "j4"), "limited: queue q at 3/3 running");
    assert_eq!(done(&mut h, "w1", "j2"), ["j4"]);
    let snap = h.r.snapshot(h.now);
    let qv = snap.queues.iter().find(|q| q.name == "q").unwrap();
    assert_eq!(qv.flow_limited, 1);
    let text = crate::metrics::render(&snap);
    assert!(
        text.contains("emq_queue_flow_limited{queue=\"q\"} 1"),
        "{text}"
    );
    assert!(text.contains("emq_queue_flow_throttled_total{queue=\"q\"}"));
    assert!(!text.contains("k5"), "no series per key");
}

#[test]
fn a_lost_delivery_frees_its_slot_and_the_redelivery_counts_again() {
    let mut h = H::new();
    worker(&mut h, "w1", Q, 2);
    limits(&mut h, json!({"concurrency_per_key": 1}));
    assert_eq!(submit(&mut h, "a1", "acme", ""), ["a1"]);
    assert!(submit(&mut h, "a2", "acme", "").is_empty());
    // w1 dies: a1 is lost (counted no more), back at the front of acme.
    h.msg(Backend, "w1", "k", Command::Kbye);
    worker(&mut h, "w2", Q, 0);
    let sent = h.ready("w2");
    assert_eq!(dispatched(&sent), ["a1"], "redelivered first");
    let sent = h.ready("w2");
    assert!(dispatched(&sent).is_empty(), "a2 still held");
    assert_eq!(done(&mut h, "w2", "a1"), ["a2"]);
}

#[test]
fn a_heartbeat_timeout_is_a_detected_loss() {
    let mut h = H::new();
    worker(&mut h, "w1", Q, 1);
    worker(&mut h, "w2", Q, 1);
    limits(&mut h, json!({"concurrency_per_key": 1}));
    submit(&mut h, "a1", "acme", "");
    submit(&mut h, "a2", "acme", "");
    assert_eq!(h.r.inflight_count(), 1);
    // w2 keeps talking, w1 goes silent: a1 is lost and runs on w2.
    let mut started = Vec::new();
    for _ in 0..12 {
        h.now += SECOND;
        h.heartbeat("w2");
        started.extend(dispatched(&h.tick()));
    }
    assert_eq!(started, ["a1"]);
    assert_eq!(h.r.worker_count(), 1);
    assert_eq!(done(&mut h, "w2", "a1"), Vec::<String>::new());
    let sent = h.ready("w2");
    assert_eq!(dispatched(&sent), ["a2"]);
}

#[test]
fn a_job_taken_back_after_a_reconnect_keeps_counting() {
    let mut h = H::new();
    worker(&mut h, "w1", Q, 1);
    limits(&mut h, json!({"concurrency_per_key": 1}));
    submit(&mut h, "a1", "acme", "");
    submit(&mut h, "a2", "acme", "");
    // The job manager reconnects running a1 (RUNNING before its READYs).
    let key = format!("take-back={}", h.key("w1"));
    h.inform("w1b", Q, &["job-ack", &key]);
    h.msg(
        Backend,
        "w1b",
        "run",
        Command::Running {
            orig_msgids: vec!["a1".into()],
        },
    );
    h.msg(Backend, "w1", "k", Command::Kbye);
    let sent = h.ready("w1b");
    assert!(dispatched(&sent).is_empty(), "a1 still runs: a2 held");
    assert_eq!(done(&mut h, "w1b", "a1"), ["a2"]);
}

#[test]
fn a_failed_job_waiting_for_its_retry_does_not_count() {
    let mut h = H::new();
    worker(&mut h, "w1", Q, 3);
    limits(&mut h, json!({"concurrency_per_key": 1}));
    submit(&mut h, "a1", "acme", "retry-count:1");
    submit(&mut h, "a2", "acme", "");
    let sent = h.reply("w1", "a1", "{}", Some(ResultStatus::Failed));
    assert_eq!(dispatched(&sent), ["a2"]);
    // The retry comes back behind a2, and waits for it.
    let sent = h.advance(2 * SECOND);
    assert!(dispatched(&sent).is_empty());
    assert_eq!(done(&mut h, "w1", "a2"), ["a1"]);
}

// ----- rates --------------------------------------------------------------------

#[test]
fn rate_per_key_is_a_token_bucket_with_a_burst_of_n() {
    let mut h = durable();
    worker(&mut h, "w1", Q, 10);
    limits(&mut h, json!({"rate_per_key": "2/1"}));
    let mut started = Vec::new();
    for i in 1..=4 {
        started.extend(submit(&mut h, &format!("a{i}"), "acme", ""));
    }
    started.extend(submit(&mut h, "b1", "bolt", ""));
    assert_eq!(started, ["a1", "a2", "b1"], "burst of 2; bolt not held");
    let why = waiting(&mut h, "a3");
    assert!(
        why.starts_with("rate: key acme, next at 2026-12-07T14:21:49.500Z"),
        "{why}"
    );
    // One token every 0.5 s, in router time, on the flow timer.
    assert!(dispatched(&h.advance(SECOND / 2 - us(1))).is_empty());
    assert_eq!(dispatched(&h.advance(us(1))), ["a3"]);
    assert_eq!(dispatched(&h.advance(SECOND / 2)), ["a4"]);
}

#[test]
fn queue_rate_holds_every_key() {
    let mut h = H::new();
    worker(&mut h, "w1", Q, 10);
    limits(&mut h, json!({"rate": "1/1"}));
    assert_eq!(submit(&mut h, "a1", "a", ""), ["a1"]);
    assert!(submit(&mut h, "b1", "b", "").is_empty());
    assert!(waiting(&mut h, "b1").starts_with("rate: queue q, next at"));
    assert_eq!(dispatched(&h.advance(SECOND)), ["b1"]);
    let snap = h.r.snapshot(h.now);
    let qv = snap.queues.iter().find(|q| q.name == "q").unwrap();
    assert!(qv.flow_throttled >= 1);
}

// ----- order ----------------------------------------------------------------------

fn order(fair: bool) -> Vec<String> {
    let mut h = H::new();
    worker(&mut h, "w1", Q, 0);
    limits(&mut h, json!({"fair": fair, "concurrency": 100}));
    for i in 1..=4 {
        submit(&mut h, &format!("a{i}"), "a", "");
    }
    submit(&mut h, "b1", "b", "");
    submit(&mut h, "b2", "b", "");
    submit(&mut h, "c1", "c", "");
    let mut out = Vec::new();
    for _ in 0..7 {
        out.extend(dispatched(&h.ready("w1")));
    }
    out
}

#[test]
fn fair_takes_keys_in_turn_and_unfair_takes_the_oldest_first() {
    assert_eq!(order(true), ["a1", "b1", "c1", "a2", "b2", "a3", "a4"]);
    assert_eq!(order(false), ["a1", "a2", "a3", "a4", "b1", "b2", "c1"]);
}

#[test]
fn priority_goes_first_and_aging_bounds_the_wait() {
    let mut h = H::new();
    worker(&mut h, "w1", Q, 0);
    // No policy: priorities alone make the queue flow-controlled.
    submit(&mut h, "low", "", "");
    submit(&mut h, "mid", "", "priority:5");
    submit(&mut h, "high", "t", "priority:9");
    assert_eq!(dispatched(&h.ready("w1")), ["high"]);
    assert_eq!(dispatched(&h.ready("w1")), ["mid"]);
    // A stream of urgent jobs; `low` has waited PRIORITY_AGING: it goes
    // before the urgent ones that have not.
    h.now += crate::router::PRIORITY_AGING;
    submit(&mut h, "urgent", "", "priority:9");
    assert_eq!(dispatched(&h.ready("w1")), ["low"]);
    assert_eq!(dispatched(&h.ready("w1")), ["urgent"]);
    assert_eq!(h.r.buffered_count(), 0);
}

// ----- admin ------------------------------------------------------------------

#[test]
fn limits_set_merges_show_lists_and_clear_removes() {
    let mut h = H::new();
    let v = ok(
        &mut h,
        json!({"op": "limits-set", "queue": "q", "concurrency": 2, "rate": "10/1"}),
    );
    assert_eq!(v["text"], "concurrency=2,rate=10/1");
    let v = ok(
        &mut h,
        json!({"op": "limits-set", "queue": "q", "concurrency": 0, "fair": true}),
    );
    assert_eq!(v["text"], "rate=10/1,fair");
    let v = ok(&mut h, json!({"op": "limits-show"}));
    assert_eq!(v["limits"].as_array().unwrap().len(), 1);
    assert_eq!(
        v["limits"][0]["policy"],
        json!({"rate": "10/1", "fair": true})
    );
    let v = op(&mut h, json!({"op": "limits-set", "queue": "q"}));
    assert_eq!(v["error"]["kind"], "bad-request");
    let v = op(
        &mut h,
        json!({"op": "limits-set", "queue": "q", "rate": "0/1"}),
    );
    assert_eq!(v["error"]["kind"], "bad-request", "{v}");
    ok(&mut h, json!({"op": "limits-clear", "queue": "q"}));
    let v = op(&mut h, json!({"op": "limits-clear", "queue": "q"}));
    assert_eq!(v["error"]["kind"], "not-found");
    assert_eq!(
        ok(&mut h, json!({"op": "limits-show"}))["limits"],
        json!([])
    );
    assert!(h.r.policy("q").is_none());
}

#[test]
fn a_policy_set_while_jobs_run_counts_them() {
    let mut h = H::new();
    worker(&mut h, "w1", Q, 4);
    submit(&mut h, "a1", "acme", "");
    submit(&mut h, "a2", "acme", "");
    assert_eq!(h.r.inflight_count(), 2);
    limits(&mut h, json!({"concurrency_per_key": 2}));
    assert!(submit(&mut h, "a3", "acme", "").is_empty());
    assert_eq!(done(&mut h, "w1", "a1"), ["a3"]);
    // Cleared: the held ones go at once.
    submit(&mut h, "a4", "acme", "");
    let v = ok(&mut h, json!({"op": "limits-clear", "queue": "q"}));
    assert_eq!(v["cleared"], true);
    assert_eq!(h.r.inflight_count(), 3, "a2, a3, a4");
    assert_eq!(h.r.buffered_count(), 0);
}

#[test]
fn cancel_and_purge_take_waiting_flow_jobs() {
    let mut h = H::new();
    worker(&mut h, "w1", Q, 1);
    limits(&mut h, json!({"concurrency_per_key": 1}));
    submit(&mut h, "a1", "acme", "");
    submit(&mut h, "a2", "acme", "");
    submit(&mut h, "a3", "acme", "");
    ok(&mut h, json!({"op": "cancel", "msgid": "a2"}));
    assert_eq!(h.r.buffered_count(), 1);
    let v = ok(&mut h, json!({"op": "purge", "queue": "q"}));
    assert_eq!(v["purged"], 1);
    assert_eq!(h.r.buffered_count(), 0);
}

// ----- journal, restart -------------------------------------------------------------

/// What a store would give back at start from the records `h` committed.
fn restored_from(h: &H) -> Restored {
    let mut jobs: Vec<JobRecord> = Vec::new();
    let mut states: Vec<(crate::journal::StateKind, String, Vec<u8>)> = Vec::new();
    for r in &h.journal {
        match r {
            Record::Accepted(j) => jobs.push(j.clone()),
            Record::Attempt { msgid, attempts } => {
                if let Some(j) = jobs.iter_mut().find(|j| j.msgid == *msgid) {
                    j.attempts = *attempts;
                }
            }
            Record::Completed { msgid } => jobs.retain(|j| j.msgid != *msgid),
            Record::Finished { record, .. } => jobs.retain(|j| j.msgid != record.job.msgid),
            Record::PutState { kind, id, blob } => {
                states.retain(|(k, i, _)| !(k == kind && i == id));
                states.push((*kind, id.clone(), blob.clone()));
            }
            Record::DeleteState { kind, id } => states.retain(|(k, i, _)| !(k == kind && i == id)),
            _ => {}
        }
    }
    Restored {
        jobs,
        states,
        ..Restored::default()
    }
}

fn restart(h: &H, cfg: Config) -> H {
    let mut h2 = H::with(cfg);
    h2.now = h.now;
    let mut out = Vec::new();
    h2.r.restore(restored_from(h), h2.now, &mut out);
    h2.commit(&mut out);
    h2
}

#[test]
fn a_policy_is_journaled_and_comes_back_after_a_restart() {
    let mut h = durable();
    limits(&mut h, json!({"concurrency_per_key": 2, "fair": true}));
    let blob = h
        .journal
        .iter()
        .find_map(|r| match r {
            Record::PutState { kind, id, blob } if id == "q" => Some((*kind, blob.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(blob.0, crate::journal::StateKind::QueuePolicy);
    let h2 = restart(&h, h.r.config().clone());
    assert_eq!(
        h2.r.policy("q").map(|p| p.to_string()).as_deref(),
        Some("concurrency-per-key=2,fair")
    );
    // Cleared: deleted in the journal too.
    ok(&mut h, json!({"op": "limits-clear", "queue": "q"}));
    let h3 = restart(&h, h.r.config().clone());
    assert!(h3.r.policy("q").is_none());
}

#[test]
fn a_start_limit_replaces_the_journals_policy_and_is_journaled() {
    let mut h = durable();
    limits(&mut h, json!({"concurrency": 5}));
    let p = emqp_proto::PolicyChange::parse_items("concurrency-per-key=1")
        .unwrap()
        .apply(Default::default());
    let cfg = Config {
        limits: vec![("q".into(), p)],
        ..h.r.config().clone()
    };
    let mut h2 = restart(&h, cfg);
    assert_eq!(h2.r.policy("q"), Some(p));
    h2.tick();
    assert!(h2
        .journal
        .iter()
        .any(|r| matches!(r, Record::PutState { id, .. } if id == "q")));
}

#[test]
fn after_a_restart_a_job_that_may_run_holds_its_key_until_claimed_or_lost() {
    let mut h = durable();
    worker(&mut h, "w1", Q, 3);
    limits(&mut h, json!({"concurrency_per_key": 1}));
    assert_eq!(submit(&mut h, "a1", "acme", ""), ["a1"]);
    assert!(submit(&mut h, "a2", "acme", "").is_empty());
    assert_eq!(submit(&mut h, "b1", "bolt", ""), ["b1"]);
    // The first dispatch of a limited queue is journaled.
    assert!(h
        .journal
        .iter()
        .any(|r| matches!(r, Record::Attempt { msgid, attempts: 1 } if msgid == "a1")));
    // The router restarts; a1 and b1 may still run.
    let mut h2 = restart(&h, h.r.config().clone());
    assert_eq!(
        h2.r.buffered_count(),
        1,
        "a2 waits; a1, b1 presumed running"
    );
    assert!(waiting(&mut h2, "a1").starts_with("presumed running"));
    // The job manager comes back: RUNNING a1 (adopted), READYs. a2 is
    // held (a1 runs); b1 was not claimed.
    worker(&mut h2, "w9", Q, 0);
    h2.msg(
        Backend,
        "w9",
        "run",
        Command::Running {
            orig_msgids: vec!["a1".into()],
        },
    );
    assert!(dispatched(&h2.ready("w9")).is_empty());
    assert_eq!(waiting(&mut h2, "a2"), "limited: key acme at 1/1 running");
    // One peer timeout later b1 is taken for lost and runs again.
    h2.now += h2.r.config().peer_timeout();
    h2.heartbeat("w9");
    let sent = h2.tick();
    assert_eq!(dispatched(&sent), ["b1"]);
    // a1's REPLY frees acme: a2 runs.
    assert_eq!(done(&mut h2, "w9", "a1"), Vec::<String>::new());
    assert_eq!(dispatched(&h2.ready("w9")), ["a2"]);
}

#[test]
fn a_presumed_job_replied_after_the_restart_ends_there() {
    let mut h = durable();
    worker(&mut h, "w1", Q, 1);
    limits(&mut h, json!({"concurrency_per_key": 1}));
    submit(&mut h, "a1", "acme", "");
    submit(&mut h, "a2", "acme", "");
    let mut h2 = restart(&h, h.r.config().clone());
    worker(&mut h2, "w9", Q, 1);
    assert_eq!(done(&mut h2, "w9", "a1"), ["a2"]);
    assert_eq!(h2.r.stats().completed, 1);
}
