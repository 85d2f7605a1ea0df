//! The journal record of one schedule: versioned JSON.
//!
//! ```json
//! {"version": 1, "id": "<hex>", "queue": "default", "headers": "guarantee",
//!  "message": "[\"run\", {...}]", "interval_secs": 60, "cron": "",
//!  "run_limit": null, "runs_left": null, "next_run_ms": 1796217660000,
//!  "last_run_ms": 1796217600000, "run_count": 1,
//!  "created_ms": 1796217600000, "updated_ms": 1796217600000}
//! ```
//!
//! `message` holds the payload when it is UTF-8 (always, from 0.3.13
//! clients); otherwise `message_bytes` holds it as an array of bytes.
//! `interval_secs` is an integer for whole seconds (as every record written
//! before sub-second intervals) and a decimal otherwise (`1.5`); `-1` for
//! cron schedules.

use emqp_proto::{Headers, Interval};
use serde::{Deserialize, Serialize};

use crate::entry::{run_limit, Entry, Timing};
use crate::error::ScheduleError;
use crate::id::ScheduleId;

pub(crate) const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct RecordV1 {
    version: u32,
    id: String,
    queue: String,
    headers: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message_bytes: Option<Vec<u8>>,
    interval_secs: serde_json::Number,
    cron: String,
    run_limit: Option<u64>,
    runs_left: Option<u64>,
    next_run_ms: Option<i64>,
    last_run_ms: Option<i64>,
    run_count: u64,
    created_ms: i64,
    updated_ms: i64,
}

#[derive(Deserialize)]
struct VersionOnly {
    version: u32,
}

pub(crate) fn encode(id: &ScheduleId, e: &Entry) -> Vec<u8> {
    let (message, message_bytes) = match std::str::from_utf8(&e.message) {
        Ok(s) => (Some(s.to_string()), None),
        Err(_) => (None, Some(e.message.clone())),
    };
    let r = RecordV1 {
        version: VERSION,
        id: id.as_str().to_string(),
        queue: e.queue.clone(),
        headers: e.headers.encode(),
        message,
        message_bytes,
        interval_secs: interval_number(e.timing.interval()),
        cron: e.timing.cron_text().to_string(),
        run_limit: e.run_limit,
        runs_left: e.runs_left,
        next_run_ms: e.next_run_ms,
        last_run_ms: e.last_run_ms,
        run_count: e.run_count,
        created_ms: e.created_ms,
        updated_ms: e.updated_ms,
    };
    // Serialising plain strings, integers and options cannot fail.
    serde_json::to_vec(&r).unwrap_or_default()
}

/// Seconds as a JSON number: an integer when whole.
fn interval_number(i: Interval) -> serde_json::Number {
    match serde_json::to_value(i) {
        Ok(serde_json::Value::Number(n)) => n,
        // Interval serialises to a finite number; never reached.
        _ => serde_json::Number::from(-1),
    }
}

pub(crate) fn decode(blob: &[u8]) -> Result<(ScheduleId, Entry), ScheduleError> {
    let bad = |why: String| ScheduleError::BadRecord(why);
    let v: VersionOnly =
        serde_json::from_slice(blob).map_err(|e| bad(format!("not a schedule record: {e}")))?;
    if v.version != VERSION {
        return Err(bad(format!(
            "record version {} is not supported (this build reads {VERSION})",
            v.version
        )));
    }
    let r: RecordV1 = serde_json::from_slice(blob).map_err(|e| bad(e.to_string()))?;
    let message = match (r.message, r.message_bytes) {
        (Some(s), None) => s.into_bytes(),
        (None, Some(b)) => b,
        _ => return Err(bad("exactly one of message, message_bytes expected".into())),
    };
    let id = ScheduleId::of(&r.queue, &message);
    if id.as_str() != r.id {
        return Err(bad(format!(
            "id {} does not match its queue and message (expected {id})",
            r.id
        )));
    }
    let headers = Headers::parse(r.headers.as_bytes()).map_err(|e| bad(format!("headers: {e}")))?;
    // The number's JSON text, decoded as the INTERVAL frame is.
    let interval = Interval::parse(&r.interval_secs.to_string())
        .map_err(|e| bad(format!("interval_secs {}: {e}", r.interval_secs)))?;
    let timing = Timing::from_frames(interval, &r.cron)?;
    let limit = run_limit(&headers)?;
    if limit != r.run_limit {
        return Err(bad("run_limit does not match the headers".into()));
    }
    match (r.run_limit, r.runs_left) {
        (None, None) => {}
        (Some(l), Some(n)) if n > 0 && n <= l => {}
        _ => return Err(bad("runs_left does not fit run_limit".into())),
    }
    Ok((
        id,
        Entry {
            queue: r.queue,
            headers,
            message,
            timing,
            run_limit: r.run_limit,
            runs_left: r.runs_left,
            next_run_ms: r.next_run_ms,
            last_run_ms: r.last_run_ms,
            run_count: r.run_count,
            created_ms: r.created_ms,
            updated_ms: r.updated_ms,
        },
    ))
}
