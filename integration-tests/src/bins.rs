//! Where our binaries are, building them on demand.
//!
//! `CARGO_BIN_EXE_*` only exists for binaries of the test's own package, so
//! the binaries of the other workspace crates are located in the profile
//! directory the test executable itself lives in (`target/debug/deps/x` →
//! `target/debug/`). Unless `EMQ_SKIP_BUILD=1` (set by `scripts/test.sh`
//! after it built the workspace), the first use of a binary in a test
//! process runs `cargo build -p NAME --bin NAME` for it, so
//! `cargo test -p integration-tests` never runs stale binaries.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

pub const ROUTER: &str = "emq-router";
pub const JOBMANAGER: &str = "emq-jobmanager";
pub const SENDER: &str = "emq-sender";
pub const RECEIVER: &str = "emq-receiver";
pub const PUBSUB: &str = "emq-pubsub";

/// The workspace root (parent of this crate).
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// The profile directory (`target/debug` or `target/release`) holding our
/// binaries: `$EMQ_BIN_DIR`, else the one this test executable is in.
pub fn profile_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("EMQ_BIN_DIR") {
        return PathBuf::from(d);
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(deps) = exe.parent() {
            if deps.file_name().is_some_and(|n| n == "deps") {
                if let Some(p) = deps.parent() {
                    return p.to_path_buf();
                }
            }
        }
    }
    target_dir_fallback().join("debug")
}

fn target_dir_fallback() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => in_workspace(PathBuf::from(d)),
        None => workspace_root().join("target"),
    }
}

/// `p` if absolute, else `p` under the workspace root (paths given in
/// environment variables are relative to the repository).
pub fn in_workspace(p: PathBuf) -> PathBuf {
    if p.is_absolute() {
        p
    } else {
        workspace_root().join(p)
    }
}

/// The target directory (parent of the profile directory).
pub fn target_dir() -> PathBuf {
    let p = profile_dir();
    p.parent().map(Path::to_path_buf).unwrap_or(p)
}

fn cargo() -> String {
    std::env::var("CARGO")
        .ok()
        .or_else(|| option_env!("CARGO").map(String::from))
        .unwrap_or_else(|| "cargo".into())
}

/// The path of our binary `name` (package and binary share the name),
/// built first unless `EMQ_SKIP_BUILD=1`. Panics with cargo's output when
/// it does not build, or when it is missing.
pub fn bin(name: &str) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<String, Result<(), String>>>> = Mutex::new(None);
    let dir = profile_dir();
    let path = dir.join(name);
    let skip = std::env::var("EMQ_SKIP_BUILD").is_ok_and(|v| v == "1");
    if !skip {
        let mut guard = BUILT.lock().unwrap_or_else(|e| e.into_inner());
        let map = guard.get_or_insert_with(HashMap::new);
        let res = map
            .entry(name.to_string())
            .or_insert_with(|| build(name, &dir))
            .clone();
        if let Err(e) = res {
            panic!("{e}");
        }
    }
    assert!(
        path.is_file(),
        "{} does not exist: build the workspace first (`cargo build --workspace --bins`)",
        path.display()
    );
    path
}

fn build(name: &str, dir: &Path) -> Result<(), String> {
    let mut cmd = Command::new(cargo());
    cmd.current_dir(workspace_root())
        .args(["build", "--quiet", "-p", name, "--bin", name])
        .arg("--target-dir")
        .arg(target_dir());
    if dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run cargo to build {name}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`cargo build -p {name} --bin {name}` failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
