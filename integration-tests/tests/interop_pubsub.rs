//! Pub/sub with real processes on loopback: EventMQ 0.3.13's publisher
//! client through our `emq-pubsub`, `emq-sender --publish` through 0.3.13's
//! `emq-pubsub`, both to a plain zmq SUB socket and to
//! `emq-receiver --subscribe`; and what our emq-pubsub does with input
//! that is not a PUBLISH.
//!
//! EventMQ 0.3.13 has no subscriber program (its `eventmq/subscriber.py` is
//! a demo script with the address 127.0.0.1:47299 and the topics "0".."99"
//! written in): its subscribers are plain zmq SUB sockets, which
//! [`Subscriber`] is.
//!
//! The slow joiner: what is published before a subscription reaches the
//! PUB socket is dropped, so each test publishes until the first message
//! arrives (bounded) and checks exactly what comes after it.

use std::time::Duration;

use integration_tests::bins::{self, bin};
use integration_tests::pubsub::{
    json_lines, publish_until_heard, start_pubsub, start_py_pubsub, Subscriber,
};
use integration_tests::python::{self, pythonpath};
use integration_tests::{poll_until, process::run, Spawn};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

/// `emq-receiver --subscribe PREFIX --connect OUTGOING`.
fn start_receiver(outgoing: &str, prefix: &str) -> integration_tests::Proc {
    Spawn::new("emq-receiver", bin(bins::RECEIVER))
        .args(["--subscribe", prefix, "--connect", outgoing])
        .spawn()
}

/// The `seq` of a published `{"seq": N, "topic": T}`, checking the topic.
fn seq_of(topic: &[u8], message: &Value) -> u64 {
    assert_eq!(message["topic"].as_str().map(str::as_bytes), Some(topic));
    message["seq"].as_u64().expect("seq")
}

/// Each number is the one before plus one: nothing lost after the first.
fn assert_consecutive(what: &str, seqs: &[u64]) {
    for w in seqs.windows(2) {
        assert_eq!(w[1], w[0] + 1, "{what}: gap or reordering in {seqs:?}");
    }
}

#[test]
fn python_0_3_13_publisher_through_emq_pubsub_reaches_a_zmq_sub_and_emq_receiver() {
    let Some(py) = python::venv("interop_pubsub::python_publisher") else {
        return;
    };
    let (mut pubsub, addrs) = start_pubsub(&[]);
    let sub = Subscriber::connect(&addrs.outgoing, &["news"]);
    let mut receiver = start_receiver(&addrs.outgoing, "news");
    // 0.3.13's client publishes {"seq": i} on "news" and "weather" every
    // 20 ms (at most 1500 rounds) until we have seen enough and stop it.
    let mut publisher = Spawn::new("py-publisher", py.python())
        .arg(py.publisher_script())
        .args(["--addr", &addrs.incoming, "--topics", "news,weather"])
        .args(["--interval", "0.02", "--max", "1500"])
        .env("PYTHONPATH", pythonpath())
        .env("PYTHONUNBUFFERED", "1")
        .spawn();
    let mut at_sub = Vec::new();
    let enough = poll_until(WAIT, POLL, || {
        at_sub.extend(sub.drain());
        let lines = json_lines(&receiver.stdout());
        (at_sub.len() >= 5 && lines.len() >= 5).then_some(lines.len())
    });
    let publisher_log = publisher.tail(20);
    publisher.stop();
    assert!(
        enough.is_some(),
        "subscribers got {} and {} messages in {WAIT:?}; publisher log:\n{publisher_log}\n\
         emq-pubsub log:\n{}",
        at_sub.len(),
        json_lines(&receiver.stdout()).len(),
        pubsub.tail(20)
    );

    // the zmq SUB: only "news", every message after the first, unchanged
    let seqs: Vec<u64> = at_sub
        .iter()
        .map(|p| {
            assert_eq!(p.topic, b"news", "only the subscribed topic");
            let v: Value = serde_json::from_slice(&p.message).expect("JSON, as 0.3.13 sent it");
            assert_eq!(
                p.message,
                format!("{{\"seq\": {}, \"topic\": \"news\"}}", v["seq"]).into_bytes(),
                "json.dumps text, byte for byte"
            );
            seq_of(b"news", &v)
        })
        .collect();
    assert_consecutive("zmq SUB", &seqs);

    // emq-receiver --subscribe news: the same, as JSON lines
    let lines = json_lines(&receiver.stdout());
    let seqs: Vec<u64> = lines
        .iter()
        .map(|l| {
            assert_eq!(l["command"], "PUBLISH", "{l}");
            assert_eq!(l["msgid"], Value::Null);
            assert_eq!(l["fields"]["topic"], "news", "{l}");
            seq_of(b"news", &l["fields"]["message"])
        })
        .collect();
    assert_consecutive("emq-receiver", &seqs);
    receiver.stop();

    // emq-pubsub said what happened: the subscription, and that "weather"
    // went to nobody
    pubsub
        .wait_for_log_line("subscription to topic prefix \"news\"", WAIT)
        .unwrap();
    pubsub.stop();
    let log = pubsub.stderr();
    let summary = log
        .lines()
        .find(|l| l.contains("exiting after"))
        .unwrap_or_else(|| panic!("no summary in:\n{log}"));
    let number_before = |needle: &str| -> u64 {
        let head = &summary[..summary.find(needle).expect(needle)];
        head.rsplit(|c: char| !c.is_ascii_digit())
            .find(|w| !w.is_empty())
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("no number before {needle:?} in {summary}"))
    };
    let published = number_before(" published");
    let unheard = number_before(" to no subscriber");
    assert!(
        published >= 2 * seqs.len() as u64,
        "{summary}: every round publishes two messages"
    );
    assert!(
        unheard >= published / 2,
        "{summary}: every weather message went to no subscriber"
    );
    assert!(summary.contains("0 dropped"), "{summary}");
    integration_tests::report(&format!(
        "interop pubsub: 0.3.13 publisher -> emq-pubsub -> zmq SUB ({} messages) and \
         emq-receiver ({}), nothing lost after the first; emq-pubsub: {}",
        at_sub.len(),
        seqs.len(),
        &summary[summary.find("exiting").unwrap_or(0)..]
    ));
}

