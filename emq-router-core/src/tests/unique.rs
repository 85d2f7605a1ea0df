//! Unique jobs (`router/unique.rs`): keys, windows, conflict rules,
//! journal records, restore, bounds.

use super::*;
use crate::journal::StateKind;
use emqp_proto::Duplicate;

fn durable() -> H {
    H::with(Config {
        journal: true,
        epoch_unix_micros: 1_700_000_000_000_000,
        ..Config::default()
    })
}

fn duplicates(sent: &[Sent], client: &str) -> Vec<Duplicate> {
    to(sent, Frontend, client)
        .into_iter()
        .filter_map(|m| match &m.command {
            Command::Duplicate(d) => Some(d.clone()),
            _ => None,
        })
        .collect()
}

fn acked(sent: &[Sent], client: &str, msgid: &str) -> bool {
    to(sent, Frontend, client)
        .into_iter()
        .any(|m| is_ack_of(m, msgid))
}

fn states(h: &H) -> Vec<Record> {
    h.journal
        .iter()
        .filter(|r| matches!(r, Record::PutState { .. } | Record::DeleteState { .. }))
        .cloned()
        .collect()
}

/// Without `unique-for` the key is taken while the job is unfinished: a
/// second REQUEST with it is acknowledged as the first job (DUPLICATE,
/// no new job, no journal record); with `reply-requested` its client gets
/// the first job's RESULT when it finishes. After that the key is free.
#[test]
fn existing_is_the_default_and_the_duplicate_gets_the_holders_result() {
    let mut h = durable();
    let sent = h.request("c1", "j1", "default", "unique-key:order-7");
    assert!(acked(&sent, "c1", "j1"));
    let before = h.journal.len();
    let sent = h.request("c2", "j2", "default", "reply-requested,unique-key:order-7");
    let d = duplicates(&sent, "c2");
    assert_eq!(d.len(), 1, "{sent:?}");
    assert_eq!(
        (d[0].orig_msgid.as_str(), d[0].existing_msgid.as_str()),
        ("j2", "j1")
    );
    assert!(!acked(&sent, "c2", "j2"));
    assert_eq!(h.r.buffered_count(), 1);
    assert_eq!(h.journal.len(), before, "a duplicate writes nothing");
    assert_eq!(h.r.stats().unique_duplicates, 1);
    worker(&mut h, "w1", "", 1);
    let sent = h.reply("w1", "j1", r#"{"value": 42}"#, Some(ResultStatus::Ok));
    let r = results(&sent, "c2");
    assert_eq!(r.len(), 1, "{sent:?}");
    assert_eq!(r[0].orig_msgid, "j1");
    assert_eq!(r[0].payload, br#"{"value": 42}"#);
    assert!(results(&sent, "c1").is_empty(), "c1 did not ask for it");
    assert_eq!(h.r.unique_keys(), 0);
    let sent = h.request("c2", "j3", "default", "unique-key:order-7");
    assert!(acked(&sent, "c2", "j3"), "the key is free again: {sent:?}");
    assert!(states(&h).is_empty(), "no window, no state row");
}

/// The holder's own client, asking for results, gets the RESULT once.
#[test]
fn the_holders_own_client_gets_its_result_once() {
    let mut h = durable();
    worker(&mut h, "w1", "", 0);
    h.request("c1", "j1", "default", "reply-requested,unique-key:k");
    h.request("c1", "j2", "default", "reply-requested,unique-key:k");
    h.ready("w1");
    let sent = h.reply("w1", "j1", "{}", Some(ResultStatus::Ok));
    assert_eq!(results(&sent, "c1").len(), 1, "{sent:?}");
}

/// With `unique-for:SECS` the key holds SECS from acceptance, also after
/// the job finished: its window is journaled in the same batch as the
/// job's `Accepted` record, a duplicate after the job finished gets the
/// kept result at once, and the window's end deletes the row and frees
/// the key.
#[test]
fn a_window_holds_the_key_after_the_job_finished_and_is_journaled() {
    let mut h = durable();
    let out = h.input(raw(
        "c1",
        "j1",
        "reply-requested,unique-key:mail-1,unique-for:60",
    ));
    let batch = out
        .iter()
        .find_map(|a| match a {
            Action::Journal(b) => Some(b.clone()),
            _ => None,
        })
        .expect("a batch");
    assert!(matches!(&batch.records[0], Record::Accepted(j) if j.msgid == "j1"));
    let Record::PutState { kind, id, blob } = &batch.records[1] else {
        panic!("{batch:?}")
    };
    assert_eq!((*kind, id.as_str()), (StateKind::UniqueKey, "mail-1"));
    let v: serde_json::Value = serde_json::from_slice(blob).unwrap();
    assert_eq!(v["msgid"], "j1");
    let accepted_ms = 1_700_000_000_000 + h.now.as_millis() as u64;
    assert_eq!(v["until_unix_ms"], accepted_ms + 60_000);
    worker(&mut h, "w1", "", 1);
    h.reply("w1", "j1", r#"{"value": "sent"}"#, Some(ResultStatus::Ok));
    assert_eq!(h.r.unique_keys(), 1, "the window keeps the key");
    h.advance(30 * SECOND);
    let sent = h.request("c2", "j2", "default", "reply-requested,unique-key:mail-1");
    assert_eq!(duplicates(&sent, "c2")[0].existing_msgid, "j1");
    let r = results(&sent, "c2");
    assert_eq!(r.len(), 1, "the kept result at once: {sent:?}");
    assert_eq!(
        (r[0].orig_msgid.as_str(), r[0].status),
        ("j1", ResultStatus::Ok)
    );
    assert_eq!(r[0].payload, br#"{"value": "sent"}"#);
    assert_eq!(
        h.r.poll_timeout().map(|t| t <= h.now + 30 * SECOND),
        Some(true)
    );
    h.advance(30 * SECOND);
    assert_eq!(h.r.unique_keys(), 0);
    assert!(matches!(
        states(&h).last(),
        Some(Record::DeleteState { kind: StateKind::UniqueKey, id }) if id == "mail-1"
    ));
    let sent = h.request("c2", "j3", "default", "unique-key:mail-1");
    assert!(acked(&sent, "c2", "j3"));
}

/// A window that ends while its job is still unfinished: the row goes,
/// the key stays with the job until it finishes.
#[test]
fn an_unfinished_job_keeps_its_key_after_its_window() {
    let mut h = durable();
    h.request("c1", "j1", "default", "unique-key:k,unique-for:5");
    h.advance(6 * SECOND);
    assert!(matches!(
        states(&h).last(),
        Some(Record::DeleteState { .. })
    ));
    let sent = h.request("c2", "j2", "default", "unique-key:k");
    assert_eq!(duplicates(&sent, "c2")[0].existing_msgid, "j1");
    worker(&mut h, "w1", "", 1);
    h.reply("w1", "j1", "{}", Some(ResultStatus::Ok));
    assert_eq!(h.r.unique_keys(), 0);
}

/// `on-conflict:reject`: `REJECT duplicate` naming the holder.
#[test]
fn reject_names_the_holder() {
    let mut h = durable();
    h.request("c1", "j1", "default", "unique-key:k");
    let sent = h.request("c2", "j2", "default", "unique-key:k,on-conflict:reject");
    let r = rejects(&sent, "c2");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].reason, RejectReason::Duplicate);
    assert_eq!(r[0].duplicate_of(), Some("j1"));
    assert_eq!(h.r.stats().unique_rejected, 1);
    assert_eq!(h.r.buffered_count(), 1);
}

/// `on-conflict:replace`: a waiting holder is cancelled (its client gets
/// the cancelled RESULT) and the new job takes the key; a running holder
/// is kept and the new REQUEST is its duplicate.
#[test]
fn replace_cancels_a_waiting_holder_but_not_a_running_one() {
    let mut h = durable();
    h.request("c1", "j1", "default", "reply-requested,unique-key:k");
    let sent = h.request("c2", "j2", "default", "unique-key:k,on-conflict:replace");
    assert!(acked(&sent, "c2", "j2"), "{sent:?}");
    let r = results(&sent, "c1");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].status, ResultStatus::Failed);
    assert!(String::from_utf8_lossy(&r[0].payload).contains("cancelled"));
    assert_eq!(h.r.buffered_count(), 1);
    assert_eq!(h.r.stats().unique_replaced, 1);
    assert!(finished_in_journal(&h, "j1"));
    // Delayed counts as waiting too.
    h.request("c1", "j3", "default", "unique-key:d,delay:30");
    let sent = h.request("c2", "j4", "default", "unique-key:d,on-conflict:replace");
    assert!(acked(&sent, "c2", "j4"));
    assert_eq!(h.r.delayed_count(), 0);
    // j2 runs: a replace is its duplicate.
    worker(&mut h, "w1", "", 1);
    assert_eq!(h.r.inflight_count(), 1);
    let sent = h.request("c3", "j5", "default", "unique-key:k,on-conflict:replace");
    let d = duplicates(&sent, "c3");
    assert_eq!(d[0].existing_msgid, "j2", "{sent:?}");
    assert_eq!(h.r.inflight_count(), 1);
}

