//! Smoke test of the real binary: free loopback ports, a fake DEALER worker
//! and client, the forwarded frames, the ack, the RESULT, admin STATUS, and
//! a clean exit on SIGTERM / admin DISCONNECT. Bounded in time; the router
//! is stopped when a test ends, however it ends (emq-testkit's `Proc`).

mod common;

use std::time::Duration;

use common::{router, start, Router};
use emq_testkit::fake::{frames, inform_with_features, request, FakeDealer};
use emq_testkit::process::{run_to_exit, scratch_dir};
use emqp_proto::{Command, Headers, Interval, PeerType, Reply, ResultStatus, Schedule};

/// The router with a 0.5 s heartbeat, plus `extra`, started.
fn start_router_with(extra: &[&str]) -> Router {
    start(router(extra).args(["--heartbeat-interval", "0.5"]))
}

fn start_router() -> Router {
    start_router_with(&[])
}

/// Within how long a router must exit after SIGTERM or DISCONNECT.
const EXIT: Duration = Duration::from_secs(10);

/// A worker's INFORM for `10:default` with the `job-ack` feature.
fn inform(w: &FakeDealer, msgid: &str) {
    w.send_as(
        msgid,
        inform_with_features("10:default", PeerType::Worker, &["job-ack"]),
    );
}

/// A worker: connected, INFORMed, ACKed.
fn worker(r: &Router, id: &[u8], msgid: &str) -> FakeDealer {
    let w = FakeDealer::connect(&r.backend, id);
    inform(&w, msgid);
    let ack = w.expect_raw("ACK");
    assert_eq!(ack[2], b"ACK");
    assert_eq!(ack[4], msgid.as_bytes());
    w
}

#[test]
fn job_round_trip_through_the_real_router_then_sigterm() {
    let mut r = start_router();
    let worker = worker(&r, b"smoke-worker", "inform-1");
    worker.send_as("ready-1", Command::Ready);

    let client = FakeDealer::connect(&r.frontend, b"smoke-client");
    let body = r#"["call", {"handler": "echo", "args": [1, 2]}]"#;
    let request = frames(&[
        "",
        "eMQP/1.0",
        "REQUEST",
        "smoke-job-1",
        "default",
        "reply-requested",
        body,
    ]);
    client.send_frames(request.clone());

    let forwarded = worker.expect_raw("forwarded REQUEST");
    assert_eq!(
        forwarded, request,
        "the worker gets the client's frames unchanged"
    );
    let ack = client.expect_raw("REPLY ack");
    assert_eq!(ack[2], b"REPLY");
    assert_eq!(ack[4], b"smoke-job-1");
    assert_eq!(ack.len(), 5);

    let payload = r#"{"value": [1, 2]}"#;
    worker.send_as(
        "rep-1",
        Command::Reply(Reply::result(
            payload.into(),
            "smoke-job-1".into(),
            ResultStatus::Ok,
        )),
    );
    worker.send_as("ready-2", Command::Ready);
    let result = client.expect_raw("RESULT");
    assert_eq!(result[..3], frames(&["", "eMQP/1.0", "RESULT"])[..]);
    assert_eq!(result[4..], frames(&["smoke-job-1", "ok", payload])[..]);

    let v = admin_json(&r, Command::Status);
    assert_eq!(v["processed_messages_by_queue"]["default"], 1, "{v}");
    assert_eq!(v["processed_messages_by_worker"]["smoke-worker"], 1, "{v}");

    // SIGTERM → KBYE to the worker, exit 0.
    r.proc.terminate();
    let kbye = worker.expect_raw("KBYE");
    assert_eq!(kbye[2], b"KBYE");
    let st = r.proc.wait_exit(EXIT).expect("router did not exit in time");
    assert!(st.success(), "exit status {st:?}");
}

#[test]
fn admin_disconnect_stops_the_router() {
    let mut r = start_router();
    // A REQUEST with no worker: buffered and acknowledged.
    request_is_acked(&r, b"c2", "j2");
    let admin = FakeDealer::connect(&r.admin, b"adm");
    admin.send_as("admin:d", Command::Disconnect);
    let ack = admin.expect_raw("DISCONNECT ack");
    assert_eq!(ack[2], b"ACK");
    assert_eq!(ack[4], b"admin:d");
    let st = r.proc.wait_exit(EXIT).expect("router did not exit in time");
    assert!(st.success(), "exit status {st:?}");
    // The buffered job is reported as lost (no journal).
    let log = r.proc.stderr();
    assert!(
        log.lines().any(|l| l.contains("1 buffered")),
        "the exit log names the buffered job:\n{log}"
    );
}

