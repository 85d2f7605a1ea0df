//! Flow control: per-key concurrency and rate limits, fairness across
//! keys, priorities (docs/PROTOCOL.md, "Flow control").
//!
//! - **Headers.** A REQUEST may carry `key:K` (the flow-control key, e.g.
//!   a tenant: at most 128 bytes) and `priority:N` (0–9, higher first,
//!   default 0). A longer or empty key, or another priority, is refused
//!   `REJECT malformed` with the reason (`intake.rs`). 0.3.13 peers see
//!   unknown headers and ignore them; job managers get them unchanged.
//! - **Flow-controlled queues.** A queue with a policy, or holding a job
//!   with a key or a priority, keeps its waiting jobs per key and
//!   priority (`crate::flow`), not in one FIFO buffer. Jobs without a key
//!   share the key `""`. Without a policy only the order changes
//!   (priorities, then acceptance order).
//! - **Policy** (`emqp_proto::flow::Policy`, set by `limits-set`, `emq-cli
//!   limits set`, or `--limit` at start): `concurrency` (jobs of the queue
//!   running at once), `concurrency-per-key`, `rate` and `rate-per-key`
//!   (`N/SECS`), `fair`. Policies are journaled (`Record::PutState` of
//!   kind `QueuePolicy`, blob: the policy's JSON), so they survive a
//!   restart and a failover; a `--limit` given at start replaces the
//!   journal's policy of that queue (and is journaled).
//! - **No limit is ever broken; no head-of-line blocking.** A job that
//!   would break a limit stays queued and takes no slot and no token; the
//!   jobs of other keys are dispatched past it. A key at its limit leaves
//!   the ready sets until the limit lets it go (one of its jobs ends, its
//!   bucket refills), so a dispatch costs O(log keys), whatever waits.
//! - **Concurrency** counts a job from its dispatch until its REPLY (or
//!   its retry delay, or its cancellation) or until its loss is detected
//!   (its worker removed: heartbeat timeout, KBYE, send failure); a job
//!   taken back by its job manager after a reconnect (`RUNNING`,
//!   `completion.rs`) is counted on its new connection.
//! - **Restarts and failover.** With a journal, the first dispatch of a
//!   job of a queue with a concurrency limit is journaled (`Attempt`) and
//!   the job leaves only once that record is committed; so a router that
//!   starts from the journal knows which jobs may be running. Such a job
//!   (unfinished, delivered at least once) is **presumed running**: it
//!   counts on its key, and is not dispatched, for one peer timeout
//!   (heartbeat interval × liveness) after the restore — the time a job
//!   manager that runs it has to reconnect and list it in `RUNNING`
//!   (adopted: counted while it runs, as any job) or send its REPLY.
//!   Then it is taken for lost and queued again (at the front of its key).
//! - **Rates** are token buckets in router time (GCRA form,
//!   `crate::flow::Bucket`): `N/SECS` holds N tokens, one comes back every
//!   SECS/N; the burst is N. The queue's bucket and the key's bucket each
//!   lose a token at a dispatch (a redelivery is a dispatch). A bucket
//!   that holds a queue or a key back arms the flow timer for the next
//!   token.
//! - **Order.** The highest priority with a dispatchable job goes first;
//!   within a priority, with `fair` the keys take turns (round robin: a
//!   key that dispatched, or that comes back from a block, goes to the
//!   back of the round), without it the oldest job goes first.
//!   **Aging**: a job that has waited [`PRIORITY_AGING`] (10 s) since its
//!   acceptance is served before any job that has not, whatever its
//!   priority (aged jobs oldest first), so a low priority never waits
//!   forever behind a stream of higher ones.
//! - **Visible.** The `job` view of a queued job says why it waits
//!   (`limited: key acme at 2/2 running`, `rate: next at …`); `limits-show`
//!   lists each policy with its keys (running, waiting, blocked);
//!   `/metrics` has per queue the jobs held by a limit
//!   (`emq_queue_flow_limited`) and the dispatches a limit held back
//!   (`emq_queue_flow_throttled_total`), no series per key.

use std::time::Duration;

use emqp_proto::flow::{Policy, PolicyChange};
use serde_json::{json, Value};

use super::Router;
use crate::event::Action;
use crate::flow::{Block, Candidate, FlowQueue, QueueBlock};
use crate::jobs::{Job, JobId};
use crate::journal::{Record, StateKind};

/// A job waiting this long is served before any job that has not.
pub const PRIORITY_AGING: Duration = Duration::from_secs(10);

