//! Round trip of every command, the typed errors of malformed input, and the
//! alternative forms where the seed and 0.3.13 differ.

use emqp_proto::command::{FEATURE_JOB_ACK, FEATURE_REPLY_RESEND, NAMES};
use emqp_proto::*;

fn f(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

fn every_command() -> Vec<Command> {
    let sched = Schedule {
        queue: "default".into(),
        headers: Headers(vec![Header::Guarantee, Header::NoHaste]),
        interval: Interval::Every { ms: 60_000 },
        message: br#"["run", {"path": "m", "callable": "f"}]"#.to_vec(),
        cron: String::new(),
    };
    vec![
        Command::Inform(Inform {
            queues: QueueSpec(vec![(10, "default".into()), (15, "email".into())]),
            peer_type: Some(PeerType::Worker),
            features: vec![],
        }),
        Command::Inform(Inform {
            queues: QueueSpec(vec![(10, "default".into())]),
            peer_type: Some(PeerType::Worker),
            features: vec![FEATURE_JOB_ACK.into()],
        }),
        Command::Inform(Inform {
            queues: QueueSpec(vec![]),
            peer_type: Some(PeerType::Scheduler),
            features: vec![],
        }),
        Command::Ack {
            acked_msgid: new_msgid(),
            features: vec![],
        },
        Command::Ack {
            acked_msgid: new_msgid(),
            features: vec![FEATURE_REPLY_RESEND.into(), "later".into()],
        },
        Command::Ready,
        Command::Request(Request {
            queue: "email".into(),
            headers: Headers(vec![Header::ReplyRequested, Header::Timeout(5)]),
            message: b"[\"call\", {\"handler\": \"echo\"}]".to_vec(),
        }),
        Command::Reply(Reply::ack_of("abc")),
        Command::Reply(Reply {
            payload: b"{\"value\": 1}".to_vec(),
            orig_msgid: Some("abc".into()),
            status: None,
            credit: 0,
        }),
        Command::Reply(Reply {
            credit: 3,
            ..Reply::result(b"{}".to_vec(), "abc".into(), ResultStatus::Ok)
        }),
        Command::Reply(Reply::result(
            b"{\"value\": 1}".to_vec(),
            "abc".into(),
            ResultStatus::Failed,
        )),
        Command::Heartbeat { timestamp: None },
        Command::Heartbeat {
            timestamp: Some("1796216977.4512658".into()),
        },
        Command::Disconnect,
        Command::Kbye,
        Command::Schedule(sched.clone()),
        Command::Unschedule(Schedule {
            interval: Interval::Unset,
            cron: "*/5 * * * *".into(),
            ..sched
        }),
        Command::Publish {
            topic: "news".into(),
            message: b"{}".to_vec(),
        },
        Command::Status,
        Command::RouterShowWorkers,
        Command::RouterShowSchedulers,
        Command::Admin {
            request: br#"{"op": "job", "msgid": "abc"}"#.to_vec(),
        },
        Command::Cancel {
            orig_msgid: "abc".into(),
        },
        Command::Result(JobResult {
            orig_msgid: "abc".into(),
            status: ResultStatus::Ok,
            payload: b"{\"value\": null}".to_vec(),
        }),
        Command::Reject(Reject {
            orig_msgid: "abc".into(),
            reason: RejectReason::QueueFull,
            text: "queue default is full (10000 jobs)".into(),
        }),
        Command::Reject(Reject {
            orig_msgid: "abc".into(),
            reason: RejectReason::JournalUncertain,
            text: "the commit's outcome is unknown".into(),
        }),
        Command::Reject(Reject {
            orig_msgid: "abc".into(),
            reason: RejectReason::Other("custom".into()),
            text: String::new(),
        }),
        Command::Notice(Notice {
            orig_msgid: "abc".into(),
            kind: NoticeKind::RoutedToDefault,
            text: "no job manager serves queue \"email\"".into(),
        }),
        Command::Notice(Notice {
            orig_msgid: "abc".into(),
            kind: NoticeKind::HeldUnserved,
            text: String::new(),
        }),
        Command::Notice(Notice {
            orig_msgid: "abc".into(),
            kind: NoticeKind::Other("later-kind".into()),
            text: "x".into(),
        }),
        Command::Received {
            orig_msgids: vec!["abc".into()],
        },
        Command::Received {
            orig_msgids: vec!["abc".into(), "def".into(), "ghi".into()],
        },
        Command::Running {
            orig_msgids: vec!["abc".into(), "def".into()],
        },
        Command::Acks {
            orig_msgids: vec!["abc".into(), "def".into()],
        },
        Command::Progress(emqp_proto::Progress {
            orig_msgid: "abc".into(),
            percent: 42,
            message: "half way".into(),
        }),
        Command::Progress(emqp_proto::Progress {
            orig_msgid: "abc".into(),
            percent: 100,
            message: String::new(),
        }),
        Command::Duplicate(Duplicate {
            orig_msgid: "abc".into(),
            existing_msgid: "def".into(),
            text: "unique key k".into(),
        }),
        Command::Workflow {
            spec: br#"{"nodes": [{"id": "a", "msg": ["call", {"handler": "noop"}]}]}"#.to_vec(),
        },
        Command::Batch {
            spec: br#"{"op": "close"}"#.to_vec(),
        },
    ]
}

#[test]
fn progress_over_100_or_not_a_number_is_refused() {
    for bad in ["101", "-1", "4.5", "x"] {
        let body = vec![b"abc".to_vec(), bad.as_bytes().to_vec(), b"".to_vec()];
        assert!(
            Command::decode(b"PROGRESS", body).is_err(),
            "percent {bad:?}"
        );
    }
}

#[test]
fn every_command_round_trips_with_and_without_identity() {
    let cmds = every_command();
    let names: std::collections::HashSet<_> = cmds.iter().map(|c| c.name()).collect();
    assert_eq!(
        names.len(),
        NAMES.len(),
        "a round trip for every command name"
    );
    for cmd in cmds {
        let msg = Message::new(cmd);
        let frames = msg.clone().encode();
        assert_eq!(frames[0], b"");
        assert_eq!(frames[1], PROTOCOL_VERSION.as_bytes());
        assert_eq!(Message::decode(frames).unwrap(), msg);
        let routed = msg.clone().encode_routed(b"peer-7".to_vec());
        let (id, back) = Message::decode_routed(routed).unwrap();
        assert_eq!(id, b"peer-7");
        assert_eq!(back, msg);
    }
}

#[test]
fn seed_inform_is_csv_without_type() {
    let m = Message::decode(f(&["", "eMQP/1.0", "INFORM", "m1", "default,email"])).unwrap();
    let Command::Inform(i) = m.command else {
        panic!()
    };
    assert_eq!(
        i.queues.0,
        vec![(10, "default".into()), (10, "email".into())]
    );
    assert_eq!(i.peer_type, None);
}

/// The ACK's FEATURES frame (emq): a csv read like INFORM's (trimmed,
/// empty items skipped), absent in 0.3.13's one-frame ACK, and not sent
/// when there is nothing to list, so an ACK without features is
/// byte for byte 0.3.13's. Frames after it are ignored, as after any
/// command.
#[test]
fn ack_features_frame() {
    let plain = f(&["", "eMQP/1.0", "ACK", "m1", "inform-1"]);
    let m = Message::decode(plain.clone()).unwrap();
    assert_eq!(
        m.command,
        Command::Ack {
            acked_msgid: "inform-1".into(),
            features: vec![],
        }
    );
    assert_eq!(m.encode(), plain);

    let with = f(&[
        "",
        "eMQP/1.0",
        "ACK",
        "m1",
        "inform-1",
        " reply-resend, ,x ",
        "more",
    ]);
    let m = Message::decode(with).unwrap();
    let Command::Ack { features, .. } = &m.command else {
        panic!("{m:?}")
    };
    assert_eq!(
        features,
        &[FEATURE_REPLY_RESEND.to_string(), "x".to_string()]
    );
    assert_eq!(
        m.encode(),
        f(&["", "eMQP/1.0", "ACK", "m1", "inform-1", "reply-resend,x"])
    );

    let empty = Message::decode(f(&["", "eMQP/1.0", "ACK", "m1", "inform-1", ""])).unwrap();
    assert_eq!(empty.encode(), plain);
    let bad = Message::decode(vec![
        b"".to_vec(),
        b"eMQP/1.0".to_vec(),
        b"ACK".to_vec(),
        b"m1".to_vec(),
        b"inform-1".to_vec(),
        vec![0xff, 0xfe],
    ]);
    assert!(bad.is_err(), "{bad:?}");
}

#[test]
fn seed_reply_and_heartbeat_forms() {
    let m = Message::decode(f(&["", "eMQP/1.0", "REPLY", "m1", "{\"value\": 2}"])).unwrap();
    let Command::Reply(r) = m.command else {
        panic!()
    };
    assert_eq!(r.orig_msgid, None);
    let m = Message::decode(f(&["", "eMQP/1.0", "HEARTBEAT", "m2"])).unwrap();
    assert_eq!(m.command, Command::Heartbeat { timestamp: None });
}

/// `reply-credit`: a fourth REPLY frame is a decimal count of READYs;
/// none when the count is 0, and anything else is malformed.
#[test]
fn reply_credit_frame() {
    let m = Message::decode(f(&["", "eMQP/1.0", "REPLY", "m1", "{}", "j1", "ok", "2"])).unwrap();
    let Command::Reply(r) = m.command else {
        panic!()
    };
    assert_eq!((r.orig_msgid.as_deref(), r.credit), (Some("j1"), 2));
    let m = Message::decode(f(&["", "eMQP/1.0", "REPLY", "m1", "{}", "j1", "ok"])).unwrap();
    let Command::Reply(r) = m.command else {
        panic!()
    };
    assert_eq!(r.credit, 0);
    let frames = Message::with_msgid("m1", Command::Reply(r)).encode();
    assert_eq!(frames.len(), 7, "no credit frame for no credit");
    for bad in ["", "-1", "x", "99999999999"] {
        let m = Message::decode(f(&["", "eMQP/1.0", "REPLY", "m1", "{}", "j1", "ok", bad]));
        assert!(m.is_err(), "{bad:?}: {m:?}");
    }
}

#[test]
fn three_frame_schedule_of_protocol_rst() {
    let m = Message::decode(f(&["", "eMQP/1.0", "SCHEDULE", "m", "q", "", "[]"])).unwrap();
    let Command::Schedule(s) = m.command else {
        panic!()
    };
    assert_eq!(
        (s.interval, s.message, s.cron),
        (Interval::Unset, b"[]".to_vec(), String::new())
    );
    let m = Message::decode(f(&[
        "", "eMQP/1.0", "SCHEDULE", "m", "q", "", "60.0", "[]", "",
    ]))
    .unwrap();
    let Command::Schedule(s) = m.command else {
        panic!()
    };
    assert_eq!(s.interval, Interval::Every { ms: 60_000 });
}

/// What 0.3.13's `schedule(s, 'pyemq_jobs.noop', interval_secs=1.5)` sends:
/// `str(1.5)` in the INTERVAL frame. It decodes to 1500 ms and re-encodes
/// byte for byte.
#[test]
fn python_float_intervals_decode_to_milliseconds() {
    let job = r#"["run", {"callable": "noop", "path": "pyemq_jobs", "args": [], "kwargs": {}, "class_args": [], "class_kwargs": {}}]"#;
    for (text, ms) in [("1.5", 1_500), ("0.5", 500), ("0.25", 250), ("60", 60_000)] {
        let frames = f(&[
            "",
            "eMQP/1.0",
            "SCHEDULE",
            "m",
            "default",
            "guarantee",
            text,
            job,
            "",
        ]);
        let m = Message::decode(frames.clone()).unwrap();
        let Command::Schedule(s) = &m.command else {
            panic!("{m:?}")
        };
        assert_eq!(s.interval, Interval::Every { ms }, "{text}");
        assert_eq!(s.interval.millis(), Some(ms));
        assert_eq!(m.encode(), frames, "{text}");
    }
    // Python's other float spellings decode to the same values.
    for (text, ms) in [("60.0", 60_000), ("1e-03", 1), ("2.5e+3", 2_500_000)] {
        let m = Message::decode(f(&[
            "",
            "eMQP/1.0",
            "UNSCHEDULE",
            "m",
            "q",
            "",
            text,
            "[]",
            "",
        ]))
        .unwrap();
        let Command::Unschedule(s) = m.command else {
            panic!()
        };
        assert_eq!(s.interval, Interval::Every { ms }, "{text}");
    }
}

/// Intervals nothing can schedule are typed decode errors naming the text
/// and the reason (the router answers them `REJECT malformed`).
#[test]
fn unusable_intervals_are_typed_errors() {
    for (text, reason) in [
        ("abc", IntervalError::NotANumber),
        ("", IntervalError::NotANumber),
        ("nan", IntervalError::NotFinite),
        ("inf", IntervalError::NotFinite),
        ("-inf", IntervalError::NotFinite),
        ("1e20", IntervalError::TooLarge),
        ("1e+20", IntervalError::TooLarge),
        ("0.0001", IntervalError::BelowOneMillisecond),
    ] {
        let e = Message::decode(f(&[
            "", "eMQP/1.0", "SCHEDULE", "m", "q", "", text, "[]", "",
        ]))
        .unwrap_err();
        assert_eq!(
            e,
            DecodeError::BadInterval {
                value: text.into(),
                reason
            }
        );
        let shown = e.to_string();
        assert!(
            shown.contains("interval") && shown.contains(&reason.to_string()),
            "{shown}"
        );
    }
}

#[test]
fn kbai_and_lower_case_commands_are_accepted() {
    let m = Message::decode(f(&["", "eMQP/1.0", "KBAI", "m"])).unwrap();
    assert_eq!(m.command, Command::Kbye);
    let m = Message::decode(f(&["", "eMQP/1.0", "ready", "m"])).unwrap();
    assert_eq!(m.command, Command::Ready);
}

#[test]
fn malformed_inputs_give_typed_errors() {
    use DecodeError::*;
    let cases: Vec<(Vec<Vec<u8>>, DecodeError)> = vec![
        (
            f(&["", "eMQP/1.0", "READY"]),
            TooFewFrames {
                command: None,
                expected: 4,
                got: 3,
            },
        ),
        (
            f(&["", "eMQP/1.0", "REQUEST", "m", "q"]),
            TooFewFrames {
                command: Some("REQUEST"),
                expected: 7,
                got: 5,
            },
        ),
        (
            f(&["", "eMQP/1.0", "ACK", "m"]),
            TooFewFrames {
                command: Some("ACK"),
                expected: 5,
                got: 4,
            },
        ),
        (f(&["x", "eMQP/1.0", "READY", "m"]), MissingDelimiter),
        (
            f(&["", "eMQP/9.9", "READY", "m"]),
            BadProtocolVersion("eMQP/9.9".into()),
        ),
        (
            f(&["", "eMQP/1.0", "FLY", "m"]),
            UnknownCommand("FLY".into()),
        ),
        (
            f(&["", "eMQP/1.0", "SCHEDULE", "m", "q", "", "often", "[]", ""]),
            BadInterval {
                value: "often".into(),
                reason: IntervalError::NotANumber,
            },
        ),
        (
            f(&["", "eMQP/1.0", "REQUEST", "m", "q", "timeout:soon", "[]"]),
            BadNumber {
                field: "timeout header",
                value: "soon".into(),
            },
        ),
        (
            f(&["", "eMQP/1.0", "REPLY", "m", "{}", "orig", "maybe"]),
            BadValue {
                field: "result status",
                value: "maybe".into(),
            },
        ),
        (
            f(&["", "eMQP/1.0", "INFORM", "m", "", "robot"]),
            BadValue {
                field: "peer type",
                value: "robot".into(),
            },
        ),
    ];
    for (frames, want) in cases {
        assert_eq!(
            Message::decode(frames.clone()).unwrap_err(),
            want,
            "{frames:?}"
        );
    }
    let mut bad_json = f(&["", "eMQP/1.0", "INFORM", "m", "[[10, \"a\"", "worker"]);
    assert!(matches!(
        Message::decode(bad_json.clone()),
        Err(BadJson {
            field: "queues",
            ..
        })
    ));
    bad_json[3] = vec![0xff, 0xfe];
    assert_eq!(
        Message::decode(bad_json).unwrap_err(),
        NotUtf8 { field: "msgid" }
    );
    let bad_queue = vec![
        b"".to_vec(),
        b"eMQP/1.0".to_vec(),
        b"REQUEST".to_vec(),
        b"m".to_vec(),
        vec![0xc3],
        b"".to_vec(),
        b"[]".to_vec(),
    ];
    assert_eq!(
        Message::decode(bad_queue).unwrap_err(),
        NotUtf8 { field: "queue" }
    );
    assert!(matches!(
        Message::decode_routed(vec![]),
        Err(TooFewFrames { .. })
    ));
    // Errors print as plain sentences for logs.
    assert_eq!(
        Message::decode(f(&["", "eMQP/1.0", "FLY", "m"]))
            .unwrap_err()
            .to_string(),
        "unknown command \"FLY\""
    );
}

#[test]
fn request_payload_is_kept_as_raw_bytes() {
    // The router never decodes job payloads: any bytes pass through.
    let mut frames = f(&["", "eMQP/1.0", "REQUEST", "m", "q", ""]);
    frames.push(vec![0, 159, 146, 150]);
    let m = Message::decode(frames.clone()).unwrap();
    assert_eq!(m.encode(), frames);
}

#[test]
fn publish_errors_are_typed_and_the_message_is_kept_raw() {
    use DecodeError::*;
    assert_eq!(
        Message::decode(f(&["", "eMQP/1.0", "PUBLISH", "m", "news"])).unwrap_err(),
        TooFewFrames {
            command: Some("PUBLISH"),
            expected: 6,
            got: 5,
        }
    );
    assert_eq!(
        Message::decode(f(&["", "eMQP/1.0", "PUBLISH", "m"])).unwrap_err(),
        TooFewFrames {
            command: Some("PUBLISH"),
            expected: 6,
            got: 4,
        }
    );
    let mut bad_topic = f(&["", "eMQP/1.0", "PUBLISH", "m", "", "{}"]);
    bad_topic[4] = vec![b'n', 0xff];
    assert_eq!(
        Message::decode(bad_topic).unwrap_err(),
        NotUtf8 { field: "topic" }
    );
    // The message is bytes (0.3.13 sends JSON text, but nothing reads it
    // on the way); an empty topic is a topic; trailing frames are ignored,
    // as 0.3.13's emq-pubsub ignores them.
    let mut frames = f(&["", "eMQP/1.0", "PUBLISH", "m", "", "", "extra"]);
    frames[5] = vec![0xff, 0x00, 0xfe];
    assert_eq!(
        Message::decode(frames).unwrap().command,
        Command::Publish {
            topic: String::new(),
            message: vec![0xff, 0x00, 0xfe],
        }
    );
    assert_eq!(
        Message::decode(f(&["", "eMQP/1.0", "PUBLISH", "m", "news"]))
            .unwrap_err()
            .to_string(),
        "too few frames for PUBLISH: expected at least 6, got 5"
    );
}

#[test]
fn received_carries_one_or_more_msgids_and_needs_one() {
    let m = Message::decode(f(&["", "eMQP/1.0", "RECEIVED", "m1", "a", "b"])).unwrap();
    assert_eq!(
        m.command,
        Command::Received {
            orig_msgids: vec!["a".into(), "b".into()]
        }
    );
    assert!(Message::decode(f(&["", "eMQP/1.0", "RECEIVED", "m1"])).is_err());
}

#[test]
fn running_carries_one_or_more_msgids_and_needs_one() {
    let m = Message::decode(f(&["", "eMQP/1.0", "RUNNING", "m1", "a", "b"])).unwrap();
    assert_eq!(
        m.command,
        Command::Running {
            orig_msgids: vec!["a".into(), "b".into()]
        }
    );
    assert!(Message::decode(f(&["", "eMQP/1.0", "RUNNING", "m1"])).is_err());
}

/// ACKS (emq): one or more acknowledged msgids, encoded back frame for
/// frame; none is malformed.
#[test]
fn acks_carry_one_or_more_msgids_and_need_one() {
    let frames = f(&["", "eMQP/1.0", "ACKS", "m1", "a", "b"]);
    let m = Message::decode(frames.clone()).unwrap();
    assert_eq!(
        m.command,
        Command::Acks {
            orig_msgids: vec!["a".into(), "b".into()]
        }
    );
    assert_eq!(m.encode(), frames);
    assert!(Message::decode(f(&["", "eMQP/1.0", "ACKS", "m1"])).is_err());
}

/// NOTICE (emq): three frames, typed errors for too few or non-UTF-8
/// frames, unknown kinds kept as sent, trailing frames ignored.
#[test]
fn notice_needs_three_utf8_frames_and_keeps_unknown_kinds() {
    let m = Message::decode(f(&[
        "",
        "eMQP/1.0",
        "NOTICE",
        "m1",
        "abc",
        "held-unserved",
        "held",
        "extra",
    ]))
    .unwrap();
    assert_eq!(
        m.command,
        Command::Notice(Notice {
            orig_msgid: "abc".into(),
            kind: NoticeKind::HeldUnserved,
            text: "held".into(),
        })
    );
    assert_eq!(
        Message::decode(f(&["", "eMQP/1.0", "NOTICE", "m1", "abc", "k"]))
            .unwrap_err()
            .to_string(),
        "too few frames for NOTICE: expected at least 7, got 6"
    );
    let mut bad = f(&["", "eMQP/1.0", "NOTICE", "m1", "abc", "k", "t"]);
    bad[5] = vec![0xff];
    assert_eq!(
        Message::decode(bad).unwrap_err(),
        DecodeError::NotUtf8 {
            field: "notice kind"
        }
    );
    let m = Message::decode(f(&["", "eMQP/1.0", "NOTICE", "m1", "a", "new", ""])).unwrap();
    let Command::Notice(n) = m.command else {
        panic!("{m:?}")
    };
    assert_eq!(n.kind, NoticeKind::Other("new".into()));
}

/// DUPLICATE (emq): three UTF-8 frames, round trip; a `duplicate` REJECT
/// names the holder in its TEXT.
#[test]
fn duplicate_round_trips_and_duplicate_reject_names_the_holder() {
    let d = Command::Duplicate(Duplicate {
        orig_msgid: "new".into(),
        existing_msgid: "old".into(),
        text: "unique key k is held".into(),
    });
    let frames = Message::with_msgid("m1", d.clone()).encode();
    assert_eq!(Message::decode(frames).unwrap().command, d);
    assert_eq!(
        Message::decode(f(&["", "eMQP/1.0", "DUPLICATE", "m1", "new", "old"]))
            .unwrap_err()
            .to_string(),
        "too few frames for DUPLICATE: expected at least 7, got 6"
    );
    let r = Reject::duplicate("new".into(), "old", "unique key k is held");
    assert_eq!(r.reason, RejectReason::Duplicate);
    assert_eq!(r.duplicate_of(), Some("old"));
    let frames = Message::with_msgid("m2", Command::Reject(r.clone())).encode();
    let Command::Reject(back) = Message::decode(frames).unwrap().command else {
        panic!()
    };
    assert_eq!(back.duplicate_of(), Some("old"));
    let other = Reject {
        orig_msgid: "x".into(),
        reason: RejectReason::QueueFull,
        text: "a: b".into(),
    };
    assert_eq!(other.duplicate_of(), None);
}
