//! The real emq-receiver binary bound as a ROUTER on a free loopback port,
//! fed by DEALERs played by the test. Bounded; the child is killed on drop.

use std::process::{Command as Proc, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use emq_testkit::fake::{inform_with_features, FakeDealer, FakeRouter};
use emq_testkit::lines::line_reader;
use emq_testkit::process::run_to_exit;
use emq_testkit::{ChildGuard as Guard, Spawn};
use emqp_proto::{Command, Message, PeerType};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_emq-receiver");

struct Receiver {
    child: Guard,
    lines: mpsc::Receiver<String>,
    endpoint: String,
}

/// The receiver bound on a loopback port the kernel picks (kept bound: no
/// probe-then-bind race), plus `extra`; the port read back from its
/// "bound to" line.
fn start(extra: &[&str]) -> Receiver {
    let (child, lines, errs) =
        spawn_with_stderr(&[&["--bind", "tcp://127.0.0.1:*"][..], extra].concat());
    let deadline = Instant::now() + Duration::from_secs(10);
    let endpoint = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = errs
            .recv_timeout(left)
            .expect("emq-receiver says where it is bound within 10 s");
        if let Some((_, ep)) = line.split_once(" bound to ") {
            break ep.trim().to_string();
        }
    };
    Receiver {
        child,
        lines,
        endpoint,
    }
}

/// The receiver with `args`, and its stdout as lines.
fn spawn(args: &[&str]) -> (Guard, mpsc::Receiver<String>) {
    let (child, lines, _) = spawn_with_stderr(args);
    (child, lines)
}

/// The receiver with `args`, and its stdout and stderr as lines.
fn spawn_with_stderr(args: &[&str]) -> (Guard, mpsc::Receiver<String>, mpsc::Receiver<String>) {
    let mut child = Guard(
        Proc::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn emq-receiver"),
    );
    let lines = line_reader(child.0.stdout.take().unwrap());
    let errs = line_reader(child.0.stderr.take().unwrap());
    (child, lines, errs)
}

impl Receiver {
    fn next_json(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(10))
            .expect("a line from emq-receiver within 10 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        self.child.wait_exit(limit)
    }
}

/// A worker's INFORM for `10:default,15:email` with the `job-ack` feature.
fn inform(msgid: &str) -> Message {
    Message::with_msgid(
        msgid,
        inform_with_features("10:default,15:email", PeerType::Worker, &["job-ack"]),
    )
}

/// How long the receiver gets to exit once it has printed `--count` lines.
const EXIT: Duration = Duration::from_secs(10);

#[test]
fn prints_an_inform_acks_it_and_stops_after_count() {
    let mut rx = start(&["--ack-informs", "--count", "2", "--timeout", "20"]);
    let d = FakeDealer::connect(&rx.endpoint, b"worker-1");
    d.send_msg(inform("inf-1"));
    let v = rx.next_json();
    assert_eq!(v["identity"], "worker-1");
    assert_eq!(v["command"], "INFORM");
    assert_eq!(v["msgid"], "inf-1");
    assert_eq!(
        v["fields"]["queues"],
        serde_json::json!([[10, "default"], [15, "email"]])
    );
    assert_eq!(v["fields"]["peer_type"], "worker");
    assert_eq!(v["fields"]["features"], serde_json::json!(["job-ack"]));
    assert_eq!(v["frames"], 8);
    // --ack-informs: the worker gets ACK [inf-1]
    assert_eq!(
        d.recv(Duration::from_secs(10)).expect("ACK").command,
        Command::Ack {
            acked_msgid: "inf-1".into(),
            features: vec![],
        }
    );
    d.send_as("r-1", Command::Ready);
    let v = rx.next_json();
    assert_eq!(v["command"], "READY");
    // --count 2 reached: exits 0 even though more arrives
    assert_eq!(rx.wait_exit(EXIT), Some(0));
}

#[test]
fn malformed_messages_print_an_error_line_and_it_keeps_going() {
    let mut rx = start(&["--count", "3", "--timeout", "20"]);
    let d = FakeDealer::connect(&rx.endpoint, b"client-1");
    d.send_frames(emq_testkit::fake::frames(&["", "eMQP/1.0", "FLY", "m-1"]));
    let v = rx.next_json();
    assert!(
        v["error"].as_str().unwrap().contains("unknown command"),
        "{v}"
    );
    assert_eq!(
        v["frames"],
        serde_json::json!(["client-1", "", "eMQP/1.0", "FLY", "m-1"])
    );
    // non-UTF-8 msgid: an error line with b64 frames
    d.send_frames(vec![
        b"".to_vec(),
        b"eMQP/1.0".to_vec(),
        b"READY".to_vec(),
        vec![0xff, 0xfe],
    ]);
    let v = rx.next_json();
    assert!(v["error"].as_str().unwrap().contains("UTF-8"), "{v}");
    assert_eq!(v["frames"][4], "b64://4=");
    // and a valid message afterwards is still printed
    let req = Message::with_msgid(
        "req-1",
        Command::Request(emqp_proto::Request {
            queue: "default".into(),
            headers: emqp_proto::Headers::parse(b"reply-requested,timeout:5").unwrap(),
            message: br#"["call", {"handler": "echo", "args": [1]}]"#.to_vec(),
        }),
    );
    d.send_msg(req);
    let v = rx.next_json();
    assert_eq!(v["command"], "REQUEST");
    assert_eq!(
        v["fields"]["headers"],
        serde_json::json!(["reply-requested", "timeout:5"])
    );
    assert_eq!(v["fields"]["message"][1]["args"], serde_json::json!([1]));
    assert_eq!(rx.wait_exit(EXIT), Some(0));
}