/// Keys `limits-show` lists per queue at most (most waiting first).
const KEYS_SHOWN: usize = 100;

impl Router {
    /// `queue`'s policy, if any.
    pub fn policy(&self, queue: &str) -> Option<Policy> {
        self.store.flow.get(queue).and_then(|q| q.policy)
    }

    /// The next job of flow-controlled `route` to dispatch at `now` (a
    /// worker is free), taken out of its lane; `None` when a limit, the
    /// journal or an empty queue says no.
    pub(super) fn pop_flow(&mut self, route: &str, now: Duration) -> Option<JobId> {
        if self.journal.is_failing() {
            return None;
        }
        let jobs = &self.store.jobs;
        let q = self.store.flow.queues.get_mut(route)?;
        q.wake(now);
        q.forget_idle(now);
        if q.waiting == 0 {
            return None;
        }
        if let Some(b) = q.queue_block(now) {
            if let QueueBlock::Rate(at) = b {
                q.note_rate_block(at);
            }
            q.throttled += 1;
            return None;
        }
        let aged = |head: JobId| {
            jobs.get(&head)
                .is_some_and(|j| now.saturating_sub(j.accepted_at()) >= PRIORITY_AGING)
        };
        let Candidate::Job(jid, k, p) = q.candidate(now, aged) else {
            q.throttled += 1;
            return None;
        };
        if !self.journal.is_durable(jid) {
            return None;
        }
        q.take(jid, k, p, now);
        self.store.flow.waiting -= 1;
        Some(jid)
    }

    /// Whether flow-controlled `route` has a job a free worker would take
    /// (the invariants' "no idle worker while a job could go"): the
    /// queue's limits as last seen, the first listed key's head durable.
    pub(super) fn flow_ready(&self, route: &str) -> bool {
        let Some(q) = self.store.flow.get(route) else {
            return false;
        };
        if self.journal.is_failing() || q.waiting == 0 || q.rate_blocked.is_some() {
            return false;
        }
        if q.policy
            .is_some_and(|p| p.concurrency.is_some_and(|c| q.running() >= c))
        {
            return false;
        }
        let p = q.policy.unwrap_or_default();
        q.listed_heads().any(|(head, k)| {
            q.key(k).is_some_and(|ks| {
                ks.blocked.is_none() && p.concurrency_per_key.is_none_or(|c| ks.running < c)
            }) && self.journal.is_durable(head)
        })
    }

    /// Pump the queues in which a counted job ended during this input
    /// (a slot or a key a limit held may be free).
    pub(super) fn pump_woken(&mut self, now: Duration, out: &mut Vec<Action>) {
        while !self.store.flow.woken.is_empty() {
            let woken = std::mem::take(&mut self.store.flow.woken);
            for r in woken {
                self.pump(&r, now, out);
                self.store.flow.maybe_drop(&r);
            }
        }
    }

    /// The flow timer: the next token of a held queue or key, or the end
    /// of a restore's presumption (O(flow-controlled queues)).
    pub(super) fn flow_deadline(&self) -> Option<Duration> {
        self.store
            .flow
            .queues
            .values()
            .filter_map(|q| {
                let wake = if q.waiting > 0 { q.wake_at() } else { None };
                match (wake, q.presumed_until) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            })
            .min()
    }

    /// Fire the flow timer: presumed jobs whose time is up are queued
    /// again (front of their key), held queues and keys whose token came
    /// are pumped.
    pub(super) fn fire_flow(&mut self, now: Duration, out: &mut Vec<Action>) {
        let mut due: Vec<String> = Vec::new();
        let mut lost: Vec<JobId> = Vec::new();
        for (r, q) in &mut self.store.flow.queues {
            let mut hit = false;
            if q.presumed_until.is_some_and(|t| t <= now) {
                lost.extend(q.presumed.drain());
                q.presumed_until = None;
                hit = true;
            }
            if q.wake_at().is_some_and(|t| t <= now) {
                q.wake(now);
                hit = true;
            }
            if hit {
                due.push(r.clone());
            }
        }
        if !lost.is_empty() {
            log::info!(
                "{} restored job(s) presumed running were not claimed by a job manager within \
                 the peer timeout: queued again",
                lost.len()
            );
        }
        for jid in lost {
            self.store.requeue(jid, true);
        }
        for r in due {
            self.pump(&r, now, out);
        }
    }

