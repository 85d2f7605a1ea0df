//! OpenTelemetry traces (issue 31): a real router (`--otlp-endpoint`), a
//! job manager (`OTEL_EXPORTER_OTLP_ENDPOINT`), a Python job that starts a
//! span of its own and a Python client that submits inside a span, all
//! exporting to one OTLP/HTTP receiver the test starts
//! (`tests/python/otlp_receiver.py`, decoding with the `opentelemetry-proto`
//! package). The spans it receives must form one trace:
//!
//! ```text
//! client-request   (emq-test-client)
//! └ emq.queue_wait (emq-router: queue, msgid, attempt)
//!   └ emq.run      (emq-jobmanager: kind, outcome, duration)
//!     └ job-work   (emq-test-job, the job's own code)
//! ```
//!
//! A job sent without a `traceparent` (emq-sender) starts its trace at the
//! router.

use std::path::Path;
use std::time::{Duration, Instant};

use integration_tests::bins::{self, SENDER};
use integration_tests::cluster::{jobmanager_command, start_router_on};
use integration_tests::process::{run, scratch_dir};
use integration_tests::python::{pythonpath, tests_python_dir, venv};
use integration_tests::{admin, Addrs, Proc, Spawn};
use serde_json::Value;

const TEST: &str = "otel_traces";

/// The spans the receiver wrote so far, one JSON object each.
fn spans(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("span line {l:?}: {e}")))
        .collect()
}

/// Wait (bounded) until the receiver has a span named `name` in trace
/// `trace_id` (any trace when `None`) that `matches`.
fn wait_span(
    file: &Path,
    name: &str,
    matches: impl Fn(&Value) -> bool,
    timeout: Duration,
) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = spans(file)
            .into_iter()
            .find(|s| s["name"] == name && matches(s))
        {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "no span {name:?} within {timeout:?}; received: {:#?}",
            spans(file)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
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
fn spans_of_one_job_nest_from_the_client_through_router_and_job_manager_into_the_job() {
    let Some(py) = venv(TEST) else { return };
    if !py.require_module(
        TEST,
        "opentelemetry.proto.collector.trace.v1.trace_service_pb2",
    ) || !py.require_module(
        TEST,
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    ) {
        return;
    }
    let dir = scratch_dir("otel-traces");
    let spans_file = dir.join("spans.jsonl");
    let mut receiver = Spawn::new("otlp-receiver", py.python())
        .arg(tests_python_dir().join("otlp_receiver.py"))
        .arg(&spans_file)
        .spawn();
    let line = receiver
        .wait_for_log_line("listening on", Duration::from_secs(20))
        .expect("OTLP receiver listens");
    let port: u16 = line.trim().rsplit(' ').next().unwrap().parse().unwrap();
    let endpoint = format!("http://127.0.0.1:{port}");

    let addrs = Addrs::fresh();
    // The router by its flag; spans leave in batches every 100 ms.
    std::env::set_var("OTEL_BSP_SCHEDULE_DELAY", "100");
    let mut router = start_router_on(&addrs, &["--otlp-endpoint", &endpoint]).expect("router");
    // The job manager by the standard environment.
    let mut jm = jobmanager_command("emq-jobmanager", &addrs.backend, &["--concurrency", "1"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .spawn();
    admin::wait_idle_workers(&addrs.admin, 1, 1, Duration::from_secs(20))
        .expect("job manager registers");

    // 1. A client inside a span of its own.
    let out = run(
        Spawn::new("otel-client", py.python())
            .arg(tests_python_dir().join("emq_test_otel.py"))
            .arg(&addrs.frontend)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .env("PYTHONPATH", pythonpath()),
        Duration::from_secs(60),
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    let answer: Value = serde_json::from_str(out.stdout.trim()).expect("client prints JSON");
    let trace_id = answer["trace_id"].as_str().unwrap().to_string();
    let msgid = answer["msgid"].as_str().unwrap().to_string();
    // emq_job.current() in the job: its msgid and queue.
    assert_eq!(answer["result"]["job"]["msgid"], msgid.as_str());
    assert_eq!(answer["result"]["job"]["queue"], "traced");

    let t = Duration::from_secs(20);
    let in_trace = |s: &Value| s["trace_id"] == trace_id.as_str();
    let client = wait_span(&spans_file, "client-request", in_trace, t);
    let wait = wait_span(&spans_file, "emq.queue_wait", in_trace, t);
    let run_span = wait_span(&spans_file, "emq.run", in_trace, t);
    let work = wait_span(&spans_file, "job-work", in_trace, t);

    assert_eq!(
        client["parent_span_id"], "",
        "the client's span is the root"
    );
    assert_eq!(wait["parent_span_id"], client["span_id"]);
    assert_eq!(run_span["parent_span_id"], wait["span_id"]);
    assert_eq!(work["parent_span_id"], run_span["span_id"]);

    assert_eq!(wait["service"], "emq-router");
    assert_eq!(wait["attributes"]["emq.queue"], "traced");
    assert_eq!(wait["attributes"]["emq.msgid"], msgid.as_str());
    assert_eq!(wait["attributes"]["emq.attempt"], 1);
    assert!(wait["end"].as_u64() >= wait["start"].as_u64());

    assert_eq!(run_span["service"], "emq-jobmanager");
    assert_eq!(run_span["attributes"]["emq.job.kind"], "run");
    assert_eq!(run_span["attributes"]["emq.outcome"], "ok");
    assert_eq!(run_span["attributes"]["emq.msgid"], msgid.as_str());
    assert!(run_span["attributes"]["emq.duration_ms"].as_f64().unwrap() > 0.0);
    // The run contains the job's own work.
    assert!(run_span["start"].as_u64() <= work["start"].as_u64());
    assert_eq!(work["service"], "emq-test-job");
    assert_eq!(work["attributes"]["emq.msgid"], msgid.as_str());
    eprintln!("the trace of job {msgid}:");
    for s in [&client, &wait, &run_span, &work] {
        eprintln!(
            "  {} ({}) span {} parent {:?} {}",
            s["name"], s["service"], s["span_id"], s["parent_span_id"], s["attributes"]
        );
    }

    // 2. No traceparent (emq-sender): the router starts the trace, the
    //    run is its child, and a failed job's run says why.
    let out = run(
        Spawn::new("emq-sender", bins::bin(SENDER)).args([
            "--broker",
            &addrs.frontend,
            "--queue",
            "plain",
            "--call",
            "no-such-handler",
        ]),
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    let plain = out.stdout.trim().to_string();
    let of_plain = |s: &Value| s["attributes"]["emq.msgid"] == plain.as_str();
    let wait = wait_span(&spans_file, "emq.queue_wait", of_plain, t);
    assert_eq!(wait["parent_span_id"], "", "the router's span is the root");
    assert_eq!(wait["attributes"]["emq.queue"], "plain");
    let run_span = wait_span(&spans_file, "emq.run", of_plain, t);
    assert_eq!(run_span["trace_id"], wait["trace_id"]);
    assert_eq!(run_span["parent_span_id"], wait["span_id"]);
    assert_eq!(run_span["attributes"]["emq.job.kind"], "call");
    assert_eq!(run_span["attributes"]["emq.outcome"], "unknown-handler");
    assert_eq!(run_span["status"], 2, "status ERROR");

    stop(&mut jm);
    stop(&mut router);
    stop(&mut receiver);
}
