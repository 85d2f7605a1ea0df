//! The raw limit: plain zmq in the same topology and with the same frames as
//! emq, and nothing else. Client DEALER → relay frontend ROUTER → (relay
//! thread) → relay backend ROUTER → worker DEALER, which answers each
//! REQUEST with an emq-shaped `REPLY [payload, orig_msgid, ok]`; the relay
//! returns it to the client as `RESULT [orig_msgid, ok, payload]`.
//!
//! Each role has its own zmq context (its own I/O thread), as separate
//! processes would. The relay does the least a broker can: remember which
//! client sent a msgid, swap identities, rename the command. No acks, no
//! queues, no journal: emq does strictly more work per job, so emq / raw is
//! its efficiency against zmq itself.
//!
//! With a READY credit (`RawRelay::start(Some(n))`) the worker works the
//! way an eMQP worker must: it sends `n` READYs, then one READY after each
//! REPLY, and the relay hands it a job only against a READY it has not
//! used yet (the others wait in arrival order). That is the limit of plain
//! zmq for a job manager with `n` slots: at most `n` jobs are ever on the
//! worker's side, so throughput is bound by the relay ↔ worker round trip,
//! whatever the broker does.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use emq_transport::SocketOptions;
use emqp_proto::PROTOCOL_VERSION;

use crate::client::{send_parts, Frames};

/// What the relay thread forwarded, for a sanity check.
#[derive(Debug, Default, Clone, Copy)]
pub struct RelayCounts {
    pub requests: u64,
    pub results: u64,
}

/// A running relay and worker; stopped and joined on drop.
pub struct RawRelay {
    /// Where clients connect.
    pub frontend: String,
    stop: Arc<AtomicBool>,
    relay: Option<JoinHandle<Result<RelayCounts, String>>>,
    worker: Option<JoinHandle<Result<u64, String>>>,
}

fn err(what: &str) -> impl Fn(zmq::Error) -> String + '_ {
    move |e| format!("raw {what}: {e}")
}

impl RawRelay {
    /// Start the relay and its worker; `credit`: READY flow control with
    /// that many slots (see the module docs), `None`: the worker takes
    /// every job at once.
    pub fn start(credit: Option<usize>) -> Result<RawRelay, String> {
        let opts = SocketOptions {
            linger_ms: 0,
            ..SocketOptions::default()
        };
        let relay_ctx = zmq::Context::new();
        let frontend = emq_transport::bind_router(&relay_ctx, "tcp://127.0.0.1:*", &opts)
            .map_err(|e| format!("raw relay bind: {e}"))?;
        let backend = emq_transport::bind_router(&relay_ctx, "tcp://127.0.0.1:*", &opts)
            .map_err(|e| format!("raw relay bind: {e}"))?;
        let endpoint = |s: &zmq::Socket| -> Result<String, String> {
            s.get_last_endpoint()
                .map_err(err("endpoint"))?
                .map_err(|_| "raw relay: endpoint not utf-8".to_string())
        };
        let front_ep = endpoint(&frontend)?;
        let back_ep = endpoint(&backend)?;

        let worker_ctx = zmq::Context::new();
        let worker_sock =
            emq_transport::connect_dealer(&worker_ctx, &back_ep, b"raw-worker", &opts)
                .map_err(|e| format!("raw worker connect: {e}"))?;

        let stop = Arc::new(AtomicBool::new(false));
        let s1 = Arc::clone(&stop);
        let relay = std::thread::Builder::new()
            .name("raw-relay".into())
            .spawn(move || {
                let _ctx = relay_ctx;
                relay_loop(&frontend, &backend, credit.is_some(), &s1)
            })
            .map_err(|e| format!("spawn: {e}"))?;
        let s2 = Arc::clone(&stop);
        let worker = std::thread::Builder::new()
            .name("raw-worker".into())
            .spawn(move || {
                let _ctx = worker_ctx;
                worker_loop(&worker_sock, credit, &s2)
            })
            .map_err(|e| format!("spawn: {e}"))?;
        Ok(RawRelay {
            frontend: front_ep,
            stop,
            relay: Some(relay),
            worker: Some(worker),
        })
    }

    /// Stop both threads; the relay's counts, or the first thread error.
    pub fn finish(mut self) -> Result<RelayCounts, String> {
        self.stop.store(true, Ordering::Relaxed);
        let w = self.worker.take().map(|h| h.join());
        let r = self.relay.take().map(|h| h.join());
        match w {
            Some(Ok(Err(e))) => return Err(e),
            Some(Err(_)) => return Err("raw worker panicked".into()),
            _ => {}
        }
        match r {
            Some(Ok(res)) => res,
            Some(Err(_)) => Err("raw relay panicked".into()),
            None => Ok(RelayCounts::default()),
        }
    }
}

impl Drop for RawRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.worker.take() {
            let _ = h.join();
        }
        if let Some(h) = self.relay.take() {
            let _ = h.join();
        }
    }
}

/// A uuid-shaped id from a counter (the relay and worker mint msgids too).
fn counter_id(prefix: u32, n: u64) -> String {
    format!("{prefix:08x}-0000-4000-8000-{:012x}", n & 0xffff_ffff_ffff)
}

