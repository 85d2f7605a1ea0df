//! Traces: the span of a job's queue wait, and the `traceparent` its
//! worker gets.
//!
//! Only with `Config::traces` (the driver sets it when an OTLP endpoint is
//! configured); without it no header is read or changed and nothing is
//! emitted, so tracing off costs nothing.
//!
//! At each dispatch the router makes one span, **the queue wait** of that
//! attempt: from the job's acceptance to this dispatch, with its queue,
//! msgid and attempt (1 for the first delivery). Its parent is the
//! caller's span when the REQUEST's HEADERS carry a valid `traceparent`
//! (`emqp_proto::trace`); otherwise the router starts the trace. The
//! REQUEST the worker gets carries the router's span as its
//! `traceparent` (the item replaced, or appended), so the job manager's
//! span for the run is the queue wait's child; the other header items are
//! forwarded unchanged.
//!
//! The core draws no random numbers: ids come from `Config::id_seed`
//! hashed with the msgid (and the attempt, for span ids). The driver's
//! seed is random, so ids do not repeat across routers; a retried job
//! keeps its trace id (the same msgid) and gets a new span per attempt.
//! The flags are the caller's (sampled when there is no caller).
//!
//! The core only says what happened ([`crate::Action::JobSpan`]); the
//! driver turns it into an OpenTelemetry span and exports it.

use std::hash::BuildHasher;

use emqp_proto::TraceParent;
use foldhash::fast::FixedState;

/// One dispatch's span: the queue wait of attempt `attempt` of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpan {
    pub msgid: String,
    /// The queue the job was sent to (its route may differ).
    pub queue: String,
    /// 1 for the first delivery.
    pub attempt: u32,
    /// Unix microseconds of its acceptance (the span's start).
    pub accepted_unix_us: u64,
    /// Unix microseconds of this dispatch (the span's end).
    pub dispatched_unix_us: u64,
    /// This span: its trace id and span id, as forwarded to the worker.
    pub context: TraceParent,
    /// The caller's span from the REQUEST's `traceparent`, if any.
    pub parent: Option<TraceParent>,
}

/// The router's span for attempt `attempt` of job `msgid`, whose HEADERS
/// frame is `headers`: (the span, the HEADERS frame to forward).
pub(crate) fn dispatch_span(
    seed: u64,
    msgid: &str,
    queue: &str,
    headers: &[u8],
    attempt: u32,
    (accepted_unix_us, dispatched_unix_us): (u64, u64),
) -> (JobSpan, Vec<u8>) {
    let parent = TraceParent::from_headers(headers);
    let trace_id = match parent {
        Some(p) => p.trace_id,
        None => trace_id(seed, msgid),
    };
    let context = TraceParent {
        trace_id,
        span_id: span_id(seed, msgid, attempt),
        flags: parent.map_or(1, |p| p.flags),
    };
    let forwarded = context.set_in_headers(headers);
    let span = JobSpan {
        msgid: msgid.to_string(),
        queue: queue.to_string(),
        attempt,
        accepted_unix_us,
        dispatched_unix_us: dispatched_unix_us.max(accepted_unix_us),
        context,
        parent,
    };
    (span, forwarded)
}

fn hash(seed: u64, parts: &[&[u8]]) -> u64 {
    FixedState::with_seed(seed).hash_one(parts)
}

/// A trace id for a job without a caller's span (never all zero).
fn trace_id(seed: u64, msgid: &str) -> [u8; 16] {
    let hi = hash(seed, &[b"trace-hi", msgid.as_bytes()]);
    let lo = hash(seed, &[b"trace-lo", msgid.as_bytes()]) | 1;
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&hi.to_be_bytes());
    id[8..].copy_from_slice(&lo.to_be_bytes());
    id
}

/// The span id of attempt `attempt` of `msgid` (never zero).
fn span_id(seed: u64, msgid: &str, attempt: u32) -> [u8; 8] {
    (hash(seed, &[b"span", msgid.as_bytes(), &attempt.to_be_bytes()]) | 1).to_be_bytes()
}
