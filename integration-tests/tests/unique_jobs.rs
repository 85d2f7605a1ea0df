//! Unique jobs with real processes (issue 28): concurrent emq-senders with
//! one `--unique-key` end as one job; the key (and a `--unique-for`
//! window, with the finished job's result) holds across a kill -9 of a
//! router with a SQLite journal; `--wait` prints the existing job's
//! result.

use std::time::Duration;

use emqp_proto::Command;
use integration_tests::admin;
use integration_tests::cluster::{start_jobmanager, start_router_on};
use integration_tests::process::scratch_dir;
use integration_tests::{bins, poll_until, Addrs, Proc, RunOutput, Spawn};

const SENDERS: usize = 8;

fn sender(addrs: &Addrs, args: &[&str]) -> Spawn {
    Spawn::new("emq-sender", bins::bin(bins::SENDER))
        .args(["--broker", &addrs.frontend, "--timeout", "20"])
        .args(args)
}

fn run(addrs: &Addrs, args: &[&str]) -> RunOutput {
    integration_tests::process::run_to_exit(sender(addrs, args), Duration::from_secs(40))
}

fn status(addrs: &Addrs) -> serde_json::Value {
    admin::query(&addrs.admin, Command::Status, Duration::from_secs(5)).expect("STATUS")
}

#[test]
fn concurrent_submits_with_one_key_are_one_job_and_the_key_survives_kill9() {
    let dir = scratch_dir("unique-jobs");
    let journal = dir.join("router.journal").display().to_string();
    let addrs = Addrs::fresh();
    let mut router = start_router_on(&addrs, &["--journal", &journal]).expect("router starts");

    // No job manager yet: the job stays unfinished, so the key is held.
    let mut procs: Vec<Proc> = (0..SENDERS)
        .map(|i| {
            sender(
                &addrs,
                &[
                    "--unique-key",
                    "order-7",
                    "--call",
                    "echo",
                    "--args",
                    &format!("[{i}]"),
                ],
            )
            .spawn()
        })
        .collect();
    let mut printed = Vec::new();
    let mut duplicates = 0;
    for p in &mut procs {
        let st = p.wait_exit(Duration::from_secs(40));
        assert_eq!(
            st.and_then(|s| s.code()),
            Some(0),
            "emq-sender: {}\n{}",
            p.stdout(),
            p.stderr()
        );
        printed.push(p.stdout().trim().to_string());
        if p.stderr().contains("is a duplicate of") {
            duplicates += 1;
        }
    }
    printed.dedup();
    assert_eq!(
        printed.len(),
        1,
        "every sender prints the one job's msgid: {printed:?}"
    );
    let msgid = printed[0].clone();
    assert_eq!(duplicates, SENDERS - 1);
    let s = status(&addrs);
    assert_eq!(s["counters"]["accepted"], 1, "{s}");
    assert_eq!(s["unique"]["held"], 1);
    assert_eq!(s["unique"]["duplicates"], (SENDERS - 1) as u64);
    println!(
        "{SENDERS} concurrent emq-senders with one --unique-key: 1 job ({msgid}), {} duplicates",
        SENDERS - 1
    );

    // The key is in the journaled job: it holds across a kill -9.
    router.kill9();
    drop(router);
    let mut router = start_router_on(&addrs, &["--journal", &journal]).expect("router restarts");
    let after = run(&addrs, &["--unique-key", "order-7", "--call", "noop"]);
    assert_eq!(after.code(), Some(0), "{}", after.describe());
    assert_eq!(after.stdout.trim(), msgid, "the restored job holds the key");
    assert!(after.stderr.contains(&format!("is a duplicate of {msgid}")));

    // --wait on a duplicate prints the existing job's result: the
    // duplicate is answered (counted) before a job manager runs the job.
    let mut waiting = sender(
        &addrs,
        &["--unique-key", "order-7", "--wait", "--call", "noop"],
    )
    .spawn();
    poll_until(Duration::from_secs(20), Duration::from_millis(20), || {
        (status(&addrs)["unique"]["duplicates"] == 2).then_some(())
    })
    .expect("the second duplicate answered");
    let _jm = start_jobmanager("emq-jobmanager", &addrs.backend, &[]);
    let st = waiting.wait_exit(Duration::from_secs(40));
    let (out, err) = (waiting.stdout(), waiting.stderr());
    assert_eq!(st.and_then(|s| s.code()), Some(0), "{out}\n{err}");
    assert!(err.contains(&format!("is a duplicate of {msgid}")), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    let n = v["value"][0]
        .as_u64()
        .unwrap_or_else(|| panic!("echo result value [i]: {v}"));
    assert!(n < SENDERS as u64, "{v}");

    // A window (--unique-for): the key and the finished job's result stay
    // across a kill -9.
    let first = run(
        &addrs,
        &[
            "--unique-key",
            "mail-1",
            "--unique-for",
            "600",
            "--wait",
            "--call",
            "echo",
            "--args",
            "[42]",
        ],
    );
    assert_eq!(first.code(), Some(0), "{}", first.describe());
    let value = |out: &RunOutput| -> serde_json::Value {
        serde_json::from_str(out.stdout.trim())
            .unwrap_or_else(|e| panic!("{e}: {}", out.describe()))
    };
    assert_eq!(value(&first), serde_json::json!({"value": [42]}));
    router.kill9();
    drop(router);
    let _router = start_router_on(&addrs, &["--journal", &journal]).expect("router restarts");
    let again = run(
        &addrs,
        &[
            "--unique-key",
            "mail-1",
            "--wait",
            "--call",
            "echo",
            "--args",
            "[43]",
        ],
    );
    assert_eq!(again.code(), Some(0), "{}", again.describe());
    assert_eq!(
        value(&again),
        serde_json::json!({"value": [42]}),
        "the window holds after kill -9, with the kept result: {}",
        again.describe()
    );
    assert!(
        again.stderr.contains("is a duplicate of"),
        "{}",
        again.describe()
    );
    let s = status(&addrs);
    assert_eq!(
        s["unique"]["held"], 1,
        "only mail-1's window: order-7 finished: {s}"
    );
}
