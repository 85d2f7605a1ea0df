//! The journal port: one interface between the loop and wherever batches
//! are kept. The loop hands every `Action::Journal` batch to
//! [`JournalPort::append`] and feeds what [`JournalPort::next_event`]
//! gives back to the core — a batch's outcome as `Input::JournalDone`, in
//! batch order, or a lost leader lease as a step-down. How and where a
//! batch commits is the port's business:
//!
//! - [`NoJournal`] (`--journal none`): every batch "commits" at once (the
//!   core emits none without a journal);
//! - [`Sqlite`]: one SQLite transaction on the loop's thread (a commit
//!   takes microseconds), the outcome ready at once;
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

/// Outcomes of batches committed on the loop's thread, until taken.
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

/// The SQLite journal, committing on the loop's thread.
pub(crate) struct Sqlite {
    journal: SqliteJournal,
    ready: Ready,
}

impl Sqlite {
    pub(crate) fn new(journal: SqliteJournal) -> Sqlite {
        Sqlite {
            journal,
            ready: Ready::default(),
        }
    }
}

impl JournalPort for Sqlite {
    fn describe(&self) -> String {
        JournalStore::describe(&self.journal)
    }

    fn load(&mut self) -> Result<Option<Restored>, LoadError> {
        JournalStore::load(&mut self.journal)
            .map(Some)
            .map_err(|e| LoadError::Unusable(e.to_string()))
    }

    fn append(&mut self, batch: Batch) {
        let result = match JournalStore::append(&mut self.journal, &batch) {
            Ok(()) => BatchResult::Committed,
            Err(e) => BatchResult::Failed(e.to_string()),
        };
        self.ready.0.push_back((batch.id, result));
    }

    fn next_event(&mut self) -> Option<Event> {
        self.ready.next()
    }

    fn counts(&self) -> Option<(u64, u64)> {
        self.journal
            .stats()
            .ok()
            .map(|s| (s.batches_appended, s.records_appended))
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
    fn sqlite_outcomes_come_back_in_batch_order() {
        let mut port = Sqlite::new(SqliteJournal::open_in_memory().unwrap());
        assert!(port.next_event().is_none());
        port.append(batch(1));
        port.append(batch(2));
        let ids: Vec<BatchId> = std::iter::from_fn(|| port.next_event())
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
        assert!(matches!(port.load(), Ok(Some(_))));
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
