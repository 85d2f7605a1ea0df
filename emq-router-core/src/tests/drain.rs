//! Shutdown (`router/drain.rs`): DISCONNECT, the shutdown input, step-down,
//! the drain timeout.

use super::*;

#[test]
fn admin_disconnect_acks_kbyes_everyone_rejects_new_work_and_exits_when_drained() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    sched(&mut h, "s1");
    h.request("c", "busy", "default", "reply-requested");
    h.request("c", "queued", "default", "");
    let out = h.input(Input::Frames {
        socket: Admin,
        frames: Message::with_msgid("admin:d", Command::Disconnect).encode_routed(b"adm".to_vec()),
    });
    assert!(!out.contains(&Action::Exit), "a job is still in flight");
    let sent = decode(out);
    assert_eq!(
        to(&sent, Admin, "adm")[0].command,
        Command::Ack {
            acked_msgid: "admin:d".into(),
            features: vec![],
        }
    );
    assert_eq!(to(&sent, Backend, "w1")[0].command, Command::Kbye);
    assert_eq!(to(&sent, Frontend, "s1")[0].command, Command::Kbye);
    assert!(h.r.is_draining());
    // New work is refused.
    let rj = rejects(&h.request("c", "new", "default", ""), "c");
    assert_eq!(rj[0].reason, RejectReason::ShuttingDown);
    // READY does not hand out the buffered job; heartbeats go on, so the
    // job manager finishing its job does not take the router for dead.
    assert!(forwarded(&h.ready("w1"), "w1").is_empty());
    let sent = h.advance(3 * SECOND);
    assert!(!sent.is_empty());
    assert!(
        sent.iter()
            .all(|(_, _, m)| matches!(m.command, Command::Heartbeat { .. })),
        "{sent:?}"
    );
    // The in-flight job finishes → result forwarded → exit.
    let out = h.input(Input::Frames {
        socket: Backend,
        frames: Message::with_msgid(
            "rep",
            Command::Reply(Reply::result(
                b"{}".to_vec(),
                "busy".into(),
                ResultStatus::Ok,
            )),
        )
        .encode_routed(b"w1".to_vec()),
    });
    assert_eq!(out.last(), Some(&Action::Exit));
    assert_eq!(results(&decode(out), "c").len(), 1);
    // Buffered jobs are kept for the journal.
    let left = h.r.unfinished_jobs();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].msgid, "queued");
    assert_eq!(h.r.buffered_count(), 1);
    // Exit is emitted once.
    assert!(!h.timeout().contains(&Action::Exit));
}

#[test]
fn shutdown_input_with_nothing_in_flight_exits_at_once() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    let out = h.input(Input::Shutdown);
    assert_eq!(out.last(), Some(&Action::Exit));
    assert_eq!(decode(out)[0].2.command, Command::Kbye);
}

#[test]
fn step_down_kbyes_every_peer_and_releases_nothing_held() {
    let mut h = H::with(Config {
        journal: true,
        ..Config::default()
    });
    worker(&mut h, "w1", "", 1);
    sched(&mut h, "s1");
    h.request("c", "running", "default", "");
    // A REQUEST whose batch is never committed (the lease is lost first):
    // its acknowledgement is held.
    let mut out = Vec::new();
    h.r.handle(
        Input::Frames {
            socket: Frontend,
            frames: vec![
                b"c".to_vec(),
                vec![],
                b"eMQP/1.0".to_vec(),
                b"REQUEST".to_vec(),
                b"held".to_vec(),
                b"default".to_vec(),
                vec![],
                b"[]".to_vec(),
            ],
        },
        h.now,
        &mut out,
    );
    assert!(
        !decode(out).iter().any(|(_, _, m)| is_ack_of(m, "held")),
        "not acknowledged before its commit"
    );
    let mut out = Vec::new();
    h.r.step_down("lease lost", &mut out);
    assert!(h.r.has_exited());
    let sent = decode(out.clone());
    assert!(
        out.iter().all(|a| matches!(a, Action::Send { .. })),
        "no batch, no exit: {out:?}"
    );
    assert_eq!(to(&sent, Backend, "w1")[0].command, Command::Kbye);
    assert_eq!(to(&sent, Frontend, "s1")[0].command, Command::Kbye);
    assert_eq!(sent.len(), 2, "KBYEs only: {sent:?}");
    // Stepping down twice says nothing more.
    let mut again = Vec::new();
    h.r.step_down("lease lost", &mut again);
    assert!(again.is_empty());
}

#[test]
fn drain_timeout_exits_with_jobs_still_in_flight_kept() {
    let mut h = H::with(Config {
        drain_timeout: 5 * SECOND,
        ..Config::default()
    });
    worker(&mut h, "w1", "", 1);
    h.request("c", "slow", "default", "");
    assert!(!h.input(Input::Shutdown).contains(&Action::Exit));
    h.now += 4 * SECOND;
    assert!(!h.timeout().contains(&Action::Exit));
    h.now += SECOND;
    assert!(h.timeout().contains(&Action::Exit));
    assert_eq!(h.r.unfinished_jobs().len(), 1);
}
