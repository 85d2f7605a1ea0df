//! Workers and schedulers as peers (`router/peers.rs`): registration,
//! heartbeats and liveness, send failures, redelivery of a removed worker's
//! jobs.

use super::*;

// ----- registration ---------------------------------------------------------

#[test]
fn inform_is_acked_with_its_msgid_then_heartbeat_and_worker_has_no_slot() {
    let mut h = H::new();
    let sent = h.inform("w1", r#"[[10, "default"]]"#, &[]);
    let m = to(&sent, Backend, "w1");
    assert_eq!(m.len(), 2, "{sent:?}");
    assert_eq!(
        m[0].command,
        Command::Ack {
            acked_msgid: "inform-w1".into(),
            features: vec![],
        }
    );
    assert!(matches!(
        m[1].command,
        Command::Heartbeat { timestamp: Some(_) }
    ));
    assert_ne!(m[0].msgid, "inform-w1");
    // 0 slots: a REQUEST is buffered, not dispatched.
    let sent = h.request("c1", "j1", "default", "");
    assert!(forwarded(&sent, "w1").is_empty());
    assert_eq!(h.r.buffered_count(), 1);
}

#[test]
fn empty_inform_queues_mean_the_default_queues() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    let v = admin(&mut h, Command::RouterShowWorkers);
    assert_eq!(
        v["connected_workers"]["w1"]["queues"],
        serde_json::json!([[10, "default"]])
    );
    let sent = h.request("c1", "j1", "default", "");
    assert_eq!(forwarded(&sent, "w1"), vec!["j1"]);
}

#[test]
fn configured_default_queues_apply_to_empty_inform() {
    let mut h = H::with(Config {
        default_queues: QueueSpec::parse_cli("10:default,20:email").unwrap(),
        ..Config::default()
    });
    worker(&mut h, "w1", "", 1);
    let sent = h.request("c1", "j1", "email", "");
    assert_eq!(forwarded(&sent, "w1"), vec!["j1"]);
}

#[test]
fn seed_csv_inform_and_features_are_recorded() {
    let mut h = H::new();
    h.inform("w1", "default,email", &["job-ack", "x"]);
    let v = admin(&mut h, Command::RouterShowWorkers);
    let w = &v["connected_workers"]["w1"];
    assert_eq!(
        w["queues"],
        serde_json::json!([[10, "default"], [10, "email"]])
    );
    assert_eq!(w["features"], serde_json::json!(["job-ack", "x"]));
    assert_eq!(w["available_slots"], 0);
}

#[test]
fn scheduler_inform_on_frontend_is_acked_and_listed() {
    let mut h = H::new();
    let inf = Inform {
        queues: QueueSpec(vec![]),
        peer_type: Some(PeerType::Scheduler),
        features: vec![],
    };
    let sent = h.msg(Frontend, "s1", "inf-s1", Command::Inform(inf));
    let m = to(&sent, Frontend, "s1");
    assert_eq!(
        m[0].command,
        Command::Ack {
            acked_msgid: "inf-s1".into(),
            features: vec![],
        }
    );
    let v = admin(&mut h, Command::RouterShowSchedulers);
    assert!(v["connected_schedulers"]["s1"]["hb"].is_number());
    assert_eq!(h.r.worker_count(), 0);
}

