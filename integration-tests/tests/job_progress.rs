//! Job progress (issue 31): a Python job calls `emq_job.progress(...)`; the
//! job manager forwards it (PROGRESS), the router keeps the last report,
//! and while the job still runs `emq-cli job MSGID` (text and `--json`),
//! the Python client's `Job.progress()` and the dashboard's job view (a
//! bar, in Chromium) show it.

use std::time::Duration;

use integration_tests::bins::{self, target_dir};
use integration_tests::browser::{find_chromium, Browser};
use integration_tests::cluster::{jobmanager_command, start_router_on};
use integration_tests::in_ci;
use integration_tests::ports::free_port;
use integration_tests::process::{run, scratch_dir};
use integration_tests::python::{pythonpath, tests_python_dir, venv};
use integration_tests::{admin, Addrs, Proc, Spawn};
use serde_json::Value;

const TEST: &str = "job_progress";
const WAIT: Duration = Duration::from_secs(30);

fn stop(p: &mut Proc) {
    p.terminate();
    assert!(
        p.wait_exit(Duration::from_secs(20)).is_some(),
        "{} did not stop on SIGTERM",
        p.name
    );
}

fn cli(admin_addr: &str, args: &[&str]) -> String {
    let out = run(
        Spawn::new("emq-cli", bins::bin("emq-cli"))
            .args(["--admin", admin_addr])
            .args(args),
        WAIT,
    );
    assert_eq!(out.code(), Some(0), "emq-cli {args:?}: {}", out.describe());
    out.stdout
}

#[test]
fn a_running_jobs_progress_shows_in_emq_cli_and_the_python_client() {
    let Some(py) = venv(TEST) else { return };
    let addrs = Addrs::fresh();
    let http = format!("127.0.0.1:{}", free_port());
    let mut router = start_router_on(&addrs, &["--http", &http]).expect("router");
    let mut jm =
        jobmanager_command("emq-jobmanager", &addrs.backend, &["--concurrency", "1"]).spawn();
    admin::wait_idle_workers(&addrs.admin, 1, 1, Duration::from_secs(20))
        .expect("job manager registers");

    let release = scratch_dir("job-progress").join("release");
    let mut client = Spawn::new("progress-client", py.python())
        .arg(tests_python_dir().join("emq_test_progress.py"))
        .args([&addrs.frontend, &addrs.admin])
        .arg(&release)
        .env("PYTHONPATH", pythonpath())
        .spawn();
    let line = client
        .wait_for_stdout_line("msgid ", WAIT)
        .expect("submitted");
    let msgid = line.trim().strip_prefix("msgid ").unwrap().to_string();
    // The Python client saw 50 % (the last report, rounded down) while the
    // job waits to be released.
    let line = client
        .wait_for_stdout_line("progress ", WAIT)
        .expect("Job.progress() says 50 %");
    let seen: Value = serde_json::from_str(line.trim().strip_prefix("progress ").unwrap()).unwrap();
    assert_eq!(seen["percent"], 50);
    assert_eq!(seen["message"], "half way");

    // emq-cli, while it still runs.
    let v: Value = serde_json::from_str(&cli(&addrs.admin, &["--json", "job", &msgid])).unwrap();
    assert_eq!(v["job"]["state"], "in-flight", "{v}");
    assert_eq!(v["job"]["progress"]["percent"], 50, "{v}");
    assert_eq!(v["job"]["progress"]["message"], "half way", "{v}");
    assert!(v["job"]["progress"]["at_ms"].as_u64().unwrap() > 0);
    let text = cli(&addrs.admin, &["job", &msgid]);
    let row = text
        .lines()
        .find(|l| l.starts_with("progress:"))
        .unwrap_or_else(|| panic!("no progress row: {text}"));
    assert!(row.contains("50 % half way (reported "), "{row}");

    // The dashboard's job view: a bar at 50 %.
    match find_chromium() {
        Some(chromium) => {
            let mut b = Browser::launch(&chromium).expect("chromium starts");
            b.goto(&format!("http://{http}/#/job/{msgid}")).unwrap();
            b.wait_for(
                "the progress bar at 50 %",
                "document.querySelector('#job-progress progress')?.value === 50 && \
                 document.getElementById('job-progress').textContent.includes('50 % · half way')",
                WAIT,
            )
            .unwrap();
            let shot = target_dir()
                .join("screenshots")
                .join("dashboard-job-progress.png");
            b.screenshot(&shot).unwrap();
        }
        None if in_ci() => panic!("chromium is not installed and CI=true"),
        None => eprintln!("dashboard part skipped: no chromium on PATH"),
    }

    std::fs::write(&release, b"go").unwrap();
    client
        .wait_for_stdout_line("result \"released\"", WAIT)
        .expect("the job finishes");
    client
        .wait_for_stdout_line("after true", WAIT)
        .expect("no progress once it ended");
    assert_eq!(client.wait_exit(WAIT).map(|s| s.code()), Some(Some(0)));
    stop(&mut jm);
    stop(&mut router);
}
