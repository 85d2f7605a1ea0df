//! The SQLite journal: one connection, one transaction per batch. A batch
//! is planned first (the crate's `plan.rs`, shared with the PostgreSQL
//! store: which rows, with which explicit `seq`s, in which order) and then
//! written through [`SqliteWriter`]: one cached prepared statement per
//! group, executed once per row.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::states::known_states;
use emq_router_core::journal::{
    DeadLetterRecord, FinishedRecord, JobRecord, Record, ResultRecord, StateKind,
};
use emqp_proto::ResultStatus;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use crate::error::JournalError;
use crate::plan::{
    attempts_column, now_unix_ms, route_column, unix_ms_column, unix_ms_from_column, DeadMove,
    FinishedColumns, JobColumns, Other, ResultColumns, RowWriter, Rows,
};

/// Result alias of this crate.
pub type Result<T, E = JournalError> = std::result::Result<T, E>;

/// The schema version this crate writes (`PRAGMA user_version`). Versions
/// 1 (the same tables with a UNIQUE index on `jobs.msgid`), 2 (no delayed
/// jobs, finished jobs or paused queues), 3 (no held results), 4 (no
/// last error of a dead letter), 5 (no router state) and 6 (no start time
/// of a finished job) are migrated when opened.
pub const SCHEMA_VERSION: i64 = 7;

/// The first 16 bytes of every SQLite database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// When a commit is durable; see the crate documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// `synchronous=NORMAL`: a commit is in the WAL file (in the OS page
    /// cache) when `append` returns: it survives a crash or SIGKILL of the
    /// process, not necessarily a power loss or kernel crash (the journal
    /// then stays consistent but may lose the last commits).
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit fsyncs the WAL; survives power loss.
    /// Costs one fsync per batch.
    Full,
}

/// How to open a journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalOptions {
    pub sync: SyncMode,
    /// Run `PRAGMA quick_check` on open (O(size of the journal); on by
    /// default, so corruption is found at startup rather than mid-run).
    pub integrity_check: bool,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions {
            sync: SyncMode::Normal,
            integrity_check: true,
        }
    }
}

/// Counts and sizes, for logs and the admin STATUS command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JournalStats {
    /// Accepted, not yet completed or dead-lettered jobs.
    pub unfinished: u64,
    pub dead_letters: u64,
    pub schedules: u64,
    /// Results held until delivered.
    pub results: u64,
    /// Size of the database file and of its WAL file, in bytes.
    pub file_bytes: u64,
    pub wal_bytes: u64,
    /// Batches (transactions) and records appended since open.
    pub batches_appended: u64,
    pub records_appended: u64,
}

/// The durable job journal. Not `Sync`: one owner (the router binary's
/// poll loop).
pub struct SqliteJournal {
    conn: Connection,
    path: PathBuf,
    batches: u64,
    records: u64,
    /// Where each unfinished job's and held result's row is (see
    /// [`crate::row_index`]), and the next `seq`s.
    rows: Rows,
}

impl std::fmt::Debug for SqliteJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteJournal")
            .field("path", &self.path)
            .field("batches", &self.batches)
            .field("records", &self.records)
            .finish()
    }
}

/// The columns of the `jobs` table (a macro, so that the schema and the
/// version 1 → 2 migration are built from one text with `concat!`).
/// `msgid` has no index: rows are found by `seq` through the in-memory
/// row index (`Rows`), which also keeps msgids unique.
macro_rules! jobs_columns {
    () => {
        "
    seq         INTEGER PRIMARY KEY,
    msgid       TEXT    NOT NULL,
    client      BLOB    NOT NULL,
    queue       TEXT    NOT NULL,
    route       TEXT    NOT NULL,
    headers     TEXT    NOT NULL,
    message     BLOB    NOT NULL,
    attempts    INTEGER NOT NULL,
    accepted_at INTEGER NOT NULL"
    };
}

/// Version 3's additions: a delayed job's run time, finished jobs kept for
/// lookups, paused queues (also the 2 → 3 migration).
const SCHEMA_3_ADDITIONS: &str = "
ALTER TABLE jobs ADD COLUMN run_at INTEGER;
CREATE TABLE finished (
    seq         INTEGER PRIMARY KEY,
    msgid       TEXT    NOT NULL,
    client      BLOB    NOT NULL,
    queue       TEXT    NOT NULL,
    route       TEXT    NOT NULL,
    headers     TEXT    NOT NULL,
    message     BLOB    NOT NULL,
    attempts    INTEGER NOT NULL,
    accepted_at INTEGER NOT NULL,
    run_at      INTEGER,
    outcome     TEXT    NOT NULL,
    finished_at INTEGER NOT NULL,
    result      BLOB,
    result_truncated INTEGER NOT NULL
);
CREATE INDEX finished_at ON finished (finished_at);
CREATE TABLE paused_queues (
    queue TEXT PRIMARY KEY
) WITHOUT ROWID;
";