    /// The time presumed-running restored jobs of `route` hold their key
    /// (`None`: the job is queued as usual): a job delivered before, of a
    /// queue whose policy limits concurrency.
    pub(super) fn presume_until(
        &self,
        route: &str,
        attempts: u32,
        now: Duration,
    ) -> Option<Duration> {
        if attempts == 0 || !self.policy(route).is_some_and(|p| p.limits_concurrency()) {
            return None;
        }
        Some(now.saturating_add(self.cfg.peer_timeout()))
    }

    /// Whether a dispatch of a job of `route` is journaled and waits for
    /// its commit ("Restarts and failover").
    pub(super) fn dispatch_journaled(&self, route: &str) -> bool {
        self.journal.enabled() && self.policy(route).is_some_and(|p| p.limits_concurrency())
    }

    /// Set `queue`'s policy (`None`: remove it), journaled when `journal`.
    /// Running jobs of the queue are counted first (O(in flight), once).
    pub(crate) fn set_policy(
        &mut self,
        queue: &str,
        policy: Option<Policy>,
        journal: bool,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let policy = policy.filter(|p| !p.is_none());
        if policy.is_some() {
            let running: Vec<JobId> = self
                .pool
                .workers
                .values()
                .flat_map(|w| w.inflight.values().map(|i| i.job))
                .collect();
            self.store.make_flow(queue);
            self.store.count_running(queue, running);
        }
        if let Some(q) = self.store.flow.get_mut(queue) {
            q.set_policy(policy);
        }
        self.store.flow.maybe_drop(queue);
        if journal && self.journal.enabled() {
            let record = match policy {
                Some(p) => Record::PutState {
                    kind: StateKind::QueuePolicy,
                    id: queue.to_string(),
                    blob: p.to_blob(),
                },
                None => Record::DeleteState {
                    kind: StateKind::QueuePolicy,
                    id: queue.to_string(),
                },
            };
            self.journal.record(record, None);
        }
        match policy {
            Some(p) => log::info!("queue {queue}: flow-control policy {p}"),
            None => log::info!("queue {queue}: no flow-control policy"),
        }
        self.pump(queue, now, out);
    }

    /// Policies of the journal (`Restored.states`), then those of the
    /// configuration (`--limit`), which replace them and are journaled.
    /// Before the jobs are restored (presumption needs them).
    pub(super) fn restore_policies(
        &mut self,
        states: &[(StateKind, String, Vec<u8>)],
        now: Duration,
        out: &mut Vec<Action>,
    ) -> usize {
        let mut n = 0;
        for (kind, queue, blob) in states {
            if *kind != StateKind::QueuePolicy {
                continue;
            }
            if self.cfg.limits.iter().any(|(q, _)| q == queue) {
                continue;
            }
            match Policy::from_blob(blob) {
                Ok(p) => {
                    self.set_policy(queue, Some(p), false, now, out);
                    n += 1;
                }
                Err(e) => log::warn!("journal: policy of queue {queue} skipped: {e}"),
            }
        }
        n
    }

    /// The `--limit` policies, at [`Router::new`]: each replaces the
    /// journal's policy of its queue and is journaled.
    pub(super) fn apply_start_limits(&mut self) {
        let mut out = Vec::new();
        for (queue, p) in self.cfg.limits.clone() {
            self.set_policy(&queue, Some(p), true, Duration::ZERO, &mut out);
        }
    }

