//! `--log-format json` (issue 31): a real router, job manager and
//! pub/sub process writing JSON logs — every stderr line is one JSON
//! object with time, level, target and message, and the lines about a job
//! carry its msgid (and queue or slot) as fields. Each binary gets the
//! format through another layer of the settings: the router by its flag,
//! the job manager by its INI file, emq-pubsub by `EVENTMQ_LOG_FORMAT`.
//! The tools that talk to a person (emq-sender, emq-cli, emq-receiver)
//! write every stderr line as such an object too.

use std::time::Duration;

use integration_tests::bins::{self, SENDER};
use integration_tests::cluster::{
    jobmanager_command, router_command, wait_router_ready, ROUTER_READY,
};
use integration_tests::process::{run, scratch_dir};
use integration_tests::pubsub::start_pubsub;
use integration_tests::{admin, Addrs, Proc, Spawn};
use serde_json::Value;

/// Every line of `stderr` as a JSON object with the four fixed keys;
/// panics naming the first line that is not.
fn json_lines(name: &str, stderr: &str) -> Vec<serde_json::Map<String, Value>> {
    stderr
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{name}: a stderr line is not JSON ({e}): {line:?}"));
            let Value::Object(obj) = v else {
                panic!("{name}: a stderr line is not a JSON object: {line:?}");
            };
            for key in ["time", "level", "target", "message"] {
                assert!(
                    obj.get(key).is_some_and(Value::is_string),
                    "{name}: no string {key:?} in {line:?}"
                );
            }
            obj
        })
        .collect()
}

/// The lines whose `msgid` field is `msgid`.
fn lines_of<'a>(
    lines: &'a [serde_json::Map<String, Value>],
    msgid: &str,
) -> Vec<&'a serde_json::Map<String, Value>> {
    lines
        .iter()
        .filter(|l| l.get("msgid").and_then(Value::as_str) == Some(msgid))
        .collect()
}

fn stop(p: &mut Proc) {
    p.terminate();
    assert!(
        p.wait_exit(Duration::from_secs(20)).is_some(),
        "{} did not stop on SIGTERM",
        p.name
    );
}