/// Version 4's addition: results held until delivered (also the 3 → 4
/// migration). Rows are found by `seq` through an in-memory index, as
/// jobs are (no msgid index).
const SCHEMA_4_ADDITIONS: &str = "
CREATE TABLE results (
    seq      INTEGER PRIMARY KEY,
    msgid    TEXT    NOT NULL,
    client   BLOB    NOT NULL,
    status   TEXT    NOT NULL,
    payload  BLOB    NOT NULL,
    receipt  INTEGER NOT NULL,
    held_at  INTEGER NOT NULL
);
";

/// Version 5's addition: a dead letter's last error payload (the worker's
/// failed REPLY; the `error` column holds the reason), also the 4 → 5
/// migration.
const SCHEMA_5_ADDITIONS: &str = "
ALTER TABLE dead_letters ADD COLUMN last_error BLOB;
";

/// Version 6's addition: router state other than jobs (`Record::PutState`:
/// flow-control policies, unique keys held for a window), also the 5 → 6
/// migration.
const SCHEMA_6_ADDITIONS: &str = "
CREATE TABLE states (
    kind TEXT NOT NULL,
    id   TEXT NOT NULL,
    blob BLOB NOT NULL,
    PRIMARY KEY (kind, id)
) WITHOUT ROWID;
";

/// Version 7's addition: when a finished job's last delivery started
/// (NULL: it never ran, or it finished before version 7), also the 6 → 7
/// migration.
const SCHEMA_7_ADDITIONS: &str = "
ALTER TABLE finished ADD COLUMN started_at INTEGER;
";

const SCHEMA: &str = concat!(
    "CREATE TABLE jobs (",
    jobs_columns!(),
    "
);
CREATE TABLE dead_letters (
    seq         INTEGER PRIMARY KEY,
    msgid       TEXT    NOT NULL,
    client      BLOB    NOT NULL,
    queue       TEXT    NOT NULL,
    route       TEXT    NOT NULL,
    headers     TEXT    NOT NULL,
    message     BLOB    NOT NULL,
    attempts    INTEGER NOT NULL,
    accepted_at INTEGER NOT NULL,
    error       TEXT    NOT NULL,
    dead_at     INTEGER NOT NULL
);
CREATE TABLE schedules (
    id   TEXT PRIMARY KEY,
    blob BLOB NOT NULL
) WITHOUT ROWID;
"
);

/// Version 1 → 2: the same `jobs` table without the UNIQUE index on
/// msgid (a table rebuild: SQLite cannot drop a constraint's index).
const MIGRATE_1_TO_2: &str = concat!(
    "CREATE TABLE jobs_v2 (",
    jobs_columns!(),
    "
);
INSERT INTO jobs_v2 SELECT seq, msgid, client, queue, route, headers, message, attempts,
    accepted_at FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v2 RENAME TO jobs;
"
);

