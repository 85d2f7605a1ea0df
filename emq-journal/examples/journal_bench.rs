//! Micro-benchmark of the journal: the life cycle of a job (Accepted, then
//! Completed) with batches of 1, 100, 1000 and 10000 jobs, and the start
//! of a router with a backlog. Batches are appended as the router appends
//! the core's: `JournalStore::append`, one transaction each.
//!
//! `cargo run --release -p emq-journal --example journal_bench [DIR] [JOBS]`
//! (DIR defaults to the system temp dir; JOBS per run to 100000; batch size
//! 1 uses JOBS/10).

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Instant;

use emq_journal::{JournalOptions, SqliteJournal, SyncMode};
use emq_router_core::journal::{
    Batch, BatchId, FinishedRecord, JobRecord, JournalStore, Record, ResultRecord,
};
use emqp_proto::ResultStatus;

fn job(i: u64) -> JobRecord {
    JobRecord {
        msgid: format!(
            "{i:08x}-6f1c-4b7e-9a3d-{:012x}",
            i.wrapping_mul(0x9e37_79b9)
        ),
        client: b"3c7e1f0a-client-identity".to_vec(),
        queue: "default".into(),
        route: "default".into(),
        headers: b"reply-requested,guarantee".to_vec(),
        payload: br#"["call",{"handler":"echo","args":[1,2,3]}]"#.to_vec(),
        attempts: 0,
        accepted_at_unix_ms: 1_700_000_000_000 + i,
        run_at_unix_ms: None,
    }
}

/// Each iteration appends one batch: `batch` new jobs accepted, and the
/// jobs of the previous batch completed (as a router under steady load).
fn run(journal: &mut SqliteJournal, batch: u64, jobs: u64) -> f64 {
    let mut next = 0u64;
    let mut id = 0u64;
    let mut prev: Vec<String> = Vec::new();
    let mut append = |records: Vec<Record>| {
        id += 1;
        let batch = Batch {
            id: BatchId(id),
            records,
        };
        JournalStore::append(journal, &batch).expect("append");
    };
    let t = Instant::now();
    while next < jobs {
        let mut records: Vec<Record> = Vec::with_capacity(2 * batch as usize);
        let mut this = Vec::with_capacity(batch as usize);
        for _ in 0..batch {
            let j = job(next);
            next += 1;
            this.push(j.msgid.clone());
            records.push(Record::Accepted(j));
        }
        records.extend(prev.drain(..).map(|msgid| Record::Completed { msgid }));
        append(records);
        prev = this;
    }
    append(
        prev.drain(..)
            .map(|msgid| Record::Completed { msgid })
            .collect(),
    );
    t.elapsed().as_secs_f64()
}

/// Bytes this process has written so far (`wchar` of /proc/self/io).
fn written() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("wchar: ").and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

