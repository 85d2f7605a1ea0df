//! Batches as data: the `BATCH` spec a client sends (open, with its
//! callbacks, or close), a batch's counts, its journal blob, and the MSG
//! each callback gets. No behaviour: the rules (who joins, when the
//! callbacks run, restore) are `router/batch.rs`.
//!
//! **What a callback receives.** A callback is a `run` or `call` job; its
//! MSG gets one argument put **first** in its `args` (as a workflow node
//! gets its parent's result, `crate::workflow::prepend_arg`): the batch's
//! status `{"batch": ID, "event": "success" | "complete", "total": N,
//! "succeeded": N, "failed": N, "failed_ids": [MSGID, ...]}` — the counts
//! when the last job ended, `failed_ids` the first [`MAX_FAILED_IDS`]
//! failed jobs' msgids in the order they failed.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Unfinished batches the router holds, at most (more: `queue-full`).
pub const MAX_BATCHES: usize = 10_000;
/// Failed jobs' msgids a batch keeps (and hands its callbacks); the
/// `failed` count goes on past it.
pub const MAX_FAILED_IDS: usize = 1_000;
/// Bytes of a batch id.
pub const MAX_BATCH_ID: usize = 128;

/// A callback job as the client describes it (a workflow node's fields
/// without `id`, `after`, `pass`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Callback {
    #[serde(default = "default_queue")]
    pub queue: String,
    /// The HEADERS frame of its job (csv; no `batch` item).
    #[serde(default)]
    pub headers: String,
    /// Its MSG (`["run", {...}]` or `["call", {...}]`).
    pub msg: Value,
}

fn default_queue() -> String {
    emqp_proto::DEFAULT_QUEUE.to_string()
}

/// The `BATCH` SPEC frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Spec {
    /// Open the batch (msgid = its id) with its callbacks.
    Open(Box<Open>),
    /// No more jobs join; the callbacks run once every job ended.
    Close,
}

/// The fields of an `open`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Open {
    #[serde(default)]
    pub on_success: Option<Callback>,
    #[serde(default)]
    pub on_complete: Option<Callback>,
    /// Free text shown in views.
    #[serde(default)]
    pub description: String,
}

/// Which callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Success,
    Complete,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Success => "success",
            Event::Complete => "complete",
        }
    }

    /// The suffix of its job's msgid: `ID/on-success`, `ID/on-complete`.
    pub fn suffix(self) -> &'static str {
        match self {
            Event::Success => "on-success",
            Event::Complete => "on-complete",
        }
    }

    pub fn of_suffix(s: &str) -> Option<Event> {
        [Event::Success, Event::Complete]
            .into_iter()
            .find(|e| e.suffix() == s)
    }
}

/// An open, closed or finished batch. `pending` is not journaled: it is
/// the number of unfinished jobs that carry `batch:ID`, counted again
/// from the restored jobs at start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    pub id: String,
    pub opened_unix_ms: u64,
    #[serde(default)]
    pub on_success: Option<Callback>,
    #[serde(default)]
    pub on_complete: Option<Callback>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub closed_unix_ms: Option<u64>,
    #[serde(default)]
    pub succeeded: u64,
    #[serde(default)]
    pub failed: u64,
    #[serde(default)]
    pub failed_ids: Vec<String>,
    /// When its callbacks were submitted (it is finished then).
    #[serde(default)]
    pub finished_unix_ms: Option<u64>,
    /// When an operator cancelled it (admin `cancel` of its id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_unix_ms: Option<u64>,
    #[serde(skip)]
    pub pending: u64,
}

impl Batch {
    /// Check an `open` spec and build the batch.
    pub fn open(
        id: &str,
        on_success: Option<Callback>,
        on_complete: Option<Callback>,
        description: String,
        at: u64,
    ) -> Result<Batch, String> {
        check_id(id)?;
        for (name, c) in [("on_success", &on_success), ("on_complete", &on_complete)] {
            let Some(c) = c else { continue };
            if c.queue.is_empty() {
                return Err(format!("{name}: empty queue"));
            }
            let frame = c.headers.as_bytes();
            emqp_proto::Headers::parse(frame).map_err(|e| format!("{name}: headers: {e}"))?;
            if emqp_proto::headers::frame_item(frame, emqp_proto::headers::BATCH).is_some() {
                return Err(format!("{name}: a callback cannot join a batch"));
            }
            let mut msg = c.msg.clone();
            crate::workflow::prepend_arg(&mut msg, Value::Null)
                .map_err(|e| format!("{name}: {e} (a callback is a run or call job)"))?;
        }
        Ok(Batch {
            id: id.to_string(),
            opened_unix_ms: at,
            on_success,
            on_complete,
            description,
            closed_unix_ms: None,
            succeeded: 0,
            failed: 0,
            failed_ids: Vec::new(),
            finished_unix_ms: None,
            cancelled_unix_ms: None,
            pending: 0,
        })
    }

    /// Whether `spec` is the `open` this batch was made of (an `open`
    /// sent again).
    pub fn opened_by(&self, spec: &Spec) -> bool {
        matches!(spec, Spec::Open(o)
            if o.on_success == self.on_success
                && o.on_complete == self.on_complete
                && o.description == self.description)
    }

    pub fn is_closed(&self) -> bool {
        self.closed_unix_ms.is_some()
    }

    pub fn total(&self) -> u64 {
        self.succeeded + self.failed + self.pending
    }

