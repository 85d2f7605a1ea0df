//! What an operator types (issue 32): msgids by their unique beginning,
//! as git takes a commit's, and `emq-cli requeue` for a failed or
//! cancelled job — against a real router and job manager.

use std::time::Duration;

use integration_tests::bins::{self, SENDER};
use integration_tests::cluster::{start_jobmanager, start_router};
use integration_tests::process::run;
use integration_tests::{admin, Spawn};

const RUN_LIMIT: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(20);

fn cli(admin_addr: &str, args: &[&str]) -> integration_tests::RunOutput {
    run(
        Spawn::new("emq-cli", bins::bin("emq-cli"))
            .args(["--admin", admin_addr])
            .args(args),
        RUN_LIMIT,
    )
}

/// Run a job that fails (no retries) to its end; its msgid.
fn failed_job(frontend: &str) -> String {
    let out = run(
        Spawn::new(SENDER, bins::bin(SENDER)).args([
            "--broker",
            frontend,
            "--wait",
            "--python",
            "emq_test_jobs.fail",
            "--args",
            "[\"once\"]",
        ]),
        RUN_LIMIT,
    );
    assert_eq!(out.code(), Some(4), "{}", out.describe());
    out.stderr
        .lines()
        .find_map(|l| l.strip_prefix("emq-sender: job "))
        .and_then(|l| l.strip_suffix(" failed:"))
        .expect("the failure line names the job")
        .to_string()
}

#[test]
fn a_failed_job_is_requeued_by_a_unique_prefix_of_its_msgid_and_runs_again() {
    let (_router, addrs) = start_router(&[]);
    let _jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["--concurrency", "1"]);
    admin::wait_idle_workers(&addrs.admin, 1, 1, WAIT).expect("the job manager registers");
    let msgid = failed_job(&addrs.frontend);
    let prefix = &msgid[..8];

    // `job` by its prefix: the failed job's view.
    let out = cli(&addrs.admin, &["job", prefix]);
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    assert!(
        out.stdout.contains("msgid:") && out.stdout.contains(&msgid),
        "{}",
        out.describe()
    );
    assert!(out.stdout.contains("failed"), "{}", out.describe());

    // requeue by its prefix: queued again under its msgid, and it runs
    // (and fails) a second time.
    let out = cli(&addrs.admin, &["requeue", prefix]);
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    assert!(
        out.stdout
            .starts_with(&format!("{msgid}: queued again (was failed)")),
        "{}",
        out.describe()
    );
    let runs_twice = integration_tests::poll_until(WAIT, Duration::from_millis(200), || {
        let v: serde_json::Value =
            serde_json::from_str(cli(&addrs.admin, &["--json", "job", &msgid]).stdout.trim())
                .ok()?;
        (v["job"]["state"] == "failed").then_some(())?;
        let s: serde_json::Value =
            serde_json::from_str(cli(&addrs.admin, &["--json", "status"]).stdout.trim()).ok()?;
        (s["counters"]["failed"] == 2).then_some(())
    });
    assert!(runs_twice.is_some(), "the requeued job did not run again");

    // A job that finished ok is not requeued.
    let out = run(
        Spawn::new(SENDER, bins::bin(SENDER)).args([
            "--broker",
            &addrs.frontend,
            "--wait",
            "--call",
            "echo",
            "--args",
            "[1]",
        ]),
        RUN_LIMIT,
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    let v: serde_json::Value = serde_json::from_str(
        cli(&addrs.admin, &["--json", "jobs", "--state", "done"])
            .stdout
            .trim(),
    )
    .expect("JSON");
    let done = v["jobs"][0]["msgid"]
        .as_str()
        .expect("a done job")
        .to_string();
    let out = cli(&addrs.admin, &["requeue", &done]);
    assert_ne!(out.code(), Some(0), "{}", out.describe());
    assert!(
        out.stderr.contains("conflict") && out.stderr.contains("finished ok"),
        "{}",
        out.describe()
    );
}

#[test]
fn an_ambiguous_msgid_prefix_is_refused_with_the_candidates() {
    let (_router, addrs) = start_router(&[]);
    // Two jobs with msgids of our choosing, held (no worker).
    let mut client = integration_tests::Client::connect(&addrs.frontend);
    for id in ["cafe0001-aaaa", "cafe0002-bbbb"] {
        let m = emqp_proto::Message::with_msgid(
            id,
            emqp_proto::Command::Request(emqp_proto::Request {
                queue: "default".into(),
                headers: emqp_proto::Headers::default(),
                message: br#"["call", {"handler": "noop"}]"#.to_vec(),
            }),
        );
        client.send_frames(m.encode());
    }
    assert!(
        client.wait_for(WAIT, |c| c.acks.len() == 2),
        "acks {:?}, rejects {:?}",
        client.acks,
        client.rejects
    );
    let out = cli(&addrs.admin, &["job", "cafe"]);
    assert_ne!(out.code(), Some(0), "{}", out.describe());
    assert!(
        out.stderr.contains(
            "msgid prefix cafe is ambiguous: 2 jobs begin with it: cafe0001-aaaa, cafe0002-bbbb"
        ),
        "{}",
        out.describe()
    );
    let out = cli(&addrs.admin, &["cancel", "cafe0002"]);
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    assert!(
        out.stdout.starts_with("cafe0002-bbbb: cancelled"),
        "{}",
        out.describe()
    );
}