#[test]
fn nothing_within_the_timeout_exits_5() {
    let started = Instant::now();
    let mut rx = start(&["--timeout", "1"]);
    assert_eq!(rx.wait_exit(Duration::from_secs(10)), Some(5));
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &[][..],
        &["--bind", "nonsense"],
        &["--connect", "tcp://127.0.0.1:1", "--ack-informs"],
    ] {
        let out = run_to_exit(Spawn::new("emq-receiver", BIN).args(args), EXIT);
        assert_eq!(out.code(), Some(2), "{args:?}: {}", out.describe());
    }
}

#[test]
fn connects_as_a_dealer_and_prints_what_a_router_sends() {
    let router = FakeRouter::new();
    let endpoint = router.endpoint.clone();
    let (mut child, lines) = spawn(&[
        "--connect",
        &endpoint,
        "--identity",
        "rx-1",
        "--count",
        "1",
        "--timeout",
        "20",
    ]);
    // ROUTER_MANDATORY: refused until the receiver has connected
    let ack = Message::with_msgid("a-1", Command::Reply(emqp_proto::Reply::ack_of("req-9")));
    assert!(
        router.send_when_connected(b"rx-1", ack, Duration::from_secs(10)),
        "receiver never connected"
    );
    let line = lines.recv_timeout(Duration::from_secs(10)).unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"identity": null, "command": "REPLY", "msgid": "a-1",
            "fields": {"payload": "req-9", "orig_msgid": null, "status": null}, "frames": 5})
    );
    assert_eq!(
        child.wait_exit(EXIT),
        Some(0),
        "receiver did not exit (0) after --count"
    );
}

#[test]
fn heartbeats_go_to_peers_that_sent_inform() {
    let rx = start(&["--ack-informs", "--heartbeat", "0.2", "--timeout", "20"]);
    let d = FakeDealer::connect(&rx.endpoint, b"worker-hb");
    d.send_msg(inform("inf-hb"));
    assert_eq!(rx.next_json()["command"], "INFORM");
    let mut got = Vec::new();
    while got.len() < 3 {
        match d.recv(Duration::from_secs(5)) {
            Some(m) => got.push(m.command),
            None => panic!("expected ACK then HEARTBEATs, got {got:?} only"),
        }
    }
    assert!(matches!(&got[0], Command::Ack { acked_msgid, .. } if acked_msgid == "inf-hb"));
    for c in &got[1..] {
        assert!(
            matches!(c, Command::Heartbeat { timestamp: Some(t) } if t.parse::<f64>().is_ok()),
            "{c:?}"
        );
    }
}

#[test]
fn subscribe_prints_what_a_publisher_sends_on_its_topics_only() {
    // The test plays the pub/sub process with an XPUB, which tells it when
    // the receiver's subscriptions have arrived: it publishes only then.
    let ctx = zmq::Context::new();
    let xpub = ctx.socket(zmq::XPUB).unwrap();
    xpub.set_linger(0).unwrap();
    xpub.bind("tcp://127.0.0.1:*").unwrap();
    let endpoint = xpub.get_last_endpoint().unwrap().unwrap();
    let (mut child, lines) = spawn(&[
        "--connect",
        &endpoint,
        "--subscribe",
        "news",
        "--subscribe",
        "alerts",
        "--count",
        "3",
        "--timeout",
        "20",
    ]);
    let mut subscribed = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while subscribed.len() < 2 {
        assert!(
            Instant::now() < deadline,
            "subscriptions seen: {subscribed:?}"
        );
        if xpub.poll(zmq::POLLIN, 100).unwrap() > 0 {
            subscribed.insert(xpub.recv_bytes(0).unwrap());
        }
    }
    assert_eq!(
        subscribed.into_iter().collect::<Vec<_>>(),
        vec![b"\x01alerts".to_vec(), b"\x01news".to_vec()]
    );
    for (topic, message) in [
        ("weather", "{\"t\": 20}"),
        ("news.sports", "{\"score\": [2, 1]}"),
        ("", "\"to everyone\""),
        ("alerts", "not json"),
        ("news", "[1]"),
    ] {
        xpub.send_multipart([topic.as_bytes(), message.as_bytes()], 0)
            .unwrap();
    }
    let got: Vec<Value> = (0..3)
        .map(|_| {
            let line = lines.recv_timeout(Duration::from_secs(10)).unwrap();
            serde_json::from_str(&line).unwrap()
        })
        .collect();
    let expect = |topic: &str, message: Value| {
        serde_json::json!({"identity": null, "command": "PUBLISH", "msgid": null,
            "fields": {"topic": topic, "message": message}, "frames": 2})
    };
    assert_eq!(
        got,
        vec![
            expect("news.sports", serde_json::json!({"score": [2, 1]})),
            expect("alerts", Value::from("not json")),
            expect("news", serde_json::json!([1])),
        ]
    );
    assert_eq!(
        child.wait_exit(EXIT),
        Some(0),
        "receiver did not exit (0) after --count"
    );
}
