//! `shell` jobs: run `argv` (no shell involved) in a new process group,
//! with optional stdin, extra environment and working directory.
//!
//! Result: `{"value": {"exit_status": 0, "stdout": .., "stderr": ..}}`; a
//! non-zero exit or a signal gives `{"error": {"kind": "exit",
//! "exit_status": N|null, "stdout", "stderr", "message"}}`. When the main
//! process exits, whatever it left running in its process group is killed,
//! so a job never outlives its slot; and if the job manager dies (even by
//! `kill -9`), the group's guard process kills the group
//! ([`emq_process`]). stdout and stderr keep at most [`OUTPUT_LIMIT`]
//! bytes each (the rest is read and dropped). The runner sees its slot only
//! through [`GroupRegistry`].

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use emqp_proto::job::{ErrorKind, JobError, JobOutcome, ShellJob};
use serde_json::{json, Value};

use emq_process::{guarded_group, GroupLeader};

use crate::registry::GroupRegistry;

/// Bytes of stdout (and of stderr) kept per job.
pub const OUTPUT_LIMIT: usize = 1 << 20;

fn read_capped<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let Some(mut r) = r else {
            return String::new();
        };
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        let mut truncated = false;
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let room = OUTPUT_LIMIT.saturating_sub(kept.len());
                    if n > room {
                        truncated = true;
                    }
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let mut s = String::from_utf8_lossy(&kept).into_owned();
        if truncated {
            s.push_str("\n[output truncated]");
        }
        s
    })
}

/// Run one shell job; never panics.
pub(crate) fn run(job: &ShellJob, run: u64, slot: &dyn GroupRegistry) -> JobOutcome {
    let Some((program, args)) = job.argv.split_first() else {
        return JobOutcome::Error(JobError::new(ErrorKind::BadJob, "shell job: argv is empty"));
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(if job.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The child is the group's guard; its status mirrors the command's.
    guarded_group(&mut cmd);
    // systemd's socket is the job manager's (NotifyAccess=main).
    cmd.env_remove(emq_cli_support::service::NOTIFY_SOCKET);
    for (k, v) in &job.env {
        match v {
            Value::Null => {
                cmd.env_remove(k);
            }
            Value::String(s) => {
                cmd.env(k, s);
            }
            other => {
                cmd.env(k, other.to_string());
            }
        }
    }
    if let Some(cwd) = &job.cwd {
        cmd.current_dir(cwd);
    }
    let mut leader = match GroupLeader::spawn(&mut cmd) {
        Ok(c) => c,
        Err(e) => {
            let mut err = JobError::new(ErrorKind::Exit, format!("cannot run {program:?}: {e}"));
            err.stdout = Some(String::new());
            err.stderr = Some(String::new());
            return JobOutcome::Error(err);
        }
    };
    slot.set_job_group(run, Some(leader.pid()));
    let child = leader.child();
    let stdin_writer = match (child.stdin.take(), job.stdin.clone()) {
        (Some(mut w), Some(text)) => Some(std::thread::spawn(move || {
            let _ = w.write_all(text.as_bytes());
        })),
        _ => None,
    };
    let out = read_capped(child.stdout.take());
    let err = read_capped(child.stderr.take());
    leader.wait_exited();
    // Leftovers of the job (background children) go with it; the group id
    // is still valid because its leader is not reaped yet.
    leader.kill();
    slot.set_job_group(run, None);
    let status = leader.reap();
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if let Some(w) = stdin_writer {
        let _ = w.join();
    }
    let status = match status {
        Ok(s) => s,
        Err(e) => {
            return JobOutcome::Error(JobError::new(
                ErrorKind::Crash,
                format!("cannot wait for {program:?}: {e}"),
            ))
        }
    };
    match status.code() {
        Some(0) => JobOutcome::Value(json!({
            "exit_status": 0,
            "stdout": stdout,
            "stderr": stderr,
        })),
        code => {
            let message = match (code, status.signal()) {
                (Some(c), _) => format!("{program} exited with status {c}"),
                (None, Some(sig)) => format!("{program} was killed by signal {sig}"),
                _ => format!("{program} ended abnormally"),
            };
            let mut e = JobError::new(ErrorKind::Exit, message);
            e.exit_status = code;
            e.stdout = Some(stdout);
            e.stderr = Some(stderr);
            JobOutcome::Error(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn sh(script: &str) -> JobOutcome {
        let job = ShellJob {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            stdin: None,
            env: Map::new(),
            cwd: None,
        };
        run(&job, 1, &Unregistered)
    }

    /// A slot that never stops a run.
    struct Unregistered;

    impl GroupRegistry for Unregistered {
        fn set_job_group(&self, _: u64, _: Option<i32>) {}
        fn set_worker_group(&self, _: Option<i32>) {}
        fn closing(&self) -> bool {
            false
        }
    }

    fn error(o: JobOutcome) -> JobError {
        match o {
            JobOutcome::Error(e) => e,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    /// What the job manager reports through the guard process is what the
    /// command did: output, exit code, terminating signal.
    #[test]
    fn outcomes_through_the_guard_are_the_commands() {
        assert_eq!(
            sh("echo out; echo err >&2"),
            JobOutcome::Value(json!({"exit_status": 0, "stdout": "out\n", "stderr": "err\n"}))
        );
        let e = error(sh("echo partial; exit 3"));
        assert_eq!((e.kind, e.exit_status), (ErrorKind::Exit, Some(3)));
        assert_eq!(e.stdout.as_deref(), Some("partial\n"));
        assert_eq!(e.message, "sh exited with status 3");
        let e = error(sh("echo bye >&2; kill -TERM $$"));
        assert_eq!((e.kind, e.exit_status), (ErrorKind::Exit, None));
        assert_eq!(e.stderr.as_deref(), Some("bye\n"));
        assert_eq!(e.message, "sh was killed by signal 15");
        // A TERM to the whole group (what `kill -TERM 0` does) still ends
        // the command, not just the guard.
        let e = error(sh("kill -TERM 0; sleep 5"));
        assert_eq!(e.message, "sh was killed by signal 15");
    }
}
