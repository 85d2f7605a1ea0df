//! SqliteJournal behaviour on a real file: round trips, ordering, dead letters,
//! schedules, storage of the core's records, damaged files, locking, the
//! `JournalStore` the router drives.

mod common;

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::time::Instant;

use common::{accepted, completed, job, msgids, JournalPath, TempDir};
use emq_journal::{JournalError, JournalOptions, SqliteJournal, SyncMode, SCHEMA_VERSION};
use emq_router_core::journal::{Batch, BatchId, JobRecord, JournalStore, Record, StateKind};

#[test]
fn append_reopen_load_round_trips_every_field() {
    let dir = TempDir::new("roundtrip");
    let path = dir.journal();
    let odd = JobRecord {
        msgid: "6f1c-odd".into(),
        client: vec![0, 0xff, 0x80, 7],
        queue: "email".into(),
        route: "default".into(),
        headers: b"retry-count:3,timeout:10,x-custom".to_vec(),
        payload: vec![0xde, 0xad, 0, 0xbe, 0xef],
        attempts: 2,
        // The largest time SQLite's INTEGER holds.
        accepted_at_unix_ms: i64::MAX as u64,
        run_at_unix_ms: None,
    };
    {
        let mut j = SqliteJournal::open(&path).unwrap();
        j.append(&[accepted("a"), Record::Accepted(odd.clone())])
            .unwrap();
        j.append(&[accepted("c")]).unwrap();
    }
    let j = SqliteJournal::open(&path).unwrap();
    let jobs = j.load_unfinished().unwrap();
    assert_eq!(jobs, vec![job("a"), odd, job("c")]);
}

#[test]
fn completed_jobs_are_not_returned() {
    let dir = TempDir::new("completed");
    let path = dir.journal();
    {
        let mut j = SqliteJournal::open(&path).unwrap();
        j.append(&[accepted("a"), accepted("b"), accepted("c")])
            .unwrap();
        j.append(&[completed("b"), completed("never-accepted")])
            .unwrap();
        // Accepted and completed in the same batch.
        j.append(&[accepted("d"), completed("d"), completed("a")])
            .unwrap();
    }
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(msgids(&j.load_unfinished().unwrap()), vec!["c"]);
    assert_eq!(j.stats().unwrap().unfinished, 1);
}

#[test]
fn dead_letters_are_listed_and_not_unfinished() {
    let dir = TempDir::new("dead");
    let path = dir.journal();
    {
        let mut j = SqliteJournal::open(&path).unwrap();
        j.append(&[accepted("a"), accepted("b")]).unwrap();
        j.append(&[
            Record::Attempt {
                msgid: "a".into(),
                attempts: 5,
            },
            Record::DeadLettered {
                msgid: "a".into(),
                reason: "max attempts (5) reached".into(),
                error: Some(b"{\"error\": {\"message\": \"boom\"}}".to_vec()),
                keep: usize::MAX,
            },
            Record::DeadLettered {
                msgid: "unknown".into(),
                reason: "ignored".into(),
                error: None,
                keep: usize::MAX,
            },
        ])
        .unwrap();
    }
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(msgids(&j.load_unfinished().unwrap()), vec!["b"]);
    let dead = j.dead_letters().unwrap();
    assert_eq!(dead.len(), 1);
    let mut expected = job("a");
    expected.attempts = 5;
    assert_eq!(dead[0].job, expected);
    assert_eq!(dead[0].reason, "max attempts (5) reached");
    assert_eq!(
        dead[0].error.as_deref(),
        Some(&b"{\"error\": {\"message\": \"boom\"}}"[..]),
        "the last error is kept"
    );
    assert!(dead[0].dead_at_unix_ms > 1_600_000_000_000);
}

#[test]
fn trim_dead_letters_keeps_the_newest() {
    let mut j = SqliteJournal::open_in_memory().unwrap();
    let mut ops = Vec::new();
    for i in 0..10 {
        ops.push(accepted(&format!("d{i}")));
        ops.push(Record::DeadLettered {
            msgid: format!("d{i}"),
            reason: "boom".into(),
            error: None,
            keep: usize::MAX,
        });
    }
    j.append(&ops).unwrap();
    assert_eq!(j.trim_dead_letters(3).unwrap(), 7);
    let left: Vec<String> = j
        .dead_letters()
        .unwrap()
        .into_iter()
        .map(|d| d.job.msgid)
        .collect();
    assert_eq!(left, vec!["d7", "d8", "d9"]);
}

