//! ScheduleBook behaviour with a fake clock (unix ms passed in).

use std::collections::BTreeMap;

use emq_schedule::{ScheduleBook, ScheduleChange, ScheduleError, ScheduleId};
use emqp_proto::{Header, Headers, Interval, Schedule};

/// 2026-12-02T13:20:00Z, a Wednesday.
const T0: i64 = 1_796_217_600_000;
const SEC: i64 = 1000;
const MIN: i64 = 60 * SEC;

const JOB: &[u8] = br#"["run", {"callable": "noop", "path": "pyemq_jobs", "args": [], "kwargs": {}, "class_args": [], "class_kwargs": {}}]"#;

/// A SCHEDULE with a whole-seconds interval (`-1`: none), as 0.3.13 sends.
fn sched(headers: &str, interval_secs: i64, cron: &str) -> Schedule {
    sched_ms(headers, Interval::from_secs(interval_secs).unwrap(), cron)
}

fn sched_ms(headers: &str, interval: Interval, cron: &str) -> Schedule {
    Schedule {
        queue: "default".into(),
        headers: Headers::parse(headers.as_bytes()).unwrap(),
        interval,
        message: JOB.to_vec(),
        cron: cron.into(),
    }
}

/// Call `due` every `step` ms from `from` to `to` (inclusive) and collect
/// the times at which something was due.
fn run_times(book: &mut ScheduleBook, from: i64, to: i64, step: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut now = from;
    while now <= to {
        for _ in book.due(now) {
            out.push(now);
        }
        now += step;
    }
    out
}

/// A journal stand-in: what the router would keep via put/delete_schedule.
fn apply(journal: &mut BTreeMap<String, Vec<u8>>, changes: Vec<ScheduleChange>) {
    for c in changes {
        match c {
            ScheduleChange::Put { id, blob } => {
                journal.insert(id.to_string(), blob);
            }
            ScheduleChange::Delete { id } => {
                journal.remove(id.as_str());
            }
        }
    }
}

fn restart(journal: &BTreeMap<String, Vec<u8>>, now: i64) -> ScheduleBook {
    let mut book = ScheduleBook::new();
    for blob in journal.values() {
        book.restore(blob, now).unwrap();
    }
    book
}

#[test]
fn interval_runs_at_once_then_every_interval_over_many_periods() {
    let mut book = ScheduleBook::new();
    let id = book.schedule(&sched("guarantee", 60, ""), T0).unwrap();
    assert_eq!(book.next_wakeup(), Some(T0));
    let times = run_times(&mut book, T0, T0 + 100 * MIN, SEC);
    let expected: Vec<i64> = (0..=100).map(|k| T0 + k * MIN).collect();
    assert_eq!(times, expected);
    assert_eq!(book.next_wakeup(), Some(T0 + 101 * MIN));
    let info = book.get(&id).unwrap();
    assert_eq!(info.run_count, 101);
    assert_eq!(info.last_run_ms, Some(T0 + 100 * MIN));
    assert_eq!(info.next_run_ms, Some(T0 + 101 * MIN));
}

#[test]
fn late_polls_do_not_shift_an_interval_schedule() {
    let mut book = ScheduleBook::new();
    book.schedule(&sched("", 10, ""), T0).unwrap();
    // Poll 700 ms after each due time: runs stay on the T0 + k*10s grid.
    for k in 0..50 {
        let runs = book.due(T0 + k * 10 * SEC + 700);
        assert_eq!(runs.len(), 1, "period {k}");
        assert_eq!(runs[0].scheduled_ms, T0 + k * 10 * SEC);
        assert_eq!(book.next_wakeup(), Some(T0 + (k + 1) * 10 * SEC));
        assert!(book.due(T0 + k * 10 * SEC + 900).is_empty());
    }
}

