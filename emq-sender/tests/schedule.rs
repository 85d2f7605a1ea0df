//! The real emq-sender binary's schedule forms against a fake ROUTER that
//! checks the SCHEDULE / UNSCHEDULE frames and answers REPLY, REJECT or
//! nothing. Every run is bounded; the child is killed on drop.

mod common;

use std::time::{Duration, Instant};

use common::{run_sender, FakeRouter};
use emqp_proto::{Command, Message, Reject, RejectReason, Reply};

fn text(frames: &[Vec<u8>]) -> Vec<String> {
    frames
        .iter()
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect()
}

/// The body frames (after identity, delimiter, protocol, command, msgid)
/// of the captured 0.3.13 message whose note contains `note`.
fn captured_body(command: &str, note: &str) -> Vec<String> {
    let path = format!(
        "{}/../emqp-proto/tests/vectors/client_to_router.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let m = doc["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["frames"][3] == command && m["note"].as_str().unwrap().contains(note))
        .unwrap_or_else(|| panic!("no captured {command} with {note}"));
    m["frames"].as_array().unwrap()[5..]
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect()
}

/// Frames as a DEALER sends them, identity first: check the envelope and
/// return (command, msgid, body frames).
fn split(raw: &[Vec<u8>]) -> (String, String, Vec<String>) {
    let t = text(raw);
    assert_eq!(t[0].len(), 36, "identity is a uuid4: {t:?}");
    assert_eq!(t[1], "", "{t:?}");
    assert_eq!(t[2], "eMQP/1.0", "{t:?}");
    (t[3].clone(), t[4].clone(), t[5..].to_vec())
}

fn reply(r: &FakeRouter, id: &[u8], msgid: &str) {
    r.send(id, Command::Reply(Reply::ack_of(msgid)));
}

#[test]
fn schedule_interval_sends_0_3_13_frames_and_prints_the_msgid_on_reply() {
    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &["--schedule-interval", "60", "--python", "pyemq_jobs.noop"],
        None,
        |r, id, msg| {
            assert!(matches!(msg.command, Command::Schedule(_)), "{msg:?}");
            reply(r, id, &msg.msgid)
        },
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(run.raw.len(), 1);
    let (cmd, msgid, body) = split(&run.raw[0]);
    assert_eq!(cmd, "SCHEDULE");
    assert_eq!(
        body,
        captured_body("SCHEDULE", "interval_secs=60"),
        "the frames 0.3.13's schedule(s, 'pyemq_jobs.noop', interval_secs=60) sends"
    );
    assert_eq!(run.stdout, format!("{msgid}\n"));
}

#[test]
fn schedule_cron_with_nohaste_sends_0_3_13_frames() {
    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &[
            "--schedule-cron",
            "*/5 * * * *",
            "--nohaste",
            "--python",
            "pyemq_jobs.noop",
        ],
        None,
        |r, id, msg| reply(r, id, &msg.msgid),
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    let (cmd, msgid, body) = split(&run.raw[0]);
    assert_eq!(cmd, "SCHEDULE");
    assert_eq!(body, captured_body("SCHEDULE", "cron="));
    assert_eq!(run.stdout.trim(), msgid);
}

#[test]
fn unschedule_sends_the_same_frames_and_exits_0_on_reply() {
    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &[
            "--unschedule",
            "--schedule-interval",
            "60",
            "--python",
            "pyemq_jobs.noop",
        ],
        None,
        |r, id, msg| {
            assert!(matches!(msg.command, Command::Unschedule(_)), "{msg:?}");
            reply(r, id, &msg.msgid)
        },
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    let (cmd, msgid, body) = split(&run.raw[0]);
    assert_eq!(cmd, "UNSCHEDULE");
    assert_eq!(body, captured_body("UNSCHEDULE", "unschedule=True"));
    assert_eq!(run.stdout.trim(), msgid);

    // without interval or cron: the same queue and job, interval -1, cron ""
    let run = run_sender(
        Some(&router),
        &["--unschedule", "--python", "pyemq_jobs.noop"],
        None,
        |r, id, msg| reply(r, id, &msg.msgid),
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    let (cmd, _, body) = split(&run.raw[0]);
    assert_eq!(cmd, "UNSCHEDULE");
    let captured = captured_body("UNSCHEDULE", "unschedule=True");
    assert_eq!(
        body,
        vec![
            captured[0].clone(),
            captured[1].clone(),
            "-1".to_string(),
            captured[3].clone(),
            String::new()
        ]
    );
}

#[test]
fn reject_exits_3_with_the_reason_on_stderr() {
    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &[
            "--schedule-cron",
            "61 * * * *",
            "--run-count",
            "3",
            "-q",
            "reports",
            "--call",
            "echo",
            "--args",
            r#"{"n": 1}"#,
        ],
        None,
        |r, id, msg| {
            // an answer about another message first: ignored
            reply(r, id, "00000000-0000-4000-8000-000000000000");
            r.send(
                id,
                Command::Reject(Reject {
                    orig_msgid: msg.msgid.clone(),
                    reason: RejectReason::Malformed,
                    text: "bad cron expression \"61 * * * *\": minute 61 out of range".into(),
                }),
            )
        },
    );
    assert_eq!(run.code, Some(3), "stderr: {}", run.stderr);
    assert_eq!(run.stdout, "");
    assert!(run.stderr.contains("malformed"), "{}", run.stderr);
    assert!(
        run.stderr.contains("minute 61 out of range"),
        "{}",
        run.stderr
    );
    let (cmd, _, body) = split(&run.raw[0]);
    assert_eq!(cmd, "SCHEDULE");
    assert_eq!(
        body,
        vec![
            "reports",
            "run_count:3",
            "-1",
            r#"["call", {"handler": "echo", "args": {"n": 1}}]"#,
            "61 * * * *"
        ]
    );
}