#[test]
fn acceptance_order_is_preserved_and_reaccept_keeps_place() {
    let dir = TempDir::new("order");
    let path = dir.journal();
    let names: Vec<String> = (0..500).map(|i| format!("{:08x}-z", 500 - i)).collect();
    {
        let mut j = SqliteJournal::open(&path).unwrap();
        for chunk in names.chunks(37) {
            let ops: Vec<Record> = chunk.iter().map(|m| accepted(m)).collect();
            j.append(&ops).unwrap();
        }
        // Complete the last one, then accept a fresh one: it goes last.
        j.append(&[completed(&names[499]), accepted("fresh")])
            .unwrap();
        // Re-accepting an existing msgid replaces its fields, not its place.
        let mut again = job(&names[3]);
        again.queue = "other".into();
        j.append(&[Record::Accepted(again)]).unwrap();
        j.append(&[Record::Attempt {
            msgid: names[4].clone(),
            attempts: 3,
        }])
        .unwrap();
    }
    let j = SqliteJournal::open(&path).unwrap();
    let jobs = j.load_unfinished().unwrap();
    let mut expected: Vec<String> = names[..499].to_vec();
    expected.push("fresh".into());
    assert_eq!(msgids(&jobs), expected);
    assert_eq!(jobs[3].queue, "other");
    assert_eq!(jobs[4].attempts, 3);
    assert_eq!(jobs[5].attempts, 0);
}

#[test]
fn rows_are_found_by_msgid_within_a_batch_and_after_reopening() {
    let dir = TempDir::new("rowindex");
    let path = dir.journal();
    let u = |i: u32| format!("{i:08x}-3b4d-4e5f-8a9b-0c1d2e3f4a5b");
    {
        let mut j = SqliteJournal::open(&path).unwrap();
        // uuid-shaped and free-form msgids, replaced and retried in the
        // batch that accepted them.
        let mut again = job(&u(1));
        again.queue = "replaced".into();
        j.append(&[
            accepted(&u(1)),
            accepted("free-form"),
            accepted(&u(2)),
            Record::Accepted(again),
            Record::Attempt {
                msgid: "free-form".into(),
                attempts: 4,
            },
            completed(&u(2)),
        ])
        .unwrap();
        // Upper case is another msgid, not the same uuid.
        j.append(&[accepted(&u(3).to_uppercase())]).unwrap();
    }
    {
        let mut j = SqliteJournal::open(&path).unwrap();
        let jobs = j.load_unfinished().unwrap();
        assert_eq!(
            msgids(&jobs),
            vec![u(1), "free-form".to_string(), u(3).to_uppercase()]
        );
        assert_eq!(jobs[0].queue, "replaced");
        assert_eq!(jobs[1].attempts, 4);
        // The map was rebuilt from the file: these find their rows.
        j.append(&[
            completed(&u(1)),
            Record::DeadLettered {
                msgid: "free-form".into(),
                reason: "gave up".into(),
                error: None,
                keep: usize::MAX,
            },
            completed(&u(3)),
        ])
        .unwrap();
        let left = msgids(&j.load_unfinished().unwrap());
        assert_eq!(left, vec![u(3).to_uppercase()]);
        assert_eq!(j.dead_letters().unwrap()[0].job.attempts, 4);
    }
}