#[test]
fn nohaste_delays_the_first_interval_run_by_one_interval() {
    let mut book = ScheduleBook::new();
    book.schedule(&sched("guarantee,nohaste", 30, ""), T0)
        .unwrap();
    assert_eq!(book.next_wakeup(), Some(T0 + 30 * SEC));
    assert!(book.due(T0).is_empty());
    assert!(book.due(T0 + 30 * SEC - 1).is_empty());
    let times = run_times(&mut book, T0, T0 + 3 * MIN, 100);
    let expected: Vec<i64> = (1..=6).map(|k| T0 + k * 30 * SEC).collect();
    assert_eq!(times, expected);
}

#[test]
fn five_field_cron_every_five_minutes_fires_at_00_05_10() {
    let mut book = ScheduleBook::new();
    // The 0.3.13 client example: cron='*/5 * * * *', headers=('nohaste',).
    let start = T0 + 2 * MIN + 17 * SEC; // 13:22:17
    book.schedule(&sched("nohaste", -1, "*/5 * * * *"), start)
        .unwrap();
    assert_eq!(book.next_wakeup(), Some(T0 + 5 * MIN)); // 13:25:00
    let times = run_times(&mut book, start, start + 2 * 60 * MIN, SEC);
    assert_eq!(times.len(), 24);
    for (k, t) in times.iter().enumerate() {
        assert_eq!(*t, T0 + (5 + 5 * k as i64) * MIN);
        assert_eq!(t % (5 * MIN), 0, "on a multiple of five minutes, second 0");
    }
}

#[test]
fn cron_without_nohaste_runs_at_once_then_on_cron_times() {
    let mut book = ScheduleBook::new();
    let start = T0 + 90 * SEC; // 13:21:30
    book.schedule(&sched("", -1, "*/5 * * * *"), start).unwrap();
    assert_eq!(book.next_wakeup(), Some(start));
    let times = run_times(&mut book, start, T0 + 15 * MIN, SEC);
    assert_eq!(
        times,
        vec![start, T0 + 5 * MIN, T0 + 10 * MIN, T0 + 15 * MIN]
    );
}

#[test]
fn six_field_cron_is_croniter_order_with_seconds_last() {
    let mut book = ScheduleBook::new();
    book.schedule(&sched("nohaste", -1, "* * * * * 30"), T0)
        .unwrap();
    let times = run_times(&mut book, T0, T0 + 3 * MIN, SEC);
    assert_eq!(times, vec![T0 + 30 * SEC, T0 + 90 * SEC, T0 + 150 * SEC]);
}

#[test]
fn the_same_schedule_twice_is_one_schedule_and_no_extra_run() {
    let mut book = ScheduleBook::new();
    let s = sched("guarantee", 60, "");
    let a = book.schedule(&s, T0).unwrap();
    assert_eq!(book.due(T0).len(), 1);
    let b = book.schedule(&s, T0 + 10 * SEC).unwrap();
    assert_eq!(a, b);
    assert_eq!(book.len(), 1);
    // Unchanged re-send: timing kept, no immediate run.
    assert!(book.due(T0 + 10 * SEC).is_empty());
    assert_eq!(book.next_wakeup(), Some(T0 + MIN));
    assert_eq!(a, ScheduleId::of("default", JOB));
}

#[test]
fn a_changed_schedule_replaces_timing_and_keeps_id_and_history() {
    let mut book = ScheduleBook::new();
    let a = book.schedule(&sched("guarantee", 60, ""), T0).unwrap();
    book.due(T0);
    let b = book
        .schedule(&sched("guarantee,nohaste", 10, ""), T0 + 5 * SEC)
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(book.len(), 1);
    let info = book.get(&a).unwrap();
    assert_eq!(info.interval_secs, Some(Interval::Every { ms: 10 * SEC }));
    assert_eq!(info.headers, "guarantee,nohaste");
    assert_eq!(info.next_run_ms, Some(T0 + 15 * SEC));
    assert_eq!(info.run_count, 1);
    assert_eq!(info.created_ms, T0);
    assert_eq!(info.updated_ms, T0 + 5 * SEC);
    // Interval -> cron keeps the id too.
    let c = book
        .schedule(&sched("", -1, "0 * * * *"), T0 + 6 * SEC)
        .unwrap();
    assert_eq!(a, c);
    let info = book.get(&a).unwrap();
    assert_eq!(
        (info.interval_secs, info.cron.as_deref()),
        (None, Some("0 * * * *"))
    );
    assert_eq!(book.next_wakeup(), Some(T0 + 6 * SEC));
}