#[test]
fn schedule_goes_verbatim_to_newest_scheduler_unschedule_to_all() {
    let mut h = H::new();
    sched(&mut h, "s1");
    sched(&mut h, "s2");
    let out = h.input(Input::Frames {
        socket: Frontend,
        frames: schedule_frames("SCHEDULE"),
    });
    let sends: Vec<_> = out
        .iter()
        .filter_map(|a| match a {
            Action::Send {
                identity, frames, ..
            } => Some((identity.clone(), frames.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(sends.len(), 2, "one scheduler and the client's ack");
    assert_eq!(sends[0].0, b"s2");
    // Byte for byte, including the odd header spacing.
    assert_eq!(sends[0].1, schedule_frames("SCHEDULE")[1..].to_vec());
    assert_eq!(sends[1].0, b"c1");
    let sent = h.frames(Frontend, schedule_frames("UNSCHEDULE"));
    let to_schedulers: Vec<_> = sent.iter().filter(|(_, id, _)| id != "c1").collect();
    assert_eq!(to_schedulers.len(), 2);
    assert!(to_schedulers
        .iter()
        .all(|(_, _, m)| matches!(m.command, Command::Unschedule(_)) && m.msgid == "sch-1"));
    let acks = to(&sent, Frontend, "c1");
    assert!(
        acks.len() == 1 && is_ack_of(acks[0], "sch-1"),
        "UNSCHEDULE is acked"
    );
}

#[test]
fn schedule_without_scheduler_is_booked_and_acked() {
    let mut h = H::new();
    let s = Schedule {
        queue: "default".into(),
        headers: Headers::new(),
        interval: emqp_proto::Interval::Every { ms: 5_000 },
        message: b"[]".to_vec(),
        cron: String::new(),
    };
    let sent = h.msg(Frontend, "c1", "s", Command::Schedule(s));
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(is_ack_of(&sent[0].2, "s"));
    assert_eq!(h.r.schedules().len(), 1);
}

#[test]
fn scheduler_kbye_and_timeout_remove_it() {
    let mut h = H::new();
    sched(&mut h, "s1");
    sched(&mut h, "s2");
    h.msg(Frontend, "s1", "k", Command::Kbye);
    assert_eq!(h.r.scheduler_count(), 1);
    h.advance(10 * SECOND);
    assert_eq!(h.r.scheduler_count(), 0);
}

// ----- redelivery -----------------------------------------------------------

#[test]
fn kbye_sends_unfinished_jobs_back_to_queue_front_in_order() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 2);
    h.request("c", "a", "default", "");
    h.request("c", "b", "default", "");
    h.request("c", "z", "default", ""); // buffered behind
    assert_eq!(h.r.buffered_count(), 1);
    h.msg(Backend, "w1", "k", Command::Kbye);
    assert_eq!(h.r.worker_count(), 0);
    assert_eq!(h.r.buffered_count(), 3);
    assert_eq!(h.r.stats().redelivered, 2);
    worker(&mut h, "w2", "", 0);
    let mut order = vec![];
    for _ in 0..3 {
        order.extend(forwarded(&h.ready("w2"), "w2"));
    }
    assert_eq!(order, vec!["a", "b", "z"]);
}

#[test]
fn removed_worker_jobs_go_straight_to_a_free_worker() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "a", "default", "");
    worker(&mut h, "w2", "", 1);
    let sent = h.msg(Backend, "w1", "k", Command::Kbye);
    assert_eq!(forwarded(&sent, "w2"), vec!["a"]);
    let Command::Request(r) = &to(&sent, Backend, "w2")[0].command else {
        panic!()
    };
    assert_eq!(r.queue, "default");
}

#[test]
fn heartbeat_timeout_removes_worker_and_redelivers() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "a", "default", "");
    worker(&mut h, "w2", "", 0);
    // w2 keeps talking, w1 is silent past 3 s × 3.
    for _ in 0..3 {
        h.advance(3 * SECOND);
        h.heartbeat("w2");
    }
    assert_eq!(h.r.worker_count(), 2, "not yet: exactly 9 s of silence");
    h.advance(SECOND);
    assert_eq!(h.r.worker_count(), 1);
    assert!(h.r.pool.id_of(b"w1").is_none());
    let sent = h.ready("w2");
    assert_eq!(forwarded(&sent, "w2"), vec!["a"]);
}

#[test]
fn send_failure_to_worker_removes_it_and_requeues_the_job_first() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.inform("w2", "", &["job-ack"]);
    h.request("c", "b", "default", ""); // to w1
    h.request("c", "later", "default", ""); // buffered
    let out = h.input(Input::SendFailed {
        socket: Backend,
        identity: b"w1".to_vec(),
        reason: SendFailure::HostUnreachable,
    });
    assert!(decode(out).is_empty());
    assert_eq!(h.r.worker_count(), 1);
    let sent = h.ready("w2");
    assert_eq!(forwarded(&sent, "w2"), vec!["b"]);
    // EAGAIN (peer at HWM) counts as failure as well.
    let _ = h.input(Input::SendFailed {
        socket: Backend,
        identity: b"w2".to_vec(),
        reason: SendFailure::WouldBlock,
    });
    assert_eq!(h.r.worker_count(), 0);
    assert_eq!(h.r.buffered_count(), 2);
}

