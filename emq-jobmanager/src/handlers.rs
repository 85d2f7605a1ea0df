//! `call` jobs: Rust functions registered by name.
//!
//! ```
//! use emq_jobmanager::handlers::Handlers;
//! let mut h = Handlers::default(); // has `echo` and `noop`
//! h.register("add", |args: serde_json::Value| {
//!     let a = args[0].as_i64().ok_or("args[0] must be an integer")?;
//!     let b = args[1].as_i64().ok_or("args[1] must be an integer")?;
//!     Ok(serde_json::json!(a + b))
//! });
//! assert!(h.names().contains(&"add".to_string()));
//! ```
//!
//! A handler runs on a thread of its own, so a timeout can give the slot
//! back; a Rust thread cannot be killed, though, so a handler that ignores
//! its timeout keeps running in the background until it returns. A panic
//! is caught and reported as an `exception` failure.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use crossbeam_channel::{bounded, select, Receiver};
use emqp_proto::job::{CallJob, ErrorKind, JobError, JobOutcome};
use serde_json::Value;

/// A handler: JSON args in, JSON value or an error message out.
pub type Handler = Arc<dyn Fn(Value) -> Result<Value, String> + Send + Sync>;

/// Registered handlers by name.
#[derive(Clone)]
pub struct Handlers {
    map: HashMap<String, Handler>,
}

impl Default for Handlers {
    /// The built-ins: `echo` (returns its args) and `noop` (returns null).
    fn default() -> Self {
        let mut h = Handlers {
            map: HashMap::new(),
        };
        h.register("echo", Ok);
        h.register("noop", |_| Ok(Value::Null));
        h
    }
}

impl std::fmt::Debug for Handlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Handlers {
    /// Register (or replace) `name`.
    pub fn register<F>(&mut self, name: impl Into<String>, f: F) -> &mut Self
    where
        F: Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
    {
        self.map.insert(name.into(), Arc::new(f));
        self
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.map.keys().cloned().collect();
        v.sort();
        v
    }

    pub fn get(&self, name: &str) -> Option<Handler> {
        self.map.get(name).cloned()
    }

    /// Run a call job; returns early with a timeout failure if `run` is
    /// cancelled on `cancel`.
    pub(crate) fn run(&self, job: &CallJob, run: u64, cancel: &Receiver<u64>) -> JobOutcome {
        let Some(handler) = self.get(&job.handler) else {
            return JobOutcome::Error(JobError::new(
                ErrorKind::UnknownHandler,
                format!(
                    "no handler named {:?} (known: {})",
                    job.handler,
                    self.names().join(", ")
                ),
            ));
        };
        let (tx, rx) = bounded(1);
        let args = job.args.clone();
        let name = job.handler.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("emq-call-{name}"))
            .spawn(move || {
                let r = std::panic::catch_unwind(AssertUnwindSafe(|| handler(args)));
                let outcome = match r {
                    Ok(Ok(v)) => JobOutcome::Value(v),
                    Ok(Err(msg)) => JobOutcome::Error(JobError::new(ErrorKind::Exception, msg)),
                    Err(p) => {
                        let what = p
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| p.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "non-string panic".into());
                        JobOutcome::Error(JobError::new(
                            ErrorKind::Exception,
                            format!("handler {name:?} panicked: {what}"),
                        ))
                    }
                };
                let _ = tx.send(outcome);
            });
        if let Err(e) = spawned {
            return JobOutcome::Error(JobError::new(
                ErrorKind::Crash,
                format!("cannot start a handler thread: {e}"),
            ));
        }
        loop {
            select! {
                recv(rx) -> r => {
                    return r.unwrap_or_else(|_| {
                        JobOutcome::Error(JobError::new(ErrorKind::Crash, "handler thread vanished"))
                    })
                }
                recv(cancel) -> c => match c {
                    Ok(id) if id == run => {
                        return JobOutcome::Error(JobError::new(
                            ErrorKind::Timeout,
                            format!("handler {:?} timed out (left running in the background)", job.handler),
                        ))
                    }
                    Ok(_) => continue,
                    // The pool is gone; wait for the handler.
                    Err(_) => {
                        return rx.recv().unwrap_or_else(|_| {
                            JobOutcome::Error(JobError::new(ErrorKind::Crash, "handler thread vanished"))
                        })
                    }
                },
            }
        }
    }
}
