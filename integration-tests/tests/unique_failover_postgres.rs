//! Unique keys across a PostgreSQL failover (issue 28; the harness of
//! `ha_postgres.rs`): two routers on one database, the leader SIGKILLed.
//!
//! - a key taken on the old leader holds on the new one (the job and its
//!   headers are in the journal it loads);
//! - two emq-senders with one new key, each with both routers as its
//!   failover list (in opposite orders), racing while the leader is
//!   killed under them, end as one job: both print the same msgid, the
//!   new leader holds one job per key; so do two more sent while the
//!   standby takes over.
//!
//! No job manager: the jobs stay unfinished, so every key stays held.

use std::time::Duration;

use emqp_proto::Command;
use integration_tests::admin;
use integration_tests::ha::{router, wait_leader, wait_standby};
use integration_tests::postgres::PgCluster;
use integration_tests::{bins, poll_until, Addrs, Proc, RunOutput, Spawn};

fn sender(brokers: &str, key: &str) -> Spawn {
    Spawn::new("emq-sender", bins::bin(bins::SENDER)).args([
        "--broker",
        brokers,
        "--timeout",
        "40",
        "--unique-key",
        key,
        "--call",
        "noop",
    ])
}

fn finished(p: &mut Proc) -> RunOutput {
    let status = p.wait_exit(Duration::from_secs(60));
    RunOutput {
        status,
        stdout: p.stdout(),
        stderr: p.stderr(),
    }
}

#[test]
fn unique_keys_hold_across_a_failover_and_racing_submits_end_as_one_job() {
    let Some(pg) = PgCluster::start_or_skip("unique keys across a failover") else {
        return;
    };
    let url = pg.create_database("unique_failover");
    let (a_addrs, b_addrs) = (Addrs::fresh(), Addrs::fresh());
    let mut a = router("router-a", &a_addrs, &url, &[]);
    wait_leader(&mut a);
    let mut b = router("router-b", &b_addrs, &url, &[]);
    wait_standby(&mut b);
    let ab = format!("{},{}", a_addrs.frontend, b_addrs.frontend);
    let ba = format!("{},{}", b_addrs.frontend, a_addrs.frontend);

    // A key taken on the leader.
    let mut first = sender(&ab, "before").spawn();
    let first = finished(&mut first);
    assert_eq!(first.code(), Some(0), "{}", first.describe());
    let held = first.stdout.trim().to_string();

    // Two racing submits with a new key, the leader killed under them;
    // two more with another key sent while the standby takes over.
    let mut x = sender(&ab, "race").spawn();
    let mut y = sender(&ba, "race").spawn();
    a.kill9();
    let mut x2 = sender(&ab, "race-2").spawn();
    let mut y2 = sender(&ba, "race-2").spawn();
    let (x, y) = (finished(&mut x), finished(&mut y));
    let (x2, y2) = (finished(&mut x2), finished(&mut y2));
    for (x, y) in [(&x, &y), (&x2, &y2)] {
        assert_eq!(x.code(), Some(0), "{}", x.describe());
        assert_eq!(y.code(), Some(0), "{}", y.describe());
        assert_eq!(
            x.stdout.trim(),
            y.stdout.trim(),
            "both print the one job's msgid:\n{}\n{}",
            x.describe(),
            y.describe()
        );
        let dupes = [x, y]
            .iter()
            .filter(|o| o.stderr.contains("is a duplicate of"))
            .count();
        assert_eq!(
            dupes,
            1,
            "one of the two is the duplicate:\n{}\n{}",
            x.describe(),
            y.describe()
        );
    }

    // The new leader serves and holds both keys, one job each.
    poll_until(Duration::from_secs(20), Duration::from_millis(50), || {
        admin::query(&b_addrs.admin, Command::Status, Duration::from_millis(200)).ok()
    })
    .expect("the standby serves");
    let mut again = sender(&ba, "before").spawn();
    let again = finished(&mut again);
    assert_eq!(again.code(), Some(0), "{}", again.describe());
    assert_eq!(
        again.stdout.trim(),
        held,
        "the old leader's key holds on the new one"
    );
    assert!(again.stderr.contains(&format!("is a duplicate of {held}")));
    let s = admin::query(&b_addrs.admin, Command::Status, Duration::from_secs(5)).expect("STATUS");
    assert_eq!(s["unique"]["held"], 3, "{s}");
    assert_eq!(
        admin::sum_of(&s, "waiting_messages_by_queue"),
        3,
        "one job per key: {s}"
    );
    integration_tests::report(&format!(
        "UNIQUE failover (PostgreSQL): a key taken on the killed leader held on the new one; \
         two emq-senders racing with one key through both routers as the leader was killed, and \
         two more sent during the takeover: one job and one duplicate each ({}, {}); new \
         leader: {} keys, {} waiting jobs",
        x.stdout.trim(),
        x2.stdout.trim(),
        s["unique"]["held"],
        admin::sum_of(&s, "waiting_messages_by_queue")
    ));
    drop(b);
}
