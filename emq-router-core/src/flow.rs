//! Flow control's data: the buffers of flow-controlled queues and their
//! per-key state (running jobs, token buckets, waiting jobs by priority).
//! The rules — what may be dispatched, in which order, when — are stated
//! at the top of `router/flow.rs`, which drives this module; this one
//! only keeps the structures those rules need consistent, so that every
//! operation is O(1) or O(log keys) and the state is O(active keys).
//!
//! A route is flow-controlled (it has a [`FlowQueue`]) once it has a
//! policy or holds a job with a `key` or a `priority`; its waiting jobs
//! are then here, not in `JobStore::queues`. A [`FlowQueue`] without a
//! policy and with nothing waiting or counted is dropped.
//!
//! - **Keys** are interned per queue to a small index ([`KeyIdx`]); a key
//!   with nothing waiting, nothing running and a full bucket is dropped.
//! - **Ready sets**: for each priority, the keys with a waiting job at
//!   that priority that are not known to be blocked, ordered by rank (the
//!   head job's id, or with `fair` the key's turn) and by age (head job
//!   id). A key found blocked at pick time leaves them (lazily, at most
//!   once per block), and comes back when what blocked it ends: a running
//!   job of it ends ([`FlowQueue::release`]) or its bucket refills (the
//!   `rate_wait` set, in router time).
//! - **Counted** jobs: the queue's running jobs (in flight, or restored
//!   and presumed running), each with its key, so that an end is found
//!   in O(1) and counted once.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use emqp_proto::flow::{Policy, Rate};

use crate::ids::JobId;
use crate::util::{FastMap, FastSet};

/// Priorities 0–9.
pub const PRIORITIES: usize = emqp_proto::headers::MAX_PRIORITY as usize + 1;

/// A key's index in its queue.
pub type KeyIdx = u32;

/// A token bucket in its GCRA form: `tat` is the time at which the bucket
/// is full again. A take at `now` is allowed while `tat - now ≤ per -
/// interval` (so a full bucket allows `n` at once: the burst is `n`), and
/// moves `tat` to `max(tat, now) + interval`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bucket {
    pub tat: Duration,
}

impl Bucket {
    /// Whether one token is there at `now`.
    pub fn allows(&self, rate: &Rate, now: Duration) -> bool {
        self.tat.saturating_sub(now) + rate.interval() <= rate.per
    }

    /// Take one token (the caller checked [`Bucket::allows`]).
    pub fn take(&mut self, rate: &Rate, now: Duration) {
        self.tat = self.tat.max(now) + rate.interval();
    }

    /// When the next token is there.
    pub fn next_at(&self, rate: &Rate) -> Duration {
        (self.tat + rate.interval()).saturating_sub(rate.per)
    }

    /// Tokens there at `now`.
    pub fn tokens(&self, rate: &Rate, now: Duration) -> u32 {
        let debt = self.tat.saturating_sub(now);
        let room = rate.per.saturating_sub(debt);
        let i = rate.interval().as_nanos().max(1);
        u32::try_from(room.as_nanos() / i)
            .unwrap_or(u32::MAX)
            .min(rate.n)
    }

    /// Full at `now` (it may be forgotten).
    pub fn is_full(&self, now: Duration) -> bool {
        self.tat <= now
    }
}

/// Why a key is out of the ready sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// At its `concurrency-per-key`: until one of its jobs ends.
    Concurrency,
    /// Its bucket is empty: until this time.
    Rate(Duration),
}

/// The jobs of one key waiting at one priority, and its place in the
/// ready sets (`(rank, head)` it was listed under), if listed.
#[derive(Debug, Clone, Default)]
struct Lane {
    priority: u8,
    jobs: VecDeque<JobId>,
    listed: Option<(u64, JobId)>,
}

/// One key of a queue.
#[derive(Debug, Clone)]
pub struct KeyState {
    pub name: Box<str>,
    /// Its counted jobs (running, or presumed running).
    pub running: u32,
    pub bucket: Bucket,
    /// Its waiting jobs, by priority, highest first (usually one lane).
    lanes: Vec<Lane>,
    pub waiting: usize,
    pub blocked: Option<Block>,
    /// Its turn (fair): lower goes first.
    turn: u64,
    /// Listed in `idle`.
    idle: bool,
}

