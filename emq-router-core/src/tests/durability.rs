//! The journal rule on the fake clock (`router/durability.rs`): held
//! acknowledgements and dispatches, group-commit cadence, failed batches,
//! refusal while failing, recovery without a restart.

use super::*;
use crate::journal::Batch;
use std::time::Duration;

fn durable() -> H {
    H::with(Config {
        journal: true,
        ..Config::default()
    })
}

fn raw_request(client: &str, msgid: &str, headers: &str) -> Input {
    Input::Frames {
        socket: Frontend,
        frames: vec![
            client.as_bytes().to_vec(),
            vec![],
            b"eMQP/1.0".to_vec(),
            b"REQUEST".to_vec(),
            msgid.as_bytes().to_vec(),
            b"default".to_vec(),
            headers.as_bytes().to_vec(),
            b"[\"call\", {\"handler\": \"noop\"}]".to_vec(),
        ],
    }
}

fn batches(out: &[Action]) -> Vec<Batch> {
    out.iter()
        .filter_map(|a| match a {
            Action::Journal(b) => Some(b.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn no_ack_and_no_dispatch_before_the_accepted_record_commits() {
    let mut r = Router::new(Config {
        journal: true,
        ..Config::default()
    });
    let now = SECOND;
    let mut out = Vec::new();
    let inform = Message::with_msgid(
        "i",
        Command::Inform(Inform {
            queues: QueueSpec(vec![]),
            peer_type: Some(PeerType::Worker),
            features: vec!["job-ack".into()],
        }),
    );
    r.handle(
        Input::Message {
            socket: Backend,
            identity: b"w1".to_vec(),
            message: inform,
        },
        now,
        &mut out,
    );
    r.handle(
        Input::Message {
            socket: Backend,
            identity: b"w1".to_vec(),
            message: Message::new(Command::Ready),
        },
        now,
        &mut out,
    );
    out.clear();
    r.handle(raw_request("c", "j1", ""), now, &mut out);
    assert!(
        decode(out.clone()).is_empty(),
        "neither ack nor dispatch yet: {out:?}"
    );
    // Light load: the batch is due at once (after this read round).
    assert!(r.poll_timeout().is_some_and(|t| t <= now));
    r.handle_timeout(now, &mut out);
    let b = batches(&out);
    assert_eq!(b.len(), 1);
    assert!(matches!(&b[0].records[..], [Record::Accepted(j)] if j.msgid == "j1"));
    let sent = decode(out.clone());
    assert!(
        to(&sent, Frontend, "c").is_empty() && forwarded(&sent, "w1").is_empty(),
        "still neither ack nor dispatch: {sent:?}"
    );
    // One batch in flight at a time: the next deadline is the heartbeat.
    assert_eq!(r.poll_timeout(), Some(now + 3 * SECOND));
    out.clear();
    r.handle(
        Input::JournalDone {
            batch: b[0].id,
            result: BatchResult::Committed,
        },
        now,
        &mut out,
    );
    let sent = decode(out);
    assert!(to(&sent, Frontend, "c").iter().any(|m| is_ack_of(m, "j1")));
    assert_eq!(forwarded(&sent, "w1"), vec!["j1"]);
    r.check_invariants().unwrap();
}

#[test]
fn group_commit_is_due_at_once_under_light_load_and_grows_with_the_load() {
    use crate::config::{COMMIT_DELAY, DEFAULT_COMMIT_MAX_DELAY as MAX_COMMIT_DELAY};
    use crate::router::LOADED_BATCH;
    let mut r = Router::new(Config {
        journal: true,
        hwm: 100_000,
        ..Config::default()
    });
    let mut now = SECOND;
    let mut out = Vec::new();
    let commit = |r: &mut Router, b: &Batch, now: Duration, out: &mut Vec<Action>| {
        r.handle(
            Input::JournalDone {
                batch: b.id,
                result: BatchResult::Committed,
            },
            now,
            out,
        )
    };
    // A burst of 100 REQUESTs in one read round: one batch.
    for i in 0..100 {
        r.handle(raw_request("c", &format!("a{i}"), ""), now, &mut out);
    }
    assert!(r.poll_timeout().is_some_and(|t| t <= now));
    r.handle_timeout(now, &mut out);
    let b = batches(&out);
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].records.len(), 100);
    commit(&mut r, &b[0], now, &mut out);
    let acks = decode(std::mem::take(&mut out))
        .iter()
        .filter(|(s, _, m)| *s == Frontend && matches!(m.command, Command::Reply(_)))
        .count();
    assert_eq!(acks, 100);
    // The last batch was large (load): a few records wait for more, at
    // most MAX_COMMIT_DELAY after the last batch.
    let emitted = now;
    r.handle(raw_request("c", "b0", ""), now, &mut out);
    assert_eq!(r.poll_timeout(), Some(emitted + MAX_COMMIT_DELAY));
    // A full batch is due COMMIT_DELAY after the last one, not sooner.
    for i in 1..LOADED_BATCH {
        r.handle(raw_request("c", &format!("b{i}"), ""), now, &mut out);
    }
    assert_eq!(r.poll_timeout(), Some(emitted + COMMIT_DELAY));
    now = emitted + COMMIT_DELAY - us(1);
    r.handle_timeout(now, &mut out);
    assert!(batches(&out).is_empty());
    now += us(1);
    r.handle_timeout(now, &mut out);
    let b = batches(&std::mem::take(&mut out));
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].records.len(), LOADED_BATCH);
    // None while it is in flight, however many records gather.
    let emitted = now;
    r.handle(raw_request("c", "c0", ""), now, &mut out);
    assert!(r.poll_timeout().is_none_or(|t| t > now + MAX_COMMIT_DELAY));
    // Committed slowly (past MAX_COMMIT_DELAY): the next is due at once.
    now += MAX_COMMIT_DELAY + us(1);
    commit(&mut r, &b[0], now, &mut out);
    assert_eq!(r.poll_timeout(), Some(emitted + MAX_COMMIT_DELAY));
    r.handle_timeout(now, &mut out);
    let b = batches(&std::mem::take(&mut out));
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].records.len(), 1);
    commit(&mut r, &b[0], now, &mut out);
    // That batch was small (light load again): the next is due at once.
    r.handle(raw_request("c", "d0", ""), now, &mut out);
    assert!(r.poll_timeout().is_some_and(|t| t <= now));
    r.check_invariants().unwrap();
}

