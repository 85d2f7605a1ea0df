//! Results until delivered (`router/results.rs`) on the fake clock:
//! journaled with the job's end, released once handed (or receipted),
//! kept and sent again when a send fails, probed, restored, bounded.

use super::*;
use crate::journal::ResultRecord;
use crate::router::results::{PROBE_FIRST, PROBE_MAX};

fn durable() -> H {
    H::with(Config {
        journal: true,
        ..Config::default()
    })
}

fn failed_send(h: &mut H, client: &str) -> Vec<Sent> {
    decode(h.input(Input::SendFailed {
        socket: Frontend,
        identity: client.as_bytes().to_vec(),
        reason: SendFailure::HostUnreachable,
    }))
}

fn hello(h: &mut H, client: &str) -> Vec<Sent> {
    h.msg(
        Frontend,
        client,
        "hello",
        Command::Heartbeat {
            timestamp: Some("1.0".into()),
        },
    )
}

fn received(h: &mut H, client: &str, msgids: &[&str]) -> Vec<Sent> {
    h.msg(
        Frontend,
        client,
        "rcv",
        Command::Received {
            orig_msgids: msgids.iter().map(|m| m.to_string()).collect(),
        },
    )
}

fn held_in_journal(h: &H) -> Vec<String> {
    let mut held: Vec<String> = Vec::new();
    for r in &h.journal {
        match r {
            Record::ResultHeld(r) => {
                held.retain(|m| *m != r.msgid);
                held.push(r.msgid.clone());
            }
            Record::ResultReleased { msgid } => held.retain(|m| m != msgid),
            _ => {}
        }
    }
    held
}

fn result_ids(sent: &[Sent], client: &str) -> Vec<String> {
    results(sent, client)
        .into_iter()
        .map(|r| r.orig_msgid)
        .collect()
}

/// Run the timers until one sends a RESULT (bounded).
fn until_results(h: &mut H) -> Vec<Sent> {
    for _ in 0..50 {
        let at = h.r.poll_timeout().expect("a timer is due");
        h.now = h.now.max(at);
        let sent = h.tick();
        if sent
            .iter()
            .any(|(_, _, m)| matches!(m.command, Command::Result(_)))
        {
            return sent;
        }
    }
    panic!("no RESULT from the timers");
}

/// Any input from another peer: the router takes what it handed over as
/// delivered (no failure came back before it).
fn next_input(h: &mut H) -> Vec<Sent> {
    h.heartbeat("w1")
}

