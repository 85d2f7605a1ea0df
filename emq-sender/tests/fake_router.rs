//! The real emq-sender binary against a fake ROUTER played by the test on a
//! free loopback port. Every run is bounded; the child is killed on drop.

mod common;

use std::time::{Duration, Instant};

use common::{run_sender, run_sender_env, FakeRouter, Run};
use emqp_proto::{
    Command, JobResult, Message, Notice, NoticeKind, Reject, RejectReason, Reply, ResultStatus,
};
use serde_json::Value;

fn request_parts(msg: &Message) -> (String, String, String) {
    match &msg.command {
        Command::Request(r) => (
            r.queue.clone(),
            r.headers.encode(),
            String::from_utf8(r.message.clone()).unwrap(),
        ),
        other => panic!("expected REQUEST, got {other:?}"),
    }
}

fn ack(r: &FakeRouter, id: &[u8], msg: &Message) {
    r.send(id, Command::Reply(Reply::ack_of(&msg.msgid)));
}

fn result(r: &FakeRouter, id: &[u8], msg: &Message, status: ResultStatus, payload: &str) {
    r.send(
        id,
        Command::Result(JobResult {
            orig_msgid: msg.msgid.clone(),
            status,
            payload: payload.as_bytes().to_vec(),
        }),
    );
}

#[test]
fn ack_prints_the_msgid_and_exits_0() {
    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &["--call", "echo", "--args", "[1]"],
        None,
        ack,
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(run.requests.len(), 1);
    let (id, msg) = &run.requests[0];
    assert_eq!(id.len(), 36, "identity is a uuid4");
    assert_eq!(run.stdout.trim(), msg.msgid);
    assert_eq!(
        request_parts(msg),
        (
            "default".into(),
            "notices".into(),
            r#"["call",{"handler":"echo","args":[1]}]"#.into()
        )
    );
}

