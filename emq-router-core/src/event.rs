//! What goes into the core ([`Input`]) and what comes out ([`Action`]).

use emqp_proto::Message;

use crate::journal::{Batch, BatchId, BatchResult};
pub use crate::router::traces::JobSpan;

/// Multipart frames.
pub type Frames = Vec<Vec<u8>>;

/// The router's three ROUTER sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Socket {
    /// Clients (senders) and schedulers.
    Frontend,
    /// Workers (job managers).
    Backend,
    /// Admin tools (STATUS, ROUTER_SHOW_*, DISCONNECT).
    Admin,
}

impl Socket {
    pub fn name(&self) -> &'static str {
        match self {
            Socket::Frontend => "frontend",
            Socket::Backend => "backend",
            Socket::Admin => "admin",
        }
    }
}

/// Why a send failed, as the binary saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendFailure {
    /// EHOSTUNREACH: the peer is gone (ROUTER_MANDATORY).
    HostUnreachable,
    /// EAGAIN: the peer's pipe is at its high-water mark.
    WouldBlock,
    Other(String),
}

/// An event for the core.
#[derive(Debug)]
pub enum Input {
    /// Frames read off a ROUTER socket: `[identity, '', eMQP/1.0, CMD, MSGID, body…]`.
    /// Undecodable frames are logged and dropped (a malformed REQUEST with a
    /// readable msgid gets `REJECT malformed`).
    Frames { socket: Socket, frames: Frames },
    /// An already decoded message from `identity`.
    Message {
        socket: Socket,
        identity: Vec<u8>,
        message: Message,
    },
    /// A `Send` to `identity` on `socket` failed.
    SendFailed {
        socket: Socket,
        identity: Vec<u8>,
        reason: SendFailure,
    },
    /// The driver appended journal batch `batch` to its store (or failed
    /// to). Batches are reported in the order they were emitted.
    JournalDone { batch: BatchId, result: BatchResult },
    /// SIGTERM/SIGINT: the same orderly shutdown as admin DISCONNECT.
    Shutdown,
    /// The driver carried out every [`Action::Send`] handed out so far,
    /// and reported each one that failed ([`Input::SendFailed`]) before
    /// this. RESULTs handed out with no failure reported count as
    /// delivered (see `router/results.rs`). Fed after each flush of the
    /// actions, before the next message is read.
    Flushed,
}

/// Something the binary must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send `frames` (DEALER-side: starting with the empty delimiter) to
    /// `identity` on `socket`. Report a failure back as [`Input::SendFailed`].
    Send {
        socket: Socket,
        identity: Vec<u8>,
        frames: Frames,
    },
    /// Append this batch to the journal store in one transaction, then
    /// report [`Input::JournalDone`] (only emitted when `Config::journal`
    /// is set).
    Journal(Batch),
    /// A job was dispatched and traces are on (`Config::traces`): the
    /// driver records the span of its queue wait (`router/traces.rs`).
    JobSpan(JobSpan),
    /// Shutdown is complete: exit the process.
    Exit,
}

impl Action {
    /// For tests and logs: the decoded message of a `Send`.
    pub fn message(&self) -> Option<(Socket, &[u8], Message)> {
        match self {
            Action::Send {
                socket,
                identity,
                frames,
            } => Message::decode(frames.clone())
                .ok()
                .map(|m| (*socket, identity.as_slice(), m)),
            _ => None,
        }
    }
}