const INSERT_JOB: &str = "INSERT INTO jobs
        (seq, msgid, client, queue, route, headers, message, attempts, accepted_at, run_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
/// A msgid accepted again: new fields, same place in the acceptance order.
const REPLACE_JOB: &str = "UPDATE jobs SET client = ?2, queue = ?3, route = ?4, headers = ?5,
     message = ?6, attempts = ?7, accepted_at = ?8, run_at = ?9 WHERE seq = ?1";
const INSERT_FINISHED: &str = "INSERT INTO finished
        (seq, msgid, client, queue, route, headers, message, attempts, accepted_at, run_at,
         outcome, finished_at, result, result_truncated, started_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";
/// Keep the newest finished rows: the plan gives the `seq` at or below
/// which they go (one rowid range, no walk over the rows kept).
const TRIM_FINISHED_COUNT: &str = "DELETE FROM finished WHERE seq <= ?1";
/// None finished before ?1 (through the `finished_at` index).
const TRIM_FINISHED_AGE: &str = "DELETE FROM finished WHERE finished_at < ?1";
/// Keep the newest ?1 dead letters.
const TRIM_DEAD: &str = "DELETE FROM dead_letters WHERE seq <=
     (SELECT seq FROM dead_letters ORDER BY seq DESC LIMIT 1 OFFSET ?1)";
const DELETE_DEAD: &str = "DELETE FROM dead_letters WHERE msgid = ?1";
const PAUSE_QUEUE: &str = "INSERT OR IGNORE INTO paused_queues (queue) VALUES (?1)";
const RESUME_QUEUE: &str = "DELETE FROM paused_queues WHERE queue = ?1";
const DELETE_JOB: &str = "DELETE FROM jobs WHERE seq = ?1";
const UPDATE_ATTEMPTS: &str = "UPDATE jobs SET attempts = ?2 WHERE seq = ?1";
const MOVE_TO_DEAD: &str = "INSERT INTO dead_letters
        (seq, msgid, client, queue, route, headers, message, attempts, accepted_at, error,
         dead_at, last_error)
     SELECT ?2, msgid, client, queue, route, headers, message, attempts, accepted_at, ?3, ?4, ?5
     FROM jobs WHERE seq = ?1";
const INSERT_RESULT: &str = "INSERT INTO results
        (seq, msgid, client, status, payload, receipt, held_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
const DELETE_RESULT: &str = "DELETE FROM results WHERE seq = ?1";
const PUT_SCHEDULE: &str = "INSERT OR REPLACE INTO schedules (id, blob) VALUES (?1, ?2)";
const DELETE_SCHEDULE: &str = "DELETE FROM schedules WHERE id = ?1";
const PUT_STATE: &str = "INSERT OR REPLACE INTO states (kind, id, blob) VALUES (?1, ?2, ?3)";
const DELETE_STATE: &str = "DELETE FROM states WHERE kind = ?1 AND id = ?2";
/// A real write, to learn whether the disk takes one again.
const PROBE: &str = "CREATE TABLE IF NOT EXISTS probe (x BLOB);
     INSERT INTO probe VALUES (zeroblob(4096));
     DELETE FROM probe;";

// How a `JobRecord` is laid out in a row is the plan's (`plan.rs`: route,
// times, delivery count), but for one choice of this store:
//
// - `headers`: the bytes as TEXT when they are UTF-8 (always, in
//   practice: what every earlier emq wrote, and what an earlier emq
//   reading this file expects), as a BLOB otherwise. Read back as bytes
//   either way.

/// The `headers` column: TEXT if the bytes are UTF-8, else a BLOB.
fn headers_column(headers: &[u8]) -> ToSqlOutput<'_> {
    match std::str::from_utf8(headers) {
        Ok(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
        Err(_) => ToSqlOutput::Borrowed(ValueRef::Blob(headers)),
    }
}

/// A TEXT or BLOB column as bytes (rusqlite's `Vec<u8>` reads only BLOBs).
fn bytes_column(r: &rusqlite::Row<'_>, idx: usize) -> rusqlite::Result<Vec<u8>> {
    match r.get_ref(idx)? {
        ValueRef::Text(b) | ValueRef::Blob(b) => Ok(b.to_vec()),
        other => Err(rusqlite::Error::InvalidColumnType(
            idx,
            r.as_ref().column_name(idx)?.to_string(),
            other.data_type(),
        )),
    }
}

/// A job from the first eight columns of `SELECT msgid, client, queue,
/// route, headers, message, attempts, accepted_at`.
fn job_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<JobRecord> {
    let queue: String = r.get(2)?;
    let route: String = r.get(3)?;
    Ok(JobRecord {
        msgid: r.get(0)?,
        client: r.get(1)?,
        route: if route.is_empty() {
            queue.clone()
        } else {
            route
        },
        queue,
        headers: bytes_column(r, 4)?,
        payload: r.get(5)?,
        attempts: r.get(6)?,
        accepted_at_unix_ms: unix_ms_from_column(r.get(7)?),
        run_at_unix_ms: r.get::<_, Option<i64>>(8)?.map(unix_ms_from_column),
    })
}

/// Look at the first bytes before SQLite does, to tell "not a database"
/// from "a database with a torn header" in plain words.
fn check_header(path: &Path) -> Result<()> {
    let mut file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(JournalError::io(path, e)),
    };
    let mut head = Vec::with_capacity(100);
    file.by_ref()
        .take(100)
        .read_to_end(&mut head)
        .map_err(|e| JournalError::io(path, e))?;
    if head.is_empty() {
        // SQLite treats an empty file as a new database.
        return Ok(());
    }
    let n = head.len().min(SQLITE_MAGIC.len());
    if head[..n] != SQLITE_MAGIC[..n] {
        return Err(JournalError::NotADatabase {
            path: path.to_path_buf(),
            detail: "the file does not start with the SQLite header".into(),
        });
    }
    if head.len() < 100 {
        return Err(JournalError::Corrupt {
            path: path.to_path_buf(),
            detail: format!(
                "the file is {} bytes long, shorter than the 100-byte SQLite header",
                head.len()
            ),
        });
    }
    Ok(())
}

impl SqliteJournal {
    /// Open (creating it and its directories if needed) the journal at
    /// `path` with the default options: `synchronous=NORMAL`, integrity
    /// check on open.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteJournal> {
        SqliteJournal::open_with(path, &JournalOptions::default())
    }

    /// Open with explicit options.
    pub fn open_with(path: impl AsRef<Path>, options: &JournalOptions) -> Result<SqliteJournal> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                fs::create_dir_all(dir).map_err(|e| JournalError::io(dir, e))?;
            }
        }
        check_header(&path)?;
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| JournalError::sqlite(&path, "open", e))?;
        let mut journal = SqliteJournal {
            conn,
            path,
            batches: 0,
            records: 0,
            rows: Rows::default(),
        };
        journal.configure(options, true)?;
        Ok(journal)
    }

    /// A journal that lives in memory only (for tests of code that takes a
    /// `SqliteJournal`). Nothing survives the process.
    pub fn open_in_memory() -> Result<SqliteJournal> {
        let path = PathBuf::from(":memory:");
        let conn =
            Connection::open_in_memory().map_err(|e| JournalError::sqlite(&path, "open", e))?;
        let mut journal = SqliteJournal {
            conn,
            path,
            batches: 0,
            records: 0,
            rows: Rows::default(),
        };
        journal.configure(&JournalOptions::default(), false)?;
        Ok(journal)
    }

    fn err(&self, context: &'static str) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
        move |e| JournalError::sqlite(&self.path, context, e)
    }

    fn configure(&mut self, options: &JournalOptions, on_disk: bool) -> Result<()> {
        let c = &self.conn;
        c.busy_timeout(Duration::from_millis(200))
            .map_err(self.err("open"))?;
        if on_disk {
            // One process owns the journal: a second router on the same file
            // gets a clear `Locked` error instead of interleaving writes.
            // Exclusive mode also means WAL needs no shared-memory file.
            let _: String = c
                .query_row("PRAGMA locking_mode = EXCLUSIVE", [], |r| r.get(0))
                .map_err(self.err("open"))?;
        }
        // Only takes effect on a new, empty database; lets compact() give
        // freed pages back to the file system.
        c.execute_batch("PRAGMA auto_vacuum = INCREMENTAL")
            .map_err(self.err("open"))?;
        if on_disk {
            let mode: String = c
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
                .map_err(self.err("open"))?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(JournalError::Sqlite {
                    path: self.path.clone(),
                    context: "open",
                    detail: format!("could not switch to WAL mode (journal_mode is {mode})"),
                });
            }
        }
        let sync = match options.sync {
            SyncMode::Normal => "NORMAL",
            SyncMode::Full => "FULL",
        };
        c.execute_batch(&format!(
            "PRAGMA synchronous = {sync};
             PRAGMA journal_size_limit = 67108864;
             PRAGMA cache_size = -16384;
             PRAGMA temp_store = MEMORY;"
        ))
        .map_err(self.err("open"))?;
        c.set_prepared_statement_cache_capacity(32);
        if options.integrity_check {
            self.quick_check()?;
        }
        self.init_schema()?;
        self.load_row_index()
    }

    /// Build the msgid → rowid maps and the next `seq`s from the tables.
    /// A msgid found twice (only possible if the file was edited by hand)
    /// keeps its first row.
    fn load_row_index(&mut self) -> Result<()> {
        let mut rows = Rows::default();
        self.scan_rows("jobs", |msgid, seq| rows.add_job(msgid, seq))?;
        self.scan_rows("results", |msgid, seq| rows.add_result(msgid, seq))?;
        let ends = self
            .conn
            .query_row(
                "SELECT (SELECT max(seq) FROM finished), (SELECT max(seq) FROM dead_letters)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(self.err("load row index"))?;
        rows.saw_ends(ends.0, ends.1);
        self.rows = rows;
        Ok(())
    }

    /// Every `(msgid, seq)` of `table` in `seq` order into `add`, which
    /// says whether the msgid was new.
    fn scan_rows(&self, table: &str, mut add: impl FnMut(&str, i64) -> bool) -> Result<()> {
        let err = self.err("load row index");
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT seq, msgid FROM {table} ORDER BY seq"))
            .map_err(&err)?;
        let mut q = stmt.query([]).map_err(&err)?;
        while let Some(r) = q.next().map_err(&err)? {
            let seq: i64 = r.get(0).map_err(&err)?;
            let msgid: &str = r.get_ref(1).and_then(|v| Ok(v.as_str()?)).map_err(&err)?;
            if !add(msgid, seq) {
                log::warn!(
                    "journal {}: msgid {msgid} is in the {table} table twice; using its first row",
                    self.path.display()
                );
            }
        }
        Ok(())
    }

    /// `PRAGMA quick_check`: structure of every b-tree page. Anything but a
    /// single "ok" row is corruption.
    fn quick_check(&self) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare("PRAGMA quick_check(5)")
            .map_err(self.err("integrity check"))?;
        let rows: Vec<String> = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect())
            .map_err(self.err("integrity check"))?;
        if rows.len() == 1 && rows[0] == "ok" {
            return Ok(());
        }
        Err(JournalError::Corrupt {
            path: self.path.clone(),
            detail: format!(
                "integrity check failed: {}",
                rows.join("; ").replace('\n', " ")
            ),
        })
    }

    fn init_schema(&self) -> Result<()> {
        let c = &self.conn;
        // IMMEDIATE takes the write lock now, so a second opener fails here.
        c.execute_batch("BEGIN IMMEDIATE")
            .map_err(self.err("open"))?;
        let outcome = (|| -> Result<()> {
            let version: i64 = c
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .map_err(self.err("read schema version"))?;
            match version {
                0 => {
                    let tables: i64 = c
                        .query_row(
                            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                            [],
                            |r| r.get(0),
                        )
                        .map_err(self.err("read schema"))?;
                    if tables != 0 {
                        return Err(JournalError::NotADatabase {
                            path: self.path.clone(),
                            detail: format!(
                                "an SQLite database with {tables} table(s) but no emq \
                                 schema version; not an emq journal"
                            ),
                        });
                    }
                    c.execute_batch(SCHEMA).map_err(self.err("create schema"))?;
                    c.execute_batch(SCHEMA_3_ADDITIONS)
                        .map_err(self.err("create schema"))?;
                    c.execute_batch(SCHEMA_4_ADDITIONS)
                        .map_err(self.err("create schema"))?;
                    c.execute_batch(SCHEMA_5_ADDITIONS)
                        .map_err(self.err("create schema"))?;
                    c.execute_batch(SCHEMA_6_ADDITIONS)
                        .map_err(self.err("create schema"))?;
                    c.execute_batch(SCHEMA_7_ADDITIONS)
                        .map_err(self.err("create schema"))?;
                    c.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
                        .map_err(self.err("create schema"))?;
                    Ok(())
                }
                1..=6 => {
                    if version == 1 {
                        c.execute_batch(MIGRATE_1_TO_2)
                            .map_err(self.err("migrate schema 1 to 2"))?;
                    }
                    if version <= 2 {
                        c.execute_batch(SCHEMA_3_ADDITIONS)
                            .map_err(self.err("migrate schema to 3"))?;
                    }
                    if version <= 3 {
                        c.execute_batch(SCHEMA_4_ADDITIONS)
                            .map_err(self.err("migrate schema to 4"))?;
                    }
                    if version <= 4 {
                        c.execute_batch(SCHEMA_5_ADDITIONS)
                            .map_err(self.err("migrate schema to 5"))?;
                    }
                    if version <= 5 {
                        c.execute_batch(SCHEMA_6_ADDITIONS)
                            .map_err(self.err("migrate schema to 6"))?;
                    }
                    c.execute_batch(SCHEMA_7_ADDITIONS)
                        .map_err(self.err("migrate schema to 7"))?;
                    c.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
                        .map_err(self.err("migrate schema"))?;
                    log::info!(
                        "journal {}: schema migrated from version {version} to {SCHEMA_VERSION}",
                        self.path.display()
                    );
                    Ok(())
                }
                SCHEMA_VERSION => Ok(()),
                found => Err(JournalError::UnsupportedVersion {
                    path: self.path.clone(),
                    found,
                    supported: SCHEMA_VERSION,
                }),
            }
        })();
        match outcome {
            Ok(()) => c.execute_batch("COMMIT").map_err(self.err("create schema")),
            Err(e) => {
                let _ = c.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// The file this journal lives in (`:memory:` for an in-memory one).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Apply `records` in order, in ONE transaction (group commit): when
    /// this returns `Ok`, all of them are durable (see [`SyncMode`]); on
    /// `Err` none of them is, and the journal is still usable.
    ///
    /// The router appends each [`Batch`](emq_router_core::journal::Batch)
    /// the core emits (through [`JournalStore::append`](emq_router_core::journal::JournalStore::append))
    /// and reports the outcome to the core, which sends the acks of the
    /// batch's accepted jobs only after `Ok`.
    ///
    /// An `Accepted` for a msgid already unfinished replaces the job's
    /// fields and keeps its place in the acceptance order. `Completed`,
    /// `DeadLettered` and `Attempt` for an unknown msgid, and
    /// `DeleteSchedule` for an unknown id, are ignored. A dead letter's
    /// time is the time of the append.
    pub fn append(&mut self, records: &[Record]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let plan = self.rows.plan(records);
        let path = &self.path;
        let err = |e| JournalError::sqlite(path, "append", e);
        let tx = self.conn.transaction().map_err(err)?;
        plan.write(&mut SqliteWriter { tx: &tx }, now_unix_ms())
            .map_err(err)?;
        tx.commit().map_err(err)?;
        // Only now: a failed batch leaves the index as the database is.
        self.rows.commit(plan);
        self.batches += 1;
        self.records += records.len() as u64;
        Ok(())
    }

    /// Every accepted job not yet completed or dead-lettered, in acceptance
    /// order. Called once at startup to queue them again.
    pub fn load_unfinished(&self) -> Result<Vec<JobRecord>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT msgid, client, queue, route, headers, message, attempts, accepted_at,
                        run_at
                 FROM jobs ORDER BY seq",
            )
            .map_err(self.err("load unfinished jobs"))?;
        let jobs = stmt
            .query_map([], job_from_row)
            .and_then(|rows| rows.collect())
            .map_err(self.err("load unfinished jobs"))?;
        Ok(jobs)
    }

    /// Finished jobs kept for lookups, oldest first.
    pub fn finished(&self) -> Result<Vec<FinishedRecord>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT msgid, client, queue, route, headers, message, attempts, accepted_at,
                        run_at, outcome, finished_at, result, result_truncated, started_at
                 FROM finished ORDER BY seq",
            )
            .map_err(self.err("load finished jobs"))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(FinishedRecord {
                    job: job_from_row(r)?,
                    outcome: r.get(9)?,
                    started_at_unix_ms: r.get::<_, Option<i64>>(13)?.map(unix_ms_from_column),
                    finished_at_unix_ms: unix_ms_from_column(r.get(10)?),
                    result: r.get(11)?,
                    result_truncated: r.get(12)?,
                })
            })
            .and_then(|rows| rows.collect())
            .map_err(self.err("load finished jobs"))?;
        Ok(rows)
    }

    /// Results held until delivered, oldest first.
    pub fn results(&self) -> Result<Vec<ResultRecord>> {
        let err = self.err("load held results");
        let mut stmt = self
            .conn
            .prepare(
                "SELECT msgid, client, status, payload, receipt, held_at
                 FROM results ORDER BY seq",
            )
            .map_err(&err)?;
        let rows = stmt
            .query_map([], |r| {
                let status: String = r.get(2)?;
                Ok(ResultRecord {
                    msgid: r.get(0)?,
                    client: r.get(1)?,
                    status: if status == "failed" {
                        ResultStatus::Failed
                    } else {
                        ResultStatus::Ok
                    },
                    payload: r.get(3)?,
                    receipt: r.get(4)?,
                    held_at_unix_ms: unix_ms_from_column(r.get(5)?),
                })
            })
            .and_then(|rows| rows.collect())
            .map_err(&err)?;
        Ok(rows)
    }

    /// Paused queues.
    pub fn paused_queues(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT queue FROM paused_queues ORDER BY queue")
            .map_err(self.err("load paused queues"))?;
        let rows = stmt
            .query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(self.err("load paused queues"))?;
        Ok(rows)
    }

    /// Dead-lettered jobs, oldest first.
    pub fn dead_letters(&self) -> Result<Vec<DeadLetterRecord>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT msgid, client, queue, route, headers, message, attempts, accepted_at,
                        NULL, error, dead_at, last_error
                 FROM dead_letters ORDER BY seq",
            )
            .map_err(self.err("load dead letters"))?;
        let letters = stmt
            .query_map([], |r| {
                Ok(DeadLetterRecord {
                    job: job_from_row(r)?,
                    reason: r.get(9)?,
                    error: r.get(11)?,
                    dead_at_unix_ms: unix_ms_from_column(r.get(10)?),
                })
            })
            .and_then(|rows| rows.collect())
            .map_err(self.err("load dead letters"))?;
        Ok(letters)
    }

    /// Keep only the newest `keep` dead letters; returns how many were
    /// deleted. Dead letters are the only rows that are never deleted by
    /// the job life cycle, so call this (with a generous limit) to keep
    /// the file bounded.
    pub fn trim_dead_letters(&mut self, keep: usize) -> Result<usize> {
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        self.conn
            .execute(
                "DELETE FROM dead_letters WHERE seq NOT IN
                 (SELECT seq FROM dead_letters ORDER BY seq DESC LIMIT ?1)",
                params![keep],
            )
            .map_err(self.err("trim dead letters"))
    }

    /// Create or replace a schedule (its own transaction; inside a batch use
    /// [`Record::PutSchedule`]).
    pub fn put_schedule(&mut self, id: &str, blob: &[u8]) -> Result<()> {
        self.append(&[Record::PutSchedule {
            id: id.to_string(),
            blob: blob.to_vec(),
        }])
    }

    /// Remove a schedule; `Ok(false)` if there was none with that id.
    pub fn delete_schedule(&mut self, id: &str) -> Result<bool> {
        let n = self
            .conn
            .execute(DELETE_SCHEDULE, params![id])
            .map_err(self.err("delete schedule"))?;
        Ok(n > 0)
    }

    /// Every schedule, ordered by id.
    pub fn schedules(&self) -> Result<Vec<(String, Vec<u8>)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, blob FROM schedules ORDER BY id")
            .map_err(self.err("load schedules"))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(self.err("load schedules"))?;
        Ok(rows)
    }

    /// Every piece of other router state (`Record::PutState`), ordered by
    /// kind and id; rows of a kind this build does not know are skipped
    /// (logged).
    pub fn states(&self) -> Result<Vec<(StateKind, String, Vec<u8>)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT kind, id, blob FROM states ORDER BY kind, id")
            .map_err(self.err("load states"))?;
        let rows: Vec<(String, String, Vec<u8>)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .and_then(|rows| rows.collect())
            .map_err(self.err("load states"))?;
        Ok(known_states(rows))
    }

    /// One schedule by id.
    pub fn schedule(&self, id: &str) -> Result<Option<Vec<u8>>> {
        self.conn
            .query_row("SELECT blob FROM schedules WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(self.err("load schedule"))
    }

    /// Completed jobs are deleted when their `Completed` record is appended, so
    /// the database holds only unfinished jobs, dead letters and schedules.
    /// `compact` additionally copies the WAL into the database and truncates
    /// it, and returns free pages to the file system. Cheap enough to call
    /// every few minutes or when the router is idle.
    pub fn compact(&mut self) -> Result<()> {
        // The pragma frees one page per step: run it to the end.
        {
            let mut stmt = self
                .conn
                .prepare("PRAGMA incremental_vacuum")
                .map_err(self.err("compact"))?;
            let mut rows = stmt.query([]).map_err(self.err("compact"))?;
            while rows.next().map_err(self.err("compact"))?.is_some() {}
        }
        if self.path != Path::new(":memory:") {
            // Returns (busy, wal pages, checkpointed pages).
            let busy: i64 = self
                .conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
                .map_err(self.err("compact"))?;
            if busy != 0 {
                log::warn!(
                    "journal {}: WAL checkpoint could not complete",
                    self.path.display()
                );
            }
        }
        Ok(())
    }

    /// Counts and file sizes.
    pub fn stats(&self) -> Result<JournalStats> {
        let count = |sql: &str| -> Result<u64> {
            self.conn
                .query_row(sql, [], |r| r.get::<_, i64>(0))
                .map(|n| n.max(0) as u64)
                .map_err(self.err("stats"))
        };
        let size = |p: &Path| fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let mut wal = self.path.clone().into_os_string();
        wal.push("-wal");
        Ok(JournalStats {
            unfinished: count("SELECT count(*) FROM jobs")?,
            dead_letters: count("SELECT count(*) FROM dead_letters")?,
            schedules: count("SELECT count(*) FROM schedules")?,
            results: count("SELECT count(*) FROM results")?,
            file_bytes: size(&self.path),
            wal_bytes: size(Path::new(&wal)),
            batches_appended: self.batches,
            records_appended: self.records,
        })
    }
}

