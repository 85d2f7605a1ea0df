//! The job manager's credit window (`--prefetch`), with real processes: our
//! router and two of our job managers on loopback. Short jobs open the
//! window (the router then counts more free slots than the job managers
//! have); a long job among many short ones holds none of them back.

use std::time::{Duration, Instant};

use integration_tests::admin;
use integration_tests::cluster::{start_jobmanager, start_router};
use integration_tests::{jobs, Client, Proc};
use serde_json::json;

const LONG_SECS: u64 = 5;
const SHORT_JOBS: usize = 300;

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
    let (_router, addrs, mut a, mut b) = two_job_managers(2);
    let mut client = Client::connect(&addrs.frontend);
    warm_up(&mut client, 500);
    // No-op jobs are short next to the round trip: each job manager
    // announces credit beyond its 2 slots, which the router counts as free
    // slots.
    let views = admin::wait_workers(&addrs.admin, Duration::from_secs(10), |w| {
        w.len() == 2 && w.iter().all(|x| x.available_slots > 2)
    })
    .expect("the window opened on both job managers");
    eprintln!(
        "[credit-window] free slots as the router counts them: {:?}",
        views.iter().map(|w| w.available_slots).collect::<Vec<_>>()
    );
    long_then_short(&mut client);
    assert!(a.is_running(), "{}", a.tail(20));
    assert!(b.is_running(), "{}", b.tail(20));
}

#[test]
fn with_one_slot_each_there_is_no_window_and_the_long_job_holds_nothing_back() {
    let (_router, addrs, _a, _b) = two_job_managers(1);
    let mut client = Client::connect(&addrs.frontend);
    warm_up(&mut client, 300);
    // One slot: the adaptive window keeps a slot for jobs held behind a
    // long one, and has none to keep; so no credit beyond the slot.
    let views = admin::workers(&addrs.admin).expect("workers");
    assert!(views.iter().all(|w| w.available_slots <= 1), "{views:?}");
    long_then_short(&mut client);
}
