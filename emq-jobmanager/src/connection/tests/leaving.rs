//! The rules of `connection/leaving.rs`: the router leaving (KBYE,
//! DISCONNECT) and our own shutdown.

use super::*;

#[test]
fn kbye_or_disconnect_with_no_job_running_reconnects_after_the_delay() {
    for cmd in [Command::Kbye, Command::Disconnect] {
        let mut h = registered(2);
        let old = h.c.identity().to_string();
        assert!(h.msg(ms(100), cmd.clone()).is_empty());
        assert_eq!(h.c.slot_counts().offered, 0, "the router forgot our READYs");
        assert!(!h.c.is_draining());
        assert!(h.advance(ms(1099)).is_empty());
        let a = h.fire_at(ms(1100));
        assert_eq!(names(&a), ["connect", "INFORM"]);
        assert_ne!(h.c.identity(), old);
        assert_eq!(names(&h.ack(ms(1200), &a)), ["READY", "READY"]);
    }
}

#[test]
fn kbye_while_jobs_run_finishes_them_on_the_same_connection_then_reconnects() {
    for cmd in [Command::Kbye, Command::Disconnect] {
        let mut h = registered(3);
        let old = h.c.identity().to_string();
        let a1 = starts(&h.at(ms(100), req_msg("a", Headers::new())));
        let b1 = starts(&h.at(ms(110), req_msg("b", Headers::new())));
        assert!(h.msg(ms(200), cmd.clone()).is_empty());
        assert!(h.c.is_draining());
        assert_eq!(
            h.c.slot_counts(),
            SlotCounts {
                offered: 0,
                idle: 1,
                busy: 2,
                extra: 0,
                held: 0
            }
        );
        // No reconnect while the jobs run: the next deadline is a heartbeat.
        assert_eq!(h.c.poll_timeout(), Some(ms(3010)));
        let a = h.at(ms(1000), finished(&a1[0], JobOutcome::Value(json!("A"))));
        assert_eq!(names(&a), ["REPLY"], "no READY to a router that left");
        assert_eq!(replies(&a)[0].orig_msgid.as_deref(), Some("a"));
        assert_eq!(h.c.identity(), old, "same connection");
        assert!(h.c.is_draining());
        h.msg(ms(2000), Command::Heartbeat { timestamp: None });
        assert_eq!(
            names(&h.advance(ms(4000))),
            ["HEARTBEAT"],
            "the link is kept"
        );
        let a = h.at(ms(4500), finished(&b1[0], failed(ErrorKind::Exception)));
        assert_eq!(names(&a), ["REPLY"]);
        assert_eq!(replies(&a)[0].status, Some(ResultStatus::Failed));
        assert_eq!(h.c.identity(), old);
        assert!(!h.c.is_draining());
        // Then the reconnect, after the delay, as with no jobs.
        assert!(h.advance(ms(5499)).is_empty());
        let a = h.fire_at(ms(5500));
        assert_eq!(names(&a), ["connect", "INFORM"]);
        assert!(
            matches!(&a[0], Action::Connect { endpoint, .. } if endpoint == "tcp://127.0.0.1:2")
        );
        assert_ne!(h.c.identity(), old);
        assert_eq!(names(&h.ack(ms(5600), &a)), ["READY", "READY", "READY"]);
    }
}

#[test]
fn router_silence_while_draining_reconnects_and_the_reply_waits_for_the_ack() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    h.msg(ms(200), Command::Kbye);
    assert!(h.c.is_draining());
    assert_eq!(
        names(&h.advance(ms(9200))),
        ["HEARTBEAT", "HEARTBEAT", "HEARTBEAT"]
    );
    let a = h.fire_at(ms(9200) + Duration::from_micros(1));
    assert_eq!(names(&a), ["connect", "INFORM"]);
    assert!(!h.c.is_draining());
    assert!(h
        .at(ms(9300), finished(&s[0], JobOutcome::Value(json!(1))))
        .is_empty());
    let a2 = h.ack(ms(9400), &a);
    assert_eq!(names(&a2), ["REPLY", "READY"]);
    assert_eq!(replies(&a2)[0].orig_msgid.as_deref(), Some("j"));
}

