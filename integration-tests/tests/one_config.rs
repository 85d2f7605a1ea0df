//! One configuration for every tool (issue 32): the router, the job
//! manager, emq-sender and emq-cli read the same INI file
//! (`EVENTMQ_CONFIG_FILE`) with the same names, the job manager takes the
//! router's `BACKEND_ADDR` (0.3.13's `WORKER_ADDR` kept), and a key no
//! tool reads is reported with the nearest known name.

use std::time::Duration;

use integration_tests::bins::{self, SENDER};
use integration_tests::cluster::{wait_router_ready, Addrs, ROUTER_READY};
use integration_tests::process::{run, scratch_dir};
use integration_tests::{admin, python, Spawn};
use serde_json::Value;

const RUN_LIMIT: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(20);

/// A config file with the router's three addresses in `[router]` (bind
/// addresses with a wildcard host, as an operator writes them), the
/// `extra` lines after them.
fn config_file(label: &str, a: &Addrs, extra: &str) -> std::path::PathBuf {
    let wildcard = |e: &str| e.replace("127.0.0.1", "*");
    let path = scratch_dir(label).join("eventmq.conf");
    std::fs::write(
        &path,
        format!(
            "[router]\nfrontend_addr = {}\nbackend_addr = {}\nadministrative_addr = {}\n{extra}",
            wildcard(&a.frontend),
            wildcard(&a.backend),
            wildcard(&a.admin)
        ),
    )
    .expect("write the config file");
    path
}

