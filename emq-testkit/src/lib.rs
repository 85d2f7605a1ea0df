//! The dev-only test kit every emq crate's tests share: processes that
//! cannot outlive their test, free loopback ports, our binaries, fake
//! routers and workers speaking eMQP, and bounded waiting on events.
//!
//! - [`ports`]: free loopback ports below the ephemeral range, never handed
//!   out twice per process (no bind-to-port-0-then-release).
//! - [`process`]: [`Proc`], a guard around a child process (own process
//!   group, output captured under `target/emq-it-logs/`, SIGTERM then
//!   SIGKILL on drop), [`process::run`] / [`process::run_to_exit`] for
//!   one-shot tools (run to the exit within a bound: code, stdout,
//!   stderr), [`process::ChildGuard`]
//!   for a plain `std::process::Child`, [`process::scratch_dir`] for a
//!   test's files, and [`process::wait_pids_gone`].
//! - [`bins`]: paths of our binaries (built on demand with cargo).
//! - [`fake`]: peers played by the test: a fake ROUTER (driven from the
//!   test's thread, or served by a thread of its own with a closure) and a
//!   fake DEALER (worker, client, admin tool; PLAIN credentials or none),
//!   and frame builders for what they send.
//! - [`postgres`]: a throwaway PostgreSQL cluster (initdb, start, stop on
//!   drop), from Debian's packages, for the tests and the bench.
//! - [`poll_until`], [`lines`]: waiting for an event, bounded.
//!
//! Signals go through `emq_process` (the one crate of the workspace with
//! `unsafe`), so this crate forbids unsafe code.

#![forbid(unsafe_code)]

pub mod bins;
pub mod fake;
pub mod lines;
pub mod ports;
pub mod postgres;
pub mod process;

pub use fake::{FakeDealer, FakeRouter, ServedRouter};
pub use process::{ChildGuard, Proc, RunOutput, Spawn, TempDir};

use std::time::{Duration, Instant};

/// The ZeroMQ context shared by every socket a test opens. Never
/// terminated, so dropping a socket never blocks on a context shutdown.
pub fn zmq_ctx() -> &'static zmq::Context {
    static CTX: std::sync::OnceLock<zmq::Context> = std::sync::OnceLock::new();
    CTX.get_or_init(zmq::Context::new)
}

/// Print a figure a test wants seen (fault counts) and append it to
/// `target/emq-it-logs/summary.txt`, which `scripts/test.sh` shows at the
/// end even though libtest hides the output of passing tests.
pub fn report(line: &str) {
    use std::io::Write;
    println!("{line}");
    let path = bins::target_dir().join("emq-it-logs").join("summary.txt");
    let _ = std::fs::create_dir_all(path.parent().expect("has parent"));
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        let _ = writeln!(f, "{line}");
    }
}

/// Poll `f` every `step` until it returns `Some` or `timeout` passes.
pub fn poll_until<T>(
    timeout: Duration,
    step: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(step);
    }
}

/// A number from the environment, or `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Whether this run is CI (`CI=true`), where nothing may be skipped.
pub fn in_ci() -> bool {
    matches!(
        std::env::var("CI")
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Ok("true") | Ok("1") | Ok("yes")
    )
}

/// A small deterministic PRNG (xorshift64*), so fuzz inputs are
/// reproducible from the seed a test prints.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// Seed from `EMQ_FUZZ_SEED` or the clock.
    pub fn from_env() -> (Rng, u64) {
        let seed = std::env::var("EMQ_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(42)
            });
        (Rng::new(seed), seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Connect `sock` to `endpoint` and wait (up to `timeout`) until the TCP
/// connection is up and its handshake done, seen through a socket monitor
/// (`ZMQ_EVENT_HANDSHAKE_SUCCEEDED`) rather than guessed with a sleep.
pub fn connect_and_wait(
    sock: &zmq::Socket,
    endpoint: &str,
    timeout: std::time::Duration,
) -> Result<(), String> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mon_addr = format!("inproc://emq-testkit-monitor-{}-{n}", std::process::id());
    sock.monitor(&mon_addr, zmq::SocketEvent::HANDSHAKE_SUCCEEDED as i32)
        .map_err(|e| format!("monitor: {e}"))?;
    let mon = zmq_ctx()
        .socket(zmq::PAIR)
        .map_err(|e| format!("monitor socket: {e}"))?;
    mon.connect(&mon_addr)
        .map_err(|e| format!("monitor connect: {e}"))?;
    sock.connect(endpoint)
        .map_err(|e| format!("connect {endpoint}: {e}"))?;
    let ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
    let ready = mon
        .poll(zmq::POLLIN, ms)
        .map_err(|e| format!("monitor poll: {e}"))?;
    // Stop monitoring either way, before `mon` goes: an event with no
    // reader would block the context's I/O thread (emq_transport::failover).
    emq_transport::stop_monitor(sock).map_err(|e| format!("stopping the monitor: {e}"))?;
    if ready == 0 {
        return Err(format!("no handshake with {endpoint} within {timeout:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..100 {
            let x = a.below(13);
            assert_eq!(x, b.below(13));
            assert!(x < 13);
        }
        assert_eq!(a.bytes(5).len(), 5);
    }
}