/// A replaced holder's window goes with it; the new job's is journaled.
#[test]
fn replace_moves_the_window_to_the_new_job() {
    let mut h = durable();
    h.request("c1", "j1", "default", "unique-key:k,unique-for:100");
    h.request(
        "c2",
        "j2",
        "default",
        "unique-key:k,unique-for:10,on-conflict:replace",
    );
    let Some(Record::PutState { blob, .. }) = states(&h).last().cloned() else {
        panic!("{:?}", states(&h))
    };
    let v: serde_json::Value = serde_json::from_slice(&blob).unwrap();
    assert_eq!(v["msgid"], "j2");
    worker(&mut h, "w1", "", 1);
    h.reply("w1", "j2", "{}", Some(ResultStatus::Ok));
    h.advance(11 * SECOND);
    assert_eq!(h.r.unique_keys(), 0, "j1's longer window went with j1");
}

/// Bad values are refused `malformed` with the reason; nothing is kept.
#[test]
fn bad_unique_headers_are_malformed() {
    let mut h = durable();
    for (i, headers) in [
        "unique-key:",
        "unique-key:k,unique-for:soon",
        "unique-key:k,on-conflict:merge",
        "unique-for:10",
        "on-conflict:reject",
    ]
    .into_iter()
    .enumerate()
    {
        let msgid = format!("b{i}");
        let sent = h.request("c1", &msgid, "default", headers);
        let r = rejects(&sent, "c1");
        assert_eq!(r.len(), 1, "{headers}: {sent:?}");
        assert_eq!(r[0].reason, RejectReason::Malformed, "{headers}");
        assert!(
            r[0].text.contains("unique-") || r[0].text.contains("on-conflict"),
            "{}",
            r[0].text
        );
    }
    assert_eq!(h.r.buffered_count(), 0);
    assert_eq!(h.r.unique_keys(), 0);
}

