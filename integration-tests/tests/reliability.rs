//! Reliability fixes, each checked with the real processes (one test per
//! fixed symptom):
//! - `retry-count:N` runs a failing job at most N+1 times, with growing
//!   delays (the router owns retries; the job manager runs each delivery
//!   once);
//! - SIGTERM of the router drains the work running in the job manager:
//!   the waiting client gets its result, the router exits 0, and the job
//!   is not run again after a restart;
//! - a re-used msgid is refused `duplicate-msgid` and never costs the
//!   acknowledged job (not across `kill -9`, not while the first job runs);
//! - a REQUEST over `--max-message-size` is refused `malformed` with a log
//!   line (the router's sockets cut only frames over twice the limit).

use std::path::Path;
use std::time::{Duration, Instant};

use emqp_proto::{Command, Headers, Message, RejectReason, Request};
use integration_tests::admin::{self, sum_of};
use integration_tests::bins::{self, SENDER};
use integration_tests::client::Client;
use integration_tests::cluster::{start_jobmanager, start_router, start_router_on, Addrs};
use integration_tests::jobs::{count_lines, read_records, shell_record};
use integration_tests::process::{run, scratch_dir, RunOutput};
use integration_tests::{poll_until, report, Spawn};
use serde_json::Value;

/// The last line of stdout that is a JSON object.
fn last_json(out: &RunOutput) -> Value {
    out.stdout
        .lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l.trim())
                .ok()
                .filter(Value::is_object)
        })
        .unwrap_or_else(|| panic!("no JSON object on stdout: {}", out.describe()))
}

/// A STATUS counter.
fn counter(addrs: &Addrs, name: &str) -> i64 {
    let s = admin::status(&addrs.admin).expect("STATUS");
    s["counters"][name]
        .as_i64()
        .unwrap_or_else(|| panic!("no counter {name} in STATUS: {s}"))
}

/// Poll STATUS until `ok(status)`; the last STATUS, or a panic with it.
fn wait_status(addrs: &Addrs, what: &str, timeout: Duration, ok: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    poll_until(timeout, Duration::from_millis(50), || {
        last = admin::status(&addrs.admin).ok()?;
        ok(&last).then(|| last.clone())
    })
    .unwrap_or_else(|| panic!("STATUS never showed {what} within {timeout:?}; last: {last}"))
}

/// A REQUEST on queue `default` with the given msgid (no headers).
fn request_frames(msgid: &str, message: Vec<u8>) -> Vec<Vec<u8>> {
    Message::with_msgid(
        msgid.to_string(),
        Command::Request(Request {
            queue: "default".into(),
            headers: Headers::parse(b"").expect("empty headers"),
            message,
        }),
    )
    .encode()
}

#[test]
fn retry_count_n_runs_a_failing_job_at_most_n_plus_one_times() {
    let (router, addrs) = start_router(&["--retry-backoff", "0.2"]);
    let jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "1"]);
    admin::wait_idle_workers(&addrs.admin, 1, 1, Duration::from_secs(20))
        .expect("job manager registers");
    let runs = scratch_dir("retry").join("runs.txt");
    let runs_arg = runs.display().to_string();

    let out = run(
        Spawn::new("emq-sender", bins::bin(SENDER)).args([
            "--broker",
            &addrs.frontend,
            "--wait",
            "--timeout",
            "60",
            "--header",
            "retry-count:2",
            "--shell",
            "--",
            "sh",
            "-c",
            "echo \"x $(date +%s.%N)\" >> \"$1\"; exit 1",
            "sh",
            &runs_arg,
        ]),
        Duration::from_secs(90),
    );
    assert_eq!(out.code(), Some(4), "a failed job: {}", out.describe());
    let result = last_json(&out);
    assert_eq!(result["error"]["attempts"], 3, "executions: {result}");

    // The RESULT comes only after the last execution: what is in the file
    // now is every execution there will be.
    let records = read_records(&runs);
    assert_eq!(records.len(), 3, "1 run + 2 retries: {records:?}");
    let at: Vec<f64> = records
        .iter()
        .map(|r| r[1].parse().unwrap_or_else(|_| panic!("timestamp: {r:?}")))
        .collect();
    let (gap1, gap2) = (at[1] - at[0], at[2] - at[1]);
    report(&format!(
        "retry-count:2 with --retry-backoff 0.2: 3 runs, gaps {gap1:.3}s then {gap2:.3}s"
    ));
    // Backoffs are lower bounds (a run starts no earlier than its delay
    // after the failure was reported): 0.2 s, then 0.4 s.
    assert!(
        gap1 >= 0.19,
        "the first retry waits the backoff: {gap1:.3}s"
    );
    assert!(
        gap2 >= 0.39 && gap2 > gap1,
        "the delay doubles: gaps {gap1:.3}s then {gap2:.3}s"
    );
    assert_eq!(counter(&addrs, "retried"), 2);
    assert_eq!(counter(&addrs, "dead_lettered"), 1);
    drop(jm);
    drop(router);
}

