//! emq-receiver: print every eMQP/1.0 message received on a ZeroMQ socket
//! as one JSON object per line. For debugging, watching peers register,
//! and tests. The binary is a thin wrapper over [`run`]: [`flags`] parses
//! the command line and checks it into a [`Plan`].
//!
//! Exit codes ([`Exit`]): 0 done (count reached or signal), 1 socket error,
//! 2 usage, 5 nothing received within `--timeout`.

#![forbid(unsafe_code)]

pub mod flags;
pub mod format;

pub use emq_cli_support::Exit;
pub use flags::{default_subscribe_endpoint, Cli, Plan, SocketKind, DEFAULT_SUBSCRIBE_ENDPOINT};

use std::io::Write;
use std::time::{Duration, Instant};

use emq_transport::SocketOptions;
use emqp_proto::{Command, Message};

fn open_socket(ctx: &zmq::Context, plan: &Plan) -> Result<zmq::Socket, String> {
    let opts = SocketOptions {
        linger_ms: 0,
        plain: plan.plain.clone(),
        curve: plan.curve.clone(),
        ..SocketOptions::default()
    };
    let err = |e: zmq::Error| format!("zmq: {e}");
    if plan.kind == SocketKind::Router && plan.bind {
        return emq_transport::bind_router(ctx, &plan.endpoint, &opts).map_err(|e| e.to_string());
    }
    let endpoints: Vec<String> = plan.endpoint.split(',').map(String::from).collect();
    if plan.kind == SocketKind::Dealer && !plan.bind {
        let id = plan.identity.clone().unwrap_or_else(emqp_proto::new_msgid);
        return emq_transport::connect_dealer_to(ctx, &endpoints, id.as_bytes(), &opts)
            .map_err(|e| e.to_string());
    }
    let ty = match plan.kind {
        SocketKind::Router => zmq::ROUTER,
        SocketKind::Dealer => zmq::DEALER,
        SocketKind::Pull => zmq::PULL,
        SocketKind::Sub => zmq::SUB,
    };
    let sock = ctx.socket(ty).map_err(err)?;
    sock.set_linger(0).map_err(err)?;
    sock.set_rcvhwm(opts.hwm).map_err(err)?;
    match plan.kind {
        SocketKind::Dealer => {
            let id = plan.identity.clone().unwrap_or_else(emqp_proto::new_msgid);
            sock.set_identity(id.as_bytes()).map_err(err)?;
        }
        SocketKind::Sub => {
            for prefix in &plan.subscribe {
                sock.set_subscribe(prefix.as_bytes()).map_err(err)?;
            }
        }
        _ => {}
    }
    if let (Some(curve), false) = (&plan.curve, plan.bind) {
        curve.apply(&sock).map_err(err)?;
    } else if let (Some(plain), false) = (&plan.plain, plan.bind) {
        sock.set_plain_username(Some(&plain.username))
            .map_err(err)?;
        sock.set_plain_password(Some(plain.password.expose()))
            .map_err(err)?;
    }
    if plan.bind {
        sock.bind(&plan.endpoint)
            .map_err(|e| format!("cannot bind {}: {e}", plan.endpoint))?;
    } else {
        emq_transport::connect_all(&sock, &endpoints).map_err(|e| e.to_string())?;
    }
    Ok(sock)
}

/// What one received multipart message means for the receiver.
#[derive(Debug, Clone, PartialEq)]
pub struct Handled {
    /// The JSON line to print.
    pub line: String,
    /// The ACK to send back (`--ack-informs` and an INFORM).
    pub ack: Option<Vec<Vec<u8>>>,
    /// A peer that registered (INFORM, `true`) or left (KBYE, `false`), on a
    /// ROUTER.
    pub peer: Option<(Vec<u8>, bool)>,
}

/// Format one received multipart message and decide the answer.
pub fn handle_frames(frames: Vec<Vec<u8>>, kind: SocketKind, ack_informs: bool) -> Handled {
    if kind == SocketKind::Sub {
        if let Some(v) = format::format_published(&frames) {
            return Handled {
                line: v.to_string(),
                ack: None,
                peer: None,
            };
        }
    }
    let f = format::format_frames(frames, kind == SocketKind::Router);
    let mut ack = None;
    let mut peer = None;
    if let Some((Some(identity), msg)) = f.message {
        match msg.command {
            Command::Inform(_) => {
                if ack_informs {
                    let reply = Message::new(Command::Ack {
                        acked_msgid: msg.msgid,
                        features: vec![],
                    });
                    ack = Some(reply.encode_routed(identity.clone()));
                }
                peer = Some((identity, true));
            }
            Command::Kbye => peer = Some((identity, false)),
            _ => {}
        }
    }
    Handled {
        line: f.json.to_string(),
        ack,
        peer,
    }
}

fn unix_time() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{:.6}", t.as_secs_f64())
}