/// At `max_unique_keys` a new key is refused `queue-full` (sent again
/// later); a duplicate of a held key is still answered; keys free up.
#[test]
fn the_key_cap_refuses_new_keys_queue_full() {
    let mut h = H::with(Config {
        max_unique_keys: 2,
        ..Config::default()
    });
    h.request("c1", "j1", "default", "unique-key:a");
    h.request("c1", "j2", "default", "unique-key:b");
    let sent = h.request("c1", "j3", "default", "unique-key:c");
    let r = rejects(&sent, "c1");
    assert_eq!(r[0].reason, RejectReason::QueueFull);
    assert!(r[0].text.contains("--max-unique-keys"), "{}", r[0].text);
    let sent = h.request("c1", "j4", "default", "unique-key:a");
    assert_eq!(duplicates(&sent, "c1")[0].existing_msgid, "j1");
    let sent = h.request("c1", "j5", "default", "");
    assert!(
        acked(&sent, "c1", "j5"),
        "jobs without a key are not bounded by it"
    );
    worker(&mut h, "w1", "", 1);
    h.reply("w1", "j1", "{}", Some(ResultStatus::Ok));
    let sent = h.request("c1", "j3", "default", "unique-key:c");
    assert!(acked(&sent, "c1", "j3"));
}

/// At start: restored unfinished jobs hold the keys in their headers; an
/// open window holds its key (and the finished job's kept result is
/// given to a duplicate); a window that ended while the router was down
/// is deleted.
#[test]
fn keys_and_windows_come_back_at_restore() {
    let mut h = durable();
    let now_ms = 1_700_000_000_000 + h.now.as_millis() as u64;
    let job = |msgid: &str, headers: &str| JobRecord {
        msgid: msgid.into(),
        client: b"c0".to_vec(),
        queue: "default".into(),
        route: "default".into(),
        headers: headers.as_bytes().to_vec(),
        payload: b"[]".to_vec(),
        attempts: 0,
        accepted_at_unix_ms: now_ms - 1_000,
        run_at_unix_ms: None,
    };
    let window = |msgid: &str, until: u64| {
        serde_json::to_vec(&serde_json::json!({"msgid": msgid, "until_unix_ms": until})).unwrap()
    };
    let finished = crate::journal::FinishedRecord {
        job: job("done1", "unique-key:w1,unique-for:60"),
        outcome: "done".into(),
        started_at_unix_ms: None,
        finished_at_unix_ms: now_ms - 500,
        result: Some(br#"{"value": 1}"#.to_vec()),
        result_truncated: false,
    };
    let mut out = Vec::new();
    let n = h.r.restore(
        Restored {
            jobs: vec![
                job("u1", "unique-key:live"),
                job("u2", "unique-key:lw,unique-for:60"),
            ],
            finished: vec![finished],
            states: vec![
                (
                    StateKind::UniqueKey,
                    "w1".into(),
                    window("done1", now_ms + 59_000),
                ),
                (
                    StateKind::UniqueKey,
                    "lw".into(),
                    window("u2", now_ms + 59_000),
                ),
                (StateKind::UniqueKey, "old".into(), window("x", now_ms - 1)),
                (StateKind::QueuePolicy, "q".into(), b"{}".to_vec()),
            ],
            ..Restored::default()
        },
        h.now,
        &mut out,
    );
    h.commit(&mut out);
    assert_eq!((n.jobs, n.unique_windows), (2, 2));
    assert_eq!(h.r.unique_keys(), 3);
    assert!(states(&h)
        .iter()
        .any(|r| matches!(r, Record::DeleteState { id, .. } if id == "old")));
    let sent = h.request("c1", "n1", "default", "unique-key:live");
    assert_eq!(duplicates(&sent, "c1")[0].existing_msgid, "u1");
    let sent = h.request("c1", "n2", "default", "reply-requested,unique-key:w1");
    assert_eq!(duplicates(&sent, "c1")[0].existing_msgid, "done1");
    assert_eq!(results(&sent, "c1")[0].payload, br#"{"value": 1}"#);
    let sent = h.request("c1", "n3", "default", "unique-key:old");
    assert!(acked(&sent, "c1", "n3"));
    // u2 finishes; its restored window keeps the key until it ends.
    worker(&mut h, "w1", "", 2);
    h.reply("w1", "u2", "{}", Some(ResultStatus::Ok));
    let sent = h.request("c1", "n4", "default", "unique-key:lw");
    assert_eq!(duplicates(&sent, "c1")[0].existing_msgid, "u2");
    h.advance(60 * SECOND);
    let sent = h.request("c1", "n5", "default", "unique-key:lw");
    assert!(acked(&sent, "c1", "n5"));
}

/// A job whose batch fails was never accepted: its key is free again
/// (its window row deleted after the kept one), and a duplicate answered
/// behind it is refused with it.
#[test]
fn a_failed_batch_gives_the_key_back() {
    let mut h = durable();
    h.fail_journal = Some("disk full".into());
    let out = h.input(raw("c1", "j1", "unique-key:k,unique-for:60"));
    let sent = decode(out);
    assert_eq!(
        rejects(&sent, "c1")[0].reason,
        RejectReason::JournalUnavailable
    );
    assert_eq!(h.r.unique_keys(), 0);
    h.fail_journal = None;
    h.advance(2 * SECOND);
    let st = states(&h);
    assert!(
        matches!(st.last(), Some(Record::DeleteState { id, .. }) if id == "k"),
        "{st:?}"
    );
    let sent = h.request("c1", "j2", "default", "unique-key:k");
    assert!(acked(&sent, "c1", "j2"));
}

/// The DUPLICATE of an unfinished holder waits, like an ACK, for the
/// holder's batch, and becomes `journal-unavailable` if it fails.
#[test]
fn a_duplicate_waits_for_the_holders_batch() {
    let mut h = durable();
    h.d.commit_at_once = false;
    let a = decode(h.input(raw("c1", "j1", "unique-key:k")));
    let b = decode(h.input(raw("c2", "j2", "unique-key:k")));
    assert!(a.is_empty() && b.is_empty(), "{a:?} {b:?}");
    h.fail_journal = Some("disk full".into());
    let sent = h.tick();
    assert_eq!(
        rejects(&sent, "c1")[0].reason,
        RejectReason::JournalUnavailable
    );
    assert_eq!(
        rejects(&sent, "c2")[0].reason,
        RejectReason::JournalUnavailable
    );
    assert!(duplicates(&sent, "c2").is_empty());
}

/// Keys are the same across queues; a holder that fails frees its key
/// and its waiting duplicates get the failed RESULT.
#[test]
fn a_failed_holder_frees_the_key_and_watchers_get_the_failure() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    h.request("c1", "j1", "default", "retry-count:0,unique-key:k");
    let sent = h.request("c2", "j2", "email", "reply-requested,unique-key:k");
    assert_eq!(duplicates(&sent, "c2")[0].existing_msgid, "j1");
    let sent = h.reply(
        "w1",
        "j1",
        r#"{"error": {"kind": "x"}}"#,
        Some(ResultStatus::Failed),
    );
    let r = results(&sent, "c2");
    assert_eq!((r.len(), r[0].status), (1, ResultStatus::Failed));
    assert_eq!(h.r.unique_keys(), 0);
}

fn raw(client: &str, msgid: &str, headers: &str) -> Input {
    Input::Frames {
        socket: Frontend,
        frames: crate::testing::frames(
            client.as_bytes(),
            &[
                b"REQUEST",
                msgid.as_bytes(),
                b"default",
                headers.as_bytes(),
                b"[]",
            ],
        ),
    }
}

/// Admin `job` shows a job's unique key and whether it holds it; STATUS
/// counts keys and duplicates.
#[test]
fn admin_shows_the_unique_key() {
    let mut h = H::new();
    h.request("c1", "j1", "default", "unique-key:order-7");
    h.request("c1", "j2", "default", "unique-key:order-7");
    let job = |h: &mut H, msgid: &str| {
        let req = serde_json::json!({"op": "job", "msgid": msgid});
        let frames = crate::router::admin_request("adm-1", &req).encode_routed(b"adm".to_vec());
        let sent = h.frames(Admin, frames);
        let Command::Reply(r) = &to(&sent, Admin, "adm")[0].command else {
            panic!("{sent:?}")
        };
        serde_json::from_slice::<serde_json::Value>(&r.payload).unwrap()
    };
    let v = job(&mut h, "j1");
    assert_eq!(v["job"]["unique_key"], "order-7", "{v}");
    assert_eq!(v["job"]["unique_held"], true);
    let s = admin(&mut h, Command::Status);
    assert_eq!(s["unique"]["held"], 1);
    assert_eq!(s["unique"]["duplicates"], 1);
}

/// A built-in schedule with a unique key skips a run while the previous
/// run holds the key, and runs again once it finished.
#[test]
fn a_schedule_run_is_skipped_while_its_key_is_held() {
    let mut h = durable();
    let s = Command::Schedule(emqp_proto::Schedule {
        queue: "default".into(),
        headers: Headers::parse(b"unique-key:nightly").unwrap(),
        interval: emqp_proto::Interval::from_secs(10).unwrap(),
        message: br#"["call", {"handler": "noop"}]"#.to_vec(),
        cron: String::new(),
    });
    h.msg(Frontend, "c1", "s1", s);
    h.advance(SECOND);
    assert_eq!(h.r.stats().scheduled_runs, 1);
    assert_eq!(h.r.unique_keys(), 1);
    h.advance(10 * SECOND);
    assert_eq!(h.r.stats().scheduled_runs, 1, "the first run is unfinished");
    assert_eq!(h.r.stats().scheduled_runs_skipped, 1);
    worker(&mut h, "w1", "", 1);
    let first = h.r.unfinished_jobs()[0].msgid.clone();
    h.reply("w1", &first, "{}", Some(ResultStatus::Ok));
    h.advance(10 * SECOND);
    assert_eq!(h.r.stats().scheduled_runs, 2);
}

/// `replace` at `hwm`: the waiting job's place is the new one's (same
/// queue); a new job for another full queue is refused `queue-full` and
/// the waiting one stays.
#[test]
fn replace_at_the_high_water_mark() {
    let mut h = H::with(Config {
        hwm: 1,
        unserved: crate::config::Unserved::Hold,
        ..Config::default()
    });
    h.request("c1", "j1", "a", "unique-key:k");
    let sent = h.request("c2", "j2", "a", "unique-key:k,on-conflict:replace");
    assert!(acked(&sent, "c2", "j2"), "j1's place: {sent:?}");
    h.request("c1", "j3", "b", "");
    let sent = h.request("c3", "j4", "b", "unique-key:k,on-conflict:replace");
    assert_eq!(rejects(&sent, "c3")[0].reason, RejectReason::QueueFull);
    assert_eq!(h.r.stats().unique_replaced, 1, "j2 stays");
    assert_eq!(h.r.unique_keys(), 1);
}
