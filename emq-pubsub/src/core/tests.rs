//! The core on a fake clock, with 0.3.13's captured frames.

use std::time::Duration;

use emqp_proto::{Command, Message, Published, Request};

use super::{Config, Pubsub, Stats};

const T0: Duration = Duration::ZERO;

fn publish(id: &str, topic: &str, message: &[u8]) -> Vec<Vec<u8>> {
    Message::with_msgid(
        "m-1",
        Command::Publish {
            topic: topic.into(),
            message: message.to_vec(),
        },
    )
    .encode_routed(id.as_bytes().to_vec())
}

/// One incoming message; what it publishes (at most one message).
fn fed(c: &mut Pubsub, frames: Vec<Vec<u8>>, now: Duration) -> Option<Published> {
    let mut out = Vec::new();
    c.handle_incoming(frames, now, &mut out);
    assert!(out.len() <= 1, "{out:?}");
    out.pop()
}

fn core() -> Pubsub {
    Pubsub::new(Config::default(), T0)
}

type Frames = Vec<Vec<u8>>;

/// (client->pubsub frames, what 0.3.13's emq-pubsub published for them).
fn captured() -> Vec<(Frames, Frames)> {
    let path = format!(
        "{}/../emqp-proto/tests/vectors/publisher.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("vector file")).unwrap();
    let frames_of = |dir: &str| -> Vec<Frames> {
        doc["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["direction"] == dir)
            .map(|m| {
                m["frames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f.as_str().unwrap().as_bytes().to_vec())
                    .collect()
            })
            .collect()
    };
    frames_of("client->pubsub")
        .into_iter()
        .zip(frames_of("pubsub->subscriber"))
        .collect()
}

#[test]
fn publishes_what_0_3_13_published_for_the_captured_client_frames() {
    let cases = captured();
    assert_eq!(cases.len(), 4);
    let mut c = core();
    for (incoming, expected) in cases {
        let out = fed(&mut c, incoming, T0).expect("published");
        assert_eq!(out.encode(), expected);
    }
    assert_eq!(
        c.stats(),
        Stats {
            published: 4,
            unheard: 4,
            ..Stats::default()
        }
    );
}

#[test]
fn other_commands_and_junk_are_dropped_and_counted() {
    let mut c = core();
    let hb = Message::with_msgid("h", Command::Heartbeat { timestamp: None })
        .encode_routed(b"p".to_vec());
    assert_eq!(fed(&mut c, hb, T0), None);
    let req = Message::with_msgid(
        "r",
        Command::Request(Request {
            queue: "default".into(),
            headers: Default::default(),
            message: b"[]".to_vec(),
        }),
    )
    .encode_routed(b"p".to_vec());
    assert_eq!(fed(&mut c, req, T0), None);
    for junk in [
        vec![],
        vec![b"p".to_vec()],
        vec![
            b"p".to_vec(),
            b"".to_vec(),
            b"eMQP/9".to_vec(),
            b"PUBLISH".to_vec(),
        ],
        // PUBLISH without its message frame (0.3.13 dies of an IndexError)
        publish("p", "news", b"{}")[..6].to_vec(),
        // a topic that is not UTF-8
        {
            let mut f = publish("p", "news", b"{}");
            f[5] = vec![0xff];
            f
        },
    ] {
        assert_eq!(fed(&mut c, junk, T0), None);
    }
    assert_eq!(
        c.stats(),
        Stats {
            ignored: 2,
            malformed: 5,
            ..Stats::default()
        }
    );
    assert_eq!(c.stats().dropped(), 7);
}

#[test]
fn any_frames_at_all_never_panic() {
    // xorshift: reproducible junk, some of it shaped like PUBLISH
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut c = core();
    for _ in 0..5000 {
        let n = (next() % 9) as usize;
        let mut frames: Vec<Vec<u8>> = (0..n)
            .map(|_| (0..next() % 6).map(|_| next() as u8).collect())
            .collect();
        if next() % 2 == 0 && frames.len() >= 4 {
            frames[1] = Vec::new();
            frames[2] = b"eMQP/1.0".to_vec();
            frames[3] = b"PUBLISH".to_vec();
        }
        let _ = fed(&mut c, frames.clone(), T0);
        if let Some(f) = frames.first() {
            c.handle_subscription(f, T0);
        }
    }
}

#[test]
fn frames_over_the_size_limit_are_dropped() {
    let mut c = Pubsub::new(
        Config {
            max_message_size: Some(8),
            report_every: None,
            ..Config::default()
        },
        T0,
    );
    assert!(fed(&mut c, publish("p", "t", b"12345678"), T0).is_some());
    assert_eq!(fed(&mut c, publish("p", "t", b"123456789"), T0), None);
    assert_eq!(fed(&mut c, publish("p", "topic-too-long", b"1"), T0), None);
    assert_eq!(c.stats().too_large, 2);
    let mut unlimited = Pubsub::new(
        Config {
            max_message_size: None,
            report_every: None,
            ..Config::default()
        },
        T0,
    );
    let big = vec![b'x'; 1 << 20];
    assert!(fed(&mut unlimited, publish("p", "t", &big), T0).is_some());
}

#[test]
fn subscriptions_decide_what_counts_as_unheard() {
    let mut c = core();
    c.handle_subscription(b"\x01news", T0);
    c.handle_subscription(b"\x01news", T0); // duplicate: one prefix
    c.handle_subscription(b"\x01weather.", T0);
    c.handle_subscription(b"", T0); // nothing
    c.handle_subscription(b"\x07odd", T0); // not a subscription
    assert_eq!(
        c.subscriptions().collect::<Vec<_>>(),
        vec![&b"news"[..], &b"weather."[..]]
    );
    let out = fed(&mut c, publish("p", "news.sports", b"1"), T0).unwrap();
    assert_eq!(
        out,
        Published::of_publish("news.sports".into(), b"1".to_vec())
    );
    fed(&mut c, publish("p", "weather", b"2"), T0).unwrap();
    assert_eq!(c.stats().published, 2);
    assert_eq!(c.stats().unheard, 1, "weather does not start with weather.");
    c.handle_subscription(b"\x00news", T0);
    c.handle_subscription(b"\x00nothing", T0);
    fed(&mut c, publish("p", "news", b"3"), T0).unwrap();
    assert_eq!(c.stats().unheard, 2);
    // the empty prefix: every topic is heard
    c.handle_subscription(b"\x01", T0);
    fed(&mut c, publish("p", "", b"4"), T0).unwrap();
    fed(&mut c, publish("p", "anything", b"5"), T0).unwrap();
    assert_eq!(c.stats().unheard, 2);
    assert!(c
        .summary()
        .starts_with("5 published (2 to no subscriber), 0 dropped"));
}

#[test]
fn reports_are_due_every_period_and_do_not_burst_after_a_stall() {
    let every = Duration::from_secs(60);
    let mut c = Pubsub::new(
        Config {
            max_message_size: None,
            report_every: Some(every),
            ..Config::default()
        },
        Duration::from_secs(5),
    );
    assert_eq!(c.poll_timeout(), Some(Duration::from_secs(65)));
    fed(&mut c, publish("p", "t", b"1"), Duration::from_secs(6));
    assert_eq!(c.window.published, 1);
    c.handle_timeout(Duration::from_secs(64)); // early: nothing
    assert_eq!(c.window.published, 1);
    c.handle_timeout(Duration::from_secs(65));
    assert_eq!(c.window, Stats::default(), "the window restarts");
    assert_eq!(c.stats().published, 1, "totals stay");
    assert_eq!(c.poll_timeout(), Some(Duration::from_secs(125)));
    // the driver was stalled for ten periods: one report, the next a period later
    c.handle_timeout(Duration::from_secs(725));
    assert_eq!(c.poll_timeout(), Some(Duration::from_secs(785)));
    let quiet = Pubsub::new(
        Config {
            max_message_size: None,
            report_every: None,
            ..Config::default()
        },
        T0,
    );
    assert_eq!(quiet.poll_timeout(), None);
}

#[test]
fn a_flood_of_junk_writes_a_few_lines_then_one_summary_per_kind() {
    let mut c = Pubsub::new(
        Config {
            report_every: None,
            ..Config::default()
        },
        T0,
    );
    assert_eq!(c.poll_timeout(), None);
    let at = |ms: u64| T0 + Duration::from_millis(ms);
    for i in 0..20_000u64 {
        assert!(fed(&mut c, vec![b"p".to_vec(), b"junk".to_vec()], at(i / 10)).is_none());
    }
    assert_eq!(c.stats().malformed, 20_000, "every one is counted");
    // the first LOG_BURST were written; the summary of the rest is due when
    // the window that started with the first is over
    assert_eq!(c.poll_timeout(), Some(at(0) + super::LOG_WINDOW));
    c.handle_timeout(at(9_999));
    assert_eq!(c.poll_timeout(), Some(at(0) + super::LOG_WINDOW), "not yet");
    c.handle_timeout(at(10_000));
    assert_eq!(c.poll_timeout(), None, "summarised once");
    assert_eq!(
        c.quiet.malformed.take_summary(at(60_000)),
        None,
        "nothing left to summarise"
    );
}

#[test]
fn the_table_is_bounded_and_a_departed_subscriber_leaves_nothing_in_it() {
    let mut c = Pubsub::new(
        Config {
            max_subscriptions: 3,
            ..Config::default()
        },
        T0,
    );
    for t in ["a", "b", "c", "d", "e"] {
        c.handle_subscription(format!("\x01{t}").as_bytes(), T0);
    }
    c.handle_subscription(b"\x01a", T0); // kept already: nothing new
    assert_eq!(c.subscription_count(), (3, 2), "three kept, two not");
    assert_eq!(c.stats().untracked, 2);
    // "z" may have matched a prefix that is not kept: not counted as unheard
    fed(&mut c, publish("p", "z", b"1"), T0).unwrap();
    assert_eq!(c.stats().unheard, 0);
    assert!(
        c.summary()
            .contains("3 topic prefix(es) subscribed and 2 more not kept (--max-subscriptions)"),
        "{}",
        c.summary()
    );
    // the subscriber leaves: libzmq unsubscribes every prefix it held
    for t in ["a", "b", "c", "d", "e"] {
        c.handle_subscription(format!("\x00{t}").as_bytes(), T0);
    }
    assert_eq!(c.subscription_count(), (0, 0));
    fed(&mut c, publish("p", "z", b"2"), T0).unwrap();
    assert_eq!(
        c.stats().unheard,
        1,
        "now nobody is listening, and the core knows"
    );
}
