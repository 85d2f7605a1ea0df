//! The message size limit (`Config::max_message_size`, checked per frame
//! before decoding; `router/intake.rs`).

use super::*;

const LIMIT: usize = 1000;

fn limited() -> H {
    H::with(Config {
        max_message_size: Some(LIMIT),
        ..Config::default()
    })
}

/// `[client, '', eMQP/1.0, cmd, msgid, body...]`.
fn frames(client: &str, cmd: &str, msgid: &[u8], body: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut f = vec![
        client.as_bytes().to_vec(),
        vec![],
        b"eMQP/1.0".to_vec(),
        cmd.as_bytes().to_vec(),
        msgid.to_vec(),
    ];
    f.extend(body.iter().map(|b| b.to_vec()));
    f
}

/// A REQUEST whose MSG frame is `len` bytes.
fn request_of(client: &str, msgid: &str, len: usize) -> Vec<Vec<u8>> {
    let msg = vec![b'x'; len];
    frames(
        client,
        "REQUEST",
        msgid.as_bytes(),
        &[b"default", b"", &msg],
    )
}

#[test]
fn a_request_over_the_limit_is_refused_malformed_with_the_sizes_and_not_queued() {
    let mut h = limited();
    worker(&mut h, "w1", "", 1);
    let sent = h.frames(Frontend, request_of("c1", "big", LIMIT + 1));
    let rj = rejects(&sent, "c1");
    assert_eq!(rj.len(), 1, "{sent:?}");
    assert_eq!(rj[0].orig_msgid, "big");
    assert_eq!(rj[0].reason, RejectReason::Malformed);
    assert_eq!(
        rj[0].text,
        "message of 1001 bytes is over the router's limit of 1000 bytes"
    );
    assert!(
        forwarded(&sent, "w1").is_empty(),
        "not dispatched: {sent:?}"
    );
    let s = h.r.stats();
    assert_eq!((s.accepted, s.rejected_too_large), (0, 1));
    assert_eq!(s.malformed_dropped, 1);
    assert_eq!(s.rejected_malformed, 0, "counted once, as too large");
    let status = admin(&mut h, Command::Status);
    assert_eq!(status["counters"]["rejected_too_large"], 1, "{status}");

    // Exactly at the limit: accepted and dispatched.
    let sent = h.frames(Frontend, request_of("c1", "fits", LIMIT));
    assert!(
        sent.iter().any(|(_, _, m)| is_ack_of(m, "fits")),
        "{sent:?}"
    );
    assert_eq!(forwarded(&sent, "w1"), vec!["fits"]);
}

#[test]
fn a_schedule_over_the_limit_is_refused_and_a_big_frame_anywhere_counts() {
    let mut h = limited();
    let job = vec![b'j'; LIMIT + 10];
    let sent = h.frames(
        Frontend,
        frames(
            "c1",
            "SCHEDULE",
            b"s1",
            &[b"default", b"", b"60", &job, b""],
        ),
    );
    let rj = rejects(&sent, "c1");
    assert_eq!(rj.len(), 1, "{sent:?}");
    assert_eq!(rj[0].orig_msgid, "s1");
    assert!(rj[0].text.contains("1010 bytes"), "{:?}", rj[0].text);
    assert!(h.r.schedules().is_empty(), "not booked");
    // An oversized HEADERS frame (not the MSG) of a REQUEST: the same.
    let headers = vec![b'h'; LIMIT + 1];
    let sent = h.frames(
        Frontend,
        frames("c1", "REQUEST", b"r1", &[b"default", &headers, b"{}"]),
    );
    assert_eq!(rejects(&sent, "c1")[0].orig_msgid, "r1");
    assert_eq!(h.r.stats().rejected_too_large, 2);
}

#[test]
fn oversized_messages_are_dropped_and_answered_where_someone_waits() {
    let mut h = limited();
    worker(&mut h, "w1", "", 1);
    let big = vec![b'x'; LIMIT + 1];
    // A REQUEST whose msgid is not UTF-8: nothing to answer with.
    let sent = h.frames(
        Frontend,
        frames("c1", "REQUEST", &[0xff, 0xfe], &[b"default", b"", &big]),
    );
    assert!(sent.is_empty(), "{sent:?}");
    // A worker's REPLY over the limit is dropped, and ends its job as
    // failed (`result-too-large`); the worker stays (its message counted
    // as a heartbeat).
    h.request("c2", "j1", "default", "");
    h.frames(
        Backend,
        frames("w1", "REPLY", b"rep", &[&big, b"j1", b"ok"]),
    );
    // An admin command over the limit is answered `bad-request`.
    let sent = h.frames(Admin, frames("adm", "STATUS", b"admin:1", &[&big]));
    let m = to(&sent, Admin, "adm");
    assert_eq!(m.len(), 1, "{sent:?}");
    let Command::Reply(r) = &m[0].command else {
        panic!("{sent:?}")
    };
    let v: serde_json::Value = serde_json::from_slice(&r.payload).unwrap();
    assert_eq!(v["error"]["kind"], "bad-request", "{v}");
    let s = h.r.stats();
    assert_eq!(s.malformed_dropped, 3);
    assert_eq!(s.rejected_too_large, 0);
    assert_eq!((s.completed, s.failed), (1, 1), "the job ended failed");
    assert_eq!(h.r.worker_count(), 1);
    assert_eq!(h.r.inflight_count(), 0);
}

#[test]
fn no_limit_takes_any_size_and_a_flood_of_oversized_requests_is_refused_one_by_one() {
    let mut h = H::with(Config {
        max_message_size: None,
        ..Config::default()
    });
    let sent = h.frames(Frontend, request_of("c1", "huge", 20 * LIMIT));
    assert!(
        sent.iter().any(|(_, _, m)| is_ack_of(m, "huge")),
        "{sent:?}"
    );

    // A flood of oversized REQUESTs: every one refused (the client hears
    // it); only the warnings are rate-limited.
    let mut h = limited();
    for i in 0..100 {
        let id = format!("b{i}");
        let sent = h.frames(Frontend, request_of("c1", &id, LIMIT + 1));
        assert_eq!(rejects(&sent, "c1").len(), 1, "{id}");
    }
    assert_eq!(h.r.stats().rejected_too_large, 100);
}

#[test]
fn a_worker_reply_over_the_limit_fails_its_job_result_too_large_instead_of_leaving_it_in_flight() {
    let mut h = limited();
    worker(&mut h, "w1", "", 1);
    h.request("c1", "j1", "default", "reply-requested");
    assert_eq!(h.r.inflight_count(), 1);
    let big = vec![b'y'; LIMIT + 1];
    let sent = h.frames(Backend, frames("w1", "REPLY", b"r1", &[&big, b"j1", b"ok"]));
    assert_eq!(h.r.inflight_count(), 0, "the job is not left in flight");
    let rs = results(&sent, "c1");
    assert_eq!(rs.len(), 1, "{sent:?}");
    assert_eq!(rs[0].status, ResultStatus::Failed);
    let v: serde_json::Value = serde_json::from_slice(&rs[0].payload).unwrap();
    assert_eq!(v["error"]["kind"], "result-too-large", "{v}");
}
