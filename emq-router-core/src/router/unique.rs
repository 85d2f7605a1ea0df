//! Unique jobs: `unique-key:K`, `unique-for:SECS`,
//! `on-conflict:existing|reject|replace` (emq; docs/PROTOCOL.md, "Unique
//! jobs").
//!
//! **Rule.** A REQUEST with `unique-key:K` takes the key K when it is
//! accepted. The key stays taken while that job is unfinished (buffered,
//! delayed, retrying or running) and, with `unique-for:SECS`, also until
//! SECS after its acceptance, whichever ends later. While K is taken, a
//! REQUEST with K is not a new job; by its `on-conflict`:
//!
//! - `existing` (the default): it is acknowledged as the holder, with
//!   `DUPLICATE [msgid, holder msgid, text]` instead of `REPLY [msgid]`
//!   (held, like an ACK, until the records before it are committed, and
//!   answered `REJECT journal-unavailable` instead if the holder's own
//!   batch fails). With `reply-requested` its client is sent the holder's
//!   `RESULT [holder msgid, status, payload]` when the holder finishes, or
//!   at once when it finished already and is kept (`--retain-finished`; a
//!   result not kept is sent as a failed RESULT of kind
//!   `result-not-kept`). These RESULTs are sent once, not held until
//!   delivered; at most [`MAX_WATCHERS`] clients per key get one.
//! - `reject`: `REJECT [msgid, duplicate, "HOLDER: text"]`.
//! - `replace`: a holder still waiting (buffered or delayed) is cancelled
//!   (finished `cancelled`, its waiting clients get its failed RESULT of
//!   kind `cancelled`) and the new job takes K; a running or finished
//!   holder is kept, and the new REQUEST is its duplicate as with
//!   `existing`.
//!
//! A built-in schedule whose headers carry a unique key skips a run while
//! the key is held (the previous run is unfinished, or in its window), as
//! a run skipped at `hwm`; a schedule run or a retried dead letter that is
//! accepted takes its key if it is free.
//!
//! Bad values (an empty or over-long key, a `unique-for` that is not
//! seconds, an unknown `on-conflict`, either without a key) are refused
//! `malformed` with the reason (`emqp_proto::UniqueError`). Keys are
//! compared byte for byte, across queues.
//!
//! **Durability.** An unfinished job's key is in its journaled headers,
//! so a router that starts (after a crash or a failover) takes the keys
//! of the jobs it restores. A window (`unique-for`) is journaled as
//! `PutState { UniqueKey, K, {msgid, until_unix_ms} }` in the same batch
//! as the job's `Accepted` record, and deleted (`DeleteState`) when the
//! window ends; at start a window whose end has not come holds K again.
//! A job whose batch fails gives its key back.
//!
//! **Bounds.** At most `Config::max_unique_keys` keys are held
//! (`--max-unique-keys`); at the cap a REQUEST with a key not held is
//! refused `queue-full` (sent again later by emq-sender and the Python
//! client, as for a full queue); keys free up as jobs finish and windows
//! end. The journal keeps at most one state row per held key with a
//! window. Keys are at most 256 bytes.

use std::collections::BTreeSet;
use std::time::Duration;

use emqp_proto::{
    Command, Duplicate, Headers, JobResult, OnConflict, Reject, RejectReason, ResultStatus, Unique,
};

use super::{frames_of, Router};
use crate::event::{Action, Socket};
use crate::jobs::{Job, JobId, JobState};
use crate::journal::{Record, StateKind};
use crate::util::FastMap;

/// Clients at most that wait for one key holder's RESULT as duplicates.
pub(crate) const MAX_WATCHERS: usize = 1024;

/// Who holds a key.
#[derive(Debug)]
struct Holder {
    /// The holding job's msgid.
    msgid: String,
    /// The job is unfinished (in the store).
    unfinished: bool,
    /// The end of its `unique-for` window, if one is open.
    until: Option<Duration>,
    /// Clients of duplicates that asked for the holder's RESULT.
    watchers: Vec<Vec<u8>>,
}

/// The held keys (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct UniqueKeys {
    keys: FastMap<String, Holder>,
    /// Open windows by end.
    windows: BTreeSet<(Duration, String)>,
}

impl UniqueKeys {
    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The earliest window end.
    pub(crate) fn deadline(&self) -> Option<Duration> {
        self.windows.first().map(|(t, _)| *t)
    }