/// One ready set of a priority.
#[derive(Debug, Clone, Default)]
struct Level {
    /// (rank, key): rank is the head job's id, or with `fair` the turn.
    ready: BTreeSet<(u64, KeyIdx)>,
    /// (head job, key): the oldest head first (aging).
    by_age: BTreeSet<(JobId, KeyIdx)>,
}

/// A flow-controlled route.
#[derive(Debug, Clone, Default)]
pub struct FlowQueue {
    pub policy: Option<Policy>,
    keys: Vec<Option<KeyState>>,
    free: Vec<KeyIdx>,
    names: FastMap<Box<str>, KeyIdx>,
    levels: [Level; PRIORITIES],
    /// Keys blocked by their bucket, by when it has a token again.
    rate_wait: BTreeSet<(Duration, KeyIdx)>,
    /// Keys with nothing waiting or running, to forget once their bucket
    /// is full.
    idle: VecDeque<KeyIdx>,
    /// Counted jobs and their keys.
    counted: FastMap<JobId, KeyIdx>,
    /// Counted jobs restored from a journal and presumed running (not in
    /// a lane, state `Queued`), until `presumed_until`.
    pub presumed: FastSet<JobId>,
    pub presumed_until: Option<Duration>,
    pub bucket: Bucket,
    /// The queue's own bucket is empty until then.
    pub rate_blocked: Option<Duration>,
    pub waiting: usize,
    next_turn: u64,
    /// Dispatches a limit held back (a free slot, a waiting job, and a
    /// limit said no), for `/metrics`.
    pub throttled: u64,
}

/// What [`FlowQueue::candidate`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Candidate {
    /// This job of this key at this priority.
    Job(JobId, KeyIdx, u8),
    /// Nothing may go now.
    None,
}

impl FlowQueue {
    pub fn new(policy: Option<Policy>) -> FlowQueue {
        FlowQueue {
            policy,
            ..FlowQueue::default()
        }
    }

    pub fn running(&self) -> u32 {
        u32::try_from(self.counted.len()).unwrap_or(u32::MAX)
    }

    pub fn is_counted(&self, jid: JobId) -> bool {
        self.counted.contains_key(&jid)
    }

    pub fn key(&self, k: KeyIdx) -> Option<&KeyState> {
        self.keys.get(k as usize).and_then(Option::as_ref)
    }

    fn key_mut(&mut self, k: KeyIdx) -> Option<&mut KeyState> {
        self.keys.get_mut(k as usize).and_then(Option::as_mut)
    }

    /// The key named `name` (`""`: jobs without a key), made if new.
    pub fn intern(&mut self, name: &str) -> KeyIdx {
        if let Some(k) = self.names.get(name) {
            return *k;
        }
        let state = KeyState {
            name: name.into(),
            running: 0,
            bucket: Bucket::default(),
            lanes: Vec::new(),
            waiting: 0,
            blocked: None,
            turn: 0,
            idle: false,
        };
        let k = match self.free.pop() {
            Some(k) => {
                self.keys[k as usize] = Some(state);
                k
            }
            None => {
                self.keys.push(Some(state));
                u32::try_from(self.keys.len() - 1).unwrap_or(u32::MAX)
            }
        };
        self.names.insert(name.into(), k);
        k
    }

    pub fn key_of(&self, name: &str) -> Option<KeyIdx> {
        self.names.get(name).copied()
    }

