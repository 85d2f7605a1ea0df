//! Decoding and intake (`router/intake.rs`): malformed and stray messages.

use super::*;

// ----- malformed ------------------------------------------------------------

#[test]
fn malformed_request_with_msgid_gets_reject_malformed() {
    let mut h = H::new();
    let frames: Vec<Vec<u8>> = ["c1", "", "eMQP/1.0", "REQUEST", "bad-1", "default"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let sent = h.frames(Frontend, frames);
    let rj = rejects(&sent, "c1");
    assert_eq!(rj.len(), 1);
    assert_eq!(rj[0].orig_msgid, "bad-1");
    assert_eq!(rj[0].reason, RejectReason::Malformed);
    // Bad headers too.
    let mut frames: Vec<Vec<u8>> = [
        "c1",
        "",
        "eMQP/1.0",
        "REQUEST",
        "bad-2",
        "q",
        "retry-count:x",
        "{}",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let sent = h.frames(Frontend, frames.clone());
    assert_eq!(rejects(&sent, "c1")[0].orig_msgid, "bad-2");
    // Non-UTF-8 msgid: nothing to answer with, dropped.
    frames[4] = vec![0xff, 0xfe];
    frames[6] = b"".to_vec();
    frames[5] = vec![0xff];
    assert!(h.frames(Frontend, frames).is_empty());
    assert_eq!(h.r.stats().accepted, 0);
}

#[test]
fn a_request_whose_message_is_json_but_not_an_array_is_refused_not_a_job() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    let request = |msgid: &str, msg: &str| -> Vec<Vec<u8>> {
        ["c1", "", "eMQP/1.0", "REQUEST", msgid, "default", "", msg]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect()
    };
    let sent = h.frames(Frontend, request("j1", r#"{"not": "a job"}"#));
    let rj = rejects(&sent, "c1");
    assert_eq!(rj.len(), 1, "{sent:?}");
    assert_eq!(rj[0].orig_msgid, "j1");
    assert_eq!(rj[0].reason, RejectReason::NotAJob);
    assert!(
        rj[0].text.contains("a JSON object, not a job"),
        "{}",
        rj[0].text
    );
    assert!(forwarded(&sent, "w1").is_empty());
    assert_eq!(h.r.stats().accepted, 0);
    // 0.3.13's form and a message that is not JSON are taken.
    let run = r#"["run", {"path": "pyemq_jobs", "callable": "noop", "args": [], "kwargs": {}}]"#;
    let sent = h.frames(Frontend, request("j2", run));
    assert_eq!(forwarded(&sent, "w1"), vec!["j2"]);
    let sent = h.frames(Frontend, request("j3", "opaque bytes"));
    assert!(rejects(&sent, "c1").is_empty(), "{sent:?}");
    assert_eq!(h.r.stats().accepted, 2);
}

#[test]
fn garbage_on_every_socket_is_dropped_without_panic() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    let garbage: Vec<Vec<Vec<u8>>> = vec![
        vec![],
        vec![b"id".to_vec()],
        vec![b"id".to_vec(), b"x".to_vec()],
        vec![b"w1".to_vec(), vec![], b"eMQP/1.0".to_vec()],
        vec![
            b"w1".to_vec(),
            vec![],
            b"eMQP/9.9".to_vec(),
            b"READY".to_vec(),
            b"m".to_vec(),
        ],
        vec![
            b"w1".to_vec(),
            vec![],
            b"eMQP/1.0".to_vec(),
            b"NOPE".to_vec(),
            b"m".to_vec(),
        ],
        vec![
            b"w1".to_vec(),
            vec![],
            b"eMQP/1.0".to_vec(),
            b"INFORM".to_vec(),
            b"m".to_vec(),
            b"[[".to_vec(),
        ],
        vec![
            b"w1".to_vec(),
            vec![],
            b"eMQP/1.0".to_vec(),
            b"REPLY".to_vec(),
            b"m".to_vec(),
            b"p".to_vec(),
            b"o".to_vec(),
            b"weird".to_vec(),
        ],
        vec![vec![0xff], vec![0xff], vec![0xff], vec![0xff], vec![0xff]],
    ];
    for socket in [Frontend, Backend] {
        for g in &garbage {
            let sent = h.frames(socket, g.clone());
            assert!(sent.is_empty(), "{socket:?} {g:?} -> {sent:?}");
        }
    }
    // On the admin socket: dropped too, but answered `bad-request` (never
    // silence for an operator's tool).
    for g in &garbage {
        let sent = h.frames(Admin, g.clone());
        if g.is_empty() {
            assert!(sent.is_empty(), "no identity, no one to answer");
            continue;
        }
        assert_eq!(sent.len(), 1, "{g:?} -> {sent:?}");
        let Command::Reply(r) = &sent[0].2.command else {
            panic!("{sent:?}")
        };
        let v: serde_json::Value = serde_json::from_slice(&r.payload).unwrap();
        assert_eq!(v["ok"], false);
        assert_eq!(v["error"]["kind"], "bad-request", "{v}");
    }
    assert!(h.r.stats().malformed_dropped >= 24);
    // The worker is still fine.
    assert_eq!(
        forwarded(&h.request("c", "j", "default", ""), "w1"),
        vec!["j"]
    );
}

#[test]
fn wrong_commands_on_wrong_sockets_are_ignored() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    // a worker INFORM on the frontend, a REQUEST on the backend, READY on admin
    let inf = Inform {
        queues: QueueSpec::default(),
        peer_type: Some(PeerType::Worker),
        features: vec![],
    };
    assert!(h.msg(Frontend, "x", "i", Command::Inform(inf)).is_empty());
    let req = Request {
        queue: "default".into(),
        headers: Headers::new(),
        message: b"[]".to_vec(),
    };
    assert!(h.msg(Backend, "w1", "r", Command::Request(req)).is_empty());
    assert!(h.msg(Admin, "a", "r", Command::Ready).is_empty());
    assert_eq!(h.r.stats().accepted, 0);
}

/// What client `client` was sent, in order: `ack:MSGID`,
/// `notice:MSGID:KIND`, `reject:MSGID` (other messages left out).
fn client_view(sent: &[Sent], client: &str) -> Vec<String> {
    to(sent, Frontend, client)
        .into_iter()
        .filter_map(|m| match &m.command {
            Command::Reply(r) if r.orig_msgid.is_none() => {
                Some(format!("ack:{}", String::from_utf8_lossy(&r.payload)))
            }
            Command::Notice(n) => Some(format!("notice:{}:{}", n.orig_msgid, n.kind.as_str())),
            Command::Reject(r) => Some(format!("reject:{}", r.orig_msgid)),
            _ => None,
        })
        .collect()
}

/// Issue 26 item 5: a client that sent the `notices` header hears, right
/// before the ACK (so a client that stops at the ACK has it), that its job went to `default` because nobody serves its
/// queue; one that did not (a 0.3.13 client) hears the ACK alone, and a
/// served queue gives no NOTICE.
#[test]
fn a_notice_comes_right_before_the_ack_of_a_job_sent_to_default_only_when_asked() {
    let mut h = H::new();
    worker(&mut h, "w1", r#"[[10, "default"]]"#, 4);
    let sent = h.request("c", "j1", "mail", "reply-requested,notices");
    assert_eq!(
        client_view(&sent, "c"),
        ["notice:j1:routed-to-default", "ack:j1"]
    );
    let Command::Notice(n) = &to(&sent, Frontend, "c")[0].command else {
        unreachable!()
    };
    assert!(
        n.text.contains("\"mail\"") && n.text.contains("\"default\""),
        "{}",
        n.text
    );
    assert_eq!(forwarded(&sent, "w1"), vec!["j1"]);
    let sent = h.request("c", "j2", "mail", "reply-requested");
    assert_eq!(client_view(&sent, "c"), ["ack:j2"]);
    let sent = h.request("c", "j3", "default", "notices");
    assert_eq!(client_view(&sent, "c"), ["ack:j3"]);
}

/// With `--unserved-queues hold` the NOTICE says the job is held.
#[test]
fn with_hold_the_notice_says_the_job_is_held() {
    let mut h = H::with(Config {
        unserved: crate::config::Unserved::Hold,
        ..Config::default()
    });
    worker(&mut h, "w1", r#"[[10, "default"]]"#, 2);
    let sent = h.request("c", "j1", "mail", "notices");
    assert_eq!(
        client_view(&sent, "c"),
        ["notice:j1:held-unserved", "ack:j1"]
    );
    assert!(forwarded(&sent, "w1").is_empty());
    assert_eq!(
        client_view(&h.request("c", "j2", "mail", ""), "c"),
        ["ack:j2"]
    );
}

/// With a journal the NOTICE and the ACK are held until the job's
/// record commits; when the batch fails the client hears only the REJECT.
#[test]
fn a_journaled_job_s_notice_leaves_with_its_ack_and_not_when_its_batch_fails() {
    let mut h = H::with(Config {
        journal: true,
        ..Config::default()
    });
    worker(&mut h, "w1", r#"[[10, "default"]]"#, 2);
    let mut r = Router::new(Config {
        journal: true,
        ..Config::default()
    });
    // Held: nothing leaves before the batch commits.
    let mut out = Vec::new();
    for m in [
        Message::with_msgid(
            "i",
            Command::Inform(Inform {
                queues: QueueSpec::from_inform_frame(br#"[[10, "default"]]"#).unwrap(),
                peer_type: Some(PeerType::Worker),
                features: vec!["job-ack".into()],
            }),
        ),
        Message::with_msgid(
            "j1",
            Command::Request(Request {
                queue: "mail".into(),
                headers: Headers::parse(b"notices").unwrap(),
                message: b"[]".to_vec(),
            }),
        ),
    ] {
        let socket = if m.msgid == "i" { Backend } else { Frontend };
        let identity = if m.msgid == "i" { "w1" } else { "c" };
        r.handle(
            Input::Message {
                socket,
                identity: identity.as_bytes().to_vec(),
                message: m,
            },
            SECOND,
            &mut out,
        );
    }
    assert!(client_view(&decode(out), "c").is_empty());
    // Committed: NOTICE then ACK.
    let sent = h.request("c", "j1", "mail", "notices");
    assert_eq!(
        client_view(&sent, "c"),
        ["notice:j1:routed-to-default", "ack:j1"]
    );
    h.fail_journal = Some("database or disk is full".into());
    let sent = h.request("c", "j2", "mail", "notices");
    assert_eq!(client_view(&sent, "c"), ["reject:j2"]);
}
