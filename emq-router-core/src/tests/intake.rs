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
