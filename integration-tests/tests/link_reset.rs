//! Link resets between a job manager and its router, with real processes
//! (docs/PROTOCOL.md, "Link resets"): our router, and our job manager
//! connected to its backend THROUGH a relay that the test cuts while jobs
//! run and finish. Each cut closes the TCP connection (what a reset does):
//! frames in transit are lost, and libzmq would reconnect the job
//! manager's DEALER under the same routing id. The job manager sees the
//! link go down (socket monitor), reconnects under a fresh identity, and
//! sends its recent REPLYs again after the router's ACK (which lists
//! `reply-resend`), then names the jobs it still runs (`RUNNING`, the ACK
//! lists `adopt-running`); the router moves those onto the new identity,
//! drops the old identity at its next send there and redelivers what it
//! still held on it (REQUESTs the cut lost).
//!
//! Jobs are shell jobs appending `tag $PPID` to a file, so every
//! execution is counted apart from the RESULTs: every job must get exactly
//! one RESULT, none may be lost, and none may run twice. `EMQ_LINK_RESET_JOBS` (default 300) sets the
//! number of jobs.

use std::time::{Duration, Instant};

use emqp_proto::ResultStatus;
use integration_tests::admin::{self, sum_of};
use integration_tests::cluster::{start_jobmanager, start_router, FAST_HEARTBEAT};
use integration_tests::jobs::{self, Tally};
use integration_tests::process::scratch_dir;
use integration_tests::relay::Relay;
use integration_tests::{env_usize, poll_until, report, Client};

/// Slots of the job manager.
const SLOTS: i64 = 4;
/// Cuts of the job manager's connection during the run.
const RESETS: usize = 3;

/// How many lines of `text` contain `needle`.
fn lines_with(text: &str, needle: &str) -> usize {
    text.lines().filter(|l| l.contains(needle)).count()
}

/// The sum of the numbers just before `suffix` on the lines containing it
/// (`... 3 recent result(s) sent again)`).
fn sum_before(text: &str, suffix: &str) -> usize {
    text.lines()
        .filter_map(|l| {
            let head = &l[..l.find(suffix)?];
            head.split_whitespace().last()?.parse::<usize>().ok()
        })
        .sum()
}

#[test]
fn link_resets_lose_no_result_and_every_job_gets_one() {
    let n = env_usize("EMQ_LINK_RESET_JOBS", 300);
    let (mut router, addrs) = start_router(&FAST_HEARTBEAT);
    let relay = Relay::to_endpoint(&addrs.backend);
    let mut jm_args = vec!["--concurrency", "4"];
    jm_args.extend(FAST_HEARTBEAT);
    let mut jm = start_jobmanager("jm-link-reset", &relay.endpoint, &jm_args);
    admin::wait_idle_workers(&addrs.admin, 1, SLOTS, Duration::from_secs(20))
        .expect("the job manager registers through the relay with 4 slots");

    let file = scratch_dir("link-reset").join("exec.txt");
    let tags: Vec<String> = (0..n).map(|i| format!("r{i}")).collect();
    let mut client = Client::connect(&addrs.frontend);
    let started = Instant::now();
    let ids: Vec<String> = tags
        .iter()
        .map(|tag| client.submit_reply("default", jobs::shell_record(&file, tag, "0.02")))
        .collect();

    // Cut the connection at 1/4, 2/4 and 3/4 of the results: jobs are
    // running and REPLYs are on the wire each time.
    let mut at_cut = Vec::new();
    for k in 1..=RESETS {
        let due = n * k / (RESETS + 1);
        assert!(
            client.wait_for(Duration::from_secs(60), |c| c.results.len() >= due),
            "only {} of {due} results before cut {k}",
            client.results.len()
        );
        at_cut.push(client.results.len());
        relay.cut();
        relay.heal();
        // The job manager saw it and registered again (one more ACK).
        let registered = poll_until(Duration::from_secs(10), Duration::from_millis(10), || {
            (lines_with(&jm.stderr(), "registered with") > k).then_some(())
        });
        assert!(
            registered.is_some(),
            "the job manager did not register again after cut {k}:\n{}",
            jm.tail(30)
        );
    }

    let finished = client.wait_finished(&ids, Duration::from_secs(60));
    let elapsed = started.elapsed();
    // Late duplicates, if any, would come now.
    client.pump(Duration::from_millis(300));
    let seen = jobs::count_lines(&file);
    let executions = Tally::of(&tags, &seen);
    let got: std::collections::HashMap<String, usize> = client
        .results
        .iter()
        .map(|(k, v)| (k.clone(), v.len()))
        .collect();
    let results = Tally::of(&ids, &got);
    let failed = client
        .results
        .values()
        .filter(|v| v.iter().any(|o| o.status != ResultStatus::Ok))
        .count();
    let jm_log = jm.stderr();
    let router_log = router.stderr();
    let downs = lines_with(&jm_log, "frames in transit may be lost");
    let resent = sum_before(&jm_log, "recent result(s) sent again");
    let completed_elsewhere = lines_with(&router_log, "completes the job delivered on another");
    report(&format!(
        "LINK-RESET: jobs {n}, {RESETS} cuts (at {at_cut:?} results) in {elapsed:.1?}; \
         executions: {executions}; results: {results}, failed={failed}, rejected={}; \
         links down seen by the job manager: {downs}; REPLYs sent again: {resent}; \
         jobs completed by a REPLY on a newer connection: {completed_elsewhere}",
        client.rejects.len()
    ));

    assert!(
        finished.is_ok(),
        "jobs without a RESULT: {:?}",
        finished.unwrap_err()
    );
    assert_eq!(results.lost, 0, "rejects: {:?}", client.rejects);
    assert_eq!(results.duplicated, 0, "a job got two RESULTs");
    assert_eq!(failed, 0);
    assert_eq!(executions.lost, 0, "a job never ran");
    // One job manager: its RUNNING (the jobs it still runs) reaches the
    // router before its READYs, so a job the router took back from the
    // old identity is never handed out again before it is adopted.
    assert_eq!(
        executions.duplicated, 0,
        "a job ran twice across a reset: {executions}"
    );
    assert!(downs >= RESETS, "the job manager saw {downs} links down");

    // The old identities are gone and no slot leaked: one worker, every
    // slot offered; nothing left in flight or queued.
    admin::wait_idle_workers(&addrs.admin, 1, SLOTS, Duration::from_secs(10))
        .expect("one worker with its 4 slots after the cuts");
    let status = poll_until(Duration::from_secs(10), Duration::from_millis(100), || {
        let s = admin::status(&addrs.admin).ok()?;
        (sum_of(&s, "inflight_messages_by_queue") == 0
            && sum_of(&s, "waiting_messages_by_queue") == 0)
            .then_some(s)
    });
    assert!(
        status.is_some(),
        "jobs still held: {:?}",
        admin::status(&addrs.admin)
    );
    assert!(jm.is_running(), "{}", jm.tail(30));
    assert!(router.is_running(), "{}", router.tail(30));
}

