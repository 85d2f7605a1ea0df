//! A cron schedule across a router restart (issue 26 item 7): the router
//! is killed right after a run and comes back between the missed cron
//! time and the next one, nearer the next. One catch-up run at once, then
//! the schedule's own times; never two runs closer than half the
//! schedule's spacing (before: the catch-up and the next on-time run came
//! a moment apart). Run times are the router's own (`last_run_ms` of the
//! admin schedules view), counted with `run_count`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use emqp_proto::Command;
use integration_tests::admin;
use integration_tests::cluster::start_router_on;
use integration_tests::process::{run, scratch_dir};
use integration_tests::{bins, poll_until, Addrs, Spawn};

/// Every 6 s (croniter order, seconds last: 0, 6, ... 54, then 0 again).
const CRON: &str = "* * * * * */6";
const SPACING_MS: i64 = 6_000;

fn unix_ms() -> i64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(d.as_millis()).expect("ms fit")
}

/// `(run_count, last_run_ms)` of the one schedule.
fn runs(admin_ep: &str) -> Option<(i64, i64)> {
    let v = admin::query(
        admin_ep,
        Command::RouterShowSchedulers,
        Duration::from_secs(2),
    )
    .ok()?;
    let s = v["schedules"].as_array()?.first()?.clone();
    Some((s["run_count"].as_i64()?, s["last_run_ms"].as_i64()?))
}

#[test]
fn a_cron_schedule_back_from_a_restart_runs_once_then_on_its_own_times() {
    let dir = scratch_dir("schedule-restart");
    let journal = dir.join("router.journal").display().to_string();
    let addrs = Addrs::fresh();
    let mut router = start_router_on(&addrs, &["--journal", &journal]).expect("router starts");
    let out = run(
        Spawn::new("emq-sender", bins::bin(bins::SENDER)).args([
            "--broker",
            &addrs.frontend,
            "--schedule-cron",
            CRON,
            "--nohaste",
            "--call",
            "noop",
        ]),
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), Some(0), "emq-sender: {}", out.describe());

    // The first run, at cron time S; the router is killed right after it.
    let (count0, first) = poll_until(Duration::from_secs(15), Duration::from_millis(20), || {
        runs(&addrs.admin).filter(|(n, _)| *n >= 1)
    })
    .expect("the first cron run");
    // The cron time itself (whole multiples of 6 s in unix time), not when
    // the run was made, a few ms later.
    let s = first - first.rem_euclid(SPACING_MS);
    router.kill9();
    drop(router);

    // Back between S + 6 s (missed) and S + 12 s, nearer the latter.
    let back = s + SPACING_MS * 3 / 2;
    let wait = u64::try_from(back - unix_ms()).unwrap_or(0);
    std::thread::sleep(Duration::from_millis(wait));
    let _router = start_router_on(&addrs, &["--journal", &journal]).expect("router restarts");
    let up = unix_ms();
    assert!(
        up < s + 2 * SPACING_MS,
        "the router took until S + {} ms to come back: past the next cron time",
        up - s
    );

    // Every run until just after S + 18 s, with when it was made.
    let mut seen: Vec<(i64, i64)> = Vec::new();
    while unix_ms() < s + 3 * SPACING_MS + 1_500 {
        if let Some(r) = runs(&addrs.admin) {
            if seen.last() != Some(&r) && r.0 > count0 {
                seen.push(r);
            }
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let made = seen.last().map_or(0, |(n, _)| n - count0);
    let times: Vec<i64> = seen.iter().map(|(_, t)| t - s).collect();
    let gaps: Vec<i64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    integration_tests::report(&format!(
        "SCHEDULE cron every 6 s across a router kill -9: back at S + {} ms; runs after it \
         (ms after S): {times:?}, {made} counted; gaps {gaps:?} ms",
        up - s
    ));
    assert_eq!(
        made,
        i64::try_from(seen.len()).unwrap(),
        "runs closer than the 25 ms polls: {times:?}"
    );
    assert_eq!(made, 2, "one catch-up run, then S + 18 s: {times:?}");
    assert!(
        gaps.iter().all(|g| *g >= SPACING_MS / 2),
        "two runs closer than half the spacing: {times:?}"
    );
    assert!(
        (3 * SPACING_MS..3 * SPACING_MS + 1_000).contains(&times[1]),
        "the run after the catch-up is the cron time S + 18 s: {times:?}"
    );
}
