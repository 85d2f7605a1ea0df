//! Jobs and where they are: a per-queue FIFO buffer, a retry delay set, or
//! in flight on a worker (the worker holds that index, see `workers.rs`).
//!
//! Every job lives in one [`JobSlab`] keyed by the router's job id; buffers
//! and in-flight tables hold ids only, so payloads are moved, never copied,
//! except once per delivery (the frame handed to the worker).
//!
//! Memory per job is kept small (a million buffered jobs must fit in
//! 200 MB): ids are sequential, so the slab is a deque of slots indexed by
//! `id - base` (no hash table); the msgid and payload share one allocation;
//! the client identity, queue, route and headers frame — the same for most
//! jobs — are interned once in a [`JobMeta`] shared by `Rc`; the fields
//! only failures and redeliveries use live in a boxed [`JobExtra`].

use std::time::Duration;

use std::collections::{BTreeSet, VecDeque};
use std::hash::BuildHasher;
use std::rc::Rc;

use crate::flow::{Flow, FlowQueue};
use crate::ids::WorkerId;
use crate::util::{FastMap, FastSet};

pub use crate::ids::{DispatchSeq, JobId};

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// In the buffer of its route queue.
    Queued,
    /// Dispatched to a worker; `seq` orders the worker's in-flight table.
    InFlight { worker: WorkerId, seq: DispatchSeq },
    /// Waiting for a retry after a failed REPLY.
    Delayed { due: Duration },
}

/// What many jobs share: who sent them, where they go, their headers.
/// Interned by [`MetaTable`].
#[derive(Debug, PartialEq, Eq)]
pub struct JobMeta {
    /// The client's frontend identity (empty for scheduled runs).
    pub client: Box<[u8]>,
    /// Queue frame as sent.
    pub queue: Box<str>,
    /// Queue the job is buffered under and dispatched from.
    pub route: Box<str>,
    /// HEADERS frame as sent.
    pub headers: Box<[u8]>,
    pub reply_requested: bool,
    pub retry_count: u32,
    /// `key:K` (flow control), if given.
    pub key: Option<Box<str>>,
    /// `priority:N` (flow control), 0 when absent.
    pub priority: u8,
    /// The headers hold an `attempt:…` item of the client's, which a
    /// delivery replaces with the router's count (`router/dispatch.rs`):
    /// found once here, so that a dispatch does not scan the headers.
    pub attempt_item: bool,
}

impl JobMeta {
    /// Whether the job asks for flow control (`key` or `priority`).
    pub fn wants_flow(&self) -> bool {
        self.key.is_some() || self.priority > 0
    }

    /// Its flow-control key (`""`: none).
    pub fn flow_key(&self) -> &str {
        self.key.as_deref().unwrap_or("")
    }
}

/// Rarely used per-job fields (failures, lost deliveries, restored jobs).
#[derive(Debug, Clone, Default)]
pub struct JobExtra {
    /// Deliveries lost to worker failure.
    pub lost: u32,
    /// The take-back key of the worker whose delivery was lost last: only
    /// its job manager may take the job back (`router/completion.rs`).
    pub lost_from: Option<Box<str>>,
    /// Failed REPLYs so far.
    pub failures: u32,
    /// The last failed REPLY payload.
    pub last_error: Option<Vec<u8>>,
    /// Unix micros of acceptance when it is not `epoch + accepted_at`
    /// (jobs restored from a journal).
    pub accepted_unix: Option<u64>,
    /// A delayed job's run time, unix milliseconds (journaled).
    pub run_at_unix_ms: Option<u64>,
    /// An operator cancelled it while it ran: its REPLY ends it as
    /// cancelled (no retry), its worker's death too (no redelivery).
    pub cancelling: bool,
    /// The msgids of the failed REPLYs that put it back for a retry (the
    /// last [`RETRY_REPLIES_KEPT`]), so that the same REPLY sent again by
    /// a job manager after a reconnect is not taken twice
    /// (`router/completion.rs`, "Reconnects").
    pub retry_replies: VecDeque<Box<str>>,
    /// The last progress its worker reported for the current delivery
    /// (`router/progress.rs`).
    pub progress: Option<JobProgress>,
}

/// A running job's last reported progress (`router/progress.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobProgress {
    /// 0–100.
    pub percent: u8,
    /// Empty: none.
    pub message: Box<str>,
    /// When the router took it.
    pub at: Duration,
}

/// How many retry REPLY msgids a job keeps ([`JobExtra::retry_replies`]):
/// more than the retries that fit in a job manager's resend window
/// (interval × liveness) with the default backoff.
pub const RETRY_REPLIES_KEPT: usize = 32;

impl JobExtra {
    /// Note the failed REPLY `reply_msgid` that put the job back.
    pub fn took_retry_reply(&mut self, reply_msgid: &str) {
        if self.retry_replies.len() >= RETRY_REPLIES_KEPT {
            self.retry_replies.pop_front();
        }
        self.retry_replies.push_back(reply_msgid.into());
    }
}

