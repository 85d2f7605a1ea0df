//! REPLYs a job manager sends again after a reconnect (`reply-resend`,
//! `router/completion.rs` "REPLYs sent again", `router/peers.rs`
//! "Registration"): announced in the ACK to emq workers only, and taken
//! at most once.

use super::*;

const FAIL: &str = r#"{"error": {"kind": "exception", "message": "boom"}}"#;

/// The ACK sent to backend identity `id` in `sent`, as frames.
fn ack_frames(sent: &[Sent], id: &str) -> Vec<Vec<u8>> {
    let m = to(sent, Backend, id);
    assert!(matches!(m[0].command, Command::Ack { .. }), "{sent:?}");
    m[0].clone().encode()
}

#[test]
fn the_ack_lists_reply_resend_only_to_workers_that_listed_features() {
    let mut h = H::new();
    // An emq job manager: the ACK's second frame lists the feature.
    let f = ack_frames(&h.inform("emq", "", &["job-ack", "cancel"]), "emq");
    assert_eq!(f.len(), 6, "{f:?}");
    assert_eq!(f[4], b"inform-emq");
    let key = format!(
        "reply-resend,adopt-running,reply-credit,take-back={}",
        h.key("emq")
    );
    assert_eq!(f[5], key.as_bytes());
    // Any feature at all is enough (a later emq job manager).
    let f = ack_frames(&h.inform("other", "", &["x"]), "other");
    assert!(f[5].starts_with(b"reply-resend,adopt-running,reply-credit,take-back="));
    // A 0.3.13 job manager lists none: 0.3.13's one-frame ACK.
    let f = ack_frames(&h.inform("py", r#"[[10, "default"]]"#, &[]), "py");
    assert_eq!(
        f,
        vec![
            b"".to_vec(),
            b"eMQP/1.0".to_vec(),
            b"ACK".to_vec(),
            f[3].clone(),
            b"inform-py".to_vec()
        ]
    );
    // Schedulers and admin tools get the plain ACK too.
    let sent = h.msg(
        Frontend,
        "s1",
        "inf-s1",
        Command::Inform(Inform {
            queues: QueueSpec::default(),
            peer_type: Some(PeerType::Scheduler),
            features: vec!["x".into()],
        }),
    );
    let m = to(&sent, Frontend, "s1");
    assert_eq!(
        m[0].command,
        Command::Ack {
            acked_msgid: "inf-s1".into(),
            features: vec![],
        }
    );
}

/// The REPLY arrived; the job manager reconnects and sends it again (same
/// msgid), from its new identity and, while leaving, from the old one:
/// no second RESULT, nothing else changes. (A copy whose first was lost
/// is a REPLY from a new identity like any other:
/// `reply_from_new_identity_completes_job_in_flight_on_old_identity`.)
#[test]
fn a_resent_reply_of_a_finished_job_forwards_no_second_result() {
    let mut h = H::new();
    worker(&mut h, "old", "", 1);
    h.request("c", "j1", "default", "reply-requested");
    let sent = h.reply_as("old", "r1", "j1", r#"{"value": 1}"#, Some(ResultStatus::Ok));
    assert_eq!(results(&sent, "c").len(), 1);
    worker(&mut h, "new", "", 1);
    for from in ["new", "old"] {
        let sent = h.reply_as(from, "r1", "j1", r#"{"value": 1}"#, Some(ResultStatus::Ok));
        assert!(results(&sent, "c").is_empty(), "{from}: {sent:?}");
    }
    // The next job on the new identity runs as usual.
    h.request("c", "j2", "default", "reply-requested");
    assert_eq!(h.r.inflight_count(), 1);
    assert_eq!(h.r.stats().results_forwarded, 1);
    assert_eq!(h.r.stats().completed, 1);
}

/// A failed REPLY put its job back for a retry; copies of it (after one
/// reconnect or more) neither spend a retry nor end the next try —
/// wherever the job is: waiting for the retry, queued, or in flight again.
#[test]
fn a_resent_failed_reply_spends_no_retry_and_ends_no_later_try() {
    let mut h = H::new();
    // Its first delivery is lost (w0 leaves), so the job counts a lost
    // delivery: the case where any REPLY from elsewhere used to end it.
    lost_then_failed(&mut h, "reply-requested,retry-count:2", "w0", "old", "r1");

    // The job manager reconnects: the copy arrives while the job waits.
    worker(&mut h, "new", "", 0);
    let sent = h.reply_as("new", "r1", "j1", FAIL, Some(ResultStatus::Failed));
    assert!(sent.is_empty(), "{sent:?}");
    assert_eq!(h.r.delayed_count(), 1);
    assert_eq!(h.r.stats().retried, 1, "no retry spent");

    // The retry is due; no slot anywhere: it is queued.
    h.advance(SECOND);
    assert_eq!((h.r.delayed_count(), h.r.buffered_count()), (0, 1));
    worker(&mut h, "newer", "", 0);
    assert!(h
        .reply_as("newer", "r1", "j1", FAIL, Some(ResultStatus::Failed))
        .is_empty());
    assert_eq!(h.r.buffered_count(), 1, "still queued for its retry");

    // The retry runs on another job manager; one more copy arrives.
    let sent = h.ready("newer");
    assert_eq!(forwarded(&sent, "newer"), vec!["j1"]);
    worker(&mut h, "newest", "", 0);
    assert!(h
        .reply_as("newest", "r1", "j1", FAIL, Some(ResultStatus::Failed))
        .is_empty());
    assert_eq!(h.r.inflight_count(), 1, "the second try still runs");
    assert_eq!(h.r.stats().retried, 1);
    assert_eq!(h.r.stats().dead_lettered, 0);

    // Its own REPLY ends it.
    let sent = h.reply_as(
        "newer",
        "r2",
        "j1",
        r#"{"value": 2}"#,
        Some(ResultStatus::Ok),
    );
    let rs = results(&sent, "c");
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].status, ResultStatus::Ok);
    assert_eq!(rs[0].payload, br#"{"value": 2}"#);
    assert!(h.r.unfinished_jobs().is_empty());
}

/// Every failed REPLY counts once: two tries failed (two REPLYs); while
/// the third try runs, copies of both arrive in any order from the job
/// manager's new identity and add nothing; the third try's failure
/// dead-letters the job with `attempts` 3.
#[test]
fn copies_of_every_failed_try_count_once() {
    let mut h = H::new();
    worker(&mut h, "a", "", 1);
    h.request("c", "j1", "default", "reply-requested,retry-count:2");
    // Try n fails with REPLY `fn`; after its backoff the next try runs.
    for (reply, backoff) in [("f1", SECOND), ("f2", 2 * SECOND)] {
        h.reply_as("a", reply, "j1", FAIL, Some(ResultStatus::Failed));
        h.ready("a");
        h.advance(backoff);
        assert_eq!(h.r.inflight_count(), 1, "the try after {reply}");
    }
    worker(&mut h, "b", "", 0);
    for copy in ["f2", "f1", "f1"] {
        assert!(h
            .reply_as("b", copy, "j1", FAIL, Some(ResultStatus::Failed))
            .is_empty());
    }
    assert_eq!(h.r.inflight_count(), 1, "the third try still runs");
    assert_eq!(h.r.stats().retried, 2);
    let sent = h.reply_as("a", "f3", "j1", FAIL, Some(ResultStatus::Failed));
    let attempts: Vec<serde_json::Value> = results(&sent, "c")
        .iter()
        .map(|r| serde_json::from_slice::<serde_json::Value>(&r.payload).unwrap())
        .map(|v| v["error"]["attempts"].clone())
        .collect();
    assert_eq!(
        attempts,
        [serde_json::json!(3)],
        "one RESULT, after 3 tries"
    );
    assert_eq!(h.r.stats().dead_lettered, 1);
    assert!(h
        .reply_as("b", "f3", "j1", FAIL, Some(ResultStatus::Failed))
        .is_empty());
}