/// The SQLite side of a plan (`plan.rs`): one cached prepared statement
/// per group, executed once per row, inside the caller's transaction.
struct SqliteWriter<'a, 'c> {
    tx: &'a rusqlite::Transaction<'c>,
}

impl RowWriter for SqliteWriter<'_, '_> {
    type Error = rusqlite::Error;

    fn insert_jobs(&mut self, jobs: &JobColumns<'_>) -> rusqlite::Result<()> {
        let mut s = self.tx.prepare_cached(INSERT_JOB)?;
        insert_jobs(&mut s, jobs, |_, _| Ok(()))
    }

    fn replace_job(&mut self, seq: i64, job: &JobRecord) -> rusqlite::Result<()> {
        self.tx.prepare_cached(REPLACE_JOB)?.execute(params![
            seq,
            job.client,
            job.queue,
            route_column(job),
            headers_column(&job.headers),
            job.payload,
            attempts_column(job.attempts),
            unix_ms_column(job.accepted_at_unix_ms),
            job.run_at_unix_ms.map(unix_ms_column)
        ])?;
        Ok(())
    }

    fn set_attempts(&mut self, seq: i64, attempts: i32) -> rusqlite::Result<()> {
        self.tx
            .prepare_cached(UPDATE_ATTEMPTS)?
            .execute(params![seq, attempts])?;
        Ok(())
    }