/// The records of a `reply-requested` job's life in a router under load
/// (what `scripts/bench.sh` makes): `Accepted` in batch k, its `Finished`
/// and `ResultHeld` in batch k + 2 (dispatched once k committed, run,
/// REPLY back), `ResultReleased` in batch k + 3 (the RESULT left once k + 2
/// committed). Returns (seconds, bytes written).
fn run_router(journal: &mut SqliteJournal, batch: u64, jobs: u64) -> (f64, u64) {
    let mut id = 0u64;
    let mut next = 0u64;
    let mut accepted: Vec<Vec<JobRecord>> = Vec::new();
    let (t, w, c) = (Instant::now(), written(), cpu());
    while next < jobs + 3 * batch {
        let mut records = Vec::with_capacity(4 * batch as usize);
        let mut this = Vec::new();
        for _ in 0..batch {
            let j = job(next);
            next += 1;
            records.push(Record::Accepted(j.clone()));
            this.push(j);
        }
        let k = accepted.len();
        if k >= 2 {
            for j in &accepted[k - 2] {
                records.push(Record::Finished {
                    record: FinishedRecord {
                        job: j.clone(),
                        outcome: "done".into(),
                        started_at_unix_ms: Some(j.accepted_at_unix_ms + 1),
                        finished_at_unix_ms: j.accepted_at_unix_ms + 2,
                        result: Some(br#"{"value": null}"#.to_vec()),
                        result_truncated: false,
                    },
                    keep: 10_000,
                    drop_before_unix_ms: 1_600_000_000_000,
                });
                records.push(Record::ResultHeld(ResultRecord {
                    msgid: j.msgid.clone(),
                    client: j.client.clone(),
                    status: ResultStatus::Ok,
                    payload: br#"{"value": null}"#.to_vec(),
                    receipt: false,
                    held_at_unix_ms: j.accepted_at_unix_ms + 2,
                }));
            }
        }
        if k >= 3 {
            for j in &accepted[k - 3] {
                records.push(Record::ResultReleased {
                    msgid: j.msgid.clone(),
                });
            }
        }
        accepted.push(this);
        id += 1;
        JournalStore::append(
            journal,
            &Batch {
                id: BatchId(id),
                records,
            },
        )
        .expect("append");
    }
    let _ = t;
    (cpu() - c, written() - w)
}

/// CPU seconds of this thread (utime + stime from /proc/thread-self/stat).
fn cpu() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let after = s.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().map(PathBuf::from).unwrap_or_else(|| {
        std::env::temp_dir().join(format!("emq-journal-bench-{}", std::process::id()))
    });
    let jobs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    std::fs::create_dir_all(&dir).expect("create bench dir");
    println!("journal bench in {} ({jobs} jobs per run)", dir.display());
    if std::env::var_os("EMQ_JOURNAL_BENCH_ROUTER").is_some() {
        // Only the router's life cycle (4 records per job), by batch size.
        let sizes: Vec<u64> = std::env::var("EMQ_JOURNAL_BENCH_BATCHES")
            .ok()
            .map(|v| v.split(',').filter_map(|n| n.parse().ok()).collect())
            .unwrap_or_else(|| vec![8, 16, 32, 64, 128, 256]);
        for batch in sizes {
            let path = dir.join(format!("bench-router-{batch}.sqlite"));
            let mut j = SqliteJournal::open(&path).expect("open");
            let (secs, bytes) = run_router(&mut j, batch, jobs);
            let n = jobs + 3 * batch;
            println!(
                "router life cycle, {batch:>3} jobs per batch: {:>6.2} us/job, {:>6.0} bytes written/job",
                secs * 1e6 / n as f64,
                bytes as f64 / n as f64
            );
            drop(j);
            let _ = std::fs::remove_file(&path);
        }
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    for sync in [SyncMode::Normal, SyncMode::Full] {
        for batch in [1u64, 100, 1000, 10_000] {
            let path = dir.join(format!("bench-{sync:?}-{batch}.sqlite"));
            let _ = std::fs::remove_file(&path);
            let options = JournalOptions {
                sync,
                integrity_check: true,
            };
            let mut j = SqliteJournal::open_with(&path, &options).expect("open");
            let n = if batch == 1 { jobs / 10 } else { jobs };
            let n = if sync == SyncMode::Full && batch == 1 {
                n / 10
            } else {
                n
            };
            let secs = run(&mut j, batch, n);
            println!(
                "sync={sync:?} batch={batch:>5}: {n:>7} jobs (2 records each) in {secs:>7.3}s = {:>9.0} jobs/s, {:>9.0} records/s, {:>8.1} us/batch",
                n as f64 / secs,
                2.0 * n as f64 / secs,
                secs * 1e6 / (n as f64 / batch as f64)
            );
            drop(j);
            let _ = std::fs::remove_file(&path);
        }
    }
    // Startup with a backlog: open (header check + quick_check) and load.
    let path = dir.join("bench-backlog.sqlite");
    let _ = std::fs::remove_file(&path);
    {
        let mut j = SqliteJournal::open(&path).expect("open");
        let records: Vec<Record> = (0..jobs).map(|n| Record::Accepted(job(n))).collect();
        for chunk in records.chunks(10_000) {
            j.append(chunk).expect("append");
        }
    }
    let t = Instant::now();
    let j = SqliteJournal::open(&path).expect("open");
    let opened = t.elapsed();
    let loaded = j.load_unfinished().expect("load");
    println!(
        "startup with {} unfinished jobs: open+quick_check {:?}, load_unfinished {:?}, file {} bytes",
        loaded.len(),
        opened,
        t.elapsed() - opened,
        j.stats().expect("stats").file_bytes
    );
    drop(j);
    let _ = std::fs::remove_dir_all(&dir);
}