#[test]
fn emq_sender_publish_through_0_3_13_pubsub_reaches_emq_receiver_and_a_zmq_sub() {
    let Some(py) = python::venv("interop_pubsub::emq_sender_to_0_3_13_pubsub") else {
        return;
    };
    let (_pubsub, addrs) = start_py_pubsub(&py);
    let sub = Subscriber::connect(&addrs.outgoing, &["orders"]);
    let receiver = start_receiver(&addrs.outgoing, "orders");
    let publish = |topic: &str, message: Option<&str>, stdin: Option<&str>| {
        let mut s = Spawn::new("emq-sender", bin(bins::SENDER))
            .args(["--broker", &addrs.incoming, "--publish", topic])
            .args(message);
        if let Some(text) = stdin {
            s = s.stdin(text);
        }
        let out = run(s, Duration::from_secs(30));
        assert_eq!(out.code(), Some(0), "emq-sender: {}", out.describe());
        out.stdout
    };
    let mut at_sub = Vec::new();
    let rounds = publish_until_heard(
        WAIT,
        Duration::from_millis(200),
        |i| {
            let msgid = publish("orders.warm-up", Some(&format!("{{\"warm\": {i}}}")), None);
            assert_eq!(msgid.trim().len(), 36, "the msgid: {msgid}");
        },
        |step| {
            poll_until(step, POLL, || {
                at_sub.extend(sub.drain());
                (!at_sub.is_empty() && !json_lines(&receiver.stdout()).is_empty()).then_some(())
            })
            .is_some()
        },
    );
    integration_tests::report(&format!(
        "interop pubsub: emq-sender --publish -> 0.3.13 emq-pubsub: heard after {rounds} \
         warm-up publish(es)"
    ));
    let warm_ups_at_receiver = json_lines(&receiver.stdout()).len();

    // one message, then two from stdin (one connection: in this order)
    publish("orders.created", Some(r#"{"order": 42}"#), None);
    let out = publish("orders.bulk", None, Some("{\"n\": 1}\n{\"n\": 2}\n"));
    assert_eq!(json_lines(&out).len(), 2, "{out}");
    let expected = [
        ("orders.created", json!({"order": 42})),
        ("orders.bulk", json!({"n": 1})),
        ("orders.bulk", json!({"n": 2})),
    ];
    let is_new = |topic: &[u8]| topic != b"orders.warm-up";
    let got = poll_until(WAIT, POLL, || {
        at_sub.extend(sub.drain());
        let fresh: Vec<(String, Value)> = at_sub
            .iter()
            .filter(|p| is_new(&p.topic))
            .map(|p| {
                (
                    String::from_utf8(p.topic.clone()).unwrap(),
                    serde_json::from_slice(&p.message).unwrap(),
                )
            })
            .collect();
        (fresh.len() >= expected.len()).then_some(fresh)
    })
    .expect("the three messages reach the zmq SUB");
    let want: Vec<(String, Value)> = expected
        .iter()
        .map(|(t, v)| (t.to_string(), v.clone()))
        .collect();
    assert_eq!(got, want, "0.3.13's emq-pubsub passed them on unchanged");

    let lines = poll_until(WAIT, POLL, || {
        let lines = json_lines(&receiver.stdout());
        let fresh: Vec<(String, Value)> = lines[warm_ups_at_receiver..]
            .iter()
            .filter(|l| is_new(l["fields"]["topic"].as_str().unwrap_or("").as_bytes()))
            .map(|l| {
                (
                    l["fields"]["topic"].as_str().unwrap().to_string(),
                    l["fields"]["message"].clone(),
                )
            })
            .collect();
        (fresh.len() >= expected.len()).then_some(fresh)
    })
    .expect("the three messages reach emq-receiver");
    assert_eq!(lines, want);
}

#[test]
fn emq_pubsub_drops_what_is_not_a_publish_and_keeps_going() {
    let (mut pubsub, addrs) = start_pubsub(&["--max-message-size", "1000"]);
    let sub = Subscriber::connect(&addrs.outgoing, &[""]);
    // one DEALER for everything after the warm-up: its messages arrive in
    // order, so the last one arriving shows that the others before it were
    // not published
    let dealer = integration_tests::zmq_ctx().socket(zmq::DEALER).unwrap();
    dealer.set_linger(0).unwrap();
    dealer.set_identity(b"junk-sender").unwrap();
    dealer.connect(&addrs.incoming).unwrap();
    let frames = |parts: &[&[u8]]| parts.iter().map(|p| p.to_vec()).collect::<Vec<_>>();
    let publish = |topic: &str, message: &[u8]| {
        frames(&[
            b"",
            b"eMQP/1.0",
            b"PUBLISH",
            b"m",
            topic.as_bytes(),
            message,
        ])
    };
    publish_until_heard(
        WAIT,
        Duration::from_millis(50),
        |_| dealer.send_multipart(publish("warm-up", b"{}"), 0).unwrap(),
        |step| sub.recv(step).is_some(),
    );
    // what emq-sender sends arrives too (through another connection)
    let out = run(
        Spawn::new("emq-sender", bin(bins::SENDER)).args([
            "--broker",
            &addrs.incoming,
            "--publish",
            "from-sender",
            "[1]",
        ]),
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    let p = poll_until(WAIT, POLL, || {
        sub.drain().into_iter().find(|p| p.topic == b"from-sender")
    })
    .expect("emq-sender's PUBLISH arrives");
    assert_eq!(p.message, b"[1]");

    for junk in [
        frames(&[b"not", b"emqp"]),
        frames(&[b"", b"eMQP/1.0", b"PUBLISH", b"m", b"no-message-frame"]),
        frames(&[b"", b"eMQP/1.0", b"REQUEST", b"r", b"default", b"", b"[]"]),
        publish("too-large", &[b'x'; 1001]),
        publish("last", b"\"after the junk\""),
    ] {
        dealer.send_multipart(junk, 0).unwrap();
    }
    let last = poll_until(WAIT, POLL, || {
        sub.drain().into_iter().find(|p| p.topic != b"warm-up")
    })
    .expect("the PUBLISH after the junk arrives");
    assert_eq!(
        (last.topic.as_slice(), last.message.as_slice()),
        (&b"last"[..], &b"\"after the junk\""[..]),
        "nothing of the junk was published"
    );
    assert!(pubsub.is_running(), "junk did not stop emq-pubsub");
    let status = pubsub.stop();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "SIGTERM: exit 0");
    let log = pubsub.stderr();
    for needle in [
        "dropped a message from junk-sender that is not eMQP/1.0",
        "too few frames for PUBLISH",
        "REQUEST r from junk-sender ignored",
        "a frame of 1001 bytes is over the limit of 1000 bytes",
        "dropped (2 malformed, 1 not PUBLISH, 1 too large)",
    ] {
        assert!(log.contains(needle), "log lacks {needle:?}:\n{log}");
    }
}

/// VmRSS of a process, in kB.
fn rss_kb(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// The numbers the periodic reports ("last 0.5 s: ...") give before
/// `needle`, one per report line.
fn per_report(log: &str, needle: &str) -> Vec<u64> {
    log.lines()
        .filter(|l| l.contains("last 0.5 s: "))
        .filter_map(|l| {
            let head = &l[..l.find(needle)?];
            head.rsplit(|c: char| !c.is_ascii_digit())
                .find(|w| !w.is_empty())?
                .parse()
                .ok()
        })
        .collect()
}

#[test]
fn floods_of_subscriptions_and_of_junk_cost_a_bounded_table_and_a_few_log_lines() {
    const TOPICS: usize = 20_000;
    const KEPT: usize = 1_000;
    const JUNK: u64 = 20_000;
    let (mut pubsub, addrs) = start_pubsub(&[
        "--max-subscriptions",
        &KEPT.to_string(),
        "--report-interval",
        "0.5",
    ]);
    let rss_start = rss_kb(pubsub.pid());
    // one subscriber with 20,000 distinct topics (no high-water mark on
    // its subscriptions, so libzmq passes every one of them on)
    let sub = integration_tests::zmq_ctx().socket(zmq::SUB).unwrap();
    sub.set_linger(0).unwrap();
    sub.set_sndhwm(0).unwrap();
    for i in 0..TOPICS {
        sub.set_subscribe(format!("flood.{i:06}").as_bytes())
            .unwrap();
    }
    sub.connect(&addrs.outgoing).unwrap();
    let full = format!(
        "{KEPT} topic prefix(es) subscribed and {} more not kept",
        TOPICS - KEPT
    );
    pubsub
        .wait_for_log_line(&full, WAIT)
        .unwrap_or_else(|e| panic!("{e}\n{}", pubsub.tail(20)));
    let rss_subscribed = rss_kb(pubsub.pid());
    // it leaves: every one of its prefixes leaves the table
    drop(sub);
    let gone = poll_until(WAIT, POLL, || {
        pubsub
            .stderr()
            .lines()
            .rev()
            .find(|l| l.contains("last 0.5 s: "))
            .filter(|l| l.contains("; 0 topic prefix(es) subscribed") && !l.contains("not kept"))
            .map(str::to_string)
    });
    assert!(
        gone.is_some(),
        "the table did not empty:\n{}",
        pubsub.tail(20)
    );
    let rss_left = rss_kb(pubsub.pid());

    // 20,000 malformed messages
    let dealer = integration_tests::zmq_ctx().socket(zmq::DEALER).unwrap();
    dealer.set_linger(0).unwrap();
    dealer.set_sndhwm(0).unwrap();
    dealer.set_identity(b"junk-flood").unwrap();
    dealer.connect(&addrs.incoming).unwrap();
    for _ in 0..JUNK {
        dealer.send_multipart([&b"not"[..], b"emqp"], 0).unwrap();
    }
    let counted = poll_until(WAIT, POLL, || {
        let n: u64 = per_report(&pubsub.stderr(), " malformed").iter().sum();
        (n >= JUNK).then_some(n)
    });
    assert_eq!(
        counted,
        Some(JUNK),
        "every one counted:\n{}",
        pubsub.tail(20)
    );
    assert!(pubsub.is_running());
    pubsub.stop();
    let log = pubsub.stderr();
    let lines = |needle: &str| log.lines().filter(|l| l.contains(needle)).count();
    let malformed_lines = lines("that is not eMQP/1.0");
    let subscription_lines = lines("subscription to topic prefix") + lines("no subscriber left");
    let not_kept_lines = lines("not kept: the table holds");
    assert!(
        malformed_lines <= 5,
        "{malformed_lines} lines for {JUNK} malformed messages"
    );
    assert!(
        subscription_lines <= 2 * 5 && not_kept_lines <= 5,
        "{subscription_lines} lines for {} subscription changes, {not_kept_lines} for those \
         not kept",
        2 * TOPICS
    );
    let total = log.lines().count();
    assert!(total < 200, "{total} log lines in all");
    integration_tests::report(&format!(
        "pubsub floods: {TOPICS} topics of one subscriber with --max-subscriptions {KEPT}: \
         VmRSS {rss_start} kB at start, {rss_subscribed} kB subscribed, {rss_left} kB after it \
         left (table 0); {JUNK} malformed messages: {malformed_lines} line(s); \
         {subscription_lines} subscription line(s); {total} log lines in all"
    ));
}
