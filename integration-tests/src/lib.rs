//! Harness for tests that start the real emq binaries — and, for interop,
//! the real EventMQ 0.3.13 router and job manager from a Python venv — on
//! loopback, talk to them over ZeroMQ and stop them afterwards.
//!
//! - [`ports`]: free loopback ports, never handed out twice per process.
//! - [`process`]: [`Proc`], a guard around a child process (own process
//!   group, stderr/stdout captured to files under `target/emq-it-logs/`,
//!   SIGTERM then SIGKILL on drop), and [`process::run`] for one-shot tools.
//! - [`bins`]: paths of our binaries (built on demand with cargo).
//! - [`python`]: the venv with eventmq 0.3.13 (`scripts/setup-python.sh`).
//! - [`client`]: a DEALER test client that submits REQUESTs and collects
//!   REPLY acks, RESULTs and REJECTs.
//! - [`admin`]: STATUS / ROUTER_SHOW_WORKERS queries.
//! - [`browser`]: a headless Chromium driven over the DevTools protocol
//!   (dashboard tests).
//! - [`cluster`]: start routers and job managers (ours and 0.3.13's) and
//!   wait until they are ready.
//! - [`jobs`]: job payload builders and bookkeeping for fault tests.
//! - [`pubsub`]: emq-pubsub and 0.3.13's emq-pubsub on fresh ports, and a
//!   plain zmq SUB subscriber.
//! - [`redis`]: a real redis-server (Debian's) on a free port, stopped on
//!   drop (for 0.3.13's emq-scheduler).
//! - [`relay`]: a TCP relay that records the bytes it forwards.

#![forbid(unsafe_code)]

pub mod admin;
pub mod bins;
pub mod browser;
pub mod client;
pub mod cluster;
pub mod jobs;
pub mod ports;
pub mod process;
pub mod pubsub;
pub mod python;
pub mod redis;
pub mod relay;

// libzmq (zmq-sys) is built with CURVE and needs libsodium, which
// emq-transport links: every test binary of this crate links it too.
use emq_transport as _;

pub use admin::WorkerView;
pub use client::Client;
pub use cluster::Addrs;
pub use process::{Proc, RunOutput, Spawn};

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
