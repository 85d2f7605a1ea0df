//! eMQP/1.0, the wire protocol of EventMQ, as plain data.
//!
//! Everything here is sans-IO: a [`Message`] is decoded from and encoded to
//! ZeroMQ multipart frames (`Vec<Vec<u8>>`), with or without the identity
//! frame a ROUTER socket prepends. Decoding never panics; every malformed
//! input yields a typed [`DecodeError`].
//!
//! Both the seed protocol (late 2015) and what EventMQ 0.3.13 actually sends
//! are accepted; see `docs/PROTOCOL.md` for the frame tables, including this
//! project's extensions (`RESULT`, `REJECT`, the INFORM feature frame).
//! [`Published`] is the two-frame message a pub/sub process sends its
//! subscribers for each PUBLISH.

#![forbid(unsafe_code)]

pub mod admin;
pub mod command;
pub mod error;
pub mod flow;
pub mod headers;
pub mod heartbeat;
pub mod interval;
pub mod job;
pub mod message;
pub mod msgid;
pub mod published;
pub mod queues;
pub mod trace;

pub use admin::{AdminError, AdminOp, ErrorKind, OpName};
pub use command::{
    Command, Duplicate, Inform, JobResult, Notice, NoticeKind, PeerType, Progress, Reject,
    RejectReason, Reply, Request, ResultStatus, Schedule, WorkerAbout,
};
pub use error::DecodeError;
pub use flow::{Policy, PolicyChange, Rate, RateChange};
pub use headers::{Header, Headers, OnConflict, Unique, UniqueError};
pub use interval::{Interval, IntervalError};
pub use message::Message;
pub use msgid::{new_msgid, MsgIds};
pub use published::Published;
pub use queues::{QueueSpec, DEFAULT_QUEUE, DEFAULT_WEIGHT};
pub use trace::TraceParent;

/// The protocol frame every message carries after the empty delimiter.
pub const PROTOCOL_VERSION: &str = "eMQP/1.0";

/// The largest frame an emq router takes by default (its
/// `--max-message-size`, `EVENTMQ_MAX_MESSAGE_SIZE`): 16 MiB. Every
/// binary's default is this one constant.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;
