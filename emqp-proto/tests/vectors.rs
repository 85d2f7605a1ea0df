//! Decode every frame list captured from EventMQ 0.3.13 (copied from
//! `shared/vectors/` into `tests/vectors/`), check the decoded fields, and
//! check that re-encoding gives back the captured bytes exactly.

use emqp_proto::{Command, Header, Interval, Message, PeerType, QueueSpec};

fn frames_of(v: &serde_json::Value) -> Vec<Vec<u8>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = f.as_str().unwrap();
            assert!(!s.starts_with("b64:"), "all captured frames are text");
            s.as_bytes().to_vec()
        })
        .collect()
}

/// (direction, note, frames, has_identity) of every real message in a file.
fn load(file: &str) -> Vec<(String, String, Vec<Vec<u8>>, bool)> {
    let path = format!("{}/tests/vectors/{file}", env!("CARGO_MANIFEST_DIR"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    // Frames read off a ROUTER carry the identity in the files that say so.
    let routed_file = file != "router_to_peers.json";
    doc["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| {
            let dir = m["direction"].as_str().unwrap().to_string();
            let frames = frames_of(&m["frames"]);
            // Pseudo-entries such as "(nothing received within 500 ms)".
            if frames.len() < 2 {
                return None;
            }
            let routed = routed_file && dir.ends_with("->router");
            let note = m
                .get("note")
                .and_then(|n| n.as_str())
                .unwrap_or("")
                .to_string();
            Some((dir, note, frames, routed))
        })
        .collect()
}

fn decode_all(file: &str) -> Vec<(String, String, Message)> {
    let mut out = Vec::new();
    for (dir, note, frames, routed) in load(file) {
        let msg = if routed {
            let (id, msg) = Message::decode_routed(frames.clone())
                .unwrap_or_else(|e| panic!("{file} {dir} {note}: {e}"));
            assert_eq!(msg.clone().encode_routed(id), frames, "{file} {dir} {note}");
            msg
        } else {
            let msg = Message::decode(frames.clone())
                .unwrap_or_else(|e| panic!("{file} {dir} {note}: {e}"));
            assert_eq!(
                msg.clone().encode(),
                frames,
                "{file} {dir} {note}: byte-exact re-encode"
            );
            msg
        };
        out.push((dir, note, msg));
    }
    out
}

#[test]
fn every_captured_message_decodes_and_reencodes_byte_exact() {
    let mut n = 0;
    for f in [
        "client_to_router.json",
        "router_to_peers.json",
        "jobmanager_to_router.json",
        "jobmanager_inform_variants.json",
    ] {
        n += decode_all(f).len();
    }
    assert!(n >= 60, "expected the whole capture, decoded {n}");
}

#[test]
fn jobmanager_session_fields() {
    let msgs = decode_all("jobmanager_to_router.json");
    let Command::Inform(inform) = &msgs[0].2.command else {
        panic!("first message is INFORM")
    };
    assert_eq!(inform.queues, QueueSpec::default());
    assert_eq!(inform.peer_type, Some(PeerType::Worker));
    assert!(inform.features.is_empty());

    let Command::Ack {
        acked_msgid,
        features,
    } = &msgs[1].2.command
    else {
        panic!()
    };
    assert_eq!(acked_msgid, &msgs[0].2.msgid);
    assert!(features.is_empty(), "0.3.13's ACK has one frame");

    let Command::Heartbeat {
        timestamp: Some(ts),
    } = &msgs[2].2.command
    else {
        panic!()
    };
    assert!(ts.parse::<f64>().unwrap() > 1.7e9);

    let replies: Vec<_> = msgs
        .iter()
        .filter_map(|(_, _, m)| match &m.command {
            Command::Reply(r) => Some(r.clone()),
            _ => None,
        })
        .collect();
    assert!(!replies.is_empty());
    for r in &replies {
        // 0.3.13 worker REPLY: payload first, then the REQUEST's msgid.
        assert!(r.orig_msgid.is_some());
        assert!(r.status.is_none());
        let v: serde_json::Value = serde_json::from_slice(&r.payload).unwrap();
        assert!(v.get("value").is_some());
    }
    let requests: Vec<_> = msgs
        .iter()
        .filter(|(_, _, m)| matches!(m.command, Command::Request(_)))
        .collect();
    let first_reply = replies[0].orig_msgid.as_deref().unwrap();
    assert_eq!(first_reply, requests[0].2.msgid, "REPLY names the REQUEST");
    assert_eq!(msgs.last().unwrap().2.command.name(), "HEARTBEAT");
    assert!(msgs.iter().any(|(_, _, m)| m.command == Command::Kbye));
}

#[test]
fn client_requests_headers_and_schedules() {
    let msgs = decode_all("client_to_router.json");
    let reqs: Vec<_> = msgs
        .iter()
        .filter_map(|(_, _, m)| match &m.command {
            Command::Request(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(reqs.len(), 6);
    assert!(reqs[0].headers.0.is_empty());
    assert!(reqs[1].headers.reply_requested());
    assert_eq!(reqs[2].queue, "other");
    assert_eq!(
        reqs[2].headers.0,
        vec![
            Header::ReplyRequested,
            Header::Guarantee,
            Header::RetryCount(3),
            Header::Timeout(10)
        ]
    );
    for r in &reqs {
        let job = emqp_proto::job::Job::parse(&r.message).unwrap();
        assert!(matches!(job, emqp_proto::job::Job::Run(_)));
    }
    let scheds: Vec<_> = msgs
        .iter()
        .filter_map(|(_, _, m)| match &m.command {
            Command::Schedule(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(scheds.len(), 2);
    assert_eq!(scheds[0].interval, Interval::Every { ms: 60_000 });
    assert!(scheds[0].cron.is_empty());
    assert_eq!(scheds[1].interval, Interval::Unset);
    assert_eq!(scheds[1].cron, "*/5 * * * *");
    assert!(scheds[1].headers.nohaste());
    assert!(msgs
        .iter()
        .any(|(_, _, m)| matches!(m.command, Command::Unschedule(_))));
    let status = msgs
        .iter()
        .find(|(_, _, m)| m.command == Command::Status)
        .unwrap();
    assert!(status.2.msgid.starts_with("admin:"));
}

#[test]
fn router_side_messages() {
    let msgs = decode_all("router_to_peers.json");
    let sched = msgs
        .iter()
        .find_map(|(d, _, m)| match &m.command {
            Command::Inform(i) if d.starts_with("scheduler") => Some(i.clone()),
            _ => None,
        })
        .unwrap();
    assert!(sched.queues.is_empty());
    assert_eq!(sched.peer_type, Some(PeerType::Scheduler));
    let acks = msgs
        .iter()
        .filter(|(d, _, m)| d == "router->client" && matches!(m.command, Command::Reply(_)))
        .count();
    assert_eq!(acks, 2, "0.3.13 acks only the two dispatched REQUESTs");
    let admin: Vec<_> = msgs
        .iter()
        .filter_map(|(d, _, m)| match &m.command {
            Command::Reply(r) if d == "router->admin" => Some(r.payload.clone()),
            _ => None,
        })
        .collect();
    let status: serde_json::Value = serde_json::from_slice(&admin[0]).unwrap();
    for key in [
        "inflight_messages_by_queue",
        "waiting_messages_by_queue",
        "processed_messages_by_queue",
        "processed_messages_by_worker",
    ] {
        assert!(status.get(key).is_some(), "{key}");
    }
    assert!(msgs
        .iter()
        .any(|(d, _, m)| d == "admin->router" && m.command == Command::Disconnect));
}

#[test]
fn inform_variants() {
    let msgs = decode_all("jobmanager_inform_variants.json");
    let Command::Inform(a) = &msgs[0].2.command else {
        panic!()
    };
    assert!(
        a.queues.is_empty(),
        "-Q on the 0.3.13 CLI sends an empty frame"
    );
    let Command::Inform(b) = &msgs[1].2.command else {
        panic!()
    };
    assert_eq!(
        b.queues.0,
        vec![(20, "high".to_string()), (10, "default".to_string())]
    );
}

/// `publisher.json` (captured with `tests/python/capture_publish_vectors.py`):
/// 0.3.13's publisher client, and what 0.3.13's emq-pubsub published for
/// the same calls.
#[test]
fn publisher_client_and_0_3_13_pubsub_frames() {
    let path = format!(
        "{}/tests/vectors/publisher.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let of = |dir: &str| -> Vec<(String, Vec<Vec<u8>>)> {
        doc["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["direction"] == dir)
            .map(|m| {
                (
                    m["note"].as_str().unwrap().to_string(),
                    frames_of(&m["frames"]),
                )
            })
            .collect()
    };
    let sent = of("client->pubsub");
    let published = of("pubsub->subscriber");
    assert_eq!(sent.len(), 4);
    assert_eq!(
        published.len(),
        sent.len(),
        "one published message per call"
    );
    let mut topics = Vec::new();
    for ((note, frames), (_, out)) in sent.iter().zip(&published) {
        let (id, msg) =
            Message::decode_routed(frames.clone()).unwrap_or_else(|e| panic!("{note}: {e}"));
        assert_eq!(id, frames[0]);
        assert!(
            note.contains(&format!("returned '{}'", msg.msgid)),
            "{note}"
        );
        assert_eq!(
            msg.clone().encode_routed(id),
            *frames,
            "{note}: byte-exact re-encode"
        );
        let Command::Publish { topic, message } = msg.command else {
            panic!("{note}: not PUBLISH")
        };
        // the message is json.dumps of the argument
        serde_json::from_slice::<serde_json::Value>(&message).unwrap();
        // 0.3.13's emq-pubsub sent [topic, message] unchanged
        let expect = emqp_proto::Published::of_publish(topic.clone(), message);
        assert_eq!(
            emqp_proto::Published::decode(out.clone()),
            Ok(expect.clone()),
            "{note}"
        );
        assert_eq!(expect.encode(), *out, "{note}");
        topics.push(topic);
    }
    assert_eq!(topics, ["news", "news.sports", "", "nouvelles-été"]);
}