#[test]
fn shutdown_lets_running_jobs_finish_with_heartbeats_then_says_kbye_and_exits_0() {
    let mut h = registered(2);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    // No KBYE yet: the router would redeliver the running job at once.
    let a = h.at(ms(200), Input::Shutdown);
    assert!(names(&a).is_empty(), "{:?}", names(&a));
    assert!(h.c.is_shutting_down());
    // No new jobs.
    assert!(starts(&h.at(ms(300), req_msg("late", Headers::new()))).is_empty());
    // Heartbeats go on (the router must not take us for dead), no
    // reconnects; the grace period ends at 30.2 s.
    let a = h.advance(ms(20_000));
    assert!(count(&a, "HEARTBEAT") >= 6, "{:?}", names(&a));
    assert_eq!(count(&a, "connect"), 0);
    let a = h.at(ms(21_000), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "KBYE", "exit 0"], "REPLY but no READY");
    assert_eq!(h.c.poll_timeout(), None, "stopped");
    assert!(h.advance(ms(40_000)).is_empty());
}

#[test]
fn shutdown_with_nothing_running_exits_at_once() {
    let mut h = registered(2);
    assert_eq!(names(&h.at(ms(100), Input::Shutdown)), ["KBYE", "exit 0"]);
    assert_eq!(h.c.poll_timeout(), None);
}

#[test]
fn grace_period_expiry_kills_jobs_says_kbye_without_replies_and_exits_0() {
    let mut c = cfg(2);
    c.grace_period = Duration::from_secs(5);
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    h.at(ms(100), req_msg("a", Headers::new()));
    h.at(ms(100), req_msg("b", Headers::new()));
    h.at(ms(200), Input::Shutdown);
    let a = h.advance(ms(5199));
    assert!(
        names(&a).iter().all(|n| n == "HEARTBEAT"),
        "{:?}",
        names(&a)
    );
    let a = h.fire_at(ms(5200));
    // No REPLY for the killed jobs (they did not fail: we left); the KBYE
    // makes the router redeliver them elsewhere.
    assert_eq!(names(&a), ["kill-all", "KBYE", "exit 0"]);
}

#[test]
fn replies_queued_while_disconnected_are_flushed_before_kbye_on_shutdown() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    assert_eq!(count(&h.advance(ms(9101)), "connect"), 1);
    assert!(h
        .at(ms(9200), finished(&s[0], JobOutcome::Value(json!(1))))
        .is_empty());
    assert_eq!(
        names(&h.at(ms(9300), Input::Shutdown)),
        ["REPLY", "KBYE", "exit 0"]
    );
}

#[test]
fn cancel_while_leaving_stops_the_job_and_its_reply_still_goes_out() {
    // After the router's KBYE: the REPLY on the same connection, no READY.
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("k", Headers::new())));
    h.msg(ms(200), Command::Kbye);
    assert!(h.c.is_draining());
    assert_eq!(h.msg(ms(300), cancel("k")), vec![cancel_job(&s[0])]);
    let a = h.at(ms(400), finished(&s[0], failed(ErrorKind::Exit)));
    assert_eq!(names(&a), ["REPLY"]);
    assert_eq!(replies(&a)[0].payload, CANCELLED_PAYLOAD);
    // During our own shutdown: the REPLY, then the exit.
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("s", Headers::new())));
    assert!(names(&h.at(ms(200), Input::Shutdown)).is_empty());
    assert_eq!(h.msg(ms(300), cancel("s")), vec![cancel_job(&s[0])]);
    let a = h.at(ms(400), finished(&s[0], failed(ErrorKind::Exit)));
    assert_eq!(names(&a), ["REPLY", "KBYE", "exit 0"]);
    assert_eq!(replies(&a)[0].payload, CANCELLED_PAYLOAD);
}

/// Leaving (SIGTERM) keeps the connection (a new identity would make the
/// router redeliver the jobs still running): a link down sends the recent
/// REPLYs again on it, and the running job's REPLY follows as usual.
#[test]
fn link_down_while_leaving_sends_the_recent_replies_again_on_the_same_connection() {
    let mut h = registered_resend(2);
    let id = h.c.identity().to_string();
    let s1 = starts(&h.at(ms(100), req_msg("a", Headers::new())));
    let s2 = starts(&h.at(ms(110), req_msg("b", Headers::new())));
    let a = h.at(ms(200), finished(&s1[0], JobOutcome::Value(json!(1))));
    let reply_a = reply_msgs(&a).remove(0);
    assert!(h.at(ms(300), Input::Shutdown).is_empty());
    let a = h.link_down(ms(400));
    assert_eq!(names(&a), ["REPLY"]);
    assert_eq!(reply_msgs(&a), vec![reply_a]);
    assert_eq!(h.c.identity(), id, "same connection");
    let a = h.at(ms(500), finished(&s2[0], JobOutcome::Value(json!(2))));
    assert_eq!(names(&a), ["REPLY", "KBYE", "exit 0"]);
}
