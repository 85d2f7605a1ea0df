//! READY and dispatch (`router/dispatch.rs`): slots, queue weights, least
//! recently used workers, buffering.

use super::*;

// ----- READY and dispatch ---------------------------------------------------

#[test]
fn ready_adds_one_slot_each() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 2);
    let v = admin(&mut h, Command::RouterShowWorkers);
    assert_eq!(v["connected_workers"]["w1"]["available_slots"], 2);
    assert_eq!(
        forwarded(&h.request("c", "a", "default", ""), "w1"),
        vec!["a"]
    );
    assert_eq!(
        forwarded(&h.request("c", "b", "default", ""), "w1"),
        vec!["b"]
    );
    assert!(forwarded(&h.request("c", "c", "default", ""), "w1").is_empty());
}

#[test]
fn ready_hands_out_oldest_buffered_job_of_highest_weight_queue_first() {
    let mut h = H::new();
    h.inform("w1", r#"[[10, "low"], [20, "high"]]"#, &["job-ack"]);
    h.request("c", "l1", "low", "");
    h.request("c", "l2", "low", "");
    h.request("c", "h1", "high", "");
    h.request("c", "h2", "high", "");
    let mut order = vec![];
    for _ in 0..4 {
        order.extend(forwarded(&h.ready("w1"), "w1"));
    }
    assert_eq!(order, vec!["h1", "h2", "l1", "l2"]);
    assert_eq!(h.r.buffered_count(), 0);
    // No slot was added while handing out jobs.
    let v = admin(&mut h, Command::RouterShowWorkers);
    assert_eq!(v["connected_workers"]["w1"]["available_slots"], 0);
}

#[test]
fn request_is_forwarded_unchanged_and_acked() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    let headers = "reply-requested, guarantee,retry-count:3,timeout:10,x-custom";
    let frames: Vec<Vec<u8>> = [
        "c1",
        "",
        "eMQP/1.0",
        "REQUEST",
        "job-1",
        "default",
        headers,
        "[\"run\", {\"path\": \"m\", \"callable\": \"f\"}]",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let out = h.input(Input::Frames {
        socket: Frontend,
        frames: frames.clone(),
    });
    match &out[0] {
        Action::Send {
            socket,
            identity,
            frames: f,
        } => {
            assert_eq!(*socket, Backend);
            assert_eq!(identity, b"w1");
            assert_eq!(
                f,
                &frames[1..].to_vec(),
                "frames must be forwarded unchanged"
            );
        }
        other => panic!("{other:?}"),
    }
    let sent = decode(out);
    let acks = to(&sent, Frontend, "c1");
    assert_eq!(acks.len(), 1);
    assert!(is_ack_of(acks[0], "job-1"));
}

#[test]
fn unknown_queue_routes_via_default_keeping_the_queue_frame() {
    let mut h = H::new();
    worker(&mut h, "w1", r#"[[10, "default"]]"#, 1);
    let sent = h.request("c1", "j", "no-such-queue", "");
    let m = to(&sent, Backend, "w1");
    let Command::Request(r) = &m[0].command else {
        panic!()
    };
    assert_eq!(r.queue, "no-such-queue");
    // Buffered ones too: buffered under default, handed to a default worker.
    h.request("c1", "j2", "other-unknown", "");
    let sent = h.ready("w1");
    assert_eq!(forwarded(&sent, "w1"), vec!["j2"]);
}

#[test]
fn least_recently_used_worker_among_equal_weights() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 5);
    worker(&mut h, "w2", "", 5);
    worker(&mut h, "w3", "", 5);
    let mut who = vec![];
    for i in 0..6 {
        let sent = h.request("c", &format!("j{i}"), "default", "");
        let (_, id, _) = sent.iter().find(|(s, _, _)| *s == Backend).unwrap();
        who.push(id.clone());
    }
    assert_eq!(who, vec!["w1", "w2", "w3", "w1", "w2", "w3"]);
}

#[test]
fn higher_weight_worker_first() {
    let mut h = H::new();
    worker(&mut h, "low", r#"[[10, "q"]]"#, 5);
    worker(&mut h, "high", r#"[[30, "q"]]"#, 2);
    let mut who = vec![];
    for i in 0..4 {
        let sent = h.request("c", &format!("j{i}"), "q", "");
        who.push(
            sent.iter()
                .find(|(s, _, _)| *s == Backend)
                .unwrap()
                .1
                .clone(),
        );
    }
    assert_eq!(who, vec!["high", "high", "low", "low"]);
}

#[test]
fn buffered_request_is_acked_at_once_and_dispatched_on_ready() {
    let mut h = H::new();
    h.inform("w1", "", &["job-ack"]);
    let sent = h.request("c1", "j1", "default", "");
    let m = to(&sent, Frontend, "c1");
    assert_eq!(m.len(), 1);
    assert!(is_ack_of(m[0], "j1"));
    assert!(forwarded(&sent, "w1").is_empty());
    let sent = h.ready("w1");
    assert_eq!(forwarded(&sent, "w1"), vec!["j1"]);
    // No second ack at dispatch.
    assert!(to(&sent, Frontend, "c1").is_empty());
}

#[test]
fn request_with_no_worker_at_all_is_buffered_and_acked() {
    let mut h = H::new();
    let sent = h.request("c1", "j1", "email", "");
    assert!(is_ack_of(to(&sent, Frontend, "c1")[0], "j1"));
    let v = admin(&mut h, Command::Status);
    assert_eq!(v["waiting_messages_by_queue"]["default"], 1);
}

#[test]
fn full_buffer_rejects_queue_full_never_silently() {
    let mut h = H::with(Config {
        hwm: 2,
        ..Config::default()
    });
    h.request("c", "a", "default", "");
    h.request("c", "b", "default", "");
    let sent = h.request("c", "x", "default", "");
    let rj = rejects(&sent, "c");
    assert_eq!(rj.len(), 1, "{sent:?}");
    assert_eq!(rj[0].orig_msgid, "x");
    assert_eq!(rj[0].reason, RejectReason::QueueFull);
    assert!(to(&sent, Frontend, "c").iter().all(|m| !is_ack_of(m, "x")));
    assert_eq!(h.r.stats().rejected_queue_full, 1);
    // Another queue has its own buffer.
    h.inform("e", r#"[[10, "email"]]"#, &[]);
    let sent = h.request("c", "y", "email", "");
    assert!(rejects(&sent, "c").is_empty());
}

#[test]
fn a_delivery_after_the_first_tells_the_worker_its_attempt() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    let headers_of = |sent: &[Sent]| -> String {
        let m = to(sent, Backend, "w1");
        m.iter()
            .find_map(|m| match &m.command {
                Command::Request(r) => Some(r.headers.encode()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no REQUEST in {m:?}"))
    };
    // The first delivery is forwarded as sent; a client's own `attempt`
    // item is not taken for the count.
    let sent = h.request("c", "r", "default", "retry-count:1,attempt:9");
    assert_eq!(headers_of(&sent), "retry-count:1,attempt:1");
    h.reply("w1", "r", "{}", Some(ResultStatus::Failed));
    h.ready("w1");
    let sent = h.advance(SECOND);
    assert_eq!(headers_of(&sent), "retry-count:1,attempt:2");
    // Without the item, a first delivery keeps its headers byte for byte.
    h.reply("w1", "r", "{}", Some(ResultStatus::Ok));
    h.ready("w1");
    let sent = h.request("c", "s", "default", "guarantee");
    assert_eq!(headers_of(&sent), "guarantee");
}
