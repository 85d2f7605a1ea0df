//! The job manager's credit window (`--prefetch`), with real processes: our
//! router and two of our job managers on loopback. Short jobs open the
//! window (the router then counts more credit than the job managers have
//! slots); a long job among many short ones holds none of them back; the
//! window never hoards: a burst of long jobs after a run of short ones
//! spreads over both job managers, and a burst of 1,000 jobs of 100 ms
//! keeps every slot of both busy from the start to an ideal makespan.

use std::time::{Duration, Instant};

use integration_tests::admin;
use integration_tests::cluster::{start_jobmanager, start_router};
use integration_tests::{jobs, Client, Proc};
use serde_json::json;

const LONG_SECS: u64 = 5;
const SHORT_JOBS: usize = 300;

/// The tests of this file measure makespans and waits: one at a time (on
/// a 2-core machine another test's job managers and their Python workers
/// would take the CPU their router and job managers need).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Two job managers of `slots` slots each, with the default credit window.
fn two_job_managers(slots: usize) -> (Proc, integration_tests::Addrs, Proc, Proc) {
    let (router, addrs) = start_router(&["--journal", "none"]);
    let n = slots.to_string();
    let a = start_jobmanager(
        "jm-a",
        &addrs.backend,
        &["--concurrency", &n, "--prefetch", "auto"],
    );
    let b = start_jobmanager(
        "jm-b",
        &addrs.backend,
        &["--concurrency", &n, "--prefetch", "auto"],
    );
    admin::wait_idle_workers(&addrs.admin, 2, 2 * slots as i64, Duration::from_secs(20))
        .expect("both job managers register with their slots");
    (router, addrs, a, b)
}

/// Many no-op jobs: the job managers measure them short.
fn warm_up(client: &mut Client, n: usize) {
    let ids: Vec<String> = (0..n)
        .map(|_| client.submit_reply("default", jobs::call("noop", json!(null))))
        .collect();
    client
        .wait_finished(&ids, Duration::from_secs(30))
        .expect("warm-up jobs finish");
}

/// One long shell job, then many short ones; every short one must be done
/// well before the long one, and the long one must still be running then.
fn long_then_short(client: &mut Client) {
    let t0 = Instant::now();
    let long = client.submit_reply("default", jobs::shell(&["sleep", &LONG_SECS.to_string()]));
    let shorts: Vec<String> = (0..SHORT_JOBS)
        .map(|i| client.submit_reply("default", jobs::call("echo", json!(i))))
        .collect();
    let limit = Duration::from_secs(LONG_SECS - 2);
    if let Err(left) = client.wait_finished(&shorts, limit) {
        panic!(
            "{} of {SHORT_JOBS} short jobs were not done {limit:?} after a {LONG_SECS} s job \
             was submitted ahead of them (held behind it?)",
            left.len()
        );
    }
    let shorts_done = t0.elapsed();
    assert!(
        !client.finished(&long),
        "the long job finished before the short ones ({shorts_done:?})"
    );
    for id in &shorts {
        assert_eq!(client.results[id].len(), 1, "one result for {id}");
    }
    client
        .wait_finished(
            std::slice::from_ref(&long),
            Duration::from_secs(LONG_SECS + 20),
        )
        .expect("the long job finishes too");
    eprintln!(
        "[credit-window] {SHORT_JOBS} short jobs done after {shorts_done:?}, the long one after {:?}",
        t0.elapsed()
    );
}

#[test]
fn short_jobs_open_the_window_and_a_long_job_holds_none_of_them_back() {
    let _one = one_at_a_time();
    let (_router, addrs, mut a, mut b) = two_job_managers(2);
    let mut client = Client::connect(&addrs.frontend);
    warm_up(&mut client, 500);
    // No-op jobs are short next to the round trip: each job manager
    // announces credit beyond its 2 slots (one job: the window never
    // hoards).
    let views = admin::wait_workers(&addrs.admin, Duration::from_secs(10), |w| {
        w.len() == 2 && w.iter().all(|x| x.available_slots == 3)
    })
    .expect("the window opened on both job managers");
    eprintln!(
        "[credit-window] credit as the router counts it: {:?}",
        views.iter().map(|w| w.available_slots).collect::<Vec<_>>()
    );
    long_then_short(&mut client);
    assert!(a.is_running(), "{}", a.tail(20));
    assert!(b.is_running(), "{}", b.tail(20));
}

#[test]
fn with_one_slot_each_there_is_no_window_and_the_long_job_holds_nothing_back() {
    let _one = one_at_a_time();
    let (_router, addrs, _a, _b) = two_job_managers(1);
    let mut client = Client::connect(&addrs.frontend);
    warm_up(&mut client, 300);
    // One slot: the adaptive window keeps a slot for jobs held behind a
    // long one, and has none to keep; so no credit beyond the slot.
    let views = admin::workers(&addrs.admin).expect("workers");
    assert!(views.iter().all(|w| w.available_slots <= 1), "{views:?}");
    long_then_short(&mut client);
}

/// `n` jobs that sleep `secs` on their slot (the `sleep` built-in).
fn sleeps(client: &mut Client, n: usize, secs: f64) -> Vec<String> {
    (0..n)
        .map(|_| client.submit_reply("default", jobs::call("sleep", json!(secs))))
        .collect()
}

