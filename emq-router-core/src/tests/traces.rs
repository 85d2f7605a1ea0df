//! Traces (`router/traces.rs`): the queue-wait span of each dispatch and
//! the `traceparent` forwarded to the worker.

use super::*;
use crate::event::JobSpan;
use emqp_proto::TraceParent;

const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn traced() -> H {
    H::with(Config {
        traces: true,
        id_seed: 7,
        epoch_unix_micros: 1_700_000_000_000_000,
        ..Config::default()
    })
}

fn spans(actions: &[Action]) -> Vec<JobSpan> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::JobSpan(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

/// The HEADERS frame of the REQUEST sent to worker `id`.
fn forwarded_headers(actions: Vec<Action>, id: &str) -> String {
    let sent = decode(actions);
    let reqs: Vec<_> = to(&sent, Backend, id)
        .into_iter()
        .filter_map(|m| match &m.command {
            Command::Request(r) => Some(r.headers.encode()),
            _ => None,
        })
        .collect();
    assert_eq!(reqs.len(), 1, "one REQUEST to {id}: {reqs:?}");
    reqs[0].clone()
}

fn request_actions(h: &mut H, msgid: &str, headers: &str) -> Vec<Action> {
    let parts: &[&[u8]] = &[
        b"REQUEST",
        msgid.as_bytes(),
        b"default",
        headers.as_bytes(),
        br#"["call", {"handler": "echo"}]"#,
    ];
    h.input(Input::Frames {
        socket: Frontend,
        frames: crate::testing::frames(b"c", parts),
    })
}

fn ready_actions(h: &mut H, id: &str) -> Vec<Action> {
    let frames = Message::with_msgid("rdy", Command::Ready).encode_routed(id.as_bytes().to_vec());
    h.input(Input::Frames {
        socket: Backend,
        frames,
    })
}

#[test]
fn a_callers_traceparent_makes_the_queue_wait_its_child_and_the_worker_gets_the_routers_span() {
    let mut h = traced();
    h.inform("w1", "", &["job-ack"]);
    request_actions(
        &mut h,
        "j1",
        &format!("reply-requested,traceparent:{CALLER}"),
    );
    h.now += 250 * SECOND / 1000;
    let out = ready_actions(&mut h, "w1");
    let got = spans(&out);
    assert_eq!(got.len(), 1);
    let span = &got[0];
    let caller = TraceParent::parse(CALLER).unwrap();
    assert_eq!(span.parent, Some(caller));
    assert_eq!(span.context.trace_id, caller.trace_id);
    assert_ne!(span.context.span_id, caller.span_id);
    assert_eq!(
        (span.msgid.as_str(), span.queue.as_str(), span.attempt),
        ("j1", "default", 1)
    );
    // Accepted → dispatched: the 250 ms the job waited, in unix time.
    assert_eq!(span.dispatched_unix_us - span.accepted_unix_us, 250_000);
    assert_eq!(span.accepted_unix_us, 1_700_000_000_000_000 + 1_000_000_000);
    assert_eq!(
        forwarded_headers(out, "w1"),
        format!("reply-requested,traceparent:{}", span.context)
    );
}

#[test]
fn without_a_traceparent_the_router_starts_the_trace() {
    let mut h = traced();
    h.inform("w1", "", &["job-ack"]);
    h.ready("w1");
    let out = request_actions(&mut h, "j1", "retry-count:1");
    let got = spans(&out);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].parent, None);
    assert!(got[0].context.sampled());
    assert_ne!(got[0].context.trace_id, [0; 16]);
    assert_eq!(
        forwarded_headers(out, "w1"),
        format!("retry-count:1,traceparent:{}", got[0].context)
    );
    // Same seed, same msgid: the same ids (no randomness in the core).
    let mut again = traced();
    again.inform("w1", "", &["job-ack"]);
    again.ready("w1");
    let out = request_actions(&mut again, "j1", "retry-count:1");
    assert_eq!(spans(&out)[0].context, got[0].context);
}

#[test]
fn a_retry_keeps_the_trace_with_a_new_span_and_attempt_2() {
    let mut h = traced();
    h.inform("w1", "", &["job-ack"]);
    h.ready("w1");
    let first = spans(&request_actions(
        &mut h,
        "j1",
        &format!("retry-count:1,traceparent:{CALLER}"),
    ));
    let fail = r#"{"error": {"kind": "exception", "message": "boom"}}"#;
    h.reply("w1", "j1", fail, Some(ResultStatus::Failed));
    h.now += 5 * SECOND;
    h.timeout();
    let second = spans(&ready_actions(&mut h, "w1"));
    assert_eq!((first.len(), second.len()), (1, 1));
    assert_eq!(second[0].attempt, 2);
    assert_eq!(second[0].context.trace_id, first[0].context.trace_id);
    assert_ne!(second[0].context.span_id, first[0].context.span_id);
    // Still the caller's child, not the first attempt's.
    assert_eq!(second[0].parent, first[0].parent);
}

#[test]
fn traces_off_emit_nothing_and_forward_headers_unchanged() {
    let mut h = H::new();
    h.inform("w1", "", &["job-ack"]);
    h.ready("w1");
    let headers = format!("reply-requested,traceparent:{CALLER}");
    let out = request_actions(&mut h, "j1", &headers);
    assert!(spans(&out).is_empty());
    assert_eq!(forwarded_headers(out, "w1"), headers);
}
