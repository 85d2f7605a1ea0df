//! The PostgreSQL journal store (`emq_journal::postgres`) against a real
//! PostgreSQL from Debian's packages, one throwaway cluster per test:
//! every record kind written and loaded back, the schema created,
//! migrated and refused when newer, the lease (take, hold, release,
//! fencing: a router that lost it can never commit), and a database
//! restart (the batch fails, the next one reconnects).

use std::time::{Duration, Instant};

use emq_journal::postgres::{
    Acquire, Migration, PgError, PgJournal, PgOptions, MIGRATIONS, SCHEMA_VERSION,
};
use emq_router_core::journal::{
    Batch, BatchId, FinishedRecord, JobRecord, JournalStore, Record, ResultRecord, StateKind,
};
use emqp_proto::ResultStatus;
use integration_tests::postgres::PgCluster;

fn job(msgid: &str) -> JobRecord {
    JobRecord {
        msgid: msgid.into(),
        client: vec![0xff, 1, 2],
        queue: "email".into(),
        route: "default".into(),
        headers: b"reply-requested,retry-count:2".to_vec(),
        payload: br#"["call", {"handler": "echo"}]"#.to_vec(),
        attempts: 1,
        accepted_at_unix_ms: 1_700_000_000_123,
        run_at_unix_ms: None,
    }
}

