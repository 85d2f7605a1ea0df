//! Harness for tests that start the real emq binaries — and, for interop,
//! the real EventMQ 0.3.13 router and job manager from a Python venv — on
//! loopback, talk to them over ZeroMQ and stop them afterwards.
//!
//! - [`ports`], [`process`], [`bins`], [`poll_until`], [`postgres`] (a
//!   throwaway PostgreSQL cluster per test) and the rest of the
//!   general harness live in the shared `emq-testkit` crate (every crate's
//!   tests use it) and are re-exported here.
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
//! - [`relay`]: a loopback TCP relay a test can cut (a network partition)
//!   and whose forwarded bytes it can read (what crosses the wire).
//! - [`failover`]: a client that resubmits across a router failover.
//! - [`ha`]: a leader and standbys on one PostgreSQL journal, job managers
//!   with their backends as a failover list.

#![forbid(unsafe_code)]

pub mod admin;
pub mod browser;
pub mod client;
pub mod cluster;
pub mod failover;
pub mod ha;
pub mod jobs;
pub mod pubsub;
pub mod python;
pub mod redis;
pub mod relay;

pub use admin::WorkerView;
pub use client::Client;
pub use cluster::Addrs;
pub use emq_testkit::{
    bins, connect_and_wait, env_usize, in_ci, poll_until, ports, postgres, process, report,
    zmq_ctx, Proc, Rng, RunOutput, Spawn,
};