#[test]
fn a_version_1_journal_is_migrated_and_keeps_its_jobs_in_order() {
    let dir = TempDir::new("migrate");
    let path = dir.journal();
    {
        // The version 1 schema, as the first emq release wrote it.
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE jobs (
                 seq INTEGER PRIMARY KEY, msgid TEXT NOT NULL UNIQUE, client BLOB NOT NULL,
                 queue TEXT NOT NULL, route TEXT NOT NULL, headers TEXT NOT NULL,
                 message BLOB NOT NULL, attempts INTEGER NOT NULL, accepted_at INTEGER NOT NULL);
             CREATE TABLE dead_letters (
                 seq INTEGER PRIMARY KEY, msgid TEXT NOT NULL, client BLOB NOT NULL,
                 queue TEXT NOT NULL, route TEXT NOT NULL, headers TEXT NOT NULL,
                 message BLOB NOT NULL, attempts INTEGER NOT NULL, accepted_at INTEGER NOT NULL,
                 error TEXT NOT NULL, dead_at INTEGER NOT NULL);
             CREATE TABLE schedules (id TEXT PRIMARY KEY, blob BLOB NOT NULL) WITHOUT ROWID;
             INSERT INTO jobs VALUES (7, 'second', x'01', 'default', '', '', x'5b5d', 0, 5);
             INSERT INTO jobs VALUES (3, 'first', x'02', 'email', 'default', 'h', x'5b5d', 2, 4);
             INSERT INTO schedules VALUES ('s1', x'ff');
             PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    {
        let mut j = SqliteJournal::open(&path).unwrap();
        let jobs = j.load_unfinished().unwrap();
        assert_eq!(msgids(&jobs), vec!["first", "second"]);
        assert_eq!((jobs[0].attempts, jobs[0].route.as_str()), (2, "default"));
        // Headers written as TEXT load as their bytes; an empty route is
        // the queue.
        assert_eq!(jobs[0].headers, b"h");
        assert_eq!(
            (jobs[1].headers.as_slice(), jobs[1].route.as_str()),
            (&b""[..], "default")
        );
        assert_eq!(j.schedules().unwrap(), vec![("s1".to_string(), vec![0xff])]);
        j.append(&[completed("first"), accepted("third")]).unwrap();
    }
    let c = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let indexes: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(indexes, 0, "no msgid index after the migration");
    drop(c);
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(
        msgids(&j.load_unfinished().unwrap()),
        vec!["second", "third"]
    );
}

#[test]
fn empty_batch_is_a_no_op() {
    let mut j = SqliteJournal::open_in_memory().unwrap();
    j.append(&[]).unwrap();
    assert_eq!(j.stats().unwrap().batches_appended, 0);
}

#[test]
fn schedules_put_replace_delete_list_and_persist() {
    let dir = TempDir::new("sched");
    let path = dir.journal();
    {
        let mut j = SqliteJournal::open(&path).unwrap();
        j.put_schedule("b", b"blob-b").unwrap();
        j.put_schedule("a", b"blob-a").unwrap();
        j.put_schedule("b", b"blob-b2").unwrap();
        j.put_schedule("gone", b"x").unwrap();
        assert!(j.delete_schedule("gone").unwrap());
        assert!(!j.delete_schedule("gone").unwrap());
        // Schedule ops also ride in a job batch.
        j.append(&[
            accepted("job"),
            Record::PutSchedule {
                id: "c".into(),
                blob: vec![0, 1, 2],
            },
            Record::DeleteSchedule { id: "a".into() },
        ])
        .unwrap();
    }
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(
        j.schedules().unwrap(),
        vec![
            ("b".to_string(), b"blob-b2".to_vec()),
            ("c".to_string(), vec![0, 1, 2]),
        ]
    );
    assert_eq!(j.schedule("b").unwrap(), Some(b"blob-b2".to_vec()));
    assert_eq!(j.schedule("a").unwrap(), None);
    assert_eq!(j.stats().unwrap().schedules, 2);
}

#[test]
fn router_state_rows_put_replace_delete_and_persist_by_kind() {
    let dir = TempDir::new("states");
    let path = dir.journal();
    {
        let mut j = SqliteJournal::open(&path).unwrap();
        let put = |kind, id: &str, blob: &[u8]| Record::PutState {
            kind,
            id: id.into(),
            blob: blob.to_vec(),
        };
        j.append(&[
            accepted("job"),
            put(StateKind::QueuePolicy, "email", b"p1"),
            put(StateKind::UniqueKey, "email", b"u1"),
            put(StateKind::QueuePolicy, "email", b"p2"),
            put(StateKind::UniqueKey, "gone", b"x"),
        ])
        .unwrap();
        j.append(&[
            Record::DeleteState {
                kind: StateKind::UniqueKey,
                id: "gone".into(),
            },
            // Unknown ids are ignored.
            Record::DeleteState {
                kind: StateKind::QueuePolicy,
                id: "never".into(),
            },
        ])
        .unwrap();
    }
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(
        j.states().unwrap(),
        vec![
            (StateKind::QueuePolicy, "email".to_string(), b"p2".to_vec()),
            (StateKind::UniqueKey, "email".to_string(), b"u1".to_vec()),
        ],
        "the same id under two kinds is two rows; a put replaces"
    );
}

/// Issue 32: version 7 keeps when a finished job's last delivery
/// started. A version 6 journal's finished jobs come back without it; new
/// ones keep it.
#[test]
fn a_version_6_journal_gets_the_start_of_finished_jobs_and_keeps_its_finished_jobs() {
    use emq_router_core::journal::FinishedRecord;
    let finished = |m: &str, started: Option<u64>| Record::Finished {
        record: FinishedRecord {
            job: job(m),
            outcome: "done".into(),
            started_at_unix_ms: started,
            finished_at_unix_ms: 2_000,
            result: None,
            result_truncated: false,
        },
        keep: 10,
        drop_before_unix_ms: 0,
    };
    let dir = TempDir::new("migrate6");
    let path = dir.journal();
    {
        let mut j = SqliteJournal::open(&path).unwrap();
        j.append(&[accepted("old"), finished("old", Some(1_500))])
            .unwrap();
        drop(j);
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("ALTER TABLE finished DROP COLUMN started_at; PRAGMA user_version = 6;")
            .unwrap();
    }
    let mut j = SqliteJournal::open(&path).unwrap();
    j.append(&[accepted("new"), finished("new", Some(1_800))])
        .unwrap();
    drop(j);
    let j = SqliteJournal::open(&path).unwrap();
    let f = j.finished().unwrap();
    let got: Vec<(&str, Option<u64>)> = f
        .iter()
        .map(|r| (r.job.msgid.as_str(), r.started_at_unix_ms))
        .collect();
    assert_eq!(got, [("old", None), ("new", Some(1_800))]);
}

#[test]
fn a_version_5_journal_gets_the_states_table_and_keeps_its_jobs() {
    let dir = TempDir::new("migrate5");
    let path = dir.journal();
    {
        let mut j = SqliteJournal::open(&path).unwrap();
        j.append(&[accepted("kept")]).unwrap();
        drop(j);
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "DROP TABLE states; ALTER TABLE finished DROP COLUMN started_at;
             PRAGMA user_version = 5;",
        )
        .unwrap();
    }
    let mut j = SqliteJournal::open(&path).unwrap();
    assert_eq!(msgids(&j.load_unfinished().unwrap()), vec!["kept"]);
    assert!(j.states().unwrap().is_empty());
    j.append(&[Record::PutState {
        kind: StateKind::QueuePolicy,
        id: "q".into(),
        blob: b"p".to_vec(),
    }])
    .unwrap();
    drop(j);
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(j.states().unwrap().len(), 1);
}

