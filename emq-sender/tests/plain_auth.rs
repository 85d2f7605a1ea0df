//! The real emq-sender binary against a fake ROUTER that requires ZMQ PLAIN
//! credentials (a PLAIN server with emq_transport's ZAP handler): the right
//! password gets the message through (ack, exit 0); a wrong one gets
//! nothing through (no ack, exit 5).

mod common;

use std::time::Duration;

use common::{run_sender, run_sender_env, FakeRouter};
use emqp_proto::{Command, Reply};

fn ack(r: &FakeRouter, id: &[u8], msg: &emqp_proto::Message) {
    r.send(id, Command::Reply(Reply::ack_of(&msg.msgid)));
}

#[test]
fn the_right_password_is_acked_and_a_wrong_one_times_out() {
    let router = FakeRouter::with_plain_users("alice:s3cret\nbob:other\n");

    let run = run_sender(
        Some(&router),
        &[
            "--username",
            "alice",
            "--password",
            "s3cret",
            "--call",
            "noop",
        ],
        None,
        ack,
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(run.requests.len(), 1);
    assert_eq!(run.stdout.trim(), run.requests[0].1.msgid);

    let run = run_sender(
        Some(&router),
        &[
            "--username",
            "alice",
            "--password",
            "wrong",
            "--timeout",
            "1",
            "--call",
            "noop",
        ],
        None,
        ack,
    );
    assert_eq!(run.code, Some(5), "stderr: {}", run.stderr);
    assert!(run.stderr.contains("PLAIN credentials"), "{}", run.stderr);
    assert!(run.requests.is_empty(), "nothing got through");
    assert_eq!(run.stdout, "");
    assert!(run.elapsed < Duration::from_secs(5), "{:?}", run.elapsed);

    // no credentials at all: refused too
    let run = run_sender(
        Some(&router),
        &["--timeout", "1", "--call", "noop"],
        None,
        ack,
    );
    assert_eq!(run.code, Some(5), "stderr: {}", run.stderr);
    assert!(run.requests.is_empty());
}

#[test]
fn credentials_from_the_environment_and_a_password_file() {
    let router = FakeRouter::with_plain_users("alice:s3cret\n");
    let run = run_sender_env(
        Some(&router),
        true,
        &[("EMQ_USERNAME", "alice"), ("EMQ_PASSWORD", "s3cret")],
        &["--schedule-interval", "60", "--call", "noop"],
        None,
        ack,
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert!(matches!(run.requests[0].1.command, Command::Schedule(_)));

    let file = emq_testkit::process::scratch_dir("plain").join("password");
    std::fs::write(&file, "s3cret\n").unwrap();
    let run = run_sender_env(
        Some(&router),
        true,
        // the file wins over a wrong $EMQ_PASSWORD
        &[("EMQ_USERNAME", "alice"), ("EMQ_PASSWORD", "wrong")],
        &["--password-file", file.to_str().unwrap(), "[1]"],
        None,
        ack,
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(run.requests.len(), 1);

    // a username without any password is a usage error
    let run = run_sender(None, &["--username", "alice", "[1]"], None, ack);
    assert_eq!(run.code, Some(2), "stderr: {}", run.stderr);
}