    /// `limits-set`: the policy of `queue` with `change` applied.
    pub(super) fn op_limits_set(
        &mut self,
        queue: &str,
        change: &PolicyChange,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Result<Value, emqp_proto::AdminError> {
        if queue.is_empty() {
            return Err(emqp_proto::AdminError::bad_request("queue is empty"));
        }
        if change.is_empty() {
            return Err(emqp_proto::AdminError::bad_request(
                "nothing to set: give concurrency, concurrency_per_key, rate, rate_per_key or fair",
            ));
        }
        let p = change.apply(self.policy(queue).unwrap_or_default());
        self.set_policy(queue, Some(p), true, now, out);
        Ok(json!({ "queue": queue, "policy": p, "text": p.to_string() }))
    }

    /// `limits-clear`.
    pub(super) fn op_limits_clear(
        &mut self,
        queue: &str,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Result<Value, emqp_proto::AdminError> {
        if self.policy(queue).is_none() {
            return Err(emqp_proto::AdminError::not_found(format!(
                "queue {queue} has no flow-control policy"
            )));
        }
        self.set_policy(queue, None, true, now, out);
        Ok(json!({ "queue": queue, "cleared": true }))
    }

    /// `limits-show`: each policy (one queue's, or all) with its figures
    /// and its keys (the [`KEYS_SHOWN`] with most waiting).
    pub(super) fn op_limits_show(
        &self,
        queue: Option<&str>,
        now: Duration,
    ) -> Result<Value, emqp_proto::AdminError> {
        let mut names: Vec<&String> = self
            .store
            .flow
            .queues
            .iter()
            .filter(|(r, q)| q.policy.is_some() || queue == Some(r.as_str()))
            .map(|(r, _)| r)
            .filter(|r| queue.is_none_or(|q| q == r.as_str()))
            .collect();
        names.sort();
        if let Some(q) = queue {
            if names.is_empty() {
                return Err(emqp_proto::AdminError::not_found(format!(
                    "queue {q} has no flow-control policy and no keyed jobs"
                )));
            }
        }
        let limits: Vec<Value> = names
            .into_iter()
            .filter_map(|r| self.store.flow.get(r).map(|q| (r, q)))
            .map(|(r, q)| self.limits_view(r, q, now))
            .collect();
        Ok(json!({ "limits": limits }))
    }

    fn limits_view(&self, route: &str, q: &FlowQueue, now: Duration) -> Value {
        let p = q.policy.unwrap_or_default();
        let mut keys: Vec<(&str, u32, usize, Option<String>)> = q
            .keys()
            .filter(|(_, k)| k.running > 0 || k.waiting > 0)
            .map(|(_, k)| {
                let blocked = self.key_block_text(q, &k.name, now);
                (&*k.name, k.running, k.waiting, blocked)
            })
            .collect();
        let total_keys = keys.len();
        keys.sort_by(|a, b| b.2.cmp(&a.2).then(b.1.cmp(&a.1)).then(a.0.cmp(b.0)));
        keys.truncate(KEYS_SHOWN);
        let keys: Vec<Value> = keys
            .into_iter()
            .map(|(k, running, waiting, blocked)| {
                json!({"key": k, "running": running, "waiting": waiting, "blocked": blocked})
            })
            .collect();
        json!({
            "queue": route,
            "policy": p,
            "text": p.to_string(),
            "running": q.running(),
            "waiting": q.waiting,
            "limited": q.limited(now),
            "throttled": q.throttled,
            "presumed": q.presumed.len(),
            "active_keys": total_keys,
            "keys": keys,
        })
    }

    /// Why key `name` of `q` is held, if it is.
    fn key_block_text(&self, q: &FlowQueue, name: &str, now: Duration) -> Option<String> {
        let p = q.policy?;
        let k = q.key(q.key_of(name)?)?;
        let label = if name.is_empty() {
            "(no key)".to_string()
        } else {
            name.to_string()
        };
        match k.blocked {
            Some(Block::Concurrency) => Some(format!(
                "limited: key {label} at {}/{} running",
                k.running,
                p.concurrency_per_key.unwrap_or(0)
            )),
            Some(Block::Rate(at)) if at > now => {
                Some(format!("rate: key {label}, next at {}", self.unix_text(at)))
            }
            _ => {
                if let Some(c) = p.concurrency_per_key {
                    if k.running >= c {
                        return Some(format!("limited: key {label} at {}/{c} running", k.running));
                    }
                }
                match &p.rate_per_key {
                    Some(r) if !k.bucket.allows(r, now) => Some(format!(
                        "rate: key {label}, next at {}",
                        self.unix_text(k.bucket.next_at(r))
                    )),
                    _ => None,
                }
            }
        }
    }

    /// Why queued job `job` waits (the `job` view's `waiting`), if a
    /// flow-control rule holds it; `None` for other reasons (no free
    /// worker, a paused queue, …).
    pub(super) fn waiting_reason(&self, jid: JobId, job: &Job, now: Duration) -> Option<String> {
        let q = self.store.flow.get(job.route())?;
        if q.presumed.contains(&jid) {
            return Some(format!(
                "presumed running after a restart until {} (waiting for its job manager's \
                 RUNNING or REPLY)",
                q.presumed_until
                    .map_or_else(String::new, |t| self.unix_text(t))
            ));
        }
        if let Some(p) = q.policy {
            if let Some(c) = p.concurrency {
                if q.running() >= c {
                    return Some(format!(
                        "limited: queue {} at {}/{c} running",
                        job.route(),
                        q.running()
                    ));
                }
            }
            if let Some(r) = &p.rate {
                if !q.bucket.allows(r, now) {
                    return Some(format!(
                        "rate: queue {}, next at {}",
                        job.route(),
                        self.unix_text(q.bucket.next_at(r))
                    ));
                }
            }
        }
        if let Some(why) = self.key_block_text(q, job.meta.flow_key(), now) {
            return Some(why);
        }
        if job.meta.priority > 0 || q.waiting > 1 {
            return Some(format!(
                "waiting its turn: priority {}, {} job(s) waiting in queue {}",
                job.meta.priority,
                q.waiting,
                job.route()
            ));
        }
        None
    }

    /// Core time `t` as an RFC 3339 UTC time with milliseconds.
    fn unix_text(&self, t: Duration) -> String {
        let ms = self.unix_ms(t);
        crate::util::rfc3339_ms(ms)
    }
}

impl Router {
    /// The flow invariants (tests): every waiting job is `Queued` and in
    /// the lane of its key once; every counted job of a queue with a
    /// policy is in flight or presumed, and every job in flight of such a
    /// queue is counted, on its own key; key counts add up; the waiting
    /// counters match. Returns the presumed jobs.
    pub(super) fn check_flow(&self) -> Result<usize, String> {
        use crate::jobs::JobState;
        let mut waiting_total = 0usize;
        let mut presumed_total = 0usize;
        for (r, q) in &self.store.flow.queues {
            if self.store.queues.get(r).is_some_and(|b| !b.is_empty()) {
                return Err(format!("flow queue {r} also has a FIFO buffer"));
            }
            let mut seen = crate::util::FastSet::default();
            let mut n = 0usize;
            for jid in q.waiting_jobs() {
                n += 1;
                if !seen.insert(jid) {
                    return Err(format!("job {jid} waits twice in flow queue {r}"));
                }
                let job = self
                    .store
                    .jobs
                    .get(&jid)
                    .ok_or_else(|| format!("flow queue {r} lists missing job {jid}"))?;
                if job.state != JobState::Queued || job.route() != r {
                    return Err(format!("job {jid} waits in {r} with state {:?}", job.state));
                }
                if q.presumed.contains(&jid) || q.is_counted(jid) {
                    return Err(format!("waiting job {jid} is counted"));
                }
            }
            if n != q.waiting {
                return Err(format!(
                    "flow queue {r}: {n} waiting, counter {}",
                    q.waiting
                ));
            }
            waiting_total += n;
            let mut per_key: crate::util::FastMap<crate::flow::KeyIdx, u32> = Default::default();
            for (jid, k) in q.counted() {
                *per_key.entry(k).or_default() += 1;
                let job = self
                    .store
                    .jobs
                    .get(&jid)
                    .ok_or_else(|| format!("flow queue {r} counts missing job {jid}"))?;
                let ok = match job.state {
                    JobState::InFlight { .. } => true,
                    JobState::Queued => q.presumed.contains(&jid),
                    JobState::Delayed { .. } => false,
                };
                if !ok {
                    return Err(format!(
                        "counted job {jid} of {r} has state {:?}",
                        job.state
                    ));
                }
                if q.key_of(job.meta.flow_key()) != Some(k) {
                    return Err(format!("counted job {jid} of {r} on the wrong key"));
                }
            }
            for (k, ks) in q.keys() {
                if ks.running != per_key.get(&k).copied().unwrap_or(0) {
                    return Err(format!(
                        "key {:?} of {r}: running {} wrong",
                        ks.name, ks.running
                    ));
                }
                if let Some(c) = q.policy.and_then(|p| p.concurrency_per_key) {
                    // Only adoption (a job already running) may go over.
                    if ks.running > c && ks.blocked.is_none() {
                        return Err(format!(
                            "key {:?} of {r} over its limit, unblocked",
                            ks.name
                        ));
                    }
                }
            }
            for jid in &q.presumed {
                if !q.is_counted(*jid) {
                    return Err(format!("presumed job {jid} not counted"));
                }
            }
            presumed_total += q.presumed.len();
            if q.policy.is_some() {
                for w in self.pool.workers.values() {
                    for i in w.inflight.values() {
                        if self.store.jobs.get(&i.job).is_some_and(|j| j.route() == r)
                            && !q.is_counted(i.job)
                        {
                            return Err(format!("job {} in flight on {r} not counted", i.job));
                        }
                    }
                }
            }
        }
        if waiting_total != self.store.flow.waiting {
            return Err(format!(
                "flow waiting {waiting_total}, counter {}",
                self.store.flow.waiting
            ));
        }
        Ok(presumed_total)
    }
}