    /// Every live key.
    pub fn keys(&self) -> impl Iterator<Item = (KeyIdx, &KeyState)> + '_ {
        self.keys
            .iter()
            .enumerate()
            .filter_map(|(i, k)| k.as_ref().map(|k| (i as KeyIdx, k)))
    }

    pub fn key_count(&self) -> usize {
        self.names.len()
    }

    /// Nothing waiting and nothing counted.
    pub fn is_empty(&self) -> bool {
        self.waiting == 0 && self.counted.is_empty()
    }

    fn fair(&self) -> bool {
        self.policy.is_some_and(|p| p.fair)
    }

    // ----- ready sets ----------------------------------------------------

    /// Take key `k`'s lanes out of the ready sets.
    fn unlist(&mut self, k: KeyIdx) {
        let Some(ks) = self.keys.get_mut(k as usize).and_then(Option::as_mut) else {
            return;
        };
        for lane in &mut ks.lanes {
            if let Some((rank, head)) = lane.listed.take() {
                let l = &mut self.levels[lane.priority as usize];
                l.ready.remove(&(rank, k));
                l.by_age.remove(&(head, k));
            }
        }
    }

    /// Put key `k`'s lanes (back) into the ready sets, unless blocked.
    fn list(&mut self, k: KeyIdx) {
        self.unlist(k);
        let fair = self.fair();
        let Some(ks) = self.keys.get_mut(k as usize).and_then(Option::as_mut) else {
            return;
        };
        if ks.blocked.is_some() {
            return;
        }
        for lane in &mut ks.lanes {
            let Some(head) = lane.jobs.front().copied() else {
                continue;
            };
            let rank = if fair { ks.turn } else { head.0 };
            let l = &mut self.levels[lane.priority as usize];
            l.ready.insert((rank, k));
            l.by_age.insert((head, k));
            lane.listed = Some((rank, head));
        }
    }

    /// Give key `k` the next turn (the back of the round).
    fn next_turn(&mut self, k: KeyIdx) {
        let t = self.next_turn;
        self.next_turn += 1;
        if let Some(ks) = self.key_mut(k) {
            ks.turn = t;
        }
    }

    /// Note key `k` idle if it is.
    fn maybe_idle(&mut self, k: KeyIdx) {
        if let Some(ks) = self.key_mut(k) {
            if ks.waiting == 0 && ks.running == 0 && !ks.idle {
                ks.idle = true;
                self.idle.push_back(k);
            }
        }
    }

    /// Forget idle keys whose bucket is full at `now` (oldest idle first,
    /// stopping at the first that is not).
    pub fn forget_idle(&mut self, now: Duration) {
        while let Some(&k) = self.idle.front() {
            let Some(ks) = self.key(k) else {
                self.idle.pop_front();
                continue;
            };
            if ks.waiting > 0 || ks.running > 0 {
                self.idle.pop_front();
                if let Some(ks) = self.key_mut(k) {
                    ks.idle = false;
                }
                continue;
            }
            if !ks.bucket.is_full(now) {
                return;
            }
            self.idle.pop_front();
            if let Some(ks) = self.keys[k as usize].take() {
                self.names.remove(&ks.name);
                if let Some(Block::Rate(at)) = ks.blocked {
                    self.rate_wait.remove(&(at, k));
                }
                self.free.push(k);
            }
        }
    }

    // ----- waiting jobs --------------------------------------------------

    /// Buffer job `jid` of key `name` at `priority` (at the front of its
    /// lane for a redelivery).
    pub fn push(&mut self, jid: JobId, name: &str, priority: u8, front: bool) {
        let k = self.intern(name);
        let Some(ks) = self.key_mut(k) else { return };
        let was_empty = ks.waiting == 0;
        let pos = ks.lanes.iter().position(|l| l.priority <= priority);
        let lane = match pos {
            Some(i) if ks.lanes[i].priority == priority => &mut ks.lanes[i],
            Some(i) => {
                ks.lanes.insert(
                    i,
                    Lane {
                        priority,
                        ..Lane::default()
                    },
                );
                &mut ks.lanes[i]
            }
            None => {
                ks.lanes.push(Lane {
                    priority,
                    ..Lane::default()
                });
                let n = ks.lanes.len() - 1;
                &mut ks.lanes[n]
            }
        };
        if front {
            lane.jobs.push_front(jid);
        } else {
            lane.jobs.push_back(jid);
        }
        ks.waiting += 1;
        self.waiting += 1;
        if was_empty {
            self.next_turn(k);
        }
        self.list(k);
    }

    /// Take waiting job `jid` out (linear in its key's waiting jobs).
    pub fn remove_waiting(&mut self, jid: JobId, name: &str) -> bool {
        let Some(k) = self.key_of(name) else {
            return false;
        };
        let Some(ks) = self.key_mut(k) else {
            return false;
        };
        let mut found = false;
        for lane in &mut ks.lanes {
            if let Some(pos) = lane.jobs.iter().position(|j| *j == jid) {
                lane.jobs.remove(pos);
                found = true;
                break;
            }
        }
        if !found {
            return false;
        }
        ks.waiting -= 1;
        self.waiting -= 1;
        self.after_take(k);
        true
    }

    /// After a job left key `k`'s lanes: drop empty lanes, re-list.
    fn after_take(&mut self, k: KeyIdx) {
        self.unlist(k);
        if let Some(ks) = self.key_mut(k) {
            ks.lanes.retain(|l| !l.jobs.is_empty());
        }
        self.list(k);
        self.maybe_idle(k);
    }

    /// Every waiting job, emptying the lanes (purge).
    pub fn take_all_waiting(&mut self) -> Vec<JobId> {
        let mut out = Vec::with_capacity(self.waiting);
        let ks: Vec<KeyIdx> = self.keys().map(|(k, _)| k).collect();
        for k in ks {
            self.unlist(k);
            if let Some(ks) = self.key_mut(k) {
                for lane in ks.lanes.drain(..) {
                    out.extend(lane.jobs);
                }
                ks.waiting = 0;
            }
            self.maybe_idle(k);
        }
        self.waiting = 0;
        out
    }

    /// Waiting jobs in no particular order (invariants, snapshots).
    pub fn waiting_jobs(&self) -> impl Iterator<Item = JobId> + '_ {
        self.keys
            .iter()
            .flatten()
            .flat_map(|k| k.lanes.iter().flat_map(|l| l.jobs.iter().copied()))
    }

    // ----- running jobs --------------------------------------------------

    /// Count job `jid` of key `name` as running. Already counted: nothing.
    pub fn count(&mut self, jid: JobId, name: &str) {
        if self.counted.contains_key(&jid) {
            return;
        }
        let k = self.intern(name);
        self.counted.insert(jid, k);
        let cap = self.policy.and_then(|p| p.concurrency_per_key);
        if let Some(ks) = self.key_mut(k) {
            ks.running += 1;
            if cap.is_some_and(|c| ks.running >= c) && ks.blocked.is_none() {
                ks.blocked = Some(Block::Concurrency);
                self.unlist(k);
            }
        }
    }

    /// Job `jid` no longer runs. Returns whether it was counted.
    pub fn release(&mut self, jid: JobId) -> bool {
        let Some(k) = self.counted.remove(&jid) else {
            return false;
        };
        self.presumed.remove(&jid);
        if self.presumed.is_empty() {
            self.presumed_until = None;
        }
        let cap = self.policy.and_then(|p| p.concurrency_per_key);
        if let Some(ks) = self.key_mut(k) {
            ks.running = ks.running.saturating_sub(1);
            if ks.blocked == Some(Block::Concurrency) && cap.is_none_or(|c| ks.running < c) {
                ks.blocked = None;
                self.next_turn(k);
                self.list(k);
            }
        }
        self.maybe_idle(k);
        true
    }

    /// The policy changed: every key's block is looked at again at the
    /// next pick (the ready sets are rebuilt; O(keys)).
    pub fn set_policy(&mut self, policy: Option<Policy>) {
        self.policy = policy;
        self.rate_blocked = None;
        self.rate_wait.clear();
        let cap = policy.and_then(|p| p.concurrency_per_key);
        let ks: Vec<KeyIdx> = self.keys().map(|(k, _)| k).collect();
        for k in ks {
            if let Some(s) = self.key_mut(k) {
                s.blocked = cap
                    .is_some_and(|c| s.running >= c)
                    .then_some(Block::Concurrency);
            }
            self.list(k);
        }
    }

    // ----- picking -------------------------------------------------------

    /// Keys whose bucket refilled by `now` go back into the ready sets;
    /// the queue's own block ends too.
    pub fn wake(&mut self, now: Duration) {
        if self.rate_blocked.is_some_and(|at| at <= now) {
            self.rate_blocked = None;
        }
        while let Some(&(at, k)) = self.rate_wait.first() {
            if at > now {
                break;
            }
            self.rate_wait.pop_first();
            if let Some(ks) = self.key_mut(k) {
                if ks.blocked == Some(Block::Rate(at)) {
                    ks.blocked = None;
                }
            }
            self.next_turn(k);
            self.list(k);
        }
    }

    /// The earliest time a rate block ends.
    pub fn wake_at(&self) -> Option<Duration> {
        let keys = self.rate_wait.first().map(|(at, _)| *at);
        match (self.rate_blocked, keys) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the queue's own limits let a job go at `now` (`None`:
    /// yes), else which.
    pub fn queue_block(&self, now: Duration) -> Option<QueueBlock> {
        let p = self.policy?;
        if p.concurrency.is_some_and(|c| self.running() >= c) {
            return Some(QueueBlock::Concurrency);
        }
        if let Some(r) = &p.rate {
            if !self.bucket.allows(r, now) {
                return Some(QueueBlock::Rate(self.bucket.next_at(r)));
            }
        }
        None
    }

    /// Block key `k` if its own limits say no at `now`; `true` if blocked.
    fn check_key(&mut self, k: KeyIdx, now: Duration) -> bool {
        let Some(p) = self.policy else { return false };
        let Some(ks) = self.key(k) else { return false };
        let block = if p.concurrency_per_key.is_some_and(|c| ks.running >= c) {
            Some(Block::Concurrency)
        } else {
            match &p.rate_per_key {
                Some(r) if !ks.bucket.allows(r, now) => Some(Block::Rate(ks.bucket.next_at(r))),
                _ => None,
            }
        };
        let Some(b) = block else { return false };
        self.unlist(k);
        if let Some(ks) = self.key_mut(k) {
            ks.blocked = Some(b);
        }
        if let Block::Rate(at) = b {
            self.rate_wait.insert((at, k));
        }
        true
    }

    /// The job to dispatch next at `now`, or none; `aged(head)`: whether
    /// that head job has waited past the aging bound. Keys found blocked
    /// on the way leave the ready sets. Takes nothing.
    pub fn candidate(&mut self, now: Duration, aged: impl Fn(JobId) -> bool) -> Candidate {
        if self.queue_block(now).is_some() {
            return Candidate::None;
        }
        loop {
            // Aged heads first, oldest first; else the highest priority,
            // in rank order.
            let mut pick: Option<(KeyIdx, u8)> = None;
            let mut oldest: Option<JobId> = None;
            for (p, l) in self.levels.iter().enumerate() {
                if let Some(&(head, k)) = l.by_age.first() {
                    if oldest.is_none_or(|o| head < o) && aged(head) {
                        oldest = Some(head);
                        pick = Some((k, p as u8));
                    }
                }
            }
            if pick.is_none() {
                pick = self
                    .levels
                    .iter()
                    .enumerate()
                    .rev()
                    .find_map(|(p, l)| l.ready.first().map(|&(_, k)| (k, p as u8)));
            }
            let Some((k, p)) = pick else {
                return Candidate::None;
            };
            if self.check_key(k, now) {
                continue;
            }
            let head = self
                .key(k)
                .and_then(|ks| ks.lanes.iter().find(|l| l.priority == p))
                .and_then(|l| l.jobs.front().copied());
            match head {
                Some(jid) => return Candidate::Job(jid, k, p),
                None => {
                    // Cannot happen (listed lanes have jobs): drop it.
                    self.unlist(k);
                    continue;
                }
            }
        }
    }

    /// Take the candidate `jid` of key `k` at priority `p` out to
    /// dispatch it at `now`: its buckets lose a token, its key's turn
    /// moves to the back.
    pub fn take(&mut self, jid: JobId, k: KeyIdx, p: u8, now: Duration) {
        let policy = self.policy;
        if let Some(r) = policy.and_then(|p| p.rate) {
            self.bucket.take(&r, now);
        }
        let Some(ks) = self.key_mut(k) else { return };
        if let Some(lane) = ks.lanes.iter_mut().find(|l| l.priority == p) {
            if lane.jobs.front() == Some(&jid) {
                lane.jobs.pop_front();
                ks.waiting -= 1;
                self.waiting -= 1;
            }
        }
        if let Some(ks) = self.key_mut(k) {
            if let Some(r) = policy.and_then(|p| p.rate_per_key) {
                ks.bucket.take(&r, now);
            }
        }
        self.next_turn(k);
        self.after_take(k);
    }

    /// Note that the queue's own rate held it back until `at`.
    pub fn note_rate_block(&mut self, at: Duration) {
        self.rate_blocked = Some(at);
    }

    /// Jobs waiting in blocked keys (the `limited` gauge; O(keys)).
    pub fn limited(&self, now: Duration) -> usize {
        if self.queue_block(now).is_some() {
            return self.waiting;
        }
        self.keys
            .iter()
            .flatten()
            .filter(|k| k.blocked.is_some())
            .map(|k| k.waiting)
            .sum()
    }

    /// Each counted job's key (invariants).
    pub fn counted(&self) -> impl Iterator<Item = (JobId, KeyIdx)> + '_ {
        self.counted.iter().map(|(j, k)| (*j, *k))
    }

    /// The head jobs of the listed lanes, with their keys.
    pub fn listed_heads(&self) -> impl Iterator<Item = (JobId, KeyIdx)> + '_ {
        self.levels.iter().flat_map(|l| l.by_age.iter().copied())
    }

    /// Whether key `k`'s lanes are listed (invariants).
    pub fn is_listed(&self, k: KeyIdx) -> bool {
        self.key(k)
            .is_some_and(|ks| ks.lanes.iter().any(|l| l.listed.is_some()))
    }
}

