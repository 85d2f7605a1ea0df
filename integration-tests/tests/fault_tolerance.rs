//! Fault tests (issue 6), scaled for CI: a job manager killed with -9 in
//! the middle of a run, a job manager frozen (SIGSTOP) past the heartbeat
//! timeout and thawed, a flood of malformed messages on all three router
//! sockets, and a router restart on its journal.
//!
//! Jobs are shell jobs appending `tag $PPID` to a file, so every execution
//! is counted (at-least-once: a job may run twice after a failure) apart
//! from the RESULTs the client receives (exactly one per job expected).
//! Each test prints `submitted / completed / duplicated / lost` for both.
//!
//! `EMQ_FAULT_JOBS` (default 2000) sets the size of the kill -9 run (a
//! tenth of it, at least 100, for the SIGSTOP run); `EMQ_MALFORMED`
//! (default 10000) the number of malformed messages. The tests here run
//! one at a time (they are timing-sensitive on 2 cores).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use emqp_proto::ResultStatus;
use integration_tests::admin::{self, sum_of};
use integration_tests::cluster::{start_jobmanager, start_router, start_router_on, FAST_HEARTBEAT};
use integration_tests::jobs::{self, Tally};
use integration_tests::process::{run, scratch_dir};
use integration_tests::{bins, env_usize, poll_until, zmq_ctx, Addrs, Client, Proc, Rng, Spawn};
use serde_json::json;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const CONC: i64 = 4;

struct Two {
    addrs: Addrs,
    // Drop order: job managers, then the router.
    a: Proc,
    b: Proc,
    router: Proc,
}

fn jm_args() -> Vec<&'static str> {
    let mut v = vec!["--concurrency", "4"];
    v.extend(FAST_HEARTBEAT);
    v
}

fn two_jobmanagers() -> Two {
    let (router, addrs) = start_router(&FAST_HEARTBEAT);
    let a = start_jobmanager("jm-a", &addrs.backend, &jm_args());
    let b = start_jobmanager("jm-b", &addrs.backend, &jm_args());
    admin::wait_idle_workers(&addrs.admin, 2, 2 * CONC, Duration::from_secs(20))
        .expect("two job managers with 4 slots each");
    Two {
        addrs,
        a,
        b,
        router,
    }
}

/// Executions per tag, and which pids ran each tag.
fn executions(file: &Path) -> (HashMap<String, usize>, HashMap<String, Vec<i32>>) {
    let mut by = HashMap::<String, Vec<i32>>::new();
    for r in jobs::read_records(file) {
        let pid = r.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
        by.entry(r[0].clone()).or_default().push(pid);
    }
    (jobs::count_lines(file), by)
}

fn client_tally(c: &Client, ids: &[String]) -> (Tally, usize) {
    let seen: HashMap<String, usize> = c
        .results
        .iter()
        .map(|(k, v)| (k.clone(), v.len()))
        .collect();
    let failed = ids
        .iter()
        .filter(|i| {
            c.results
                .get(*i)
                .is_some_and(|v| v.iter().any(|o| o.status != ResultStatus::Ok))
        })
        .count();
    (Tally::of(ids, &seen), failed)
}

/// Wait until STATUS shows no job in flight or waiting; print the router's
/// counters (emq extension of STATUS, absent in 0.3.13).
fn wait_no_inflight(admin_ep: &str) -> serde_json::Value {
    let s = wait_no_inflight_quiet(admin_ep);
    if let Some(c) = s.get("counters") {
        integration_tests::report(&format!("  router counters: {c}"));
    }
    s
}

fn wait_no_inflight_quiet(admin_ep: &str) -> serde_json::Value {
    poll_until(Duration::from_secs(15), Duration::from_millis(200), || {
        let s = admin::status(admin_ep).ok()?;
        (sum_of(&s, "inflight_messages_by_queue") == 0
            && sum_of(&s, "waiting_messages_by_queue") == 0)
            .then_some(s)
    })
    .unwrap_or_else(|| panic!("STATUS still shows jobs: {:?}", admin::status(admin_ep)))
}

