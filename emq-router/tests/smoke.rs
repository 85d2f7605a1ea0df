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

fn start_router_with(extra: &[&str]) -> Router {
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