/// `Job::msgid_len` of a msgid stored as the 16 bytes of a uuid.
const UUID_MSGID: u32 = u32::MAX;

/// A job's msgid: borrowed text, or the text of a uuid stored in binary.
#[derive(Clone, Copy)]
pub enum MsgId<'a> {
    Text(&'a str),
    Uuid([u8; 36]),
}

impl std::ops::Deref for MsgId<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            MsgId::Text(t) => t,
            // Lower-case hex and hyphens only.
            MsgId::Uuid(b) => std::str::from_utf8(b).unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for MsgId<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl std::fmt::Debug for MsgId<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

/// The uuid of a msgid in canonical text (lower-case, hyphenated: what
/// Python's `str(uuid4())` and emq send), which the text gives back
/// exactly; anything else is kept as text.
fn canonical_uuid(msgid: &str) -> Option<uuid::Uuid> {
    if msgid.len() != 36 {
        return None;
    }
    let u = uuid::Uuid::try_parse(msgid).ok()?;
    let mut buf = [0u8; 36];
    (u.hyphenated().encode_lower(&mut buf) == msgid).then_some(u)
}

/// An accepted job.
#[derive(Debug, Clone)]
pub struct Job {
    /// The msgid (text, or 16 bytes when it is a canonical uuid, see
    /// `msgid_len`), then the payload (MSG frame, never decoded).
    data: Box<[u8]>,
    /// Bytes of msgid text at the front of `data`, or [`UUID_MSGID`].
    msgid_len: u32,
    /// Deliveries so far.
    pub attempts: u32,
    pub meta: Rc<JobMeta>,
    /// Core time of acceptance in microseconds (latency stats; a `u64`,
    /// not a `Duration`, to keep a million buffered jobs small).
    accepted_us: u64,
    pub state: JobState,
    pub extra: Option<Box<JobExtra>>,
}

impl Job {
    pub fn new(msgid: &str, payload: &[u8], meta: Rc<JobMeta>, accepted_at: Duration) -> Job {
        let uuid = canonical_uuid(msgid);
        let (head, msgid_len): (&[u8], u32) = match &uuid {
            Some(u) => (u.as_bytes(), UUID_MSGID),
            None => (msgid.as_bytes(), msgid.len() as u32),
        };
        let mut data = Vec::with_capacity(head.len() + payload.len());
        data.extend_from_slice(head);
        data.extend_from_slice(payload);
        Job {
            data: data.into_boxed_slice(),
            msgid_len,
            attempts: 0,
            meta,
            accepted_us: crate::util::micros(accepted_at),
            state: JobState::Queued,
            extra: None,
        }
    }

    fn msgid_bytes(&self) -> usize {
        if self.msgid_len == UUID_MSGID {
            16
        } else {
            self.msgid_len as usize
        }
    }

    pub fn msgid(&self) -> MsgId<'_> {
        if self.msgid_len == UUID_MSGID {
            let mut b = [0u8; 16];
            b.copy_from_slice(&self.data[..16]);
            let mut text = [0u8; 36];
            uuid::Uuid::from_bytes(b)
                .hyphenated()
                .encode_lower(&mut text);
            MsgId::Uuid(text)
        } else {
            // Built from a `&str` in `new`, so always valid UTF-8.
            MsgId::Text(
                std::str::from_utf8(&self.data[..self.msgid_len as usize]).unwrap_or_default(),
            )
        }
    }

    pub fn payload(&self) -> &[u8] {
        &self.data[self.msgid_bytes()..]
    }

    pub fn client(&self) -> &[u8] {
        &self.meta.client
    }

    pub fn queue(&self) -> &str {
        &self.meta.queue
    }

    pub fn route(&self) -> &str {
        &self.meta.route
    }

    pub fn headers(&self) -> &[u8] {
        &self.meta.headers
    }

    pub fn reply_requested(&self) -> bool {
        self.meta.reply_requested
    }

    pub fn retry_count(&self) -> u32 {
        self.meta.retry_count
    }

    /// Core time of acceptance.
    pub fn accepted_at(&self) -> Duration {
        Duration::from_micros(self.accepted_us)
    }

    pub fn lost(&self) -> u32 {
        self.extra.as_ref().map_or(0, |e| e.lost)
    }

    pub fn failures(&self) -> u32 {
        self.extra.as_ref().map_or(0, |e| e.failures)
    }

    pub fn extra_mut(&mut self) -> &mut JobExtra {
        self.extra.get_or_insert_with(Default::default)
    }

    /// Unix micros of acceptance; `epoch` is `Config::epoch_unix_micros`.
    pub fn accepted_unix(&self, epoch: u64) -> u64 {
        self.extra
            .as_ref()
            .and_then(|e| e.accepted_unix)
            .unwrap_or_else(|| epoch.saturating_add(self.accepted_us))
    }
}