/// The store numbers rows itself (explicit `seq`s, planned before the
/// write): after a reopen it numbers on from the rows in the file, so
/// acceptance order, the newest finished jobs and the newest dead letters
/// stay right across restarts, whatever was deleted.
#[test]
fn rows_are_numbered_on_from_the_file_after_a_reopen() {
    use emq_router_core::journal::FinishedRecord;
    let finished = |m: &str, keep: usize| Record::Finished {
        record: FinishedRecord {
            job: job(m),
            outcome: "done".into(),
            started_at_unix_ms: None,
            finished_at_unix_ms: 2_000,
            result: None,
            result_truncated: false,
        },
        keep,
        drop_before_unix_ms: 0,
    };
    let dead = |m: &str| Record::DeadLettered {
        msgid: m.into(),
        reason: "lost".into(),
        error: None,
        keep: 2,
    };
    let dir = TempDir::new("seqs");
    {
        let mut j = SqliteJournal::open(dir.journal()).unwrap();
        j.append(&[
            accepted("a"),
            accepted("b"),
            accepted("c"),
            accepted("x"),
            accepted("y"),
            finished("f1", 2),
            finished("f2", 2),
            dead("x"),
        ])
        .unwrap();
        // The newest job row goes: a fresh database would hand its rowid
        // out again.
        j.append(&[completed("c")]).unwrap();
    }
    let mut j = SqliteJournal::open(dir.journal()).unwrap();
    j.append(&[accepted("d"), finished("f3", 2), dead("y")])
        .unwrap();
    j.append(&[accepted("b")]).unwrap();
    assert_eq!(
        msgids(&j.load_unfinished().unwrap()),
        ["a", "b", "d"],
        "acceptance order; b accepted again keeps its place"
    );
    let kept: Vec<String> = j
        .finished()
        .unwrap()
        .into_iter()
        .map(|f| f.job.msgid)
        .collect();
    assert_eq!(kept, ["f2", "f3"], "the newest 2 finished");
    let dead: Vec<String> = j
        .dead_letters()
        .unwrap()
        .into_iter()
        .map(|d| d.job.msgid)
        .collect();
    assert_eq!(dead, ["x", "y"], "oldest dead letter first");
}

#[test]
fn batch_of_10000_appends_timing() {
    let dir = TempDir::new("batch10k");
    let mut j = SqliteJournal::open(dir.journal()).unwrap();
    let ops: Vec<Record> = (0..10_000)
        .map(|i| accepted(&format!("{i:08}-0000-4000-8000-000000000000")))
        .collect();
    let t = Instant::now();
    j.append(&ops).unwrap();
    let accept = t.elapsed();
    let done: Vec<Record> = (0..10_000)
        .map(|i| completed(&format!("{i:08}-0000-4000-8000-000000000000")))
        .collect();
    let t = Instant::now();
    j.append(&done).unwrap();
    let complete = t.elapsed();
    println!(
        "10,000 Accepted in one batch: {:?} ({:.0} ops/s); 10,000 Completed: {:?} ({:.0} ops/s)",
        accept,
        10_000.0 / accept.as_secs_f64(),
        complete,
        10_000.0 / complete.as_secs_f64()
    );
    assert_eq!(j.stats().unwrap().unfinished, 0);
}