#[test]
fn queue_headers_and_raw_message_are_sent_as_given() {
    let router = FakeRouter::new();
    let job = r#"["run", {"path": "m", "callable": "f"}]"#;
    let run = run_sender(
        Some(&router),
        &[
            "-q",
            "email",
            "-H",
            "guarantee",
            "-H",
            "retry-count:3",
            "--reply",
            job,
        ],
        None,
        ack,
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(
        request_parts(&run.requests[0].1),
        (
            "email".into(),
            "reply-requested,guarantee,retry-count:3,result-receipt,notices".into(),
            job.into()
        )
    );
}

#[test]
fn reject_exits_3_with_the_reason_on_stderr() {
    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &["--fail-fast", "[1]"],
        None,
        |r, id, msg| {
            r.send(
                id,
                Command::Reject(Reject {
                    orig_msgid: msg.msgid.clone(),
                    reason: RejectReason::QueueFull,
                    text: "queue default is full".into(),
                }),
            )
        },
    );
    assert_eq!(run.code, Some(3), "stderr: {}", run.stderr);
    assert!(run.stderr.contains("queue-full"), "{}", run.stderr);
    assert!(
        run.stderr.contains("queue default is full"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stdout, "");
}

#[test]
fn wait_prints_an_ok_result_and_exits_0() {
    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &[
            "--wait",
            "--python",
            "emq_example_jobs.add",
            "--args",
            "[1, 2]",
        ],
        None,
        |r, id, msg| {
            ack(r, id, msg);
            // something unrelated first: must be ignored
            r.send(id, Command::Heartbeat { timestamp: None });
            result(r, id, msg, ResultStatus::Ok, r#"{"value": 3}"#);
        },
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(run.stdout, "{\"value\":3}\n");
    let (_, headers, message) = request_parts(&run.requests[0].1);
    assert_eq!(headers, "reply-requested,result-receipt,notices");
    // The RESULT is confirmed before the sender exits.
    assert_eq!(run.received, [run.requests[0].1.msgid.clone()]);
    assert_eq!(
        message,
        r#"["run",{"callable":"add","path":"emq_example_jobs","args":[1,2],"kwargs":{},"class_args":[],"class_kwargs":{}}]"#
    );
}

#[test]
fn wait_with_a_failed_result_exits_4() {
    let router = FakeRouter::new();
    let payload = r#"{"error": {"kind": "exit", "message": "exit status 1", "exit_status": 1}}"#;
    let run = run_sender(
        Some(&router),
        &["--wait", "--shell", "--", "false"],
        None,
        |r, id, msg| {
            ack(r, id, msg);
            result(r, id, msg, ResultStatus::Failed, payload);
        },
    );
    assert_eq!(run.code, Some(4), "stderr: {}", run.stderr);
    let v: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(v["error"]["kind"], "exit");
    assert_eq!(run.stdout.lines().count(), 1);
    let (_, _, message) = request_parts(&run.requests[0].1);
    assert_eq!(message, r#"["shell",{"argv":["false"]}]"#);
}

#[test]
fn no_answer_exits_5_within_the_timeout() {
    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &["--timeout", "1", "[1]"],
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
    assert_eq!(run.requests.len(), 1);
}

#[test]
fn wait_with_an_ack_but_no_result_exits_5() {
    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &["--wait", "--timeout", "1", "[1]"],
        None,
        ack,
    );
    assert_eq!(run.code, Some(5), "stderr: {}", run.stderr);
    assert!(run.stderr.contains("accepted"), "{}", run.stderr);
    assert!(run.elapsed < Duration::from_secs(5));
}

#[test]
fn no_ack_sends_and_exits_0_without_any_answer() {
    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &["--no-ack", "--timeout", "5", "[1]"],
        None,
        |_, _, _| {},
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(run.stdout.trim().len(), 36);
    // the request may still be in flight when the sender exits: drain it
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = run.requests.len();
    while got == 0 && Instant::now() < deadline {
        if router.sock.poll(zmq::POLLIN, 100).unwrap() > 0 {
            router.sock.recv_multipart(0).unwrap();
            got += 1;
        }
    }
    assert_eq!(got, 1);
}

#[test]
fn no_ack_without_a_router_exits_5() {
    // Port 1: below the ephemeral range, so no test's `tcp://127.0.0.1:*`
    // bind can be handed it. (A port freed a moment ago could be, and
    // then the sender found a router there: a race seen in CI.)
    let endpoint = "tcp://127.0.0.1:1".to_string();
    let run = run_sender(
        None,
        &["--broker", &endpoint, "--no-ack", "--timeout", "1", "[1]"],
        None,
        |_, _, _| {},
    );
    assert_eq!(run.code, Some(5), "stderr: {}", run.stderr);
    assert!(run.elapsed < Duration::from_secs(5));
}

#[test]
fn invalid_message_json_is_a_usage_error() {
    let run = run_sender(None, &["{not json"], None, |_, _, _| {});
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("not valid JSON"), "{}", run.stderr);
    let run = run_sender(None, &["--call", "a", "--shell"], None, |_, _, _| {});
    assert_eq!(run.code, Some(2));
}

#[test]
fn help_shows_examples_and_exit_codes() {
    let run = run_sender(None, &["--help"], None, |_, _, _| {});
    assert_eq!(run.code, Some(0));
    for needle in [
        "Examples:",
        "Exit codes:",
        "--python",
        "--shell -- ",
        "--no-ack",
    ] {
        assert!(run.stdout.contains(needle), "help lacks {needle}");
    }
}

fn output_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn bulk_stdin_with_100_lines_gets_100_acks() {
    let router = FakeRouter::new();
    let input: String = (1..=100)
        .map(|i| format!("[\"call\", {{\"handler\": \"echo\", \"args\": {i}}}]\n"))
        .collect();
    let run = run_sender(Some(&router), &["--window", "7"], Some(input), ack);
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(run.requests.len(), 100);
    let lines = output_lines(&run.stdout);
    assert_eq!(lines.len(), 100);
    let mut seen: Vec<u64> = lines.iter().map(|v| v["line"].as_u64().unwrap()).collect();
    seen.sort();
    assert_eq!(seen, (1..=100).collect::<Vec<_>>());
    for v in &lines {
        assert_eq!(v["status"], "accepted");
        assert_eq!(v["result"], Value::Null);
        assert_eq!(v["msgid"].as_str().unwrap().len(), 36);
    }
    // each line's job went out with the right msgid
    for (_, msg) in &run.requests {
        let (_, _, message) = request_parts(msg);
        let v: Value = serde_json::from_str(&message).unwrap();
        let n = v[1]["args"].as_u64().unwrap();
        let out = lines
            .iter()
            .find(|l| l["msgid"] == msg.msgid.as_str())
            .unwrap();
        assert_eq!(out["line"].as_u64().unwrap(), n);
    }
    assert!(run.stderr.contains("100 accepted"), "{}", run.stderr);
}

#[test]
fn bulk_wait_reports_each_job_and_exits_with_the_worst_code() {
    let router = FakeRouter::new();
    let input = "[\"call\", {\"handler\": \"echo\", \"args\": \"ok\"}]\n\
                 [\"call\", {\"handler\": \"echo\", \"args\": \"fail\"}]\n\
                 \n\
                 not json\n\
                 [\"call\", {\"handler\": \"echo\", \"args\": \"reject\"}]\n\
                 [\"call\", {\"handler\": \"echo\", \"args\": \"ok\"}]\n"
        .to_string();
    let run = run_sender(Some(&router), &["--wait"], Some(input), |r, id, msg| {
        let (_, headers, message) = request_parts(msg);
        assert_eq!(headers, "reply-requested,result-receipt,notices");
        let v: Value = serde_json::from_str(&message).unwrap();
        match v[1]["args"].as_str().unwrap() {
            "ok" => {
                ack(r, id, msg);
                result(r, id, msg, ResultStatus::Ok, r#"{"value": "ok"}"#);
            }
            "fail" => {
                ack(r, id, msg);
                result(
                    r,
                    id,
                    msg,
                    ResultStatus::Failed,
                    r#"{"error": {"kind": "exception", "message": "boom"}}"#,
                );
            }
            _ => r.send(
                id,
                Command::Reject(Reject {
                    orig_msgid: msg.msgid.clone(),
                    reason: RejectReason::ShuttingDown,
                    text: "bye".into(),
                }),
            ),
        }
    });
    // an invalid line (usage, 2) outranks rejected (3) and failed (4)
    assert_eq!(run.code, Some(2), "stderr: {}", run.stderr);
    let mut lines = output_lines(&run.stdout);
    lines.sort_by_key(|v| v["line"].as_u64());
    let statuses: Vec<(u64, &str)> = lines
        .iter()
        .map(|v| (v["line"].as_u64().unwrap(), v["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        statuses,
        vec![
            (1, "ok"),
            (2, "failed"),
            (4, "invalid"),
            (5, "rejected"),
            (6, "ok")
        ]
    );
    assert_eq!(lines[0]["result"]["value"], "ok");
    assert_eq!(lines[1]["result"]["error"]["message"], "boom");
    assert_eq!(lines[2]["msgid"], Value::Null);
    assert_eq!(lines[3]["reason"], "shutting-down");
    assert!(run.stderr.contains("2 ok, 1 failed"), "{}", run.stderr);
}

#[test]
fn bulk_without_invalid_lines_exits_with_the_job_codes() {
    let router = FakeRouter::new();
    let input = "[1]\n[2]\n".to_string();
    let run = run_sender(Some(&router), &["--wait"], Some(input), |r, id, msg| {
        ack(r, id, msg);
        let failed = request_parts(msg).2 == "[2]";
        let status = if failed {
            ResultStatus::Failed
        } else {
            ResultStatus::Ok
        };
        result(r, id, msg, status, r#"{"value": null}"#);
    });
    assert_eq!(run.code, Some(4), "stderr: {}", run.stderr);
}

#[test]
fn bulk_times_out_per_message() {
    let router = FakeRouter::new();
    let input = "[1]\n[2]\n".to_string();
    let run = run_sender(
        Some(&router),
        &["--timeout", "1"],
        Some(input),
        |r, id, msg| {
            if request_parts(msg).2 == "[1]" {
                ack(r, id, msg);
            }
        },
    );
    assert_eq!(run.code, Some(5), "stderr: {}", run.stderr);
    let mut lines = output_lines(&run.stdout);
    lines.sort_by_key(|v| v["line"].as_u64());
    assert_eq!(lines[0]["status"], "accepted");
    assert_eq!(lines[1]["status"], "timeout");
    assert_eq!(lines[1]["accepted"], false);
    assert!(run.elapsed < Duration::from_secs(5));
}

#[test]
fn broker_address_comes_from_the_environment() {
    let router = FakeRouter::new();
    let port = router.endpoint.rsplit(':').next().unwrap().to_string();
    // EVENTMQ_FRONTEND_ADDR is a bind address in 0.3.13 settings: * → 127.0.0.1
    let wildcard = format!("tcp://*:{port}");
    let run = run_sender_env(
        Some(&router),
        false,
        &[("EVENTMQ_FRONTEND_ADDR", &wildcard)],
        &["[1]"],
        None,
        ack,
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    // EMQ_BROKER_ADDR wins over EVENTMQ_FRONTEND_ADDR
    let run = run_sender_env(
        Some(&router),
        false,
        &[
            ("EMQ_BROKER_ADDR", &router.endpoint),
            ("EVENTMQ_FRONTEND_ADDR", "tcp://127.0.0.1:1"),
        ],
        &["[1]"],
        None,
        ack,
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
}

fn queue_full(r: &FakeRouter, id: &[u8], msg: &Message) {
    r.send(
        id,
        Command::Reject(Reject {
            orig_msgid: msg.msgid.clone(),
            reason: RejectReason::QueueFull,
            text: "queue default has 3 buffered jobs (hwm)".into(),
        }),
    )
}

#[test]
fn queue_full_is_backpressure_the_same_request_goes_again_until_accepted() {
    let router = FakeRouter::new();
    let mut n = 0;
    let run = run_sender(Some(&router), &["[1]"], None, |r, id, msg| {
        n += 1;
        if n <= 3 {
            queue_full(r, id, msg)
        } else {
            ack(r, id, msg)
        }
    });
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(run.requests.len(), 4, "refused 3 times, then accepted");
    let ids: Vec<&str> = run.requests.iter().map(|(_, m)| m.msgid.as_str()).collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "the same msgid: {ids:?}");
    assert_eq!(run.stdout.trim(), ids[0]);
    assert!(run.stderr.contains("sent 3 more time(s)"), "{}", run.stderr);
    // 10 + 20 + 40 ms of backoff at least.
    assert!(
        run.elapsed >= Duration::from_millis(70),
        "{:?}",
        run.elapsed
    );
}

#[test]
fn a_queue_still_full_at_the_timeout_exits_3_and_fail_fast_exits_at_once() {
    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &["--timeout", "0.5", "[1]"],
        None,
        queue_full,
    );
    assert_eq!(run.code, Some(3), "stderr: {}", run.stderr);
    assert!(run.stderr.contains("queue-full"), "{}", run.stderr);
    assert!(
        run.stderr.contains("still full after 0.5 s"),
        "{}",
        run.stderr
    );
    // 10, 20, 40, 80, 160 ms: 6 tries fit in 0.5 s (the next wait, 320 ms,
    // would end past it).
    assert!(
        (4..=7).contains(&run.requests.len()),
        "{} tries",
        run.requests.len()
    );
    assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);

    let router = FakeRouter::new();
    let run = run_sender(Some(&router), &["--fail-fast", "[1]"], None, queue_full);
    assert_eq!(run.code, Some(3), "stderr: {}", run.stderr);
    assert_eq!(run.requests.len(), 1, "no resend with --fail-fast");
    assert!(!run.stderr.contains("still full"), "{}", run.stderr);
}

#[test]
fn bulk_holds_new_lines_back_while_refused_jobs_wait_and_every_job_is_accepted_once() {
    let router = FakeRouter::new();
    let lines: String = (0..40).map(|i| format!("[{i}]\n")).collect();
    let mut n = 0;
    let run = run_sender(
        Some(&router),
        &["--window", "8"],
        Some(lines),
        |r, id, msg| {
            n += 1;
            // The first 8 are refused (the queue is full), then everything is
            // taken.
            if n <= 8 {
                queue_full(r, id, msg)
            } else {
                ack(r, id, msg)
            }
        },
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    let out: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(out.len(), 40, "{}", run.stdout);
    assert!(
        out.iter().all(|v| v["status"] == "accepted"),
        "{}",
        run.stdout
    );
    let mut lines: Vec<u64> = out.iter().map(|v| v["line"].as_u64().unwrap()).collect();
    lines.sort_unstable();
    assert_eq!(lines, (1..=40).collect::<Vec<_>>());
    assert_eq!(run.requests.len(), 48, "8 refused and sent again");
    // The 8 sent again are the first 8 lines, before any new line.
    let bodies: Vec<String> = run
        .requests
        .iter()
        .map(|(_, m)| request_parts(m).2)
        .collect();
    let again: Vec<&str> = bodies[8..16].iter().map(String::as_str).collect();
    let first: Vec<&str> = bodies[..8].iter().map(String::as_str).collect();
    assert_eq!(again, first, "refused jobs go first, in order: {bodies:?}");
    assert!(
        run.stderr.contains("8 sent again after queue-full"),
        "{}",
        run.stderr
    );

    // --fail-fast: every refusal is final.
    let router = FakeRouter::new();
    let lines: String = (0..5).map(|i| format!("[{i}]\n")).collect();
    let run = run_sender(Some(&router), &["--fail-fast"], Some(lines), queue_full);
    assert_eq!(run.code, Some(3), "stderr: {}", run.stderr);
    assert_eq!(run.requests.len(), 5);
    assert_eq!(
        run.stdout.matches("\"rejected\"").count(),
        5,
        "{}",
        run.stdout
    );
}

fn journal_uncertain(r: &FakeRouter, id: &[u8], msg: &Message) {
    r.send(
        id,
        Command::Reject(Reject {
            orig_msgid: msg.msgid.clone(),
            reason: RejectReason::JournalUncertain,
            text: "the journal commit's outcome is unknown".into(),
        }),
    )
}

fn duplicate(r: &FakeRouter, id: &[u8], msg: &Message) {
    r.send(
        id,
        Command::Reject(Reject {
            orig_msgid: msg.msgid.clone(),
            reason: RejectReason::DuplicateMsgid,
            text: "already held".into(),
        }),
    )
}

/// Issue 26 item 1: `journal-uncertain` is never a refusal. The same
/// REQUEST goes again (same msgid, with the queue-full backoff, even with
/// --fail-fast); a `duplicate-msgid` then means the router had stored it
/// (accepted, exit 0); still uncertain at --timeout, the job is reported
/// uncertain with exit code 1, never "rejected" (3).
#[test]
fn journal_uncertain_is_sent_again_and_never_reported_as_a_refusal() {
    for args in [&["[1]"][..], &["--fail-fast", "[1]"]] {
        let router = FakeRouter::new();
        let mut n = 0;
        let run = run_sender(Some(&router), args, None, |r, id, msg| {
            n += 1;
            match n {
                1 | 2 => journal_uncertain(r, id, msg),
                _ => duplicate(r, id, msg),
            }
        });
        assert_eq!(run.code, Some(0), "{args:?}: stderr: {}", run.stderr);
        assert_eq!(run.requests.len(), 3, "uncertain twice, then stored");
        let ids: Vec<&str> = run.requests.iter().map(|(_, m)| m.msgid.as_str()).collect();
        assert!(ids.iter().all(|i| *i == ids[0]), "the same msgid: {ids:?}");
        assert_eq!(run.stdout.trim(), ids[0]);
        assert!(
            run.stderr
                .contains("could not tell whether it stored it, sent 2 more"),
            "{}",
            run.stderr
        );
    }

    let router = FakeRouter::new();
    let run = run_sender(
        Some(&router),
        &["--timeout", "0.5", "[1]"],
        None,
        journal_uncertain,
    );
    assert_eq!(run.code, Some(1), "stderr: {}", run.stderr);
    assert!(
        (4..=7).contains(&run.requests.len()),
        "sent again with the backoff within --timeout: {} tries",
        run.requests.len()
    );
    assert!(!run.stderr.contains("rejected"), "{}", run.stderr);
    assert!(
        run.stderr.contains("journal-uncertain") && run.stderr.contains("it may run"),
        "{}",
        run.stderr
    );
    // 10 + 20 + 40 + 80 + 160 ms of backoff: the last try that fits.
    assert!(
        run.elapsed >= Duration::from_millis(300),
        "{:?}",
        run.elapsed
    );
}

#[test]
fn bulk_sends_journal_uncertain_jobs_again_and_reports_the_rest_uncertain() {
    // Line 1 is uncertain once and then stored (duplicate-msgid), line 2
    // always uncertain, line 3 accepted at once.
    let router = FakeRouter::new();
    let lines = "[1]\n[2]\n[3]\n".to_string();
    let mut seen_1 = 0;
    let run = run_sender(
        Some(&router),
        &["--timeout", "0.5", "--fail-fast"],
        Some(lines),
        |r, id, msg| match request_parts(msg).2.as_str() {
            "[1]" => {
                seen_1 += 1;
                if seen_1 == 1 {
                    journal_uncertain(r, id, msg)
                } else {
                    duplicate(r, id, msg)
                }
            }
            "[2]" => journal_uncertain(r, id, msg),
            _ => ack(r, id, msg),
        },
    );
    assert_eq!(run.code, Some(1), "stderr: {}", run.stderr);
    let out: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let status = |line: u64| {
        out.iter()
            .find(|v| v["line"] == line)
            .map(|v| v["status"].as_str().unwrap().to_string())
    };
    assert_eq!(status(1).as_deref(), Some("accepted"), "{}", run.stdout);
    assert_eq!(status(2).as_deref(), Some("uncertain"), "{}", run.stdout);
    assert_eq!(status(3).as_deref(), Some("accepted"), "{}", run.stdout);
    let two = out.iter().find(|v| v["line"] == 2).unwrap();
    assert_eq!(two["reason"], "journal-uncertain");
    let tries_2 = run
        .requests
        .iter()
        .filter(|(_, m)| request_parts(m).2 == "[2]")
        .count();
    assert!(tries_2 >= 3, "line 2 sent again: {tries_2} tries");
    assert!(
        run.stderr.contains("1 uncertain") && run.stderr.contains("0 rejected"),
        "{}",
        run.stderr
    );
}

/// Issue 26 item 9: a message over the router's size limit is not sent:
/// emq-sender says so at once (exit 2), instead of waiting --timeout for
/// an answer from a router that dropped it.
#[test]
fn a_message_over_the_size_limit_is_not_sent_and_exits_2_at_once() {
    let router = FakeRouter::new();
    let big = format!("[\"{}\"]", "x".repeat(2000));
    let run = run_sender(
        Some(&router),
        &["--max-message-size", "1000", "--timeout", "10", &big],
        None,
        ack,
    );
    run.says_at_once(2, &["REQUEST", "2004 bytes", "limit of 1000 bytes"]);
    assert!(run.requests.is_empty(), "nothing sent");

    // No limit (0), or a bigger one from the environment: sent.
    for (args, env) in [
        (vec!["--max-message-size", "0"], vec![]),
        (vec![], vec![("EVENTMQ_MAX_MESSAGE_SIZE", "4096")]),
    ] {
        let router = FakeRouter::new();
        let mut a: Vec<&str> = args.clone();
        a.push(&big);
        let run = common::run_sender_env(Some(&router), true, &env, &a, None, ack);
        assert_eq!(run.code, Some(0), "{args:?} {env:?}: {}", run.stderr);
        assert_eq!(run.requests.len(), 1);
    }
}

/// The issue's case: a 17 MB job in bulk mode, with the default limit (the
/// router's default --max-message-size, 16 MiB): that line is reported
/// invalid at once, the others go, exit 2.
#[test]
fn bulk_reports_a_17_mb_line_invalid_at_once_and_sends_the_rest() {
    let router = FakeRouter::new();
    let lines = format!("[1]\n[\"{}\"]\n[3]\n", "x".repeat(17_000_000));
    let run = run_sender(Some(&router), &["--timeout", "20"], Some(lines), ack);
    assert_eq!(run.code, Some(2), "stderr: {}", run.stderr);
    assert_eq!(run.requests.len(), 2, "lines 1 and 3 only");
    let out: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let two = out
        .iter()
        .find(|v| v["line"] == 2)
        .expect("line 2 reported");
    assert_eq!(two["status"], "invalid");
    let error = two["error"].as_str().unwrap();
    assert!(error.contains("limit of 16777216 bytes"), "{error}");
    assert!(run.elapsed < Duration::from_secs(10), "{:?}", run.elapsed);
}

/// A NOTICE from the router (issue 26 item 5) is one stderr line naming
/// the job, in single and bulk mode; the exit code is unchanged.
#[test]
fn a_notice_is_one_stderr_line_naming_the_job() {
    let text = "no job manager serves queue \"nobody\"; the router sent it to \"default\"\n(x)";
    let answer = |r: &FakeRouter, id: &[u8], msg: &Message| {
        ack(r, id, msg);
        r.send(
            id,
            Command::Notice(Notice {
                orig_msgid: msg.msgid.clone(),
                kind: NoticeKind::RoutedToDefault,
                text: text.into(),
            }),
        );
        result(r, id, msg, ResultStatus::Ok, r#"{"value": 1}"#);
    };
    let expect = |run: &Run| {
        assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
        for (_, msg) in &run.requests {
            let line = format!(
                "emq-sender: job {}: no job manager serves queue \"nobody\"; the router sent it \
                 to \"default\" (x)\n",
                msg.msgid
            );
            assert!(run.stderr.contains(&line), "{}", run.stderr);
        }
    };
    let router = FakeRouter::new();
    let args = ["-q", "nobody", "--wait", "--call", "echo"];
    expect(&run_sender(Some(&router), &args, None, answer));
    let router = FakeRouter::new();
    let input = "[\"call\", {\"handler\": \"echo\"}]\n".repeat(2);
    let run = run_sender(
        Some(&router),
        &["-q", "nobody", "--wait"],
        Some(input),
        answer,
    );
    assert_eq!(run.requests.len(), 2);
    expect(&run);
}