fn finished(msgid: &str, at: u64, keep: usize) -> Record {
    Record::Finished {
        record: FinishedRecord {
            job: job(msgid),
            outcome: "done".into(),
            started_at_unix_ms: Some(at.saturating_sub(10)),
            finished_at_unix_ms: at,
            result: Some(br#"{"value": 1}"#.to_vec()),
            result_truncated: false,
        },
        keep,
        drop_before_unix_ms: 1_000,
    }
}

fn held(msgid: &str, status: ResultStatus) -> ResultRecord {
    ResultRecord {
        msgid: msgid.into(),
        client: vec![9, 8],
        status,
        payload: br#"{"value": 2}"#.to_vec(),
        receipt: msgid == "f2",
        held_at_unix_ms: 1_700_000_000_999,
    }
}

fn batch(id: u64, records: Vec<Record>) -> Batch {
    Batch {
        id: BatchId(id),
        records,
    }
}

fn open(url: &str) -> PgJournal {
    PgJournal::open(url, &PgOptions::default()).expect("open the PostgreSQL journal")
}

/// Open and take the lease (it must be free).
fn leader(url: &str, holder: &str, ttl: Duration) -> (PgJournal, u64) {
    let mut j = open(url);
    match j.try_acquire(holder, ttl).expect("take the lease") {
        Acquire::Won { epoch } => (j, epoch),
        held => panic!("lease not free: {held:?}"),
    }
}

#[test]
fn every_record_kind_is_written_in_one_transaction_and_loaded_back() {
    let Some(pg) = PgCluster::start_or_skip("postgres_journal: records") else {
        return;
    };
    let url = pg.create_database("records");
    let (mut j, epoch) = leader(&url, "r1", Duration::from_secs(30));
    assert_eq!(epoch, 1);
    assert!(
        matches!(
            j.append(&batch(1, vec![Record::Probe])),
            Err(PgError::NoLease { .. })
        ),
        "no append before the journal is loaded"
    );
    assert_eq!(
        j.load().unwrap(),
        Default::default(),
        "a new database is empty"
    );
    let delayed = JobRecord {
        run_at_unix_ms: Some(1_800_000_000_000),
        route: "email".into(),
        ..job("later")
    };
    let mut again = job("a");
    again.payload = b"second".to_vec();
    let records = vec![
        Record::Accepted(job("a")),
        Record::Accepted(job("b")),
        Record::Accepted(job("c")),
        Record::Accepted(delayed.clone()),
        Record::Accepted(again.clone()),
        Record::Completed { msgid: "b".into() },
        Record::Attempt {
            msgid: "a".into(),
            attempts: 3,
        },
        Record::DeadLettered {
            msgid: "c".into(),
            reason: "lost".into(),
            error: Some(b"last words".to_vec()),
            keep: 10,
        },
        Record::PutSchedule {
            id: "s1".into(),
            blob: vec![7, 0, 255],
        },
        Record::PutSchedule {
            id: "s1".into(),
            blob: vec![8],
        },
        Record::PutSchedule {
            id: "s2".into(),
            blob: vec![9],
        },
        Record::DeleteSchedule { id: "s2".into() },
        Record::PutState {
            kind: StateKind::QueuePolicy,
            id: "email".into(),
            blob: vec![1],
        },
        Record::PutState {
            kind: StateKind::QueuePolicy,
            id: "email".into(),
            blob: vec![2],
        },
        Record::PutState {
            kind: StateKind::UniqueKey,
            id: "email".into(),
            blob: vec![3],
        },
        Record::PutState {
            kind: StateKind::UniqueKey,
            id: "gone".into(),
            blob: vec![4],
        },
        Record::DeleteState {
            kind: StateKind::UniqueKey,
            id: "gone".into(),
        },
        Record::QueuePaused {
            queue: "email".into(),
            paused: true,
        },
        Record::QueuePaused {
            queue: "sms".into(),
            paused: true,
        },
        Record::QueuePaused {
            queue: "sms".into(),
            paused: false,
        },
        Record::Accepted(job("f1")),
        finished("f1", 2_000, 2),
        finished("f2", 3_000, 2),
        finished("f3", 4_000, 2),
        Record::ResultHeld(held("f1", ResultStatus::Ok)),
        Record::ResultHeld(held("f2", ResultStatus::Failed)),
        Record::ResultHeld(held("f3", ResultStatus::Ok)),
        Record::ResultReleased { msgid: "f3".into() },
        Record::Probe,
    ];
    j.append(&batch(1, records)).expect("append");

    // Another router (a new connection) takes over after a release and
    // loads what the first one wrote.
    j.release().unwrap();
    let (mut k, epoch2) = leader(&url, "r2", Duration::from_secs(30));
    assert_eq!(epoch2, 2, "the epoch grows at every takeover");
    let r = k.load().unwrap();
    assert_eq!(
        r.jobs,
        vec![
            JobRecord {
                attempts: 3,
                ..again
            },
            delayed
        ],
        "a accepted twice keeps its place and the second fields; b completed; c dead"
    );
    assert_eq!(r.dead_letters.len(), 1);
    assert_eq!(r.dead_letters[0].job, job("c"));
    assert_eq!(r.dead_letters[0].reason, "lost");
    assert_eq!(r.dead_letters[0].error.as_deref(), Some(&b"last words"[..]));
    assert!(r.dead_letters[0].dead_at_unix_ms > 1_700_000_000_000);
    assert_eq!(r.schedules, vec![("s1".to_string(), vec![8])]);
    assert_eq!(
        r.states,
        vec![
            (StateKind::QueuePolicy, "email".to_string(), vec![2]),
            (StateKind::UniqueKey, "email".to_string(), vec![3]),
        ]
    );
    assert_eq!(r.paused_queues, ["email"]);
    let kept: Vec<&str> = r.finished.iter().map(|f| f.job.msgid.as_str()).collect();
    assert_eq!(kept, ["f2", "f3"], "the newest 2 finished jobs");
    assert_eq!(
        r.finished[1].result.as_deref(),
        Some(&br#"{"value": 1}"#[..])
    );
    // When its run started comes back (issue 32: waited and ran apart).
    assert_eq!(r.finished[1].started_at_unix_ms, Some(3_990));

    // The new leader goes on: the rows it finds by msgid are the loaded
    // ones, new rows number after them, dead letters trim and go.
    let more = vec![
        Record::ResultReleased { msgid: "f1".into() },
        Record::ResultHeld(held("f2", ResultStatus::Ok)),
        Record::Completed { msgid: "a".into() },
        Record::Accepted(job("n1")),
        Record::DeadLetterRemoved { msgid: "c".into() },
        finished("f4", 5_000, 2),
        Record::QueuePaused {
            queue: "email".into(),
            paused: false,
        },
    ];
    k.append(&batch(2, more)).unwrap();
    let r = k.load().unwrap();
    let ids: Vec<&str> = r.jobs.iter().map(|j| j.msgid.as_str()).collect();
    assert_eq!(ids, ["later", "n1"], "acceptance order across leaders");
    assert!(r.dead_letters.is_empty());
    assert!(r.paused_queues.is_empty());
    let kept: Vec<&str> = r.finished.iter().map(|f| f.job.msgid.as_str()).collect();
    assert_eq!(kept, ["f3", "f4"]);
    assert_eq!(
        r.results,
        [held("f2", ResultStatus::Ok)],
        "released, and held again (replaced)"
    );
    assert_eq!(pg.psql("records", "SELECT count(*) FROM emq_jobs"), "2");
}

#[test]
fn a_big_batch_is_one_transaction_of_a_few_statements() {
    let Some(pg) = PgCluster::start_or_skip("postgres_journal: big batch") else {
        return;
    };
    let url = pg.create_database("big");
    let (mut j, _) = leader(&url, "r1", Duration::from_secs(30));
    j.load().unwrap();
    let n = 20_000;
    let accepted: Vec<Record> = (0..n)
        .map(|i| Record::Accepted(job(&format!("{i:08x}-0000-4000-8000-000000000000"))))
        .collect();
    let t = Instant::now();
    j.append(&batch(1, accepted)).unwrap();
    let insert = t.elapsed();
    // What a standby taking over reads (it must take less than the TTL).
    let t = Instant::now();
    let loaded = j.load().unwrap().jobs.len();
    let load = t.elapsed();
    assert_eq!(loaded, n);
    let done: Vec<Record> = (0..n)
        .map(|i| {
            finished(
                &format!("{i:08x}-0000-4000-8000-000000000000"),
                2_000,
                10_000,
            )
        })
        .collect();
    let t = Instant::now();
    j.append(&batch(2, done)).unwrap();
    let finish = t.elapsed();
    assert_eq!(pg.psql("big", "SELECT count(*) FROM emq_jobs"), "0");
    assert_eq!(pg.psql("big", "SELECT count(*) FROM emq_finished"), "10000");
    assert_eq!(
        pg.psql(
            "big",
            "SELECT count(*) FROM emq_finished WHERE started_at = 1990"
        ),
        "10000",
        "the one-statement batch writes the start times too"
    );
    assert_eq!(j.counts(), (2, 2 * n as u64));
    integration_tests::report(&format!(
        "postgres journal: one batch of {n} accepts in {insert:.1?}, of {n} finishes in \
         {finish:.1?}; {n} unfinished jobs loaded in {load:.1?}"
    ));
}

/// A test-only step 5 on top of the real schema.
static WITH_V5: &[Migration] = &[
    MIGRATIONS[0],
    MIGRATIONS[1],
    MIGRATIONS[2],
    MIGRATIONS[3],
    Migration {
        to: 5,
        sql: "CREATE TABLE emq_test_v5 (x INTEGER); INSERT INTO emq_test_v5 VALUES (42);",
    },
];

fn open_at(url: &str, steps: &'static [Migration]) -> PgJournal {
    PgJournal::open_with_migrations(url, &PgOptions::default(), steps).unwrap()
}

#[test]
fn the_schema_is_created_once_migrated_forward_and_a_newer_one_is_refused() {
    let Some(pg) = PgCluster::start_or_skip("postgres_journal: migrations") else {
        return;
    };
    let url = pg.create_database("mig");
    // Two routers starting at the same instant: one creates, the other
    // waits for it and finds the schema made.
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| open(&url).schema_version().unwrap());
        let b = s.spawn(|| open(&url).schema_version().unwrap());
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!((a, b), (SCHEMA_VERSION, SCHEMA_VERSION));
    assert_eq!(
        pg.psql("mig", "SELECT holder || '/' || epoch FROM emq_lease"),
        "/0",
        "one lease row, never held"
    );
    // Opening again changes nothing.
    assert_eq!(open(&url).schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(pg.psql("mig", "SELECT count(*) FROM emq_lease"), "1");
    // A version 1 database (as the first release left it, with data) is
    // brought to the current version: dead letters get their last error
    // (2), router state gets its table (3), finished jobs their start (4).
    pg.psql(
        "mig",
        "ALTER TABLE emq_dead_letters DROP COLUMN last_error; \
         DROP TABLE emq_states; \
         ALTER TABLE emq_finished DROP COLUMN started_at; \
         UPDATE emq_schema SET version = 1; \
         INSERT INTO emq_schedules (id, blob) VALUES ('keep', '\\x01')",
    );
    assert_eq!(open(&url).schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 4);
    assert_eq!(
        pg.psql(
            "mig",
            "SELECT count(*) FROM information_schema.columns \
             WHERE table_name = 'emq_dead_letters' AND column_name = 'last_error'"
        ),
        "1"
    );
    assert_eq!(pg.psql("mig", "SELECT count(*) FROM emq_states"), "0");
    assert_eq!(
        pg.psql(
            "mig",
            "SELECT count(*) FROM information_schema.columns \
             WHERE table_name = 'emq_finished' AND column_name = 'started_at'"
        ),
        "1"
    );
    // A step added later runs once, data kept.
    let mut j = open_at(&url, WITH_V5);
    assert_eq!(j.schema_version().unwrap(), 5);
    assert_eq!(pg.psql("mig", "SELECT x FROM emq_test_v5"), "42");
    drop(j);
    let mut j = open_at(&url, WITH_V5);
    assert_eq!(j.schema_version().unwrap(), 5);
    assert_eq!(
        pg.psql("mig", "SELECT count(*) FROM emq_test_v5"),
        "1",
        "ran once"
    );
    assert_eq!(pg.psql("mig", "SELECT count(*) FROM emq_schedules"), "1");
    // This build knows up to version 4: version 5 is a newer emq's.
    let e = PgJournal::open(&url, &PgOptions::default()).unwrap_err();
    assert!(
        matches!(
            e,
            PgError::UnsupportedVersion {
                found: 5,
                supported: 4,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.is_permanent());
    assert!(e.to_string().contains("newer emq"), "{e}");
    // A database that cannot be reached is a clear error naming it.
    pg.psql("postgres", "SELECT 1");
    let e = PgJournal::open(
        &format!(
            "postgresql://postgres@127.0.0.1:{}/mig",
            integration_tests::ports::free_port()
        ),
        &PgOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, PgError::Connect { .. }), "{e:?}");
    assert!(e.to_string().contains("127.0.0.1"), "{e}");
}

#[test]
fn a_router_that_lost_the_lease_can_never_commit() {
    let Some(pg) = PgCluster::start_or_skip("postgres_journal: fencing") else {
        return;
    };
    let url = pg.create_database("fence");
    let ttl = Duration::from_millis(400);
    let (mut old, e1) = leader(&url, "old", ttl);
    old.load().unwrap();
    old.append(&batch(1, vec![Record::Accepted(job("before"))]))
        .unwrap();
    // While the lease is valid a standby is told who holds it and when it
    // expires.
    let mut new = open(&url);
    match new.try_acquire("new", ttl).unwrap() {
        Acquire::Held {
            holder,
            epoch,
            expires_in,
        } => {
            assert_eq!((holder.as_str(), epoch), ("old", e1));
            assert!(expires_in <= ttl, "{expires_in:?}");
        }
        won => panic!("took a valid lease: {won:?}"),
    }
    // The old leader stalls past its TTL; the standby takes over.
    let taken =
        integration_tests::poll_until(Duration::from_secs(5), Duration::from_millis(50), || {
            match new.try_acquire("new", Duration::from_secs(30)).unwrap() {
                Acquire::Won { epoch } => Some(epoch),
                Acquire::Held { .. } => None,
            }
        })
        .expect("the standby takes an expired lease");
    assert_eq!(taken, e1 + 1);
    // The old leader wakes up and tries to commit: fenced, nothing written.
    let e = old
        .append(&batch(2, vec![Record::Accepted(job("after"))]))
        .unwrap_err();
    assert!(e.is_fenced(), "{e:?}");
    // The same through the general path (a transaction of statements).
    let e = old
        .append(&batch(
            3,
            vec![
                Record::Accepted(job("after2")),
                Record::PutSchedule {
                    id: "s".into(),
                    blob: vec![1],
                },
            ],
        ))
        .unwrap_err();
    assert!(e.is_fenced(), "{e:?}");
    assert_eq!(
        pg.psql("fence", "SELECT string_agg(msgid, ',') FROM emq_jobs"),
        "before"
    );
    assert_eq!(pg.psql("fence", "SELECT count(*) FROM emq_schedules"), "0");
    // Nor can it renew, or read as leader.
    assert!(old.renew(ttl).unwrap_err().is_fenced() || old.lease_epoch().is_none());
    let r = new.load().unwrap();
    assert_eq!(r.jobs.len(), 1);
    // A release hands over at once (no TTL to wait for).
    new.release().unwrap();
    let mut third = open(&url);
    assert_eq!(
        third.try_acquire("third", ttl).unwrap(),
        Acquire::Won { epoch: e1 + 2 }
    );
}

#[test]
fn a_database_restart_fails_the_batch_in_flight_and_the_next_one_reconnects() {
    let Some(mut pg) = PgCluster::start_or_skip("postgres_journal: restart") else {
        return;
    };
    let url = pg.create_database("restart");
    let (mut j, _) = leader(&url, "r1", Duration::from_secs(60));
    j.load().unwrap();
    j.append(&batch(1, vec![Record::Accepted(job("one"))]))
        .unwrap();
    pg.stop();
    // The connection breaks under the batch: failed (it might have reached
    // the server: settled before the next write).
    let e = j
        .append(&batch(2, vec![Record::Accepted(job("lost"))]))
        .unwrap_err();
    assert!(!e.is_fenced() && !e.is_permanent(), "{e:?}");
    // While the server is down: no connection, a plain failure.
    let e = j.append(&batch(3, vec![Record::Probe])).unwrap_err();
    assert!(matches!(e, PgError::Connect { .. }), "{e:?}");
    pg.start_again();
    // The same store, no restart of anything: it connects again and the
    // lease (60 s) is still its own.
    j.append(&batch(4, vec![Record::Accepted(job("two"))]))
        .unwrap();
    let r = j.load().unwrap();
    let ids: Vec<&str> = r.jobs.iter().map(|j| j.msgid.as_str()).collect();
    assert_eq!(ids, ["one", "two"], "the failed batch wrote nothing");
}

/// The connection breaks after the server committed a batch but before
/// the store heard so (here: the relay between them is cut right after
/// the commit): the store reports the batch failed — the core refuses its
/// jobs and writes its other records again — and, before its next write,
/// learns from `emq_lease.last_batch` that it did commit: the refused jobs
/// are taken out again, the finished rows written again do not collide.
#[test]
fn a_commit_whose_answer_was_lost_is_settled_before_the_next_write() {
    let Some(pg) = PgCluster::start_or_skip("postgres_journal: lost answer") else {
        return;
    };
    pg.create_database("settle");
    let target: std::net::SocketAddr = format!("127.0.0.1:{}", pg.port()).parse().unwrap();
    let relay = integration_tests::relay::Relay::start(target);
    let url = format!("postgresql://postgres@127.0.0.1:{}/settle", relay.port());
    let (mut j, epoch) = leader(&url, "r1", Duration::from_secs(60));
    j.load().unwrap();
    j.append(&batch(1, vec![Record::Accepted(job("old"))]))
        .unwrap();
    // What the store will send as batch 2, committed by hand as it would
    // have been (same seqs, same lease check), then the answer lost.
    let sql = format!(
        "BEGIN;
         UPDATE emq_lease SET last_batch = 2 WHERE holder = 'r1' AND epoch = {epoch};
         INSERT INTO emq_jobs (seq, msgid, client, queue, route, headers, message, attempts,
             accepted_at) VALUES (2, 'refused', '\\x01', 'q', '', '\\x', '\\x', 0, 1);
         DELETE FROM emq_jobs WHERE seq = 1;
         INSERT INTO emq_finished (seq, msgid, client, queue, route, headers, message, attempts,
             accepted_at, outcome, finished_at, result_truncated)
             VALUES (1, 'old', '\\x01', 'q', '', '\\x', '\\x', 0, 1, 'done', 9999999999999,
                     false);
         COMMIT;"
    );
    relay.cut();
    pg.psql("settle", &sql);
    let records = vec![
        Record::Accepted(job("refused")),
        finished("old", 9_999_999_999_999, 100),
    ];
    let e = j.append(&batch(2, records.clone())).unwrap_err();
    assert!(e.may_have_committed(), "{e:?}");
    relay.heal();
    // The core writes the kept record (the finished job) again, with a new
    // batch; the refused job is not in it.
    j.append(&batch(3, vec![records[1].clone()])).unwrap();
    assert_eq!(
        pg.psql("settle", "SELECT count(*) FROM emq_jobs"),
        "0",
        "the refused job was taken out, the finished one is gone"
    );
    assert_eq!(
        pg.psql("settle", "SELECT string_agg(msgid, ',') FROM emq_finished"),
        "old",
        "one finished row, not two"
    );
    assert!(j.load().unwrap().jobs.is_empty());
}