/// Receive and print until done; returns the exit code. `out` gets the JSON
/// lines, `err` diagnostics. Stops on a shutdown signal too.
pub fn run(plan: &Plan, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let shutdown = match emq_transport::shutdown_flag() {
        Ok(f) => f,
        Err(e) => {
            let _ = writeln!(err, "emq-receiver: cannot install signal handlers: {e}");
            return Exit::Internal;
        }
    };
    let ctx = zmq::Context::new();
    let sock = match open_socket(&ctx, plan) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(err, "emq-receiver: {e}");
            return Exit::Internal;
        }
    };
    let shown = sock
        .get_last_endpoint()
        .ok()
        .and_then(|e| e.ok())
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| plan.endpoint.clone());
    let _ = writeln!(
        err,
        "emq-receiver: {} socket {} {shown}",
        plan.kind.as_str(),
        if plan.bind {
            "bound to"
        } else {
            "connected to"
        }
    );
    let mut received = 0u64;
    let mut last = Instant::now();
    let mut peers: Vec<Vec<u8>> = Vec::new();
    let mut next_beat = Instant::now();
    loop {
        if emq_transport::shutdown_requested(&shutdown) {
            return Exit::Ok;
        }
        if let Some(every) = plan.heartbeat {
            if Instant::now() >= next_beat {
                next_beat = Instant::now() + every;
                // a peer that is gone fails with EHOSTUNREACH: forget it
                peers.retain(|id| {
                    let hb = Message::new(Command::Heartbeat {
                        timestamp: Some(unix_time()),
                    });
                    emq_transport::send_routed(&sock, id.clone(), hb).is_ok()
                });
            }
        }
        if let Some(t) = plan.timeout {
            if last.elapsed() >= t {
                let _ = writeln!(
                    err,
                    "emq-receiver: nothing received within {} s",
                    t.as_secs_f64()
                );
                return Exit::Timeout;
            }
        }
        let mut wait = Duration::from_millis(100);
        if let Some(t) = plan.timeout {
            wait = wait.min(t.saturating_sub(last.elapsed()));
        }
        if plan.heartbeat.is_some() {
            wait = wait.min(next_beat.saturating_duration_since(Instant::now()));
        }
        match sock.poll(zmq::POLLIN, wait.as_millis() as i64) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(zmq::Error::EINTR) => continue,
            Err(e) => {
                let _ = writeln!(err, "emq-receiver: zmq poll: {e}");
                return Exit::Internal;
            }
        }
        let frames = match sock.recv_multipart(zmq::DONTWAIT) {
            Ok(f) => f,
            Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => continue,
            Err(e) => {
                let _ = writeln!(err, "emq-receiver: zmq recv: {e}");
                return Exit::Internal;
            }
        };
        last = Instant::now();
        let Handled { line, ack, peer } = handle_frames(frames, plan.kind, plan.ack_informs);
        match peer {
            Some((id, true)) if !peers.contains(&id) => peers.push(id),
            Some((id, false)) => peers.retain(|p| *p != id),
            _ => {}
        }
        if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
            // stdout closed (e.g. piped into `head`): nothing more to do.
            return Exit::Ok;
        }
        if let Some(frames) = ack {
            if let Err(e) = sock.send_multipart(frames, zmq::DONTWAIT) {
                let _ = writeln!(err, "emq-receiver: cannot send ACK: {e}");
            }
        }
        received += 1;
        if plan.count.is_some_and(|n| received >= n) {
            return Exit::Ok;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn informs_are_acked_only_when_asked_and_on_a_router() {
        let inform = Message::with_msgid(
            "inf-1",
            Command::Inform(emqp_proto::Inform {
                queues: Default::default(),
                peer_type: Some(emqp_proto::PeerType::Worker),
                features: vec![],
            }),
        )
        .encode_routed(b"w-1".to_vec());
        let h = handle_frames(inform.clone(), SocketKind::Router, true);
        assert!(h.line.contains("\"INFORM\""), "{}", h.line);
        assert_eq!(h.peer, Some((b"w-1".to_vec(), true)));
        let ack = h.ack.expect("an ACK");
        let (id, msg) = Message::decode_routed(ack).unwrap();
        assert_eq!(id, b"w-1");
        assert_eq!(
            msg.command,
            Command::Ack {
                acked_msgid: "inf-1".into(),
                features: vec![],
            }
        );
        assert!(handle_frames(inform, SocketKind::Router, false)
            .ack
            .is_none());
        let ready = Message::with_msgid("r", Command::Ready).encode_routed(b"w-1".to_vec());
        let h = handle_frames(ready, SocketKind::Router, true);
        assert!(h.ack.is_none() && h.peer.is_none());
        let kbye = Message::with_msgid("k", Command::Kbye).encode_routed(b"w-1".to_vec());
        let h = handle_frames(kbye, SocketKind::Router, true);
        assert_eq!(h.peer, Some((b"w-1".to_vec(), false)));
    }

    #[test]
    fn lines_are_single_line_json() {
        let frames = Message::with_msgid(
            "m",
            Command::Request(emqp_proto::Request {
                queue: "q".into(),
                headers: Default::default(),
                message: b"[\"a\\nb\"]".to_vec(),
            }),
        )
        .encode();
        let line = handle_frames(frames, SocketKind::Dealer, false).line;
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["fields"]["message"][0], "a\nb");
        // not JSON (raw newline in a string): kept as text, still one line
        let frames = Message::with_msgid(
            "m",
            Command::Request(emqp_proto::Request {
                queue: "q".into(),
                headers: Default::default(),
                message: b"line1\nline2".to_vec(),
            }),
        )
        .encode();
        let line = handle_frames(frames, SocketKind::Dealer, false).line;
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["fields"]["message"], "line1\nline2");
    }
}
