//! The rules of `connection/resend.rs`: REPLYs sent again after a reconnect.

use super::*;

/// The REPLYs of the last interval × liveness + ACK timeout (14 s) go
/// out again, as they were, after the ACK of every reconnect (link down,
/// router silence, KBYE), before the queued REPLYs and the READYs; no
/// longer once their window ended.
#[test]
fn recent_replies_go_out_again_after_each_reconnect_within_their_window() {
    let mut h = registered_resend(2);
    let s = starts(&h.at(ms(100), req_msg("a", Headers::new())));
    let first = h.at(ms(200), finished(&s[0], JobOutcome::Value(json!("A"))));
    assert_eq!(names(&first), ["REPLY", "READY"]);
    let reply_a = reply_msgs(&first).remove(0);
    let s = starts(&h.at(ms(300), req_msg("b", Headers::new())));
    assert_eq!(h.c.resend_counts(), (1, 0));

    // Link down: b finishes while the INFORM waits for its ACK.
    let a = h.link_down(ms(400));
    h.at(ms(450), finished(&s[0], failed(ErrorKind::Exception)));
    let a2 = h.ack_resend(ms(500), &a);
    assert_eq!(names(&a2), ["REPLY", "REPLY", "READY", "READY"]);
    let r = reply_msgs(&a2);
    assert_eq!(r[0], reply_a, "the copy of a, as sent (same msgid)");
    assert_eq!(replies(&a2)[1].orig_msgid.as_deref(), Some("b"));
    assert_eq!(h.c.resend_counts(), (2, 0));

    // Router silence 9 s after its last message (the ACK at 500 ms): both
    // again (a was sent at 200 ms, b at 500 ms: within 14 s of 9.6 s).
    assert_eq!(crate::connection::resend::window(&h.c.cfg), ms(14_000));
    let a = h.advance(ms(9501));
    assert_eq!(names(&a).last().map(String::as_str), Some("INFORM"));
    let a3 = h.ack_resend(ms(9600), &a);
    assert_eq!(names(&a3), ["REPLY", "REPLY", "READY", "READY"]);
    assert_eq!(reply_msgs(&a3)[0], reply_a);

    // KBYE, reconnect 1 s later: the windows (14 s from 200 and 500 ms)
    // are over.
    h.msg(ms(14_500), Command::Kbye);
    let a = h.fire_at(ms(15_500));
    assert_eq!(names(&a), ["connect", "INFORM"]);
    let a4 = h.ack_resend(ms(15_600), &a);
    assert_eq!(names(&a4), ["READY", "READY"]);
    assert_eq!(h.c.resend_counts(), (0, 0));
}

/// A 0.3.13 router would forward a REPLY it got twice to the client: the
/// copies go only to a router whose ACK listed `reply-resend`, and are
/// dropped when the next router does not list it.
#[test]
fn nothing_is_sent_again_to_a_router_without_reply_resend() {
    // Never kept for such a router.
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("a", Headers::new())));
    h.at(ms(200), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(h.c.resend_counts(), (0, 0));
    let a = h.link_down(ms(300));
    assert_eq!(names(&h.ack_resend(ms(400), &a)), ["READY"]);

    // Kept for an emq router, dropped on reaching one that does not list it.
    let mut h = registered_resend(1);
    let s = starts(&h.at(ms(100), req_msg("a", Headers::new())));
    h.at(ms(200), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(h.c.resend_counts(), (1, 0));
    let a = h.link_down(ms(300));
    assert_eq!(names(&h.ack(ms(400), &a)), ["READY"]);
    assert_eq!(h.c.resend_counts(), (0, 0));
}

/// At most `resend_max_replies` copies and `resend_max_bytes` of payload:
/// the oldest go first (counted); a REPLY bigger than the byte bound is
/// never kept.
#[test]
fn the_copies_are_bounded_oldest_forgotten_first() {
    let mut c = cfg(1);
    c.resend_max_replies = 2;
    c.resend_max_bytes = 200;
    let (mut h, a) = Harness::with(c);
    h.ack_resend(ms(10), &a);
    let mut sent_replies = Vec::new();
    for (i, id) in ["a", "b", "c"].iter().enumerate() {
        let t = 100 * (i as u64 + 1);
        let s = starts(&h.at(ms(t), req_msg(id, Headers::new())));
        let a = h.at(ms(t + 50), finished(&s[0], JobOutcome::Value(json!(id))));
        sent_replies.push(reply_msgs(&a).remove(0));
    }
    assert_eq!(h.c.resend_counts(), (2, 1), "a forgotten");
    let a = h.link_down(ms(400));
    let a2 = h.ack_resend(ms(500), &a);
    assert_eq!(reply_msgs(&a2), sent_replies[1..].to_vec());
    // A result of 300 bytes is over the byte bound: not kept, and the two
    // others stay.
    let s = starts(&h.at(ms(600), req_msg("big", Headers::new())));
    h.at(
        ms(650),
        finished(&s[0], JobOutcome::Value(json!("x".repeat(300)))),
    );
    assert_eq!(h.c.resend_counts(), (2, 2));
}

/// A REPLY whose send failed is queued, not a copy: after the reconnect
/// it goes out once.
#[test]
fn a_reply_whose_send_failed_goes_out_once_after_the_reconnect() {
    let mut h = registered_resend(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    let a = h.at(ms(200), finished(&s[0], JobOutcome::Value(json!(1))));
    let r = reply_msgs(&a).remove(0);
    h.send_failed(ms(200), &r);
    assert_eq!(h.c.resend_counts(), (0, 0));
    let a = h.link_down(ms(300));
    let a2 = h.ack_resend(ms(400), &a);
    assert_eq!(names(&a2), ["REPLY", "READY"]);
    assert_eq!(reply_msgs(&a2), vec![r]);
    assert_eq!(h.c.resend_counts(), (1, 0), "a copy once sent");
}
