//! The PostgreSQL outbox (issue 28): an application enqueues jobs with
//! `emq_enqueue(...)` inside its own transactions in its own database; a
//! router started with `--outbox URL` (journal on PostgreSQL) drains them.
//! A rolled-back enqueue never runs; a committed one runs once and its row
//! is deleted; a row read again (its DELETE lost) is acknowledged as the
//! job it is, not run twice; two enqueues with one unique key within its
//! window are one job.

use std::time::{Duration, Instant};

use emqp_proto::Command;
use integration_tests::admin;
use integration_tests::cluster::{spawn_router, start_jobmanager, wait_router_ready};
use integration_tests::postgres::PgCluster;
use integration_tests::{poll_until, Addrs};

fn status(addrs: &Addrs) -> serde_json::Value {
    admin::query(&addrs.admin, Command::Status, Duration::from_secs(5)).expect("STATUS")
}

#[test]
fn committed_outbox_rows_run_once_and_rolled_back_ones_never() {
    let Some(pg) = PgCluster::start_or_skip("outbox") else {
        return;
    };
    let journal = pg.create_database("emq_journal");
    let app = pg.create_database("shop");
    pg.psql(
        "shop",
        "CREATE TABLE orders (id serial PRIMARY KEY, item text)",
    );
    let addrs = Addrs::fresh();
    let mut router = spawn_router(
        "emq-router",
        &addrs,
        &["--journal", &journal, "--outbox", &app],
    );
    wait_router_ready(&mut router, &addrs, Duration::from_secs(20)).expect("router serves");
    router
        .wait_for_log_line("outbox: draining emq_outbox", Duration::from_secs(20))
        .expect("the router installs the outbox and listens");
    let _jm = start_jobmanager("emq-jobmanager", &addrs.backend, &[]);
    let job = |n: u32| format!(r#"["call", {{"handler": "echo", "args": [{n}]}}]"#);

    // Rolled back with the order: never sent.
    pg.psql(
        "shop",
        &format!(
            "BEGIN; INSERT INTO orders (item) VALUES ('lamp'); \
             SELECT emq_enqueue('default', '{}'); ROLLBACK;",
            job(1)
        ),
    );
    // Committed with the order: runs once.
    let t0 = Instant::now();
    let msgid = pg.psql(
        "shop",
        &format!(
            "BEGIN; INSERT INTO orders (item) VALUES ('book'); \
             SELECT emq_enqueue('default', '{}'); COMMIT;",
            job(2)
        ),
    );
    assert!(!msgid.is_empty(), "emq_enqueue returns the job's msgid");
    poll_until(Duration::from_secs(20), Duration::from_millis(20), || {
        (status(&addrs)["counters"]["completed"] == 1).then_some(())
    })
    .expect("the committed job ran");
    let took = t0.elapsed();
    poll_until(Duration::from_secs(10), Duration::from_millis(50), || {
        (pg.psql("shop", "SELECT count(*) FROM emq_outbox") == "0").then_some(())
    })
    .expect("its row is deleted once the router took it");
    let s = status(&addrs);
    assert_eq!(
        s["counters"]["accepted"], 1,
        "the rolled-back job never came: {s}"
    );

    // The same row again (as after a router killed between its journal
    // commit and the DELETE): acknowledged as the job it is, not run again.
    pg.psql(
        "shop",
        &format!(
            "INSERT INTO emq_outbox (msgid, queue, payload) VALUES ('{msgid}', 'default', \
             convert_to('{}', 'UTF8')); SELECT pg_notify('emq_outbox', '')",
            job(2)
        ),
    );
    poll_until(Duration::from_secs(10), Duration::from_millis(50), || {
        (pg.psql("shop", "SELECT count(*) FROM emq_outbox") == "0").then_some(())
    })
    .expect("the row read again is answered and deleted");
    let s = status(&addrs);
    assert_eq!(
        (&s["counters"]["accepted"], &s["counters"]["completed"]),
        (&serde_json::json!(1), &serde_json::json!(1)),
        "a row read twice runs once: {s}"
    );

    // Two enqueues with one unique key in its window: one job.
    for n in [3, 4] {
        pg.psql(
            "shop",
            &format!(
                "SELECT emq_enqueue('default', '{}', 'unique-key:receipt-9,unique-for:600')",
                job(n)
            ),
        );
    }
    poll_until(Duration::from_secs(20), Duration::from_millis(20), || {
        let s = status(&addrs);
        (s["counters"]["completed"] == 2 && s["unique"]["duplicates"] == 1).then_some(())
    })
    .unwrap_or_else(|| panic!("one job for the key: {}", status(&addrs)));
    poll_until(Duration::from_secs(10), Duration::from_millis(50), || {
        (pg.psql("shop", "SELECT count(*) FROM emq_outbox") == "0").then_some(())
    })
    .expect("both rows deleted");
    assert_eq!(status(&addrs)["counters"]["accepted"], 2);
    assert_eq!(pg.psql("shop", "SELECT item FROM orders"), "book");
    integration_tests::report(&format!(
        "OUTBOX (PostgreSQL): rolled-back enqueue never ran; committed enqueue ran in {:.0} ms \
         from COMMIT (LISTEN/NOTIFY), row deleted; two enqueues with one unique key: 1 job",
        took.as_secs_f64() * 1000.0
    ));
}