#[test]
fn open_creates_missing_directories() {
    let dir = TempDir::new("mkdir");
    let path = dir.path().join("a").join("b").join("journal.sqlite");
    let mut j = SqliteJournal::open(&path).unwrap();
    j.append(&[accepted("x")]).unwrap();
    assert!(path.exists());
    assert_eq!(j.path(), path.as_path());
}

/// A journal with enough rows to span many pages, fully checkpointed into
/// the main file (no WAL left), closed.
fn populated(dir: &TempDir) -> std::path::PathBuf {
    let path = dir.journal();
    let mut j = SqliteJournal::open(&path).unwrap();
    let ops: Vec<Record> = (0..3000)
        .map(|i| accepted(&format!("job-{i:06}")))
        .collect();
    j.append(&ops).unwrap();
    j.compact().unwrap();
    drop(j);
    let mut wal = path.clone().into_os_string();
    wal.push("-wal");
    assert!(
        std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0) == 0,
        "WAL should be empty or gone after close"
    );
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len > 40 * 4096, "journal too small for the test: {len}");
    path
}

fn overwrite(path: &std::path::Path, offset: u64, bytes: &[u8]) {
    let mut f = OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(bytes).unwrap();
}

fn assert_clear(err: &JournalError, path: &std::path::Path) {
    let text = err.to_string();
    println!("error shown to the operator: {text}");
    assert!(
        text.contains(&path.display().to_string()),
        "message names the file: {text}"
    );
    assert!(err.is_corruption());
    assert_eq!(err.path(), path);
}

#[test]
fn garbage_over_the_header_is_not_a_database() {
    let dir = TempDir::new("garbage-head");
    let path = populated(&dir);
    overwrite(&path, 0, &[0xA5; 512]);
    let err = SqliteJournal::open(&path).unwrap_err();
    assert!(
        matches!(err, JournalError::NotADatabase { .. }),
        "got {err:?}"
    );
    assert_clear(&err, &path);
}

#[test]
fn garbage_in_the_middle_is_corrupt() {
    let dir = TempDir::new("garbage-mid");
    let path = populated(&dir);
    let len = std::fs::metadata(&path).unwrap().len();
    // Whole pages of garbage at about a third and two thirds of the file.
    overwrite(&path, (len / 3) / 4096 * 4096, &[0xA5; 8192]);
    overwrite(&path, (2 * len / 3) / 4096 * 4096 + 100, &[0x5A; 3000]);
    let err = SqliteJournal::open(&path).unwrap_err();
    assert!(matches!(err, JournalError::Corrupt { .. }), "got {err:?}");
    assert_clear(&err, &path);
}

#[test]
fn file_truncated_mid_page_is_corrupt() {
    let dir = TempDir::new("torn");
    let path = populated(&dir);
    let len = std::fs::metadata(&path).unwrap().len();
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len / 2 + 1234).unwrap();
    drop(f);
    let err = SqliteJournal::open(&path).unwrap_err();
    assert!(matches!(err, JournalError::Corrupt { .. }), "got {err:?}");
    assert_clear(&err, &path);
}

#[test]
fn file_truncated_inside_the_header_is_corrupt() {
    let dir = TempDir::new("torn-head");
    let path = populated(&dir);
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(40).unwrap();
    drop(f);
    let err = SqliteJournal::open(&path).unwrap_err();
    assert!(matches!(err, JournalError::Corrupt { .. }), "got {err:?}");
    assert_clear(&err, &path);
}

#[test]
fn a_text_file_is_not_a_database() {
    let dir = TempDir::new("text");
    let path = dir.journal();
    std::fs::write(&path, "this is my shopping list, not a journal\n").unwrap();
    let err = SqliteJournal::open(&path).unwrap_err();
    assert!(
        matches!(err, JournalError::NotADatabase { .. }),
        "got {err:?}"
    );
    assert_clear(&err, &path);
    // The file is left untouched for the operator.
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "this is my shopping list, not a journal\n"
    );
}

#[test]
fn another_applications_database_is_refused() {
    let dir = TempDir::new("foreign");
    let path = dir.journal();
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER)")
            .unwrap();
    }
    let err = SqliteJournal::open(&path).unwrap_err();
    assert!(
        matches!(err, JournalError::NotADatabase { .. }),
        "got {err:?}"
    );
    println!("{err}");
}

#[test]
fn a_newer_schema_version_is_refused() {
    let dir = TempDir::new("newer");
    let path = dir.journal();
    drop(SqliteJournal::open(&path).unwrap());
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1))
            .unwrap();
    }
    let err = SqliteJournal::open(&path).unwrap_err();
    assert!(
        matches!(err, JournalError::UnsupportedVersion { found, .. } if found == SCHEMA_VERSION + 1),
        "got {err:?}"
    );
    println!("{err}");
}

