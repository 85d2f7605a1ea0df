//! The rules of `connection/link.rs`: connecting, INFORM and ACK,
//! heartbeats and router silence, link down, malformed messages.

use super::*;

/// The first `n` ids a core seeded with `seed` hands out.
fn seeded_ids(seed: u64, n: usize) -> Vec<String> {
    let mut ids = MsgIds::seeded(seed);
    (0..n).map(|_| ids.next_id()).collect()
}

#[test]
fn start_connects_and_sends_one_inform_with_queues_worker_and_features() {
    let (mut h, a) = Harness::new(2);
    assert_eq!(names(&a), ["connect", "INFORM"]);
    let ids = seeded_ids(SEED, 2);
    let Action::Connect { endpoint, identity } = &a[0] else {
        panic!()
    };
    assert_eq!(endpoint, "tcp://127.0.0.1:1");
    assert_eq!(identity, &ids[0], "identity from the seeded ids");
    assert_eq!(h.c.identity(), ids[0]);
    let Action::Send(m) = &a[1] else { panic!() };
    let frames = m.clone().encode();
    assert_eq!(
        frames[3],
        ids[1].as_bytes(),
        "INFORM msgid from the seeded ids"
    );
    assert_eq!(frames[4], br#"[[10, "default"], [15, "email"]]"#);
    assert_eq!(frames[5], b"worker");
    assert_eq!(frames[6], b"job-ack,cancel");
    // Nothing more (no second INFORM, no READY, no HEARTBEAT) before the ACK timeout.
    assert_eq!(h.c.poll_timeout(), Some(ms(5000)));
    assert!(h.advance(ms(4999)).is_empty());
}

#[test]
fn the_same_seed_gives_the_same_frames_and_another_seed_other_ids() {
    let run = |seed: u64| {
        let mut c = cfg(2);
        c.id_seed = seed;
        let (mut h, a) = Harness::with(c);
        let mut all = a.clone();
        all.extend(h.ack(ms(10), &a));
        all.extend(h.at(ms(20), req_msg("j", Headers::new())));
        let s = starts(&all);
        all.extend(h.at(ms(30), finished(&s[0], JobOutcome::Value(json!(1)))));
        all.extend(h.advance(ms(3030)));
        all
    };
    let a = run(1);
    assert_eq!(
        names(&a),
        [
            "connect",
            "INFORM",
            "READY",
            "READY",
            "start",
            "REPLY",
            "READY",
            "HEARTBEAT"
        ]
    );
    assert_eq!(a, run(1));
    let ids = |a: &[Action]| -> Vec<String> {
        a.iter()
            .filter_map(|x| match x {
                Action::Send(m) => Some(m.msgid.clone()),
                _ => None,
            })
            .collect()
    };
    let (one, two) = (ids(&a), ids(&run(2)));
    assert!(one.iter().all(|id| !two.contains(id)), "{one:?} {two:?}");
    let mut unique = one.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), one.len(), "every msgid differs");
}

#[test]
fn no_ack_reconnects_with_fresh_identity_to_next_broker_and_informs_again() {
    let (mut h, a) = Harness::new(1);
    let first = h.c.identity().to_string();
    let a2 = h.fire_at(ms(5000));
    assert_eq!(names(&a2), ["connect", "INFORM"]);
    let Action::Connect { endpoint, identity } = &a2[0] else {
        panic!()
    };
    assert_eq!(endpoint, "tcp://127.0.0.1:2");
    assert_ne!(identity, &first);
    assert_ne!(inform_msgid(&a), inform_msgid(&a2));
    // An ACK of the new INFORM registers.
    let a3 = h.ack(ms(5100), &a2);
    assert_eq!(names(&a3), ["READY"]);
    // Third connect goes back to the first broker.
    let (mut h, _) = Harness::new(1);
    h.fire_at(ms(5000));
    let a = h.fire_at(ms(10000));
    assert!(matches!(&a[0], Action::Connect { endpoint, .. } if endpoint == "tcp://127.0.0.1:1"));
}

#[test]
fn ack_sends_one_ready_per_slot_without_waiting_for_a_heartbeat() {
    let (mut h, a) = Harness::new(3);
    let a = h.ack(ms(10), &a);
    assert_eq!(names(&a), ["READY", "READY", "READY"]);
    assert!(h.c.is_registered());
    assert_eq!(
        h.c.slot_counts(),
        SlotCounts {
            offered: 3,
            idle: 0,
            busy: 0,
            extra: 0,
            held: 0
        }
    );
    // A duplicate ACK (or a 0.3.13 router's HEARTBEAT) adds no READY.
    let a = h.ack(
        ms(20),
        &[Action::Send(Message::new(Command::Inform(Inform {
            queues: QueueSpec::default(),
            peer_type: None,
            features: vec![],
        })))],
    );
    assert!(a.is_empty());
    assert!(h
        .msg(ms(30), Command::Heartbeat { timestamp: None })
        .is_empty());
}

