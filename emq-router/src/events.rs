//! What goes into the core ([`Input`]) and what comes out ([`Action`]),
//! plus the journal seam ([`JournalOp`], [`StoredJob`]).

use emqp_proto::Message;

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
    /// Time passed: heartbeats, dead-peer sweep, due retries, drain deadline.
    Tick,
    /// A `Send` to `identity` on `socket` failed.
    SendFailed {
        socket: Socket,
        identity: Vec<u8>,
        reason: SendFailure,
    },
    /// SIGTERM/SIGINT: the same orderly shutdown as admin DISCONNECT.
    Shutdown,
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
    /// Persist this (only emitted when `Config::journal` is set).
    Journal(JournalOp),
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

/// An accepted job as the journal stores it and [`crate::Router::restore`]
/// takes it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredJob {
    /// The router's job id (unique within one journal).
    pub id: u64,
    /// The client's REQUEST msgid (also the msgid forwarded to workers).
    pub msgid: String,
    /// The client's identity on the frontend.
    pub client: Vec<u8>,
    /// The queue frame as the client sent it (forwarded unchanged).
    pub queue: String,
    /// The queue the job is routed through (`default` for unserved queues).
    pub route: String,
    /// The HEADERS frame as sent.
    pub headers: Vec<u8>,
    /// The MSG frame (never decoded by the router).
    pub payload: Vec<u8>,
    /// Deliveries so far.
    pub attempts: u32,
    /// Unix micros when the router accepted the REQUEST.
    pub accepted_at: u64,
}

/// A journal event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalOp {
    /// A REQUEST was accepted (acknowledged to the client).
    Accepted(StoredJob),
    /// The job finished (ok, or failed without retries left to use).
    Completed { id: u64, msgid: String },
    /// The job gave up for good.
    DeadLettered {
        id: u64,
        msgid: String,
        reason: String,
    },
    /// The job is being delivered again (after a lost delivery or a retry):
    /// its delivery count is now `attempts`.
    Attempt {
        id: u64,
        msgid: String,
        attempts: u32,
    },
    /// A built-in schedule was created, changed or ran: store `blob`
    /// (opaque, from `emq_schedule::ScheduleBook::take_changes`) under `id`.
    PutSchedule { id: String, blob: Vec<u8> },
    /// A built-in schedule was removed.
    DeleteSchedule { id: String },
}
