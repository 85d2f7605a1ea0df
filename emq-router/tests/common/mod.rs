//! The real emq-router binary for this crate's tests, through emq-testkit
//! (own process group, no machine config file, no inherited `EVENTMQ_*`,
//! stderr logged under `target/emq-it-logs/<test>/`, stopped on drop):
//! every socket on `tcp://127.0.0.1:*`, the ports it got read back from
//! its `listening:` log lines.
#![allow(dead_code)]

use std::time::Duration;

use emq_testkit::{Proc, Spawn};

pub const BIN: &str = env!("CARGO_BIN_EXE_emq-router");

/// How long a router gets to log its endpoints.
pub const START: Duration = Duration::from_secs(20);

/// The router with its three sockets on `tcp://127.0.0.1:*`, `--journal
/// none` unless `extra` names a `--journal` (parallel tests never share
/// the default file), then `extra`; logging at info.
pub fn router(extra: &[&str]) -> Spawn {
    let journal: &[&str] = if extra.contains(&"--journal") {
        &[]
    } else {
        &["--journal", "none"]
    };
    Spawn::new("emq-router", BIN)
        .args([
            "--frontend",
            "tcp://127.0.0.1:*",
            "--backend",
            "tcp://127.0.0.1:*",
            "--admin",
            "tcp://127.0.0.1:*",
        ])
        .args(journal)
        .args(extra)
        .env("RUST_LOG", "info")
}

/// A started router and the endpoints it logged.
pub struct Router {
    pub proc: Proc,
    pub frontend: String,
    pub backend: String,
    pub admin: String,
}

/// Start `spawn` and wait until the router logs its three endpoints.
pub fn start(spawn: Spawn) -> Router {
    let mut proc = spawn.spawn();
    let frontend = listening(&mut proc, "frontend");
    let backend = listening(&mut proc, "backend");
    let admin = listening(&mut proc, "admin");
    Router {
        proc,
        frontend,
        backend,
        admin,
    }
}

/// The address of a `listening: WHAT ADDRESS ...` log line (within
/// [`START`]).
pub fn listening(proc: &mut Proc, what: &str) -> String {
    let tag = format!("listening: {what} ");
    let line = proc
        .wait_for_log_line(&tag, START)
        .unwrap_or_else(|e| panic!("{e}"));
    line.split(&tag)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string()
}
