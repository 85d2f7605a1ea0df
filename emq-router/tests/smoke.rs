//! Smoke test of the real binary: free loopback ports, a fake DEALER worker
//! and client, the forwarded frames, the ack, the RESULT, admin STATUS, and
//! a clean exit on SIGTERM / admin DISCONNECT. Bounded in time; the router
//! is killed in Drop if anything fails.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use emq_transport::{connect_dealer, SocketOptions};

struct Router {
    child: Child,
    frontend: String,
    backend: String,
    admin: String,
    log: mpsc::Receiver<String>,
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_router() -> Router {
    start_router_with(&["--journal", "none"])
}

/// Every router started here gets an explicit `--journal` (`none` unless
/// `extra` names one), so parallel tests never share the default file.
fn start_router_with(extra: &[&str]) -> Router {
    let journal: &[&str] = if extra.contains(&"--journal") {
        &[]
    } else {
        &["--journal", "none"]
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_emq-router"))
        .args([
            "--frontend",
            "tcp://127.0.0.1:*",
            "--backend",
            "tcp://127.0.0.1:*",
            "--admin",
            "tcp://127.0.0.1:*",
            "--heartbeat-interval",
            "0.5",
        ])
        .args(journal)
        .args(extra)
        .env("RUST_LOG", "info")
        .env("EVENTMQ_CONFIG_FILE", "")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start emq-router");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("router: {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut r = Router {
        child,
        frontend: String::new(),
        backend: String::new(),
        admin: String::new(),
        log: rx,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while r.frontend.is_empty() || r.backend.is_empty() || r.admin.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = r
            .log
            .recv_timeout(left)
            .expect("router did not log its three listening endpoints in time");
        let Some(rest) = line.split("listening: ").nth(1) else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let (Some(which), Some(ep)) = (words.next(), words.next()) else {
            continue;
        };
        match which {
            "frontend" => r.frontend = ep.to_string(),
            "backend" => r.backend = ep.to_string(),
            "admin" => r.admin = ep.to_string(),
            _ => {}
        }
    }
    r
}

fn wait_exit(r: &mut Router, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(st) = r.child.try_wait().unwrap() {
            return st;
        }
        assert!(Instant::now() < deadline, "router did not exit in time");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn frames(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// Next message on `sock` whose command frame is not HEARTBEAT.
fn recv_non_hb(sock: &zmq::Socket, what: &str) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "timed out waiting for {what}");
        if sock.poll(zmq::POLLIN, left.as_millis() as i64).unwrap() == 0 {
            continue;
        }
        let f = sock.recv_multipart(0).unwrap();
        if f.get(2).map(Vec::as_slice) != Some(b"HEARTBEAT") {
            return f;
        }
    }
}

#[test]
fn job_round_trip_through_the_real_router_then_sigterm() {
    let mut r = start_router();
    let ctx = zmq::Context::new();
    let opts = SocketOptions {
        linger_ms: 0,
        ..SocketOptions::default()
    };
    let worker = connect_dealer(&ctx, &r.backend, b"smoke-worker", &opts).unwrap();
    worker
        .send_multipart(
            frames(&[
                "",
                "eMQP/1.0",
                "INFORM",
                "inform-1",
                r#"[[10, "default"]]"#,
                "worker",
                "job-ack",
            ]),
            0,
        )
        .unwrap();
    let ack = recv_non_hb(&worker, "ACK");
    assert_eq!(ack[2], b"ACK");
    assert_eq!(ack[4], b"inform-1");
    worker
        .send_multipart(frames(&["", "eMQP/1.0", "READY", "ready-1"]), 0)
        .unwrap();

    let client = connect_dealer(&ctx, &r.frontend, b"smoke-client", &opts).unwrap();
    let request = frames(&[
        "",
        "eMQP/1.0",
        "REQUEST",
        "smoke-job-1",
        "default",
        "reply-requested",
        r#"["call", {"handler": "echo", "args": [1, 2]}]"#,
    ]);
    client.send_multipart(request.clone(), 0).unwrap();

    let forwarded = recv_non_hb(&worker, "forwarded REQUEST");
    assert_eq!(
        forwarded, request,
        "the worker gets the client's frames unchanged"
    );
    let ack = recv_non_hb(&client, "REPLY ack");
    assert_eq!(ack[2], b"REPLY");
    assert_eq!(ack[4], b"smoke-job-1");
    assert_eq!(ack.len(), 5);

    worker
        .send_multipart(
            frames(&[
                "",
                "eMQP/1.0",
                "REPLY",
                "rep-1",
                r#"{"value": [1, 2]}"#,
                "smoke-job-1",
                "ok",
            ]),
            0,
        )
        .unwrap();
    worker
        .send_multipart(frames(&["", "eMQP/1.0", "READY", "ready-2"]), 0)
        .unwrap();
    let result = recv_non_hb(&client, "RESULT");
    assert_eq!(result[..3], frames(&["", "eMQP/1.0", "RESULT"])[..]);
    assert_eq!(
        result[4..],
        frames(&["smoke-job-1", "ok", r#"{"value": [1, 2]}"#])[..]
    );

    let admin = connect_dealer(&ctx, &r.admin, b"smoke-admin", &opts).unwrap();
    admin
        .send_multipart(frames(&["", "eMQP/1.0", "STATUS", "admin:1"]), 0)
        .unwrap();
    let status = recv_non_hb(&admin, "STATUS reply");
    assert_eq!(status[2], b"REPLY");
    let v: serde_json::Value = serde_json::from_slice(&status[4]).unwrap();
    assert_eq!(v["processed_messages_by_queue"]["default"], 1, "{v}");
    assert_eq!(v["processed_messages_by_worker"]["smoke-worker"], 1, "{v}");

    // SIGTERM → KBYE to the worker, exit 0.
    let pid = r.child.id().to_string();
    let st = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(st.success());
    let kbye = recv_non_hb(&worker, "KBYE");
    assert_eq!(kbye[2], b"KBYE");
    let st = wait_exit(&mut r, Duration::from_secs(10));
    assert!(st.success(), "exit status {st:?}");
}

#[test]
fn admin_disconnect_stops_the_router() {
    let mut r = start_router();
    let ctx = zmq::Context::new();
    let opts = SocketOptions {
        linger_ms: 0,
        ..SocketOptions::default()
    };
    // A REQUEST with no worker: buffered and acknowledged.
    let client = connect_dealer(&ctx, &r.frontend, b"c2", &opts).unwrap();
    client
        .send_multipart(
            frames(&["", "eMQP/1.0", "REQUEST", "j2", "default", "", "[]"]),
            0,
        )
        .unwrap();
    let ack = recv_non_hb(&client, "ack of a buffered job");
    assert_eq!(ack[4], b"j2");
    let admin = connect_dealer(&ctx, &r.admin, b"adm", &opts).unwrap();
    admin
        .send_multipart(frames(&["", "eMQP/1.0", "DISCONNECT", "admin:d"]), 0)
        .unwrap();
    let ack = recv_non_hb(&admin, "DISCONNECT ack");
    assert_eq!(ack[2], b"ACK");
    assert_eq!(ack[4], b"admin:d");
    let st = wait_exit(&mut r, Duration::from_secs(10));
    assert!(st.success(), "exit status {st:?}");
    // The buffered job is reported as lost (no journal).
    let mut saw = false;
    while let Ok(line) = r.log.recv_timeout(Duration::from_secs(2)) {
        saw |= line.contains("1 buffered");
    }
    assert!(saw, "the exit log names the buffered job");
}

#[test]
fn journaled_jobs_survive_a_restart() {
    let dir = std::env::temp_dir().join(format!("emq-router-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("journal.sqlite");
    let path = path.to_str().unwrap();
    let ctx = zmq::Context::new();
    let opts = SocketOptions {
        linger_ms: 0,
        ..SocketOptions::default()
    };
    let body = r#"["call", {"handler": "noop"}]"#;
    {
        let mut r = start_router_with(&["--journal", path]);
        let client = connect_dealer(&ctx, &r.frontend, b"c3", &opts).unwrap();
        client
            .send_multipart(
                frames(&["", "eMQP/1.0", "REQUEST", "kept-1", "mail", "x-h", body]),
                0,
            )
            .unwrap();
        assert_eq!(recv_non_hb(&client, "ack")[4], b"kept-1");
        let pid = r.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(wait_exit(&mut r, Duration::from_secs(10)).success());
    }
    let r = start_router_with(&["--journal", path]);
    let worker = connect_dealer(&ctx, &r.backend, b"w3", &opts).unwrap();
    worker
        .send_multipart(
            frames(&["", "eMQP/1.0", "INFORM", "i3", "", "worker", "job-ack"]),
            0,
        )
        .unwrap();
    assert_eq!(recv_non_hb(&worker, "ACK")[2], b"ACK");
    worker
        .send_multipart(frames(&["", "eMQP/1.0", "READY", "r3"]), 0)
        .unwrap();
    let job = recv_non_hb(&worker, "the journaled job");
    assert_eq!(
        job,
        frames(&["", "eMQP/1.0", "REQUEST", "kept-1", "mail", "x-h", body])
    );
    drop(r);
    let _ = std::fs::remove_dir_all(&dir);
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("emq-router-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Run the router to its exit (it must exit by itself within 20 s);
/// returns the exit code and stderr.
fn run_to_exit(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_emq-router"))
        .args([
            "--frontend",
            "tcp://127.0.0.1:*",
            "--backend",
            "tcp://127.0.0.1:*",
            "--admin",
            "tcp://127.0.0.1:*",
        ])
        .args(args)
        .env("EVENTMQ_CONFIG_FILE", "")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (st.code(), err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("router did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn corrupt_journal_is_a_clear_error_with_exit_code_2() {
    let dir = temp_dir("corrupt");
    let path = dir.join("journal.sqlite");
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    let (code, err) = run_to_exit(&["--journal", path.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("journal") && err.contains(path.to_str().unwrap()),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn locked_journal_is_a_clear_error_with_exit_code_2() {
    let dir = temp_dir("locked");
    let path = dir.join("journal.sqlite");
    let p = path.to_str().unwrap();
    let _first = start_router_with(&["--journal", p]);
    let (code, err) = run_to_exit(&["--journal", p]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(p) && !err.contains("panicked"), "{err}");
    drop(_first);
    let _ = std::fs::remove_dir_all(&dir);
}

fn quiet_opts() -> SocketOptions {
    SocketOptions {
        linger_ms: 0,
        ..SocketOptions::default()
    }
}

/// Whether anything but HEARTBEAT arrives on `sock` within `within`.
fn gets_nothing(sock: &zmq::Socket, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        if sock.poll(zmq::POLLIN, left.as_millis() as i64).unwrap() == 0 {
            continue;
        }
        let f = sock.recv_multipart(0).unwrap();
        if f.get(2).map(Vec::as_slice) != Some(b"HEARTBEAT") {
            return false;
        }
    }
}

fn inform(sock: &zmq::Socket, msgid: &str) {
    sock.send_multipart(
        frames(&[
            "",
            "eMQP/1.0",
            "INFORM",
            msgid,
            r#"[[10, "default"]]"#,
            "worker",
            "job-ack",
        ]),
        0,
    )
    .unwrap();
}

fn admin_json(r: &Router, ctx: &zmq::Context, cmd: &str) -> serde_json::Value {
    let admin = connect_dealer(ctx, &r.admin, b"smoke-admin-q", &quiet_opts()).unwrap();
    admin
        .send_multipart(frames(&["", "eMQP/1.0", cmd, "admin:q"]), 0)
        .unwrap();
    let reply = recv_non_hb(&admin, cmd);
    assert_eq!(reply[2], b"REPLY");
    serde_json::from_slice(&reply[4]).unwrap()
}

/// A client REQUEST on `r` is acknowledged.
fn request_is_acked(r: &Router, ctx: &zmq::Context, client: &[u8], msgid: &str) {
    let c = connect_dealer(ctx, &r.frontend, client, &quiet_opts()).unwrap();
    c.send_multipart(
        frames(&["", "eMQP/1.0", "REQUEST", msgid, "default", "", "[]"]),
        0,
    )
    .unwrap();
    let ack = recv_non_hb(&c, "REQUEST ack");
    assert_eq!(ack[2], b"REPLY");
    assert_eq!(ack[4], msgid.as_bytes());
}

/// The line after the three endpoints: `listening: metrics http://ADDR/metrics`.
fn metrics_addr(r: &Router) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = r.log.recv_timeout(left).expect("metrics address logged");
        if let Some(rest) = line.split("listening: metrics http://").nth(1) {
            return rest.split('/').next().unwrap().to_string();
        }
    }
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
    let r = start_router_with(&["--metrics", "127.0.0.1:0"]);
    let addr = metrics_addr(&r);
    let ctx = zmq::Context::new();
    let worker = connect_dealer(&ctx, &r.backend, b"m-worker", &quiet_opts()).unwrap();
    inform(&worker, "i-m");
    assert_eq!(recv_non_hb(&worker, "ACK")[2], b"ACK");
    worker
        .send_multipart(frames(&["", "eMQP/1.0", "READY", "r-m"]), 0)
        .unwrap();
    request_is_acked(&r, &ctx, b"m-client", "m-job-1");
    let job = recv_non_hb(&worker, "the job");
    assert_eq!(job[3], b"m-job-1");
    worker
        .send_multipart(
            frames(&["", "eMQP/1.0", "REPLY", "rep", "{}", "m-job-1", "ok"]),
            0,
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let resp = http_get(&addr, "/metrics");
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        if resp.contains(r#"emq_jobs_processed_total{queue="default"} 1"#) {
            assert!(
                resp.contains(r#"emq_job_latency_seconds_count{queue="default"} 1"#),
                "{resp}"
            );
            assert!(resp.contains("emq_connected_workers 1"), "{resp}");
            assert!(
                resp.contains(r#"emq_queue_depth{queue="default"} 0"#),
                "{resp}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "processed counter never 1:\n{resp}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(http_get(&addr, "/nope").starts_with("HTTP/1.1 404"));
}

#[test]
fn backend_allowlist_refuses_other_addresses() {
    let r = start_router_with(&["--allow-backend", "127.0.0.2"]);
    let ctx = zmq::Context::new();
    let worker = connect_dealer(&ctx, &r.backend, b"refused-worker", &quiet_opts()).unwrap();
    inform(&worker, "i-x");
    assert!(gets_nothing(&worker, Duration::from_millis(1500)), "no ACK");
    let v = admin_json(&r, &ctx, "ROUTER_SHOW_WORKERS");
    assert!(
        v["connected_workers"].as_object().unwrap().is_empty(),
        "{v}"
    );
    // The frontend (any address by default) still works.
    request_is_acked(&r, &ctx, b"allowed-client", "a-1");
}

#[test]
fn admin_allowlist_refuses_disconnect_from_other_addresses() {
    let mut r = start_router_with(&["--allow-admin", "127.0.0.2"]);
    let ctx = zmq::Context::new();
    let admin = connect_dealer(&ctx, &r.admin, b"refused-admin", &quiet_opts()).unwrap();
    admin
        .send_multipart(frames(&["", "eMQP/1.0", "DISCONNECT", "admin:d"]), 0)
        .unwrap();
    assert!(gets_nothing(&admin, Duration::from_millis(1500)), "no ACK");
    assert!(r.child.try_wait().unwrap().is_none(), "router still up");
    request_is_acked(&r, &ctx, b"still-served", "s-1");
}

fn plain_dealer(ctx: &zmq::Context, ep: &str, id: &[u8], user: &str, pw: &str) -> zmq::Socket {
    let s = ctx.socket(zmq::DEALER).unwrap();
    s.set_linger(0).unwrap();
    s.set_identity(id).unwrap();
    s.set_plain_username(Some(user)).unwrap();
    s.set_plain_password(Some(pw)).unwrap();
    s.connect(ep).unwrap();
    s
}

#[test]
fn plain_users_require_valid_credentials() {
    let dir = temp_dir("plain");
    let users = dir.join("users");
    std::fs::write(&users, "# test users\nalice:secret\n").unwrap();
    let r = start_router_with(&["--plain-users", users.to_str().unwrap()]);
    let ctx = zmq::Context::new();
    let bad = plain_dealer(&ctx, &r.backend, b"bad-worker", "alice", "wrong");
    inform(&bad, "i-bad");
    assert!(
        gets_nothing(&bad, Duration::from_millis(1500)),
        "nothing routed"
    );
    let anon = connect_dealer(&ctx, &r.frontend, b"anon-client", &quiet_opts()).unwrap();
    anon.send_multipart(
        frames(&["", "eMQP/1.0", "REQUEST", "anon-1", "default", "", "[]"]),
        0,
    )
    .unwrap();
    assert!(
        gets_nothing(&anon, Duration::from_millis(500)),
        "NULL refused"
    );
    let good = plain_dealer(&ctx, &r.backend, b"good-worker", "alice", "secret");
    inform(&good, "i-good");
    let ack = recv_non_hb(&good, "ACK");
    assert_eq!(ack[2], b"ACK");
    assert_eq!(ack[4], b"i-good");
    let v = admin_json(&r, &ctx, "ROUTER_SHOW_WORKERS");
    let w = v["connected_workers"].as_object().unwrap();
    assert!(
        w.contains_key("good-worker") && !w.contains_key("bad-worker"),
        "{v}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn oversized_message_is_dropped_and_the_router_keeps_serving() {
    let mut r = start_router_with(&["--max-message-size", "1000"]);
    let ctx = zmq::Context::new();
    let big = connect_dealer(&ctx, &r.frontend, b"big-client", &quiet_opts()).unwrap();
    let payload = "x".repeat(5000);
    big.send_multipart(
        frames(&["", "eMQP/1.0", "REQUEST", "big-1", "default", "", &payload]),
        0,
    )
    .unwrap();
    assert!(gets_nothing(&big, Duration::from_millis(1000)), "no ack");
    assert!(r.child.try_wait().unwrap().is_none(), "router still up");
    request_is_acked(&r, &ctx, b"small-client", "small-1");
    let v = admin_json(&r, &ctx, "STATUS");
    assert_eq!(v["counters"]["accepted"], 1, "{v}");
}

#[test]
fn built_in_schedule_runs_and_survives_a_restart() {
    let dir = temp_dir("sched");
    let path = dir.join("journal.sqlite");
    let p = path.to_str().unwrap();
    let ctx = zmq::Context::new();
    let body = r#"["call", {"handler": "noop"}]"#;
    let start_worker = |r: &Router, id: &[u8]| {
        let w = connect_dealer(&ctx, &r.backend, id, &quiet_opts()).unwrap();
        inform(&w, "i-s");
        assert_eq!(recv_non_hb(&w, "ACK")[2], b"ACK");
        for _ in 0..4 {
            w.send_multipart(frames(&["", "eMQP/1.0", "READY", "r"]), 0)
                .unwrap();
        }
        w
    };
    {
        let mut r = start_router_with(&["--journal", p]);
        let w = start_worker(&r, b"s-worker-1");
        let c = connect_dealer(&ctx, &r.frontend, b"s-client", &quiet_opts()).unwrap();
        c.send_multipart(
            frames(&[
                "", "eMQP/1.0", "SCHEDULE", "sch-1", "default", "", "1", body, "",
            ]),
            0,
        )
        .unwrap();
        let ack = recv_non_hb(&c, "SCHEDULE ack");
        assert_eq!(ack[2], b"REPLY");
        assert_eq!(ack[4], b"sch-1");
        let first = recv_non_hb(&w, "first run");
        assert_eq!(first[2], b"REQUEST");
        assert_eq!(first[6], body.as_bytes());
        let second = recv_non_hb(&w, "second run");
        assert_ne!(first[3], second[3], "each run has its own msgid");
        let v = admin_json(&r, &ctx, "ROUTER_SHOW_SCHEDULERS");
        assert_eq!(v["schedules"].as_array().unwrap().len(), 1, "{v}");
        let pid = r.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(wait_exit(&mut r, Duration::from_secs(10)).success());
    }
    let r = start_router_with(&["--journal", p]);
    let v = admin_json(&r, &ctx, "ROUTER_SHOW_SCHEDULERS");
    assert_eq!(v["schedules"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["schedules"][0]["interval_secs"], 1);
    let w = start_worker(&r, b"s-worker-2");
    let job = recv_non_hb(&w, "a run after the restart");
    assert_eq!(job[6], body.as_bytes());
    drop(r);
    let _ = std::fs::remove_dir_all(&dir);
}