#[test]
fn router_and_job_manager_write_one_json_object_per_line_with_the_jobs_msgid() {
    let addrs = Addrs::fresh();
    let journal = scratch_dir("json-logs").join("router.journal");
    let journal = journal.display().to_string();
    let mut router = router_command(
        "emq-router",
        &addrs,
        &["--journal", &journal, "--log-format", "json"],
    )
    .env("RUST_LOG", "info,emq_router_core=debug")
    .spawn();
    wait_router_ready(&mut router, &addrs, ROUTER_READY).expect("router ready");

    // The job manager's format comes from its config file.
    let conf = scratch_dir("json-logs-conf").join("eventmq.conf");
    std::fs::write(&conf, "[jobmanager]\nlog_format = json\n").unwrap();
    let mut jm = jobmanager_command("emq-jobmanager", &addrs.backend, &["--concurrency", "1"])
        .env("EVENTMQ_CONFIG_FILE", &conf)
        .env("RUST_LOG", "info,emq_jobmanager=debug")
        .spawn();
    admin::wait_idle_workers(&addrs.admin, 1, 1, Duration::from_secs(20))
        .expect("job manager registers");

    let out = run(
        Spawn::new("emq-sender", bins::bin(SENDER)).args([
            "--broker",
            &addrs.frontend,
            "--queue",
            "logs",
            "--call",
            "echo",
            "--args",
            "[1]",
        ]),
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    let msgid = out.stdout.trim().to_string();
    assert_eq!(msgid.len(), 36, "a uuid4 msgid: {msgid:?}");
    // The job's last lines: done in the job manager, completed in the router.
    jm.wait_for_log_line(&format!("job {msgid} finished ok"), Duration::from_secs(20))
        .unwrap();
    router
        .wait_for_log_line(&format!("job {msgid} completed"), Duration::from_secs(20))
        .unwrap();
    stop(&mut jm);
    stop(&mut router);

    let router_lines = json_lines("emq-router", &router.stderr());
    let jm_lines = json_lines("emq-jobmanager", &jm.stderr());
    assert!(router_lines.len() >= 3 && jm_lines.len() >= 3);

    let routed = lines_of(&router_lines, &msgid);
    let dispatched = routed
        .iter()
        .find(|l| l["message"].as_str().unwrap().contains("dispatched"))
        .unwrap_or_else(|| panic!("no dispatch line for {msgid}: {routed:?}"));
    assert_eq!(dispatched["queue"], "logs", "{dispatched:?}");
    assert_eq!(dispatched["attempt"], 1, "a number stays a number");
    assert!(dispatched["worker"].is_string(), "{dispatched:?}");
    assert_eq!(dispatched["level"], "DEBUG");
    assert!(dispatched["target"]
        .as_str()
        .unwrap()
        .starts_with("emq_router_core"));
    assert!(routed
        .iter()
        .any(|l| l["message"].as_str().unwrap().contains("completed")));

    let ran = lines_of(&jm_lines, &msgid);
    assert!(
        ran.iter()
            .any(|l| l.get("queue") == Some(&Value::from("logs"))),
        "the job's start line carries its queue: {ran:?}"
    );
    assert!(
        ran.iter()
            .any(|l| l["message"].as_str().unwrap().contains("finished ok")),
        "{ran:?}"
    );
    // Time is RFC 3339 UTC.
    let t = router_lines[0]["time"].as_str().unwrap();
    assert!(t.len() >= 20 && t.ends_with('Z') && t.contains('T'), "{t}");
}

#[test]
fn pubsub_writes_json_from_the_environment_and_text_stays_the_default() {
    let (mut ps, _) = start_pubsub(&[]);
    let text = ps.stderr();
    assert!(
        text.lines().any(|l| l.starts_with('[')),
        "text by default: {text}"
    );
    assert!(serde_json::from_str::<Value>(text.lines().next().unwrap()).is_err());
    stop(&mut ps);

    let (mut ps, _) = start_pubsub_json();
    stop(&mut ps);
    let lines = json_lines("emq-pubsub", &ps.stderr());
    assert!(
        lines.iter().any(|l| l["message"]
            .as_str()
            .unwrap()
            .contains("listening for PUBLISH")),
        "{lines:?}"
    );
}

/// `emq-pubsub` with `EVENTMQ_LOG_FORMAT=json`, ready once it logs that it
/// listens.
fn start_pubsub_json() -> (Proc, integration_tests::pubsub::PubsubAddrs) {
    let addrs = integration_tests::pubsub::PubsubAddrs::fresh();
    let mut p = Spawn::new("emq-pubsub", bins::bin(bins::PUBSUB))
        .args(["--incoming", &addrs.incoming, "--outgoing", &addrs.outgoing])
        .env("EVENTMQ_LOG_FORMAT", "json")
        .spawn();
    p.wait_for_log_line("listening for PUBLISH on", Duration::from_secs(20))
        .expect("emq-pubsub listens");
    (p, addrs)
}

/// Run a tool that must fail (nothing listens where it goes) and read
/// its stderr as JSON lines.
fn failing_json_run(spawn: Spawn) -> (String, Vec<serde_json::Map<String, Value>>) {
    let out = run(spawn, Duration::from_secs(30));
    assert_ne!(out.code(), Some(0), "{}", out.describe());
    let lines = json_lines(&out.describe(), &out.stderr);
    (out.describe(), lines)
}

/// Whether a line's message contains `text`.
fn says(lines: &[serde_json::Map<String, Value>], text: &str) -> bool {
    lines
        .iter()
        .any(|l| l["message"].as_str().unwrap().contains(text))
}

#[test]
fn the_tools_that_talk_to_a_person_write_every_stderr_line_as_json_too() {
    // Nothing listens at these addresses: each tool fails and says so.
    let addrs = Addrs::fresh();
    let conf = scratch_dir("json-logs-tools").join("eventmq.conf");
    // A typo in the file: a warning line, then the failure.
    std::fs::write(&conf, "[sender]\nlog_format = json\nHTTP_ADR = x\n").unwrap();
    let (described, lines) = failing_json_run(
        Spawn::new("emq-sender", bins::bin(SENDER))
            .env("EVENTMQ_CONFIG_FILE", &conf)
            .args([
                "--broker",
                &addrs.frontend,
                "--timeout",
                "1",
                "--call",
                "echo",
            ]),
    );
    assert!(lines.len() >= 2, "{described}");
    assert!(
        lines.iter().all(|l| l["target"] == "emq_sender"),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["level"] == "WARN" && l["message"].as_str().unwrap().contains("HTTP_ADR")),
        "{lines:?}"
    );

    let cli_status = |json: bool| {
        let mut args = vec!["--admin", addrs.admin.as_str(), "--timeout", "1", "status"];
        if json {
            args.splice(0..0, ["--log-format", "json"]);
        }
        Spawn::new("emq-cli", bins::bin("emq-cli")).args(args)
    };
    let (_, lines) = failing_json_run(cli_status(true));
    assert!(says(&lines, "no answer"), "{lines:?}");

    let (_, lines) =
        failing_json_run(Spawn::new("emq-receiver", bins::bin("emq-receiver")).args([
            "--log-format",
            "json",
            "--bind",
            "tcp://300.0.0.1:1",
            "--count",
            "1",
        ]));
    assert!(says(&lines, "cannot bind"), "{lines:?}");

    // Text stays the default.
    let text = run(cli_status(false), Duration::from_secs(30));
    assert!(text.stderr.starts_with("emq-cli: "), "{}", text.describe());
}
