//! Batched acknowledgements (emq clients that ask for them).
//!
//! A client whose REQUEST carries the `batched-acks` header
//! ([`emqp_proto::headers::BATCHED_ACKS`]) takes its acknowledgement as
//! `ACKS [ORIG_MSGID, ...]` instead of `REPLY [ORIG_MSGID]`. The rule: an
//! acknowledgement going out to such a client joins the ACKS already
//! waiting in the actions not yet carried out when that ACKS is the last
//! message to the same client there (within [`LOOKBACK`] actions);
//! otherwise it starts an ACKS of its own. So the acknowledgements of one
//! read round (or of one committed journal batch) to one client go in one
//! message, and nothing to that client ever changes order: an ACKS only
//! grows while nothing else was queued for the client after it (a NOTICE,
//! which goes right before its job's acknowledgement, starts a new one).
//!
//! With a journal the acknowledgement is held until its record commits
//! (`durability.rs`); it joins an ACKS when it is released, and one whose
//! batch failed is still replaced by its REJECT. Clients without the
//! header (0.3.13's, emq-sender) get `REPLY [ORIG_MSGID]` as before.

use emqp_proto::Command;

use super::frames_of;
use crate::event::{Action, Frames, Socket};

/// How far back in the pending actions an ACKS is looked for.
pub(crate) const LOOKBACK: usize = 64;

/// The frames of an ACKS of `orig_msgid` alone.
pub(crate) fn acks_frames(msgid: String, orig_msgid: &str) -> Frames {
    frames_of(
        msgid,
        Command::Acks {
            orig_msgids: vec![orig_msgid.to_string()],
        },
    )
}

fn is_acks(frames: &Frames) -> bool {
    frames.get(2).is_some_and(|c| c == b"ACKS")
}

/// Push `action` to `out`; an ACKS joins the last message queued to the
/// same client when that is an ACKS (see the module rule).
pub(crate) fn push(out: &mut Vec<Action>, action: Action) {
    let Action::Send {
        socket: Socket::Frontend,
        identity,
        frames,
    } = &action
    else {
        out.push(action);
        return;
    };
    if !is_acks(frames) || frames.len() < 4 {
        out.push(action);
        return;
    }
    let last_to_client = out.iter_mut().rev().take(LOOKBACK).find_map(|a| match a {
        Action::Send {
            socket: Socket::Frontend,
            identity: i,
            frames: f,
        } if i == identity => Some(f),
        _ => None,
    });
    match last_to_client {
        Some(f) if is_acks(f) => {
            if let Action::Send { frames, .. } = action {
                // Everything after the command's own msgid: the acked ids.
                f.extend(frames.into_iter().skip(4));
            }
        }
        _ => out.push(action),
    }
}