#[test]
fn no_answer_exits_5_after_the_timeout() {
    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &[
            "--timeout",
            "1",
            "--schedule-interval",
            "5",
            "--shell",
            "--",
            "true",
        ],
        None,
        |_, _, _| {},
    );
    assert_eq!(run.code, Some(5), "stderr: {}", run.stderr);
    assert!(
        run.elapsed >= Duration::from_millis(900),
        "{:?}",
        run.elapsed
    );
    assert!(run.elapsed < Duration::from_secs(5), "{:?}", run.elapsed);
    assert!(run.stderr.contains("--no-ack"), "{}", run.stderr);
    assert!(run.stderr.contains("SCHEDULE"), "{}", run.stderr);
    let (cmd, _, body) = split(&run.raw[0]);
    assert_eq!(cmd, "SCHEDULE");
    assert_eq!(
        body,
        vec![
            "default",
            "guarantee",
            "5",
            r#"["shell", {"argv": ["true"]}]"#,
            ""
        ]
    );
}

#[test]
fn no_ack_schedule_exits_0_without_an_answer() {
    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &["--no-ack", "--schedule-interval", "60", r#"["run", {}]"#],
        None,
        |_, _, _| {},
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    let msgid = run.stdout.trim().to_string();
    assert_eq!(msgid.len(), 36);
    // the message may still be in flight when the sender exits: drain it
    let mut raw = run.raw.clone();
    let deadline = Instant::now() + Duration::from_secs(5);
    while raw.is_empty() && Instant::now() < deadline {
        if router.sock.poll(zmq::POLLIN, 100).unwrap() > 0 {
            raw.push(router.sock.recv_multipart(0).unwrap());
        }
    }
    assert_eq!(raw.len(), 1);
    let (cmd, got_msgid, body) = split(&raw[0]);
    assert_eq!(
        (cmd.as_str(), got_msgid.as_str()),
        ("SCHEDULE", msgid.as_str())
    );
    assert_eq!(body[3], r#"["run", {}]"#);
    let (_, msg) = Message::decode_routed(raw[0].clone()).unwrap();
    assert!(matches!(msg.command, Command::Schedule(_)));
}

#[test]
fn wait_and_bulk_are_usage_errors_with_schedules() {
    for args in [
        &["--wait", "--schedule-interval", "60", "[1]"][..],
        &["--wait", "--unschedule", "[1]"],
        &["--schedule-cron", "* * * * *"],
        &["--schedule-interval", "0", "[1]"],
        &["--nohaste", "[1]"],
    ] {
        let run = run_sender(None, args, None, |_, _, _| {});
        assert_eq!(run.code, Some(2), "{args:?}: {}", run.stderr);
    }
}

/// Issue 26 item 9: `--unschedule` of a schedule the router does not hold
/// (a typo) is answered `REJECT not-found` by an emq router: exit 3, and
/// stderr says there is no such schedule and how schedules are matched.
#[test]
fn unschedule_of_an_unknown_schedule_exits_3_saying_so() {
    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &[
            "--unschedule",
            "-q",
            "reprots",
            "--python",
            "pyemq_jobs.noop",
        ],
        None,
        |r, id, msg| {
            assert!(matches!(msg.command, Command::Unschedule(_)), "{msg:?}");
            r.send(
                id,
                Command::Reject(Reject {
                    orig_msgid: msg.msgid.clone(),
                    reason: RejectReason::NotFound,
                    text: "no schedule of this message on queue reprots".into(),
                }),
            )
        },
    );
    run.says_at_once(
        3,
        &["no such schedule", "queue reprots", "same --queue and job"],
    );
    assert_eq!(run.stdout, "");
}