#[test]
fn a_result_is_journaled_with_the_finished_job_and_released_once_handed_over() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    h.request("c1", "j1", "default", "reply-requested");
    let before = h.journal.len();
    let sent = h.reply("w1", "j1", r#"{"value": 1}"#, Some(ResultStatus::Ok));
    assert_eq!(result_ids(&sent, "c1"), ["j1"]);
    // Finished and ResultHeld in one batch, before the RESULT left.
    let batch = &h.journal[before..];
    assert!(
        matches!(batch, [Record::Finished { .. }, Record::ResultHeld(r)]
            if r.msgid == "j1" && r.client == b"c1" && !r.receipt
            && r.payload == br#"{"value": 1}"#),
        "{batch:?}"
    );
    assert_eq!(h.r.held_results().0, 1);
    // Handed over: once the driver says the sends went out with no
    // failure, it counts as delivered.
    let out = h.input(Input::Flushed);
    assert!(decode(out).is_empty());
    assert_eq!(h.r.held_results(), (0, 0));
    assert!(held_in_journal(&h).is_empty());
    assert_eq!(h.r.stats().results_delivered, 1);
}

#[test]
fn a_result_is_delivered_only_at_flushed_and_a_failure_before_it_keeps_it() {
    let mut h = durable();
    worker(&mut h, "w1", "", 2);
    h.request("c1", "j1", "default", "reply-requested");
    h.request("c2", "j2", "default", "reply-requested");
    let sent = h.reply("w1", "j1", "{}", None);
    assert_eq!(result_ids(&sent, "c1"), ["j1"]);
    // Straight on the core (the harness flushes before its inputs):
    // nothing counts as delivered before Flushed — not at a timeout, not
    // at a message from another peer.
    let mut out = Vec::new();
    h.r.handle_timeout(h.now, &mut out);
    let hb = Message::with_msgid("hb", Command::Heartbeat { timestamp: None })
        .encode_routed(b"w1".to_vec());
    h.r.handle(
        Input::Frames {
            socket: Backend,
            frames: hb,
        },
        h.now,
        &mut out,
    );
    assert_eq!(h.r.stats().results_delivered, 0);
    // Its send failed: reported, then Flushed — kept, client unreachable.
    h.r.handle(
        Input::SendFailed {
            socket: Frontend,
            identity: b"c1".to_vec(),
            reason: SendFailure::HostUnreachable,
        },
        h.now,
        &mut out,
    );
    h.r.handle(Input::Flushed, h.now, &mut out);
    h.r.check_invariants().unwrap();
    assert_eq!(h.r.stats().results_delivered, 0);
    assert_eq!(h.r.held_results().0, 1);
    // c2's goes out with no failure: delivered at Flushed, and only then.
    let sent = h.reply("w1", "j2", "{}", None);
    assert_eq!(result_ids(&sent, "c2"), ["j2"]);
    assert_eq!(h.r.held_results().0, 2);
    h.r.handle(Input::Flushed, h.now, &mut out);
    h.r.check_invariants().unwrap();
    assert_eq!(h.r.stats().results_delivered, 1);
    assert_eq!(h.r.held_results().0, 1);
}

#[test]
fn a_result_whose_send_fails_is_kept_and_sent_when_the_client_writes_again() {
    let mut h = durable();
    worker(&mut h, "w1", "", 2);
    h.request("c1", "j1", "default", "reply-requested");
    h.request("c1", "j2", "default", "reply-requested");
    h.reply("w1", "j1", "{}", None);
    h.reply("w1", "j2", "{}", None);
    // j1 was taken as delivered by the REPLY of j2 (an input with no
    // failure before it); j2's send fails.
    failed_send(&mut h, "c1");
    assert_eq!(held_in_journal(&h), ["j2"]);
    assert_eq!(h.r.held_results().0, 1);
    assert!(
        result_ids(&next_input(&mut h), "c1").is_empty(),
        "unreachable: nothing until it is back"
    );
    // Any message from the client: it is connected again.
    let sent = h.request("c1", "j3", "default", "");
    assert_eq!(result_ids(&sent, "c1"), ["j2"]);
    assert!(to(&sent, Frontend, "c1").iter().any(|m| is_ack_of(m, "j3")));
    next_input(&mut h);
    assert_eq!(h.r.held_results().0, 0);
    assert!(held_in_journal(&h).is_empty());
    assert_eq!(h.r.stats().results_resent, 1);
}

#[test]
fn an_unreachable_client_is_probed_at_doubling_intervals_then_gets_the_rest() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 3);
    for j in ["j1", "j2", "j3"] {
        h.request("c1", j, "default", "reply-requested");
    }
    let out = h.input(Input::SendFailed {
        socket: Frontend,
        identity: b"c1".to_vec(),
        reason: SendFailure::WouldBlock,
    });
    assert!(out.is_empty());
    h.reply("w1", "j1", "{}", None);
    failed_send(&mut h, "c1");
    h.reply("w1", "j2", "{}", None);
    failed_send(&mut h, "c1");
    h.reply("w1", "j3", "{}", None);
    failed_send(&mut h, "c1");
    assert_eq!(h.r.held_results().0, 3);
    let start = h.now;
    let mut probes = Vec::new();
    for _ in 0..6 {
        let ids = result_ids(&until_results(&mut h), "c1");
        assert_eq!(ids, ["j1"], "one probe, the oldest");
        probes.push(h.now - start);
        failed_send(&mut h, "c1");
    }
    let ms: Vec<u128> = probes.iter().map(|d| d.as_millis()).collect();
    assert_eq!(ms[0], PROBE_FIRST.as_millis());
    for w in ms.windows(3) {
        assert!(w[2] - w[1] >= w[1] - w[0], "intervals grow: {ms:?}");
    }
    assert!(ms.windows(2).all(|w| w[1] - w[0] <= PROBE_MAX.as_millis()));
    // A probe that goes through: the next input sends the rest.
    assert_eq!(result_ids(&until_results(&mut h), "c1"), ["j1"]);
    let sent = next_input(&mut h);
    assert_eq!(result_ids(&sent, "c1"), ["j2", "j3"]);
    next_input(&mut h);
    assert_eq!(h.r.held_results().0, 0);
    assert_eq!(h.r.stats().results_delivered, 3);
}