#[test]
fn router_sender_and_cli_read_one_file_and_the_jobmanager_takes_eventmq_backend_addr() {
    let addrs = Addrs::fresh();
    let conf = config_file("one-config", &addrs, "http_adr = 127.0.0.1:1\n");
    let journal = scratch_dir("one-config-journal").join("router.journal");
    // No address flag anywhere below: each tool finds its address in the file.
    let mut router = Spawn::new("emq-router", bins::bin(bins::ROUTER))
        .args(["--journal", &journal.display().to_string()])
        .env("EVENTMQ_CONFIG_FILE", &conf)
        .spawn();
    wait_router_ready(&mut router, &addrs, ROUTER_READY)
        .expect("the router binds the file's addresses");
    let warning = router
        .wait_for_log_line("unknown setting HTTP_ADR", WAIT)
        .expect("the router reports the mistyped key");
    assert!(
        warning.contains(&conf.display().to_string())
            && warning.contains("[router]")
            && warning.contains("did you mean HTTP_ADDR?"),
        "{warning}"
    );

    // The job manager: EVENTMQ_BACKEND_ADDR, the router's own name for it
    // (a wildcard bind address, reached on loopback).
    let _jm = Spawn::new("emq-jobmanager", bins::bin(bins::JOBMANAGER))
        .args([
            "--python",
            &python::job_python(),
            "--prefetch",
            "0",
            "--concurrency",
            "1",
        ])
        .env(
            "EVENTMQ_BACKEND_ADDR",
            addrs.backend.replace("127.0.0.1", "*"),
        )
        .spawn();
    admin::wait_idle_workers(&addrs.admin, 1, 1, WAIT)
        .expect("the job manager found the router at EVENTMQ_BACKEND_ADDR");
    // And with the file alone: the router's BACKEND_ADDR in [router].
    let _jm2 = Spawn::new("emq-jobmanager", bins::bin(bins::JOBMANAGER))
        .args([
            "--python",
            &python::job_python(),
            "--prefetch",
            "0",
            "--concurrency",
            "1",
        ])
        .env("EVENTMQ_CONFIG_FILE", &conf)
        .spawn();
    admin::wait_idle_workers(&addrs.admin, 2, 2, WAIT)
        .expect("the job manager found the router in the file's [router] section");

    // emq-sender: FRONTEND_ADDR from the file's [router] section.
    let out = run(
        Spawn::new(SENDER, bins::bin(SENDER))
            .args(["--wait", "--call", "echo", "--args", "[\"from the file\"]"])
            .env("EVENTMQ_CONFIG_FILE", &conf),
        RUN_LIMIT,
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    assert!(out.stdout.contains("from the file"), "{}", out.describe());
    assert!(
        out.stderr.contains("unknown setting HTTP_ADR")
            && out.stderr.contains("did you mean HTTP_ADDR?"),
        "{}",
        out.describe()
    );

    // emq-cli: ADMINISTRATIVE_ADDR from the same section, the same warning.
    let out = run(
        Spawn::new("emq-cli", bins::bin("emq-cli"))
            .args(["workers"])
            .env("EVENTMQ_CONFIG_FILE", &conf),
        RUN_LIMIT,
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    assert!(
        out.stderr.contains("emq-cli: warning: ") && out.stderr.contains("did you mean HTTP_ADDR?"),
        "{}",
        out.describe()
    );
    router.stop();
}

#[test]
fn the_jobmanager_reads_worker_addr_as_0313_did() {
    let (_router, addrs) = integration_tests::cluster::start_router(&[]);
    let _jm = Spawn::new("emq-jobmanager", bins::bin(bins::JOBMANAGER))
        .args([
            "--python",
            &python::job_python(),
            "--prefetch",
            "0",
            "--concurrency",
            "1",
        ])
        .env("EVENTMQ_WORKER_ADDR", &addrs.backend)
        .spawn();
    admin::wait_idle_workers(&addrs.admin, 1, 1, WAIT)
        .expect("the job manager found the router at EVENTMQ_WORKER_ADDR");
}

#[test]
fn the_vocabulary_lists_every_setting_with_its_older_names() {
    let out = run(
        Spawn::new("emq-cli", bins::bin("emq-cli")).args(["vocabulary"]),
        RUN_LIMIT,
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    let v: Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    let settings = v["settings"].as_array().expect("a settings list");
    let find = |name: &str| {
        settings
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in {settings:?}"))
    };
    assert_eq!(
        find("BACKEND_ADDR")["aliases"],
        serde_json::json!(["WORKER_ADDR"])
    );
    assert_eq!(find("FRONTEND_ADDR")["env"], "EVENTMQ_FRONTEND_ADDR");
    assert!(find("ADMINISTRATIVE_ADDR")["sections"]
        .as_array()
        .unwrap()
        .contains(&Value::from("cli")));
}

#[test]
fn workers_are_shown_by_name_at_host_with_pid_concurrency_and_version_across_reconnects() {
    let (mut router, addrs) = integration_tests::cluster::start_router(&[]);
    let jm = integration_tests::cluster::start_jobmanager(
        "emq-jobmanager",
        &addrs.backend,
        &["--concurrency", "3", "--name", "mailer"],
    );
    let workers = admin::wait_idle_workers(&addrs.admin, 1, 3, WAIT).expect("registers");
    let first_identity = workers[0].id.clone();
    let show = || {
        run(
            Spawn::new("emq-cli", bins::bin("emq-cli")).args(["--admin", &addrs.admin, "workers"]),
            RUN_LIMIT,
        )
    };
    let out = show();
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let row = out.stdout.lines().nth(1).unwrap_or_default().to_string();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[0], format!("mailer@{host}"), "{}", out.describe());
    assert_eq!(cells[1], first_identity);
    assert_eq!(
        cells[2],
        jm.pid().to_string(),
        "the pid: {}",
        out.describe()
    );
    assert_eq!(cells[3], env!("CARGO_PKG_VERSION"), "{}", out.describe());
    assert_eq!(cells[5], "3", "concurrency: {}", out.describe());
    // A new router on the same addresses: the job manager reconnects on a
    // new identity, under the same name.
    router.stop();
    let mut router = integration_tests::cluster::start_router_on(&addrs, &[])
        .expect("a router again on the same ports");
    let again = admin::wait_workers(&addrs.admin, WAIT, |w| {
        w.len() == 1 && w[0].id != first_identity
    })
    .expect("the job manager reconnects");
    assert_ne!(again[0].id, first_identity);
    let out = show();
    assert!(
        out.stdout
            .lines()
            .nth(1)
            .unwrap_or_default()
            .starts_with(&format!("mailer@{host} ")),
        "{}",
        out.describe()
    );
    // drain by name.
    let out = run(
        Spawn::new("emq-cli", bins::bin("emq-cli")).args([
            "--admin",
            &addrs.admin,
            "drain",
            &format!("mailer@{host}"),
        ]),
        RUN_LIMIT,
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    router.stop();
}