#[test]
fn a_second_opener_is_locked_out() {
    let dir = TempDir::new("locked");
    let path = dir.journal();
    let mut first = SqliteJournal::open(&path).unwrap();
    first.append(&[accepted("a")]).unwrap();
    let err = SqliteJournal::open(&path).unwrap_err();
    assert!(matches!(err, JournalError::Locked { .. }), "got {err:?}");
    println!("{err}");
    // The first owner is unaffected; after it closes, the file opens.
    first.append(&[accepted("b")]).unwrap();
    drop(first);
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(msgids(&j.load_unfinished().unwrap()), vec!["a", "b"]);
}

#[test]
fn full_sync_mode_works_too() {
    let dir = TempDir::new("full");
    let path = dir.journal();
    let options = JournalOptions {
        sync: SyncMode::Full,
        integrity_check: false,
    };
    {
        let mut j = SqliteJournal::open_with(&path, &options).unwrap();
        j.append(&[accepted("a")]).unwrap();
    }
    let j = SqliteJournal::open_with(&path, &options).unwrap();
    assert_eq!(msgids(&j.load_unfinished().unwrap()), vec!["a"]);
}

#[test]
fn compact_truncates_the_wal_and_stats_report_sizes() {
    let dir = TempDir::new("compact");
    let mut j = SqliteJournal::open(dir.journal()).unwrap();
    let ops: Vec<Record> = (0..2000).map(|i| accepted(&format!("c{i}"))).collect();
    j.append(&ops).unwrap();
    let done: Vec<Record> = (0..2000).map(|i| completed(&format!("c{i}"))).collect();
    j.append(&done).unwrap();
    let before = j.stats().unwrap();
    assert!(before.wal_bytes > 0, "{before:?}");
    assert_eq!(before.batches_appended, 2);
    assert_eq!(before.records_appended, 4000);
    j.compact().unwrap();
    let after = j.stats().unwrap();
    println!("before compact {before:?}\nafter compact  {after:?}");
    assert_eq!(after.wal_bytes, 0);
    assert_eq!(after.unfinished, 0);
    assert!(
        after.file_bytes < 64 * 4096,
        "freed pages returned: {after:?}"
    );
}

#[test]
fn the_store_appends_the_cores_batches_in_order_and_loads_them_back() {
    let dir = TempDir::new("store");
    let path = dir.journal();
    let mut j = SqliteJournal::open(&path).unwrap();
    for b in 0..50u64 {
        let batch = Batch {
            id: BatchId(b + 1),
            records: (0..20)
                .map(|i| accepted(&format!("w{b:03}-{i:02}")))
                .collect(),
        };
        JournalStore::append(&mut j, &batch).unwrap();
    }
    let last = Batch {
        id: BatchId(51),
        records: vec![completed("w000-00")],
    };
    JournalStore::append(&mut j, &last).unwrap();
    assert_eq!(j.stats().unwrap().batches_appended, 51);
    let restored = JournalStore::load(&mut j).unwrap();
    assert_eq!(restored.jobs.len(), 50 * 20 - 1);
    assert_eq!(restored.jobs[0].msgid, "w000-01");
    let expected: Vec<String> = (0..50)
        .flat_map(|b| (0..20).map(move |i| format!("w{b:03}-{i:02}")))
        .skip(1)
        .collect();
    assert_eq!(msgids(&restored.jobs), expected);
    assert!(restored.dead_letters.is_empty() && restored.schedules.is_empty());
    assert_eq!(JournalStore::describe(&j), path.display().to_string());
    drop(j);
    let mut j = SqliteJournal::open(&path).unwrap();
    let restored = JournalStore::load(&mut j).unwrap();
    assert_eq!(restored.jobs.len(), 999);
    assert_eq!(msgids(&restored.jobs), expected);
}

#[test]
fn a_probe_writes_and_leaves_no_trace() {
    let dir = TempDir::new("probe");
    let path = dir.journal();
    {
        let mut j = SqliteJournal::open(&path).unwrap();
        j.append(&[accepted("a")]).unwrap();
        j.append(&[Record::Probe]).unwrap();
        j.append(&[Record::Probe, accepted("b"), Record::Probe])
            .unwrap();
        let st = j.stats().unwrap();
        assert_eq!((st.batches_appended, st.records_appended), (3, 5));
        assert_eq!((st.unfinished, st.dead_letters, st.schedules), (2, 0, 0));
    }
    let c = rusqlite::Connection::open(&path).unwrap();
    let probe_rows: i64 = c
        .query_row("SELECT count(*) FROM probe", [], |r| r.get(0))
        .unwrap();
    assert_eq!(probe_rows, 0);
    drop(c);
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(msgids(&j.load_unfinished().unwrap()), vec!["a", "b"]);
}