/// Interned [`JobMeta`]s. Entries no job uses any more are dropped when
/// the table has doubled since the last sweep (amortised O(1)).
#[derive(Debug, Default)]
pub struct MetaTable {
    map: FastMap<u64, Vec<Rc<JobMeta>>>,
    hasher: foldhash::fast::RandomState,
    len: usize,
    sweep_at: usize,
    last: Option<Rc<JobMeta>>,
}

impl MetaTable {
    /// The shared meta for these values; `parse` gives `(reply_requested,
    /// retry_count)` from the headers when a new entry is made.
    pub fn intern(
        &mut self,
        client: &[u8],
        queue: &str,
        route: &str,
        headers: &[u8],
        parse: impl FnOnce() -> (bool, u32),
    ) -> Rc<JobMeta> {
        let same = |m: &JobMeta| {
            *m.client == *client
                && *m.queue == *queue
                && *m.route == *route
                && *m.headers == *headers
        };
        if let Some(m) = &self.last {
            if same(m) {
                return Rc::clone(m);
            }
        }
        let h = self.hasher.hash_one((client, queue, route, headers));
        if let Some(m) = self.map.get(&h).and_then(|b| b.iter().find(|m| same(m))) {
            let m = Rc::clone(m);
            self.last = Some(Rc::clone(&m));
            return m;
        }
        if self.len >= self.sweep_at {
            self.sweep();
        }
        let (reply_requested, retry_count) = parse();
        // Checked at intake (a bad one is REJECTed); a journal's are as
        // accepted.
        let flow = emqp_proto::headers::frame_flow(headers).unwrap_or_default();
        let m = Rc::new(JobMeta {
            client: client.into(),
            queue: queue.into(),
            route: route.into(),
            headers: headers.into(),
            reply_requested,
            retry_count,
            key: flow.key.map(Into::into),
            priority: flow.priority,
            attempt_item: emqp_proto::headers::frame_item(headers, emqp_proto::headers::ATTEMPT)
                .is_some(),
        });
        self.map.entry(h).or_default().push(Rc::clone(&m));
        self.len += 1;
        self.last = Some(Rc::clone(&m));
        m
    }

