//! The dashboard as an operator uses it (issue 32), in headless Chromium
//! against a real router and job manager, at 1400 and 1920 px and on a
//! phone:
//!
//! - the Workers and Dead-letters tables fit the page (no horizontal
//!   scroll hides Drain / Retry / Discard);
//! - workers are shown by name (NAME@HOST);
//! - the jobs list shows `module.function(args)`, not the raw payload;
//! - the queues page's counts add up (Finished = Done + Failed + Dead) and
//!   say what they count;
//! - a failed job's page shows its traceback as text (no runner frames)
//!   and a Retry that queues it again;
//! - a phone's page does not overflow sideways.
//!
//! Screenshots go to `target/screenshots/operator-*.png` (the ones in
//! docs/screenshots/ were taken by this test). Without Chromium the test
//! is skipped, except under `CI=true`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use integration_tests::bins::{self, target_dir, SENDER};
use integration_tests::browser::{find_chromium, Browser};
use integration_tests::cluster::{start_jobmanager, start_router_on, Addrs};
use integration_tests::ports::free_port;
use integration_tests::process::{run, Proc};
use integration_tests::{in_ci, poll_until, Spawn};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);
const RUN_LIMIT: Duration = Duration::from_secs(60);

fn chromium() -> Option<PathBuf> {
    match find_chromium() {
        Some(p) => Some(p),
        None if in_ci() => panic!("chromium is not installed and CI=true"),
        None => {
            eprintln!(
                "SKIPPED: no chromium on PATH (apt-get install chromium, or set EMQ_CHROMIUM)"
            );
            None
        }
    }
}

fn router_with_dashboard(extra: &[&str]) -> (Proc, Addrs, String) {
    let mut last = String::new();
    for _ in 0..3 {
        let addrs = Addrs::fresh();
        let http = format!("127.0.0.1:{}", free_port());
        let mut args = vec!["--http", http.as_str()];
        args.extend_from_slice(extra);
        match start_router_on(&addrs, &args) {
            Ok(p) => return (p, addrs, format!("http://{http}")),
            Err(e) => last = e,
        }
    }
    panic!("router with --http did not start: {last}");
}

fn api_get(base: &str, path: &str) -> Value {
    let host = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(host).expect("connect to the dashboard");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut r = String::new();
    let _ = s.read_to_string(&mut r);
    let body = r.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    serde_json::from_str(body).unwrap_or(Value::Null)
}

/// emq-sender --wait with `args`; the msgid it names on stderr or prints.
fn send(frontend: &str, args: &[&str]) -> String {
    let out = run(
        Spawn::new(SENDER, bins::bin(SENDER))
            .args(["--broker", frontend, "--wait"])
            .args(args),
        RUN_LIMIT,
    );
    out.stderr
        .lines()
        .find_map(|l| l.strip_prefix("emq-sender: job "))
        .and_then(|l| l.split([' ', ':']).next())
        .map(str::to_string)
        .unwrap_or_default()
}

/// What overflows the page sideways at this width: the tables whose
/// content is wider than their box, action buttons past the right edge,
/// and the page itself; empty when everything fits.
const OVERFLOW: &str = "(() => {
  const bad = [];
  const w = window.innerWidth;
  if (document.documentElement.scrollWidth > w + 1) bad.push('page ' + document.documentElement.scrollWidth + ' > ' + w);
  document.querySelectorAll('.table-wrap').forEach((t, i) => {
    if (t.scrollWidth > t.clientWidth + 1) bad.push('table ' + i + ' ' + t.scrollWidth + ' > ' + t.clientWidth);
  });
  document.querySelectorAll('td.actions .btn, td.actions button').forEach(b => {
    const r = b.getBoundingClientRect();
    if (r.right > w + 1) bad.push('button ' + b.textContent + ' at ' + Math.round(r.right));
  });
  return bad.join('; ');
})()";