#[test]
fn result_receipt_holds_until_received_and_a_hello_sends_it_again() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    h.request("c1", "j1", "default", "reply-requested,result-receipt");
    let sent = h.reply("w1", "j1", r#"{"value": 7}"#, None);
    assert_eq!(result_ids(&sent, "c1"), ["j1"]);
    assert!(
        matches!(h.journal.last(), Some(Record::ResultHeld(r)) if r.receipt),
        "{:?}",
        h.journal.last()
    );
    next_input(&mut h);
    next_input(&mut h);
    assert_eq!(h.r.held_results().0, 1, "held until RECEIVED");
    // The client reconnected (HEARTBEAT on the frontend): sent again.
    let sent = hello(&mut h, "c1");
    assert_eq!(result_ids(&sent, "c1"), ["j1"]);
    // A receipt from someone else changes nothing.
    received(&mut h, "c2", &["j1"]);
    assert_eq!(h.r.held_results().0, 1);
    received(&mut h, "c1", &["j1", "unknown"]);
    assert_eq!(h.r.held_results().0, 0);
    assert!(held_in_journal(&h).is_empty());
    assert_eq!(h.r.stats().results_delivered, 1);
    assert_eq!(h.r.stats().results_resent, 1);
    // Nothing held: a hello sends nothing.
    assert!(result_ids(&hello(&mut h, "c1"), "c1").is_empty());
}

#[test]
fn a_msgid_with_a_held_result_is_refused_as_a_duplicate() {
    let mut h = durable();
    worker(&mut h, "w1", "", 2);
    h.request("c1", "j1", "default", "reply-requested,result-receipt");
    h.reply("w1", "j1", "{}", None);
    let sent = h.request("c1", "j1", "default", "reply-requested,result-receipt");
    let r = rejects(&sent, "c1");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].reason, RejectReason::DuplicateMsgid);
    assert!(r[0].text.contains("undelivered result"), "{}", r[0].text);
    received(&mut h, "c1", &["j1"]);
    let sent = h.request("c1", "j1", "default", "reply-requested,result-receipt");
    assert!(to(&sent, Frontend, "c1").iter().any(|m| is_ack_of(m, "j1")));
}

