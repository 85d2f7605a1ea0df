//! Crash safety: a child process (this test binary re-invoked with an env
//! var) appends batches in a tight loop, as the router does
//! (`JournalStore::append`), and prints "committed N" after each append
//! returns; the parent SIGKILLs it mid-stream, reopens the journal
//! and checks that every reported batch is there, that every batch is all
//! or nothing, and that acceptance order held.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{accepted, completed, JournalPath, TempDir};
use emq_journal::SqliteJournal;
use emq_router_core::journal::{Batch, BatchId, JournalStore, Record};

const CHILD_ENV: &str = "EMQ_JOURNAL_CRASH_CHILD";
const JOBS_PER_BATCH: usize = 40;
/// The child stops by itself after this many batches or seconds, so a
/// parent that failed to kill it cannot leave it running.
const CHILD_MAX_BATCHES: u64 = 1_000_000;
const CHILD_MAX_SECS: u64 = 30;

fn msgid(batch: u64, k: usize) -> String {
    format!("b{batch:07}-k{k:02}")
}

/// Batch b accepts JOBS_PER_BATCH jobs and completes the even-numbered
/// jobs of batch b-1. So after a crash: odd jobs of every committed batch
/// are present; even jobs of batch b are present iff batch b+1 did not
/// commit.
fn batch_records(b: u64) -> Vec<Record> {
    let mut records: Vec<Record> = (0..JOBS_PER_BATCH)
        .map(|k| accepted(&msgid(b, k)))
        .collect();
    if b > 0 {
        for k in (0..JOBS_PER_BATCH).step_by(2) {
            records.push(completed(&msgid(b - 1, k)));
        }
    }
    records
}

/// The child's body; a no-op unless the env var names a journal path.
#[test]
fn crash_child_entry() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let mut j = SqliteJournal::open(&path).expect("child: open journal");
    let start = Instant::now();
    let mut out = std::io::stdout().lock();
    for b in 0..CHILD_MAX_BATCHES {
        if start.elapsed() > Duration::from_secs(CHILD_MAX_SECS) {
            break;
        }
        // As the router appends the core's batches.
        let batch = Batch {
            id: BatchId(b + 1),
            records: batch_records(b),
        };
        JournalStore::append(&mut j, &batch).expect("child: append");
        // Reported only once append has returned.
        writeln!(out, "committed {b}").expect("child: stdout");
        out.flush().expect("child: flush");
    }
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run_and_kill(path: &std::path::Path, kill_after_batches: u64) -> BTreeSet<u64> {
    let exe = std::env::current_exe().unwrap();
    let child = Command::new(exe)
        .args([
            "crash_child_entry",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<u64>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // The harness may print "test crash_child_entry ... " before
            // the first line on the same line.
            if let Some(n) = line.rfind("committed ").map(|i| &line[i + 10..]) {
                if let Ok(n) = n.trim().parse::<u64>() {
                    // Keep draining even if the parent stopped listening.
                    let _ = tx.send(n);
                }
            }
        }
    });
    let mut reported = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while (reported.len() as u64) < kill_after_batches && Instant::now() < deadline {
        if let Ok(n) = rx.recv_timeout(Duration::from_millis(100)) {
            reported.insert(n);
        }
    }
    assert!(
        reported.len() as u64 >= kill_after_batches,
        "child reported only {} batches in time",
        reported.len()
    );
    // SIGKILL (Child::kill on Unix), in the middle of the append loop.
    child.0.kill().unwrap();
    let status = child.0.wait().unwrap();
    assert!(
        !status.success(),
        "child was killed, not finished: {status:?}"
    );
    reader.join().unwrap();
    // Everything printed before death is still in the pipe.
    reported.extend(rx.try_iter());
    reported
}

fn check(path: &std::path::Path, reported: &BTreeSet<u64>) -> u64 {
    let j = SqliteJournal::open(path).expect("journal opens after SIGKILL");
    let jobs = j.load_unfinished().unwrap();
    let mut present: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
    let mut last: Option<(u64, usize)> = None;
    for job in &jobs {
        let (b, k) = job
            .msgid
            .strip_prefix('b')
            .and_then(|s| s.split_once("-k"))
            .and_then(|(b, k)| Some((b.parse::<u64>().ok()?, k.parse::<usize>().ok()?)))
            .unwrap_or_else(|| panic!("unexpected msgid {}", job.msgid));
        if let Some(prev) = last {
            assert!(
                prev < (b, k),
                "acceptance order broken: {prev:?} then {b},{k}"
            );
        }
        last = Some((b, k));
        present.entry(b).or_default().insert(k);
    }
    let committed_max = present.keys().next_back().copied();
    let max_reported = reported.iter().next_back().copied().unwrap();
    let committed_max = committed_max.expect("journal has jobs");
    assert_eq!(
        reported.len() as u64,
        max_reported + 1,
        "child output should report batches 0..={max_reported}"
    );
    assert!(
        committed_max >= max_reported,
        "reported batch {max_reported} missing (journal ends at {committed_max})"
    );
    // At most the batch in flight at the kill is committed but unreported.
    assert!(committed_max <= max_reported + 1);
    let odd: BTreeSet<usize> = (1..JOBS_PER_BATCH).step_by(2).collect();
    let all: BTreeSet<usize> = (0..JOBS_PER_BATCH).collect();
    for b in 0..=committed_max {
        let got = present.get(&b).cloned().unwrap_or_default();
        let expected = if b == committed_max { &all } else { &odd };
        assert_eq!(
            &got, expected,
            "batch {b} is not all-or-nothing / completions wrong"
        );
    }
    committed_max
}

#[test]
fn sigkill_mid_append_loses_no_reported_batch() {
    // Kill at a few different points, each on a fresh journal.
    for kill_after in [25, 150, 400] {
        let dir = TempDir::new("crash");
        let path = dir.journal();
        let reported = run_and_kill(&path, kill_after);
        let committed = check(&path, &reported);
        println!(
            "child reported batches 0..={} before SIGKILL; journal holds batches 0..={committed}",
            reported.len() - 1
        );
    }
}