#[test]
fn records_are_stored_compactly_and_old_text_headers_load() {
    let dir = TempDir::new("layout");
    let path = dir.journal();
    let binary = JobRecord {
        headers: vec![0xff, 0xfe, b',', 0],
        route: "email".into(),
        accepted_at_unix_ms: u64::MAX,
        ..job("binary")
    };
    {
        let mut j = SqliteJournal::open(&path).unwrap();
        j.append(&[accepted("text"), Record::Accepted(binary.clone())])
            .unwrap();
    }
    {
        // The layout inside the file: UTF-8 headers as TEXT (what older emq
        // wrote and reads), others as a BLOB; a route equal to the queue as
        // ''; a time past i64::MAX ms as i64::MAX.
        let c = rusqlite::Connection::open(&path).unwrap();
        let rows: Vec<(String, String, String, i64)> = c
            .prepare("SELECT msgid, typeof(headers), route, accepted_at FROM jobs ORDER BY seq")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            rows,
            vec![
                ("text".into(), "text".into(), "".into(), 1_700_000_000_000),
                ("binary".into(), "blob".into(), "email".into(), i64::MAX),
            ]
        );
        // A row as an older emq wrote it: TEXT headers.
        c.execute(
            "INSERT INTO jobs (msgid, client, queue, route, headers, message, attempts,
                 accepted_at) VALUES ('old', x'01', 'email', '', 'retry-count:2', x'5b5d', 1, 7)",
            [],
        )
        .unwrap();
    }
    let mut j = SqliteJournal::open(&path).unwrap();
    let jobs = j.load_unfinished().unwrap();
    assert_eq!(jobs[0], job("text"));
    assert_eq!(
        jobs[1],
        JobRecord {
            accepted_at_unix_ms: i64::MAX as u64,
            ..binary
        }
    );
    assert_eq!(
        jobs[2],
        JobRecord {
            msgid: "old".into(),
            client: vec![1],
            queue: "email".into(),
            route: "email".into(),
            headers: b"retry-count:2".to_vec(),
            payload: b"[]".to_vec(),
            attempts: 1,
            accepted_at_unix_ms: 7,
            run_at_unix_ms: None,
        }
    );
    // Dead letters keep the bytes too; the old row is found by msgid.
    j.append(&[
        Record::DeadLettered {
            msgid: "binary".into(),
            reason: "r".into(),
            error: None,
            keep: usize::MAX,
        },
        completed("old"),
    ])
    .unwrap();
    assert_eq!(
        j.dead_letters().unwrap()[0].job.headers,
        vec![0xff, 0xfe, b',', 0]
    );
    assert_eq!(msgids(&j.load_unfinished().unwrap()), vec!["text"]);
}

#[test]
fn torn_wal_tail_loses_only_the_torn_batch() {
    // Copy the files of an open journal (what a SIGKILL leaves behind),
    // then tear the last WAL frame: the last batch's commit record.
    let dir = TempDir::new("torn-wal");
    let path = dir.journal();
    let mut j = SqliteJournal::open(&path).unwrap();
    j.append(&[accepted("a1"), accepted("a2")]).unwrap();
    let big: Vec<Record> = (0..200).map(|i| accepted(&format!("b{i:03}"))).collect();
    j.append(&big).unwrap();
    let copy = dir.path().join("copy.sqlite");
    let wal = |p: &std::path::Path| {
        let mut s = p.as_os_str().to_owned();
        s.push("-wal");
        std::path::PathBuf::from(s)
    };
    std::fs::copy(&path, &copy).unwrap();
    std::fs::copy(wal(&path), wal(&copy)).unwrap();
    drop(j);
    let wal_len = std::fs::metadata(wal(&copy)).unwrap().len();
    let f = OpenOptions::new().write(true).open(wal(&copy)).unwrap();
    f.set_len(wal_len - 100).unwrap();
    drop(f);
    let j = SqliteJournal::open(&copy).unwrap();
    assert_eq!(msgids(&j.load_unfinished().unwrap()), vec!["a1", "a2"]);
}