    /// Drop the entries only the table holds.
    fn sweep(&mut self) {
        self.last = None;
        self.map.retain(|_, b| {
            b.retain(|m| Rc::strong_count(m) > 1);
            !b.is_empty()
        });
        self.len = self.map.values().map(Vec::len).sum();
        self.sweep_at = (self.len * 2).max(1024);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Jobs by id. Ids are handed out in order, so the slab is a deque of
/// slots, slot `i` holding job `base + i`; finished jobs leave holes that
/// are trimmed from the front. Jobs that outlive many later ones (a job
/// stuck in flight, a long retry delay) would keep every hole behind them
/// alive, so when holes outnumber jobs the oldest jobs move to a small
/// side map (`old`) and the deque is trimmed past them.
#[derive(Debug, Default, Clone)]
pub struct JobSlab {
    /// The id number of `slots[0]`.
    base: u64,
    slots: VecDeque<Option<Job>>,
    /// Jobs in `slots`.
    live: usize,
    old: FastMap<JobId, Job>,
}

/// Holes allowed in the deque before old jobs move aside.
const SLAB_SLACK: usize = 4096;

impl JobSlab {
    fn index(&self, id: JobId) -> Option<usize> {
        let i = id.0.checked_sub(self.base)?;
        let i = usize::try_from(i).ok()?;
        (i < self.slots.len()).then_some(i)
    }

    pub fn len(&self) -> usize {
        self.live + self.old.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains_key(&self, id: &JobId) -> bool {
        self.get(id).is_some()
    }

    // A job is either in its slot or in `old` (an id can be in `old` and
    // inside the deque's range when it came from a journal far ahead).

    pub fn get(&self, id: &JobId) -> Option<&Job> {
        match self.index(*id) {
            Some(i) if self.slots[i].is_some() => self.slots[i].as_ref(),
            _ => self.old.get(id),
        }
    }

    pub fn get_mut(&mut self, id: &JobId) -> Option<&mut Job> {
        match self.index(*id) {
            Some(i) if self.slots[i].is_some() => self.slots[i].as_mut(),
            _ => self.old.get_mut(id),
        }
    }

    /// Insert (or replace) job `id`.
    pub fn insert(&mut self, id: JobId, job: Job) {
        if let Some(j) = self.old.get_mut(&id) {
            *j = job;
            return;
        }
        if self.slots.is_empty() {
            self.base = id.0;
        }
        if let Some(i) = self.index(id) {
            if self.slots[i].is_none() {
                self.live += 1;
            }
            self.slots[i] = Some(job);
            return;
        }
        let end = self.base + self.slots.len() as u64;
        // Ids at (or a little past) the end extend the deque; anything else
        // (older ids, far jumps from a journal) goes to the side map.
        if id.0 >= end && id.0 - end <= SLAB_SLACK as u64 {
            while self.base + (self.slots.len() as u64) < id.0 {
                self.slots.push_back(None);
            }
            self.slots.push_back(Some(job));
            self.live += 1;
        } else {
            self.old.insert(id, job);
        }
    }

    pub fn remove(&mut self, id: &JobId) -> Option<Job> {
        let i = match self.index(*id) {
            Some(i) if self.slots[i].is_some() => i,
            _ => return self.old.remove(id),
        };
        let job = self.slots[i].take()?;
        self.live -= 1;
        self.trim();
        Some(job)
    }

    fn trim(&mut self) {
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.base += 1;
        }
        if self.slots.len() > SLAB_SLACK && self.slots.len() > 2 * self.live {
            // Move the oldest jobs aside until the deque is half full.
            while self.slots.len() > 2 * self.live.max(1) {
                match self.slots.pop_front() {
                    Some(Some(job)) => {
                        self.live -= 1;
                        self.old.insert(JobId(self.base), job);
                    }
                    Some(None) => {}
                    None => break,
                }
                self.base += 1;
            }
            while let Some(None) = self.slots.front() {
                self.slots.pop_front();
                self.base += 1;
            }
        }
        if self.slots.is_empty() {
            if self.slots.capacity() > SLAB_SLACK {
                self.slots = VecDeque::new();
            }
        } else if self.slots.capacity() > 16 * SLAB_SLACK
            && self.slots.capacity() > 4 * self.slots.len()
        {
            self.slots.shrink_to(2 * self.slots.len());
        }
    }

    /// `(id, job)` pairs, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (JobId, &Job)> + '_ {
        let base = self.base;
        self.old.iter().map(|(id, j)| (*id, j)).chain(
            self.slots
                .iter()
                .enumerate()
                .filter_map(move |(i, j)| j.as_ref().map(|j| (JobId(base + i as u64), j))),
        )
    }

    /// Visit jobs in id order (`newest` first or oldest first), starting
    /// after `cursor` (exclusive) when given, until `visit` returns false.
    /// Cost: the jobs visited, plus a sort of the side map (few jobs).
    pub fn scan(
        &self,
        newest: bool,
        cursor: Option<JobId>,
        mut visit: impl FnMut(JobId, &Job) -> bool,
    ) {
        let mut old: Vec<JobId> = self.old.keys().copied().collect();
        old.sort_unstable();
        if newest {
            old.reverse();
        }
        let after = |id: JobId| match cursor {
            None => true,
            Some(c) if newest => id < c,
            Some(c) => id > c,
        };
        let mut old = old.into_iter().filter(|id| after(*id)).peekable();
        let n = self.slots.len() as u64;
        let mut idx: Box<dyn Iterator<Item = u64>> = if newest {
            Box::new((0..n).rev())
        } else {
            Box::new(0..n)
        };
        let mut next_deque = || loop {
            let i = idx.next()?;
            let id = JobId(self.base + i);
            if !after(id) {
                continue;
            }
            if let Some(j) = self.slots[i as usize].as_ref() {
                return Some((id, j));
            }
        };
        let mut d = next_deque();
        loop {
            let take_old = match (old.peek(), &d) {
                (None, None) => return,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(o), Some((id, _))) => {
                    if newest {
                        *o > *id
                    } else {
                        *o < *id
                    }
                }
            };
            if take_old {
                let id = old.next().expect("peeked");
                if let Some(j) = self.old.get(&id) {
                    if !visit(id, j) {
                        return;
                    }
                }
            } else if let Some((id, j)) = d.take() {
                if !visit(id, j) {
                    return;
                }
                d = next_deque();
            }
        }
    }

    pub fn values(&self) -> impl Iterator<Item = &Job> + '_ {
        self.iter().map(|(_, j)| j)
    }
}

/// msgid → job of every unfinished job: a table of job ids alone (8 bytes
/// an entry — the msgid is not stored twice), hashed by msgid and checked
/// against the job's own msgid on lookup. A million buffered jobs cost
/// about 19 MB here.
#[derive(Default)]
struct MsgIndex {
    table: hashbrown::HashTable<JobId>,
    hasher: foldhash::fast::RandomState,
}

impl std::fmt::Debug for MsgIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsgIndex")
            .field("len", &self.table.len())
            .finish()
    }
}

