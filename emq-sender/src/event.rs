//! What the router says about a client's REQUESTs, classified: the one
//! vocabulary of the client ([`crate::client`]) and its resend rule
//! ([`crate::track`]), which both import it from here.

use emqp_proto::{Command, Duplicate, Message, Notice, Reject, RejectReason, Reply, ResultStatus};

/// What the router said about one of our REQUESTs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `REPLY [msgid]`: the REQUEST was accepted.
    Accepted { msgid: String },
    /// `REJECT [msgid, reason, text]`.
    Rejected {
        msgid: String,
        reason: RejectReason,
        text: String,
    },
    /// `RESULT [msgid, status, payload]` (only for `reply-requested`).
    Result {
        msgid: String,
        status: ResultStatus,
        payload: Vec<u8>,
    },
    /// `NOTICE [msgid, kind, text]` (emq, asked for by the `notices`
    /// header every REQUEST of this client carries): something the
    /// submitter should know about an accepted job (e.g. it was sent to
    /// `default` because no job manager serves its queue).
    Notice(Notice),
    /// `DUPLICATE [msgid, existing, text]` (emq, only for a REQUEST with a
    /// `unique-key`): the REQUEST was answered as the job `existing`,
    /// which holds its unique key; its RESULT (if asked for) comes as
    /// `existing`'s.
    Duplicate {
        msgid: String,
        existing: String,
        text: String,
    },
    /// A connection to a router came up after one went down: the client
    /// said hello and sent `resent` unanswered messages again.
    Reconnected { endpoint: String, resent: usize },
    /// Anything else (a HEARTBEAT, an unexpected command, or frames that did
    /// not decode), described for a debug message. Never fatal.
    Other(String),
}

impl Event {
    /// Classify one message received from the router.
    pub fn from_message(msg: Message) -> Event {
        match msg.command {
            Command::Reply(Reply {
                payload,
                orig_msgid: None,
                ..
            }) => Event::Accepted {
                msgid: String::from_utf8_lossy(&payload).into_owned(),
            },
            // A worker-style REPLY [payload, orig_msgid(, status)] is taken
            // as a result; routers send RESULT, but leniency costs nothing.
            Command::Reply(Reply {
                payload,
                orig_msgid: Some(orig),
                status,
                ..
            }) => Event::Result {
                msgid: orig,
                status: status.unwrap_or(ResultStatus::Ok),
                payload,
            },
            Command::Reject(Reject {
                orig_msgid,
                reason,
                text,
            }) => Event::Rejected {
                msgid: orig_msgid,
                reason,
                text,
            },
            Command::Result(r) => Event::Result {
                msgid: r.orig_msgid,
                status: r.status,
                payload: r.payload,
            },
            Command::Notice(n) => Event::Notice(n),
            Command::Duplicate(Duplicate {
                orig_msgid,
                existing_msgid,
                text,
            }) => Event::Duplicate {
                msgid: orig_msgid,
                existing: existing_msgid,
                text,
            },
            other => Event::Other(format!("{} {}", other.name(), msg.msgid)),
        }
    }

    /// The msgid of the REQUEST this event is about, if any.
    pub fn msgid(&self) -> Option<&str> {
        match self {
            Event::Accepted { msgid }
            | Event::Rejected { msgid, .. }
            | Event::Result { msgid, .. }
            | Event::Duplicate { msgid, .. } => Some(msgid),
            Event::Notice(n) => Some(&n.orig_msgid),
            Event::Reconnected { .. } | Event::Other(_) => None,
        }
    }
}
