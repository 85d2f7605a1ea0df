//! Flow control (docs/PROTOCOL.md, "Flow control") with real processes,
//! through emq-cli: a per-key concurrency limit holds with a real job
//! manager — never more than N of a key running at once, measured by the
//! jobs themselves — while another key's jobs pass the held ones; `emq-cli
//! job` says why a job waits; the policy survives a router restart with
//! the SQLite journal. (The Python client's side: python/tests/test_flow.py.)

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use integration_tests::bins;
use integration_tests::cluster::{start_jobmanager, start_router_on};
use integration_tests::jobs::shell;
use integration_tests::process::{run, scratch_dir};
use integration_tests::{poll_until, Addrs, Client, RunOutput, Spawn};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

fn cli(admin: &str, args: &[&str]) -> RunOutput {
    let out = run(
        Spawn::new("emq-cli", bins::bin("emq-cli"))
            .args(["--admin", admin])
            .args(args),
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), Some(0), "emq-cli {args:?}: {}", out.describe());
    out
}

/// A shell job that appends `start TAG T` and `end TAG T` (unix time) to
/// `file` around a `secs` sleep.
fn probe(file: &Path, tag: &str, secs: &str) -> Vec<u8> {
    let script = "echo \"start $1 $(date +%s.%N)\" >> \"$2\"; sleep \"$3\"; \
                  echo \"end $1 $(date +%s.%N)\" >> \"$2\"";
    shell(&[
        "sh",
        "-c",
        script,
        "sh",
        tag,
        &file.display().to_string(),
        secs,
    ])
}

/// Per key (the tag before `-`), the most jobs that ran at once, from the
/// jobs' own lines (an end before a start at the same instant).
fn peak_running(file: &Path) -> HashMap<String, usize> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut events: Vec<(f64, u8, String)> = text
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let [what, tag, t] = w.as_slice() else {
                return None;
            };
            let key = tag.split('-').next()?.to_string();
            Some((t.parse().ok()?, u8::from(*what == "start"), key))
        })
        .collect();
    events.sort_by(|a, b| a.partial_cmp(b).expect("times are numbers"));
    let mut running: HashMap<String, i64> = HashMap::new();
    let mut peak: HashMap<String, usize> = HashMap::new();
    for (_, start, key) in events {
        let r = running.entry(key.clone()).or_default();
        *r += if start == 1 { 1 } else { -1 };
        let p = peak.entry(key).or_default();
        *p = (*p).max(usize::try_from(*r).unwrap_or(0));
    }
    peak
}

#[test]
fn a_per_key_limit_holds_with_a_real_job_manager_and_survives_a_restart() {
    let dir = scratch_dir("flow-control");
    let journal = dir.join("router.journal").display().to_string();
    let file = dir.join("probe.log");
    let addrs = Addrs::fresh();
    let mut router = start_router_on(&addrs, &["--journal", &journal]).expect("router starts");
    let out = cli(
        &addrs.admin,
        &["limits", "set", "default", "--concurrency-per-key", "2"],
    );
    assert!(
        out.stdout
            .contains("queue default: limits concurrency-per-key=2"),
        "{}",
        out.stdout
    );
    let mut jm = start_jobmanager("jm", &addrs.backend, &["-J", "6"]);
    let mut client = Client::connect(&addrs.frontend);
    let acme: Vec<String> = (0..8)
        .map(|i| {
            client.submit(
                "default",
                "reply-requested,key:acme",
                probe(&file, &format!("acme-{i}"), "0.4"),
            )
        })
        .collect();
    let bolt: Vec<String> = (0..2)
        .map(|i| {
            client.submit(
                "default",
                "reply-requested,key:bolt",
                probe(&file, &format!("bolt-{i}"), "0.4"),
            )
        })
        .collect();
    // emq-cli job says why the last acme job waits.
    let last = acme.last().expect("eight jobs").clone();
    poll_until(WAIT, Duration::from_millis(50), || {
        let out = cli(&addrs.admin, &["job", &last]);
        out.stdout
            .lines()
            .any(|l| l.starts_with("waiting:") && l.ends_with("limited: key acme at 2/2 running"))
            .then_some(())
    })
    .expect("the held job's view says why it waits");
    let all: Vec<String> = acme.iter().chain(&bolt).cloned().collect();
    client
        .wait_finished(&all, WAIT)
        .unwrap_or_else(|left| panic!("jobs did not finish: {left:?}"));
    let peak = peak_running(&file);
    assert_eq!(peak.get("acme"), Some(&2), "{peak:?}");
    assert_eq!(
        peak.get("bolt"),
        Some(&2),
        "bolt's jobs were not held: {peak:?}"
    );
    // bolt's first job started before acme's last: it did not wait behind
    // acme's held jobs (no head-of-line blocking).
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let start_of = |tag: &str| -> f64 {
        text.lines()
            .find_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.first() == Some(&"start") && w.get(1) == Some(&tag))
                    .then(|| w[2].parse().unwrap_or(f64::MAX))
            })
            .unwrap_or(f64::MAX)
    };
    assert!(start_of("bolt-0") < start_of("acme-7"), "{text}");
    let show: Value =
        serde_json::from_str(&cli(&addrs.admin, &["--json", "limits", "show"]).stdout)
            .expect("JSON");
    assert_eq!(show["limits"][0]["queue"], "default", "{show}");
    jm.stop();

    // The policy is in the journal: a restarted router has it.
    router.stop();
    drop(router);
    let _router = start_router_on(&addrs, &["--journal", &journal]).expect("router restarts");
    let show: Value =
        serde_json::from_str(&cli(&addrs.admin, &["--json", "limits", "show", "default"]).stdout)
            .expect("JSON");
    assert_eq!(
        show["limits"][0]["policy"],
        serde_json::json!({"concurrency_per_key": 2, "fair": false}),
        "{show}"
    );
}
