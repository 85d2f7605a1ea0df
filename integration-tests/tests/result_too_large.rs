//! Our router (default `--max-message-size`, 16 MiB) + our job manager +
//! `emq-sender --wait`: a Python job whose result is bigger than the
//! router accepts ends with a failed result of kind `result-too-large`
//! (the job manager replaces it), not with a client timeout — the router
//! would have dropped the oversized REPLY.

use std::time::Duration;

use integration_tests::admin;
use integration_tests::bins::{self, SENDER};
use integration_tests::cluster::{start_jobmanager, start_router};
use integration_tests::process::run;
use integration_tests::Spawn;
use serde_json::Value;

#[test]
fn a_python_result_over_the_routers_max_message_size_is_a_result_too_large_failure() {
    let (router, addrs) = start_router(&[]);
    let jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "1"]);
    admin::wait_idle_workers(&addrs.admin, 1, 1, Duration::from_secs(20))
        .expect("job manager registers with its slot");

    // "y" * 17_000_000: a 17 MB string, over 16 MiB once wrapped in JSON.
    let out = run(
        Spawn::new("emq-sender", bins::bin(SENDER)).args([
            "--broker",
            &addrs.frontend,
            "--wait",
            "--timeout",
            "60",
            "--python",
            "operator.mul",
            "--args",
            r#"["y", 17000000]"#,
        ]),
        Duration::from_secs(90),
    );
    assert_eq!(out.code(), Some(4), "a failed job: {}", out.describe());
    let result: Value = out
        .stdout
        .lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l.trim())
                .ok()
                .filter(Value::is_object)
        })
        .unwrap_or_else(|| panic!("no result JSON on stdout: {}", out.describe()));
    let error = &result["error"];
    assert_eq!(error["kind"], "result-too-large", "{result}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("16777216 bytes"),
        "the limit in the message: {message}"
    );

    // The job manager was not disconnected: it still serves, on its first
    // connection.
    let out = run(
        Spawn::new("emq-sender", bins::bin(SENDER)).args([
            "--broker",
            &addrs.frontend,
            "--wait",
            "--timeout",
            "30",
            "--call",
            "echo",
            "--args",
            "7",
        ]),
        Duration::from_secs(60),
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    let mut jm = jm;
    assert!(jm.is_running(), "job manager died: {}", jm.tail(20));
    assert!(
        jm.stderr().contains("result-too-large"),
        "the job manager logs a warning: {}",
        jm.tail(20)
    );
    assert_eq!(
        jm.stderr().matches("connecting to").count(),
        1,
        "no reconnect: {}",
        jm.tail(20)
    );
    drop(jm);
    drop(router);
}
