//! emq-router-core: the EventMQ (eMQP/1.0) router as a sans-IO state
//! machine.
//!
//! [`Router::handle`] takes an [`Input`] (frames from one of the three
//! sockets, a failed send, a journal batch's outcome, a shutdown request)
//! at a time `now` in microseconds; [`Router::poll_timeout`] says when
//! [`Router::handle_timeout`] is next due; both push [`Action`]s (frames
//! to send, journal batches to append, exit) into the caller's buffer.
//! The router module's documentation states the call order. This crate
//! has no sockets, threads, clocks, storage or randomness: the
//! `emq-router` binary drives it with zmq sockets and a journal store
//! (SQLite, `emq-journal`), and the tests drive it on a fake clock.
//!
//! Modules:
//! - [`router`]: the state machine, split by concern (intake, peers,
//!   dispatch, completion, schedules, durability, drain, invariants), each
//!   file opening with the rules it implements;
//! - [`journal`]: the journal records, batches and the [`JournalStore`]
//!   trait every store implements;
//! - [`lease`]: the leader lease of routers sharing one journal database
//!   (who serves, renewals, stepping down);
//! - [`data`]: the plain data the router keeps and the read model shows
//!   (counters, dead letters, the journal's state), imported by both;
//! - [`snapshot`]: the read model; [`admin`] (STATUS and ROUTER_SHOW_*
//!   JSON) and [`metrics`] (Prometheus text) render it;
//! - [`workers`]: worker registry and the per-queue free-slot index;
//! - [`jobs`]: jobs, queue buffers, the retry delay set, the msgid index;
//!   [`finished`]: finished jobs kept for lookups;
//! - [`flow`]: flow control's buffers and per-key state (the rules are
//!   in `router/flow.rs`);
//! - [`config`]: tunables; [`event`]: inputs and actions; [`ids`]: job,
//!   worker and dispatch ids as types;
//! - [`prometheus`]: the text exposition format; [`util`]: small helpers.

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

pub mod admin;
pub mod batch;
pub mod config;
pub mod data;
pub mod event;
pub mod finished;
pub mod flow;
pub mod ids;
pub mod jobs;
pub mod journal;
pub mod lease;
pub mod metrics;
pub mod prometheus;
pub mod router;
pub mod snapshot;
pub mod util;
pub mod workers;
pub mod workflow;

#[cfg(test)]
mod proptests;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;

pub use config::{Config, SECOND};
pub use data::{DeadLetter, JournalState, Stats};
pub use event::{Action, Frames, Input, JobSpan, SendFailure, Socket};
pub use journal::{
    Batch, BatchId, BatchResult, DeadLetterRecord, FinishedRecord, JobRecord, JournalStore, Record,
    Restored,
};
pub use router::{RestoreCounts, Router, Scheduler};
pub use snapshot::Snapshot;