/// Wait until a third of `n` submitted jobs have their RESULT (the moment
/// the kill tests strike), within a time budget that grows with `n`;
/// returns that budget, which the test also gives the rest of the run.
fn wait_for_a_third(client: &mut Client, n: usize) -> Duration {
    let budget = Duration::from_secs(60) + Duration::from_millis(60 * n as u64);
    assert!(
        client.wait_for(budget, |c| c.results.len() >= n / 3),
        "a third of the jobs did not finish in {budget:?}: {} results",
        client.results.len()
    );
    budget
}

#[test]
fn kill_9_of_a_jobmanager_mid_run_loses_no_job() {
    let _s = serial();
    let n = env_usize("EMQ_FAULT_JOBS", 2000);
    let mut t = two_jobmanagers();
    let dir = scratch_dir("kill9");
    let file = dir.join("exec.txt");
    let tags: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
    let mut client = Client::connect(&t.addrs.frontend);
    let started = Instant::now();
    let ids: Vec<String> = tags
        .iter()
        .map(|tag| client.submit_reply("default", jobs::shell_record(&file, tag, "0")))
        .collect();
    let budget = wait_for_a_third(&mut client, n);
    let done_at_kill = client.results.len();
    let a_pid = t.a.pid();
    t.a.kill9();
    eprintln!("killed jm-a (pid {a_pid}) with SIGKILL after {done_at_kill} of {n} results");

    let res = client.wait_finished(&ids, budget);
    let elapsed = started.elapsed();
    client.pump(Duration::from_millis(500));
    let (exec, by) = executions(&file);
    let exec_tally = Tally::of(&tags, &exec);
    let (res_tally, failed) = client_tally(&client, &ids);
    let on_a = by.values().filter(|p| p.contains(&a_pid)).count();
    let rerun_after_a = by
        .values()
        .filter(|p| p.contains(&a_pid) && p.len() > 1)
        .count();
    integration_tests::report(&format!(
        "FAULT kill-9: jobs {n} in {elapsed:.1?}; executions: {exec_tally}; results: {res_tally}, \
         failed={failed}, rejected={}; ran on killed jm-a: {on_a}, of which re-run: {rerun_after_a}",
        client.rejects.len()
    ));
    assert!(
        res.is_ok(),
        "jobs without a RESULT or REJECT: {} (first: {:?})",
        res.as_ref().unwrap_err().len(),
        res.as_ref().unwrap_err().first()
    );
    assert_eq!(exec_tally.lost, 0, "jobs never executed");
    assert_eq!(
        res_tally.lost,
        0,
        "jobs without a RESULT (rejects: {:?})",
        client.rejects.values().next()
    );
    assert_eq!(res_tally.duplicated, 0, "jobs with more than one RESULT");
    assert_eq!(failed, 0, "jobs with a failed RESULT");
    assert!(t.router.is_running(), "router died");
    assert!(t.b.is_running(), "jm-b died: {}", t.b.tail(30));
    admin::wait_idle_workers(&t.addrs.admin, 1, CONC, Duration::from_secs(15))
        .expect("only jm-b is left, idle");
    wait_no_inflight(&t.addrs.admin);
}