/// All unfinished jobs and the queue buffers.
#[derive(Debug, Default)]
pub struct JobStore {
    pub jobs: JobSlab,
    msgids: MsgIndex,
    pub metas: MetaTable,
    pub queues: FastMap<String, VecDeque<JobId>>,
    pub delayed: BTreeSet<(Duration, JobId)>,
    pub next_id: JobId,
    /// Jobs in buffers (all queues), kept so `buffered()` is O(1).
    buffered: usize,
    /// Route → (unfinished jobs, sum of their `accepted_at`), kept so the
    /// read model's ages are O(queues), not O(jobs).
    ages: FastMap<String, (u64, u128)>,
    /// The buffers and running counts of flow-controlled routes
    /// (`crate::flow`): their waiting jobs are there, not in `queues`.
    pub flow: Flow,
}

impl JobStore {
    pub fn new() -> JobStore {
        JobStore {
            next_id: JobId(1),
            ..JobStore::default()
        }
    }

    pub fn alloc_id(&mut self) -> JobId {
        let id = self.next_id;
        self.next_id = id.next();
        id
    }

    /// The unfinished job with this msgid.
    pub fn find(&self, msgid: &str) -> Option<JobId> {
        let h = self.msgids.hasher.hash_one(msgid);
        let jobs = &self.jobs;
        self.msgids
            .table
            .find(h, |id| jobs.get(id).is_some_and(|j| *j.msgid() == *msgid))
            .copied()
    }

    /// Index job `id` under `msgid` (the caller checked it is free; the
    /// jobs already indexed are in the slab).
    pub fn index(&mut self, msgid: &str, id: JobId) {
        let MsgIndex { table, hasher } = &mut self.msgids;
        let h = hasher.hash_one(msgid);
        let jobs = &self.jobs;
        table.insert_unique(h, id, |other| {
            jobs.get(other).map_or(0, |j| hasher.hash_one(&*j.msgid()))
        });
    }

    /// Drop the index entry of job `id` under `msgid`.
    pub fn unindex(&mut self, msgid: &str, id: JobId) {
        let h = self.msgids.hasher.hash_one(msgid);
        if let Ok(e) = self.msgids.table.find_entry(h, |x| *x == id) {
            e.remove();
        }
    }

    /// Entries in the msgid index.
    pub fn indexed(&self) -> usize {
        self.msgids.table.len()
    }

    /// Remove a job (wherever it is listed, the caller unlists it) and its
    /// msgid index entry.
    pub fn remove_job(&mut self, id: JobId) -> Option<Job> {
        let job = self.jobs.remove(&id)?;
        self.flow.release(job.route(), id);
        self.age_add(job.route(), job.accepted_us, false);
        let m = job.msgid().to_string();
        self.unindex(&m, id);
        Some(job)
    }

    /// Remove every queued job of `ids` (one pass over each queue they
    /// are in); returns how many were removed.
    pub fn remove_queued_set(&mut self, ids: &FastSet<JobId>) -> usize {
        let mut routes: Vec<String> = Vec::new();
        for id in ids {
            if let Some(j) = self.jobs.get(id) {
                if j.state == JobState::Queued && !routes.iter().any(|r| r == j.route()) {
                    routes.push(j.route().to_string());
                }
            }
        }
        let mut n = 0;
        for r in routes {
            if self.flow.has(&r) {
                for id in ids {
                    if self.jobs.get(id).is_some_and(|j| j.route() == r) {
                        self.remove_queued(*id);
                        if self.remove_job(*id).is_some() {
                            n += 1;
                        }
                    }
                }
                continue;
            }
            let mut gone: Vec<JobId> = Vec::new();
            if let Some(q) = self.queues.get_mut(&r) {
                q.retain(|id| {
                    let drop = ids.contains(id);
                    if drop {
                        gone.push(*id);
                    }
                    !drop
                });
            }
            self.buffered -= gone.len();
            for id in gone {
                if self.remove_job(id).is_some() {
                    n += 1;
                }
            }
        }
        n
    }

    fn age_add(&mut self, route: &str, accepted_at: u64, add: bool) {
        if !self.ages.contains_key(route) {
            self.ages.insert(route.to_string(), (0, 0));
        }
        if let Some((n, sum)) = self.ages.get_mut(route) {
            if add {
                *n += 1;
                *sum += u128::from(accepted_at);
            } else {
                *n = n.saturating_sub(1);
                *sum = sum.saturating_sub(u128::from(accepted_at));
            }
        }
    }

