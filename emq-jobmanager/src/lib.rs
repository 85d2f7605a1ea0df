//! emq's job manager: connects to an EventMQ router (eMQP/1.0), announces
//! its queues, and runs the jobs it is given on a fixed number of slots.
//!
//! - [`connection`]: the sans-IO protocol core (INFORM/ACK/READY/REQUEST/
//!   REPLY/HEARTBEAT/KBYE, slot accounting, timeouts, send failures,
//!   shutdown), driven by `handle`, `poll_timeout` and `handle_timeout`.
//! - [`pool`]: slot threads that run jobs: [`python`] (`run` jobs on a
//!   long-lived Python worker process per slot), [`shell`] (`shell` jobs),
//!   [`handlers`] (`call` jobs: Rust functions registered by name).
//! - [`manager`]: the socket loop joining the two, and the library API
//!   ([`JobManager::builder`]), with its typed [`Error`].
//! - [`reload`]: `--reload`, Python workers restarted when watched `.py`
//!   files change (development).
//! - [`registry`]: the narrow handle through which a runner records its
//!   process groups in its slot.
//!
//! The system calls on processes and process groups (every `unsafe` block
//! of the workspace) are in the `emq-process` crate.

#![forbid(unsafe_code)]

pub mod connection;
mod forkserver;
pub mod handlers;
pub mod manager;
pub mod pool;
pub mod python;
pub(crate) mod registry;
pub mod reload;
pub mod shell;
mod traces;

pub use handlers::Handlers;
pub use manager::{ConfigError, Error, JobManager, JobManagerBuilder, ManagerConfig};
