//! `emq-sender --publish TOPIC` against a fake pub/sub process (a ROUTER
//! played by the test): PUBLISH [topic, message] is sent as given, one
//! per stdin line in bulk, nothing is waited for.

mod common;

use std::time::{Duration, Instant};

use common::{run_sender, run_sender_env, FakeRouter};
use emqp_proto::{Command, Message};
use serde_json::Value;

/// What the fake pub/sub received during the run, and what was still in
/// flight when the sender exited (bounded wait for `want` messages).
/// (msgid, topic, message) of each.
fn publishes(
    r: &FakeRouter,
    during: &[(Vec<u8>, Message)],
    want: usize,
) -> Vec<(String, String, Vec<u8>)> {
    let mut all: Vec<Message> = during.iter().map(|(_, m)| m.clone()).collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    while all.len() < want && Instant::now() < deadline {
        if r.sock.poll(zmq::POLLIN, 100).unwrap() > 0 {
            let frames = r.sock.recv_multipart(0).unwrap();
            all.push(Message::decode_routed(frames).unwrap().1);
        }
    }
    all.into_iter()
        .map(|m| match m.command {
            Command::Publish { topic, message } => (m.msgid, topic, message),
            other => panic!("not PUBLISH: {other:?}"),
        })
        .collect()
}

#[test]
fn publish_sends_one_publish_and_exits_0_with_its_msgid() {
    let ps = FakeRouter::new();
    let run = run_sender(
        Some(&ps),
        &["--publish", "news.sports", r#"{"score": [2, 1]}"#],
        None,
        |_, _, _| {},
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    let msgid = run.stdout.trim().to_string();
    assert_eq!(msgid.len(), 36, "{msgid}");
    let got = publishes(&ps, &run.requests, 1);
    let want = (
        msgid,
        "news.sports".to_string(),
        br#"{"score": [2, 1]}"#.to_vec(),
    );
    assert_eq!(got, vec![want], "the printed msgid is the PUBLISH's");
}

#[test]
fn publish_from_stdin_sends_each_line_and_reports_invalid_ones() {
    let ps = FakeRouter::new();
    let run = run_sender(
        Some(&ps),
        &["--publish", "audit"],
        Some("{\"n\": 1}\nnot json\n\n[2]\n".into()),
        |_, _, _| {},
    );
    assert_eq!(
        run.code,
        Some(2),
        "an invalid line: exit 2; stderr: {}",
        run.stderr
    );
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let statuses: Vec<&str> = lines
        .iter()
        .map(|l| l["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["sent", "invalid", "sent"]);
    assert!(
        run.stderr
            .contains("2 message(s) published to topic \"audit\", 1 invalid"),
        "{}",
        run.stderr
    );
    let got: Vec<(String, Vec<u8>)> = publishes(&ps, &run.requests, 2)
        .into_iter()
        .map(|(msgid, topic, message)| {
            assert!(run.stdout.contains(&msgid), "{msgid} printed");
            (topic, message)
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("audit".to_string(), br#"{"n": 1}"#.to_vec()),
            ("audit".to_string(), b"[2]".to_vec())
        ]
    );
}

#[test]
fn publish_goes_to_eventmq_publisher_incoming_addr_by_default() {
    let ps = FakeRouter::new();
    let run = run_sender_env(
        Some(&ps),
        false,
        &[
            ("EVENTMQ_PUBLISHER_INCOMING_ADDR", &ps.endpoint),
            // the router's address is not the pub/sub process's
            ("EMQ_BROKER_ADDR", "tcp://127.0.0.1:1"),
        ],
        &["--publish", "t", "[1]"],
        None,
        |_, _, _| {},
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(publishes(&ps, &run.requests, 1).len(), 1);
}

#[test]
fn publish_without_a_pubsub_process_exits_5() {
    // port 1: nothing listens there, and no test binds it
    let run = run_sender(
        None,
        &[
            "--broker",
            "tcp://127.0.0.1:1",
            "--publish",
            "t",
            "--timeout",
            "1",
            "[1]",
        ],
        None,
        |_, _, _| {},
    );
    assert_eq!(run.code, Some(5), "stderr: {}", run.stderr);
    assert!(run.stderr.contains("pub/sub process"), "{}", run.stderr);
    assert!(run.elapsed < Duration::from_secs(5));
}
