//! Built-in schedules (`router/schedules.rs`) and the SCHEDULE / UNSCHEDULE
//! forwarding.

use super::*;

// ----- built-in schedules ---------------------------------------------------

/// Unix microseconds at the fake clock's zero.
const EPOCH: u64 = 1_700_000_000_000_000;

fn sched_h() -> H {
    H::with(Config {
        epoch_unix_micros: EPOCH,
        journal: true,
        ..Config::default()
    })
}

fn schedule_msg(queue: &str, headers: &str, interval: i64, cron: &str, body: &str) -> Command {
    Command::Schedule(Schedule {
        queue: queue.into(),
        headers: Headers::parse(headers.as_bytes()).unwrap(),
        interval: emqp_proto::Interval::from_secs(interval).unwrap(),
        message: body.as_bytes().to_vec(),
        cron: cron.into(),
    })
}

/// REQUESTs forwarded to `id` (msgid, queue, headers, payload).
fn forwarded_requests(sent: &[Sent], id: &str) -> Vec<(String, Request)> {
    to(sent, Backend, id)
        .into_iter()
        .filter_map(|m| match &m.command {
            Command::Request(r) => Some((m.msgid.clone(), r.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn interval_schedule_enqueues_and_dispatches_at_the_right_ticks() {
    let mut h = sched_h();
    worker(&mut h, "w1", "", 5);
    let sent = h.msg(
        Frontend,
        "c1",
        "s1",
        schedule_msg(
            "default",
            "guarantee",
            10,
            "",
            r#"["call", {"handler": "noop"}]"#,
        ),
    );
    assert!(is_ack_of(to(&sent, Frontend, "c1")[0], "s1"), "{sent:?}");
    // Not run before a tick (the core is consulted on ticks only)...
    assert!(forwarded(&sent, "w1").is_empty());
    // ...and at once on the next tick (no nohaste).
    let sent = h.advance(us(100_000));
    let reqs = forwarded_requests(&sent, "w1");
    assert_eq!(reqs.len(), 1, "{sent:?}");
    let (msgid, req) = &reqs[0];
    assert_ne!(msgid, "s1", "a generated msgid");
    assert_eq!(req.queue, "default");
    assert_eq!(req.message, br#"["call", {"handler": "noop"}]"#);
    let first = msgid.clone();
    for _ in 0..98 {
        h.heartbeat("w1");
        assert!(forwarded(&h.advance(us(100_000)), "w1").is_empty());
    }
    h.heartbeat("w1");
    let sent = h.advance(us(100_000));
    assert_eq!(forwarded(&sent, "w1").len(), 1, "second run 10 s later");
    assert_eq!(h.r.stats().scheduled_runs, 2);
    // Completing a scheduled job sends nothing to any client.
    let sent = h.reply("w1", &first, "{}", Some(ResultStatus::Ok));
    assert!(sent.iter().all(|(s, _, _)| *s != Frontend), "{sent:?}");
    assert_eq!(h.r.stats().completed, 1);
}

#[test]
fn scheduled_runs_are_journalled_as_accepted_jobs_with_the_schedule_record() {
    let mut h = sched_h();
    let out = h.input(Input::Frames {
        socket: Frontend,
        frames: Message::with_msgid("s1", schedule_msg("default", "", 60, "", "[1]"))
            .encode_routed(b"c1".to_vec()),
    });
    let put = out
        .iter()
        .position(|a| matches!(a, Action::Journal(b) if matches!(b.records[..], [Record::PutSchedule { .. }])))
        .expect("schedule journalled");
    let ack = out
        .iter()
        .position(|a| matches!(a, Action::Send { .. }))
        .unwrap();
    assert!(put < ack, "journal before the ack");
    h.now += us(100_000);
    let before = h.journal.len();
    h.timeout();
    let accepted: Vec<&JobRecord> = h.journal[before..]
        .iter()
        .filter_map(|r| match r {
            Record::Accepted(j) => Some(j),
            _ => None,
        })
        .collect();
    assert_eq!(accepted.len(), 1, "{:?}", h.journal);
    assert!(accepted[0].client.is_empty());
    assert_eq!(accepted[0].payload, b"[1]");
    assert!(h.journal[before..]
        .iter()
        .any(|r| matches!(r, Record::PutSchedule { .. })));
    assert_eq!(h.r.buffered_count(), 1, "no worker yet: buffered");
}

#[test]
fn nohaste_schedule_first_runs_one_interval_later() {
    let mut h = sched_h();
    worker(&mut h, "w1", "", 5);
    h.msg(
        Frontend,
        "c1",
        "s1",
        schedule_msg("default", "nohaste", 2, "", "[]"),
    );
    let mut runs = Vec::new();
    for i in 0..50 {
        h.heartbeat("w1");
        if !forwarded(&h.advance(us(100_000)), "w1").is_empty() {
            runs.push(i);
        }
    }
    // Ticks at +0.1 s .. +5.0 s: runs at +2.0 s and +4.0 s.
    assert_eq!(runs, vec![19, 39]);
    // The directive is not forwarded to the worker.
    let sent = {
        h.ready("w1");
        let mut got = Vec::new();
        for _ in 0..25 {
            h.heartbeat("w1");
            got.extend(h.advance(us(100_000)));
        }
        got
    };
    let reqs = forwarded_requests(&sent, "w1");
    assert!(!reqs.is_empty());
    assert!(!reqs[0].1.headers.nohaste());
}

#[test]
fn same_schedule_twice_is_one_schedule() {
    let mut h = sched_h();
    worker(&mut h, "w1", "", 10);
    for m in ["s1", "s2"] {
        let sent = h.msg(Frontend, "c1", m, schedule_msg("default", "", 5, "", "[7]"));
        assert!(is_ack_of(&sent[0].2, m));
    }
    assert_eq!(h.r.schedules().len(), 1);
    let sent = h.advance(us(100_000));
    assert_eq!(forwarded(&sent, "w1").len(), 1, "one run, not two");
    let v = admin(&mut h, Command::RouterShowSchedulers);
    assert_eq!(v["schedules"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["schedules"][0]["queue"], "default");
    assert_eq!(v["schedules"][0]["interval_secs"], 5);
    assert_eq!(v["schedules"][0]["run_count"], 1);
    assert!(v["connected_schedulers"].as_object().unwrap().is_empty());
}

#[test]
fn unschedule_stops_the_schedule() {
    let mut h = sched_h();
    worker(&mut h, "w1", "", 10);
    h.msg(
        Frontend,
        "c1",
        "s1",
        schedule_msg("default", "", 1, "", "[7]"),
    );
    assert_eq!(forwarded(&h.advance(us(100_000)), "w1").len(), 1);
    let Command::Schedule(s) = schedule_msg("default", "", 1, "", "[7]") else {
        unreachable!()
    };
    let out = h.input(Input::Frames {
        socket: Frontend,
        frames: Message::with_msgid("u1", Command::Unschedule(s.clone()))
            .encode_routed(b"c1".to_vec()),
    });
    assert!(h
        .journal
        .iter()
        .any(|r| matches!(r, Record::DeleteSchedule { .. })));
    let sent = decode(out);
    assert!(to(&sent, Frontend, "c1").iter().any(|m| is_ack_of(m, "u1")));
    // Unscheduling again: nothing matches, the client is told so.
    let again = h.msg(Frontend, "c1", "u2", Command::Unschedule(s));
    let rj = rejects(&again, "c1");
    assert_eq!(rj.len(), 1, "{again:?}");
    assert_eq!(rj[0].orig_msgid, "u2");
    assert_eq!(rj[0].reason, RejectReason::NotFound);
    assert!(h.r.schedules().is_empty());
    for _ in 0..30 {
        h.heartbeat("w1");
        assert!(forwarded(&h.advance(us(100_000)), "w1").is_empty());
    }
}

#[test]
fn schedules_restored_from_journal_ops_run_a_missed_run_once() {
    let mut h = sched_h();
    let mut records: std::collections::BTreeMap<String, Vec<u8>> = Default::default();
    let keep = |out: &[Action], records: &mut std::collections::BTreeMap<String, Vec<u8>>| {
        for a in out {
            let Action::Journal(b) = a else { continue };
            for r in &b.records {
                match r {
                    Record::PutSchedule { id, blob } => {
                        records.insert(id.clone(), blob.clone());
                    }
                    Record::DeleteSchedule { id } => {
                        records.remove(id);
                    }
                    _ => {}
                }
            }
        }
    };
    let out = h.input(Input::Frames {
        socket: Frontend,
        frames: Message::with_msgid("s1", schedule_msg("default", "", 10, "", "[1]"))
            .encode_routed(b"c1".to_vec()),
    });
    keep(&out, &mut records);
    h.now += us(100_000);
    let out = h.timeout();
    keep(&out, &mut records);
    assert_eq!(h.r.stats().scheduled_runs, 1);
    assert_eq!(records.len(), 1);
    // The router is down for a minute (6 runs missed); a new one restores.
    let mut h2 = H::with(Config {
        epoch_unix_micros: EPOCH + (h.now + 60 * SECOND).as_micros() as u64,
        journal: true,
        ..Config::default()
    });
    h2.now = us(0);
    let mut out = Vec::new();
    let mut bad = records.clone().into_iter().collect::<Vec<_>>();
    bad.push(("bogus".into(), b"not a record".to_vec()));
    let n = h2.r.restore(
        Restored {
            schedules: bad,
            ..Restored::default()
        },
        Duration::ZERO,
        &mut out,
    );
    assert_eq!(n.schedules, 1);
    h2.commit(&mut out);
    assert!(h2
        .journal
        .contains(&Record::DeleteSchedule { id: "bogus".into() }));
    worker(&mut h2, "w1", "", 10);
    let sent = h2.advance(us(100_000));
    assert_eq!(forwarded(&sent, "w1").len(), 1, "the missed run, once");
    for _ in 0..50 {
        h2.heartbeat("w1");
        assert!(forwarded(&h2.advance(us(100_000)), "w1").is_empty());
    }
    let v = admin(&mut h2, Command::RouterShowSchedulers);
    assert_eq!(v["schedules"][0]["run_count"], 2, "{v}");
}

#[test]
fn bad_cron_or_interval_is_rejected_malformed_with_the_reason() {
    let mut h = sched_h();
    let sent = h.msg(
        Frontend,
        "c1",
        "s1",
        schedule_msg("default", "", -1, "not a cron", "[]"),
    );
    let rj = rejects(&sent, "c1");
    assert_eq!(rj.len(), 1, "{sent:?}");
    assert_eq!(rj[0].orig_msgid, "s1");
    assert_eq!(rj[0].reason, RejectReason::Malformed);
    assert!(rj[0].text.contains("cron"), "{}", rj[0].text);
    let sent = h.msg(
        Frontend,
        "c1",
        "s2",
        schedule_msg("default", "", 0, "", "[]"),
    );
    assert_eq!(rejects(&sent, "c1")[0].reason, RejectReason::Malformed);
    assert!(h.r.schedules().is_empty());
}

#[test]
fn with_an_external_scheduler_schedule_is_forwarded_not_booked() {
    let mut h = sched_h();
    sched(&mut h, "s1");
    let sent = h.frames(Frontend, schedule_frames("SCHEDULE"));
    assert_eq!(sent.len(), 2, "forwarded, and acked to the client");
    assert_eq!(sent[0].1, "s1");
    assert!(is_ack_of(&sent[1].2, "sch-1") && sent[1].1 == "c1");
    assert!(h.r.schedules().is_empty());
    // Booked while no scheduler is connected; UNSCHEDULE with one connected
    // goes to it and removes the built-in schedule too.
    h.msg(Frontend, "s1", "k", Command::Kbye);
    let sent = h.frames(Frontend, schedule_frames("SCHEDULE"));
    assert!(is_ack_of(&sent[0].2, "sch-1"));
    assert_eq!(h.r.schedules().len(), 1);
    sched(&mut h, "s2");
    let sent = h.frames(Frontend, schedule_frames("UNSCHEDULE"));
    assert_eq!(sent.len(), 2, "forwarded, and acked to the client");
    assert_eq!(sent[0].1, "s2");
    assert!(is_ack_of(&sent[1].2, "sch-1") && sent[1].1 == "c1");
    assert!(h.r.schedules().is_empty());
}

#[test]
fn no_scheduled_runs_while_shutting_down() {
    let mut h = sched_h();
    h.msg(
        Frontend,
        "c1",
        "s1",
        schedule_msg("default", "", 1, "", "[]"),
    );
    h.input(Input::Shutdown);
    h.advance(5 * SECOND);
    assert_eq!(h.r.stats().scheduled_runs, 0);
    let sent = h.msg(
        Frontend,
        "c1",
        "s2",
        schedule_msg("default", "", 1, "", "[2]"),
    );
    assert_eq!(rejects(&sent, "c1")[0].reason, RejectReason::ShuttingDown);
}