    /// Closed and every job ended: its callbacks are due.
    pub fn is_due(&self) -> bool {
        self.is_closed() && self.pending == 0 && self.finished_unix_ms.is_none()
    }

    /// A job of it ended, counted at its final outcome.
    pub fn count_end(&mut self, msgid: &str, ok: bool) {
        self.pending = self.pending.saturating_sub(1);
        if ok {
            self.succeeded += 1;
        } else {
            self.failed += 1;
            if self.failed_ids.len() < MAX_FAILED_IDS {
                self.failed_ids.push(msgid.to_string());
            }
        }
    }

    /// A job counted failed runs again (dead-retry, requeue): it is
    /// pending again, not a new job. `false`: not one of its listed
    /// failures.
    pub fn uncount_failure(&mut self, msgid: &str) -> bool {
        let Some(i) = self.failed_ids.iter().position(|m| m == msgid) else {
            return false;
        };
        self.failed_ids.remove(i);
        self.failed = self.failed.saturating_sub(1);
        true
    }

    /// The callbacks due, in the order they are submitted: `on_success`
    /// (when no job failed), then `on_complete`.
    pub fn callbacks(&self) -> Vec<(Event, &Callback)> {
        let mut out = Vec::new();
        if self.failed == 0 {
            if let Some(c) = &self.on_success {
                out.push((Event::Success, c));
            }
        }
        if let Some(c) = &self.on_complete {
            out.push((Event::Complete, c));
        }
        out
    }

    /// The callback of `event`, whether or not it is due.
    pub fn callback(&self, event: Event) -> Option<&Callback> {
        match event {
            Event::Success => self.on_success.as_ref(),
            Event::Complete => self.on_complete.as_ref(),
        }
    }

    /// The msgid of a callback's job.
    pub fn callback_msgid(&self, event: Event) -> String {
        format!("{}/{}", self.id, event.suffix())
    }

    /// What a callback receives (module documentation).
    pub fn status_arg(&self, event: Event) -> Value {
        json!({
            "batch": self.id,
            "event": event.as_str(),
            "total": self.total(),
            "succeeded": self.succeeded,
            "failed": self.failed,
            "failed_ids": self.failed_ids,
        })
    }

    /// The MSG of the callback of `event`, its status argument put first.
    pub fn callback_payload(&self, event: Event) -> Result<Vec<u8>, String> {
        let c = self
            .callback(event)
            .ok_or_else(|| format!("batch {} has no on_{}", self.id, event.as_str()))?;
        let mut msg = c.msg.clone();
        crate::workflow::prepend_arg(&mut msg, self.status_arg(event))?;
        serde_json::to_vec(&msg).map_err(|e| e.to_string())
    }

    /// The journal blob (`StateKind::Batch`).
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(blob: &[u8]) -> Result<Batch, String> {
        serde_json::from_slice(blob).map_err(|e| e.to_string())
    }
}

/// A batch id: 1 to [`MAX_BATCH_ID`] bytes, no `,` (it goes in a HEADERS
/// item), no `/` (its callbacks are `ID/on-…`), no spaces at its ends.
pub fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_BATCH_ID || id.contains([',', '/']) || id.trim() != id {
        return Err(format!(
            "batch id {id:?}: 1 to {MAX_BATCH_ID} bytes, no ',' nor '/', no spaces at its ends"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cb(msg: Value) -> Callback {
        Callback {
            queue: "default".into(),
            headers: String::new(),
            msg,
        }
    }

    #[test]
    fn open_checks_ids_and_callbacks() {
        let run = json!(["run", {"callable": "f", "path": "m", "args": [1]}]);
        assert!(Batch::open("b1", Some(cb(run.clone())), None, String::new(), 5).is_ok());
        for bad in ["", "a,b", "a/b", " a"] {
            assert!(
                Batch::open(bad, None, None, String::new(), 5).is_err(),
                "{bad:?}"
            );
        }
        let shell = json!(["shell", {"command": "true"}]);
        let e = Batch::open("b", None, Some(cb(shell)), String::new(), 5).unwrap_err();
        assert!(e.contains("on_complete"), "{e}");
        let mut joined = cb(run);
        joined.headers = "batch:other".into();
        let e = Batch::open("b", Some(joined), None, String::new(), 5).unwrap_err();
        assert!(e.contains("cannot join"), "{e}");
    }

    #[test]
    fn callback_payload_puts_the_status_first_and_the_blob_keeps_counts() {
        let run = json!(["run", {"callable": "f", "path": "m", "args": [7]}]);
        let mut b = Batch::open("b", None, Some(cb(run)), "d".into(), 5).unwrap();
        b.pending = 2;
        b.count_end("b-1", true);
        b.count_end("b-2", false);
        let p: Value =
            serde_json::from_slice(&b.callback_payload(Event::Complete).unwrap()).unwrap();
        assert_eq!(
            p[1]["args"],
            json!([{"batch": "b", "event": "complete", "total": 2, "succeeded": 1,
                    "failed": 1, "failed_ids": ["b-2"]}, 7])
        );
        assert!(b.callback_payload(Event::Success).is_err());
        let back = Batch::decode(&b.encode()).unwrap();
        assert_eq!((back.succeeded, back.failed, back.pending), (1, 1, 0));
        assert_eq!(back.failed_ids, ["b-2"]);
        assert_eq!(back.callbacks().len(), 1, "no on_success after a failure");
    }
}
