//! Batched acknowledgements (`router/acks.rs`): the acknowledgements of
//! one round to a client that sent `batched-acks` go in one ACKS, in
//! order with everything else sent to that client; other clients get
//! `REPLY [msgid]` each.

use super::*;

/// A REQUEST's frames as read off the frontend.
fn request(client: &str, msgid: &str, queue: &str, headers: &str) -> Input {
    let parts: &[&[u8]] = &[
        b"REQUEST",
        msgid.as_bytes(),
        queue.as_bytes(),
        headers.as_bytes(),
        br#"["call", {"handler": "noop", "args": null}]"#,
    ];
    Input::Frames {
        socket: Frontend,
        frames: crate::testing::frames(client.as_bytes(), parts),
    }
}

/// What `client` is sent, message by message: `acks:a,b`, `ack:a`,
/// `notice:a`, `reject:a`.
fn client_view(out: &[Action], client: &str) -> Vec<String> {
    decode(out.to_vec())
        .into_iter()
        .filter(|(s, i, _)| *s == Frontend && i == client)
        .filter_map(|(_, _, m)| match m.command {
            Command::Acks { orig_msgids } => Some(format!("acks:{}", orig_msgids.join(","))),
            Command::Reply(r) if r.orig_msgid.is_none() => {
                Some(format!("ack:{}", String::from_utf8_lossy(&r.payload)))
            }
            Command::Notice(n) => Some(format!("notice:{}", n.orig_msgid)),
            Command::Reject(r) => Some(format!("reject:{}", r.orig_msgid)),
            _ => None,
        })
        .collect()
}

/// A router with worker `w1` (4 slots) on `default`, in memory mode or
/// with a journal.
fn router(journal: bool) -> Router {
    let mut r = Router::new(Config {
        journal,
        ..Config::default()
    });
    let mut out = Vec::new();
    let inform = Message::with_msgid(
        "i",
        Command::Inform(Inform {
            queues: QueueSpec::from_inform_frame(br#"[[10, "default"]]"#).unwrap(),
            peer_type: Some(PeerType::Worker),
            features: vec!["job-ack".into()],
        }),
    );
    let mut handle = |m: Message| {
        r.handle(
            Input::Frames {
                socket: Backend,
                frames: m.encode_routed(b"w1".to_vec()),
            },
            SECOND,
            &mut out,
        )
    };
    handle(inform);
    for _ in 0..4 {
        handle(Message::with_msgid("rdy", Command::Ready));
    }
    r
}

/// One read round (one `out` the driver has not carried out yet): c's
/// three REQUESTs are acknowledged in one ACKS, d's (no header: a 0.3.13
/// client) in a REPLY each, and the jobs are dispatched as before.
#[test]
fn the_acks_of_one_round_to_one_client_go_in_one_message() {
    let mut r = router(false);
    let mut out = Vec::new();
    for (client, msgid) in [
        ("c", "j1"),
        ("d", "k1"),
        ("c", "j2"),
        ("d", "k2"),
        ("c", "j3"),
    ] {
        let headers = if client == "c" {
            "reply-requested,batched-acks"
        } else {
            "reply-requested"
        };
        r.handle(
            request(client, msgid, "default", headers),
            2 * SECOND,
            &mut out,
        );
    }
    assert_eq!(client_view(&out, "c"), ["acks:j1,j2,j3"]);
    assert_eq!(client_view(&out, "d"), ["ack:k1", "ack:k2"]);
    assert_eq!(
        forwarded(&decode(out.clone()), "w1"),
        ["j1", "k1", "j2", "k2"]
    );
    // Carried out: the next round starts a new ACKS.
    out.clear();
    r.handle(
        request("c", "j4", "default", "batched-acks"),
        3 * SECOND,
        &mut out,
    );
    assert_eq!(client_view(&out, "c"), ["acks:j4"]);
}

/// Nothing to a client changes order: a NOTICE queued after an ACKS (it
/// goes right before its own job's acknowledgement) makes that
/// acknowledgement start a new ACKS, which the next one joins.
#[test]
fn an_acks_grows_only_while_it_is_the_last_message_to_its_client() {
    let mut r = router(false);
    let mut out = Vec::new();
    r.handle(
        request("c", "j1", "default", "batched-acks"),
        2 * SECOND,
        &mut out,
    );
    r.handle(
        request("c", "j2", "mail", "batched-acks,notices"),
        2 * SECOND,
        &mut out,
    );
    r.handle(
        request("c", "j3", "default", "batched-acks"),
        2 * SECOND,
        &mut out,
    );
    assert_eq!(
        client_view(&out, "c"),
        ["acks:j1", "notice:j2", "acks:j2,j3"]
    );
}

/// With a journal the acknowledgements wait for their batch, then those
/// of one committed batch to one client leave in one ACKS; a failed
/// batch gives each job its REJECT and no acknowledgement.
#[test]
fn with_a_journal_the_acks_of_one_committed_batch_go_in_one_message() {
    for fails in [false, true] {
        let mut r = router(true);
        let mut out = Vec::new();
        for m in ["j1", "j2", "j3"] {
            r.handle(
                request("c", m, "default", "batched-acks"),
                2 * SECOND,
                &mut out,
            );
        }
        assert!(client_view(&out, "c").is_empty(), "held until committed");
        let mut now = 2 * SECOND;
        let mut batches: Vec<Batch> = Vec::new();
        for _ in 0..10 {
            batches.extend(out.iter().filter_map(|a| match a {
                Action::Journal(b) => Some(b.clone()),
                _ => None,
            }));
            if !batches.is_empty() {
                break;
            }
            now = r.poll_timeout().expect("a group commit is due");
            r.handle_timeout(now, &mut out);
        }
        assert_eq!(batches.len(), 1, "one batch holds the three jobs");
        let mut out = Vec::new();
        let result = if fails {
            BatchResult::Failed("disk full".into())
        } else {
            BatchResult::Committed
        };
        r.handle(
            Input::JournalDone {
                batch: batches[0].id,
                result,
            },
            now,
            &mut out,
        );
        if fails {
            assert_eq!(
                client_view(&out, "c"),
                ["reject:j1", "reject:j2", "reject:j3"]
            );
        } else {
            assert_eq!(client_view(&out, "c"), ["acks:j1,j2,j3"]);
        }
    }
}