    fn move_to_dead(&mut self, m: &DeadMove<'_>, dead_at: i64) -> rusqlite::Result<()> {
        self.tx
            .prepare_cached(MOVE_TO_DEAD)?
            .execute(params![m.job_seq, m.seq, m.reason, dead_at, m.error])?;
        Ok(())
    }

    fn remove_dead(&mut self, msgid: &str) -> rusqlite::Result<()> {
        self.tx
            .prepare_cached(DELETE_DEAD)?
            .execute(params![msgid])?;
        Ok(())
    }

    fn delete_jobs(&mut self, seqs: &[i64]) -> rusqlite::Result<()> {
        each_row(self.tx, DELETE_JOB, seqs)
    }

    fn insert_finished(&mut self, f: &FinishedColumns<'_>) -> rusqlite::Result<()> {
        let mut s = self.tx.prepare_cached(INSERT_FINISHED)?;
        insert_jobs(&mut s, &f.job, |s, i| {
            s.raw_bind_parameter(11, f.outcome[i])?;
            s.raw_bind_parameter(12, f.finished_at[i])?;
            s.raw_bind_parameter(13, f.result[i])?;
            s.raw_bind_parameter(14, f.result_truncated[i])?;
            s.raw_bind_parameter(15, f.started_at[i])
        })
    }

