//! The real binary and its `--allow-admin` list: an empty list stops it at
//! once with an error naming the flag (it used to open the admin socket to
//! every host without a word), and `any` starts it with a warning. Every
//! router started here is stopped when its test ends (emq-testkit's
//! `Proc`); every wait is bounded.

mod common;

use std::time::Duration;

use common::router;
use emq_testkit::process::run_to_exit;

/// How long a router given a bad option may take to exit ("at once"; the
/// old binary never exited).
const AT_ONCE: Duration = Duration::from_secs(5);

/// Runs the router with `args` and `env` (bounded by AT_ONCE); its exit
/// code and stderr.
fn exit_at_once(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = run_to_exit(router(args).envs(env.iter().copied()), AT_ONCE);
    (out.code(), out.stderr)
}

#[test]
fn an_empty_admin_allowlist_flag_stops_the_router_naming_the_flag() {
    for empty in ["", ",", " , "] {
        let (code, err) = exit_at_once(&["--allow-admin", empty], &[]);
        assert_eq!(code, Some(1), "{empty:?}: {err}");
        assert!(
            err.contains("--allow-admin: empty list") && err.contains("\"any\""),
            "{empty:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        // Issue 32: said once (it was logged and printed again).
        assert_eq!(err.matches("empty list").count(), 1, "{empty:?}: {err}");
    }
}

#[test]
fn an_empty_admin_allowlist_in_the_environment_stops_the_router() {
    let (code, err) = exit_at_once(&[], &[("EVENTMQ_ALLOW_ADMIN", "")]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--allow-admin (from environment EVENTMQ_ALLOW_ADMIN): empty list"),
        "{err}"
    );
}

#[test]
fn an_admin_socket_open_to_any_address_is_warned_about_at_start() {
    let mut r = router(&["--allow-admin", "any"]).spawn();
    // Warnings come before the sockets bind: read up to the admin endpoint.
    common::listening(&mut r, "admin");
    let log = r.stderr();
    let before_admin: Vec<&str> = log
        .lines()
        .take_while(|l| !l.contains("listening: admin"))
        .collect();
    assert!(
        before_admin
            .iter()
            .any(|l| l.contains("WARN") && l.contains("admin socket accepts any address")),
        "no start-up warning for --allow-admin any:\n{log}"
    );
}

/// Issue 32: a bad `--http` address is refused while the flags are
/// checked, before anything is bound (the three ZMQ sockets were bound,
/// and logged as listening, before the dashboard found it), and said once.
#[test]
fn a_bad_http_address_stops_the_router_before_it_binds() {
    let (code, err) = exit_at_once(&["--http", "nonsense", "--journal", "none"], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.matches("--http nonsense").count(), 1, "{err}");
    assert!(!err.contains("listening"), "{err}");
}
