//! `call` jobs: Rust functions registered by name.
//!
//! ```
//! use emq_jobmanager::handlers::Handlers;
//! let mut h = Handlers::default(); // has `echo`, `noop` and `sleep`
//! h.register("add", |args: serde_json::Value| {
//!     let a = args[0].as_i64().ok_or("args[0] must be an integer")?;
//!     let b = args[1].as_i64().ok_or("args[1] must be an integer")?;
//!     Ok(serde_json::json!(a + b))
//! });
//! assert!(h.names().contains(&"add".to_string()));
//! ```
//!
//! A handler registered with [`Handlers::register`] runs on its slot's
//! thread, with no thread start per job. A panic is caught and reported as
//! an `exception` failure. A Rust thread cannot be killed: when a handler
//! runs past its `timeout:N`, or the router cancels its job (CANCEL), the
//! job is reported as a `timeout` (or `cancelled`) failure and its slot is
//! freed at once; a fresh thread takes the slot over and the old one is
//! abandoned: it stays busy in the handler, and ends (reporting nothing,
//! its result discarded) when the handler finally returns. A handler that
//! must really stop has to watch for it itself (e.g. its own deadline).
//!
//! A handler registered with [`Handlers::register_inline`] runs on the
//! socket loop's own thread instead, the moment its REQUEST is read: no
//! hand-off to a slot thread and back, so a batch of such jobs is answered
//! in the same wake-up that read it (the hand-off costs two thread
//! wake-ups per job, several times the work of a trivial handler). It
//! must return in microseconds and never block: while it runs, the job
//! manager reads nothing and sends nothing, and a `timeout:N` cannot
//! interrupt it. The built-ins `echo` and `noop` are inline.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use emqp_proto::job::{ErrorKind, JobError, JobOutcome};
use serde_json::Value;

/// A handler: JSON args in, JSON value or an error message out.
pub type Handler = Arc<dyn Fn(Value) -> Result<Value, String> + Send + Sync>;

/// Where a handler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// On the job's slot thread (may block; `timeout:N` frees the slot).
    SlotThread,
    /// On the socket loop's thread, at once (must be quick, never block).
    Inline,
}

#[derive(Clone)]
struct Entry {
    handler: Handler,
    placement: Placement,
}

/// Registered handlers by name.
#[derive(Clone)]
pub struct Handlers {
    map: HashMap<String, Entry>,
}

impl Default for Handlers {
    /// The built-ins: `echo` (returns its args) and `noop` (returns null),
    /// both inline; `sleep` (args: seconds, a number from 0 to 3600; sleeps
    /// on its slot thread, returns null): a job of a known length that
    /// costs no CPU, for tests and benches of scheduling (the credit
    /// window, makespans).
    fn default() -> Self {
        let mut h = Handlers {
            map: HashMap::new(),
        };
        h.register_inline("echo", Ok);
        h.register_inline("noop", |_| Ok(Value::Null));
        h.register("sleep", sleep);
        h
    }
}

impl std::fmt::Debug for Handlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Handlers {
    /// Register (or replace) `name`, run on the job's slot thread.
    pub fn register<F>(&mut self, name: impl Into<String>, f: F) -> &mut Self
    where
        F: Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
    {
        self.insert(name.into(), Arc::new(f), Placement::SlotThread)
    }

    /// Register (or replace) `name`, run inline on the socket loop's
    /// thread (see the module docs: it must return in microseconds and
    /// never block).
    pub fn register_inline<F>(&mut self, name: impl Into<String>, f: F) -> &mut Self
    where
        F: Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
    {
        self.insert(name.into(), Arc::new(f), Placement::Inline)
    }

    fn insert(&mut self, name: String, handler: Handler, placement: Placement) -> &mut Self {
        self.map.insert(name, Entry { handler, placement });
        self
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.map.keys().cloned().collect();
        v.sort();
        v
    }

    pub fn get(&self, name: &str) -> Option<Handler> {
        self.map.get(name).map(|e| Arc::clone(&e.handler))
    }

    /// Run handler `name` on the calling thread (a slot thread). A panic
    /// is caught and reported as an `exception` failure; an unknown name
    /// is an `unknown-handler` failure.
    pub(crate) fn call(&self, name: &str, args: Value) -> JobOutcome {
        let Some(Entry { handler, .. }) = self.map.get(name) else {
            return JobOutcome::Error(JobError::new(
                ErrorKind::UnknownHandler,
                format!(
                    "no handler named {name:?} (known: {})",
                    self.names().join(", ")
                ),
            ));
        };
        run(name, handler, args)
    }

    /// If `name` is registered inline: run it here, taking `args`, and
    /// return its outcome (as [`Handlers::call`] would). Otherwise `None`,
    /// and `args` is left alone. One map lookup either way.
    pub(crate) fn call_inline(&self, name: &str, args: &mut Value) -> Option<JobOutcome> {
        match self.map.get(name) {
            Some(Entry {
                handler,
                placement: Placement::Inline,
            }) => Some(run(name, handler, std::mem::take(args))),
            _ => None,
        }
    }
}

/// The `sleep` built-in: `args` seconds.
fn sleep(args: Value) -> Result<Value, String> {
    match args.as_f64() {
        Some(secs) if (0.0..=3600.0).contains(&secs) => {
            std::thread::sleep(std::time::Duration::from_secs_f64(secs));
            Ok(Value::Null)
        }
        _ => Err(format!(
            "sleep takes a number of seconds from 0 to 3600, got {args}"
        )),
    }
}

/// Call `handler`, catching a panic as an `exception` failure.
fn run(name: &str, handler: &Handler, args: Value) -> JobOutcome {
    match std::panic::catch_unwind(AssertUnwindSafe(|| handler(args))) {
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
    }
}