    fn trim_finished(&mut self, at_or_below: i64, before: i64) -> rusqlite::Result<()> {
        self.tx
            .prepare_cached(TRIM_FINISHED_COUNT)?
            .execute(params![at_or_below])?;
        self.tx
            .prepare_cached(TRIM_FINISHED_AGE)?
            .execute(params![before])?;
        Ok(())
    }

    fn trim_dead(&mut self, keep: i64) -> rusqlite::Result<()> {
        self.tx.prepare_cached(TRIM_DEAD)?.execute(params![keep])?;
        Ok(())
    }

    fn other(&mut self, change: &Other<'_>) -> rusqlite::Result<()> {
        let (sql, args): (&str, &[&dyn rusqlite::ToSql]) = match change {
            Other::PutSchedule { id, blob } => (PUT_SCHEDULE, &[id, blob]),
            Other::DeleteSchedule { id } => (DELETE_SCHEDULE, &[id]),
            Other::PutState { kind, id, blob } => (PUT_STATE, &[&kind.as_str(), id, blob]),
            Other::DeleteState { kind, id } => (DELETE_STATE, &[&kind.as_str(), id]),
            Other::Pause { queue } => (PAUSE_QUEUE, &[queue]),
            Other::Resume { queue } => (RESUME_QUEUE, &[queue]),
        };
        self.tx.prepare_cached(sql)?.execute(args)?;
        Ok(())
    }