#[test]
fn another_queue_or_message_is_another_schedule() {
    let mut book = ScheduleBook::new();
    let mut s = sched("", 60, "");
    let a = book.schedule(&s, T0).unwrap();
    s.queue = "other".into();
    let b = book.schedule(&s, T0).unwrap();
    s.message = b"[\"run\", {\"callable\": \"other\"}]".to_vec();
    let c = book.schedule(&s, T0).unwrap();
    assert_eq!(book.len(), 3);
    assert!(a != b && b != c && a != c);
    let due = book.due(T0);
    assert_eq!(due.len(), 3);
    assert_eq!(due.iter().filter(|r| r.queue == "other").count(), 2);
}

#[test]
fn unschedule_removes_by_frame_or_by_id() {
    let mut book = ScheduleBook::new();
    let id = book.schedule(&sched("guarantee", 60, ""), T0).unwrap();
    book.take_changes();
    // UNSCHEDULE carries the same five frames; only queue + message count.
    assert!(book.unschedule(&sched("", 5, "")));
    assert!(book.is_empty());
    assert_eq!(book.next_wakeup(), None);
    assert!(book.due(T0 + 10 * MIN).is_empty());
    assert_eq!(
        book.take_changes(),
        vec![ScheduleChange::Delete { id: id.clone() }]
    );
    assert!(!book.unschedule(&id));
    assert!(!book.has_changes());

    let id = book.schedule(&sched("", -1, "*/5 * * * *"), T0).unwrap();
    assert!(book.unschedule(&id));
    assert!(!book.contains(&id));
}

#[test]
fn missed_interval_runs_during_downtime_run_once() {
    let mut journal = BTreeMap::new();
    let mut book = ScheduleBook::new();
    book.schedule(&sched("guarantee", 60, ""), T0).unwrap();
    assert_eq!(book.due(T0).len(), 1);
    apply(&mut journal, book.take_changes());
    drop(book); // router stops; 10.5 intervals pass

    let now = T0 + 10 * MIN + 30 * SEC;
    let mut book = restart(&journal, now);
    assert_eq!(book.next_wakeup(), Some(T0 + MIN));
    let runs = book.due(now);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].scheduled_ms, T0 + MIN);
    assert_eq!(runs[0].run_number, 2);
    assert!(book.due(now).is_empty());
    // Re-anchored at now + interval, then every interval again.
    assert_eq!(book.next_wakeup(), Some(now + MIN));
    let times = run_times(&mut book, now, now + 3 * MIN, SEC);
    assert_eq!(times, vec![now + MIN, now + 2 * MIN, now + 3 * MIN]);
}

#[test]
fn missed_cron_runs_during_downtime_run_once() {
    let mut journal = BTreeMap::new();
    let mut book = ScheduleBook::new();
    book.schedule(&sched("nohaste", -1, "*/5 * * * *"), T0)
        .unwrap();
    apply(&mut journal, book.take_changes());
    drop(book);

    let now = T0 + 61 * MIN + 20 * SEC; // 14:21:20, 12 cron times missed
    let mut book = restart(&journal, now);
    let runs = book.due(now);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].scheduled_ms, T0 + 5 * MIN);
    assert!(book.due(now + SEC).is_empty());
    assert_eq!(book.next_wakeup(), Some(T0 + 65 * MIN)); // 14:25:00
}