#[test]
fn a_version_2_journal_gets_run_at_finished_and_paused_queues() {
    let dir = TempDir::new("migrate2");
    let path = dir.journal();
    {
        // The version 2 schema: version 1 without the msgid index.
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE jobs (
                 seq INTEGER PRIMARY KEY, msgid TEXT NOT NULL, client BLOB NOT NULL,
                 queue TEXT NOT NULL, route TEXT NOT NULL, headers TEXT NOT NULL,
                 message BLOB NOT NULL, attempts INTEGER NOT NULL, accepted_at INTEGER NOT NULL);
             CREATE TABLE dead_letters (
                 seq INTEGER PRIMARY KEY, msgid TEXT NOT NULL, client BLOB NOT NULL,
                 queue TEXT NOT NULL, route TEXT NOT NULL, headers TEXT NOT NULL,
                 message BLOB NOT NULL, attempts INTEGER NOT NULL, accepted_at INTEGER NOT NULL,
                 error TEXT NOT NULL, dead_at INTEGER NOT NULL);
             CREATE TABLE schedules (id TEXT PRIMARY KEY, blob BLOB NOT NULL) WITHOUT ROWID;
             INSERT INTO jobs VALUES (1, 'old', x'01', 'default', '', '', x'5b5d', 0, 5);
             PRAGMA user_version = 2;",
        )
        .unwrap();
    }
    let mut j = SqliteJournal::open(&path).unwrap();
    let jobs = j.load_unfinished().unwrap();
    assert_eq!(msgids(&jobs), vec!["old"]);
    assert_eq!(jobs[0].run_at_unix_ms, None);
    assert!(j.finished().unwrap().is_empty());
    assert!(j.paused_queues().unwrap().is_empty());
    j.append(&[Record::QueuePaused {
        queue: "default".into(),
        paused: true,
    }])
    .unwrap();
    drop(j);
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(j.paused_queues().unwrap(), vec!["default".to_string()]);
}

#[test]
fn a_version_4_journal_gets_the_last_error_of_dead_letters_and_keeps_its_dead_letters() {
    let dir = TempDir::new("migrate4");
    let path = dir.journal();
    {
        // A journal as the version 4 release wrote it, with a dead letter.
        let mut j = SqliteJournal::open(&path).unwrap();
        j.append(&[accepted("gone"), accepted("kept")]).unwrap();
        drop(j);
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "ALTER TABLE dead_letters DROP COLUMN last_error;
             DROP TABLE states;
             ALTER TABLE finished DROP COLUMN started_at;
             INSERT INTO dead_letters
                 (msgid, client, queue, route, headers, message, attempts, accepted_at,
                  error, dead_at)
                 SELECT msgid, client, queue, route, headers, message, attempts,
                        accepted_at, 'old reason', 7
                 FROM jobs WHERE msgid = 'gone';
             DELETE FROM jobs WHERE msgid = 'gone';
             PRAGMA user_version = 4;",
        )
        .unwrap();
    }
    let mut j = SqliteJournal::open(&path).unwrap();
    assert_eq!(msgids(&j.load_unfinished().unwrap()), vec!["kept"]);
    let dead = j.dead_letters().unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (dead[0].reason.as_str(), dead[0].error.as_deref()),
        ("old reason", None)
    );
    j.append(&[Record::DeadLettered {
        msgid: "kept".into(),
        reason: "retries spent".into(),
        error: Some(b"Traceback".to_vec()),
        keep: usize::MAX,
    }])
    .unwrap();
    drop(j);
    let j = SqliteJournal::open(&path).unwrap();
    let dead = j.dead_letters().unwrap();
    assert_eq!(dead[1].error.as_deref(), Some(&b"Traceback"[..]));
}

#[test]
fn a_version_3_journal_gets_the_results_table_and_keeps_everything_else() {
    let dir = TempDir::new("migrate3");
    let path = dir.journal();
    {
        // A journal as the version 3 release wrote it (its own code made
        // it: open and append with that schema, then take the results
        // table away and set the version back).
        let mut j = SqliteJournal::open(&path).unwrap();
        j.append(&[accepted("kept")]).unwrap();
        drop(j);
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "DROP TABLE results; ALTER TABLE dead_letters DROP COLUMN last_error;
             DROP TABLE states; ALTER TABLE finished DROP COLUMN started_at;
             PRAGMA user_version = 3;",
        )
        .unwrap();
    }
    let mut j = SqliteJournal::open(&path).unwrap();
    assert_eq!(msgids(&j.load_unfinished().unwrap()), vec!["kept"]);
    assert!(j.results().unwrap().is_empty());
    j.append(
        &[Record::ResultHeld(emq_router_core::journal::ResultRecord {
            msgid: "kept".into(),
            client: b"c".to_vec(),
            status: emqp_proto::ResultStatus::Ok,
            payload: b"{}".to_vec(),
            receipt: true,
            held_at_unix_ms: 5,
        })],
    )
    .unwrap();
    drop(j);
    let c = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    drop(c);
    let j = SqliteJournal::open(&path).unwrap();
    let held: Vec<String> = j.results().unwrap().into_iter().map(|r| r.msgid).collect();
    assert_eq!(held, ["kept"]);
}
