//! emq-router: the EventMQ (eMQP/1.0) router.
//!
//! The library is a sans-IO core: [`Router::handle`] takes an [`Input`]
//! (frames from one of the three sockets, a tick, a send failure, a
//! shutdown request) and the current time in microseconds, and appends
//! [`Action`]s (frames to send, journal events, exit) to an outbox. No
//! sockets, threads or clocks live here; the `emq-router` binary moves
//! frames between zmq ROUTER sockets and the core.
//!
//! The core also keeps the built-in schedules (`emq_schedule::ScheduleBook`,
//! consulted on ticks only, unix time = `Config::epoch_unix_micros + now`),
//! the journal seam (accepted / completed / dead-lettered jobs, attempt
//! counts, schedule records) and the Prometheus counters ([`metrics`]).
//! The binary adds the SQLite journal (on by default), the `/metrics` HTTP
//! endpoint and ZAP access control (IP allowlists, PLAIN users, maximum
//! message size).
//!
//! Modules:
//! - [`router`]: the state machine and its rules (read its documentation);
//! - [`workers`]: worker registry and the per-queue free-slot index;
//! - [`queues`]: jobs, queue buffers and the retry delay set;
//! - [`admin`]: JSON answers of the admin socket;
//! - [`config`]: tunables; [`events`]: inputs, actions, journal seam;
//! - [`metrics`]: per-queue counters, the latency histogram, Prometheus text;
//! - [`util`]: msgids, timestamps, log rate limiting.

pub mod admin;
pub mod config;
pub mod events;
pub mod metrics;
pub mod queues;
pub mod router;
pub mod util;
pub mod workers;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use config::{Config, SECOND};
pub use events::{Action, Frames, Input, JournalOp, SendFailure, Socket, StoredJob};
pub use router::{DeadLetter, Router, Scheduler, Stats};