#[test]
fn lost_deliveries_beyond_max_attempts_dead_letter_with_failed_result() {
    let mut h = H::with(Config {
        max_attempts: 3,
        ..Config::default()
    });
    h.request("c", "doomed", "default", "reply-requested");
    for i in 0..3 {
        let w = format!("w{i}");
        worker(&mut h, &w, "", 1);
        assert_eq!(h.r.inflight_count(), 1);
        let sent = h.msg(Backend, &w, "k", Command::Kbye);
        if i < 2 {
            assert!(results(&sent, "c").is_empty());
        } else {
            let rs = results(&sent, "c");
            assert_eq!(rs.len(), 1);
            assert_eq!(rs[0].status, ResultStatus::Failed);
            let v: serde_json::Value = serde_json::from_slice(&rs[0].payload).unwrap();
            assert_eq!(v["error"]["kind"], "dead-lettered");
            assert_eq!(v["error"]["attempts"], 3);
        }
    }
    assert_eq!(h.r.stats().dead_lettered, 1);
    assert!(h.r.unfinished_jobs().is_empty());
    let v = admin(&mut h, Command::Status);
    assert_eq!(v["dead_letter"]["count"], 1);
    assert_eq!(v["dead_letter"]["recent"][0]["msgid"], "doomed");
}

// ----- heartbeats -----------------------------------------------------------

#[test]
fn heartbeats_go_to_workers_and_schedulers_every_interval_with_unix_time() {
    let mut h = H::with(Config {
        epoch_unix_micros: 1_796_000_000_000_000,
        ..Config::default()
    });
    h.now = us(500_000); // 0.5 s after start
    h.inform("w1", "", &[]);
    sched(&mut h, "s1");
    let sent = h.tick();
    assert_eq!(sent.len(), 2);
    for (_, _, m) in &sent {
        let Command::Heartbeat {
            timestamp: Some(ts),
        } = &m.command
        else {
            panic!("{m:?}")
        };
        assert_eq!(ts, "1796000000.5");
    }
    assert!(h.advance(SECOND).is_empty());
    h.heartbeat("w1");
    assert!(h.advance(SECOND).is_empty());
    assert_eq!(h.advance(SECOND).len(), 2);
}

#[test]
fn any_message_counts_as_heartbeat() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 0);
    for _ in 0..5 {
        h.advance(5 * SECOND);
        h.ready("w1");
    }
    // even malformed ones
    h.advance(5 * SECOND);
    h.frames(
        Backend,
        vec![
            b"w1".to_vec(),
            vec![],
            b"eMQP/1.0".to_vec(),
            b"BOGUS".to_vec(),
            b"x".to_vec(),
        ],
    );
    h.advance(5 * SECOND);
    assert_eq!(h.r.worker_count(), 1);
    h.advance(5 * SECOND);
    assert_eq!(h.r.worker_count(), 0);
}

#[test]
fn messages_from_unknown_workers_get_nothing() {
    let mut h = H::new();
    h.request("c", "j", "default", "");
    for cmd in [
        Command::Ready,
        Command::Heartbeat { timestamp: None },
        Command::Kbye,
        Command::Reply(Reply::result(b"{}".to_vec(), "j".into(), ResultStatus::Ok)),
    ] {
        assert!(h.msg(Backend, "ghost", "m", cmd).is_empty());
    }
    assert_eq!(h.r.worker_count(), 0);
    assert_eq!(h.r.buffered_count(), 1);
}

#[test]
fn reconnect_with_new_identity_is_a_new_worker() {
    let mut h = H::new();
    worker(&mut h, "w-old", "", 1);
    h.request("c", "a", "default", "");
    worker(&mut h, "w-new", "", 1);
    assert_eq!(h.r.worker_count(), 2);
    // The old one times out, its job goes to the new one.
    for _ in 0..4 {
        h.advance(3 * SECOND);
        h.heartbeat("w-new");
    }
    assert_eq!(h.r.worker_count(), 1);
    assert_eq!(h.r.inflight_count(), 1);
    let id = h.r.pool.id_of(b"w-new").unwrap();
    assert_eq!(h.r.pool.get(id).unwrap().inflight.len(), 1);
}

#[test]
fn second_inform_from_same_identity_re_registers() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 2);
    h.request("c", "a", "default", "");
    let sent = h.inform("w1", r#"[[10, "default"]]"#, &["job-ack"]);
    assert!(matches!(
        to(&sent, Backend, "w1")[0].command,
        Command::Ack { .. }
    ));
    assert_eq!(h.r.worker_count(), 1);
    assert_eq!(h.r.buffered_count(), 1);
    assert_eq!(forwarded(&h.ready("w1"), "w1"), vec!["a"]);
}
