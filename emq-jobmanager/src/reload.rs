//! `--reload`: Python workers restart when the code they run changes (for
//! development).
//!
//! The rule. A Python worker imports a job's module once and keeps it for
//! its whole life (up to `MAX_JOB_COUNT` jobs), so an edited module runs
//! only after the job manager restarts — the deploy rule (docs/DEPLOY.md).
//! With `--reload` the job manager watches directories (`--reload-dir`,
//! else the working directory and every `PYTHONPATH` entry) for `.py`
//! files created, changed or removed (`__pycache__` ignored). Each such
//! change bumps one shared [`CodeVersion`]; a slot compares the version
//! its worker was started at with the current one before it sends the
//! worker a job, and an outdated worker (idle, between jobs) is killed and
//! a fresh one started, so the next job runs the new code. A running job
//! is never interrupted: it finishes on the code it started with. The
//! change is logged at info (once a second per file at most) before the
//! version moves, so whoever reads "changed" in the log knows the next job
//! starts fresh.
//!
//! The watching is [`notify`] (inotify on Linux), on one thread that owns
//! the watcher for the life of the process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use notify::{EventKind, RecursiveMode, Watcher};

/// The version of the watched code: bumped on every change, read by every
/// slot before a `run` job. Clones share the counter.
#[derive(Debug, Clone, Default)]
pub struct CodeVersion(Arc<AtomicU64>);

impl CodeVersion {
    /// The current version (0 until the first change).
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Record a change; the new version.
    pub fn bump(&self) -> u64 {
        self.0.fetch_add(1, Ordering::AcqRel) + 1
    }
}

/// The `.py` file an event is about, if any (not under `__pycache__`;
/// reads and opens are not changes).
fn changed_py(event: &notify::Event) -> Option<&Path> {
    if !matches!(
        event.kind,
        EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_)
    ) {
        return None;
    }
    event.paths.iter().map(PathBuf::as_path).find(|p| {
        p.extension().is_some_and(|e| e == "py")
            && !p.components().any(|c| c.as_os_str() == "__pycache__")
    })
}

/// Watch `dirs` (recursively) and bump `version` on every `.py` change,
/// on a thread of its own for the rest of the process's life. Errors name
/// the directory that cannot be watched.
pub fn watch(dirs: &[PathBuf], version: CodeVersion) -> Result<(), String> {
    let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
    let mut watcher = notify::recommended_watcher(tx)
        .map_err(|e| format!("--reload: cannot watch files: {e}"))?;
    for d in dirs {
        watcher
            .watch(d, RecursiveMode::Recursive)
            .map_err(|e| format!("--reload: cannot watch {}: {e}", d.display()))?;
    }
    let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    info!(
        "--reload: watching {} for .py changes; after one, Python workers restart before their next job",
        list.join(", ")
    );
    std::thread::Builder::new()
        .name("emq-reload".into())
        .spawn(move || {
            let _watcher = watcher; // lives as long as the thread
            let mut logged: HashMap<PathBuf, Instant> = HashMap::new();
            while let Ok(event) = rx.recv() {
                let event = match event {
                    Ok(e) => e,
                    Err(e) => {
                        warn!("--reload: watch error: {e}");
                        continue;
                    }
                };
                let Some(path) = changed_py(&event) else {
                    continue;
                };
                let now = Instant::now();
                let recent = logged
                    .get(path)
                    .is_some_and(|t| now.duration_since(*t) < Duration::from_secs(1));
                if recent {
                    debug!("--reload: {} changed again", path.display());
                } else {
                    info!(
                        "--reload: {} changed: Python workers restart before their next job",
                        path.display()
                    );
                    logged.retain(|_, t| now.duration_since(*t) < Duration::from_secs(1));
                    logged.insert(path.to_path_buf(), now);
                }
                version.bump();
            }
        })
        .map_err(|e| format!("--reload: cannot start the watch thread: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, CreateKind, ModifyKind};

    fn event(kind: EventKind, path: &str) -> notify::Event {
        notify::Event::new(kind).add_path(PathBuf::from(path))
    }

    #[test]
    fn only_py_changes_outside_pycache_count() {
        let modify = EventKind::Modify(ModifyKind::Any);
        assert_eq!(
            changed_py(&event(modify, "/app/jobs.py")),
            Some(Path::new("/app/jobs.py"))
        );
        assert!(changed_py(&event(EventKind::Create(CreateKind::File), "/app/new.py")).is_some());
        assert!(changed_py(&event(modify, "/app/notes.txt")).is_none());
        assert!(changed_py(&event(modify, "/app/__pycache__/jobs.cpython-311.pyc")).is_none());
        assert!(changed_py(&event(modify, "/app/__pycache__/x.py")).is_none());
        assert!(changed_py(&event(EventKind::Access(AccessKind::Any), "/app/jobs.py")).is_none());
    }

    #[test]
    fn a_change_on_disk_bumps_the_version() {
        let dir = std::env::temp_dir().join(format!("emq-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let v = CodeVersion::default();
        watch(std::slice::from_ref(&dir), v.clone()).unwrap();
        std::fs::write(dir.join("notes.txt"), "x").unwrap();
        std::fs::write(dir.join("jobs.py"), "X = 1\n").unwrap();
        // Bounded wait for the watcher thread to see the write.
        let deadline = Instant::now() + Duration::from_secs(10);
        while v.get() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(v.get() >= 1, "no change seen");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_is_named() {
        let e = watch(
            &[PathBuf::from("/nonexistent/emq-reload")],
            CodeVersion::default(),
        )
        .unwrap_err();
        assert!(e.contains("/nonexistent/emq-reload"), "{e}");
    }
}