    /// The msgid holding `key`.
    pub(crate) fn holder(&self, key: &str) -> Option<&str> {
        self.keys.get(key).map(|h| h.msgid.as_str())
    }
}

/// A window as journaled (`StateKind::UniqueKey`, id: the key): JSON
/// `{"msgid": "...", "until_unix_ms": N}`.
#[derive(Debug, PartialEq, Eq)]
struct WindowBlob {
    msgid: String,
    until_unix_ms: u64,
}

impl WindowBlob {
    fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "msgid": self.msgid,
            "until_unix_ms": self.until_unix_ms,
        }))
        .unwrap_or_default()
    }

    fn decode(blob: &[u8]) -> Result<WindowBlob, String> {
        let v: serde_json::Value = serde_json::from_slice(blob).map_err(|e| e.to_string())?;
        let msgid = v
            .get("msgid")
            .and_then(|m| m.as_str())
            .ok_or("no msgid")?
            .to_string();
        let until_unix_ms = v
            .get("until_unix_ms")
            .and_then(|m| m.as_u64())
            .ok_or("no until_unix_ms")?;
        Ok(WindowBlob {
            msgid,
            until_unix_ms,
        })
    }
}

/// What became of a REQUEST whose key may be taken.
pub(super) enum Conflict {
    /// The key is free (or was freed by `replace`): accept the job.
    Free,
    /// Answered (DUPLICATE or REJECT): nothing more to do.
    Answered,
}

/// The unique-job headers of a raw HEADERS frame (`None` also for bad
/// ones: those never got in).
pub(crate) fn unique_of(headers: &[u8]) -> Option<Unique> {
    if !emqp_proto::headers::frame_may_be_unique(headers) {
        return None;
    }
    Headers::parse(headers).ok()?.unique().ok().flatten()
}

/// A REQUEST with unique headers, as `unique_conflict` needs it.
pub(super) struct Submit<'a> {
    pub client: &'a [u8],
    pub msgid: &'a str,
    /// The queue it would be buffered under.
    pub route: &'a str,
    pub reply_requested: bool,
}