fn relay_loop(
    frontend: &zmq::Socket,
    backend: &zmq::Socket,
    credit_flow: bool,
    stop: &AtomicBool,
) -> Result<RelayCounts, String> {
    let proto = PROTOCOL_VERSION.as_bytes();
    let mut counts = RelayCounts::default();
    let mut worker: Option<Vec<u8>> = None;
    // READYs received and not used yet (credit flow only).
    let mut credit = 0usize;
    let mut waiting: VecDeque<Vec<Vec<u8>>> = VecDeque::new();
    let mut clients: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let mut f = Frames::new();
    let mut next_id = 0u64;
    while !stop.load(Ordering::Relaxed) {
        {
            let mut items = [
                frontend.as_poll_item(zmq::POLLIN),
                backend.as_poll_item(zmq::POLLIN),
            ];
            match zmq::poll(&mut items, 50) {
                Ok(_) | Err(zmq::Error::EINTR) => {}
                Err(e) => return Err(format!("raw relay poll: {e}")),
            }
        }
        // backend: worker hello (READY) and results
        loop {
            match f.recv(backend, zmq::DONTWAIT) {
                Ok(()) => {}
                Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => break,
                Err(e) => return Err(format!("raw relay recv: {e}")),
            }
            // WID | '' | eMQP/1.0 | CMD | MSGID | PAYLOAD | ORIG | STATUS
            match f.get(3) {
                b"READY" => {
                    worker = Some(f.get(0).to_vec());
                    credit += 1;
                    while !credit_flow || credit > 0 {
                        let Some(req) = waiting.pop_front() else {
                            break;
                        };
                        credit = credit.saturating_sub(1);
                        let mut parts: Vec<&[u8]> = vec![f.get(0)];
                        parts.extend(req.iter().map(Vec::as_slice));
                        send_parts(backend, &parts, stop)?;
                        counts.requests += 1;
                    }
                }
                b"REPLY" => {
                    let Some(client) = clients.remove(f.get(6)) else {
                        continue;
                    };
                    next_id += 1;
                    let id = counter_id(0x7e1a_0000, next_id);
                    send_parts(
                        frontend,
                        &[
                            &client,
                            b"",
                            proto,
                            b"RESULT",
                            id.as_bytes(),
                            f.get(6),
                            f.get(7),
                            f.get(5),
                        ],
                        stop,
                    )?;
                    counts.results += 1;
                }
                _ => {}
            }
        }
        // frontend: CID | '' | eMQP/1.0 | REQUEST | MSGID | QUEUE | HEADERS | MSG
        loop {
            match f.recv(frontend, zmq::DONTWAIT) {
                Ok(()) => {}
                Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => break,
                Err(e) => return Err(format!("raw relay recv: {e}")),
            }
            if f.get(3) != b"REQUEST" {
                continue;
            }
            clients.insert(f.get(4).to_vec(), f.get(0).to_vec());
            match &worker {
                Some(w) if !credit_flow || credit > 0 => {
                    credit = credit.saturating_sub(1);
                    send_parts(
                        backend,
                        &[
                            w,
                            b"",
                            proto,
                            b"REQUEST",
                            f.get(4),
                            f.get(5),
                            f.get(6),
                            f.get(7),
                        ],
                        stop,
                    )?;
                    counts.requests += 1;
                }
                _ => waiting.push_back((1..8).map(|i| f.get(i).to_vec()).collect()),
            }
        }
    }
    Ok(counts)
}

fn worker_loop(
    sock: &zmq::Socket,
    credit: Option<usize>,
    stop: &AtomicBool,
) -> Result<u64, String> {
    let proto = PROTOCOL_VERSION.as_bytes();
    for i in 0..credit.unwrap_or(1).max(1) {
        let hello = counter_id(0x7e1c_0000, i as u64);
        send_parts(sock, &[b"", proto, b"READY", hello.as_bytes()], stop)?;
    }
    // what emq's noop handler returns
    let payload = emqp_proto::job::JobOutcome::Value(serde_json::Value::Null).to_payload();
    let mut f = Frames::new();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match sock.poll(zmq::POLLIN, 50) {
            Ok(_) | Err(zmq::Error::EINTR) => {}
            Err(e) => return Err(format!("raw worker poll: {e}")),
        }
        loop {
            match f.recv(sock, zmq::DONTWAIT) {
                Ok(()) => {}
                Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => break,
                Err(e) => return Err(format!("raw worker recv: {e}")),
            }
            // '' | eMQP/1.0 | REQUEST | MSGID | QUEUE | HEADERS | MSG
            if f.get(2) != b"REQUEST" {
                continue;
            }
            n += 1;
            let id = counter_id(0x7e1b_0000, n);
            send_parts(
                sock,
                &[
                    b"",
                    proto,
                    b"REPLY",
                    id.as_bytes(),
                    &payload,
                    f.get(3),
                    b"ok",
                ],
                stop,
            )?;
            if credit.is_some() {
                // the slot is free again
                let ready = counter_id(0x7e1c_0000, n);
                send_parts(sock, &[b"", proto, b"READY", ready.as_bytes()], stop)?;
            }
        }
    }
    Ok(n)
}
