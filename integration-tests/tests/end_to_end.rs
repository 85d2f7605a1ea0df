//! Our router + our job manager + `emq-sender --wait` / `emq-receiver`,
//! end to end over loopback: every job kind round-trips with the right
//! result and exit code, failures exit 4, the receiver shows a real INFORM,
//! and a client that leaves before its result does not hurt the router.

use std::time::Duration;

use integration_tests::admin::{self, sum_of};
use integration_tests::bins::{self, RECEIVER, SENDER};
use integration_tests::cluster::{start_jobmanager, start_router};
use integration_tests::process::{run, scratch_dir, RunOutput};
use integration_tests::{jobs, ports, Addrs, Client, Proc, Spawn};
use serde_json::{json, Value};

const CONCURRENCY: i64 = 2;

struct Cluster {
    addrs: Addrs,
    // Field order = drop order: job manager first, then the router.
    jm: Proc,
    router: Proc,
}

fn cluster() -> Cluster {
    let (router, addrs) = start_router(&[]);
    let jm = start_jobmanager(
        "emq-jobmanager",
        &addrs.backend,
        &["--concurrency", &CONCURRENCY.to_string()],
    );
    admin::wait_idle_workers(&addrs.admin, 1, CONCURRENCY, Duration::from_secs(20))
        .expect("job manager registers with its slots");
    Cluster { addrs, jm, router }
}

fn sender(addrs: &Addrs, args: &[&str]) -> RunOutput {
    run(
        Spawn::new("emq-sender", bins::bin(SENDER))
            .args(["--broker", &addrs.frontend])
            .args(args),
        Duration::from_secs(60),
    )
}

/// `emq-sender --wait --timeout 30 ARGS`: submit and wait for the result.
fn sender_wait(addrs: &Addrs, args: &[&str]) -> RunOutput {
    let mut all = vec!["--wait", "--timeout", "30"];
    all.extend_from_slice(args);
    sender(addrs, &all)
}

/// The last stdout line that is a JSON object (the result with --wait).
fn result_json(out: &RunOutput) -> Value {
    out.stdout
        .lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l.trim())
                .ok()
                .filter(Value::is_object)
        })
        .unwrap_or_else(|| panic!("no result JSON on stdout: {}", out.describe()))
}

