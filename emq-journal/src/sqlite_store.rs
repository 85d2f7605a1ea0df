//! The SQLite journal as a [`JournalStore`]: the core's batches in, the
//! core's restore data out. [`SqliteJournal`] works on the core's records
//! directly, so this is only the trait's plumbing.

use emq_router_core::journal::{Batch, JournalStore, Restored};

use crate::sqlite::SqliteJournal;
use crate::JournalError;

impl JournalStore for SqliteJournal {
    type Error = JournalError;

    fn append(&mut self, batch: &Batch) -> Result<(), JournalError> {
        SqliteJournal::append(self, &batch.records)
    }

    fn load(&mut self) -> Result<Restored, JournalError> {
        Ok(Restored {
            jobs: self.load_unfinished()?,
            dead_letters: self.dead_letters()?,
            schedules: self.schedules()?,
            paused_queues: self.paused_queues()?,
            finished: self.finished()?,
            results: self.results()?,
            states: self.states()?,
        })
    }

    fn describe(&self) -> String {
        self.path().display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emq_router_core::journal::{BatchId, FinishedRecord, JobRecord, Record};

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
            run_at_unix_ms: None,
        }
    }

    #[test]
    fn records_round_trip_through_sqlite() {
        let mut j = SqliteJournal::open_in_memory().unwrap();
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
                    error: None,
                    keep: 10,
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

    fn finished(msgid: &str, at: u64) -> Record {
        Record::Finished {
            record: FinishedRecord {
                job: record(msgid, "odd"),
                outcome: "done".into(),
                started_at_unix_ms: Some(at - 10),
                finished_at_unix_ms: at,
                result: Some(br#"{"value": 1}"#.to_vec()),
                result_truncated: false,
            },
            keep: 2,
            drop_before_unix_ms: 1_000,
        }
    }

    #[test]
    fn finished_jobs_paused_queues_and_delays_survive_a_reopen_and_are_trimmed() {
        let mut j = SqliteJournal::open_in_memory().unwrap();
        let delayed = JobRecord {
            run_at_unix_ms: Some(1_800_000_000_000),
            ..record("later", "odd")
        };
        let batch = Batch {
            id: BatchId(1),
            records: vec![
                Record::Accepted(delayed.clone()),
                Record::Accepted(record("f1", "odd")),
                Record::Accepted(record("f2", "odd")),
                finished("f1", 2_000),
                finished("f2", 3_000),
                finished("f3", 4_000),
                Record::QueuePaused {
                    queue: "odd".into(),
                    paused: true,
                },
                Record::QueuePaused {
                    queue: "even".into(),
                    paused: true,
                },
                Record::QueuePaused {
                    queue: "even".into(),
                    paused: false,
                },
            ],
        };
        JournalStore::append(&mut j, &batch).unwrap();
        let r = j.load().unwrap();
        assert_eq!(r.jobs, vec![delayed], "finished rows left the jobs table");
        let kept: Vec<&str> = r.finished.iter().map(|f| f.job.msgid.as_str()).collect();
        assert_eq!(kept, ["f2", "f3"], "the newest 2");
        assert_eq!(
            r.finished[0].result.as_deref(),
            Some(&br#"{"value": 1}"#[..])
        );
        // The start of its run comes back (issue 32: waited and ran apart).
        assert_eq!(r.finished[0].started_at_unix_ms, Some(2_990));
        assert_eq!(r.paused_queues, ["odd"]);
        // Older than the cut-off goes too.
        let mut late = finished("f4", 5_000);
        if let Record::Finished {
            drop_before_unix_ms,
            ..
        } = &mut late
        {
            *drop_before_unix_ms = 4_500;
        }
        JournalStore::append(
            &mut j,
            &Batch {
                id: BatchId(2),
                records: vec![late],
            },
        )
        .unwrap();
        let kept: Vec<String> = j
            .load()
            .unwrap()
            .finished
            .into_iter()
            .map(|f| f.job.msgid)
            .collect();
        assert_eq!(kept, ["f4"]);
    }

    fn held(msgid: &str, receipt: bool) -> Record {
        Record::ResultHeld(emq_router_core::journal::ResultRecord {
            msgid: msgid.into(),
            client: b"client-1".to_vec(),
            status: emqp_proto::ResultStatus::Failed,
            payload: format!("{{\"error\": \"{msgid}\"}}").into_bytes(),
            receipt,
            held_at_unix_ms: 1_700_000_000_999,
        })
    }

    #[test]
    fn held_results_round_trip_are_replaced_by_msgid_and_released() {
        let mut j = SqliteJournal::open_in_memory().unwrap();
        let batch = |id, records| Batch {
            id: BatchId(id),
            records,
        };
        JournalStore::append(
            &mut j,
            &batch(
                1,
                vec![held("r1", true), held("r2", false), held("r3", true)],
            ),
        )
        .unwrap();
        JournalStore::append(
            &mut j,
            &batch(
                2,
                vec![
                    Record::ResultReleased { msgid: "r2".into() },
                    Record::ResultReleased {
                        msgid: "unknown".into(),
                    },
                    // Held again: the new one, last in order.
                    held("r1", false),
                ],
            ),
        )
        .unwrap();
        let r = j.load().unwrap().results;
        let names: Vec<(&str, bool)> = r.iter().map(|r| (r.msgid.as_str(), r.receipt)).collect();
        assert_eq!(names, [("r3", true), ("r1", false)]);
        assert_eq!(r[0].client, b"client-1");
        assert_eq!(r[0].status, emqp_proto::ResultStatus::Failed);
        assert_eq!(r[0].payload, br#"{"error": "r3"}"#);
        assert_eq!(r[0].held_at_unix_ms, 1_700_000_000_999);
        // Held and released in one batch: nothing left of it.
        JournalStore::append(
            &mut j,
            &batch(
                3,
                vec![
                    held("r4", true),
                    Record::ResultReleased { msgid: "r4".into() },
                ],
            ),
        )
        .unwrap();
        assert_eq!(j.stats().unwrap().results, 2);
    }

    #[test]
    fn dead_letters_are_trimmed_to_keep_and_removed_by_msgid() {
        let mut j = SqliteJournal::open_in_memory().unwrap();
        let mut records = Vec::new();
        for i in 0..5 {
            let m = format!("d{i}");
            records.push(Record::Accepted(record(&m, "odd")));
            records.push(Record::DeadLettered {
                msgid: m,
                reason: "lost".into(),
                error: None,
                keep: 3,
            });
        }
        records.push(Record::DeadLetterRemoved { msgid: "d3".into() });
        JournalStore::append(
            &mut j,
            &Batch {
                id: BatchId(1),
                records,
            },
        )
        .unwrap();
        let dead: Vec<String> = j
            .load()
            .unwrap()
            .dead_letters
            .into_iter()
            .map(|d| d.job.msgid)
            .collect();
        // Trimmed at the end of the batch, after the removal: the newest 3.
        assert_eq!(dead, ["d1", "d2", "d4"]);
    }
}