/// Why the queue's own limits hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueBlock {
    Concurrency,
    /// Until the next token.
    Rate(Duration),
}

/// Every flow-controlled route (kept by `JobStore`).
#[derive(Debug, Default)]
pub struct Flow {
    pub queues: FastMap<String, FlowQueue>,
    /// Waiting jobs of every flow queue.
    pub waiting: usize,
    /// Queues in which a counted job ended since the router last looked
    /// (it pumps them: a slot a limit held may be free).
    pub woken: Vec<String>,
}

impl Flow {
    pub fn get(&self, route: &str) -> Option<&FlowQueue> {
        self.queues.get(route)
    }

    pub fn get_mut(&mut self, route: &str) -> Option<&mut FlowQueue> {
        self.queues.get_mut(route)
    }

    pub fn has(&self, route: &str) -> bool {
        !self.queues.is_empty() && self.queues.contains_key(route)
    }

    /// Job `jid` of `route` no longer runs.
    pub fn release(&mut self, route: &str, jid: JobId) {
        if self.queues.is_empty() {
            return;
        }
        let Some(q) = self.queues.get_mut(route) else {
            return;
        };
        if q.release(jid) && q.policy.is_some() && !self.woken.iter().any(|r| r == route) {
            self.woken.push(route.to_string());
        }
    }

    /// Drop `route`'s queue if it has no policy and holds nothing.
    pub fn maybe_drop(&mut self, route: &str) {
        if self
            .queues
            .get(route)
            .is_some_and(|q| q.policy.is_none() && q.is_empty())
        {
            self.queues.remove(route);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_a_burst_of_n_then_one_per_interval() {
        let r = Rate::parse("4/1").unwrap();
        let mut b = Bucket::default();
        let t0 = Duration::from_secs(10);
        for _ in 0..4 {
            assert!(b.allows(&r, t0));
            b.take(&r, t0);
        }
        assert!(!b.allows(&r, t0));
        let next = b.next_at(&r);
        assert_eq!(next, t0 + r.interval());
        assert!(!b.allows(&r, next - Duration::from_micros(1)));
        assert!(b.allows(&r, next));
        assert_eq!(b.tokens(&r, next), 1);
        assert_eq!(b.tokens(&r, t0 + Duration::from_secs(5)), 4);
        assert!(b.is_full(t0 + Duration::from_secs(1)));
    }
}