#[test]
fn restore_round_trip_keeps_everything() {
    let mut book = ScheduleBook::new();
    book.schedule(&sched("guarantee,run_count:5", 60, ""), T0)
        .unwrap();
    book.schedule(&sched("nohaste", -1, "0 9 * * MON-FRI"), T0)
        .unwrap();
    let odd = Schedule {
        queue: "bin".into(),
        headers: Headers::new(),
        interval: Interval::Every { ms: 7 * SEC },
        message: vec![0xff, 0x00, 0xfe],
        cron: String::new(),
    };
    book.schedule(&odd, T0).unwrap();
    book.due(T0);
    book.due(T0 + MIN);

    let mut copy = ScheduleBook::new();
    for info in book.list() {
        let blob = book.to_blob(&info.id).unwrap();
        assert_eq!(copy.restore(&blob, T0 + MIN).unwrap(), info.id);
    }
    assert_eq!(copy.list(), book.list());
    assert_eq!(copy.next_wakeup(), book.next_wakeup());
    assert!(!copy.has_changes(), "restoring is not a change");
    assert_eq!(book.to_blob(&ScheduleId::of("nope", b"")), None);

    // Both continue identically.
    for k in 2..20 {
        assert_eq!(copy.due(T0 + k * MIN), book.due(T0 + k * MIN));
    }
}

#[test]
fn restore_pulls_in_times_when_the_clock_went_back() {
    let mut book = ScheduleBook::new();
    let id = book.schedule(&sched("nohaste", 60, ""), T0).unwrap();
    let cid = book
        .schedule(
            &Schedule {
                queue: "c".into(),
                ..sched("nohaste", -1, "0 * * * *")
            },
            T0,
        )
        .unwrap();
    let blob = book.to_blob(&id).unwrap();
    let cblob = book.to_blob(&cid).unwrap();
    let earlier = T0 - 2 * 60 * MIN;
    let mut b2 = ScheduleBook::new();
    b2.restore(&blob, earlier).unwrap();
    b2.restore(&cblob, earlier).unwrap();
    assert_eq!(b2.get(&id).unwrap().next_run_ms, Some(earlier + MIN));
    // 11:20 -> the next full hour, 12:00.
    assert_eq!(b2.get(&cid).unwrap().next_run_ms, Some(T0 - 80 * MIN));
    assert!(b2.has_changes());
}

#[test]
fn changes_tell_the_caller_what_to_journal() {
    let mut book = ScheduleBook::new();
    let id = book.schedule(&sched("", 60, ""), T0).unwrap();
    let changes = book.take_changes();
    assert_eq!(changes.len(), 1);
    let ScheduleChange::Put { id: pid, blob } = &changes[0] else {
        panic!("expected a put, got {changes:?}");
    };
    assert_eq!(pid, &id);
    let rec: serde_json::Value = serde_json::from_slice(blob).unwrap();
    assert_eq!(rec["version"], 1);
    assert_eq!(rec["run_count"], 0);
    assert_eq!(rec["next_run_ms"], T0);
    assert!(book.take_changes().is_empty());

    // Re-sending unchanged is not a change.
    book.schedule(&sched("", 60, ""), T0 + 1).unwrap();
    assert!(!book.has_changes());

    // A run is a change (run_count, last/next run).
    book.due(T0);
    match book.take_changes().as_slice() {
        [ScheduleChange::Put { blob, .. }] => {
            let rec: serde_json::Value = serde_json::from_slice(blob).unwrap();
            assert_eq!(rec["run_count"], 1);
            assert_eq!(rec["last_run_ms"], T0);
            assert_eq!(rec["next_run_ms"], T0 + MIN);
        }
        other => panic!("unexpected {other:?}"),
    }
    // Nothing due, nothing changed.
    book.due(T0 + 1);
    assert!(!book.has_changes());
}

