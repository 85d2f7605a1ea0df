//! The journal port: one interface between the loop and wherever batches
//! are kept. The loop hands every `Action::Journal` batch to
//! [`JournalPort::append`] and feeds what [`JournalPort::next_event`]
//! gives back to the core — a batch's outcome as `Input::JournalDone`, in
//! batch order, or a lost leader lease as a step-down. How and where a
//! batch commits is the port's business:
//!
//! - [`NoJournal`] (`--journal none`): every batch "commits" at once (the
//!   core emits none without a journal);
//! - [`Sqlite`]: one SQLite transaction per batch, under load on a thread
//!   of its own (the commits took half of the loop's time), the outcome
//!   waking the loop through [`JournalPort::poll_item`]; a small batch
//!   (light load) on the loop's thread, the outcome ready at once;
//! - the PostgreSQL journal with its leader lease (`ha.rs`): the batch
//!   goes to a thread of its own, the outcome wakes the loop through
//!   [`JournalPort::poll_item`], and the lease's timers join the loop's
//!   deadline through [`JournalPort::deadline`].

use std::collections::VecDeque;
use std::time::Duration;

use emq_journal::SqliteJournal;
use emq_router_core::journal::{Batch, BatchId, BatchResult, JournalStore, Restored};
use emq_router_core::lease::StepDownReason;

/// What the port gives back to the loop.
#[derive(Debug)]
pub(crate) enum Event {
    /// A batch's outcome, for the core (`Input::JournalDone`).
    Done { batch: BatchId, result: BatchResult },
    /// The leader lease is lost: stop serving now.
    StepDown(StepDownReason),
}

/// Why the journal could not be loaded at the start of a term.
#[derive(Debug)]
pub(crate) enum LoadError {
    /// The journal cannot be used: the router exits (code 2).
    Unusable(String),
    /// The lease was given up (another router may serve): back to standby.
    GaveUp,
}

pub(crate) trait JournalPort {
    /// Where the journal lives, for logs.
    fn describe(&self) -> String;

    /// Whether jobs survive a stop (false only without a journal).
    fn is_durable(&self) -> bool {
        true
    }

    /// Everything the core needs at the start of a term (`None`: nothing
    /// is kept).
    fn load(&mut self) -> Result<Option<Restored>, LoadError>;

    /// Append `batch` in one transaction; its outcome comes back through
    /// [`JournalPort::next_event`].
    fn append(&mut self, batch: Batch);

    /// The next outcome (or step-down), if one is ready.
    fn next_event(&mut self) -> Option<Event>;

    /// A descriptor that turns readable when an event is ready (ports
    /// that commit off the loop's thread).
    fn poll_item(&self) -> Option<zmq::PollItem<'static>> {
        None
    }

    /// When the port's own timers are next due (the lease's).
    fn deadline(&self) -> Option<Duration> {
        None
    }

    /// Transactions and records written since open.
    fn counts(&self) -> Option<(u64, u64)>;

    /// The router stops for good (not a step-down).
    fn stop(&mut self) {}
}

/// Outcomes of batches, until taken.
#[derive(Debug, Default)]
struct Ready(VecDeque<(BatchId, BatchResult)>);

impl Ready {
    fn next(&mut self) -> Option<Event> {
        self.0
            .pop_front()
            .map(|(batch, result)| Event::Done { batch, result })
    }
}

/// `--journal none`: buffered jobs are lost if the router stops.
#[derive(Debug, Default)]
pub(crate) struct NoJournal(Ready);

impl JournalPort for NoJournal {
    fn describe(&self) -> String {
        "none".into()
    }

    fn is_durable(&self) -> bool {
        false
    }

    fn load(&mut self) -> Result<Option<Restored>, LoadError> {
        Ok(None)
    }

    fn append(&mut self, batch: Batch) {
        self.0 .0.push_back((batch.id, BatchResult::Committed));
    }

    fn next_event(&mut self) -> Option<Event> {
        self.0.next()
    }

    fn counts(&self) -> Option<(u64, u64)> {
        None
    }
}