#[test]
fn ack_with_another_msgid_is_accepted() {
    let (mut h, _) = Harness::new(1);
    let a = h.msg(
        ms(10),
        Command::Ack {
            acked_msgid: "something-else".into(),
            features: vec![],
        },
    );
    assert_eq!(names(&a), ["READY"]);
}

#[test]
fn malformed_frames_are_dropped_counted_and_do_not_count_as_router_life() {
    let mut h = registered(1);
    let deadline = h.c.poll_timeout();
    for (i, frames) in [
        vec![b"junk".to_vec()],
        vec![
            vec![],
            b"eMQP/0.9".to_vec(),
            b"READY".to_vec(),
            b"id".to_vec(),
        ],
        vec![
            vec![],
            b"eMQP/1.0".to_vec(),
            b"REQUEST".to_vec(),
            b"id".to_vec(),
        ],
    ]
    .into_iter()
    .enumerate()
    {
        assert!(h.at(ms(100 + i as u64), Input::Frames(frames)).is_empty());
    }
    assert_eq!(h.c.malformed_count(), 3);
    assert!(h.c.is_registered());
    assert_eq!(h.c.poll_timeout(), deadline);
    assert_eq!(h.c.slot_counts().offered, 1);
}

#[test]
fn heartbeat_every_interval_only_when_nothing_else_was_sent() {
    let mut h = registered(1);
    // READYs went out at 10 ms: the next heartbeat is due at 3010 ms.
    assert_eq!(h.c.poll_timeout(), Some(ms(3010)));
    assert!(h.advance(ms(2000)).is_empty());
    // Keep the router alive.
    h.msg(ms(2500), Command::Heartbeat { timestamp: None });
    let a = h.fire_at(ms(3010));
    assert_eq!(names(&a), ["HEARTBEAT"]);
    let Action::Send(Message {
        command: Command::Heartbeat {
            timestamp: Some(ts),
        },
        ..
    }) = &a[0]
    else {
        panic!()
    };
    assert_eq!(ts, "1000003.01");
    assert_eq!(h.c.poll_timeout(), Some(ms(6010)));
    // Something else sent (a REPLY + READY) postpones the next heartbeat.
    let s = starts(&h.at(ms(4000), req_msg("j", Headers::new())));
    h.msg(ms(5000), Command::Heartbeat { timestamp: None });
    h.at(ms(5500), finished(&s[0], JobOutcome::Value(json!(1))));
    assert_eq!(h.c.poll_timeout(), Some(ms(8500)));
    assert!(h.advance(ms(8499)).is_empty());
    assert_eq!(names(&h.advance(ms(8500))), ["HEARTBEAT"]);
}

#[test]
fn any_router_message_counts_as_a_heartbeat() {
    let mut h = registered(2);
    // Only REQUESTs, no HEARTBEATs, for 20 s: no reconnect.
    for i in 0..10u64 {
        let a = h.at(
            ms(2000 * (i + 1)),
            req_msg(&format!("j{i}"), Headers::new()),
        );
        let s = starts(&a);
        h.at(
            ms(2000 * (i + 1) + 1),
            finished(&s[0], JobOutcome::Value(json!(null))),
        );
        assert_eq!(count(&h.advance(ms(2000 * (i + 1) + 1999)), "connect"), 0);
    }
}

#[test]
fn router_silence_reconnects_to_next_broker_with_new_identity_ready_only_for_free_slots() {
    let mut h = registered(2);
    let old = h.c.identity().to_string();
    let s = starts(&h.at(ms(100), req_msg("long", Headers::new())));
    // Heartbeats go out at 3010, 6010, 9010 ms; the router stays silent.
    assert_eq!(
        names(&h.advance(ms(9100))),
        ["HEARTBEAT", "HEARTBEAT", "HEARTBEAT"],
        "9 s after the last message at 100 ms: not dead yet"
    );
    let a = h.fire_at(ms(9100) + Duration::from_micros(1));
    assert_eq!(names(&a), ["connect", "INFORM"]);
    let Action::Connect { endpoint, identity } = &a[0] else {
        panic!()
    };
    assert_eq!(endpoint, "tcp://127.0.0.1:2");
    assert_ne!(identity, &old);
    assert!(!h.c.is_registered());
    // After the ACK: READY only for the one free slot.
    let a2 = h.ack(ms(9200), &a);
    assert_eq!(names(&a2), ["READY"]);
    // The job that ran across the reconnect replies on the new connection.
    let a3 = h.at(ms(9300), finished(&s[0], JobOutcome::Value(json!("done"))));
    assert_eq!(names(&a3), ["REPLY", "READY"]);
    assert_eq!(replies(&a3)[0].orig_msgid.as_deref(), Some("long"));
    assert_eq!(h.c.slot_counts().offered, 2);
}

