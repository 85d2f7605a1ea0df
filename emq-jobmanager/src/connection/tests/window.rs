//! The credit window in the core (`connection/window.rs` sizes it): held
//! jobs, READYs beyond the free slots.

use super::*;

/// Each REQUEST named in `ids` at `t`; the jobs started.
fn requests(h: &mut Harness, t: Duration, ids: &[&str]) -> Vec<JobStart> {
    let mut s = Vec::new();
    for id in ids {
        s.extend(starts(&h.at(t, req_msg(id, Headers::new()))));
    }
    s
}

fn with_prefetch(concurrency: usize, prefetch: Prefetch) -> Harness {
    let mut c = cfg(concurrency);
    c.prefetch = prefetch;
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    h
}

#[test]
fn fixed_prefetch_holds_jobs_beyond_the_slots_and_runs_them_in_order_never_more_than_the_slots() {
    let mut c = cfg(2);
    c.prefetch = Prefetch::Fixed(3);
    let (mut h, a) = Harness::with(c);
    assert_eq!(count(&h.ack(ms(10), &a), "READY"), 5, "2 slots + 3");
    let s = requests(&mut h, ms(100), &["a", "b", "c", "d", "e"]);
    assert_eq!(
        s.iter().map(|j| j.msgid.as_str()).collect::<Vec<_>>(),
        ["a", "b"],
        "two run, three are held"
    );
    assert_eq!(
        h.c.slot_counts(),
        SlotCounts {
            offered: 0,
            idle: 0,
            busy: 2,
            extra: 0,
            held: 3
        }
    );
    // A finished job: its REPLY, the oldest held job on its slot, one
    // READY (credit + held + running back to 5).
    let a = h.at(ms(200), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "start", "READY"]);
    assert_eq!(starts(&a)[0].msgid, "c");
    assert_eq!(starts(&a)[0].slot, s[0].slot);
    assert_eq!(h.c.slot_counts().held, 2);
}

#[test]
fn off_sends_one_ready_per_free_slot_whatever_was_measured() {
    let mut h = with_prefetch(2, Prefetch::Off);
    for i in 0..50u64 {
        let t = ms(100 + i);
        let s = starts(&h.at(t, req_msg(&format!("j{i}"), Headers::new())));
        let a = h.at(t, finished(&s[0], JobOutcome::Value(json!(1))));
        assert_eq!(names(&a), ["REPLY", "READY"]);
    }
    assert_eq!(h.c.slot_counts().offered, 2);
    assert_eq!(h.c.slot_counts().extra, 0);
}

#[test]
fn adaptive_window_opens_for_short_jobs_and_stays_shut_for_long_ones() {
    // Short jobs: 1 ms round trip (READY → REQUEST), 100 µs each, c slots:
    // 2 × (c − 1) × 1 ms / 100 µs = 20 (c − 1), at most the cap (10) and
    // at most one job per counted slot (c − 1): 2 slots announce one
    // READY beyond them (the 2-slot job manager announced 130),
    // 12 slots the cap.
    for (slots, extra) in [(2, 1), (4, 3), (12, 10)] {
        let mut h = with_prefetch(slots, Prefetch::Adaptive { cap: 10 });
        let mut t = ms(11);
        let mut readies = 0;
        for i in 0..20 {
            let s = starts(&h.at(t, req_msg(&format!("s{i}"), Headers::new())));
            assert_eq!(s.len(), 1, "a slot is free");
            t += Duration::from_micros(100);
            let a = h.at(t, finished(&s[0], JobOutcome::Value(json!(1))));
            readies += count(&a, "READY");
            t += ms(1);
        }
        assert_eq!(h.c.window().round_trip(), Some(ms(1)));
        let c = h.c.slot_counts();
        assert_eq!(c.extra, extra, "{slots} slots: {c:?}");
        assert_eq!(c.offered, slots);
        assert_eq!(readies, 20 + extra, "{slots} slots");
    }

    // Long jobs (2 s each, on a fresh job manager): never more than one
    // READY per free slot.
    let mut h = with_prefetch(2, Prefetch::Adaptive { cap: 10 });
    let mut t = ms(11);
    for i in 0..10 {
        let s = starts(&h.at(t, req_msg(&format!("l{i}"), Headers::new())));
        t += ms(2000);
        h.msg(t, Command::Heartbeat { timestamp: None });
        let a = h.at(t, finished(&s[0], JobOutcome::Value(json!(1))));
        assert_eq!(names(&a), ["REPLY", "READY"], "job {i}");
        t += ms(1);
    }
    assert_eq!(h.c.slot_counts().extra, 0);
}