/// The SQLite journal, committing on a thread of its own ("journal").
///
/// Why a thread: under load the router's loop is the busiest thread of
/// the system, and a batch's transaction (the inserts and deletes, the
/// WAL writes, now and then a checkpoint with its fsync) took about half
/// of that loop's time with the journal on it (`perf`, docs/PERFORMANCE.md).
/// Handed over, the commit runs while the loop goes on reading, answering
/// and dispatching jobs already durable, and gathering the next batch.
/// Nothing about durability changes: the core keeps one batch in flight
/// and holds every acknowledgement (and the dispatch of every job) of it
/// until its outcome comes back (`router/durability.rs` in the core).
/// Outcomes come back in batch order and wake the loop through
/// [`JournalPort::poll_item`], as the PostgreSQL port's do.
///
/// A small batch (fewer than [`INLINE_RECORDS`] records: light load, a
/// lone job) commits on the loop's thread when the journal thread has
/// nothing in hand: a hand-off costs a wake-up of another thread, which on
/// a busy machine is more than the commit itself, and there is nothing to
/// overlap it with.
pub(crate) struct Sqlite {
    describe: String,
    /// The journal, shared with its thread (one batch at a time either
    /// way: never waited for).
    journal: std::sync::Arc<std::sync::Mutex<SqliteJournal>>,
    /// Requests handed to the thread whose reply is not taken yet.
    in_thread: usize,
    requests: Option<crossbeam_channel::Sender<SqliteRequest>>,
    replies: crossbeam_channel::Receiver<SqliteReply>,
    wake: std::os::unix::net::UnixStream,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Outcomes taken from the thread (while waiting for a load).
    ready: Ready,
    batches: u64,
    records: u64,
}

/// Batches smaller than this commit on the loop's thread when the journal
/// thread is idle (see [`Sqlite`]).
const INLINE_RECORDS: usize = 16;

enum SqliteRequest {
    Append(Batch),
    Load,
}

enum SqliteReply {
    Appended {
        batch: BatchId,
        records: usize,
        result: BatchResult,
    },
    Loaded(Result<Restored, String>),
}

impl Sqlite {
    /// Start the journal thread with `journal`. Fails only when no thread
    /// or socket pair can be made.
    pub(crate) fn new(journal: SqliteJournal) -> std::io::Result<Sqlite> {
        use std::io::Write;
        let describe = JournalStore::describe(&journal);
        let shared = std::sync::Arc::new(std::sync::Mutex::new(journal));
        let journal = std::sync::Arc::clone(&shared);
        let (wake, mut wake_tx) = std::os::unix::net::UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        let (req_tx, req_rx) = crossbeam_channel::unbounded::<SqliteRequest>();
        let (rep_tx, rep_rx) = crossbeam_channel::unbounded::<SqliteReply>();
        let thread = std::thread::Builder::new()
            .name("journal".into())
            .spawn(move || {
                for req in req_rx {
                    // A panic on the other side poisons nothing we read.
                    let mut journal = journal.lock().unwrap_or_else(|p| p.into_inner());
                    let reply = match req {
                        SqliteRequest::Append(batch) => SqliteReply::Appended {
                            batch: batch.id,
                            records: batch.records.len(),
                            result: match JournalStore::append(&mut *journal, &batch) {
                                Ok(()) => BatchResult::Committed,
                                Err(e) => BatchResult::Failed(e.to_string()),
                            },
                        },
                        SqliteRequest::Load => SqliteReply::Loaded(
                            JournalStore::load(&mut *journal).map_err(|e| e.to_string()),
                        ),
                    };
                    drop(journal);
                    if rep_tx.send(reply).is_err() {
                        break;
                    }
                    // Only a wake-up: a full socket buffer already wakes.
                    let _ = wake_tx.write(&[1]);
                }
            })?;
        Ok(Sqlite {
            describe,
            journal: shared,
            in_thread: 0,
            requests: Some(req_tx),
            replies: rep_rx,
            wake,
            thread: Some(thread),
            ready: Ready::default(),
            batches: 0,
            records: 0,
        })
    }

    fn request(&mut self, req: SqliteRequest) {
        if let Some(tx) = &self.requests {
            // The thread ends only when `requests` is dropped.
            if tx.send(req).is_ok() {
                self.in_thread += 1;
            }
        }
    }

    /// A reply of the thread: an outcome into `ready`, or a load's result
    /// given back.
    fn take(&mut self, reply: SqliteReply) -> Option<Result<Restored, String>> {
        self.in_thread = self.in_thread.saturating_sub(1);
        match reply {
            SqliteReply::Appended {
                batch,
                records,
                result,
            } => {
                self.done(batch, records, result);
                None
            }
            SqliteReply::Loaded(r) => Some(r),
        }
    }

    /// A batch's outcome, counted, for the loop.
    fn done(&mut self, batch: BatchId, records: usize, result: BatchResult) {
        if matches!(result, BatchResult::Committed) {
            self.batches += 1;
            self.records += records as u64;
        }
        self.ready.0.push_back((batch, result));
    }
}

impl JournalPort for Sqlite {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn load(&mut self) -> Result<Option<Restored>, LoadError> {
        self.request(SqliteRequest::Load);
        // Outcomes of batches appended before come first, in order.
        while let Ok(reply) = self.replies.recv() {
            if let Some(r) = self.take(reply) {
                return r.map(Some).map_err(LoadError::Unusable);
            }
        }
        Err(LoadError::Unusable("the journal thread stopped".into()))
    }

