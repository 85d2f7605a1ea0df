//! An ideal eMQP worker in a bench thread: INFORM with `job-ack`, one READY
//! per slot, and for each REQUEST at once `REPLY [{"value": null},
//! orig_msgid, ok]` then READY, no job execution at all. Run against the real
//! router it shows what the router does when its worker costs nothing, which
//! separates router cost from job-manager cost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use emq_transport::SocketOptions;
use emqp_proto::command::FEATURE_JOB_ACK;
use emqp_proto::{Command, Inform, Message, PeerType, QueueSpec, PROTOCOL_VERSION};

use crate::client::{send_parts, Frames};

/// A running ideal worker; stopped on drop.
pub struct IdealWorker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<u64, String>>>,
}

impl IdealWorker {
    /// Connect to the router backend `endpoint`, register with `slots`
    /// slots on queue `default`, and wait (at most `timeout`) for the ACK.
    pub fn start(endpoint: &str, slots: usize, timeout: Duration) -> Result<IdealWorker, String> {
        let ctx = zmq::Context::new();
        let opts = SocketOptions {
            linger_ms: 0,
            ..SocketOptions::default()
        };
        let id = emqp_proto::new_msgid();
        let sock = emq_transport::connect_dealer(&ctx, endpoint, id.as_bytes(), &opts)
            .map_err(|e| format!("ideal worker connect: {e}"))?;
        let queues = QueueSpec::parse_cli("default").map_err(|e| format!("queues: {e}"))?;
        let inform = Message::new(Command::Inform(Inform {
            queues,
            peer_type: Some(PeerType::Worker),
            features: vec![FEATURE_JOB_ACK.to_string()],
        }));
        emq_transport::send_message(&sock, inform).map_err(|e| format!("INFORM: {e}"))?;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("ideal worker: no ACK of INFORM within {timeout:?}"));
            }
            match emq_transport::recv_message(&sock, left.as_millis() as i64) {
                Ok(Some(emq_transport::Received::Message(m))) => {
                    if let Command::Ack { .. } = m.command {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => return Err(format!("ideal worker recv: {e}")),
            }
        }
        for _ in 0..slots.max(1) {
            emq_transport::send_message(&sock, Message::new(Command::Ready))
                .map_err(|e| format!("READY: {e}"))?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("ideal-worker".into())
            .spawn(move || {
                let _ctx = ctx;
                worker_loop(&sock, &s)
            })
            .map_err(|e| format!("spawn: {e}"))?;
        Ok(IdealWorker {
            stop,
            thread: Some(thread),
        })
    }

    /// Stop; the number of jobs answered, or the thread's error.
    pub fn finish(mut self) -> Result<u64, String> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err("ideal worker panicked".into()),
            None => Ok(0),
        }
    }
}

impl Drop for IdealWorker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

fn counter_id(n: u64) -> String {
    format!("1dea1000-0000-4000-8000-{:012x}", n & 0xffff_ffff_ffff)
}

fn worker_loop(sock: &zmq::Socket, stop: &AtomicBool) -> Result<u64, String> {
    let proto = PROTOCOL_VERSION.as_bytes();
    let payload = emqp_proto::job::JobOutcome::Value(serde_json::Value::Null).to_payload();
    let mut f = Frames::new();
    let mut n = 0u64;
    let mut last_sent = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        match sock.poll(zmq::POLLIN, 50) {
            Ok(_) | Err(zmq::Error::EINTR) => {}
            Err(e) => return Err(format!("ideal worker poll: {e}")),
        }
        loop {
            match f.recv(sock, zmq::DONTWAIT) {
                Ok(()) => {}
                Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => break,
                Err(e) => return Err(format!("ideal worker recv: {e}")),
            }
            // '' | eMQP/1.0 | REQUEST | MSGID | QUEUE | HEADERS | MSG
            if f.get(2) != b"REQUEST" {
                continue;
            }
            n += 1;
            let reply = counter_id(2 * n);
            send_parts(
                sock,
                &[
                    b"",
                    proto,
                    b"REPLY",
                    reply.as_bytes(),
                    &payload,
                    f.get(3),
                    b"ok",
                ],
                stop,
            )?;
            let ready = counter_id(2 * n + 1);
            send_parts(sock, &[b"", proto, b"READY", ready.as_bytes()], stop)?;
            last_sent = Instant::now();
        }
        if last_sent.elapsed() > Duration::from_secs(1) {
            emq_transport::send_message(
                sock,
                Message::new(Command::Heartbeat {
                    timestamp: Some(format!(
                        "{:.3}",
                        std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map(|d| d.as_secs_f64())
                            .unwrap_or(0.0)
                    )),
                }),
            )
            .map_err(|e| format!("ideal worker heartbeat: {e}"))?;
            last_sent = Instant::now();
        }
    }
    Ok(n)
}