#[test]
fn sigstop_past_the_heartbeat_timeout_redelivers_and_dedups() {
    let _s = serial();
    let n = (env_usize("EMQ_FAULT_JOBS", 2000) / 10).max(100);
    let mut t = two_jobmanagers();
    let dir = scratch_dir("sigstop");
    let file = dir.join("exec.txt");
    let tags: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
    let mut client = Client::connect(&t.addrs.frontend);
    let ids: Vec<String> = tags
        .iter()
        .map(|tag| client.submit_reply("default", jobs::shell_record(&file, tag, "0.05")))
        .collect();
    assert!(
        client.wait_for(Duration::from_secs(60), |c| c.results.len() >= n / 5),
        "a fifth of the jobs did not finish: {}",
        client.results.len()
    );
    let a_pid = t.a.pid();
    t.a.pause();
    let paused_at = client.results.len();
    // 3 missed 0.5 s beats: the router must drop jm-a and hand its jobs to jm-b.
    let dropped = admin::wait_workers(&t.addrs.admin, Duration::from_secs(6), |w| w.len() == 1);
    client.pump(Duration::from_millis(2000));
    let during_pause = client.results.len() - paused_at;
    t.a.resume();
    eprintln!("jm-a (pid {a_pid}) stopped after {paused_at} results; {during_pause} more during the pause");
    assert!(
        dropped.is_ok(),
        "router did not drop the frozen job manager: {dropped:?}"
    );

    let res = client.wait_finished(&ids, Duration::from_secs(90));
    // jm-a is back: give it time to rejoin and to send its late results.
    let rejoined = admin::wait_workers(&t.addrs.admin, Duration::from_secs(20), |w| {
        w.len() == 2 && w.iter().all(|x| x.available_slots == CONC)
    });
    client.pump(Duration::from_millis(1500));
    let (exec, by) = executions(&file);
    let exec_tally = Tally::of(&tags, &exec);
    let (res_tally, failed) = client_tally(&client, &ids);
    let on_a = by.values().filter(|p| p.contains(&a_pid)).count();
    let redelivered = by
        .values()
        .filter(|p| p.contains(&a_pid) && p.iter().any(|q| *q != a_pid))
        .count();
    integration_tests::report(&format!(
        "FAULT sigstop: jobs {n}; executions: {exec_tally}; results: {res_tally}, failed={failed}, \
         rejected={}; ran on frozen jm-a: {on_a}, re-run elsewhere: {redelivered}; \
         results while frozen: {during_pause}; jm-a rejoined: {}",
        client.rejects.len(),
        rejoined.is_ok()
    ));
    assert!(res.is_ok(), "unfinished jobs: {:?}", res.unwrap_err());
    assert_eq!(exec_tally.lost, 0);
    assert_eq!(
        res_tally.lost,
        0,
        "rejects: {:?}",
        client.rejects.values().next()
    );
    assert_eq!(
        res_tally.duplicated, 0,
        "late results of the frozen job manager reached the client"
    );
    assert_eq!(failed, 0);
    assert!(during_pause > 0, "no progress while jm-a was frozen");
    assert!(
        t.a.is_running(),
        "jm-a died after SIGCONT: {}",
        t.a.tail(30)
    );
    let views =
        rejoined.expect("after SIGCONT both job managers are registered with all 4 slots free");
    assert!(views.iter().all(|w| w.available_slots <= CONC), "{views:?}");
    wait_no_inflight(&t.addrs.admin);
    assert!(t.router.is_running());
}

