//! The real binary and its `--allow-admin` list: an empty list stops it at
//! once with an error naming the flag (it used to open the admin socket to
//! every host without a word), and `any` starts it with a warning. Every
//! router started here is killed in Drop; every wait is bounded.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a router given a bad option may take to exit ("at once"; the
/// old binary never exited).
const AT_ONCE: Duration = Duration::from_secs(5);

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The router on free loopback ports, with no journal and no config file,
/// plus `args` and `env`.
fn router(args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_emq-router"));
    cmd.args([
        "--frontend",
        "tcp://127.0.0.1:*",
        "--backend",
        "tcp://127.0.0.1:*",
        "--admin",
        "tcp://127.0.0.1:*",
        "--journal",
        "none",
    ])
    .args(args)
    .env("EVENTMQ_CONFIG_FILE", "")
    .env("RUST_LOG", "info")
    .env_remove("EVENTMQ_ALLOW_ADMIN")
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    Running(cmd.spawn().expect("start emq-router"))
}

/// Waits (bounded by AT_ONCE) for the router to exit; its code and stderr.
fn exit_at_once(mut r: Running) -> (Option<i32>, String) {
    let deadline = Instant::now() + AT_ONCE;
    let status = loop {
        if let Some(st) = r.0.try_wait().unwrap() {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "the router is still running after {AT_ONCE:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    r.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status.code(), err)
}

#[test]
fn an_empty_admin_allowlist_flag_stops_the_router_naming_the_flag() {
    for empty in ["", ",", " , "] {
        let (code, err) = exit_at_once(router(&["--allow-admin", empty], &[]));
        assert_eq!(code, Some(1), "{empty:?}: {err}");
        assert!(
            err.contains("--allow-admin: empty list") && err.contains("\"any\""),
            "{empty:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn an_empty_admin_allowlist_in_the_environment_stops_the_router() {
    let (code, err) = exit_at_once(router(&[], &[("EVENTMQ_ALLOW_ADMIN", "")]));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--allow-admin (from environment EVENTMQ_ALLOW_ADMIN): empty list"),
        "{err}"
    );
}

#[test]
fn an_admin_socket_open_to_any_address_is_warned_about_at_start() {
    let mut r = router(&["--allow-admin", "any"], &[]);
    let stderr = r.0.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Warnings come before the sockets bind: read up to the admin endpoint.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut warned = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("the router logged its admin endpoint in time");
        if line.contains("WARN") && line.contains("admin socket accepts any address") {
            warned = true;
        }
        if line.contains("listening: admin") {
            break;
        }
    }
    assert!(warned, "no start-up warning for --allow-admin any");
    drop(r);
}
