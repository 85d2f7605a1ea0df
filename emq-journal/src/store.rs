//! The SQLite journal as a [`JournalStore`]: the core's batches in, the
//! core's restore data out. [`Journal`] works on the core's records
//! directly, so this is only the trait's plumbing.

use emq_router_core::journal::{Batch, JournalStore, Restored};

use crate::journal::Journal;
use crate::JournalError;

impl JournalStore for Journal {
    type Error = JournalError;

    fn append(&mut self, batch: &Batch) -> Result<(), JournalError> {
        Journal::append(self, &batch.records)
    }

    fn load(&mut self) -> Result<Restored, JournalError> {
        Ok(Restored {
            jobs: self.load_unfinished()?,
            dead_letters: self.dead_letters()?,
            schedules: self.schedules()?,
        })
    }

    fn describe(&self) -> String {
        self.path().display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emq_router_core::journal::{BatchId, JobRecord, Record};

    fn record(msgid: &str, route: &str) -> JobRecord {
        JobRecord {
            msgid: msgid.into(),
            client: vec![1, 2],
            queue: "odd".into(),
            route: route.into(),
            headers: b"reply-requested".to_vec(),
            payload: b"[]".to_vec(),
            attempts: 1,
            accepted_at_unix_ms: 1_700_000_000_123,
        }
    }

    #[test]
    fn records_round_trip_through_sqlite() {
        let mut j = Journal::open_in_memory().unwrap();
        let batch = Batch {
            id: BatchId(1),
            records: vec![
                Record::Accepted(record("a", "default")),
                Record::Accepted(record("b", "odd")),
                Record::Accepted(record("c", "odd")),
                Record::Completed { msgid: "b".into() },
                Record::Attempt {
                    msgid: "a".into(),
                    attempts: 3,
                },
                Record::DeadLettered {
                    msgid: "c".into(),
                    reason: "lost".into(),
                },
                Record::PutSchedule {
                    id: "s".into(),
                    blob: vec![7],
                },
                Record::Probe,
            ],
        };
        JournalStore::append(&mut j, &batch).unwrap();
        let r = j.load().unwrap();
        assert_eq!(
            r.jobs,
            vec![JobRecord {
                attempts: 3,
                ..record("a", "default")
            }]
        );
        assert_eq!(r.dead_letters.len(), 1);
        assert_eq!(r.dead_letters[0].job.msgid, "c");
        assert_eq!(r.dead_letters[0].job.route, "odd");
        assert_eq!(r.dead_letters[0].reason, "lost");
        assert_eq!(r.schedules, vec![("s".to_string(), vec![7])]);
    }
}