/// How long after `t0` every one of `workers` job managers had all its
/// `slots` in flight (as the router counts them), polling the admin socket.
fn all_busy_after(admin_ep: &str, t0: Instant, workers: usize, slots: i64) -> Duration {
    let mut polls = 0;
    loop {
        let w = admin::workers(admin_ep).expect("workers");
        let busy = w
            .iter()
            .filter(|x| x.raw["inflight"].as_i64().unwrap_or(0) >= slots)
            .count();
        if w.len() == workers && busy == workers {
            return t0.elapsed();
        }
        polls += 1;
        assert!(
            polls < 2000 && t0.elapsed() < Duration::from_secs(5),
            "not every job manager was busy 5 s after the burst: {w:?}"
        );
    }
}

/// A job manager with the default credit window that runs no Python job:
/// its `--python` exits at once. Otherwise each of its slots starts a
/// Python interpreter when it starts (20 for two 10-slot job managers, a
/// few tenths of a second of CPU each): on a loaded 2-core machine that
/// takes the CPU the router and the job managers need while the burst is
/// measured.
fn job_manager(name: &str, backend: &str, slots: usize) -> Proc {
    integration_tests::Spawn::new(
        name,
        integration_tests::bins::bin(integration_tests::bins::JOBMANAGER),
    )
    .args([
        "--broker",
        backend,
        "--python",
        "false",
        "--prefetch",
        "auto",
    ])
    .args(["--concurrency", &slots.to_string()])
    .spawn()
}

/// Job manager `a` alone runs many no-op jobs (its window opens), then `b`
/// joins, idle and fresh; then a burst of long jobs.
fn warmed_and_fresh(slots: usize) -> (Proc, integration_tests::Addrs, Proc, Proc, Client) {
    let (router, addrs) = start_router(&["--journal", "none"]);
    let a = job_manager("jm-a", &addrs.backend, slots);
    admin::wait_idle_workers(&addrs.admin, 1, slots as i64, Duration::from_secs(20))
        .expect("job manager a registers with its slots");
    let mut client = Client::connect(&addrs.frontend);
    warm_up(&mut client, 500);
    let credit = admin::workers(&addrs.admin).expect("workers")[0].available_slots;
    eprintln!(
        "[credit-window] after 500 no-op jobs, {slots}-slot job manager a has credit {credit}"
    );
    let most = 2 * slots as i64 - 1;
    assert!(
        credit <= most,
        "a {slots}-slot job manager announces at most {most} READYs (slots + slots - 1), \
         not {credit}"
    );
    let b = job_manager("jm-b", &addrs.backend, slots);
    admin::wait_workers(&addrs.admin, Duration::from_secs(20), |w| w.len() == 2)
        .expect("job manager b registers");
    (router, addrs, a, b, client)
}

#[test]
fn a_burst_of_long_jobs_after_short_ones_does_not_queue_behind_the_first_job_manager() {
    let _one = one_at_a_time();
    // 2 + 2 slots, 20 jobs of 250 ms: ideal makespan 5 rounds, 1.25 s.
    // A hoarding window (128 READYs on a, 2 on b) would run 18 of them
    // on a, 9 rounds: 2.25 s.
    let (_router, addrs, mut a, mut b, mut client) = warmed_and_fresh(2);
    let (n, secs) = (20, 0.25);
    let ideal = Duration::from_secs_f64((n as f64 / 4.0).ceil() * secs);
    let t0 = Instant::now();
    let ids = sleeps(&mut client, n, secs);
    let busy = all_busy_after(&addrs.admin, t0, 2, 2);
    client
        .wait_finished(&ids, Duration::from_secs(30))
        .expect("the burst finishes");
    let makespan = t0.elapsed();
    eprintln!(
        "[credit-window] {n} jobs of {secs} s on 2 x 2 slots: every slot busy after {busy:?}, \
         makespan {makespan:?} (ideal {ideal:?}, {:.1} %)",
        100.0 * makespan.as_secs_f64() / ideal.as_secs_f64()
    );
    assert!(
        makespan.as_secs_f64() <= ideal.as_secs_f64() * 1.1,
        "makespan {makespan:?} is more than 10 % above the ideal {ideal:?}: jobs waited \
         behind job manager a while b idled"
    );
    assert!(a.is_running(), "{}", a.tail(20));
    assert!(b.is_running(), "{}", b.tail(20));
}

#[test]
fn a_burst_of_1000_jobs_of_100_ms_keeps_both_job_managers_busy_to_an_ideal_makespan() {
    let _one = one_at_a_time();
    // 2 x 10 slots, 1,000 jobs of 100 ms: ideal 50 rounds, 5 s.
    let (_router, addrs, mut a, mut b, mut client) = warmed_and_fresh(10);
    let (n, secs) = (1000, 0.1);
    let ideal = Duration::from_secs_f64((n as f64 / 20.0).ceil() * secs);
    let t0 = Instant::now();
    let ids = sleeps(&mut client, n, secs);
    let submitted = t0.elapsed();
    let busy = all_busy_after(&addrs.admin, t0, 2, 10);
    client
        .wait_finished(&ids, Duration::from_secs(60))
        .expect("the burst finishes");
    let makespan = t0.elapsed();
    eprintln!(
        "[credit-window] {n} jobs of {secs} s on 2 x 10 slots: submitted in {submitted:?}, \
         every slot busy after {busy:?}, makespan {makespan:?} (ideal {ideal:?}, {:.1} %)",
        100.0 * makespan.as_secs_f64() / ideal.as_secs_f64()
    );
    assert!(
        makespan.as_secs_f64() <= ideal.as_secs_f64() * 1.1,
        "makespan {makespan:?} is more than 10 % above the ideal {ideal:?}"
    );
    for id in &ids {
        assert_eq!(client.results[id].len(), 1, "one result for {id}");
    }
    assert!(a.is_running(), "{}", a.tail(20));
    assert!(b.is_running(), "{}", b.tail(20));
}
