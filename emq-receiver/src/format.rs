//! Turning received frames into one JSON object per message.
//!
//! A decoded message:
//! `{"identity": ..., "command": ..., "msgid": ..., "fields": {...}, "frames": N}`
//! (`identity` is null on non-ROUTER sockets). Frames that do not decode:
//! `{"error": "<DecodeError>", "frames": ["...", ...]}`, the identity frame
//! included. Text that is not UTF-8 is shown as `"b64:<base64>"`.

use emqp_proto::{Command, Headers, Message};
use serde_json::{json, Map, Value};

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].iter().enumerate() {
            if i <= chunk.len() {
                out.push(B64[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A frame as text: the UTF-8 string, or `b64:<base64>` when it is not UTF-8.
pub fn text_or_b64(bytes: &[u8]) -> Value {
    match std::str::from_utf8(bytes) {
        Ok(s) => Value::from(s),
        Err(_) => Value::from(format!("b64:{}", base64(bytes))),
    }
}

/// A payload: parsed JSON when it is JSON, else text (or `b64:`).
pub fn json_or_text(bytes: &[u8]) -> Value {
    match std::str::from_utf8(bytes) {
        Ok(s) => serde_json::from_str(s).unwrap_or_else(|_| Value::from(s)),
        Err(_) => Value::from(format!("b64:{}", base64(bytes))),
    }
}

fn headers_list(h: &Headers) -> Value {
    Value::Array(
        h.0.iter()
            .map(|x| Value::from(Headers(vec![x.clone()]).encode()))
            .collect(),
    )
}

/// The decoded body fields of a command, by name.
pub fn fields(cmd: &Command) -> Value {
    match cmd {
        Command::Inform(i) => json!({
            "queues": i.queues.0.iter().map(|(w, n)| json!([w, n])).collect::<Vec<_>>(),
            "peer_type": i.peer_type.as_ref().map(|t| t.as_str()),
            "features": i.features,
        }),
        Command::Ack {
            acked_msgid,
            features,
        } if features.is_empty() => json!({ "acked_msgid": acked_msgid }),
        Command::Ack {
            acked_msgid,
            features,
        } => json!({ "acked_msgid": acked_msgid, "features": features }),
        Command::Request(r) => json!({
            "queue": r.queue,
            "headers": headers_list(&r.headers),
            "message": json_or_text(&r.message),
        }),
        Command::Reply(r) => json!({
            "payload": json_or_text(&r.payload),
            "orig_msgid": r.orig_msgid,
            "status": r.status.map(|s| s.as_str()),
        }),
        Command::Heartbeat { timestamp } => json!({ "timestamp": timestamp }),
        Command::Schedule(s) | Command::Unschedule(s) => json!({
            "queue": s.queue,
            "headers": headers_list(&s.headers),
            "interval_secs": s.interval,
            "message": json_or_text(&s.message),
            "cron": s.cron,
        }),
        Command::Publish { topic, message } => json!({
            "topic": topic,
            "message": json_or_text(message),
        }),
        Command::Result(r) => json!({
            "orig_msgid": r.orig_msgid,
            "status": r.status.as_str(),
            "payload": json_or_text(&r.payload),
        }),
        Command::Reject(r) => json!({
            "orig_msgid": r.orig_msgid,
            "reason": r.reason.as_str(),
            "text": r.text,
        }),
        Command::Notice(n) => json!({
            "orig_msgid": n.orig_msgid,
            "kind": n.kind.as_str(),
            "text": n.text,
        }),
        Command::Duplicate(d) => json!({
            "orig_msgid": d.orig_msgid,
            "existing_msgid": d.existing_msgid,
            "text": d.text,
        }),
        Command::Admin { request } => json!({ "request": json_or_text(request) }),
        Command::Workflow { spec } | Command::Batch { spec } => {
            json!({ "spec": json_or_text(spec) })
        }
        Command::Cancel { orig_msgid } => json!({ "orig_msgid": orig_msgid }),
        Command::Received { orig_msgids }
        | Command::Running { orig_msgids }
        | Command::Acks { orig_msgids } => {
            json!({ "orig_msgids": orig_msgids })
        }
        Command::Progress(p) => json!({
            "orig_msgid": p.orig_msgid,
            "percent": p.percent,
            "message": p.message,
        }),
        Command::Ready
        | Command::Disconnect
        | Command::Kbye
        | Command::Status
        | Command::RouterShowWorkers
        | Command::RouterShowSchedulers => Value::Object(Map::new()),
    }
}

/// The JSON object of a decoded message.
pub fn message_json(identity: Option<&[u8]>, msg: &Message, frames: usize) -> Value {
    json!({
        "identity": identity.map(text_or_b64),
        "command": msg.command.name(),
        "msgid": msg.msgid,
        "fields": fields(&msg.command),
        "frames": frames,
    })
}

/// What a received multipart message amounts to.
#[derive(Debug, Clone, PartialEq)]
pub struct Formatted {
    pub json: Value,
    /// The decoded message (with its identity on a ROUTER), when it decoded.
    pub message: Option<(Option<Vec<u8>>, Message)>,
}

/// Decode and format frames as received on a socket; `routed` means a
/// ROUTER socket (first frame = identity). Never panics.
pub fn format_frames(frames: Vec<Vec<u8>>, routed: bool) -> Formatted {
    let n = frames.len();
    let raw: Vec<Value> = frames.iter().map(|f| text_or_b64(f)).collect();
    let decoded = if routed {
        Message::decode_routed(frames).map(|(id, m)| (Some(id), m))
    } else {
        Message::decode(frames).map(|m| (None, m))
    };
    match decoded {
        Ok((identity, msg)) => Formatted {
            json: message_json(identity.as_deref(), &msg, n),
            message: Some((identity, msg)),
        },
        Err(e) => Formatted {
            json: json!({ "error": e.to_string(), "frames": raw }),
            message: None,
        },
    }
}

/// A SUB socket receives EventMQ publisher frames `[topic, message]`
/// ([`emqp_proto::Published`]), not eMQP envelopes; they are shown as a
/// PUBLISH without msgid. `None` for another number of frames.
pub fn format_published(frames: &[Vec<u8>]) -> Option<Value> {
    let p = emqp_proto::Published::decode(frames.to_vec()).ok()?;
    Some(json!({
        "identity": null,
        "command": "PUBLISH",
        "msgid": null,
        "fields": {"topic": text_or_b64(&p.topic), "message": json_or_text(&p.message)},
        "frames": 2,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use emqp_proto::job::{Job, RunJob};
    use emqp_proto::{
        Header, Inform, Interval, JobResult, PeerType, QueueSpec, Reject, RejectReason, Reply,
        Request, ResultStatus, Schedule,
    };

    fn routed(cmd: Command) -> Value {
        let frames = Message::with_msgid("m-1", cmd).encode_routed(b"peer-1".to_vec());
        let f = format_frames(frames, true);
        assert!(f.message.is_some());
        f.json
    }

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o, "{i}");
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }

    #[test]
    fn inform_from_0_3_13_and_emq() {
        let v = routed(Command::Inform(Inform {
            queues: QueueSpec(vec![(10, "default".into()), (15, "email".into())]),
            peer_type: Some(PeerType::Worker),
            features: vec!["job-ack".into()],
        }));
        assert_eq!(
            v,
            json!({"identity": "peer-1", "command": "INFORM", "msgid": "m-1",
                   "fields": {"queues": [[10, "default"], [15, "email"]], "peer_type": "worker",
                              "features": ["job-ack"]},
                   "frames": 8})
        );
        // seed form: csv queues, no type frame
        let frames = vec![
            b"id".to_vec(),
            vec![],
            b"eMQP/1.0".to_vec(),
            b"INFORM".to_vec(),
            b"m".to_vec(),
            b"a,b".to_vec(),
        ];
        let v = format_frames(frames, true).json;
        assert_eq!(v["fields"]["queues"], json!([[10, "a"], [10, "b"]]));
        assert_eq!(v["fields"]["peer_type"], Value::Null);
    }

    #[test]
    fn request_fields_with_headers_and_json_message() {
        let mut h = Headers::new();
        h.push(Header::ReplyRequested).push(Header::RetryCount(3));
        let job = Job::Run(RunJob {
            callable: "f".into(),
            path: "m".into(),
            args: vec![],
            kwargs: Default::default(),
            class_args: vec![],
            class_kwargs: Default::default(),
        });
        let v = routed(Command::Request(Request {
            queue: "default".into(),
            headers: h,
            message: job.to_message(),
        }));
        assert_eq!(v["command"], "REQUEST");
        assert_eq!(v["fields"]["queue"], "default");
        assert_eq!(
            v["fields"]["headers"],
            json!(["reply-requested", "retry-count:3"])
        );
        assert_eq!(v["fields"]["message"][0], "run");
        assert_eq!(v["fields"]["message"][1]["callable"], "f");
        // a message that is not JSON stays a string; not UTF-8 becomes b64
        let v = routed(Command::Request(Request {
            queue: "q".into(),
            headers: Headers::new(),
            message: b"hello".to_vec(),
        }));
        assert_eq!(v["fields"]["message"], "hello");
        assert_eq!(v["fields"]["headers"], json!([]));
        let v = routed(Command::Request(Request {
            queue: "q".into(),
            headers: Headers::new(),
            message: vec![0xff, 0x00],
        }));
        assert_eq!(v["fields"]["message"], "b64:/wA=");
    }

    #[test]
    fn every_other_command_kind() {
        let cases: Vec<(Command, Value)> = vec![
            (
                Command::Ack {
                    acked_msgid: "i-1".into(),
                    features: vec![],
                },
                json!({"acked_msgid": "i-1"}),
            ),
            (Command::Ready, json!({})),
            (
                Command::Reply(Reply::ack_of("r-1")),
                json!({"payload": "r-1", "orig_msgid": null, "status": null}),
            ),
            (
                Command::Reply(Reply::result(
                    br#"{"value": 1}"#.to_vec(),
                    "r-1".into(),
                    ResultStatus::Ok,
                )),
                json!({"payload": {"value": 1}, "orig_msgid": "r-1", "status": "ok"}),
            ),
            (
                Command::Heartbeat {
                    timestamp: Some("1796216977.4512658".into()),
                },
                json!({"timestamp": "1796216977.4512658"}),
            ),
            (
                Command::Heartbeat { timestamp: None },
                json!({"timestamp": null}),
            ),
            (Command::Disconnect, json!({})),
            (Command::Kbye, json!({})),
            (Command::Status, json!({})),
            (Command::RouterShowWorkers, json!({})),
            (Command::RouterShowSchedulers, json!({})),
            (
                Command::Schedule(Schedule {
                    queue: "default".into(),
                    headers: Headers(vec![Header::Guarantee]),
                    interval: Interval::Every { ms: 60_000 },
                    message: b"[1]".to_vec(),
                    cron: String::new(),
                }),
                json!({"queue": "default", "headers": ["guarantee"], "interval_secs": 60,
                       "message": [1], "cron": ""}),
            ),
            (
                Command::Unschedule(Schedule {
                    queue: "default".into(),
                    headers: Headers(vec![Header::NoHaste]),
                    interval: Interval::Unset,
                    message: b"[1]".to_vec(),
                    cron: "*/5 * * * *".into(),
                }),
                json!({"queue": "default", "headers": ["nohaste"], "interval_secs": -1,
                       "message": [1], "cron": "*/5 * * * *"}),
            ),
            (
                Command::Publish {
                    topic: "t".into(),
                    message: b"x".to_vec(),
                },
                json!({"topic": "t", "message": "x"}),
            ),
            (
                Command::Result(JobResult {
                    orig_msgid: "r-1".into(),
                    status: ResultStatus::Failed,
                    payload: br#"{"error": {"kind": "exit", "message": "m"}}"#.to_vec(),
                }),
                json!({"orig_msgid": "r-1", "status": "failed",
                       "payload": {"error": {"kind": "exit", "message": "m"}}}),
            ),
            (
                Command::Reject(Reject {
                    orig_msgid: "r-1".into(),
                    reason: RejectReason::QueueFull,
                    text: "queue default is full".into(),
                }),
                json!({"orig_msgid": "r-1", "reason": "queue-full",
                       "text": "queue default is full"}),
            ),
        ];
        for (cmd, expect) in cases {
            let name = cmd.name();
            let v = routed(cmd);
            assert_eq!(v["command"], name);
            assert_eq!(v["msgid"], "m-1");
            assert_eq!(v["identity"], "peer-1");
            assert_eq!(v["fields"], expect, "{name}");
        }
    }

    #[test]
    fn dealer_side_has_null_identity() {
        let frames = Message::with_msgid("m", Command::Ready).encode();
        let v = format_frames(frames, false).json;
        assert_eq!(
            v,
            json!({"identity": null, "command": "READY", "msgid": "m", "fields": {}, "frames": 4})
        );
    }

    #[test]
    fn non_utf8_identity_is_b64() {
        let frames = Message::with_msgid("m", Command::Ready).encode_routed(vec![0, 0x80, 1]);
        let v = format_frames(frames, true).json;
        assert_eq!(v["identity"], "b64:AIAB");
    }

    #[test]
    fn malformed_messages_become_error_lines() {
        let cases: Vec<(Vec<Vec<u8>>, &str)> = vec![
            (vec![], "too few frames"),
            (vec![b"id".to_vec(), b"x".to_vec()], "too few frames"),
            (
                vec![
                    b"id".to_vec(),
                    b"x".to_vec(),
                    b"eMQP/1.0".to_vec(),
                    b"READY".to_vec(),
                    b"m".to_vec(),
                ],
                "missing empty delimiter",
            ),
            (
                vec![
                    b"id".to_vec(),
                    vec![],
                    b"eMQP/1.0".to_vec(),
                    b"FLY".to_vec(),
                    b"m".to_vec(),
                ],
                "unknown command",
            ),
            (
                vec![
                    b"id".to_vec(),
                    vec![],
                    b"eMQP/1.0".to_vec(),
                    b"REQUEST".to_vec(),
                    vec![0xff],
                ],
                "msgid is not UTF-8",
            ),
            (
                vec![
                    b"id".to_vec(),
                    vec![],
                    b"eMQP/1.0".to_vec(),
                    b"REQUEST".to_vec(),
                    b"m".to_vec(),
                    b"q".to_vec(),
                ],
                "too few frames for REQUEST",
            ),
        ];
        for (frames, needle) in cases {
            let raw: Vec<Value> = frames.iter().map(|f| text_or_b64(f)).collect();
            let f = format_frames(frames, true);
            assert!(f.message.is_none());
            let err = f.json["error"].as_str().unwrap().to_string();
            assert!(err.contains(needle), "{err} lacks {needle}");
            assert_eq!(f.json["frames"], Value::Array(raw));
            assert_eq!(f.json.as_object().unwrap().len(), 2);
        }
        let f = format_frames(
            vec![vec![], b"eMQP/1.0".to_vec(), b"READY".to_vec(), vec![0xc3]],
            false,
        );
        assert_eq!(f.json["frames"][3], "b64:ww==");
    }

    #[test]
    fn published_frames() {
        let v = format_published(&[b"news".to_vec(), b"{\"a\":1}".to_vec()]).unwrap();
        assert_eq!(v["command"], "PUBLISH");
        assert_eq!(v["fields"]["message"], json!({"a": 1}));
        // an empty topic is a topic (0.3.13 publishes send_publish_request(s, '', m))
        let v = format_published(&[vec![], b"x".to_vec()]).unwrap();
        assert_eq!(v["fields"]["topic"], "");
        assert!(format_published(&[b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]).is_none());
        assert!(format_published(&[b"a".to_vec()]).is_none());
    }
}