#[test]
fn run_count_limits_the_total_number_of_runs() {
    let mut book = ScheduleBook::new();
    let id = book
        .schedule(&sched("guarantee,run_count:3", 60, ""), T0)
        .unwrap();
    book.take_changes();
    let mut runs = Vec::new();
    for k in 0..10 {
        runs.extend(book.due(T0 + k * MIN));
    }
    assert_eq!(runs.len(), 3, "the immediate run counts");
    assert_eq!(
        runs.iter()
            .map(|r| (r.run_number, r.last))
            .collect::<Vec<_>>(),
        vec![(1, false), (2, false), (3, true)]
    );
    assert!(!book.contains(&id));
    assert_eq!(book.next_wakeup(), None);
    assert_eq!(book.take_changes(), vec![ScheduleChange::Delete { id }]);

    // With nohaste: three runs, one interval apart, the first after one.
    let mut book = ScheduleBook::new();
    book.schedule(&sched("nohaste,run_count:3", 60, ""), T0)
        .unwrap();
    let times = run_times(&mut book, T0, T0 + 10 * MIN, SEC);
    assert_eq!(times, vec![T0 + MIN, T0 + 2 * MIN, T0 + 3 * MIN]);
    assert!(book.is_empty());

    // A cron schedule honours it too (0.3.13 did not).
    let mut book = ScheduleBook::new();
    book.schedule(&sched("nohaste,run_count:2", -1, "*/5 * * * *"), T0)
        .unwrap();
    let times = run_times(&mut book, T0, T0 + 60 * MIN, SEC);
    assert_eq!(times, vec![T0 + 5 * MIN, T0 + 10 * MIN]);

    // -1 is unlimited; run-count:N is accepted as a spelling.
    let mut book = ScheduleBook::new();
    let id = book.schedule(&sched("run_count:-1", 60, ""), T0).unwrap();
    assert_eq!(book.get(&id).unwrap().run_limit, None);
    let id = book
        .schedule(
            &Schedule {
                queue: "q2".into(),
                ..sched("run-count:2", 60, "")
            },
            T0,
        )
        .unwrap();
    assert_eq!(book.get(&id).unwrap().runs_left, Some(2));
}

#[test]
fn run_limit_survives_a_restart() {
    let mut journal = BTreeMap::new();
    let mut book = ScheduleBook::new();
    book.schedule(&sched("run_count:3", 60, ""), T0).unwrap();
    book.due(T0);
    apply(&mut journal, book.take_changes());
    let mut book = restart(&journal, T0 + 30 * MIN);
    assert_eq!(book.due(T0 + 30 * MIN).len(), 1);
    apply(&mut journal, book.take_changes());
    let mut book = restart(&journal, T0 + 31 * MIN);
    let last = book.due(T0 + 31 * MIN);
    assert_eq!(last.len(), 1);
    assert!(last[0].last);
    apply(&mut journal, book.take_changes());
    assert!(journal.is_empty());
}

#[test]
fn due_runs_carry_job_headers_without_schedule_directives() {
    let mut book = ScheduleBook::new();
    book.schedule(
        &sched("guarantee,run_count:4,timeout:10,x-trace:1", 60, ""),
        T0,
    )
    .unwrap();
    let runs = book.due(T0);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].headers.encode(), "guarantee,timeout:10,x-trace:1");
    assert_eq!(runs[0].queue, "default");
    assert_eq!(runs[0].message, JOB);
    assert!(!runs[0].headers.0.contains(&Header::NoHaste));
}