impl Router {
    /// The REQUEST `s` with the unique headers `u`: answered as a
    /// duplicate if its key is taken (by `on-conflict`), refused at the key
    /// cap, else [`Conflict::Free`].
    pub(super) fn unique_conflict(
        &mut self,
        s: Submit<'_>,
        u: &Unique,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Conflict {
        let Submit {
            client,
            msgid,
            route,
            reply_requested,
        } = s;
        let Some(h) = self.unique.keys.get(&u.key) else {
            if self.unique.keys.len() >= self.cfg.max_unique_keys {
                self.stats.rejected_queue_full += 1;
                let text = format!(
                    "the router holds {} unique keys, its limit (--max-unique-keys); send it \
                     again later",
                    self.unique.keys.len()
                );
                self.reject(
                    client.to_vec(),
                    msgid.to_string(),
                    RejectReason::QueueFull,
                    text,
                    out,
                );
                return Conflict::Answered;
            }
            return Conflict::Free;
        };
        let holder = h.msgid.clone();
        let holder_jid = if h.unfinished {
            self.store.find(&holder)
        } else {
            None
        };
        match u.on_conflict {
            OnConflict::Reject => {
                self.stats.unique_rejected += 1;
                log::debug!(
                    "REQUEST {msgid}: unique key {:?} is held by {holder}",
                    u.key
                );
                let r = Reject::duplicate(
                    msgid.to_string(),
                    &holder,
                    &format!(
                        "the job {holder} holds unique key {:?} (on-conflict:reject)",
                        u.key
                    ),
                );
                let f = frames_of(self.ids.next_id(), Command::Reject(r));
                self.send(Socket::Frontend, client.to_vec(), f, out);
                return Conflict::Answered;
            }
            OnConflict::Replace => {
                let waiting = holder_jid
                    .and_then(|j| self.store.jobs.get(&j))
                    .is_some_and(|j| {
                        matches!(j.state, JobState::Queued | JobState::Delayed { .. })
                    });
                if let (true, Some(jid)) = (waiting, holder_jid) {
                    if self.replace_fits(route, jid) {
                        self.unique_replace(jid, &u.key, msgid, now, out);
                    }
                    // Else `queue-full` refuses the new job, and the
                    // waiting one stays.
                    return Conflict::Free;
                }
            }
            OnConflict::Existing => {}
        }
        self.answer_duplicate(client, msgid, &u.key, holder_jid, reply_requested, out);
        Conflict::Answered
    }

    /// `DUPLICATE [msgid, holder, text]` for a REQUEST whose key the job
    /// `holder_jid` (unfinished) or a finished job in its window holds;
    /// its client waits for the holder's RESULT if it asked for results.
    fn answer_duplicate(
        &mut self,
        client: &[u8],
        msgid: &str,
        key: &str,
        holder_jid: Option<JobId>,
        reply_requested: bool,
        out: &mut Vec<Action>,
    ) {
        let Some(h) = self.unique.keys.get_mut(key) else {
            return;
        };
        let holder = h.msgid.clone();
        self.stats.unique_duplicates += 1;
        log::debug!("REQUEST {msgid}: a duplicate of job {holder} (unique key {key:?})");
        let mut watch = reply_requested;
        if watch && h.unfinished {
            // The holder's own client gets its RESULT anyway.
            let own = holder_jid
                .and_then(|j| self.store.jobs.get(&j))
                .is_some_and(|j| j.reply_requested() && j.client() == client);
            if own {
                watch = false;
            } else if h.watchers.len() >= MAX_WATCHERS {
                log::warn!(
                    "job {holder} (unique key {key:?}) has {MAX_WATCHERS} duplicates waiting \
                     for its result: REQUEST {msgid} is acknowledged without it"
                );
                watch = false;
            } else if !h.watchers.iter().any(|w| w == client) {
                h.watchers.push(client.to_vec());
            }
        }
        let unfinished = h.unfinished;
        let state = if unfinished { "unfinished" } else { "finished" };
        let text = format!("the job {holder} ({state}) holds unique key {key:?}");
        let f = frames_of(
            self.ids.next_id(),
            Command::Duplicate(Duplicate {
                orig_msgid: msgid.to_string(),
                existing_msgid: holder.clone(),
                text,
            }),
        );
        let ack = holder_jid.map(|j| (j, msgid.to_string()));
        self.send_after_journal(Socket::Frontend, client.to_vec(), f, ack, out);
        if watch && !unfinished {
            let (status, payload) = self.kept_result(&holder);
            let f = frames_of(
                self.ids.next_id(),
                Command::Result(JobResult {
                    orig_msgid: holder,
                    status,
                    payload,
                }),
            );
            self.send_after_journal(Socket::Frontend, client.to_vec(), f, None, out);
        }
    }

    /// The result of a finished job as kept for lookups, or a failed one
    /// of kind `result-not-kept`.
    fn kept_result(&self, msgid: &str) -> (ResultStatus, Vec<u8>) {
        if let Some(f) = self.finished.get(msgid) {
            if let Some(r) = &f.result {
                let status = if f.outcome == "done" {
                    ResultStatus::Ok
                } else {
                    ResultStatus::Failed
                };
                return (status, r.clone());
            }
        }
        let payload = serde_json::to_vec(&serde_json::json!({"error": {
            "kind": "result-not-kept",
            "message": format!(
                "job {msgid} finished, but the router does not keep its result \
                 (--retain-finished, --retain-result-bytes)"
            ),
        }}))
        .unwrap_or_default();
        (ResultStatus::Failed, payload)
    }

    /// Whether a job for `route` fits (`hwm`) once the waiting job `jid`
    /// is taken out.
    fn replace_fits(&self, route: &str, jid: JobId) -> bool {
        if self.pool.has_free(route) {
            return true;
        }
        let freed = self
            .store
            .jobs
            .get(&jid)
            .is_some_and(|j| j.route() == route && j.state == JobState::Queued);
        self.store.queue_len(route) - usize::from(freed) < self.cfg.hwm
    }

    /// `on-conflict:replace` of the waiting job `jid` by the REQUEST
    /// `msgid`: the job is cancelled and its key freed for the new one.
    fn unique_replace(
        &mut self,
        jid: JobId,
        key: &str,
        msgid: &str,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let Some(job) = self.store.jobs.get(&jid) else {
            return;
        };
        match job.state {
            JobState::Queued => self.store.remove_queued(jid),
            JobState::Delayed { due } => {
                self.store.delayed.remove(&(due, jid));
            }
            JobState::InFlight { .. } => return,
        }
        let Some(job) = self.store.remove_job(jid) else {
            return;
        };
        self.stats.unique_replaced += 1;
        let why = format!("replaced by job {msgid} with unique key {key:?} (on-conflict:replace)");
        self.finish_cancelled(job, &why, None, now, out);
        // The window of the replaced job (kept by `unique_job_ended`) goes
        // too: the new job's own (or none) replaces it.
        if let Some(h) = self.unique.keys.remove(key) {
            if let Some(t) = h.until {
                self.unique.windows.remove(&(t, key.to_string()));
                self.journal.record(
                    Record::DeleteState {
                        kind: StateKind::UniqueKey,
                        id: key.to_string(),
                    },
                    None,
                );
            }
        }
    }

    /// A job was accepted (`accept`): it takes its key. A REQUEST found the
    /// key free (`unique_conflict`); a restored job takes the key of its
    /// headers (its window comes from the journal's state rows); a schedule
    /// run or a retried dead letter whose key another job holds keeps
    /// running without it (logged). `journaled`: a restored job (no
    /// record).
    pub(super) fn unique_take(
        &mut self,
        msgid: &str,
        headers: &[u8],
        journaled: bool,
        now: Duration,
    ) {
        let Some(u) = unique_of(headers) else {
            return;
        };
        if let Some(h) = self.unique.keys.get(&u.key) {
            if h.msgid != msgid {
                log::warn!(
                    "job {msgid} accepted while job {} holds its unique key {:?} (a schedule \
                     run, a retried dead letter or a restored job): it runs without the key",
                    h.msgid,
                    u.key
                );
            }
            return;
        }
        let until = match (journaled, u.window) {
            (false, Some(w)) => Some(now.saturating_add(w)),
            _ => None,
        };
        if let Some(t) = until {
            self.unique.windows.insert((t, u.key.clone()));
            if self.journal.enabled() {
                let blob = WindowBlob {
                    msgid: msgid.to_string(),
                    until_unix_ms: self.unix_ms(t),
                }
                .encode();
                self.journal.record(
                    Record::PutState {
                        kind: StateKind::UniqueKey,
                        id: u.key.clone(),
                        blob,
                    },
                    None,
                );
            }
        }
        self.unique.keys.insert(
            u.key,
            Holder {
                msgid: msgid.to_string(),
                unfinished: true,
                until,
                watchers: Vec::new(),
            },
        );
    }

    /// A job left the store finished (`result`: its status and RESULT
    /// payload) or never accepted (`None`: its batch failed): its waiting
    /// duplicates get its RESULT, and its key is freed unless its window
    /// is open.
    pub(super) fn unique_job_ended(
        &mut self,
        job: &Job,
        result: Option<(ResultStatus, &[u8])>,
        out: &mut Vec<Action>,
    ) {
        self.unique_ended(&job.msgid().to_string(), job.headers(), result, out);
    }

    fn unique_ended(
        &mut self,
        msgid: &str,
        headers: &[u8],
        result: Option<(ResultStatus, &[u8])>,
        out: &mut Vec<Action>,
    ) {
        if self.unique.keys.is_empty() {
            return;
        }
        let Some(u) = unique_of(headers) else {
            return;
        };
        let msgid = msgid.to_string();
        let Some(h) = self.unique.keys.get_mut(&u.key) else {
            return;
        };
        if h.msgid != msgid {
            return;
        }
        h.unfinished = false;
        let watchers = std::mem::take(&mut h.watchers);
        let open = h.until;
        let never_accepted = result.is_none();
        if open.is_none() || never_accepted {
            self.unique.keys.remove(&u.key);
            if let (Some(t), true) = (open, never_accepted) {
                self.unique.windows.remove(&(t, u.key.clone()));
                self.journal.record(
                    Record::DeleteState {
                        kind: StateKind::UniqueKey,
                        id: u.key.clone(),
                    },
                    None,
                );
            }
        }
        let Some((status, payload)) = result else {
            return;
        };
        for client in watchers {
            let f = frames_of(
                self.ids.next_id(),
                Command::Result(JobResult {
                    orig_msgid: msgid.clone(),
                    status,
                    payload: payload.to_vec(),
                }),
            );
            self.send_after_journal(Socket::Frontend, client, f, None, out);
        }
    }

    /// Windows that ended by `now`: their state rows are deleted, and
    /// keys of finished jobs freed (an unfinished job keeps its key).
    pub(super) fn unique_windows_due(&mut self, now: Duration) {
        while let Some((t, key)) = self.unique.windows.first().cloned() {
            if t > now {
                break;
            }
            self.unique.windows.pop_first();
            let Some(h) = self.unique.keys.get_mut(&key) else {
                continue;
            };
            if h.until != Some(t) {
                continue;
            }
            h.until = None;
            if !h.unfinished {
                self.unique.keys.remove(&key);
            }
            self.journal.record(
                Record::DeleteState {
                    kind: StateKind::UniqueKey,
                    id: key,
                },
                None,
            );
        }
    }

    /// At start, after the jobs: windows the journal held. One still open
    /// holds its key again (for its job, unfinished or not); one that
    /// ended while the router was down is deleted. Rows of other kinds
    /// are not ours. Returns the windows put back.
    pub(super) fn restore_unique(
        &mut self,
        states: &[(StateKind, String, Vec<u8>)],
        now: Duration,
    ) -> usize {
        let now_ms = self.unix_ms(now);
        let mut n = 0;
        for (kind, key, blob) in states {
            if *kind != StateKind::UniqueKey {
                continue;
            }
            let w = match WindowBlob::decode(blob) {
                Ok(w) => w,
                Err(e) => {
                    log::warn!("journal: unique key {key:?}: unreadable window ({e}); dropped");
                    self.journal.record(
                        Record::DeleteState {
                            kind: StateKind::UniqueKey,
                            id: key.clone(),
                        },
                        None,
                    );
                    continue;
                }
            };
            if w.until_unix_ms <= now_ms {
                self.journal.record(
                    Record::DeleteState {
                        kind: StateKind::UniqueKey,
                        id: key.clone(),
                    },
                    None,
                );
                continue;
            }
            let until = now.saturating_add(Duration::from_millis(w.until_unix_ms - now_ms));
            match self.unique.keys.get_mut(key) {
                Some(h) if h.msgid != w.msgid => {
                    log::warn!(
                        "journal: unique key {key:?} has a window for job {} and the unfinished \
                         job {}: the unfinished job keeps it",
                        w.msgid,
                        h.msgid
                    );
                    continue;
                }
                Some(h) => h.until = Some(until),
                None => {
                    self.unique.keys.insert(
                        key.clone(),
                        Holder {
                            msgid: w.msgid,
                            unfinished: false,
                            until: Some(until),
                            watchers: Vec::new(),
                        },
                    );
                }
            }
            self.unique.windows.insert((until, key.clone()));
            n += 1;
        }
        n
    }

    /// `(key, holder msgid)` when `headers` name a unique key someone holds
    /// (a schedule run is skipped then: `schedules.rs`).
    pub(super) fn unique_held(&self, headers: &Headers) -> Option<(String, String)> {
        if self.unique.keys.is_empty() {
            return None;
        }
        let u = headers.unique().ok().flatten()?;
        let holder = self.unique.keys.get(&u.key)?.msgid.clone();
        Some((u.key, holder))
    }

    /// The invariants of the held keys (`invariants.rs`).
    pub(super) fn check_unique(&self) -> Result<(), String> {
        for (key, h) in &self.unique.keys {
            if h.unfinished && self.store.find(&h.msgid).is_none() {
                return Err(format!(
                    "unique key {key:?} held for job {} that is not unfinished",
                    h.msgid
                ));
            }
            match h.until {
                Some(t) if !self.unique.windows.contains(&(t, key.clone())) => {
                    return Err(format!("unique key {key:?}: its window is not in the set"));
                }
                None if !h.unfinished => {
                    return Err(format!("unique key {key:?} held with no job and no window"));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Jobs of a failed batch, before they are taken out: their keys are
    /// freed (they were never accepted).
    pub(super) fn unique_batch_failed(&mut self, jobs: &[JobId], out: &mut Vec<Action>) {
        if self.unique.keys.is_empty() {
            return;
        }
        let gone: Vec<(String, Vec<u8>)> = jobs
            .iter()
            .filter_map(|j| self.store.jobs.get(j))
            .filter(|j| emqp_proto::headers::frame_may_be_unique(j.headers()))
            .map(|j| (j.msgid().to_string(), j.headers().to_vec()))
            .collect();
        for (msgid, headers) in gone {
            self.unique_ended(&msgid, &headers, None, out);
        }
    }
}
