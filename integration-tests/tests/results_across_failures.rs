//! Results until delivered, with real processes (issue 18): a
//! `reply-requested` job's RESULT survives a router crash and a failover
//! to a router on another address (same SQLite journal), and reaches the
//! client once per job.
//!
//! The client is the real `emq-sender` in bulk mode with `--wait`: it
//! prints one JSON line per job when that job's RESULT arrives (the first
//! one; the router may send a result again after a reconnect). Every
//! acknowledged job must be printed exactly once, with its own value.
//! Each test prints `submitted / completed / duplicated / lost` for the
//! printed results (and for the executions where jobs record them).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use integration_tests::admin::{self, sum_of};
use integration_tests::cluster::{start_jobmanager, start_router_on, FAST_HEARTBEAT};
use integration_tests::jobs::{self, Tally};
use integration_tests::process::scratch_dir;
use integration_tests::{bins, env_usize, poll_until, report, Addrs, Proc, Spawn};
use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// emq-sender, bulk, waiting for every result of `lines` (one job each).
fn start_sender(broker: &str, lines: &[Vec<u8>]) -> Proc {
    let mut input = Vec::new();
    for l in lines {
        input.extend_from_slice(l);
        input.push(b'\n');
    }
    Spawn::new("emq-sender", bins::bin(bins::SENDER))
        .args(["--broker", broker, "--wait", "--timeout", "120"])
        .stdin(input)
        .spawn()
}

/// The sender's output lines by msgid.
fn printed(sender: &Proc) -> HashMap<String, Vec<Value>> {
    let mut by: HashMap<String, Vec<Value>> = HashMap::new();
    for line in sender.stdout().lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(m) = v["msgid"].as_str() {
            by.entry(m.to_string()).or_default().push(v);
        }
    }
    by
}

/// Wait until the router's STATUS satisfies `ok`; the STATUS.
fn wait_status(admin_ep: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    poll_until(Duration::from_secs(60), Duration::from_millis(50), || {
        admin::status(admin_ep).ok().filter(|s| ok(s))
    })
    .unwrap_or_else(|| panic!("router never showed {what}: {:?}", admin::status(admin_ep)))
}

/// Check the sender's output: every job printed once, with its value
/// (`tag_of` finds the job's tag in its result). Returns the tally of
/// printed results.
fn check_output(sender: &mut Proc, tags: &[String], tag_of: fn(&Value) -> Option<&str>) -> Tally {
    let code = sender
        .wait_exit(Duration::from_secs(90))
        .and_then(|s| s.code());
    let out = printed(sender);
    let mut by_tag: HashMap<String, usize> = HashMap::new();
    for lines in out.values() {
        for v in lines {
            assert_eq!(v["status"], "ok", "{v}");
            let tag = tag_of(&v["result"]["value"])
                .unwrap_or_default()
                .to_string();
            *by_tag.entry(tag).or_default() += 1;
        }
    }
    let tally = Tally::of(tags, &by_tag);
    assert_eq!(
        code,
        Some(0),
        "emq-sender did not finish cleanly ({tally}); stderr:\n{}",
        sender.tail(20)
    );
    assert_eq!(out.len(), tags.len(), "one line per job: {tally}");
    tally
}

fn echo(tag: &str) -> Vec<u8> {
    jobs::call("echo", Value::from(tag))
}