/// Frames of one malformed (or unexpected) message, DEALER side.
fn junk(rng: &mut Rng) -> Vec<Vec<u8>> {
    const P: &[u8] = b"eMQP/1.0";
    let id = || emqp_proto::new_msgid().into_bytes();
    let rand_frames = |rng: &mut Rng, k: usize| -> Vec<Vec<u8>> {
        (0..k)
            .map(|_| {
                let len = rng.below(48);
                rng.bytes(len)
            })
            .collect()
    };
    // (command, minimum body frames)
    const CMDS: &[(&str, usize)] = &[
        ("INFORM", 1),
        ("ACK", 1),
        ("READY", 0),
        ("REQUEST", 3),
        ("REPLY", 1),
        ("HEARTBEAT", 0),
        ("KBYE", 0),
        ("SCHEDULE", 3),
        ("UNSCHEDULE", 3),
        ("PUBLISH", 2),
        ("STATUS", 0),
        ("ROUTER_SHOW_WORKERS", 0),
        ("ROUTER_SHOW_SCHEDULERS", 0),
        ("RESULT", 3),
        ("REJECT", 3),
    ];
    let mut f: Vec<Vec<u8>> = match rng.below(13) {
        0 => {
            let len = rng.below(64);
            vec![rng.bytes(len)]
        }
        1 => {
            let k = 1 + rng.below(8);
            rand_frames(rng, k)
        }
        2 => {
            let name: String = (0..1 + rng.below(12))
                .map(|_| (b'A' + rng.below(26) as u8) as char)
                .collect();
            let k = rng.below(4);
            let mut v = vec![vec![], P.to_vec(), format!("X{name}").into_bytes(), id()];
            v.extend(rand_frames(rng, k));
            v
        }
        3 => vec![
            P.to_vec(),
            b"REQUEST".to_vec(),
            id(),
            b"default".to_vec(),
            vec![],
            b"[]".to_vec(),
        ],
        4 => vec![
            vec![],
            b"eMQP/9.9".to_vec(),
            b"READY".to_vec(),
            id(),
            vec![0xff],
        ],
        5 => {
            let (cmd, min) = *rng.pick(CMDS);
            let body = if min == 0 { 0 } else { rng.below(min) };
            let mut v = vec![vec![], P.to_vec(), cmd.as_bytes().to_vec(), id()];
            if min > 0 {
                v.extend(rand_frames(rng, body));
            }
            v
        }
        6 => {
            let mut v = vec![
                vec![],
                P.to_vec(),
                b"REQUEST".to_vec(),
                id(),
                b"default".to_vec(),
                vec![],
                b"x".to_vec(),
            ];
            let slot = [3usize, 4, 5][rng.below(3)];
            v[slot] = vec![0xff, 0xfe, 0x80];
            v
        }
        7 => vec![
            vec![],
            P.to_vec(),
            b"REQUEST".to_vec(),
            id(),
            b"default".to_vec(),
            rng.pick(&[
                &b"retry-count:abc"[..],
                b"timeout:-1",
                b"retry-count:99999999999",
            ])
            .to_vec(),
            b"not a job".to_vec(),
        ],
        8 => {
            let q = rng
                .pick(&[
                    &b"[["[..],
                    b"{\"a\": 1}",
                    b"[[\"x\", \"y\"]]",
                    b"[[10]]",
                    b"[[-1, \"q\"]]",
                    b"\xff\xfe",
                ])
                .to_vec();
            vec![
                vec![],
                P.to_vec(),
                b"INFORM".to_vec(),
                id(),
                q,
                b"worker".to_vec(),
            ]
        }
        9 => vec![
            vec![],
            P.to_vec(),
            b"INFORM".to_vec(),
            id(),
            b"[[10, \"default\"]]".to_vec(),
            b"alien".to_vec(),
        ],
        10 => {
            let which = rng.below(3);
            match which {
                0 => vec![
                    vec![],
                    P.to_vec(),
                    b"REPLY".to_vec(),
                    id(),
                    b"{\"value\": 1}".to_vec(),
                    id(),
                    b"ok".to_vec(),
                ],
                1 => vec![
                    vec![],
                    P.to_vec(),
                    b"RESULT".to_vec(),
                    id(),
                    id(),
                    b"ok".to_vec(),
                    b"{}".to_vec(),
                ],
                _ => vec![vec![], P.to_vec(), b"ACK".to_vec(), id(), id()],
            }
        }
        11 => vec![
            vec![],
            P.to_vec(),
            b"REQUEST".to_vec(),
            id(),
            rng.bytes(20_000),
        ],
        _ => {
            let cmd = rng.pick(&["READY", "HEARTBEAT", "KBYE", "ready", "Heartbeat"]);
            vec![
                vec![],
                P.to_vec(),
                cmd.as_bytes().to_vec(),
                if rng.below(2) == 0 { vec![] } else { id() },
            ]
        }
    };
    // Never an accidental shutdown request, whatever the shape.
    for fr in f.iter_mut() {
        if fr.eq_ignore_ascii_case(b"DISCONNECT") {
            *fr = b"XDISCONNECT".to_vec();
        }
    }
    f
}