#[test]
fn works_with_a_0_3_13_router_flow() {
    // ACK, HEARTBEATs every 3 s, a REQUEST with 0.3.13 headers and payload.
    let (mut h, a) = Harness::new(2);
    let id = inform_msgid(&a).unwrap();
    let a = h.at(
        ms(50),
        Input::Frames(
            Message::with_msgid(
                "0cd877dd",
                Command::Ack {
                    acked_msgid: id,
                    features: vec![],
                },
            )
            .encode(),
        ),
    );
    assert_eq!(count(&a, "READY"), 2);
    h.msg(
        ms(3000),
        Command::Heartbeat {
            timestamp: Some("1796217053.0917153".into()),
        },
    );
    let payload = br#"["run", {"callable": "noop", "path": "pyemq_jobs", "args": [], "kwargs": {}, "class_args": [], "class_kwargs": {}}]"#;
    let a = h.at(
        ms(3100),
        Input::Frames(
            Message::with_msgid(
                "df85c496",
                request(
                    Headers::parse(b"reply-requested").unwrap(),
                    payload.to_vec(),
                ),
            )
            .encode(),
        ),
    );
    let s = starts(&a);
    assert!(matches!(&s[0].job, Job::Run(r) if r.callable == "noop"));
}

#[test]
fn link_down_reconnects_at_once_and_running_jobs_reply_on_the_new_connection() {
    for router_resends in [false, true] {
        let mut h = if router_resends {
            registered_resend(2)
        } else {
            registered(2)
        };
        let old = h.c.identity().to_string();
        let s = starts(&h.at(ms(100), req_msg("long", Headers::new())));
        let a = h.link_down(ms(200));
        assert_eq!(names(&a), ["connect", "INFORM"]);
        let Action::Connect { endpoint, identity } = &a[0] else {
            panic!()
        };
        assert_eq!(endpoint, "tcp://127.0.0.1:2", "the next broker");
        assert_ne!(identity, &old, "a fresh identity");
        assert_eq!(h.c.slot_counts().busy, 1, "the job keeps running");
        assert_eq!(h.c.slot_counts().offered, 0, "the router forgot our READYs");
        // Finished before the ACK: its REPLY waits for it.
        assert!(h
            .at(ms(250), finished(&s[0], JobOutcome::Value(json!(1))))
            .is_empty());
        let a2 = if router_resends {
            h.ack_resend(ms(300), &a)
        } else {
            h.ack(ms(300), &a)
        };
        assert_eq!(names(&a2), ["REPLY", "READY", "READY"], "{router_resends}");
        assert_eq!(replies(&a2)[0].orig_msgid.as_deref(), Some("long"));
    }
}

/// After a reconnect, a router whose ACK lists `adopt-running` gets
/// `RUNNING` with the jobs still running (before the READYs), so that it
/// does not deliver them again; one that does not list it gets nothing
/// of the kind; with nothing running there is no RUNNING.
#[test]
fn running_jobs_are_announced_after_a_reconnect_to_a_router_that_adopts_them() {
    for adopts in [true, false] {
        let mut h = registered(3);
        let s1 = starts(&h.at(ms(100), req_msg("long-1", Headers::new())));
        starts(&h.at(ms(110), req_msg("long-2", Headers::new())));
        let a = h.link_down(ms(200));
        assert_eq!(names(&a), ["connect", "INFORM"]);
        let id = inform_msgid(&a).unwrap();
        let features = if adopts {
            vec![FEATURE_ADOPT_RUNNING.into()]
        } else {
            vec![]
        };
        let a2 = h.msg(
            ms(300),
            Command::Ack {
                acked_msgid: id,
                features,
            },
        );
        if !adopts {
            assert_eq!(names(&a2), ["READY"], "no RUNNING");
            continue;
        }
        assert_eq!(
            names(&a2),
            ["RUNNING", "READY"],
            "RUNNING before the READYs"
        );
        let running = sent(&a2, "RUNNING");
        let Command::Running { orig_msgids } = &running[0].command else {
            panic!()
        };
        assert_eq!(orig_msgids, &["long-1", "long-2"]);
        // The next reconnect, with nothing running: no RUNNING.
        h.at(ms(400), finished(&s1[0], JobOutcome::Value(json!(1))));
        let a = h.link_down(ms(500));
        let id = inform_msgid(&a).unwrap();
        let a3 = h.msg(
            ms(600),
            Command::Ack {
                acked_msgid: id,
                features: vec![FEATURE_ADOPT_RUNNING.into()],
            },
        );
        assert_eq!(
            names(&a3),
            ["RUNNING", "READY", "READY"],
            "long-2 still runs"
        );
    }
}

