//! Random sequences of SCHEDULE / UNSCHEDULE / due / restart with a clock
//! that only moves forward.

use std::collections::{BTreeMap, BTreeSet};

use emq_schedule::{ScheduleBook, ScheduleChange, ScheduleId};
use emqp_proto::{Headers, Interval, Schedule};
use proptest::prelude::*;

const T0: i64 = 1_796_217_600_000;
const QUEUES: [&str; 3] = ["default", "email", "other"];
const CRONS: [&str; 6] = [
    "*/5 * * * *",
    "* * * * *",
    "0 * * * *",
    "* * * * * 30",
    "@hourly",
    "not a cron",
];

#[derive(Debug, Clone)]
enum Op {
    Schedule {
        queue: usize,
        msg: u8,
        interval: Interval,
        cron: Option<usize>,
        nohaste: bool,
        run_count: Option<i64>,
    },
    Unschedule {
        queue: usize,
        msg: u8,
    },
    Advance(i64),
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (
            0..QUEUES.len(),
            0u8..4,
            prop_oneof![
                Just(Interval::Unset),
                Just(Interval::Every { ms: 0 }),
                // Whole seconds as 0.3.13 sends, and sub-second intervals.
                (1i64..400).prop_map(|s| Interval::Every { ms: s * 1000 }),
                (1i64..400_000).prop_map(|ms| Interval::Every { ms }),
            ],
            proptest::option::of(0..CRONS.len()),
            any::<bool>(),
            proptest::option::of(-2i64..4),
        )
            .prop_map(|(queue, msg, interval, cron, nohaste, run_count)| Op::Schedule {
                queue,
                msg,
                interval,
                cron,
                nohaste,
                run_count,
            }),
        1 => (0..QUEUES.len(), 0u8..4).prop_map(|(queue, msg)| Op::Unschedule { queue, msg }),
        6 => prop_oneof![Just(0i64), 0i64..2_000, 0i64..400_000, 0i64..10_000_000]
            .prop_map(Op::Advance),
        1 => Just(Op::Restart),
    ]
}

fn frame(
    queue: usize,
    msg: u8,
    interval: Interval,
    cron: Option<usize>,
    headers: &str,
) -> Schedule {
    Schedule {
        queue: QUEUES[queue].to_string(),
        headers: Headers::parse(headers.as_bytes()).unwrap(),
        interval,
        message: format!("[\"run\", {{\"callable\": \"job{msg}\"}}]").into_bytes(),
        cron: cron.map(|c| CRONS[c].to_string()).unwrap_or_default(),
    }
}

fn apply(journal: &mut BTreeMap<ScheduleId, Vec<u8>>, changes: Vec<ScheduleChange>) {
    for c in changes {
        match c {
            ScheduleChange::Put { id, blob } => {
                journal.insert(id, blob);
            }
            ScheduleChange::Delete { id } => {
                journal.remove(&id);
            }
        }
    }
}

fn check_wakeup(book: &ScheduleBook) -> Result<(), TestCaseError> {
    let list = book.list();
    let min = list.iter().filter_map(|i| i.next_run_ms).min();
    prop_assert_eq!(book.next_wakeup(), min);
    if let Some(w) = book.next_wakeup() {
        for i in &list {
            if let Some(n) = i.next_run_ms {
                prop_assert!(w <= n);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_keep_the_invariants(ops in proptest::collection::vec(op(), 1..60)) {
        let mut book = ScheduleBook::new();
        let mut journal: BTreeMap<ScheduleId, Vec<u8>> = BTreeMap::new();
        let mut now = T0;
        // Ids returned by `due` at the instant `now` (reset when time moves).
        let mut fired_now: BTreeSet<ScheduleId> = BTreeSet::new();

        for op in ops {
            match op {
                Op::Schedule { queue, msg, interval, cron, nohaste, run_count } => {
                    let mut h = Vec::new();
                    if nohaste { h.push("nohaste".to_string()); }
                    if let Some(n) = run_count { h.push(format!("run_count:{n}")); }
                    let s = frame(queue, msg, interval, cron, &h.join(","));
                    let before = book.len();
                    match book.schedule(&s, now) {
                        Ok(id) => {
                            prop_assert_eq!(&id, &ScheduleId::of(&s.queue, &s.message));
                            prop_assert!(book.contains(&id));
                            prop_assert!(book.len() == before || book.len() == before + 1);
                            // A new/changed schedule may be due at once (no
                            // nohaste); it has not run at this instant yet
                            // unless it was an unchanged re-send.
                            let next = book.get(&id).unwrap().next_run_ms;
                            if next == Some(now) { fired_now.remove(&id); }
                        }
                        Err(e) => {
                            prop_assert!(!e.to_string().is_empty());
                            prop_assert_eq!(book.len(), before);
                        }
                    }
                }
                Op::Unschedule { queue, msg } => {
                    let s = frame(queue, msg, Interval::Every { ms: 60_000 }, None, "");
                    let id = ScheduleId::from(&s);
                    let had = book.contains(&id);
                    prop_assert_eq!(book.unschedule(&s), had);
                    prop_assert!(!book.contains(&id));
                }
                Op::Advance(dt) => {
                    if dt > 0 { fired_now.clear(); }
                    now += dt;
                    let runs = book.due(now);
                    let mut seen = BTreeSet::new();
                    for r in &runs {
                        prop_assert!(r.scheduled_ms <= now);
                        prop_assert!(seen.insert(r.id.clone()), "twice in one due()");
                        prop_assert!(fired_now.insert(r.id.clone()), "twice at one instant");
                        if r.last { prop_assert!(!book.contains(&r.id)); }
                    }
                    for i in book.list() {
                        if let Some(n) = i.next_run_ms { prop_assert!(n > now); }
                    }
                    prop_assert!(book.due(now).is_empty());
                }
                Op::Restart => {
                    apply(&mut journal, book.take_changes());
                    let before = book.list();
                    let mut fresh = ScheduleBook::new();
                    for blob in journal.values() {
                        fresh.restore(blob, now).unwrap();
                    }
                    // Same clock, nothing lost or changed by the round trip.
                    prop_assert_eq!(fresh.list(), before);
                    book = fresh;
                }
            }
            check_wakeup(&book)?;
        }
        // The journal, brought up to date, holds exactly the book.
        apply(&mut journal, book.take_changes());
        let ids: Vec<ScheduleId> = book.list().into_iter().map(|i| i.id).collect();
        prop_assert_eq!(journal.keys().cloned().collect::<Vec<_>>(), ids);
    }
}