#[test]
fn a_long_running_job_stops_new_credit_beyond_the_slots() {
    let mut h = with_prefetch(2, Prefetch::Adaptive { cap: 10 });
    let mut t = ms(11);
    for i in 0..20 {
        let s = starts(&h.at(t, req_msg(&format!("s{i}"), Headers::new())));
        t += Duration::from_micros(100);
        h.at(t, finished(&s[0], JobOutcome::Value(json!(1))));
        t += ms(1);
    }
    assert_eq!(h.c.slot_counts().extra, 1, "one job per counted slot");
    // One job turns long on one slot (both slots busy with jobs taken
    // from the credit).
    let long = starts(&h.at(t, req_msg("long", Headers::new())));
    let short = starts(&h.at(t, req_msg("short", Headers::new())));
    assert_eq!(long.len() + short.len(), 2);
    // 50 ms later, the short one ends: the long one has run 500 times the
    // mean, so its slot no longer counts, and the other is kept for held
    // jobs: no window.
    t += ms(50);
    h.msg(t, Command::Heartbeat { timestamp: None });
    let a = h.at(t, finished(&short[0], JobOutcome::Value(json!(1))));
    assert_eq!(
        names(&a),
        ["REPLY"],
        "no READY: credit + running is already past the window"
    );
    // Credit cannot be taken back: 2 + 1 before, one job done, none
    // announced for it: one job may still come, to the free slot.
    let c = h.c.slot_counts();
    assert_eq!(c.busy + c.held + c.offered + c.extra, 2, "{c:?}");
    assert_eq!((c.busy, c.offered, c.extra), (1, 1, 0), "{c:?}");
}

#[test]
fn cancel_of_a_held_job_replies_cancelled_at_once_and_frees_its_place() {
    let mut h = with_prefetch(1, Prefetch::Fixed(2));
    let s = requests(&mut h, ms(100), &["run", "held-1", "held-2"]);
    assert_eq!(s.len(), 1);
    let a = h.msg(ms(150), cancel("held-1"));
    assert_eq!(names(&a), ["REPLY", "READY"], "no kill: it never started");
    let r = &replies(&a)[0];
    assert_eq!(r.orig_msgid.as_deref(), Some("held-1"));
    assert_eq!(r.payload, CANCELLED_PAYLOAD);
    let a = h.at(ms(200), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "start", "READY"]);
    assert_eq!(starts(&a)[0].msgid, "held-2", "held-1 is gone");
}

#[test]
fn kbye_runs_the_held_jobs_on_the_same_connection_before_reconnecting() {
    let mut h = with_prefetch(1, Prefetch::Fixed(2));
    let old = h.c.identity().to_string();
    let s = requests(&mut h, ms(100), &["a", "b", "c"]);
    assert!(h.msg(ms(200), Command::Kbye).is_empty());
    assert!(h.c.is_draining());
    let a = h.at(ms(300), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(
        names(&a),
        ["REPLY", "start"],
        "no READY to a router that left"
    );
    let b = starts(&a);
    let a = h.at(ms(400), finished(&b[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "start"]);
    let c = starts(&a);
    assert_eq!(c[0].msgid, "c");
    assert!(h.c.is_draining());
    let a = h.at(ms(500), finished(&c[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY"]);
    assert!(!h.c.is_draining());
    assert_eq!(h.c.identity(), old, "every REPLY on the same connection");
    assert_eq!(names(&h.fire_at(ms(1500))), ["connect", "INFORM"]);
}

#[test]
fn shutdown_runs_held_jobs_within_the_grace_period_then_kbye() {
    let mut h = with_prefetch(1, Prefetch::Fixed(1));
    let s = requests(&mut h, ms(100), &["a", "b"]);
    assert!(h.at(ms(150), Input::Shutdown).is_empty());
    let a = h.at(ms(200), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "start"]);
    let b = starts(&a);
    let a = h.at(ms(300), finished(&b[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "KBYE", "exit 0"]);
}

#[test]
fn grace_period_expiry_drops_held_jobs_unstarted_before_the_kbye() {
    let mut c = cfg(1);
    c.prefetch = Prefetch::Fixed(2);
    c.grace_period = Duration::from_secs(5);
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    requests(&mut h, ms(100), &["a", "b", "c"]);
    h.at(ms(200), Input::Shutdown);
    let a = h.advance(ms(5200));
    assert_eq!(
        names(&a)
            .into_iter()
            .filter(|n| n != "HEARTBEAT")
            .collect::<Vec<_>>(),
        ["kill-all", "KBYE", "exit 0"],
        "no REPLY and no start for the held jobs: the router redelivers them"
    );
}

#[test]
fn a_reconnect_drops_held_jobs_unstarted_and_offers_only_the_free_slots_and_the_window() {
    let mut h = with_prefetch(1, Prefetch::Fixed(2));
    let s = requests(&mut h, ms(100), &["a", "b", "c"]);
    // Router silent: 9 s after its last message.
    let a = h.advance(ms(9101));
    assert_eq!(count(&a, "connect"), 1);
    assert_eq!(h.c.slot_counts().held, 0);
    let a = h.ack(ms(9200), &a);
    assert_eq!(
        names(&a),
        ["READY", "READY"],
        "slot busy: the window's 2 only"
    );
    // The running job's REPLY goes out on the new connection, then a READY.
    let a = h.at(ms(9300), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "READY"]);
}

#[test]
fn a_ready_whose_send_failed_is_no_credit_and_goes_out_again() {
    let mut h = with_prefetch(1, Prefetch::Fixed(2));
    assert_eq!(h.c.window().credit(), 3);
    let ready = Message::new(Command::Ready);
    h.send_failed(ms(20), &ready);
    assert_eq!(h.c.window().credit(), 2);
    let a = h.advance(ms(3010));
    assert_eq!(names(&a), ["READY"], "in place of the HEARTBEAT");
    assert_eq!(h.c.window().credit(), 3);
}