/// Issue 26 item 6: a stranger on the backend (a fake DEALER that
/// registers as a job-ack worker) sends REPLY for a job a real job manager
/// runs, then RUNNING for it: the router ignores both (it lacks that job
/// manager's take-back key), says so in its log, and the client gets the
/// real job manager's result.
#[test]
fn a_stranger_on_the_backend_cannot_finish_another_job_managers_job() {
    use emq_testkit::fake::{inform_with_features, FakeDealer};
    use emqp_proto::{Command, PeerType, Reply};

    let (mut router, addrs) = start_router(&FAST_HEARTBEAT);
    let mut jm_args = vec!["--concurrency", "1"];
    jm_args.extend(FAST_HEARTBEAT);
    let mut jm = start_jobmanager("jm-holder", &addrs.backend, &jm_args);
    admin::wait_idle_workers(&addrs.admin, 1, 1, Duration::from_secs(20))
        .expect("the job manager registers with 1 slot");
    let file = scratch_dir("stranger").join("started.txt");
    let script = format!(
        "echo started >> '{}'; sleep 1; echo real-result",
        file.display()
    );
    let mut client = Client::connect(&addrs.frontend);
    let id = client.submit_reply("default", jobs::shell(&["sh", "-c", &script]));
    poll_until(Duration::from_secs(20), Duration::from_millis(20), || {
        file.exists().then_some(())
    })
    .expect("the job starts on the real job manager");

    let stranger = FakeDealer::connect(&addrs.backend, b"stranger");
    stranger.send(inform_with_features(
        "10:default",
        PeerType::Worker,
        &["job-ack", "cancel"],
    ));
    let ack = stranger.expect("the stranger's ACK");
    assert!(matches!(ack.command, Command::Ack { .. }), "{ack:?}");
    stranger.send(Command::Reply(Reply {
        payload: br#"{"value": "forged"}"#.to_vec(),
        orig_msgid: Some(id.clone()),
        status: Some(ResultStatus::Ok),
        credit: 0,
    }));
    stranger.send(Command::Running {
        orig_msgids: vec![id.clone()],
    });
    router
        .wait_for_log_line(
            &format!("REPLY for {id} from worker stranger ignored"),
            Duration::from_secs(10),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        client.wait_for(Duration::from_secs(30), |c| c.finished(&id)),
        "no result"
    );
    let got = client.result(&id).expect("a result").clone();
    let text = String::from_utf8_lossy(&got.payload).into_owned();
    assert!(
        text.contains("real-result") && !text.contains("forged"),
        "the client got {text}"
    );
    assert_eq!(client.results[&id].len(), 1);
    let log = router.stderr();
    assert_eq!(
        lines_with(
            &log,
            &format!("RUNNING for {id} from worker stranger ignored")
        ),
        1
    );
    report(&format!(
        "take-back: a stranger's REPLY and RUNNING for an in-flight job ignored; the client got \
         the real result ({} bytes)",
        got.payload.len()
    ));
    jm.stop();
    router.stop();
}