#[test]
fn link_down_of_a_replaced_connection_or_before_the_ack_is_ignored() {
    let mut h = registered_resend(1);
    let old = h.c.identity().to_string();
    let a = h.link_down(ms(100));
    assert_eq!(names(&a), ["connect", "INFORM"]);
    // Waiting for the ACK: the ACK timeout covers a lost INFORM.
    assert!(h.link_down(ms(150)).is_empty());
    // A late event of the replaced socket.
    assert!(h.at(ms(160), Input::LinkDown { identity: old }).is_empty());
    let a2 = h.ack_resend(ms(200), &a);
    assert_eq!(names(&a2), ["READY"]);
    // After the router said KBYE (no job running): the reconnect is due anyway.
    h.msg(ms(300), Command::Kbye);
    assert!(h.link_down(ms(310)).is_empty());
    assert_eq!(names(&h.fire_at(ms(1300))), ["connect", "INFORM"]);
}

#[test]
fn link_down_while_draining_reconnects_and_the_reply_waits_for_the_ack() {
    let mut h = registered_resend(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    h.msg(ms(200), Command::Kbye);
    assert!(h.c.is_draining());
    let a = h.link_down(ms(300));
    assert_eq!(names(&a), ["connect", "INFORM"]);
    assert!(h
        .at(ms(400), finished(&s[0], JobOutcome::Value(json!(1))))
        .is_empty());
    assert_eq!(names(&h.ack_resend(ms(500), &a)), ["REPLY", "READY"]);
}

/// The INFORM features in `actions`.
fn inform_features(actions: &[Action]) -> Vec<String> {
    let m = sent(actions, "INFORM");
    let Command::Inform(inf) = &m[0].command else {
        panic!()
    };
    inf.features.clone()
}

/// The ACK's `take-back=KEY` is kept and listed in the INFORM of every
/// later connection (so that the new identity may take back the jobs
/// running across the reconnect); without one (a 0.3.13 router), the
/// INFORM lists only job-ack and cancel.
#[test]
fn the_take_back_key_of_the_ack_goes_with_every_later_inform() {
    let key = "0123456789abcdef0123456789abcdef";
    let (mut h, a) = Harness::new(1);
    assert_eq!(inform_features(&a), ["job-ack", "cancel"]);
    let id = inform_msgid(&a).unwrap();
    h.msg(
        ms(10),
        Command::Ack {
            acked_msgid: id,
            features: vec![FEATURE_ADOPT_RUNNING.into(), format!("take-back={key}")],
        },
    );
    for (i, t) in [100, 300].into_iter().enumerate() {
        let a = h.link_down(ms(t));
        assert_eq!(
            inform_features(&a),
            [
                "job-ack".to_string(),
                "cancel".into(),
                format!("take-back={key}")
            ],
            "reconnect {i}"
        );
        let id = inform_msgid(&a).unwrap();
        // a router that lists no key (0.3.13, or not now): the key stays
        h.msg(
            ms(t + 50),
            Command::Ack {
                acked_msgid: id,
                features: vec![],
            },
        );
    }
    // a 0.3.13 router never gives one: nothing extra is listed
    let (mut h, a) = Harness::new(1);
    h.ack(ms(10), &a);
    assert_eq!(
        inform_features(&h.link_down(ms(100))),
        ["job-ack", "cancel"]
    );
}

/// Issue 32: no router running said `no ACK for our INFORM: reconnecting`
/// every 5 s. Now: the address and what to check, the first time at each
/// address, then at attempts 2, 4, 8, ... with the count.
#[test]
fn no_router_is_said_with_the_address_and_not_every_attempt() {
    use super::super::link::no_router_note;
    let t = Duration::from_secs(5);
    let first = no_router_note("tcp://127.0.0.1:47291", 1, 1, t).expect("said at once");
    assert_eq!(
        first,
        "no router answered at tcp://127.0.0.1:47291 within 5 s \u{2014} is emq-router \
         running with --backend there? Trying again"
    );
    let said: Vec<u32> = (1..=20)
        .filter(|&a| no_router_note("A", a, 1, t).is_some())
        .collect();
    assert_eq!(said, [1, 2, 4, 8, 16]);
    assert!(no_router_note("A", 8, 1, t)
        .unwrap()
        .ends_with("(8 attempts so far)"));
    // Three addresses: each named once in the first round.
    let said: Vec<u32> = (1..=9)
        .filter(|&a| no_router_note("A", a, 3, t).is_some())
        .collect();
    assert_eq!(said, [1, 2, 3, 4, 8]);
}
