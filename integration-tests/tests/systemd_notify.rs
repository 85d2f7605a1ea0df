//! `Type=notify` units: the router and the job manager tell the service
//! manager they are ready, and that they stop, through `$NOTIFY_SOCKET`
//! (systemd's `sd_notify` datagrams). The test plays systemd: it binds a
//! Unix datagram socket of its own, starts the real binaries with
//! `NOTIFY_SOCKET` naming it, and reads what they send.
//!
//! - The router says `READY=1` only once it serves: STATUS on its admin
//!   socket is answered at that moment; `STOPPING=1` on SIGTERM, then
//!   exits 0.
//! - The job manager says `READY=1` with the router it connected to, and
//!   `STOPPING=1` on SIGTERM; the jobs it runs do not inherit
//!   `NOTIFY_SOCKET` (only the main process may notify).
//! - With a PostgreSQL journal, a router says `READY=1` as a standby (it
//!   is up and doing its job: waiting; a unit must not time out for it),
//!   with the status line `standby: …`, and `serving (…)` once it holds
//!   the lease.
//! - A `NOTIFY_SOCKET` nobody listens on changes nothing: the router
//!   starts and serves.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use integration_tests::bins::{self, SENDER};
use integration_tests::cluster::{wait_router_ready, Addrs, ROUTER_READY};
use integration_tests::postgres::PgCluster;
use integration_tests::process::{run, scratch_dir};
use integration_tests::{admin, python, Proc, Spawn};
use serde_json::Value;

/// A socket path short enough for `sockaddr_un` (108 bytes; the scratch
/// directories under target/ are too deep), unique to this test process.
fn socket_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("emq-sd-{}-{name}", std::process::id()))
}

/// The service manager's end: a datagram socket (removed on drop).
struct FakeSystemd {
    sock: UnixDatagram,
    path: std::path::PathBuf,
    /// Every datagram received so far, in order.
    seen: Vec<String>,
}

impl FakeSystemd {
    fn bind(name: &str) -> FakeSystemd {
        let path = socket_path(name);
        let _ = std::fs::remove_file(&path);
        let sock = UnixDatagram::bind(&path).expect("bind the notify socket");
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("read timeout");
        FakeSystemd {
            sock,
            path,
            seen: Vec::new(),
        }
    }

    /// Wait (bounded) for a datagram with the line `line`; the datagram.
    fn wait_for(&mut self, line: &str, timeout: Duration) -> Result<String, String> {
        self.wait_until(line, timeout, |l| l == line)
    }

    /// Wait (bounded) for a datagram whose status line starts with `prefix`.
    fn wait_for_status(&mut self, prefix: &str, timeout: Duration) -> Result<String, String> {
        let what = format!("STATUS={prefix}…");
        self.wait_until(&what, timeout, |l| {
            l.strip_prefix("STATUS=")
                .is_some_and(|s| s.starts_with(prefix))
        })
    }

    fn wait_until(
        &mut self,
        line: &str,
        timeout: Duration,
        matches: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            if let Ok(n) = self.sock.recv(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                self.seen.push(text.clone());
                if text.lines().any(&matches) {
                    return Ok(text);
                }
            }
        }
        Err(format!(
            "no {line} within {timeout:?}; received: {:?}",
            self.seen
        ))
    }
}

impl Drop for FakeSystemd {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `STATUS=…` of a notification.
fn status_line(datagram: &str) -> &str {
    datagram
        .lines()
        .find_map(|l| l.strip_prefix("STATUS="))
        .unwrap_or("")
}

fn router_with_notify(addrs: &Addrs, notify: &Path, journal: &str) -> Proc {
    Spawn::new("emq-router", bins::bin(bins::ROUTER))
        .args(["--frontend", &addrs.frontend, "--backend", &addrs.backend])
        .args(["--admin", &addrs.admin, "--journal", journal])
        .env("NOTIFY_SOCKET", notify)
        .spawn()
}

#[test]
fn router_and_jobmanager_tell_systemd_ready_and_stopping() {
    let dir = scratch_dir("systemd-notify");
    let mut systemd = FakeSystemd::bind("router");
    let addrs = Addrs::fresh();
    let journal = dir.join("journal.sqlite").display().to_string();
    let mut router = router_with_notify(&addrs, &systemd.path, &journal);

    let ready = systemd
        .wait_for("READY=1", ROUTER_READY)
        .unwrap_or_else(|e| panic!("router: {e}; stderr:\n{}", router.tail(30)));
    // READY means serving: the admin socket answers right away.
    let status = admin::query(
        &addrs.admin,
        emqp_proto::Command::Status,
        Duration::from_secs(2),
    )
    .unwrap_or_else(|e| panic!("READY sent but STATUS unanswered: {e}"));
    assert!(status.is_object(), "{status}");
    assert!(
        status_line(&ready).starts_with("serving (journal "),
        "router's status line: {ready:?}"
    );

    // The job manager, with a socket of its own.
    let mut jm_systemd = FakeSystemd::bind("jobmanager");
    let mut jm = Spawn::new("emq-jobmanager", bins::bin(bins::JOBMANAGER))
        .args(["--broker", &addrs.backend, "--concurrency", "1"])
        .args(["--python", &python::job_python()])
        .env("NOTIFY_SOCKET", &jm_systemd.path)
        .spawn();
    let ready = jm_systemd
        .wait_for("READY=1", Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("job manager: {e}; stderr:\n{}", jm.tail(30)));
    assert_eq!(
        status_line(&ready),
        format!("connected to {} (1 slot(s))", addrs.backend),
        "{ready:?}"
    );
    admin::wait_idle_workers(&addrs.admin, 1, 1, Duration::from_secs(20))
        .expect("the job manager registers");

    // A shell job does not see NOTIFY_SOCKET.
    let out = run(
        Spawn::new("emq-sender", bins::bin(SENDER)).args([
            "--broker",
            &addrs.frontend,
            "--wait",
            "--timeout",
            "30",
            "--shell",
            "--",
            "sh",
            "-c",
            "echo \"notify=${NOTIFY_SOCKET-unset}\"",
        ]),
        Duration::from_secs(60),
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    let result: Value = out
        .stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l.trim()).ok())
        .unwrap_or_else(|| panic!("no result JSON: {}", out.describe()));
    let stdout = result["value"]["stdout"].as_str().unwrap_or_default();
    assert_eq!(stdout.trim(), "notify=unset", "{result}");

