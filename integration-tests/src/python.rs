//! The Python side: the venv made by `scripts/setup-python.sh` with the real
//! EventMQ 0.3.13, and `tests/python/` (job module and client script).
//!
//! Interop tests call [`venv`]: when the venv is missing or broken it
//! panics under CI (`CI=true`: interop must never be skipped silently) and
//! otherwise prints why the test is skipped and returns `None`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use crate::bins::{in_workspace, workspace_root};
use crate::process::{run, RunOutput, Spawn};

/// `$EMQ_PY_VENV`, else `<repo>/.venv`.
pub fn venv_dir() -> PathBuf {
    match std::env::var_os("EMQ_PY_VENV") {
        Some(v) if !v.is_empty() => in_workspace(PathBuf::from(v)),
        _ => workspace_root().join(".venv"),
    }
}

/// `<repo>/tests/python`: `emq_test_jobs.py`, `eventmq_0313_client.py`.
pub fn tests_python_dir() -> PathBuf {
    workspace_root().join("tests").join("python")
}

/// `PYTHONPATH` value with `tests/python` first.
pub fn pythonpath() -> String {
    let mut p = tests_python_dir().display().to_string();
    if let Ok(old) = std::env::var("PYTHONPATH") {
        if !old.is_empty() {
            p.push(':');
            p.push_str(&old);
        }
    }
    p
}

/// The interpreter our job manager should run Python jobs with: the venv's
/// when there is one (same as 0.3.13's), else `python3`.
pub fn job_python() -> String {
    let v = venv_dir().join("bin").join("python");
    if v.is_file() {
        v.display().to_string()
    } else {
        "python3".into()
    }
}

/// A venv with eventmq 0.3.13.
#[derive(Debug, Clone)]
pub struct PyEnv {
    pub dir: PathBuf,
}

impl PyEnv {
    pub fn python(&self) -> PathBuf {
        self.dir.join("bin").join("python")
    }

    /// eventmq's own `emq-router` console script (not ours!).
    pub fn router_script(&self) -> PathBuf {
        self.dir.join("bin").join("emq-router")
    }

    /// eventmq's own `emq-jobmanager` console script (not ours!).
    pub fn jobmanager_script(&self) -> PathBuf {
        self.dir.join("bin").join("emq-jobmanager")
    }

    /// eventmq's own `emq-pubsub` console script (not ours!).
    pub fn pubsub_script(&self) -> PathBuf {
        self.dir.join("bin").join("emq-pubsub")
    }

    /// eventmq's `emq-scheduler` console script.
    pub fn scheduler_script(&self) -> PathBuf {
        self.dir.join("bin").join("emq-scheduler")
    }

    /// `tests/python/eventmq_0313_publisher.py`.
    pub fn publisher_script(&self) -> PathBuf {
        tests_python_dir().join("eventmq_0313_publisher.py")
    }

    /// Whether the venv's Python imports `module`. When it does not: a
    /// panic under CI (`scripts/setup-python.sh` installs what the tests
    /// need), else `false` and the reason printed (the test is skipped).
    pub fn require_module(&self, test: &str, module: &str) -> bool {
        let ok = Command::new(self.python())
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return true;
        }
        let why = format!(
            "the venv at {} cannot import {module}; run scripts/setup-python.sh",
            self.dir.display()
        );
        if crate::in_ci() {
            panic!("{test}: {why}");
        }
        let msg = format!("SKIPPED {test}: {why}");
        println!("{msg}");
        eprintln!("{msg}");
        false
    }

    /// `tests/python/eventmq_0313_client.py`.
    pub fn client_script(&self) -> PathBuf {
        tests_python_dir().join("eventmq_0313_client.py")
    }

    /// Run the 0.3.13 client script against `frontend` with one JSON job
    /// per line on its stdin, waiting up to `wait_acks` seconds for the
    /// REPLY acks; panics unless it exits 0. Its stdout is JSON lines.
    pub fn run_client(&self, frontend: &str, lines: &[Value], wait_acks: f64) -> RunOutput {
        self.run_client_with(frontend, lines, wait_acks, &[])
    }

    /// [`PyEnv::run_client`], but done as soon as every job was
    /// acknowledged (at most `wait_acks` seconds).
    pub fn run_client_until_acked(
        &self,
        frontend: &str,
        lines: &[Value],
        wait_acks: f64,
    ) -> RunOutput {
        self.run_client_with(frontend, lines, wait_acks, &["--stop-after-acks"])
    }

    fn run_client_with(
        &self,
        frontend: &str,
        lines: &[Value],
        wait_acks: f64,
        extra: &[&str],
    ) -> RunOutput {
        let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let out = run(
            Spawn::new("py-client", self.python())
                .arg(self.client_script())
                .args([
                    "--frontend",
                    frontend,
                    "--wait-acks",
                    &wait_acks.to_string(),
                ])
                .args(extra)
                .env("PYTHONPATH", pythonpath())
                .stdin(input),
            Duration::from_secs(60),
        );
        assert_eq!(
            out.code(),
            Some(0),
            "python client failed: {}",
            out.describe()
        );
        out
    }
}

fn check(dir: &Path) -> Result<PyEnv, String> {
    let env = PyEnv {
        dir: dir.to_path_buf(),
    };
    for p in [env.python(), env.router_script(), env.jobmanager_script()] {
        if !p.is_file() {
            return Err(format!("{} is missing", p.display()));
        }
    }
    let out = Command::new(env.python())
        .args([
            "-c",
            "import importlib.metadata as m, eventmq.sender, eventmq.client.messages, zmq; \
             print(m.version('eventmq'))",
        ])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", env.python().display()))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() {
        return Err(format!(
            "{} cannot import eventmq: {}",
            env.python().display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    if version != "0.3.13" {
        return Err(format!("venv has eventmq {version}, expected 0.3.13"));
    }
    Ok(env)
}

/// The venv, or `None` (test skipped, reason printed) outside CI; panics
/// in CI when it is not usable.
pub fn venv(test: &str) -> Option<PyEnv> {
    static CHECKED: OnceLock<Result<PyEnv, String>> = OnceLock::new();
    let res = CHECKED.get_or_init(|| check(&venv_dir()));
    match res {
        Ok(env) => Some(env.clone()),
        Err(why) if crate::in_ci() => panic!(
            "{test}: the EventMQ 0.3.13 venv is required in CI and is not usable: {why}. \
             Run scripts/setup-python.sh (EMQ_PY_VENV={})",
            venv_dir().display()
        ),
        Err(why) => {
            let msg = format!(
                "SKIPPED {test}: no usable EventMQ 0.3.13 venv ({why}); \
                 run scripts/setup-python.sh to enable interop tests"
            );
            println!("{msg}");
            eprintln!("{msg}");
            None
        }
    }
}
