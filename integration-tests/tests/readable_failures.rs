//! Failures people can read (issue 32): a Python job's traceback shown as
//! text, without the job manager's own runner frames, by emq-sender and
//! `emq-cli job` (a dead letter's too); and a job's print() output on the
//! job manager's stderr tagged with the job's msgid.

use std::time::Duration;

use integration_tests::bins::{self, SENDER};
use integration_tests::cluster::{start_jobmanager, start_router};
use integration_tests::process::run;
use integration_tests::{admin, Spawn};

const RUN_LIMIT: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(20);

fn sender(broker: &str, args: &[&str]) -> integration_tests::RunOutput {
    run(
        Spawn::new(SENDER, bins::bin(SENDER))
            .args(["--broker", broker])
            .args(args),
        RUN_LIMIT,
    )
}

fn cli(admin_addr: &str, args: &[&str]) -> integration_tests::RunOutput {
    run(
        Spawn::new("emq-cli", bins::bin("emq-cli"))
            .args(["--admin", admin_addr])
            .args(args),
        RUN_LIMIT,
    )
}

/// The traceback of `emq_test_jobs.shout_then_fail` as a person reads it.
fn assert_readable_traceback(text: &str, what: &str) {
    assert!(
        text.contains("Traceback (most recent call last):\n"),
        "{what}: no traceback as text:\n{text}"
    );
    assert!(
        text.contains("emq_test_jobs.py\", line") && text.contains("in shout_then_fail\n"),
        "{what}: the job's own frame is missing:\n{text}"
    );
    assert!(
        text.contains("ValueError: no fire\n"),
        "{what}: the exception line is missing:\n{text}"
    );
    assert!(
        !text.contains("File \"<string>\"") && !text.contains("in _run"),
        "{what}: the runner's own frames are shown:\n{text}"
    );
    assert!(!text.contains("\\n"), "{what}: escaped newlines:\n{text}");
}

#[test]
fn a_failed_jobs_traceback_reads_as_text_and_its_prints_carry_its_msgid() {
    let (_router, addrs) = start_router(&[]);
    let jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "1"]);
    admin::wait_idle_workers(&addrs.admin, 1, 1, WAIT).expect("the job manager registers");

    let out = sender(
        &addrs.frontend,
        &[
            "--wait",
            "--python",
            "emq_test_jobs.shout_then_fail",
            "--args",
            "[\"fire\"]",
        ],
    );
    assert_eq!(
        out.code(),
        Some(4),
        "a failed job (exit 4): {}",
        out.describe()
    );
    assert_readable_traceback(&out.stderr, "emq-sender's stderr");
    // stdout keeps the whole result for scripts (not a terminal here).
    let result: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON result");
    assert_eq!(result["error"]["kind"], "exception", "{result}");
    let msgid = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("emq-sender: job "))
        .and_then(|l| l.strip_suffix(" failed:"))
        .expect("the failure line names the job")
        .to_string();

    // The job's prints, each line tagged with its msgid (the partial
    // line completed by the next print is one line).
    let log = jm.stderr();
    for line in ["shouting fire", "second line"] {
        let tagged = format!("[{msgid}] {line}\n");
        assert!(
            log.contains(&tagged),
            "no {tagged:?} in the job manager's stderr:\n{log}"
        );
    }

    // emq-cli job: the traceback as text after the key-value lines.
    let out = cli(&addrs.admin, &["job", &msgid]);
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    assert!(
        out.stdout.contains("\ntraceback:\n  Traceback"),
        "{}",
        out.describe()
    );
    assert_readable_traceback(&out.stdout, "emq-cli job");
}

#[test]
fn a_dead_letters_job_view_shows_its_traceback() {
    let (_router, addrs) = start_router(&["--retry-backoff", "0.1"]);
    let _jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "1"]);
    admin::wait_idle_workers(&addrs.admin, 1, 1, WAIT).expect("the job manager registers");
    // One retry, then a dead letter.
    let out = sender(
        &addrs.frontend,
        &[
            "--wait",
            "--header",
            "retry-count:1",
            "--python",
            "emq_test_jobs.shout_then_fail",
            "--args",
            "[\"fire\"]",
        ],
    );
    assert_ne!(out.code(), Some(0), "{}", out.describe());
    let listed = cli(&addrs.admin, &["--json", "dead", "list"]);
    let v: serde_json::Value = serde_json::from_str(listed.stdout.trim()).expect("JSON");
    let msgid = v["dead_letters"][0]["msgid"]
        .as_str()
        .unwrap_or_else(|| panic!("no dead letter: {v}"))
        .to_string();
    let out = cli(&addrs.admin, &["job", &msgid]);
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    assert!(
        out.stdout.contains("state:") && out.stdout.contains("dead-lettered"),
        "{}",
        out.describe()
    );
    assert_readable_traceback(&out.stdout, "a dead letter's emq-cli job");
}

#[test]
fn a_payload_that_is_not_a_job_is_refused_at_submit_and_0313_forms_still_run() {
    let (_router, addrs) = start_router(&[]);
    let _jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "1"]);
    admin::wait_idle_workers(&addrs.admin, 1, 1, WAIT).expect("the job manager registers");
    let out = sender(&addrs.frontend, &["--wait", r#"{"not": "a job"}"#]);
    assert_eq!(
        out.code(),
        Some(3),
        "refused, not accepted (exit 3): {}",
        out.describe()
    );
    assert!(
        out.stderr
            .contains("rejected by the router: not-a-job: the message is a JSON object, not a job"),
        "{}",
        out.describe()
    );
    // Nothing reached a worker: no bad-job failure, no job at all.
    let v: serde_json::Value =
        serde_json::from_str(cli(&addrs.admin, &["--json", "status"]).stdout.trim()).expect("JSON");
    assert_eq!(v["counters"]["accepted"], 0, "{v}");
    // 0.3.13's payload form, as its client sends it, runs.
    let out = sender(
        &addrs.frontend,
        &[
            "--wait",
            r#"["run", {"path": "emq_test_jobs", "callable": "add", "args": [2, 3], "kwargs": {}, "class_args": [], "class_kwargs": {}}]"#,
        ],
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    assert!(out.stdout.contains('5'), "{}", out.describe());
}