#[test]
fn journaled_jobs_survive_a_restart() {
    let dir = scratch_dir("journal");
    let path = dir.join("journal.sqlite");
    let path = path.to_str().unwrap();
    let body = r#"["call", {"handler": "noop"}]"#;
    {
        let mut r = start_router_with(&["--journal", path]);
        let client = FakeDealer::connect(&r.frontend, b"c3");
        client.send_as("kept-1", request("mail", "x-h", body));
        assert_eq!(client.expect_raw("ack")[4], b"kept-1");
        r.proc.terminate();
        let st = r.proc.wait_exit(EXIT).expect("router did not exit in time");
        assert!(st.success(), "exit status {st:?}");
    }
    let r = start_router_with(&["--journal", path]);
    let worker = FakeDealer::connect(&r.backend, b"w3");
    // An empty queue frame: the router's default queues.
    worker.send_as(
        "i3",
        inform_with_features("", PeerType::Worker, &["job-ack"]),
    );
    assert_eq!(worker.expect_raw("ACK")[2], b"ACK");
    worker.send_as("r3", Command::Ready);
    let job = worker.expect_raw("the journaled job");
    assert_eq!(
        job,
        frames(&["", "eMQP/1.0", "REQUEST", "kept-1", "mail", "x-h", body])
    );
}

/// Run the router to its exit (it must exit by itself within 20 s);
/// returns the exit code and stderr.
fn router_exit(args: &[&str]) -> (Option<i32>, String) {
    let out = run_to_exit(router(args), Duration::from_secs(20));
    (out.code(), out.stderr)
}