    /// Route → (unfinished jobs, mean acceptance time).
    pub fn age_totals(&self) -> impl Iterator<Item = (&str, u64, Duration)> + '_ {
        self.ages
            .iter()
            .filter(|(_, (n, _))| *n > 0)
            .map(|(r, (n, sum))| {
                let mean = u64::try_from(*sum / u128::from(*n)).unwrap_or(u64::MAX);
                (r.as_str(), *n, Duration::from_micros(mean))
            })
    }

    /// The oldest buffered job of `queue`, left in place.
    pub fn front(&self, queue: &str) -> Option<JobId> {
        self.queues.get(queue)?.front().copied()
    }

    /// The routes with buffered jobs.
    pub fn buffered_routes(&self) -> Vec<String> {
        self.queues
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(r, _)| r.clone())
            .chain(
                self.flow
                    .queues
                    .iter()
                    .filter(|(_, q)| q.waiting > 0)
                    .map(|(r, _)| r.clone()),
            )
            .collect()
    }

    /// Jobs waiting in `queue`'s buffer (flow-controlled or not).
    pub fn queue_len(&self, queue: &str) -> usize {
        match self.flow.get(queue) {
            Some(f) => f.waiting,
            None => self.queues.get(queue).map_or(0, VecDeque::len),
        }
    }

    /// Jobs in buffers, flow-controlled ones included.
    pub fn buffered(&self) -> usize {
        self.buffered + self.flow.waiting
    }

    /// Jobs in the plain (FIFO) buffers.
    pub fn fifo_buffered(&self) -> usize {
        self.buffered
    }

    /// Make `route` flow-controlled (if it is not): its FIFO buffer moves
    /// into a [`FlowQueue`] (O(jobs buffered), once). Its running jobs are
    /// not counted: the caller counts them when a policy needs it
    /// ([`JobStore::count_running`]).
    pub fn make_flow(&mut self, route: &str) -> &mut FlowQueue {
        if !self.flow.queues.contains_key(route) {
            let mut fq = FlowQueue::new(None);
            if let Some(buf) = self.queues.remove(route) {
                self.buffered -= buf.len();
                for id in buf {
                    if let Some(j) = self.jobs.get(&id) {
                        fq.push(id, j.meta.flow_key(), j.meta.priority, false);
                    }
                }
                self.flow.waiting += fq.waiting;
            }
            self.flow.queues.insert(route.to_string(), fq);
        }
        self.flow.queues.get_mut(route).expect("just inserted")
    }

    /// Count the jobs of `route` in `running` (in flight) that its flow
    /// queue does not count yet.
    pub fn count_running(&mut self, route: &str, running: impl IntoIterator<Item = JobId>) {
        for id in running {
            let Some(j) = self.jobs.get(&id) else {
                continue;
            };
            if j.route() != route {
                continue;
            }
            let meta = Rc::clone(&j.meta);
            if let Some(q) = self.flow.get_mut(route) {
                q.count(id, meta.flow_key());
            }
        }
    }

    /// Job `id` is in flight on `worker` (dispatched, or adopted): a
    /// flow-controlled route counts it as running.
    pub fn set_inflight(&mut self, id: JobId, worker: WorkerId, seq: DispatchSeq) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.state = JobState::InFlight { worker, seq };
        if self.flow.queues.is_empty() {
            return;
        }
        let meta = Rc::clone(&job.meta);
        if let Some(q) = self.flow.get_mut(&meta.route) {
            q.count(id, meta.flow_key());
        }
    }

    /// Buffer job `id` (state already `Queued`) in its route's buffer.
    fn buffer(&mut self, id: JobId, meta: &JobMeta, front: bool) {
        if meta.wants_flow() || self.flow.has(&meta.route) {
            let q = self.make_flow(&meta.route);
            q.push(id, meta.flow_key(), meta.priority, front);
            self.flow.waiting += 1;
            return;
        }
        let q = self.queue_mut(&meta.route);
        if front {
            q.push_front(id);
        } else {
            q.push_back(id);
        }
        self.buffered += 1;
    }

    fn queue_mut(&mut self, route: &str) -> &mut VecDeque<JobId> {
        if !self.queues.contains_key(route) {
            self.queues.insert(route.to_string(), VecDeque::new());
        }
        self.queues.get_mut(route).expect("just inserted")
    }

    /// Insert a new job `id`, buffered at the back of its route queue.
    pub fn insert_queued(&mut self, id: JobId, mut job: Job) {
        job.state = JobState::Queued;
        let meta = Rc::clone(&job.meta);
        self.age_add(&meta.route, job.accepted_us, true);
        self.jobs.insert(id, job);
        self.buffer(id, &meta, false);
    }

    /// Insert a job restored from a journal that may still run (see
    /// `router/flow.rs`, "Restarts"): state `Queued`, in no buffer,
    /// counted as running on its key until `until` or until it is
    /// adopted, cancelled or released.
    pub fn insert_presumed(&mut self, id: JobId, mut job: Job, until: Duration) {
        job.state = JobState::Queued;
        let meta = Rc::clone(&job.meta);
        self.age_add(&meta.route, job.accepted_us, true);
        self.jobs.insert(id, job);
        let q = self.make_flow(&meta.route);
        q.count(id, meta.flow_key());
        q.presumed.insert(id);
        q.presumed_until = Some(q.presumed_until.map_or(until, |u| u.max(until)));
    }

    /// Whether job `id` is presumed running (restored, not buffered).
    pub fn is_presumed(&self, id: JobId, route: &str) -> bool {
        self.flow
            .get(route)
            .is_some_and(|q| q.presumed.contains(&id))
    }

    /// Insert a new job `id` that waits until `due` (a delayed job).
    pub fn insert_delayed(&mut self, id: JobId, job: Job, due: Duration) {
        let meta = Rc::clone(&job.meta);
        self.age_add(&meta.route, job.accepted_us, true);
        self.jobs.insert(id, job);
        self.delay(id, due);
    }

    /// Take every buffered and delayed job of route `queue` out (they
    /// stay in the map; the caller finishes them).
    pub fn take_waiting(&mut self, queue: &str) -> Vec<JobId> {
        let mut out: Vec<JobId> = match self.queues.get_mut(queue) {
            Some(q) => std::mem::take(q).into_iter().collect(),
            None => Vec::new(),
        };
        self.buffered -= out.len();
        if let Some(f) = self.flow.queues.get_mut(queue) {
            let waiting = f.take_all_waiting();
            self.flow.waiting -= waiting.len();
            out.extend(waiting);
            let presumed: Vec<JobId> = f.presumed.iter().copied().collect();
            for id in presumed {
                f.release(id);
                out.push(id);
            }
            self.flow.maybe_drop(queue);
        }
        let delayed: Vec<(Duration, JobId)> = self
            .delayed
            .iter()
            .filter(|(_, id)| self.jobs.get(id).is_some_and(|j| j.route() == queue))
            .copied()
            .collect();
        for d in delayed {
            self.delayed.remove(&d);
            out.push(d.1);
        }
        out
    }

    /// Put an existing job back into its route queue.
    pub fn requeue(&mut self, id: JobId, front: bool) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.state = JobState::Queued;
        let meta = Rc::clone(&job.meta);
        self.flow.release(&meta.route, id);
        self.buffer(id, &meta, front);
    }

    /// The oldest buffered job of `queue`, removed from the buffer (the job
    /// stays in the map; the caller sets its new state).
    pub fn pop_front(&mut self, queue: &str) -> Option<JobId> {
        let q = self.queues.get_mut(queue)?;
        let id = q.pop_front()?;
        if q.is_empty() && q.capacity() > SLAB_SLACK {
            *q = VecDeque::new();
        }
        self.buffered -= 1;
        Some(id)
    }

    /// Take a queued job out of its buffer (rare path: linear in the
    /// queue length). The job stays in the map.
    pub fn remove_queued(&mut self, id: JobId) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        let meta = Rc::clone(&job.meta);
        if let Some(f) = self.flow.queues.get_mut(&*meta.route) {
            if f.presumed.contains(&id) {
                self.flow.release(&meta.route, id);
            } else if f.remove_waiting(id, meta.flow_key()) {
                self.flow.waiting -= 1;
            }
            self.flow.maybe_drop(&meta.route);
            return;
        }
        if let Some(q) = self.queues.get_mut(job.route()) {
            if let Some(pos) = q.iter().position(|j| *j == id) {
                q.remove(pos);
                self.buffered -= 1;
            }
        }
    }

    pub fn delay(&mut self, id: JobId, due: Duration) {
        if let Some(job) = self.jobs.get_mut(&id) {
            job.state = JobState::Delayed { due };
            self.delayed.insert((due, id));
            let meta = Rc::clone(&job.meta);
            self.flow.release(&meta.route, id);
        }
    }

    /// Delayed jobs due at `now`, oldest due first, removed from the set.
    pub fn take_due(&mut self, now: Duration) -> Vec<JobId> {
        let mut out = Vec::new();
        while let Some(&(due, id)) = self.delayed.first() {
            if due > now {
                break;
            }
            self.delayed.pop_first();
            out.push(id);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(n: u64) -> Job {
        let meta = Rc::new(JobMeta {
            client: Box::default(),
            queue: "q".into(),
            route: "q".into(),
            headers: Box::default(),
            reply_requested: false,
            retry_count: 0,
            key: None,
            priority: 0,
            attempt_item: false,
        });
        Job::new(&format!("m{n}"), b"p", meta, Duration::from_micros(n))
    }

    #[test]
    fn msgids_round_trip_in_both_forms() {
        let meta = job(0).meta;
        for m in [
            "1dea1000-0000-4000-8000-00000000002a",
            "1DEA1000-0000-4000-8000-00000000002A",
            "1dea100000004000800000000000002a",
            "{1dea1000-0000-4000-8000-00000000002a}",
            "not-a-uuid",
            "",
        ] {
            let j = Job::new(m, b"[1, 2]", Rc::clone(&meta), Duration::ZERO);
            assert_eq!(&*j.msgid(), m);
            assert_eq!(j.payload(), b"[1, 2]");
        }
        let j = Job::new(
            "1dea1000-0000-4000-8000-00000000002a",
            b"x",
            meta,
            Duration::ZERO,
        );
        assert_eq!(j.msgid_len, UUID_MSGID);
        assert_eq!(j.data.len(), 17);
    }

    #[test]
    fn slab_keeps_every_job_with_a_pinned_old_one() {
        let mut s = JobSlab::default();
        s.insert(JobId(1), job(1));
        for id in 2..20_000u64 {
            s.insert(JobId(id), job(id));
            assert!(s.remove(&JobId(id)).is_some());
        }
        assert_eq!(s.len(), 1);
        // The deque did not keep 20,000 holes behind job 1.
        assert!(s.slots.len() <= SLAB_SLACK + 1, "{}", s.slots.len());
        assert_eq!(
            s.get(&JobId(1)).map(|j| j.msgid().to_string()).as_deref(),
            Some("m1")
        );
        s.insert(JobId(20_000), job(20_000));
        assert_eq!(s.len(), 2);
        assert!(s.remove(&JobId(1)).is_some());
        assert!(s.get(&JobId(1)).is_none());
        assert_eq!(
            s.get(&JobId(20_000)).map(|j| j.accepted_at()),
            Some(Duration::from_micros(20_000))
        );
    }

    #[test]
    fn slab_takes_out_of_order_and_far_ids() {
        let mut s = JobSlab::default();
        s.insert(JobId(10), job(10));
        s.insert(JobId(1_000_000), job(1_000_000));
        s.insert(JobId(5), job(5));
        s.insert(JobId(12), job(12));
        for id in 13..20 {
            s.insert(JobId(id), job(id));
        }
        assert_eq!(s.len(), 11);
        let mut ids: Vec<u64> = s.iter().map(|(id, _)| id.0).collect();
        ids.sort_unstable();
        assert_eq!(ids, [5, 10, 12, 13, 14, 15, 16, 17, 18, 19, 1_000_000]);
        for id in ids {
            assert_eq!(
                s.get(&JobId(id)).map(|j| j.msgid().to_string()),
                Some(format!("m{id}"))
            );
            assert!(s.remove(&JobId(id)).is_some());
            assert!(!s.contains_key(&JobId(id)));
        }
        assert!(s.is_empty());
    }

    #[test]
    fn the_msgid_index_finds_every_job_across_resizes_and_removals() {
        let mut st = JobStore::new();
        let mut ids = Vec::new();
        for n in 0..10_000u64 {
            let id = st.alloc_id();
            let j = job(n);
            let m = j.msgid().to_string();
            assert_eq!(st.find(&m), None);
            st.index(&m, id);
            st.insert_queued(id, j);
            ids.push((id, m));
        }
        assert_eq!(st.indexed(), 10_000);
        for (id, m) in &ids {
            assert_eq!(st.find(m), Some(*id));
        }
        for (id, _) in ids.iter().step_by(2) {
            st.remove_queued(*id);
            assert!(st.remove_job(*id).is_some());
        }
        assert_eq!(st.indexed(), 5_000);
        for (i, (id, m)) in ids.iter().enumerate() {
            assert_eq!(st.find(m), (i % 2 == 1).then_some(*id), "{m}");
        }
    }

    #[test]
    fn metas_are_shared_and_swept() {
        let mut t = MetaTable::default();
        let a = t.intern(b"c", "q", "q", b"h", || (true, 2));
        let b = t.intern(b"c", "q", "q", b"h", || unreachable!());
        assert!(Rc::ptr_eq(&a, &b));
        assert!(a.reply_requested && a.retry_count == 2);
        let c = t.intern(b"d", "q", "q", b"h", || (false, 0));
        assert!(!Rc::ptr_eq(&a, &c));
        let d = t.intern(b"c", "q", "q", b"h", || unreachable!());
        assert!(Rc::ptr_eq(&a, &d));
        drop((a, b, c, d));
        for i in 0..3000 {
            let _ = t.intern(format!("c{i}").as_bytes(), "q", "q", b"", || (false, 0));
        }
        assert!(t.len() < 2100, "{}", t.len());
    }

    /// A client's `attempt:` item is found once, at intake.
    #[test]
    fn a_meta_knows_whether_the_headers_hold_an_attempt_item() {
        let mut t = MetaTable::default();
        let has =
            |t: &mut MetaTable, h: &[u8]| t.intern(b"c", "q", "q", h, || (false, 0)).attempt_item;
        assert!(has(&mut t, b"retry-count:1,attempt:9"));
        assert!(has(&mut t, b" attempt:1 "));
        assert!(!has(&mut t, b"retry-count:1"));
        assert!(!has(&mut t, b"attempts:2,attempt"));
        assert!(!has(&mut t, b""));
    }
}