/// Issue 18: the router is killed with SIGKILL after it produced results
/// that the client (SIGSTOPped, so reading nothing) has not received; a
/// router restarted on the same journal and address sends them, and the
/// client prints every job exactly once.
#[test]
fn results_held_for_a_paused_client_survive_a_router_kill_9() {
    let _s = serial();
    let n = env_usize("EMQ_RESULT_JOBS", 2000);
    let dir = scratch_dir("results-kill9");
    let journal = dir.join("router.journal").display().to_string();
    let addrs = Addrs::fresh();
    let mut extra = vec!["--journal", journal.as_str()];
    extra.extend(FAST_HEARTBEAT);
    let mut router = start_router_on(&addrs, &extra).expect("router starts");
    let tags: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
    let lines: Vec<Vec<u8>> = tags.iter().map(|t| echo(t)).collect();
    // No job manager yet: every job is accepted and buffered.
    let mut sender = start_sender(&addrs.frontend, &lines);
    wait_status(&addrs.admin, "every job buffered", |s| {
        sum_of(s, "waiting_messages_by_queue") == n as i64
    });
    sender.pause();
    let started = Instant::now();
    let mut jm_args = vec!["--concurrency", "4", "--ack-timeout", "1"];
    jm_args.extend(FAST_HEARTBEAT);
    let _jm = start_jobmanager("jm", &addrs.backend, &jm_args);
    let s = wait_status(&addrs.admin, "every result held", |s| {
        s["results"]["held"] == n && sum_of(s, "inflight_messages_by_queue") == 0
    });
    report(&format!(
        "  {n} jobs ran in {:?} while the client was stopped; router results: {}",
        started.elapsed(),
        s["results"]
    ));
    assert!(printed(&sender).is_empty(), "the client read nothing yet");
    let st = router.kill9();
    eprintln!("router killed ({st:?}) holding {n} undelivered results");
    drop(router);
    let mut router2 = start_router_on(&addrs, &extra).expect("router restarts on its journal");
    let restored = router2
        .wait_for_log_line("undelivered result(s)", Duration::from_secs(10))
        .expect("the restart log line");
    sender.resume();
    let tally = check_output(&mut sender, &tags, Value::as_str);
    let s = admin::status(&addrs.admin).expect("STATUS after the run");
    report(&format!(
        "FAULT results across a router kill -9 (client stopped, {n} results held): \
         printed results: {tally}; restart: {}; router results now: {}",
        restored.trim(),
        s["results"]
    ));
    assert_eq!((tally.lost, tally.duplicated), (0, 0), "{tally}");
    // Every result receipted: nothing left held.
    wait_status(&addrs.admin, "no result held", |s| {
        s["results"]["held"] == 0
    });
}

/// Issue 18: a sender and a job manager with two-address failover lists;
/// the router on the first address is killed mid-run and a router on the
/// second address takes over the same journal. Every acknowledged job's
/// result reaches the sender, once.
#[test]
fn a_sender_with_a_failover_list_gets_every_result_after_the_router_moves() {
    let _s = serial();
    let n = env_usize("EMQ_FAILOVER_JOBS", 300);
    let dir = scratch_dir("results-failover");
    let journal = dir.join("router.journal").display().to_string();
    let exec = dir.join("exec.txt");
    let (a, b) = (Addrs::fresh(), Addrs::fresh());
    let mut extra = vec!["--journal", journal.as_str()];
    extra.extend(FAST_HEARTBEAT);
    let mut router_a = start_router_on(&a, &extra).expect("router A starts");
    let tags: Vec<String> = (0..n).map(|i| format!("f{i}")).collect();
    // Shell jobs that record each execution and echo their tag.
    let lines: Vec<Vec<u8>> = tags
        .iter()
        .map(|t| {
            let script = "sleep 0.01; echo \"$1 $PPID\" >> \"$2\"; printf %s \"$1\"";
            jobs::shell(&["sh", "-c", script, "sh", t, &exec.display().to_string()])
        })
        .collect();
    let brokers = format!("{},{}", a.frontend, b.frontend);
    let mut sender = start_sender(&brokers, &lines);
    wait_status(&a.admin, "every job buffered", |s| {
        sum_of(s, "waiting_messages_by_queue") == n as i64
    });
    let backends = format!("{},{}", a.backend, b.backend);
    let mut jm_args = vec!["--concurrency", "4", "--ack-timeout", "1"];
    jm_args.extend(FAST_HEARTBEAT);
    let _jm = start_jobmanager("jm", &backends, &jm_args);
    let third = poll_until(Duration::from_secs(60), Duration::from_millis(20), || {
        (printed(&sender).len() >= n / 3).then_some(())
    });
    assert!(third.is_some(), "a third of the results did not arrive");
    let st = router_a.kill9();
    let at_kill = printed(&sender).len();
    eprintln!("router A killed ({st:?}) with {at_kill} of {n} results printed");
    drop(router_a);
    let started = Instant::now();
    let _router_b = start_router_on(&b, &extra).expect("router B takes over the journal");
    let tally = check_output(&mut sender, &tags, |v| v["stdout"].as_str());
    let executions = jobs::count_lines(&exec);
    let run_tally = Tally::of(&tags, &executions);
    let s = admin::status(&b.admin).expect("STATUS of router B");
    report(&format!(
        "FAULT failover to a router on another address (sender and job manager with \
         failover lists): {at_kill}/{n} results printed at the kill, the rest within {:?} of \
         router B's start; printed results: {tally}; executions: {run_tally}; router B \
         results: {}",
        started.elapsed(),
        s["results"]
    ));
    assert_eq!((tally.lost, tally.duplicated), (0, 0), "{tally}");
    assert_eq!(run_tally.lost, 0, "{run_tally}");
}
