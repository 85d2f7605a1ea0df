//! The rules of `connection/replies.rs`: one REPLY per job, results too
//! large, send failures and flush points.

use super::*;

#[test]
fn a_result_over_the_max_message_size_becomes_a_result_too_large_failure() {
    let mut c = cfg(1);
    c.max_message_size = Some(1000);
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    // `{"value":"x…"}` is 12 bytes plus the string: 988 x's are exactly the limit.
    let s = starts(&h.at(ms(100), req_msg("fits", Headers::new())));
    let a = h.at(
        ms(200),
        finished(&s[0], JobOutcome::Value(json!("x".repeat(988)))),
    );
    assert_eq!(names(&a), ["REPLY", "READY"]);
    assert_eq!(replies(&a)[0].payload.len(), 1000);
    assert_eq!(replies(&a)[0].status, Some(ResultStatus::Ok));

    let s = starts(&h.at(ms(300), req_msg("big", Headers::new())));
    let a = h.at(
        ms(400),
        finished(&s[0], JobOutcome::Value(json!("x".repeat(989)))),
    );
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let r = &replies(&a)[0];
    assert_eq!(r.orig_msgid.as_deref(), Some("big"));
    assert_eq!(r.status, Some(ResultStatus::Failed));
    assert!(r.payload.len() <= 1000);
    let text = String::from_utf8(r.payload.clone()).unwrap();
    assert!(text.contains(r#""kind":"result-too-large""#), "{text}");
    let JobOutcome::Error(e) = outcome(r) else {
        panic!()
    };
    assert_eq!(e.kind, ErrorKind::ResultTooLarge);
    assert!(
        e.message.contains("1001 bytes") && e.message.contains("1000 bytes"),
        "size and limit in {:?}",
        e.message
    );
    assert_eq!(e.attempts, Some(1));

    // A failure that is too big (a shell job's huge stdout) too.
    let s = starts(&h.at(ms(500), req_msg("big-error", Headers::new())));
    let mut err = JobError::new(ErrorKind::Exit, "exit status 1");
    err.stdout = Some("y".repeat(5000));
    let a = h.at(ms(600), finished(&s[0], JobOutcome::Error(err)));
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!(e.kind, ErrorKind::ResultTooLarge);
}

#[test]
fn max_message_size_defaults_to_16_mib_and_none_is_unlimited() {
    assert_eq!(cfg(1).max_message_size, Some(16 * 1024 * 1024));
    let mut c = cfg(1);
    c.max_message_size = None;
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    let a = h.at(
        ms(200),
        finished(&s[0], JobOutcome::Value(json!("x".repeat(100_000)))),
    );
    assert_eq!(replies(&a)[0].status, Some(ResultStatus::Ok));
}

#[test]
fn reply_of_a_job_finishing_while_disconnected_waits_for_the_ack() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    let a = h.advance(ms(9101));
    assert_eq!(names(&a).last().map(String::as_str), Some("INFORM"));
    let done = h.at(ms(9200), finished(&s[0], JobOutcome::Value(json!(7))));
    assert!(
        done.is_empty(),
        "no REPLY/READY before the ACK: {:?}",
        names(&done)
    );
    let a2 = h.ack(ms(9300), &a);
    assert_eq!(names(&a2), ["REPLY", "READY"]);
    assert_eq!(replies(&a2)[0].orig_msgid.as_deref(), Some("j"));
}

#[test]
fn a_reply_whose_send_failed_is_sent_again_at_the_heartbeat_deadline() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    let a = h.at(ms(500), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let reply = sent(&a, "REPLY").remove(0);
    assert!(h.send_failed(ms(500), &reply).is_empty());
    assert_eq!(h.c.slot_counts().offered, 1, "the READY went out");
    h.msg(ms(2000), Command::Heartbeat { timestamp: None });
    // In place of the HEARTBEAT, the same REPLY again.
    let a = h.fire_at(ms(3500));
    assert_eq!(names(&a), ["REPLY"]);
    assert_eq!(sent(&a, "REPLY")[0], reply);
    // Sent once: the next deadline is a plain HEARTBEAT.
    h.msg(ms(5000), Command::Heartbeat { timestamp: None });
    assert_eq!(names(&h.fire_at(ms(6500))), ["HEARTBEAT"]);
}

#[test]
fn a_reply_whose_send_failed_goes_out_before_the_next_reply() {
    let mut h = registered(2);
    let a = starts(&h.at(ms(100), req_msg("a", Headers::new())));
    let b = starts(&h.at(ms(100), req_msg("b", Headers::new())));
    let out = h.at(ms(200), finished(&a[0], JobOutcome::Value(json!("A"))));
    let ready_a = sent(&out, "READY").remove(0);
    h.send_failed(ms(200), &sent(&out, "REPLY")[0]);
    h.send_failed(ms(200), &ready_a);
    assert_eq!(
        h.c.slot_counts(),
        SlotCounts {
            offered: 0,
            idle: 1,
            busy: 1,
            extra: 0,
            held: 0
        }
    );
    let out = h.at(ms(300), finished(&b[0], JobOutcome::Value(json!("B"))));
    assert_eq!(names(&out), ["REPLY", "REPLY", "READY", "READY"]);
    let ids: Vec<_> = replies(&out)
        .iter()
        .map(|r| r.orig_msgid.clone().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b"], "the lost REPLY first");
    assert_eq!(h.c.slot_counts().offered, 2);
}

#[test]
fn a_ready_whose_send_failed_frees_its_slot_unoffered_and_is_offered_again() {
    let (mut h, a) = Harness::new(2);
    let a = h.ack(ms(10), &a);
    let readies = sent(&a, "READY");
    assert_eq!(readies.len(), 2);
    assert!(h.send_failed(ms(10), &readies[1]).is_empty());
    assert_eq!(
        h.c.slot_counts(),
        SlotCounts {
            offered: 1,
            idle: 1,
            busy: 0,
            extra: 0,
            held: 0
        }
    );
    h.msg(ms(1000), Command::Heartbeat { timestamp: None });
    // Offered again at the heartbeat deadline, in place of the HEARTBEAT.
    let a = h.fire_at(ms(3010));
    assert_eq!(names(&a), ["READY"]);
    assert_eq!(h.c.slot_counts().offered, 2);

    // Lost again and again: re-offered at each deadline, never over-counted.
    let mut t = 3010;
    for _ in 0..3 {
        let r = sent(&a, "READY");
        let r = r.first().expect("a READY");
        h.send_failed(ms(t), r);
        assert_eq!(h.c.slot_counts().idle, 1);
        h.msg(ms(t + 1000), Command::Heartbeat { timestamp: None });
        t += 3000;
        assert_eq!(names(&h.fire_at(ms(t))), ["READY"]);
    }
    assert_eq!(h.c.slot_counts().offered, 2);
    // A failed HEARTBEAT or INFORM changes nothing (their timers cover them).
    let hb = Message::new(Command::Heartbeat { timestamp: None });
    assert!(h.send_failed(ms(t), &hb).is_empty());
    assert_eq!(h.c.slot_counts().offered, 2);
}

#[test]
fn a_ready_lost_just_before_a_reconnect_is_not_counted_twice() {
    let mut h = registered(1);
    // Router silent since the ACK at 10 ms: a new connection at 9010 ms.
    let a = h.advance(ms(9011));
    assert_eq!(count(&a, "connect"), 1);
    // The READY of the old connection is reported lost after the reconnect.
    let stale = Message::new(Command::Ready);
    h.send_failed(ms(9011), &stale);
    assert_eq!(h.c.slot_counts().idle, 1);
    let a2 = h.ack(ms(9100), &a);
    assert_eq!(names(&a2), ["READY"]);
}

impl Harness {
    /// ACK the INFORM in `actions` listing `reply-credit` (and
    /// `reply-resend`, as an emq router does).
    fn ack_credit(&mut self, t: Duration, actions: &[Action]) -> Vec<Action> {
        let id = inform_msgid(actions).expect("an INFORM to ACK");
        self.msg(
            t,
            Command::Ack {
                acked_msgid: id,
                features: vec![
                    FEATURE_REPLY_RESEND.into(),
                    emqp_proto::command::FEATURE_REPLY_CREDIT.into(),
                ],
            },
        )
    }
}

/// `reply-credit`: the READY that frees a finished job's slot goes in
/// that job's REPLY, one message where there were two; the credit counts
/// as outstanding READYs all the same.
#[test]
fn to_a_router_that_takes_credit_the_ready_of_a_finished_job_rides_in_its_reply() {
    let mut c = cfg(2);
    c.prefetch = Prefetch::Off;
    let (mut h, a) = Harness::with(c);
    // The seed READYs follow no REPLY: messages of their own.
    let a = h.ack_credit(ms(10), &a);
    assert_eq!(count(&a, "READY"), 2);
    let s = starts(&h.at(ms(20), req_msg("j1", Headers::new())));
    assert_eq!(h.c.window.credit(), 1);
    let a = h.at(ms(30), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY"], "no READY message");
    let r = &replies(&a)[0];
    assert_eq!((r.orig_msgid.as_deref(), r.credit), (Some("j1"), 1));
    assert_eq!(h.c.window.credit(), 2, "the READY in the REPLY is credit");
    // On the wire: the fourth frame.
    let Action::Send(m) = &a[0] else { panic!() };
    let frames = m.clone().encode();
    assert_eq!(frames.last().map(Vec::as_slice), Some(&b"1"[..]));
    // The copy kept for the resend window carries no credit.
    let copies = h.c.sent_replies.in_window(ms(30));
    assert_eq!(copies.len(), 1);
    let Command::Reply(copy) = &copies[0].command else {
        panic!()
    };
    assert_eq!(copy.credit, 0);
}

#[test]
fn a_reply_with_credit_that_cannot_be_sent_gives_its_readies_back() {
    let mut c = cfg(1);
    c.prefetch = Prefetch::Off;
    let (mut h, a) = Harness::with(c);
    h.ack_credit(ms(10), &a);
    let s = starts(&h.at(ms(20), req_msg("j1", Headers::new())));
    assert_eq!(h.c.window.credit(), 0);
    let a = h.at(ms(30), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(h.c.window.credit(), 1);
    let m = reply_msgs(&a).remove(0);
    // The send failed: the READY in it was never sent, and the REPLY goes
    // again (at the next flush point) with the READY offered again.
    h.send_failed(ms(31), &m);
    assert_eq!(h.c.window.credit(), 0, "no credit the router never got");
    let a = h.advance(ms(31) + h.c.cfg.heartbeat_interval);
    let r = replies(&a);
    assert_eq!(r.len(), 1, "{:?}", names(&a));
    assert_eq!(r[0].orig_msgid.as_deref(), Some("j1"));
    assert_eq!(r[0].credit, 1, "{:?}", names(&a));
    assert_eq!(count(&a, "READY"), 0);
    assert_eq!(h.c.window.credit(), 1);
}

/// A router that did not list `reply-credit` (a 0.3.13 router, or an emq
/// one before it) gets READY messages and three-frame REPLYs, as before.
#[test]
fn without_reply_credit_the_ready_is_a_message_of_its_own() {
    let mut h = registered_resend(1);
    let s = starts(&h.at(ms(20), req_msg("j1", Headers::new())));
    let a = h.at(ms(30), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    assert_eq!(replies(&a)[0].credit, 0);
    let Action::Send(m) = &a[0] else { panic!() };
    assert_eq!(
        m.clone().encode().len(),
        7,
        "[\"\", eMQP/1.0, REPLY, msgid, MSG, ORIG_MSGID, STATUS]"
    );
}