#[test]
fn sigterm_of_the_router_drains_work_running_in_the_job_manager() {
    let addrs = Addrs::fresh();
    let journal = scratch_dir("drain").join("router.journal");
    let journal_arg = journal.display().to_string();
    let flags = ["--journal", journal_arg.as_str(), "--drain-timeout", "10"];
    let mut router = start_router_on(&addrs, &flags).expect("router starts");
    let jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "2"]);
    admin::wait_idle_workers(&addrs.admin, 1, 2, Duration::from_secs(20))
        .expect("job manager registers");

    let mut sender = Spawn::new("emq-sender", bins::bin(SENDER))
        .args([
            "--broker",
            &addrs.frontend,
            "--wait",
            "--timeout",
            "30",
            "--shell",
            "--",
            "sh",
            "-c",
            "sleep 3; echo done",
        ])
        .spawn();
    wait_status(
        &addrs,
        "the job on the job manager",
        Duration::from_secs(20),
        |s| sum_of(s, "dispatched_messages_by_queue") == 1,
    );

    let term = Instant::now();
    router.signal(libc::SIGTERM);
    let status = router.wait_exit(Duration::from_secs(15));
    let drained_in = term.elapsed();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "the router exits 0 within the drain timeout ({status:?}); log:\n{}",
        router.tail(30)
    );
    assert!(drained_in < Duration::from_secs(10), "{drained_in:?}");
    let sender_status = sender.wait_exit(Duration::from_secs(40));
    assert_eq!(
        sender_status.and_then(|s| s.code()),
        Some(0),
        "the sender gets the result ({sender_status:?}); stdout: {}\nstderr: {}",
        sender.stdout(),
        sender.tail(20)
    );
    assert!(sender.stdout().contains("done"), "{}", sender.stdout());
    assert!(
        router.stderr().contains("shutting down"),
        "{}",
        router.tail(20)
    );

    // Restarted on the same journal: the finished job is not in it.
    let router = start_router_on(&addrs, &flags).expect("router restarts");
    let restored = counter(&addrs, "restored");
    report(&format!(
        "SIGTERM drain: router exited 0 after {:.2}s, sender exit 0, restored after restart {restored}",
        drained_in.as_secs_f64()
    ));
    assert_eq!(restored, 0, "the drained job would run again");
    drop(jm);
    drop(router);
}

#[test]
fn a_reused_msgid_never_loses_an_acknowledged_job() {
    let addrs = Addrs::fresh();
    let journal = scratch_dir("dup").join("router.journal");
    let journal_arg = journal.display().to_string();
    let flags = ["--journal", journal_arg.as_str()];
    let mut router = start_router_on(&addrs, &flags).expect("router starts");
    let records = scratch_dir("dup").join("ran.txt");
    let mut c = Client::connect(&addrs.frontend);

    // No worker yet: the first job stays buffered (unfinished) when the
    // second REQUEST with its msgid arrives.
    let id = emqp_proto::new_msgid();
    c.send_frames(request_frames(&id, shell_record(&records, "first", "0")));
    c.send_frames(request_frames(&id, shell_record(&records, "second", "0")));
    assert!(
        c.wait_for(Duration::from_secs(10), |c| c.acks.contains_key(&id)
            && c.rejects.contains_key(&id)),
        "one ack and one REJECT for {id}: acks {:?} rejects {:?}",
        c.acks,
        c.rejects
    );
    c.pump(Duration::from_millis(0));
    assert_eq!(c.acks[&id], 1, "acknowledged once");
    let rejects = &c.rejects[&id];
    assert_eq!(rejects.len(), 1, "{rejects:?}");
    assert_eq!(
        rejects[0].reason,
        RejectReason::DuplicateMsgid,
        "{rejects:?}"
    );

    // Crash, restart on the same journal, then a job manager: the
    // acknowledged job runs once, the refused one never.
    router.kill9();
    let router = start_router_on(&addrs, &flags).expect("router restarts");
    assert_eq!(
        counter(&addrs, "restored"),
        1,
        "the acknowledged job is kept"
    );
    let jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "1"]);
    wait_status(&addrs, "the job done", Duration::from_secs(30), |s| {
        s["counters"]["completed"] == 1 && sum_of(s, "inflight_messages_by_queue") == 0
    });
    let seen = count_lines(&records);
    assert_eq!(seen.get("first"), Some(&1), "{seen:?}");
    assert_eq!(seen.get("second"), None, "the refused job ran: {seen:?}");

    // A msgid re-used while its first job runs (1 s) is refused, and the
    // worker's in-flight count goes back to 0 when the job ends.
    let busy = emqp_proto::new_msgid();
    c.send_frames(request_frames(&busy, shell_record(&records, "busy1", "1")));
    wait_status(&addrs, "the job dispatched", Duration::from_secs(20), |s| {
        sum_of(s, "dispatched_messages_by_queue") == 1
    });
    c.send_frames(request_frames(&busy, shell_record(&records, "busy2", "0")));
    assert!(
        c.wait_for(Duration::from_secs(10), |c| c.acks.contains_key(&busy)
            && c.rejects.contains_key(&busy)),
        "an ack and a REJECT for {busy}: acks {:?} rejects {:?}",
        c.acks,
        c.rejects
    );
    assert_eq!(c.rejects[&busy][0].reason, RejectReason::DuplicateMsgid);
    let status = wait_status(&addrs, "nothing in flight", Duration::from_secs(20), |s| {
        s["counters"]["completed"] == 2
            && sum_of(s, "inflight_messages_by_worker") == 0
            && sum_of(s, "inflight_messages_by_queue") == 0
    });
    let seen = count_lines(&records);
    report(&format!(
        "re-used msgid: runs {seen:?}, rejected_duplicate_msgid {}",
        status["counters"]["rejected_duplicate_msgid"]
    ));
    assert_eq!(seen.get("busy1"), Some(&1), "{seen:?}");
    assert_eq!(seen.get("busy2"), None, "{seen:?}");
    // Counters are per run: the restarted router refused one.
    assert_eq!(
        status["counters"]["rejected_duplicate_msgid"], 1,
        "{status}"
    );
    drop(jm);
    drop(router);
}