    fn insert_results(&mut self, r: &ResultColumns<'_>) -> rusqlite::Result<()> {
        let mut s = self.tx.prepare_cached(INSERT_RESULT)?;
        for i in 0..r.seq.len() {
            s.execute(params![
                r.seq[i],
                r.msgid[i],
                r.client[i],
                r.status[i],
                r.payload[i],
                r.receipt[i],
                r.held_at[i]
            ])?;
        }
        Ok(())
    }

    fn delete_results(&mut self, seqs: &[i64]) -> rusqlite::Result<()> {
        each_row(self.tx, DELETE_RESULT, seqs)
    }

    fn probe(&mut self) -> rusqlite::Result<()> {
        self.tx.execute_batch(PROBE)
    }
}

/// `sql` (one `?1`) once for each of `seqs`.
fn each_row(tx: &rusqlite::Transaction<'_>, sql: &str, seqs: &[i64]) -> rusqlite::Result<()> {
    let mut s = tx.prepare_cached(sql)?;
    for seq in seqs {
        s.execute(params![seq])?;
    }
    Ok(())
}

/// One row per job of `j` through `s` (`INSERT_JOB`, or `INSERT_FINISHED`
/// with `more` binding the row's other columns after the job's ten).
fn insert_jobs(
    s: &mut rusqlite::CachedStatement<'_>,
    j: &JobColumns<'_>,
    more: impl Fn(&mut rusqlite::CachedStatement<'_>, usize) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    for i in 0..j.len() {
        s.raw_bind_parameter(1, j.seq[i])?;
        s.raw_bind_parameter(2, j.msgid[i])?;
        s.raw_bind_parameter(3, j.client[i])?;
        s.raw_bind_parameter(4, j.queue[i])?;
        s.raw_bind_parameter(5, j.route[i])?;
        s.raw_bind_parameter(6, headers_column(j.headers[i]))?;
        s.raw_bind_parameter(7, j.message[i])?;
        s.raw_bind_parameter(8, j.attempts[i])?;
        s.raw_bind_parameter(9, j.accepted_at[i])?;
        s.raw_bind_parameter(10, j.run_at[i])?;
        more(s, i)?;
        s.raw_execute()?;
    }
    Ok(())
}