#[test]
fn bad_inputs_are_typed_errors() {
    let mut book = ScheduleBook::new();
    let cases: Vec<(Schedule, ScheduleError)> = vec![
        (sched("", -1, ""), ScheduleError::NeitherIntervalNorCron),
        (sched("", -1, "   "), ScheduleError::NeitherIntervalNorCron),
        (sched("", 0, ""), ScheduleError::ZeroInterval),
        (sched("", 0, "* * * * *"), ScheduleError::ZeroInterval),
        (
            sched("", -5, ""),
            ScheduleError::NegativeInterval(Interval::Every { ms: -5 * SEC }),
        ),
        (
            sched_ms("", Interval::Every { ms: -500 }, ""),
            ScheduleError::NegativeInterval(Interval::Every { ms: -500 }),
        ),
        (
            sched("", 60, "*/5 * * * *"),
            ScheduleError::BothIntervalAndCron {
                interval: Interval::Every { ms: MIN },
                cron: "*/5 * * * *".into(),
            },
        ),
        (
            sched_ms("nohaste", Interval::Every { ms: i64::MAX }, ""),
            ScheduleError::IntervalTooLarge(Interval::Every { ms: i64::MAX }),
        ),
        (
            sched("nohaste", i64::MAX / 1000, ""),
            ScheduleError::IntervalTooLarge(Interval::Every {
                ms: i64::MAX / 1000 * 1000,
            }),
        ),
        (
            sched("", -1, "0 0 30 2 *"),
            ScheduleError::CronNeverFires {
                cron: "0 0 30 2 *".into(),
            },
        ),
        (
            sched("run_count:0", 60, ""),
            ScheduleError::BadRunCount { value: "0".into() },
        ),
        (
            sched("run_count:x", 60, ""),
            ScheduleError::BadRunCount { value: "x".into() },
        ),
        (
            sched("run_count:-2", 60, ""),
            ScheduleError::BadRunCount { value: "-2".into() },
        ),
    ];
    for (s, want) in cases {
        assert_eq!(book.schedule(&s, T0), Err(want.clone()), "{s:?}");
        assert!(!want.to_string().is_empty());
    }
    for bad in [
        "61 * * * *",
        "* * * *",
        "*/5 * * * * * *",
        "every day",
        "@never",
    ] {
        match book.schedule(&sched("", -1, bad), T0) {
            Err(ScheduleError::BadCron { cron, message }) => {
                assert_eq!(cron, bad);
                assert!(!message.is_empty());
                let text = ScheduleError::BadCron { cron, message }.to_string();
                assert!(text.contains(bad), "{text}");
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert!(book.is_empty());
    assert!(!book.has_changes());
}

#[test]
fn bad_records_are_typed_errors() {
    let mut book = ScheduleBook::new();
    let id = book.schedule(&sched("", 60, ""), T0).unwrap();
    let blob = book.to_blob(&id).unwrap();
    let rec: serde_json::Value = serde_json::from_slice(&blob).unwrap();
    let with = |k: &str, v: serde_json::Value| {
        let mut r = rec.clone();
        r[k] = v;
        serde_json::to_vec(&r).unwrap()
    };
    let bads: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"not json".to_vec(),
        b"{}".to_vec(),
        b"[1,2]".to_vec(),
        with("version", 2.into()),
        with("id", "00".into()),
        with("queue", "elsewhere".into()),
        with("interval_secs", 0.into()),
        with("cron", "* * *".into()),
        with("runs_left", 3.into()),
        with("headers", "run_count:q".into()),
    ];
    let mut fresh = ScheduleBook::new();
    for b in bads {
        assert!(
            fresh.restore(&b, T0).is_err(),
            "{}",
            String::from_utf8_lossy(&b)
        );
    }
    assert!(fresh.is_empty());
    assert!(matches!(
        fresh.restore(&with("version", 9.into()), T0),
        Err(ScheduleError::BadRecord(_))
    ));
    assert!(matches!(
        fresh.restore(&with("interval_secs", 0.into()), T0),
        Err(ScheduleError::ZeroInterval)
    ));
}

#[test]
fn extreme_times_do_not_panic() {
    let mut book = ScheduleBook::new();
    book.schedule(&sched("", 1, ""), i64::MAX - 500).unwrap();
    assert_eq!(book.due(i64::MAX).len(), 1);
    assert!(book.due(i64::MAX).is_empty(), "dormant, not due twice");
    assert_eq!(book.next_wakeup(), None);
    // Times the calendar cannot represent: a cron schedule has no next time.
    let mut book = ScheduleBook::new();
    for t in [i64::MIN, i64::MAX, -1, 200_000_000_000_000] {
        let r = book.schedule(&sched("", -1, "* * * * *"), t);
        if t == -1 {
            assert!(r.is_ok());
            assert_eq!(book.due(-1).len(), 1);
            assert_eq!(book.next_wakeup(), Some(0));
        } else {
            assert!(
                matches!(r, Err(ScheduleError::CronNeverFires { .. })),
                "{t}: {r:?}"
            );
        }
    }
    assert!(book.due(i64::MIN).is_empty());
}

#[test]
fn list_serialises_for_the_admin_reply() {
    let mut book = ScheduleBook::new();
    let id = book
        .schedule(&sched("guarantee,nohaste", 60, ""), T0)
        .unwrap();
    let v = serde_json::to_value(book.list()).unwrap();
    assert_eq!(v[0]["id"], id.as_str());
    assert_eq!(v[0]["queue"], "default");
    assert_eq!(v[0]["headers"], "guarantee,nohaste");
    assert_eq!(v[0]["interval_secs"], 60);
    assert_eq!(v[0]["cron"], serde_json::Value::Null);
    assert_eq!(v[0]["nohaste"], true);
    assert_eq!(v[0]["next_run_ms"], T0 + MIN);
    assert_eq!(v[0]["last_run_ms"], serde_json::Value::Null);
    assert_eq!(v[0]["run_count"], 0);
    assert_eq!(v[0]["created_ms"], T0);
}

/// The frames of 0.3.13's `schedule(s, 'pyemq_jobs.noop', interval_secs=60)`
/// as captured in `shared/vectors/client_to_router.json` (DEALER side),
/// with the INTERVAL frame replaced by `interval`: `str(interval_secs)`.
fn python_schedule_frames(interval: &str) -> Vec<Vec<u8>> {
    [
        "",
        "eMQP/1.0",
        "SCHEDULE",
        "a53d518c-5d53-433d-aab6-d81ef83adf69",
        "default",
        "guarantee",
        interval,
        std::str::from_utf8(JOB).unwrap(),
        "",
    ]
    .iter()
    .map(|f| f.as_bytes().to_vec())
    .collect()
}

fn decoded_schedule(interval: &str) -> Schedule {
    match emqp_proto::Message::decode(python_schedule_frames(interval))
        .unwrap()
        .command
    {
        emqp_proto::Command::Schedule(s) => s,
        other => panic!("{other:?}"),
    }
}

#[test]
fn captured_python_schedule_runs_every_60_s() {
    let mut book = ScheduleBook::new();
    book.schedule(&decoded_schedule("60"), T0).unwrap();
    let times = run_times(&mut book, T0, T0 + 3 * MIN, SEC);
    assert_eq!(times, vec![T0, T0 + MIN, T0 + 2 * MIN, T0 + 3 * MIN]);
}

/// `schedule(s, f, interval_secs=1.5)` from a 0.3.13 client: runs every
/// 1500 ms, to the millisecond, and keeps that through the journal and in
/// the admin listing.
#[test]
fn python_float_interval_runs_every_1500_ms_and_survives_a_restart() {
    let mut book = ScheduleBook::new();
    let id = book.schedule(&decoded_schedule("1.5"), T0).unwrap();
    let times = run_times(&mut book, T0, T0 + 6 * SEC, 100);
    let expected: Vec<i64> = (0..=4).map(|k| T0 + k * 1_500).collect();
    assert_eq!(times, expected);
    assert_eq!(book.next_wakeup(), Some(T0 + 7_500));

    let info = serde_json::to_value(book.list()).unwrap();
    assert_eq!(info[0]["interval_secs"], serde_json::json!(1.5));
    let mut journal = BTreeMap::new();
    apply(&mut journal, book.take_changes());
    let record: serde_json::Value = serde_json::from_slice(&journal[id.as_str()]).unwrap();
    assert_eq!(record["interval_secs"], serde_json::json!(1.5));

    let mut again = restart(&journal, T0 + 7_000);
    assert_eq!(
        again.get(&id).unwrap().interval_secs,
        Some(Interval::Every { ms: 1_500 })
    );
    assert_eq!(again.next_wakeup(), Some(T0 + 7_500));
    let times = run_times(&mut again, T0 + 7_000, T0 + 10_600, 100);
    assert_eq!(times, vec![T0 + 7_500, T0 + 9_000, T0 + 10_500]);
}

#[test]
fn half_second_nohaste_and_repeat_with_another_spelling_is_unchanged() {
    let mut book = ScheduleBook::new();
    let s = sched_ms("nohaste", Interval::Every { ms: 500 }, "");
    let id = book.schedule(&s, T0).unwrap();
    assert_eq!(book.next_wakeup(), Some(T0 + 500));
    let times = run_times(&mut book, T0, T0 + 2 * SEC, 50);
    assert_eq!(times, vec![T0 + 500, T0 + 1_000, T0 + 1_500, T0 + 2_000]);
    // `0.5` and `0.500` are the same interval: a re-sent SCHEDULE changes
    // nothing (no extra run, timing kept).
    let mut again = s.clone();
    again.interval = Interval::parse("0.500").unwrap();
    book.take_changes();
    assert_eq!(book.schedule(&again, T0 + 2_100).unwrap(), id);
    assert!(!book.has_changes());
    assert_eq!(book.next_wakeup(), Some(T0 + 2_500));
}

/// Issue 26 item 7: a cron schedule every 5 s (croniter order, seconds
/// last) runs at T0; the router is down for ~10 s (the T0+5 s run missed)
/// and is back 10 ms before T0+10 s. One catch-up run at once, which
/// stands for T0+10 s (the nearer time), then the schedule's own times —
/// not a second run 10 ms after the catch-up.
#[test]
fn a_catch_up_run_just_before_a_cron_time_stands_for_it() {
    let mut journal = BTreeMap::new();
    let mut book = ScheduleBook::new();
    book.schedule(&sched("", -1, "* * * * * */5"), T0).unwrap();
    assert_eq!(book.due(T0).len(), 1);
    apply(&mut journal, book.take_changes());
    drop(book);

    let now = T0 + 10 * SEC - 10;
    let mut book = restart(&journal, now);
    let times = run_times(&mut book, now, T0 + 21 * SEC, 10);
    assert_eq!(times, vec![now, T0 + 15 * SEC, T0 + 20 * SEC]);

    // Back nearer the missed time than the next one: the catch-up stands
    // for the missed time, the next runs on time.
    let now = T0 + 7 * SEC;
    let mut book = restart(&journal, now);
    let times = run_times(&mut book, now, T0 + 16 * SEC, 10);
    assert_eq!(times, vec![now, T0 + 10 * SEC, T0 + 15 * SEC]);
}

/// The same rule on a poll that comes late without a restart, and not on
/// the immediate first run of a schedule created just before a cron time.
#[test]
fn a_late_cron_run_never_leaves_two_runs_closer_than_half_the_spacing() {
    let mut book = ScheduleBook::new();
    book.schedule(&sched("nohaste", -1, "* * * * * */5"), T0)
        .unwrap();
    // Polled 4.99 s late for T0+5 s (a stalled router).
    let late = T0 + 10 * SEC - 10;
    assert_eq!(book.due(late).len(), 1);
    assert_eq!(book.next_wakeup(), Some(T0 + 15 * SEC));

    let mut book = ScheduleBook::new();
    let created = T0 + 5 * SEC - 10;
    book.schedule(&sched("", -1, "* * * * * */5"), created)
        .unwrap();
    let times = run_times(&mut book, created, T0 + 10 * SEC, 10);
    assert_eq!(times, vec![created, T0 + 5 * SEC, T0 + 10 * SEC]);
}