#[test]
fn malformed_flood_on_all_sockets_does_not_stop_real_jobs() {
    let _s = serial();
    let total = env_usize("EMQ_MALFORMED", 10_000);
    let (mut router, addrs) = start_router(&[]);
    let mut jm = start_jobmanager("jm", &addrs.backend, &["--concurrency", "4"]);
    admin::wait_idle_workers(&addrs.admin, 1, CONC, Duration::from_secs(20))
        .expect("job manager up");

    let (mut rng, seed) = Rng::from_env();
    integration_tests::report(&format!("malformed flood: EMQ_FUZZ_SEED={seed}"));
    let endpoints = [&addrs.frontend, &addrs.backend, &addrs.admin];
    let mut junk_socks = Vec::new();
    for (s, ep) in endpoints.iter().enumerate() {
        for k in 0..3 {
            let sock = zmq_ctx().socket(zmq::DEALER).unwrap();
            let identity = if k == 1 {
                // Not UTF-8 (0.3.13 dies on such an identity).
                let mut b = vec![0xff, 0xfe];
                b.extend(rng.bytes(6));
                b
            } else {
                emqp_proto::new_msgid().into_bytes()
            };
            sock.set_identity(&identity).unwrap();
            sock.set_linger(0).unwrap();
            sock.set_sndhwm(0).unwrap();
            // Connected (handshake done) before the flood starts, so junk
            // and real jobs interleave instead of arriving in one burst.
            integration_tests::connect_and_wait(&sock, ep, Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("junk socket {s}/{k}: {e}"));
            junk_socks.push((s, sock));
        }
    }

    let mut client = Client::connect(&addrs.frontend);
    let mut real = Vec::new();
    let mut sent = [0usize; 3];
    let mut answers = 0usize;
    for i in 0..total {
        let (s, sock) = &junk_socks[rng.below(junk_socks.len())];
        sock.send_multipart(junk(&mut rng), 0).unwrap();
        sent[*s] += 1;
        if i % 50 == 0 {
            let k = real.len();
            real.push((
                k,
                client.submit_reply("default", jobs::call("echo", json!({"i": k}))),
            ));
        }
        if i % 500 == 499 {
            for (_, sock) in &junk_socks {
                while sock.recv_multipart(zmq::DONTWAIT).is_ok() {
                    answers += 1;
                }
            }
            client.pump(Duration::ZERO);
        }
    }
    let ids: Vec<String> = real.iter().map(|(_, id)| id.clone()).collect();
    let res = client.wait_finished(&ids, Duration::from_secs(120));
    client.pump(Duration::from_millis(300));
    let (tally, failed) = client_tally(&client, &ids);
    let wrong = real
        .iter()
        .filter(|(k, id)| {
            client
                .result(id)
                .is_some_and(|o| o.json() != json!({"value": {"i": k}}))
        })
        .count();
    integration_tests::report(&format!(
        "FAULT malformed: sent {total} malformed messages (frontend {}, backend {}, admin {}), \
         {answers} answers to them; real jobs: {tally}, failed={failed}, wrong results={wrong}, rejected={}",
        sent[0],
        sent[1],
        sent[2],
        client.rejects.len()
    ));
    assert!(
        router.is_running(),
        "router died under malformed input: {}",
        router.tail(30)
    );
    assert!(
        res.is_ok(),
        "real jobs unfinished: {:?}",
        res.unwrap_err().len()
    );
    assert_eq!(
        tally.lost,
        0,
        "rejects: {:?}",
        client.rejects.values().next()
    );
    assert_eq!(tally.duplicated, 0);
    assert_eq!((failed, wrong), (0, 0));
    let st = admin::status(&addrs.admin).expect("router still answers STATUS");
    if let Some(c) = st.get("counters") {
        integration_tests::report(&format!("  router counters: {c}"));
    }
    assert!(jm.is_running(), "job manager died: {}", jm.tail(30));
    let log = router.stderr();
    assert!(
        !log.contains("panicked"),
        "router panicked:\n{}",
        router.tail(40)
    );
}

fn router_has_journal() -> bool {
    let out = run(
        Spawn::new("emq-router-help", bins::bin(bins::ROUTER)).arg("--help"),
        Duration::from_secs(20),
    );
    out.stdout.contains("--journal")
}

#[test]
fn router_restart_on_its_journal_keeps_buffered_jobs() {
    let _s = serial();
    if !router_has_journal() {
        integration_tests::report("SKIPPED router_restart_on_its_journal_keeps_buffered_jobs: emq-router has no --journal flag");
        return;
    }
    let m = 50;
    let dir = scratch_dir("journal");
    let journal = dir.join("router.journal");
    let file = dir.join("exec.txt");
    let addrs = Addrs::fresh();
    let j = journal.display().to_string();
    let mut router =
        start_router_on(&addrs, &["--journal", &j]).expect("router with a journal starts");
    let mut client = Client::connect(&addrs.frontend);
    let tags: Vec<String> = (0..m).map(|i| format!("r{i}")).collect();
    let ids: Vec<String> = tags
        .iter()
        .map(|tag| client.submit_reply("default", jobs::shell_record(&file, tag, "0")))
        .collect();
    // No job manager yet: every job is buffered, and acknowledged.
    assert!(
        client.wait_for(Duration::from_secs(10), |c| ids
            .iter()
            .all(|i| c.acks.contains_key(i))),
        "not all buffered jobs acknowledged: {} of {m}",
        client.acks.len()
    );
    let st = router.kill9();
    eprintln!("router killed with SIGKILL: {st:?}");
    drop(router);

    let _router2 =
        start_router_on(&addrs, &["--journal", &j]).expect("router restarts on the same journal");
    let _jm = start_jobmanager("jm", &addrs.backend, &["--concurrency", "4"]);
    let seen = poll_until(Duration::from_secs(60), Duration::from_millis(200), || {
        let c = jobs::count_lines(&file);
        tags.iter().all(|t| c.contains_key(t)).then_some(c)
    });
    let exec = jobs::count_lines(&file);
    let tally = Tally::of(&tags, &exec);
    client.pump(Duration::from_secs(2));
    let results = ids
        .iter()
        .filter(|i| client.results.contains_key(*i))
        .count();
    integration_tests::report(&format!("FAULT journal restart (router SIGKILLed with {m} buffered jobs): executions: {tally}; results delivered to the reconnected client: {results}/{m}"));
    assert!(
        seen.is_some(),
        "buffered jobs lost across the router restart: {tally}"
    );
}