/// `emq-sender --wait` of one job given on stdin (a JSON string of `len`
/// bytes), at most `timeout` seconds, with the sender's own size check at
/// `sender_limit` bytes (`--max-message-size`; 0: none, so the router's
/// check is what is tested).
fn send_big(addrs: &Addrs, len: usize, timeout: &str, sender_limit: &str) -> RunOutput {
    let mut line = Vec::with_capacity(len + 3);
    line.push(b'"');
    line.resize(len + 1, b'x');
    line.extend_from_slice(b"\"\n");
    run(
        Spawn::new("emq-sender", bins::bin(SENDER))
            .args([
                "--broker",
                &addrs.frontend,
                "--wait",
                "--timeout",
                timeout,
                "--max-message-size",
                sender_limit,
                "-",
            ])
            .stdin(line),
        Duration::from_secs(60),
    )
}

#[test]
fn a_request_over_the_message_size_limit_is_refused_with_a_log_line_not_dropped() {
    // Default --max-message-size: 16 MiB; the sockets cut at 32 MiB.
    let (mut router, addrs) = start_router(&[]);
    // emq-sender with the router's default limit does not send it at all
    // (exit 2, the line reported invalid); the router never sees it.
    let out = send_big(&addrs, 17_000_000, "30", "16777216");
    assert_eq!(out.code(), Some(2), "not sent: {}", out.describe());
    assert_eq!(last_json(&out)["status"], "invalid", "{}", out.describe());
    assert_eq!(counter(&addrs, "rejected_too_large"), 0);
    // A client without that check: the router refuses it, with a warning.
    let out = send_big(&addrs, 17_000_000, "30", "0");
    assert_eq!(out.code(), Some(3), "rejected: {}", out.describe());
    let line = last_json(&out);
    assert_eq!(line["status"], "rejected", "{line}");
    assert_eq!(line["reason"], "malformed", "{line}");
    let text = line["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("over the router's limit of 16777216 bytes"),
        "{text}"
    );
    let log = router.stderr();
    let warning = log
        .lines()
        .find(|l| l.contains("WARN") && l.contains("over the limit"))
        .unwrap_or_else(|| panic!("no warning in the router log:\n{}", router.tail(20)));
    assert!(
        warning.contains("frontend") && warning.contains("bytes"),
        "names the socket and the size: {warning}"
    );
    assert_eq!(counter(&addrs, "rejected_too_large"), 1);

    // Over twice the limit libzmq cuts the connection: no answer (the
    // sender times out), the router stays up and still serves.
    let out = send_big(&addrs, 40_000_000, "5", "0");
    assert_eq!(out.code(), Some(5), "no answer: {}", out.describe());
    assert!(router.is_running(), "{}", router.tail(20));
    assert_eq!(
        counter(&addrs, "rejected_too_large"),
        1,
        "never reached the core"
    );
    let mut c = Client::connect(&addrs.frontend);
    let id = c.submit(
        "default",
        "",
        shell_record(Path::new("/dev/null"), "small", "0"),
    );
    assert!(
        c.wait_for(Duration::from_secs(10), |c| c.acks.contains_key(&id)),
        "a small job is still acknowledged: rejects {:?}\n{}",
        c.rejects,
        router.tail(20)
    );
    report("message size: 17 MB refused malformed with a warning; 40 MB cut by libzmq");
    drop(router);
}