#[test]
fn the_dashboard_fits_at_1400_and_1920_shows_jobs_and_workers_by_name_and_retries_a_failed_job() {
    let Some(chromium) = chromium() else { return };
    let (_router, addrs, base) = router_with_dashboard(&["--retry-backoff", "0.1"]);
    let _jm = start_jobmanager(
        "jm",
        &addrs.backend,
        &[
            "--concurrency",
            "2",
            "--name",
            "billing-worker-with-a-long-name",
        ],
    );
    poll_until(WAIT, Duration::from_millis(100), || {
        (api_get(&base, "/api/workers")["workers"].as_array()?.len() == 1).then_some(())
    })
    .expect("the job manager connects");
    // A done job, a failed one, a dead letter (a long payload, as real
    // ones have).
    send(
        &addrs.frontend,
        &["--python", "emq_test_jobs.add", "--args", "[2, 3]"],
    );
    let failed = send(
        &addrs.frontend,
        &[
            "--python",
            "emq_test_jobs.shout_then_fail",
            "--args",
            "[\"fire\"]",
        ],
    );
    assert!(!failed.is_empty(), "the failed job's msgid");
    let long = format!("[\"{}\"]", "x".repeat(400));
    send(
        &addrs.frontend,
        &[
            "--header",
            "retry-count:1",
            "--python",
            "emq_test_jobs.fail",
            "--args",
            &long,
        ],
    );

    let mut b = Browser::launch(&chromium).expect("chromium starts");
    let shots = target_dir().join("screenshots");
    for width in [1400u32, 1920] {
        b.set_viewport(width, 1000, false).unwrap();
        for (page, ready) in [
            (
                "workers",
                "document.querySelector('[data-worker] .worker-name')",
            ),
            ("dead", "document.querySelector('td.actions .btn')"),
            ("jobs", "document.querySelector('[data-col=job]')"),
            ("queues", "document.querySelector('[data-col=finished]')"),
        ] {
            b.goto(&format!("{base}/#/{page}")).unwrap();
            b.wait_for(&format!("the {page} page at {width}px"), ready, WAIT)
                .unwrap();
            let over = b.eval(OVERFLOW).unwrap();
            assert_eq!(over, "", "{page} at {width}px overflows: {over}");
            b.screenshot(&shots.join(format!("operator-{page}-{width}.png")))
                .unwrap();
        }
    }
    // The queues page: one set of counts, with their legend; Finished is
    // Done + Failed + Dead (here 1 + 1 + 1).
    b.goto(&format!("{base}/#/queues")).unwrap();
    let counts = b
        .wait_for(
            "the default queue's counts",
            "(() => { const r = document.querySelector('[data-queue=default]'); if (!r) return null; \
             const c = k => r.querySelector('[data-col=' + k + ']').textContent; \
             return [c('finished'), c('processed'), c('failed'), c('dead')].join(' '); })()",
            WAIT,
        )
        .unwrap();
    assert_eq!(counts, "3 1 1 1", "finished done failed dead");
    let legend = b
        .eval("document.getElementById('counts-legend')?.textContent || ''")
        .unwrap();
    assert!(
        legend
            .as_str()
            .is_some_and(|l| l.contains("Finished = Done + Failed + Dead")),
        "{legend}"
    );
    // Workers by name.
    b.goto(&format!("{base}/#/workers")).unwrap();
    let name = b
        .wait_for(
            "the worker's name",
            "document.querySelector('[data-worker] .worker-name')?.textContent",
            WAIT,
        )
        .unwrap();
    assert!(
        name.as_str()
            .is_some_and(|n| n.starts_with("billing-worker-with-a-long-name@")),
        "{name}"
    );
    // The jobs list: the function and its arguments.
    b.goto(&format!("{base}/#/jobs")).unwrap();
    b.wait_for(
        "emq_test_jobs.add(2, 3) in the jobs list",
        "[...document.querySelectorAll('[data-col=job]')].some(e => e.textContent === 'emq_test_jobs.add(2, 3)')",
        WAIT,
    )
    .unwrap();
    // The failed job: its traceback as text, and Retry.
    b.goto(&format!("{base}/#/job/{failed}")).unwrap();
    let tb = b
        .wait_for(
            "the traceback",
            "document.getElementById('job-traceback')?.textContent",
            WAIT,
        )
        .unwrap();
    let tb = tb.as_str().unwrap_or_default();
    assert!(
        tb.starts_with("Traceback (most recent call last):\n")
            && tb.contains("in shout_then_fail\n")
            && tb.ends_with("ValueError: no fire")
            && !tb.contains("<string>"),
        "{tb}"
    );
    b.screenshot(&shots.join("operator-failed-job-1920.png"))
        .unwrap();
    let failed_before = api_get(&base, "/api/status")["counters"]["failed"]
        .as_u64()
        .unwrap_or(0);
    b.click("[data-action=requeue]").unwrap();
    poll_until(WAIT, Duration::from_millis(100), || {
        let n = api_get(&base, "/api/status")["counters"]["failed"].as_u64()?;
        (n > failed_before).then_some(())
    })
    .expect("the retried job ran (and failed) again");

    // A phone: nothing overflows the page sideways (wide tables scroll in
    // their own box).
    b.set_viewport(390, 844, true).unwrap();
    for page in ["overview", "workers", "dead", "jobs"] {
        b.goto(&format!("{base}/#/{page}")).unwrap();
        b.wait_for(
            &format!("the {page} page on a phone"),
            "document.querySelector('main .card')",
            WAIT,
        )
        .unwrap();
        let w = b
            .eval("document.documentElement.scrollWidth <= window.innerWidth + 1 ? '' : document.documentElement.scrollWidth + ' > ' + window.innerWidth")
            .unwrap();
        assert_eq!(w, "", "{page} on a phone overflows: {w}");
        b.screenshot(&shots.join(format!("operator-{page}-phone.png")))
            .unwrap();
    }
}