/// Issue 6, fault test 2: jobs flowing through two job managers, the router
/// killed with SIGKILL mid-run and restarted on the same journal and ports.
/// Every job the router acknowledged before it died must run (the job
/// managers reconnect on their own; the client's DEALER reconnects with the
/// same identity, so restored jobs' RESULTs still reach it).
#[test]
fn router_sigkill_mid_run_and_restart_on_journal_completes_every_accepted_job() {
    let _s = serial();
    let n = env_usize("EMQ_FAULT_JOBS", 2000);
    let dir = scratch_dir("router-kill9");
    let journal = dir.join("router.journal").display().to_string();
    let file = dir.join("exec.txt");
    let addrs = Addrs::fresh();
    let mut extra = vec!["--journal", journal.as_str()];
    extra.extend(FAST_HEARTBEAT);
    let mut router = start_router_on(&addrs, &extra).expect("router with a journal starts");
    let _a = start_jobmanager("jm-a", &addrs.backend, &jm_args());
    let _b = start_jobmanager("jm-b", &addrs.backend, &jm_args());
    admin::wait_idle_workers(&addrs.admin, 2, 2 * CONC, Duration::from_secs(20))
        .expect("two job managers with 4 slots each");

    let mut client = Client::connect(&addrs.frontend);
    let tags: Vec<String> = (0..n).map(|i| format!("rk{i}")).collect();
    let ids: Vec<String> = tags
        .iter()
        .map(|tag| client.submit_reply("default", jobs::shell_record(&file, tag, "0")))
        .collect();
    let budget = wait_for_a_third(&mut client, n);
    let st = router.kill9();
    let acked: Vec<usize> = (0..n)
        .filter(|i| client.acks.contains_key(&ids[*i]))
        .collect();
    let done_at_kill = jobs::count_lines(&file).len();
    eprintln!(
        "router killed ({st:?}) with {} of {n} jobs acknowledged, {done_at_kill} executed",
        acked.len()
    );
    drop(router);

    let mut router2 =
        start_router_on(&addrs, &extra).expect("router restarts on the same journal and ports");
    let accepted_tags: Vec<String> = acked.iter().map(|i| tags[*i].clone()).collect();
    let all_ran = poll_until(budget, Duration::from_millis(200), || {
        let c = jobs::count_lines(&file);
        accepted_tags
            .iter()
            .all(|t| c.contains_key(t))
            .then_some(())
    });
    client.pump(Duration::from_secs(2));
    let exec = jobs::count_lines(&file);
    let accepted_tally = Tally::of(&accepted_tags, &exec);
    let all_tally = Tally::of(&tags, &exec);
    let accepted_ids: Vec<String> = acked.iter().map(|i| ids[*i].clone()).collect();
    let (res_tally, failed) = client_tally(&client, &accepted_ids);
    integration_tests::report(&format!(
        "FAULT router kill-9 mid-run + journal restart: submitted={n} acknowledged={} executed-before-kill={done_at_kill}; \
         acknowledged jobs: executions {accepted_tally}; all submitted: executions {all_tally}; \
         results for acknowledged jobs: {res_tally}, failed={failed}",
        acked.len()
    ));
    assert!(
        all_ran.is_some(),
        "acknowledged jobs lost across the router crash: {accepted_tally}"
    );
    assert_eq!(accepted_tally.lost, 0);
    assert!(
        router2.is_running(),
        "restarted router died: {}",
        router2.tail(30)
    );
    wait_no_inflight(&addrs.admin);
}