#[test]
fn with_commit_max_delay_at_its_minimum_a_loaded_batch_is_due_every_millisecond() {
    use crate::config::COMMIT_DELAY;
    let mut r = Router::new(Config {
        journal: true,
        hwm: 100_000,
        commit_max_delay: Duration::ZERO,
        ..Config::default()
    });
    let now = SECOND;
    let mut out = Vec::new();
    for i in 0..100 {
        r.handle(raw_request("c", &format!("a{i}"), ""), now, &mut out);
    }
    r.handle_timeout(now, &mut out);
    let b = batches(&out);
    r.handle(
        Input::JournalDone {
            batch: b[0].id,
            result: BatchResult::Committed,
        },
        now,
        &mut out,
    );
    // Loaded, one record open: due COMMIT_DELAY after the last batch (the
    // setting is raised to it), as a full one would be.
    r.handle(raw_request("c", "b0", ""), now, &mut out);
    assert_eq!(r.poll_timeout(), Some(now + COMMIT_DELAY));
}

#[test]
fn accepted_and_completed_in_one_open_batch_cancel() {
    let mut d = crate::router::Durability::new(true, crate::config::DEFAULT_COMMIT_MAX_DELAY);
    let rec = |m: &str| {
        Record::Accepted(JobRecord {
            msgid: m.into(),
            client: vec![],
            queue: "q".into(),
            route: "q".into(),
            headers: vec![],
            payload: vec![],
            attempts: 0,
            accepted_at_unix_ms: 0,
            run_at_unix_ms: None,
        })
    };
    d.record(rec("a"), None);
    d.record(rec("b"), None);
    d.record(Record::Completed { msgid: "a".into() }, None);
    d.record(Record::Completed { msgid: "c".into() }, None);
    // The same msgid twice in a batch never cancels.
    d.record(rec("d"), None);
    d.record(rec("d"), None);
    d.record(Record::Completed { msgid: "d".into() }, None);
    assert_eq!(d.cancelled, 1);
    let b = d
        .take_batch(Duration::ZERO, false, crate::ids::JobId(1))
        .unwrap();
    let names: Vec<String> = b
        .records
        .iter()
        .map(|r| match r {
            Record::Accepted(j) => format!("+{}", j.msgid),
            Record::Completed { msgid } => format!("-{msgid}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(names, ["+b", "-c", "+d", "+d", "-d"]);
}

/// Of the writes of one state row in an open batch only the last is
/// written (the batch commits whole, so the row ends the same).
#[test]
fn only_the_last_write_of_a_state_row_in_a_batch_is_kept() {
    use crate::journal::StateKind;
    let mut d = crate::router::Durability::new(true, crate::config::DEFAULT_COMMIT_MAX_DELAY);
    let put = |id: &str, b: u8| Record::PutState {
        kind: StateKind::Batch,
        id: id.into(),
        blob: vec![b],
    };
    d.record(put("x", 1), None);
    d.record(put("y", 1), None);
    d.record(put("x", 2), None);
    d.record(
        Record::PutState {
            kind: StateKind::Workflow,
            id: "x".into(),
            blob: vec![9],
        },
        None,
    );
    d.record(put("y", 2), None);
    d.record(
        Record::DeleteState {
            kind: StateKind::Batch,
            id: "y".into(),
        },
        None,
    );
    let b = d
        .take_batch(Duration::ZERO, false, crate::ids::JobId(1))
        .unwrap();
    let names: Vec<String> = b
        .records
        .iter()
        .map(|r| match r {
            Record::PutState { kind, id, blob } => format!("{}/{id}={}", kind.as_str(), blob[0]),
            Record::DeleteState { kind, id } => format!("{}/{id} deleted", kind.as_str()),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(names, ["batch/x=2", "workflow/x=9", "batch/y deleted"]);
}

#[test]
fn a_failed_batch_acknowledges_nothing_and_new_work_is_refused_until_a_write_succeeds() {
    let mut h = durable();
    h.request("c", "j0", "default", "");
    assert_eq!(h.r.buffered_count(), 1);
    h.fail_journal = Some("database or disk is full".into());
    let sent = h.request("c", "j1", "default", "");
    assert!(
        !to(&sent, Frontend, "c").iter().any(|m| is_ack_of(m, "j1")),
        "{sent:?}"
    );
    let rj = rejects(&sent, "c");
    assert_eq!(rj.len(), 1, "{sent:?}");
    assert_eq!(rj[0].orig_msgid, "j1");
    assert_eq!(rj[0].reason, RejectReason::JournalUnavailable);
    assert!(rj[0].text.contains("disk is full"), "{}", rj[0].text);
    // j1 is gone; j0, acknowledged earlier, stays.
    assert_eq!(h.r.buffered_count(), 1);
    assert!(h.r.store.find("j1").is_none());
    assert_eq!(h.r.journal_state().name(), "failing");
    // While failing: REQUESTs and SCHEDULEs refused at once.
    let sent = h.request("c", "j2", "default", "");
    assert_eq!(
        rejects(&sent, "c")[0].reason,
        RejectReason::JournalUnavailable
    );
    let sent = h.msg(
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
    assert_eq!(
        rejects(&sent, "c")[0].reason,
        RejectReason::JournalUnavailable
    );
    assert!(h.r.schedules().is_empty());
    let v = admin(&mut h, Command::Status);
    assert_eq!(v["journal"]["state"], "failing", "{v}");
    assert_eq!(v["journal"]["refused"], 2, "{v}");
    let text = crate::metrics::render(&h.r.snapshot(h.now));
    assert!(text.contains("emq_journal_ok 0\n"), "{text}");
    // Retries on its own: first after one second, with a probe.
    let retry = h.r.poll_timeout().unwrap();
    assert!(retry <= h.now + SECOND);
    h.now = retry;
    h.timeout();
    assert_eq!(
        h.r.journal_state().name(),
        "failing",
        "the disk is still full"
    );
    h.fail_journal = None;
    h.now = h.r.poll_timeout().unwrap();
    let before = h.journal.len();
    h.timeout();
    assert_eq!(&h.journal[before..], [Record::Probe]);
    assert_eq!(h.r.journal_state().name(), "ok");
    // Accepting again, without a restart; j0 was never dropped.
    let sent = h.request("c", "j3", "default", "");
    assert!(to(&sent, Frontend, "c").iter().any(|m| is_ack_of(m, "j3")));
    worker(&mut h, "w1", "", 2);
    assert_eq!(h.r.buffered_count(), 0);
    assert_eq!(h.r.inflight_count(), 2);
    let accepted: Vec<&str> = h
        .journal
        .iter()
        .filter_map(|r| match r {
            Record::Accepted(j) => Some(j.msgid.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(accepted, ["j0", "j3"], "j1 was never journaled");
}

#[test]
fn a_result_waits_for_its_completion_record_across_a_failure() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    let sent = h.request("c", "j1", "default", "reply-requested");
    assert_eq!(forwarded(&sent, "w1"), vec!["j1"]);
    h.fail_journal = Some("disk I/O error".into());
    let sent = h.reply("w1", "j1", r#"{"value": 1}"#, None);
    assert!(results(&sent, "c").is_empty(), "held: {sent:?}");
    assert_eq!(h.r.journal_state().name(), "failing");
    h.fail_journal = None;
    // The retry is due one second after the failure.
    h.now += SECOND - us(1);
    assert!(results(&decode(h.timeout()), "c").is_empty());
    h.now += us(1);
    let out = h.timeout();
    let rs = results(&decode(out), "c");
    assert_eq!(rs.len(), 1, "released with the retried record");
    assert!(finished_in_journal(&h, "j1"));
}

/// A failing journal holds durable jobs in their buffers: a READY, or a
/// worker that joins, gets nothing; the first batch that commits again
/// dispatches them. (A leader cut off from PostgreSQL ran 500 of 1,500
/// jobs twice before this rule: it kept dispatching jobs whose ends it
/// could no longer record, and the standby ran them again.)
#[test]
fn nothing_is_dispatched_while_the_journal_fails_and_recovery_dispatches_at_once() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    for i in 0..3 {
        h.request("c", &format!("j{i}"), "default", "");
    }
    assert_eq!(h.r.inflight_count(), 1);
    h.fail_journal = Some("connection to the database lost".into());
    // The end of j0 cannot be recorded: the journal fails.
    let sent = h.reply("w1", "j0", "{}", None);
    assert_eq!(h.r.journal_state().name(), "failing");
    assert!(forwarded(&sent, "w1").is_empty(), "{sent:?}");
    let sent = h.ready("w1");
    assert!(
        forwarded(&sent, "w1").is_empty(),
        "a READY while failing: {sent:?}"
    );
    worker(&mut h, "w2", "", 1);
    assert_eq!(h.r.inflight_count(), 0, "a new worker while failing");
    assert_eq!(h.r.buffered_count(), 2);
    // The retry commits: both jobs are dispatched in the same input.
    h.fail_journal = None;
    h.now += SECOND; // the retry interval
    let sent = decode(h.timeout());
    assert_eq!(h.r.journal_state().name(), "ok");
    let mut got = forwarded(&sent, "w1");
    got.extend(forwarded(&sent, "w2"));
    got.sort();
    assert_eq!(got, ["j1", "j2"], "{sent:?}");
    assert_eq!(h.r.buffered_count(), 0);
    assert!(finished_in_journal(&h, "j0"));
}

#[test]
fn a_draining_router_exits_only_after_its_last_batch_committed() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    h.request("c", "j1", "default", "reply-requested");
    h.input(Input::Shutdown);
    h.fail_journal = Some("locked".into());
    let out = h.input(Input::Frames {
        socket: Backend,
        frames: Message::with_msgid(
            "r",
            Command::Reply(Reply::result(b"{}".to_vec(), "j1".into(), ResultStatus::Ok)),
        )
        .encode_routed(b"w1".to_vec()),
    });
    assert!(!out.contains(&Action::Exit), "the RESULT still waits");
    h.fail_journal = None;
    h.now += SECOND;
    let out = h.timeout();
    assert_eq!(results(&decode(out.clone()), "c").len(), 1);
    assert!(out.contains(&Action::Exit));
}

// ----- intake: duplicate msgids, undecodable SCHEDULEs -----------------------

#[test]
fn a_msgid_the_router_holds_is_refused_duplicate_until_its_job_finished() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    h.request("c", "dup", "default", "");
    // The same msgid for another job (another queue here).
    let sent = h.request("c2", "dup", "other", "");
    let rj = rejects(&sent, "c2");
    assert_eq!(rj.len(), 1, "{sent:?}");
    assert_eq!(rj[0].reason, RejectReason::DuplicateMsgid);
    assert!(!to(&sent, Frontend, "c2")
        .iter()
        .any(|m| is_ack_of(m, "dup")));
    assert_eq!(h.r.stats().rejected_duplicate, 1);
    // Once finished, the msgid may be used again (for another job).
    h.reply("w1", "dup", "{}", None);
    h.ready("w1");
    let sent = h.request("c", "dup", "other", "");
    assert!(to(&sent, Frontend, "c").iter().any(|m| is_ack_of(m, "dup")));
    let accepted = h
        .journal
        .iter()
        .filter(|r| matches!(r, Record::Accepted(j) if j.msgid == "dup"))
        .count();
    assert_eq!(accepted, 2);
}

fn accepted_count(h: &H, msgid: &str) -> usize {
    h.journal
        .iter()
        .filter(|r| matches!(r, Record::Accepted(j) if j.msgid == msgid))
        .count()
}

/// Issue 26 item 1: a batch whose commit may have happened (PostgreSQL
/// connection lost during COMMIT) never tells a client "refused".
#[test]
fn an_uncertain_batch_answers_journal_uncertain_until_a_commit_settles_it() {
    let mut h = durable();
    h.fail_journal = Some("connection closed during COMMIT".into());
    h.uncertain = true;
    let sent = h.request("c", "u1", "default", "");
    let rj = rejects(&sent, "c");
    assert_eq!(rj.len(), 1, "{sent:?}");
    assert_eq!(rj[0].orig_msgid, "u1");
    assert_eq!(rj[0].reason, RejectReason::JournalUncertain);
    assert!(rj[0].text.contains("same msgid"), "{}", rj[0].text);
    assert!(!to(&sent, Frontend, "c").iter().any(|m| is_ack_of(m, "u1")));
    assert!(h.r.store.find("u1").is_none(), "never dispatched here");
    assert_eq!(h.r.journal_state().name(), "failing");
    // Sent again while the store cannot tell: uncertain again, not
    // refused; a new job is refused (it was certainly not written).
    h.uncertain = false;
    let again = h.request("c", "u1", "default", "");
    assert_eq!(
        rejects(&again, "c")[0].reason,
        RejectReason::JournalUncertain
    );
    let fresh = h.request("c", "n1", "default", "");
    assert_eq!(
        rejects(&fresh, "c")[0].reason,
        RejectReason::JournalUnavailable
    );
    // A retry that still fails (known not written) keeps it uncertain.
    h.now = h.r.poll_timeout().unwrap();
    h.timeout();
    let again = h.request("c", "u1", "default", "");
    assert_eq!(
        rejects(&again, "c")[0].reason,
        RejectReason::JournalUncertain
    );
    // The journal works again: the store settled the batch (undone if it
    // had committed); the resend is a new REQUEST, accepted and run once.
    h.fail_journal = None;
    h.now = h.r.poll_timeout().unwrap();
    h.timeout();
    assert_eq!(h.r.journal_state().name(), "ok");
    let sent = h.request("c", "u1", "default", "");
    assert!(to(&sent, Frontend, "c").iter().any(|m| is_ack_of(m, "u1")));
    worker(&mut h, "w1", "", 2);
    assert_eq!(h.r.inflight_count(), 1);
    assert_eq!(accepted_count(&h, "u1"), 1);
}

#[test]
fn a_plain_failed_batch_still_answers_journal_unavailable() {
    let mut h = durable();
    h.fail_journal = Some("database or disk is full".into());
    let sent = h.request("c", "f1", "default", "");
    assert_eq!(
        rejects(&sent, "c")[0].reason,
        RejectReason::JournalUnavailable
    );
    let again = h.request("c", "f1", "default", "");
    assert_eq!(
        rejects(&again, "c")[0].reason,
        RejectReason::JournalUnavailable
    );
}

/// A REQUEST sent again under a msgid the router holds, same queue and
/// message, is that job: acknowledged, not run twice, not refused —
/// unfinished (here, or loaded by the router that took over) or finished.
#[test]
fn a_request_sent_again_is_acknowledged_as_the_job_the_router_holds() {
    let mut h = durable();
    worker(&mut h, "w1", "", 1);
    let sent = h.request("c", "r1", "default", "reply-requested");
    assert_eq!(forwarded(&sent, "w1"), vec!["r1"]);
    // In flight: sent again (from the same client, or a new connection
    // of it) → acknowledged, not dispatched again.
    for client in ["c", "c-reconnected"] {
        let sent = h.request(client, "r1", "default", "reply-requested");
        assert!(
            to(&sent, Frontend, client)
                .iter()
                .any(|m| is_ack_of(m, "r1")),
            "{sent:?}"
        );
        assert!(rejects(&sent, client).is_empty(), "{sent:?}");
        assert!(forwarded(&sent, "w1").is_empty());
    }
    assert_eq!(accepted_count(&h, "r1"), 1);
    assert_eq!(h.r.stats().resent_requests, 2);
    // Finished: still that job.
    h.reply("w1", "r1", "{}", None);
    h.ready("w1");
    let sent = h.request("c", "r1", "default", "reply-requested");
    assert!(to(&sent, Frontend, "c").iter().any(|m| is_ack_of(m, "r1")));
    assert!(forwarded(&sent, "w1").is_empty(), "not run twice");
    assert_eq!(accepted_count(&h, "r1"), 1);

    // After a failover: the next leader loaded the job (its commit had
    // happened although its client was told journal-uncertain).
    let mut h2 = durable();
    let mut out = Vec::new();
    h2.r.restore(
        Restored {
            jobs: vec![JobRecord {
                msgid: "u1".into(),
                client: b"c".to_vec(),
                queue: "default".into(),
                route: "default".into(),
                headers: Vec::new(),
                payload: b"[\"call\", {\"handler\": \"echo\", \"args\": \"u1\"}]".to_vec(),
                attempts: 0,
                accepted_at_unix_ms: 1,
                run_at_unix_ms: None,
            }],
            ..Restored::default()
        },
        h2.now,
        &mut out,
    );
    let sent = h2.request("c", "u1", "default", "");
    assert!(
        to(&sent, Frontend, "c").iter().any(|m| is_ack_of(m, "u1")),
        "{sent:?}"
    );
    assert!(rejects(&sent, "c").is_empty());
    assert_eq!(accepted_count(&h2, "u1"), 0, "no second job");
    let sent = h2.request("c", "u1", "other-queue", "");
    assert_eq!(
        rejects(&sent, "c")[0].reason,
        RejectReason::DuplicateMsgid,
        "another job"
    );
    worker(&mut h2, "w1", "", 2);
    assert_eq!(h2.r.inflight_count(), 1, "one run");
}

#[test]
fn an_undecodable_schedule_is_rejected_malformed_with_the_reason() {
    let mut h = durable();
    for (interval, why) in [
        ("abc", "interval"),
        ("1e20", "interval"),
        ("0.0001", "interval"),
    ] {
        let frames: Vec<Vec<u8>> = [
            "c1", "", "eMQP/1.0", "SCHEDULE", "s-bad", "default", "", interval, "[]", "",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        let sent = h.frames(Frontend, frames);
        let rj = rejects(&sent, "c1");
        assert_eq!(rj.len(), 1, "{interval}: {sent:?}");
        assert_eq!(rj[0].orig_msgid, "s-bad");
        assert_eq!(rj[0].reason, RejectReason::Malformed);
        assert!(rj[0].text.contains(why), "{}", rj[0].text);
    }
    // 0.3.13's float spelling is taken.
    let frames: Vec<Vec<u8>> = [
        "c1", "", "eMQP/1.0", "SCHEDULE", "s-ok", "default", "", "1.5", "[]", "",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let sent = h.frames(Frontend, frames);
    assert!(to(&sent, Frontend, "c1")
        .iter()
        .any(|m| is_ack_of(m, "s-ok")));
    assert_eq!(h.r.schedules().len(), 1);
}

// ----- timers -----------------------------------------------------------------

#[test]
fn poll_timeout_names_the_next_heartbeat_liveness_retry_and_schedule() {
    let mut h = H::with(Config {
        epoch_unix_micros: 1_700_000_000_000_000,
        ..Config::default()
    });
    assert_eq!(h.r.poll_timeout(), None, "nothing timed without peers");
    worker(&mut h, "w1", "", 1);
    // The first heartbeat round is due at once.
    assert!(h.r.poll_timeout().is_some_and(|t| t <= h.now));
    h.tick();
    let hb = h.now + 3 * SECOND;
    assert_eq!(h.r.poll_timeout(), Some(hb));
    // A failed job with retry-count waits 1 s: that comes first.
    h.request("c", "r", "default", "retry-count:1");
    h.reply("w1", "r", "{}", Some(ResultStatus::Failed));
    assert_eq!(h.r.poll_timeout(), Some(h.now + SECOND));
    h.ready("w1");
    h.now += SECOND;
    assert_eq!(forwarded(&h.tick(), "w1"), vec!["r"], "retried on time");
    assert_eq!(h.r.poll_timeout(), Some(hb));
    // Liveness: a silent worker is removed at interval × liveness.
    h.heartbeat("w1");
    let seen = h.now;
    h.now = hb;
    h.tick();
    let dead_at = seen + 9 * SECOND + us(1);
    assert_eq!(h.r.poll_timeout(), Some(hb + 3 * SECOND));
    h.now = dead_at - us(1);
    h.tick();
    assert_eq!(h.r.worker_count(), 1);
    h.now = dead_at;
    h.tick();
    assert_eq!(h.r.worker_count(), 0, "removed exactly at the deadline");
    // A schedule's next run.
    h.msg(
        Frontend,
        "c",
        "s",
        Command::Schedule(Schedule {
            queue: "default".into(),
            headers: Headers::parse(b"nohaste").unwrap(),
            interval: emqp_proto::Interval::Every { ms: 5_000 },
            message: b"[]".to_vec(),
            cron: String::new(),
        }),
    );
    let next = h.r.poll_timeout().unwrap();
    assert!(
        next > h.now && next <= h.now + 5 * SECOND,
        "{next:?} vs {:?}",
        h.now
    );
}

// ----- journal seam and restore ---------------------------------------------

#[test]
fn journal_ops_are_emitted_when_enabled() {
    let mut h = H::with(Config {
        journal: true,
        max_attempts: 1,
        ..Config::default()
    });
    worker(&mut h, "w1", "", 1);
    let out = h.input(Input::Frames {
        socket: Frontend,
        frames: Message::with_msgid(
            "j1",
            Command::Request(Request {
                queue: "nowhere".into(),
                headers: Headers::parse(b"reply-requested").unwrap(),
                message: b"[1]".to_vec(),
            }),
        )
        .encode_routed(b"c".to_vec()),
    });
    let Action::Journal(batch) = &out[0] else {
        panic!("journal batch must come first: {out:?}")
    };
    assert!(matches!(&batch.records[0], Record::Accepted(_)));
    assert!(
        !decode(out.clone()).iter().any(|(s, _, _)| *s == Frontend) || {
            let first_send = out.iter().position(|a| {
                matches!(
                    a,
                    Action::Send {
                        socket: Frontend,
                        ..
                    }
                )
            });
            let done = 0;
            first_send.is_some_and(|p| p > done)
        },
        "the ack follows the batch: {out:?}"
    );
    let Record::Accepted(job) = &h.journal[0] else {
        panic!("{:?}", h.journal)
    };
    let job = job.clone();
    assert_eq!(job.msgid, "j1");
    assert_eq!(job.queue, "nowhere");
    assert_eq!(job.route, "default");
    assert_eq!(job.payload, b"[1]");
    assert_eq!(job.headers, b"reply-requested");
    let out = h.input(Input::Frames {
        socket: Backend,
        frames: Message::with_msgid(
            "r",
            Command::Reply(Reply::result(b"{}".to_vec(), "j1".into(), ResultStatus::Ok)),
        )
        .encode_routed(b"w1".to_vec()),
    });
    assert!(!out.is_empty());
    assert!(finished_in_journal(&h, "j1"));
    h.ready("w1");
    h.request("c", "j2", "default", "");
    h.input(Input::SendFailed {
        socket: Backend,
        identity: b"w1".to_vec(),
        reason: SendFailure::HostUnreachable,
    });
    assert!(h
        .journal
        .iter()
        .any(|r| matches!(r, Record::DeadLettered { msgid, .. } if msgid == "j2")));
}

#[test]
fn journal_is_silent_when_disabled() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    let out = h.input(Input::Frames {
        socket: Frontend,
        frames: Message::with_msgid(
            "j1",
            Command::Request(Request {
                queue: "default".into(),
                headers: Headers::new(),
                message: b"[1]".to_vec(),
            }),
        )
        .encode_routed(b"c".to_vec()),
    });
    assert!(!out.iter().any(|a| matches!(a, Action::Journal(_))));
}

#[test]
fn restore_queues_recovered_jobs_without_ack_and_dispatches_them() {
    let mut h = H::new();
    let job = |msgid: &str| JobRecord {
        msgid: msgid.into(),
        client: b"c-old".to_vec(),
        queue: "odd".into(),
        route: "default".into(),
        headers: b"reply-requested".to_vec(),
        payload: b"[\"x\"]".to_vec(),
        attempts: 1,
        accepted_at_unix_ms: 5,
        run_at_unix_ms: None,
    };
    let mut out = Vec::new();
    let n = h.r.restore(
        Restored {
            jobs: vec![job("r1"), job("r2")],
            ..Restored::default()
        },
        h.now,
        &mut out,
    );
    assert_eq!(n.jobs, 2);
    assert!(out.is_empty(), "no ack for restored jobs");
    assert_eq!(h.r.buffered_count(), 2);
    h.r.check_invariants().unwrap();
    worker(&mut h, "w1", "", 0);
    let sent = h.ready("w1");
    assert_eq!(forwarded(&sent, "w1"), vec!["r1"]);
    let Command::Request(r) = &to(&sent, Backend, "w1")[0].command else {
        panic!()
    };
    assert_eq!(r.queue, "odd");
    // New jobs come after the restored ones.
    h.request("c", "new", "default", "");
    let ids: Vec<String> = h.r.unfinished_jobs().into_iter().map(|j| j.msgid).collect();
    assert_eq!(ids, ["r1", "r2", "new"]);
    // A result for a restored reply-requested job goes to the old client.
    let rs = results(&h.reply("w1", "r1", "{}", None), "c-old");
    assert_eq!(rs.len(), 1);
}

#[test]
fn decoded_message_input_works_like_frames() {
    let mut h = H::new();
    h.input(Input::Message {
        socket: Backend,
        identity: b"w1".to_vec(),
        message: Message::with_msgid(
            "i",
            Command::Inform(Inform {
                queues: QueueSpec(vec![]),
                peer_type: None,
                features: vec![],
            }),
        ),
    });
    h.input(Input::Message {
        socket: Backend,
        identity: b"w1".to_vec(),
        message: Message::new(Command::Ready),
    });
    let out = h.input(Input::Message {
        socket: Frontend,
        identity: b"c".to_vec(),
        message: Message::with_msgid(
            "j",
            Command::Request(Request {
                queue: "default".into(),
                headers: Headers::parse(b"reply-requested").unwrap(),
                message: b"[]".to_vec(),
            }),
        ),
    });
    let sent = decode(out);
    assert_eq!(forwarded(&sent, "w1"), vec!["j"]);
    assert!(is_ack_of(to(&sent, Frontend, "c")[0], "j"));
}

// ----- journal: attempts, dead letters --------------------------------------

#[test]
fn redelivery_journals_the_attempt_count() {
    let mut h = H::with(Config {
        journal: true,
        ..Config::default()
    });
    worker(&mut h, "w1", "", 1);
    h.input(Input::Frames {
        socket: Frontend,
        frames: Message::with_msgid(
            "j1",
            Command::Request(Request {
                queue: "default".into(),
                headers: Headers::new(),
                message: b"[1]".to_vec(),
            }),
        )
        .encode_routed(b"c".to_vec()),
    });
    assert!(!h
        .journal
        .iter()
        .any(|r| matches!(r, Record::Attempt { .. })));
    h.msg(Backend, "w1", "k", Command::Kbye);
    h.inform("w2", "", &["job-ack"]);
    let out = h.input(Input::Frames {
        socket: Backend,
        frames: Message::with_msgid("r", Command::Ready).encode_routed(b"w2".to_vec()),
    });
    assert!(h
        .journal
        .iter()
        .any(|r| matches!(r, Record::Attempt { msgid, attempts: 2 } if msgid == "j1")));
    assert!(out.iter().any(|a| matches!(
        a,
        Action::Send {
            socket: Backend,
            ..
        }
    )));
}

#[test]
fn restored_attempt_counts_keep_counting_lost_deliveries() {
    let mut h = H::with(Config {
        max_attempts: 3,
        ..Config::default()
    });
    let job = JobRecord {
        msgid: "r1".into(),
        client: b"c".to_vec(),
        queue: "default".into(),
        route: "default".into(),
        headers: b"reply-requested".to_vec(),
        payload: b"[]".to_vec(),
        attempts: 2,
        accepted_at_unix_ms: 5,
        run_at_unix_ms: None,
    };
    let mut out = Vec::new();
    h.r.restore(
        Restored {
            jobs: vec![job],
            ..Restored::default()
        },
        h.now,
        &mut out,
    );
    h.r.check_invariants().unwrap();
    worker(&mut h, "w1", "", 1);
    // One earlier delivery was lost; losing this one makes 2, the next 3.
    h.msg(Backend, "w1", "k", Command::Kbye);
    assert_eq!(h.r.buffered_count(), 1);
    worker(&mut h, "w2", "", 1);
    let sent = h.msg(Backend, "w2", "k", Command::Kbye);
    assert_eq!(results(&sent, "c").len(), 1, "dead-lettered: {sent:?}");
    assert_eq!(h.r.stats().dead_lettered, 1);
}

#[test]
fn journal_dead_letters_are_listed_on_the_admin_socket() {
    let mut h = H::with(Config {
        epoch_unix_micros: 1_700_000_000_000_000,
        ..Config::default()
    });
    let n = h.r.restore_dead_letters(vec![crate::DeadLetter {
        job: JobRecord {
            msgid: "old-dead".into(),
            client: b"c".to_vec(),
            queue: "default".into(),
            route: "default".into(),
            headers: vec![],
            payload: b"[]".to_vec(),
            attempts: 5,
            accepted_at_unix_ms: 1_600_000_000_000,
            run_at_unix_ms: None,
        },
        reason: "delivery lost 5 times".into(),
        error: None,
        at_unix_ms: 1_700_000_000_000,
    }]);
    assert_eq!(n, 1);
    let v = admin(&mut h, Command::Status);
    assert_eq!(v["dead_letter"]["count"], 1, "{v}");
    assert_eq!(v["dead_letter"]["recent"][0]["msgid"], "old-dead");
    assert_eq!(v["dead_letter"]["recent"][0]["age_ms"], 1_000_000, "{v}");
    h.r.check_invariants().unwrap();
}
