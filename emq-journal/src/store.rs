//! The SQLite journal as a [`JournalStore`]: the core's records in, the
//! core's restore data out. The only place that maps between the core's
//! record model and this crate's SQL-facing types.

use emq_router_core::journal::{
    Batch, DeadLetterRecord, JobRecord, JournalStore, Record, Restored,
};

use crate::journal::{DeadLetter, Journal, JournalOp, JournaledJob};
use crate::JournalError;

fn op(r: &Record) -> JournalOp {
    match r {
        Record::Accepted(j) => JournalOp::Accepted(JournaledJob {
            // Empty: the route is the queue (the common case costs no text).
            route: if j.route == j.queue {
                String::new()
            } else {
                j.route.clone()
            },
            msgid: j.msgid.clone(),
            client: j.client.clone(),
            queue: j.queue.clone(),
            headers: String::from_utf8_lossy(&j.headers).into_owned(),
            message: j.payload.clone(),
            attempts: j.attempts,
            accepted_at_unix_ms: i64::try_from(j.accepted_at_unix_ms).unwrap_or(i64::MAX),
        }),
        Record::Completed { msgid } => JournalOp::Completed {
            msgid: msgid.clone(),
        },
        Record::DeadLettered { msgid, reason } => JournalOp::DeadLettered {
            msgid: msgid.clone(),
            error: reason.clone(),
        },
        Record::Attempt { msgid, attempts } => JournalOp::Attempt {
            msgid: msgid.clone(),
            attempts: *attempts,
        },
        Record::PutSchedule { id, blob } => JournalOp::PutSchedule {
            id: id.clone(),
            blob: blob.clone(),
        },
        Record::DeleteSchedule { id } => JournalOp::DeleteSchedule { id: id.clone() },
        Record::Probe => JournalOp::Probe,
    }
}

fn job(j: JournaledJob) -> JobRecord {
    JobRecord {
        route: if j.route.is_empty() {
            j.queue.clone()
        } else {
            j.route
        },
        msgid: j.msgid,
        client: j.client,
        queue: j.queue,
        headers: j.headers.into_bytes(),
        payload: j.message,
        attempts: j.attempts,
        accepted_at_unix_ms: u64::try_from(j.accepted_at_unix_ms).unwrap_or(0),
    }
}

fn dead(d: DeadLetter) -> DeadLetterRecord {
    DeadLetterRecord {
        job: job(d.job),
        reason: d.error,
        dead_at_unix_ms: u64::try_from(d.dead_at_unix_ms).unwrap_or(0),
    }
}

impl JournalStore for Journal {
    type Error = JournalError;

    fn append(&mut self, batch: &Batch) -> Result<(), JournalError> {
        let ops: Vec<JournalOp> = batch.records.iter().map(op).collect();
        Journal::append(self, &ops)
    }

    fn load(&mut self) -> Result<Restored, JournalError> {
        Ok(Restored {
            jobs: self.load_unfinished()?.into_iter().map(job).collect(),
            dead_letters: self.dead_letters()?.into_iter().map(dead).collect(),
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
    use emq_router_core::journal::BatchId;

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