#[test]
fn restored_results_go_to_their_clients_when_reachable() {
    let mut h = durable();
    let rec = |m: &str, c: &str, receipt: bool| ResultRecord {
        msgid: m.into(),
        client: c.as_bytes().to_vec(),
        status: ResultStatus::Ok,
        payload: format!("{{\"value\": \"{m}\"}}").into_bytes(),
        receipt,
        held_at_unix_ms: 1_000,
    };
    let mut out = Vec::new();
    let n = h.r.restore(
        Restored {
            results: vec![
                rec("r1", "c1", true),
                rec("r2", "c1", true),
                rec("r3", "c2", false),
            ],
            ..Restored::default()
        },
        h.now,
        &mut out,
    );
    assert_eq!(n.results, 3);
    assert!(out.is_empty());
    h.r.check_invariants().unwrap();
    // Probes at once: the oldest of each client.
    assert!(h.r.poll_timeout().is_some_and(|t| t <= h.now));
    let sent = h.tick();
    assert_eq!(result_ids(&sent, "c1"), ["r1"]);
    assert_eq!(result_ids(&sent, "c2"), ["r3"]);
    failed_send(&mut h, "c1");
    // c2 got its result; c1 comes back with a hello and gets both.
    let sent = hello(&mut h, "c1");
    assert_eq!(result_ids(&sent, "c1"), ["r1", "r2"]);
    assert_eq!(
        h.r.held_results().0,
        2,
        "c2's is delivered, c1's wait for receipts"
    );
    received(&mut h, "c1", &["r1", "r2"]);
    assert_eq!(h.r.held_results().0, 0);
    let released: Vec<&str> = h
        .journal
        .iter()
        .filter_map(|r| match r {
            Record::ResultReleased { msgid } => Some(msgid.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(released, ["r3", "r1", "r2"]);
}

#[test]
fn held_results_are_bounded_by_count_bytes_and_age() {
    let mut h = H::with(Config {
        journal: true,
        results_keep: 2,
        results_keep_bytes: 100,
        results_keep_for: 60 * SECOND,
        ..Config::default()
    });
    worker(&mut h, "w1", "", 4);
    for j in ["j1", "j2", "j3"] {
        h.request("gone", j, "default", "reply-requested,result-receipt");
        h.reply("w1", j, "{}", None);
    }
    assert_eq!(h.r.held_results().0, 2, "count bound");
    assert_eq!(h.r.stats().results_dropped, 1);
    assert_eq!(held_in_journal(&h), ["j2", "j3"]);
    // A result bigger than the byte bound is sent once, not held (and
    // evicts nothing).
    h.request("gone", "big", "default", "reply-requested,result-receipt");
    let sent = h.reply("w1", "big", &"x".repeat(200), None);
    assert_eq!(result_ids(&sent, "gone"), ["big"]);
    assert_eq!(held_in_journal(&h), ["j2", "j3"]);
    assert_eq!(h.r.held_results().0, 2);
    // Age: the rest expire after results_keep_for.
    assert!(h.r.poll_timeout().is_some_and(|t| t <= h.now + 60 * SECOND));
    h.advance(60 * SECOND - us(1));
    assert_eq!(h.r.held_results().0, 2);
    h.advance(us(1));
    assert_eq!(h.r.held_results(), (0, 0));
    assert!(held_in_journal(&h).is_empty());
    assert_eq!(h.r.stats().results_dropped, 4);
}

#[test]
fn a_failed_batch_keeps_the_held_result_for_the_next_batch() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    h.request("c1", "j1", "default", "reply-requested,result-receipt");
    h.fail_journal = Some("disk full".into());
    let sent = h.reply("w1", "j1", "{}", None);
    assert!(result_ids(&sent, "c1").is_empty(), "not before its commit");
    assert!(held_in_journal(&h).is_empty());
    h.fail_journal = None;
    let sent = h.advance(2 * SECOND);
    assert_eq!(result_ids(&sent, "c1"), ["j1"]);
    assert_eq!(held_in_journal(&h), ["j1"]);
}

#[test]
fn without_a_journal_results_are_still_kept_in_memory() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c1", "j1", "default", "reply-requested,result-receipt");
    assert_eq!(result_ids(&h.reply("w1", "j1", "{}", None), "c1"), ["j1"]);
    failed_send(&mut h, "c1");
    assert_eq!(result_ids(&hello(&mut h, "c1"), "c1"), ["j1"]);
    received(&mut h, "c1", &["j1"]);
    assert_eq!(h.r.held_results().0, 0);
    assert!(h.journal.is_empty());
}

#[test]
fn failed_cancelled_and_dead_lettered_results_are_held_too() {
    let mut h = H::with(Config {
        journal: true,
        max_attempts: 1,
        ..Config::default()
    });
    worker(&mut h, "w1", "", 1);
    h.request("c1", "dead", "default", "reply-requested,result-receipt");
    h.msg(Backend, "w1", "k", Command::Kbye);
    assert_eq!(held_in_journal(&h), ["dead"]);
    h.request("c1", "later", "default", "reply-requested,result-receipt");
    let v = admin(
        &mut h,
        Command::Admin {
            request: br#"{"op": "cancel", "msgid": "later"}"#.to_vec(),
        },
    );
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(held_in_journal(&h), ["dead", "later"]);
    let status = admin(&mut h, Command::Status);
    assert_eq!(status["results"]["held"], 2, "{status}");
}