#[test]
fn corrupt_journal_is_a_clear_error_with_exit_code_2() {
    let dir = scratch_dir("corrupt");
    let path = dir.join("journal.sqlite");
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    let (code, err) = router_exit(&["--journal", path.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("journal") && err.contains(path.to_str().unwrap()),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn locked_journal_is_a_clear_error_with_exit_code_2() {
    let dir = scratch_dir("locked");
    let path = dir.join("journal.sqlite");
    let p = path.to_str().unwrap();
    let _first = start_router_with(&["--journal", p]);
    let (code, err) = router_exit(&["--journal", p]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(p) && !err.contains("panicked"), "{err}");
}

/// `cmd` on the admin socket: its REPLY, as JSON.
fn admin_json(r: &Router, cmd: Command) -> serde_json::Value {
    let admin = FakeDealer::connect(&r.admin, b"smoke-admin-q");
    let name = cmd.name();
    admin.send_as("admin:q", cmd);
    let reply = admin.expect_raw(name);
    assert_eq!(reply[2], b"REPLY");
    serde_json::from_slice(&reply[4]).unwrap()
}

/// A client REQUEST on `r` is acknowledged.
fn request_is_acked(r: &Router, client: &[u8], msgid: &str) {
    let c = FakeDealer::connect(&r.frontend, client);
    c.send_as(msgid, request("default", "", "[]"));
    let ack = c.expect_raw("REQUEST ack");
    assert_eq!(ack[2], b"REPLY");
    assert_eq!(ack[4], msgid.as_bytes());
}

/// The line after the three endpoints: `listening: metrics http://ADDR/metrics`.
fn metrics_addr(r: &mut Router) -> String {
    let url = common::listening(&mut r.proc, "metrics");
    let rest = url.strip_prefix("http://").expect("an http:// address");
    rest.split('/').next().unwrap().to_string()
}

fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

#[test]
fn metrics_endpoint_counts_a_processed_job_and_its_latency() {
    let mut r = start_router_with(&["--metrics", "127.0.0.1:0"]);
    let addr = metrics_addr(&mut r);
    let worker = worker(&r, b"m-worker", "i-m");
    worker.send_as("r-m", Command::Ready);
    request_is_acked(&r, b"m-client", "m-job-1");
    let job = worker.expect_raw("the job");
    assert_eq!(job[3], b"m-job-1");
    worker.send_as(
        "rep",
        Command::Reply(Reply::result(
            b"{}".to_vec(),
            "m-job-1".into(),
            ResultStatus::Ok,
        )),
    );
    let mut last = String::new();
    let resp = emq_testkit::poll_until(Duration::from_secs(10), Duration::from_millis(100), || {
        last = http_get(&addr, "/metrics");
        assert!(last.starts_with("HTTP/1.1 200"), "{last}");
        last.contains(r#"emq_jobs_processed_total{queue="default"} 1"#)
            .then(|| last.clone())
    })
    .unwrap_or_else(|| panic!("processed counter never 1:\n{last}"));
    assert!(
        resp.contains(r#"emq_job_latency_seconds_count{queue="default"} 1"#),
        "{resp}"
    );
    assert!(resp.contains("emq_connected_workers 1"), "{resp}");
    assert!(
        resp.contains(r#"emq_queue_depth{queue="default"} 0"#),
        "{resp}"
    );
    assert!(http_get(&addr, "/nope").starts_with("HTTP/1.1 404"));
}

#[test]
fn backend_allowlist_refuses_other_addresses() {
    let r = start_router_with(&["--allow-backend", "127.0.0.2"]);
    let worker = FakeDealer::connect(&r.backend, b"refused-worker");
    inform(&worker, "i-x");
    assert!(worker.gets_nothing(Duration::from_millis(1500)), "no ACK");
    let v = admin_json(&r, Command::RouterShowWorkers);
    assert!(
        v["connected_workers"].as_object().unwrap().is_empty(),
        "{v}"
    );
    // The frontend (any address by default) still works.
    request_is_acked(&r, b"allowed-client", "a-1");
}

#[test]
fn admin_allowlist_refuses_disconnect_from_other_addresses() {
    let mut r = start_router_with(&["--allow-admin", "127.0.0.2"]);
    let admin = FakeDealer::connect(&r.admin, b"refused-admin");
    admin.send_as("admin:d", Command::Disconnect);
    assert!(admin.gets_nothing(Duration::from_millis(1500)), "no ACK");
    assert!(r.proc.is_running(), "router still up");
    request_is_acked(&r, b"still-served", "s-1");
}

#[test]
fn plain_users_require_valid_credentials() {
    let dir = scratch_dir("plain");
    let users = dir.join("users");
    std::fs::write(&users, "# test users\nalice:secret\n").unwrap();
    let r = start_router_with(&["--plain-users", users.to_str().unwrap()]);
    let bad = FakeDealer::connect_plain(&r.backend, b"bad-worker", "alice", "wrong");
    inform(&bad, "i-bad");
    assert!(
        bad.gets_nothing(Duration::from_millis(1500)),
        "nothing routed"
    );
    let anon = FakeDealer::connect(&r.frontend, b"anon-client");
    anon.send_as("anon-1", request("default", "", "[]"));
    assert!(
        anon.gets_nothing(Duration::from_millis(500)),
        "NULL refused"
    );
    let good = FakeDealer::connect_plain(&r.backend, b"good-worker", "alice", "secret");
    inform(&good, "i-good");
    let ack = good.expect_raw("ACK");
    assert_eq!(ack[2], b"ACK");
    assert_eq!(ack[4], b"i-good");
    let v = admin_json(&r, Command::RouterShowWorkers);
    let w = v["connected_workers"].as_object().unwrap();
    assert!(
        w.contains_key("good-worker") && !w.contains_key("bad-worker"),
        "{v}"
    );
}

#[test]
fn oversized_message_is_dropped_and_the_router_keeps_serving() {
    let mut r = start_router_with(&["--max-message-size", "1000"]);
    let big = FakeDealer::connect(&r.frontend, b"big-client");
    big.send_as("big-1", request("default", "", &"x".repeat(5000)));
    assert!(big.gets_nothing(Duration::from_millis(1000)), "no ack");
    assert!(r.proc.is_running(), "router still up");
    request_is_acked(&r, b"small-client", "small-1");
    let v = admin_json(&r, Command::Status);
    assert_eq!(v["counters"]["accepted"], 1, "{v}");
}

#[test]
fn built_in_schedule_runs_and_survives_a_restart() {
    let dir = scratch_dir("sched");
    let path = dir.join("journal.sqlite");
    let p = path.to_str().unwrap();
    let body = r#"["call", {"handler": "noop"}]"#;
    let start_worker = |r: &Router, id: &[u8]| {
        let w = worker(r, id, "i-s");
        for _ in 0..4 {
            w.send_as("r", Command::Ready);
        }
        w
    };
    {
        let mut r = start_router_with(&["--journal", p]);
        let w = start_worker(&r, b"s-worker-1");
        let c = FakeDealer::connect(&r.frontend, b"s-client");
        // Every second, no cron.
        c.send_as(
            "sch-1",
            Command::Schedule(Schedule {
                queue: "default".into(),
                headers: Headers::new(),
                interval: Interval::from_secs(1).unwrap(),
                message: body.as_bytes().to_vec(),
                cron: String::new(),
            }),
        );
        let ack = c.expect_raw("SCHEDULE ack");
        assert_eq!(ack[2], b"REPLY");
        assert_eq!(ack[4], b"sch-1");
        let first = w.expect_raw("first run");
        assert_eq!(first[2], b"REQUEST");
        assert_eq!(first[6], body.as_bytes());
        let second = w.expect_raw("second run");
        assert_ne!(first[3], second[3], "each run has its own msgid");
        let v = admin_json(&r, Command::RouterShowSchedulers);
        assert_eq!(v["schedules"].as_array().unwrap().len(), 1, "{v}");
        r.proc.terminate();
        let st = r.proc.wait_exit(EXIT).expect("router did not exit in time");
        assert!(st.success(), "exit status {st:?}");
    }
    let r = start_router_with(&["--journal", p]);
    let v = admin_json(&r, Command::RouterShowSchedulers);
    assert_eq!(v["schedules"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["schedules"][0]["interval_secs"], 1);
    let w = start_worker(&r, b"s-worker-2");
    let job = w.expect_raw("a run after the restart");
    assert_eq!(job[6], body.as_bytes());
}