    fn append(&mut self, batch: Batch) {
        if batch.records.len() < INLINE_RECORDS && self.in_thread == 0 {
            let result = {
                let mut journal = self.journal.lock().unwrap_or_else(|p| p.into_inner());
                match JournalStore::append(&mut *journal, &batch) {
                    Ok(()) => BatchResult::Committed,
                    Err(e) => BatchResult::Failed(e.to_string()),
                }
            };
            // In order: nothing is in the thread's hands.
            self.done(batch.id, batch.records.len(), result);
            return;
        }
        self.request(SqliteRequest::Append(batch));
    }

    fn next_event(&mut self) -> Option<Event> {
        use std::io::Read;
        let mut buf = [0u8; 256];
        while matches!((&self.wake).read(&mut buf), Ok(n) if n > 0) {}
        while let Ok(reply) = self.replies.try_recv() {
            // A load is only ever waited for in `load`.
            let _ = self.take(reply);
        }
        self.ready.next()
    }

    fn poll_item(&self) -> Option<zmq::PollItem<'static>> {
        use std::os::fd::AsRawFd;
        Some(zmq::PollItem::from_fd(self.wake.as_raw_fd(), zmq::POLLIN))
    }

    fn counts(&self) -> Option<(u64, u64)> {
        Some((self.batches, self.records))
    }

    fn stop(&mut self) {
        // Closing the request channel ends the thread after what it has;
        // the journal closes there.
        self.requests = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Sqlite {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emq_router_core::journal::Record;

    fn batch(id: u64) -> Batch {
        Batch {
            id: BatchId(id),
            records: vec![Record::Probe],
        }
    }

    #[test]
    fn sqlite_commits_a_small_batch_at_once_and_a_large_one_on_its_thread() {
        let mut port = Sqlite::new(SqliteJournal::open_in_memory().unwrap()).unwrap();
        // One record (a lone job): committed on the caller's thread, the
        // outcome ready at once.
        port.append(batch(1));
        assert_eq!(port.in_thread, 0);
        assert!(matches!(
            port.next_event(),
            Some(Event::Done {
                batch: BatchId(1),
                result: BatchResult::Committed
            })
        ));
        // A batch of a loaded router goes to the thread; a small one after
        // it too (order), until the thread has answered.
        port.append(Batch {
            id: BatchId(2),
            records: vec![Record::Probe; INLINE_RECORDS],
        });
        port.append(batch(3));
        assert_eq!(port.in_thread, 2);
        let mut items = [port.poll_item().unwrap()];
        let mut got = Vec::new();
        for _ in 0..100 {
            if got.len() == 2 {
                break;
            }
            zmq::poll(&mut items, 100).unwrap();
            got.extend(std::iter::from_fn(|| port.next_event()).map(|e| match e {
                Event::Done { batch, .. } => batch,
                other => panic!("{other:?}"),
            }));
        }
        assert_eq!(got, vec![BatchId(2), BatchId(3)]);
        assert_eq!(port.in_thread, 0);
        assert_eq!(port.counts(), Some((3, 2 + INLINE_RECORDS as u64)));
        port.stop();
    }

    #[test]
    fn sqlite_outcomes_come_back_in_batch_order() {
        let mut port = Sqlite::new(SqliteJournal::open_in_memory().unwrap()).unwrap();
        assert!(port.next_event().is_none());
        port.append(batch(1));
        port.append(batch(2));
        // The outcomes come from the journal thread: wait for its wake-up.
        let mut items = [port.poll_item().unwrap()];
        let mut got = Vec::new();
        for _ in 0..100 {
            if got.len() == 2 {
                break;
            }
            zmq::poll(&mut items, 100).unwrap();
            got.extend(std::iter::from_fn(|| port.next_event()));
        }
        let ids: Vec<BatchId> = got
            .into_iter()
            .map(|e| match e {
                Event::Done {
                    batch,
                    result: BatchResult::Committed,
                } => batch,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ids, vec![BatchId(1), BatchId(2)]);
        assert_eq!(port.counts(), Some((2, 2)));
        // A load waits behind the batches handed over before it; their
        // outcomes stay for the loop.
        port.append(batch(3));
        assert!(matches!(port.load(), Ok(Some(_))));
        assert!(matches!(
            port.next_event(),
            Some(Event::Done {
                batch: BatchId(3),
                result: BatchResult::Committed
            })
        ));
        assert!(port.next_event().is_none());
        port.stop();
    }

    #[test]
    fn no_journal_commits_everything_and_keeps_nothing() {
        let mut port = NoJournal::default();
        port.append(batch(7));
        assert!(matches!(
            port.next_event(),
            Some(Event::Done {
                batch: BatchId(7),
                result: BatchResult::Committed
            })
        ));
        assert!(port.next_event().is_none());
        assert!(!port.is_durable());
        assert!(matches!(port.load(), Ok(None)));
    }
}