    jm.terminate();
    jm_systemd
        .wait_for("STOPPING=1", Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("job manager: {e}; stderr:\n{}", jm.tail(30)));
    let code = jm.wait_exit(Duration::from_secs(30)).map(|s| s.code());
    assert_eq!(code, Some(Some(0)), "job manager exit; {}", jm.tail(20));

    router.terminate();
    systemd
        .wait_for("STOPPING=1", Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("router: {e}; stderr:\n{}", router.tail(30)));
    let code = router.wait_exit(Duration::from_secs(30)).map(|s| s.code());
    assert_eq!(code, Some(Some(0)), "router exit; {}", router.tail(20));
}

#[test]
fn a_notify_socket_nobody_listens_on_changes_nothing() {
    let dir = scratch_dir("systemd-notify-absent");
    let addrs = Addrs::fresh();
    let journal = dir.join("journal.sqlite").display().to_string();
    let mut router = router_with_notify(&addrs, &socket_path("nobody"), &journal);
    wait_router_ready(&mut router, &addrs, ROUTER_READY).expect("the router serves");
    router.terminate();
    let code = router.wait_exit(Duration::from_secs(30)).map(|s| s.code());
    assert_eq!(code, Some(Some(0)), "router exit; {}", router.tail(20));
}

#[test]
fn a_standby_is_ready_and_says_standby_then_serving_after_the_takeover() {
    let Some(pg) = PgCluster::start_or_skip("systemd: standby ready") else {
        return;
    };
    let url = pg.create_database("sd_notify");
    let (a_addrs, b_addrs) = (Addrs::fresh(), Addrs::fresh());
    let mut a_systemd = FakeSystemd::bind("leader");
    let mut a = router_with_notify(&a_addrs, &a_systemd.path, &url);
    // Every router of a shared journal starts as a standby (READY at once),
    // then takes the free lease and serves.
    let ready = a_systemd
        .wait_for("READY=1", ROUTER_READY)
        .unwrap_or_else(|e| panic!("leader: {e}; stderr:\n{}", a.tail(30)));
    assert!(status_line(&ready).starts_with("standby: "), "{ready:?}");
    a_systemd
        .wait_for_status("serving (journal ", ROUTER_READY)
        .unwrap_or_else(|e| panic!("leader: {e}; stderr:\n{}", a.tail(30)));
    wait_router_ready(&mut a, &a_addrs, ROUTER_READY).expect("the leader serves");

    let mut b_systemd = FakeSystemd::bind("standby");
    let mut b = router_with_notify(&b_addrs, &b_systemd.path, &url);
    let ready = b_systemd
        .wait_for("READY=1", ROUTER_READY)
        .unwrap_or_else(|e| panic!("standby: {e}; stderr:\n{}", b.tail(30)));
    assert!(
        status_line(&ready).starts_with("standby: waiting for the leader lease"),
        "{ready:?}"
    );
    assert!(
        admin::query(
            &b_addrs.admin,
            emqp_proto::Command::Status,
            Duration::from_millis(300)
        )
        .is_err(),
        "a standby binds nothing"
    );

    // The leader stops (releasing the lease): the standby serves and says so.
    a.terminate();
    a_systemd
        .wait_for("STOPPING=1", Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("leader: {e}; stderr:\n{}", a.tail(30)));
    b_systemd
        .wait_for_status("serving (journal ", Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("standby: {e}; stderr:\n{}", b.tail(30)));
    wait_router_ready(&mut b, &b_addrs, ROUTER_READY).expect("the standby took over");
    b.terminate();
    let code = b.wait_exit(Duration::from_secs(30)).map(|s| s.code());
    assert_eq!(code, Some(Some(0)), "router exit; {}", b.tail(20));
}