#[test]
fn python_job_round_trips() {
    let c = cluster();
    let out = sender_wait(
        &c.addrs,
        &["--python", "emq_test_jobs.add", "--args", "[2, 3]"],
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    assert_eq!(result_json(&out), json!({"value": 5}), "{}", out.describe());

    // A method of a class, with class_args: the 0.3.13 `path = mod:Class` form.
    let dir = scratch_dir("py-class");
    let file = dir.join("records.txt");
    let out = sender_wait(
        &c.addrs,
        &[
            "--python",
            "emq_test_jobs:Recorder.write",
            "--class-args",
            &json!([file.display().to_string(), "p-"]).to_string(),
            "--args",
            r#"["t1"]"#,
            "--kwargs",
            r#"{"label": "cls"}"#,
        ],
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    assert_eq!(result_json(&out), json!({"value": "p-t1"}));
    let recs = jobs::read_records(&file);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(&recs[0][..2], ["p-t1", "cls"]);
    drop(c);
}

#[test]
fn shell_job_round_trips() {
    let c = cluster();
    let out = sender_wait(
        &c.addrs,
        &["--shell", "--", "sh", "-c", "echo hello-from-shell"],
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    let v = result_json(&out);
    assert!(v.get("value").is_some(), "not a success: {v}");
    assert!(
        v.to_string().contains("hello-from-shell"),
        "stdout of the command missing from the result: {v}"
    );
    let mut jm = c.jm;
    assert!(jm.is_running(), "job manager died: {}", jm.tail(20));
}

#[test]
fn echo_call_round_trips() {
    let c = cluster();
    let out = sender_wait(
        &c.addrs,
        &["--call", "echo", "--args", r#"{"a": [1, "two", null]}"#],
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    assert_eq!(result_json(&out), json!({"value": {"a": [1, "two", null]}}));

    // Without --wait: the msgid is printed once the router accepts the job.
    let out = sender(&c.addrs, &["--call", "noop"]);
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    let id = out.stdout.trim();
    assert_eq!(id.len(), 36, "expected a uuid4 msgid, got {id:?}");
}

#[test]
fn failing_jobs_exit_4() {
    let c = cluster();
    // A Python exception.
    let out = sender_wait(
        &c.addrs,
        &["--python", "emq_test_jobs.fail", "--args", r#"["no-good"]"#],
    );
    assert_eq!(out.code(), Some(4), "{}", out.describe());
    let v = result_json(&out);
    assert_eq!(v["error"]["kind"], "exception", "{v}");
    assert!(v.to_string().contains("no-good"), "{v}");

    // A shell command exiting non-zero.
    let out = sender_wait(&c.addrs, &["--shell", "--", "sh", "-c", "exit 3"]);
    assert_eq!(out.code(), Some(4), "{}", out.describe());
    let v = result_json(&out);
    assert_eq!(v["error"]["kind"], "exit", "{v}");
    assert_eq!(v["error"]["exit_status"], 3, "{v}");

    // A raw job of an unknown handler.
    let out = sender_wait(
        &c.addrs,
        &[r#"["call", {"handler": "no-such-handler", "args": null}]"#],
    );
    assert_eq!(out.code(), Some(4), "{}", out.describe());
    assert_eq!(result_json(&out)["error"]["kind"], "unknown-handler");

    // The job manager keeps serving after failures.
    let out = sender_wait(&c.addrs, &["--call", "echo", "--args", "7"]);
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    assert_eq!(result_json(&out), json!({"value": 7}));
}

#[test]
fn receiver_prints_the_inform_of_a_real_jobmanager() {
    let addr = ports::free_endpoint();
    let mut receiver = Spawn::new("emq-receiver", bins::bin(RECEIVER))
        .args(["--bind", &addr, "--ack-informs", "--count", "1"])
        .spawn();
    // The job manager connects once the receiver has bound (it would
    // reconnect anyway; this keeps the test's order plain).
    receiver
        .wait_for_log_line("bound to", Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("receiver did not bind: {e}"));
    let _jm = start_jobmanager(
        "emq-jobmanager",
        &addr,
        &["--queues", "10:default,15:email", "--concurrency", "3"],
    );
    let status = receiver.wait_exit(Duration::from_secs(20));
    let stdout = receiver.stdout();
    assert!(
        status.is_some_and(|s| s.success()),
        "receiver did not exit 0 after one message ({status:?}); stdout:\n{stdout}\nstderr:\n{}",
        receiver.tail(20)
    );
    let line = stdout
        .lines()
        .find(|l| l.contains("INFORM"))
        .unwrap_or_else(|| panic!("no INFORM printed: {stdout}"));
    let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    let text = v.to_string();
    assert!(
        text.contains("email") && text.contains("15"),
        "queues missing: {text}"
    );
    assert!(text.contains("job-ack"), "feature frame missing: {text}");
    assert!(text.contains("worker"), "peer type missing: {text}");
}

#[test]
fn client_leaving_before_its_result_does_not_hurt_the_router() {
    let mut c = cluster();
    {
        let mut gone = Client::connect(&c.addrs.frontend);
        let id = gone.submit_reply("default", jobs::shell(&["sh", "-c", "sleep 1; echo late"]));
        assert!(
            gone.wait_for(Duration::from_secs(10), |cl| cl.acks.contains_key(&id)),
            "REQUEST not acknowledged"
        );
        // Dropped here: the socket closes before the RESULT exists.
    }
    // Wait until the job finished: the router has had its REPLY and tried
    // to deliver the RESULT to the client that left.
    let finished =
        integration_tests::poll_until(Duration::from_secs(15), Duration::from_millis(50), || {
            let s = admin::status(&c.addrs.admin).ok()?;
            (sum_of(&s, "inflight_messages_by_queue") == 0).then_some(())
        });
    assert!(
        finished.is_some(),
        "the job never finished: {:?}",
        admin::status(&c.addrs.admin)
    );
    assert!(c.router.is_running(), "router died: {}", c.router.tail(30));

    // Fire-and-forget jobs must not leak either (0.3.13 counts them in flight forever).
    let mut client = Client::connect(&c.addrs.frontend);
    for i in 0..5 {
        client.submit("default", "", jobs::call("echo", json!(i)));
    }
    let next = client.submit_reply("default", jobs::call("echo", json!("next")));
    client
        .wait_finished(std::slice::from_ref(&next), Duration::from_secs(20))
        .expect("router serves the next job");
    assert_eq!(
        client.result(&next).unwrap().json(),
        json!({"value": "next"})
    );
    assert!(
        client.wait_for(Duration::from_secs(5), |cl| cl.acks.len() == 6),
        "acks: {:?}",
        client.acks
    );

    let status =
        integration_tests::poll_until(Duration::from_secs(10), Duration::from_millis(200), || {
            let s = admin::status(&c.addrs.admin).ok()?;
            (sum_of(&s, "inflight_messages_by_queue") == 0
                && sum_of(&s, "waiting_messages_by_queue") == 0)
                .then_some(s)
        });
    let last = admin::status(&c.addrs.admin);
    assert!(
        status.is_some(),
        "STATUS still shows jobs in flight or waiting: {last:?}"
    );
    admin::wait_idle_workers(&c.addrs.admin, 1, CONCURRENCY, Duration::from_secs(10))
        .expect("all slots free again");

    let log = c.router.stderr();
    let bad: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" ERROR ") || l.contains("panicked"))
        .collect();
    assert!(bad.is_empty(), "router logged errors:\n{}", bad.join("\n"));
    assert!(c.router.is_running());
}

/// A burst bigger than the queue limit: `emq-sender` takes `queue-full` as
/// backpressure and sends the refused jobs again, so every job of the
/// burst is accepted and runs once (the router's real refusals, with a
/// small `--hwm`); `--fail-fast` gives the refusals back as exit 3.
#[test]
fn a_burst_over_the_queue_limit_is_sent_again_until_accepted() {
    let (_router, addrs) = start_router(&["--journal", "none", "--hwm", "50"]);
    let _jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "2"]);
    admin::wait_idle_workers(&addrs.admin, 1, 2, Duration::from_secs(20))
        .expect("job manager registers");
    let n = 2000;
    let lines: String = (0..n)
        .map(|i| format!("[\"call\", {{\"handler\": \"echo\", \"args\": {i}}}]\n"))
        .collect();
    let out = run(
        Spawn::new("emq-sender", bins::bin(SENDER))
            .args(["--broker", &addrs.frontend, "--wait", "--timeout", "60"])
            .stdin(lines.clone()),
        Duration::from_secs(90),
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    let results: Vec<Value> = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(results.len(), n);
    assert!(
        results.iter().all(|v| v["status"] == "ok"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("sent again after queue-full"),
        "a 50-job queue refused some of {n}: {}",
        out.stderr
    );
    eprintln!("[burst] {}", out.stderr.trim());

    let out = run(
        Spawn::new("emq-sender", bins::bin(SENDER))
            .args(["--broker", &addrs.frontend, "--fail-fast"])
            .stdin(lines),
        Duration::from_secs(90),
    );
    assert_eq!(out.code(), Some(3), "{}", out.describe());
    assert!(out.stdout.contains("\"queue-full\""), "{}", out.describe());
}

/// `batched-acks` (docs/PROTOCOL.md, "Batched acknowledgements"): a
/// client that asks gets every REQUEST acknowledged exactly once through
/// ACKS messages and never a `REPLY [msgid]`, and its jobs run; a client
/// that does not ask (0.3.13's form) gets a REPLY per REQUEST from the
/// same router. In memory mode and with the SQLite journal (where the
/// acknowledgements wait for their batch's commit).
#[test]
fn batched_acks_reach_the_client_that_asks_and_replies_the_others() {
    for journal in ["none", "sqlite"] {
        let dir = scratch_dir("batched-acks");
        let path = dir.join("router.journal").display().to_string();
        let journal_arg = if journal == "none" { "none" } else { &path };
        let (_router, addrs) = start_router(&["--journal", journal_arg]);
        let _jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "2"]);
        admin::wait_idle_workers(&addrs.admin, 1, 2, Duration::from_secs(20))
            .expect("job manager registers");
        let mut batched = Client::connect(&addrs.frontend);
        let mut plain = Client::connect(&addrs.frontend);
        let n = 300;
        let mut ids = Vec::new();
        let mut plain_ids = Vec::new();
        for i in 0..n {
            ids.push(batched.submit(
                "default",
                "reply-requested,batched-acks",
                jobs::call("echo", json!(i)),
            ));
            if i % 10 == 0 {
                plain_ids.push(plain.submit(
                    "default",
                    "reply-requested",
                    jobs::call("echo", json!(i)),
                ));
            }
        }
        batched
            .wait_finished(&ids, Duration::from_secs(60))
            .unwrap_or_else(|missing| panic!("{journal}: no result for {missing:?}"));
        plain
            .wait_finished(&plain_ids, Duration::from_secs(60))
            .unwrap_or_else(|missing| panic!("{journal}: no result for {missing:?}"));
        // Acknowledgements come before results on the same pipe: all here.
        for id in &ids {
            assert_eq!(batched.acks.get(id), Some(&1), "{journal}: ack of {id}");
        }
        assert!(
            batched.acks_messages >= 1 && batched.acks_messages <= n,
            "{journal}: {} ACKS messages for {n} jobs",
            batched.acks_messages
        );
        assert_eq!(
            batched.reply_acks, 0,
            "{journal}: no REPLY [msgid] to the client that asked"
        );
        eprintln!(
            "[batched-acks] {journal}: {n} jobs acknowledged in {} ACKS messages",
            batched.acks_messages
        );
        for id in &plain_ids {
            assert_eq!(plain.acks.get(id), Some(&1), "{journal}: ack of {id}");
        }
        assert_eq!(
            plain.acks_messages, 0,
            "{journal}: a plain client gets REPLYs"
        );
        assert_eq!(plain.reply_acks, plain_ids.len(), "{journal}");
    }
}
