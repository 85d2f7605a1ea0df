//! The job payload (MSG frame of a REQUEST) and the result a worker sends
//! back. The router never looks inside either; the job manager and the
//! sender share these types.
//!
//! Job kinds, as `[kind, {fields}]` JSON:
//! - `["run", {"path", "callable", "args", "kwargs", "class_args", "class_kwargs"}]`
//!   an EventMQ 0.3.13 Python job, unchanged;
//! - `["shell", {"argv": [...], "stdin": "...", "env": {...}, "cwd": "..."}]`;
//! - `["call", {"handler": "echo", "args": <any JSON>}]` a handler registered
//!   in a Rust job manager (`echo` and `noop` are built in).
//!
//! Every kind may also carry `"timeout": SECONDS` among its fields (an emq
//! addition, [`Job::parse_with_timeout`]): the job's own timeout, which a
//! `timeout:N` header overrides (the job manager's rule).
//!
//! Results: `{"value": <any>}` on success (0.3.13's shape); on failure
//! `{"error": {"kind": ..., "message": ..., ...}}` (see [`JobError`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::DecodeError;

/// An EventMQ Python job: import `path`, call `callable`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunJob {
    pub callable: String,
    /// `pkg.module`, or `pkg.module:Class` to instantiate Class first.
    pub path: String,
    #[serde(default)]
    pub args: Vec<Value>,
    #[serde(default)]
    pub kwargs: Map<String, Value>,
    #[serde(default)]
    pub class_args: Vec<Value>,
    #[serde(default)]
    pub class_kwargs: Map<String, Value>,
}

/// A shell command; its result carries exit status, stdout and stderr.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShellJob {
    pub argv: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub env: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// A call of a handler registered by name in a Rust job manager.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallJob {
    pub handler: String,
    #[serde(default)]
    pub args: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Job {
    Run(RunJob),
    Shell(ShellJob),
    Call(CallJob),
}

impl Job {
    /// Parse a REQUEST's MSG frame.
    pub fn parse(message: &[u8]) -> Result<Job, DecodeError> {
        Job::parse_with_timeout(message).map(|(job, _)| job)
    }

    /// Parse a REQUEST's MSG frame and the job's own `"timeout"` field: a
    /// non-negative number of seconds, `0` (or `null`, or no field) for
    /// none. Anything else is a bad job.
    pub fn parse_with_timeout(message: &[u8]) -> Result<(Job, Option<Duration>), DecodeError> {
        let bad = |reason: String| DecodeError::BadJson {
            field: "job",
            reason,
        };
        let value: Value = serde_json::from_slice(message).map_err(|e| bad(e.to_string()))?;
        let Value::Array(mut items) = value else {
            return Err(bad("expected [kind, {fields}]".into()));
        };
        if items.len() < 2 {
            return Err(bad("expected [kind, {fields}]".into()));
        }
        let mut fields = items.swap_remove(1);
        let timeout = match fields.as_object_mut().and_then(|f| f.remove("timeout")) {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_f64() {
                Some(0.0) => None,
                Some(secs) if secs.is_finite() && secs > 0.0 && secs < 1e12 => {
                    Some(Duration::from_secs_f64(secs))
                }
                _ => {
                    return Err(DecodeError::BadValue {
                        field: "job timeout (seconds)",
                        value: v.to_string(),
                    })
                }
            },
        };
        let kind = items[0].as_str().unwrap_or("").to_string();
        let fields_err = |e: serde_json::Error| bad(format!("{kind} job: {e}"));
        let job = match kind.as_str() {
            "run" => Job::Run(serde_json::from_value(fields).map_err(fields_err)?),
            "shell" => {
                let job: ShellJob = serde_json::from_value(fields).map_err(fields_err)?;
                if job.argv.is_empty() {
                    return Err(bad("shell job: argv is empty".into()));
                }
                Job::Shell(job)
            }
            "call" => Job::Call(serde_json::from_value(fields).map_err(fields_err)?),
            _ => {
                return Err(DecodeError::BadValue {
                    field: "job kind",
                    value: kind,
                })
            }
        };
        Ok((job, timeout))
    }

    /// The MSG frame. `run` jobs use 0.3.13's key order (compact JSON).
    pub fn to_message(&self) -> Vec<u8> {
        let (kind, fields) = match self {
            Job::Run(j) => ("run", serde_json::to_value(j)),
            Job::Shell(j) => ("shell", serde_json::to_value(j)),
            Job::Call(j) => ("call", serde_json::to_value(j)),
        };
        let fields = fields.expect("job types always serialize");
        serde_json::to_vec(&Value::Array(vec![Value::String(kind.into()), fields]))
            .expect("JSON values always serialize")
    }
}

/// What kind of failure a job had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// The Python callable or Rust handler raised / returned an error.
    Exception,
    /// A shell command exited non-zero or was killed by a signal.
    Exit,
    /// The job ran past its `timeout:N` and was killed.
    Timeout,
    /// The process running the job died.
    Crash,
    /// The job payload was not a valid job.
    BadJob,
    /// No handler of that name is registered.
    UnknownHandler,
    /// The job could not be delivered to completion (emq router).
    DeadLettered,
    /// The job's result was bigger than the largest message the router
    /// accepts (`--max-message-size`), so it was not sent (emq job manager).
    ResultTooLarge,
    /// An operator cancelled the job (emq control plane).
    Cancelled,
}

/// The failure object of a result: `{"error": JobError}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobError {
    pub kind: ErrorKind,
    pub message: String,
    /// Python traceback text, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceback: Option<String>,
    /// Shell jobs: exit status (`None` when killed by a signal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// How many times the job was tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
}

impl JobError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> JobError {
        JobError {
            kind,
            message: message.into(),
            traceback: None,
            exit_status: None,
            stdout: None,
            stderr: None,
            attempts: None,
        }
    }
}

/// Why a REQUEST's `message` cannot be a job, when a router can tell
/// without knowing its job managers: it is JSON, and not an array. Every
/// job form — EventMQ 0.3.13's `["run", {...}]`, emq's `["shell", ...]`
/// and `["call", ...]` — is an array `[KIND, PARAMS]`; what a job manager
/// makes of an array is its own business, and a message that is not JSON
/// at all may be a custom job manager's format, so both pass. Cheap on the
/// hot path: only a message that starts like a JSON object, string,
/// number or literal is parsed.
pub fn not_a_job(message: &[u8]) -> Option<String> {
    let first = *message.iter().find(|b| !b.is_ascii_whitespace())?;
    let what = match first {
        b'{' => "a JSON object",
        b'"' => "a JSON string",
        b'-' | b'0'..=b'9' => "a JSON number",
        b't' | b'f' | b'n' => "a JSON literal",
        _ => return None,
    };
    serde_json::from_slice::<serde::de::IgnoredAny>(message).ok()?;
    Some(format!(
        "the message is {what}, not a job: a job is an array [KIND, PARAMS], e.g. \
         [\"run\", {{\"path\": \"mymodule\", \"callable\": \"myfunction\", \"args\": []}}] \
         (emq-sender --python mymodule.myfunction builds it)"
    ))
}

/// The traceback of a failure, as text for a person to read: `v` is a
/// result (`{"error": {..., "traceback": TEXT}}`) or the error object
/// itself. The job runner's own frames (`File "<string>", line N, in
/// _run`: the job manager's worker script, which older job managers left
/// in) are dropped, and the text ends with one newline. `None` when there
/// is no traceback.
pub fn traceback_text(v: &Value) -> Option<String> {
    let inner = v.get("error").filter(|e| e.is_object()).unwrap_or(v);
    let tb = inner.get("traceback")?.as_str()?;
    let mut out = String::new();
    for line in tb.lines() {
        if line.trim_start().starts_with("File \"<string>\"") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    (!out.trim().is_empty()).then_some(out)
}

/// A job's outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum JobOutcome {
    Value(Value),
    Error(JobError),
}

impl JobOutcome {
    pub fn is_ok(&self) -> bool {
        matches!(self, JobOutcome::Value(_))
    }

    /// The REPLY payload: `{"value": ...}` or `{"error": {...}}`.
    pub fn to_payload(&self) -> Vec<u8> {
        let v = match self {
            JobOutcome::Value(v) => serde_json::json!({ "value": v }),
            JobOutcome::Error(e) => serde_json::json!({ "error": e }),
        };
        serde_json::to_vec(&v).expect("JSON values always serialize")
    }

    /// Parse a REPLY payload. A 0.3.13 failure (`{"value": "<exception
    /// text>"}`) cannot be told from a success and parses as a value.
    pub fn from_payload(payload: &[u8]) -> Result<JobOutcome, DecodeError> {
        let bad = |reason: String| DecodeError::BadJson {
            field: "result",
            reason,
        };
        let mut v: Value = serde_json::from_slice(payload).map_err(|e| bad(e.to_string()))?;
        let Some(obj) = v.as_object_mut() else {
            return Err(bad("expected an object".into()));
        };
        if let Some(e) = obj.remove("error") {
            return Ok(JobOutcome::Error(
                serde_json::from_value(e).map_err(|e| bad(e.to_string()))?,
            ));
        }
        match obj.remove("value") {
            Some(value) => Ok(JobOutcome::Value(value)),
            None => Err(bad("expected \"value\" or \"error\"".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_0_3_13_run_payload() {
        let raw = br#"["run", {"callable": "mark", "path": "pyemq_jobs", "args": ["x"], "kwargs": {"k": 1}, "class_args": [], "class_kwargs": {}}]"#;
        let Job::Run(j) = Job::parse(raw).unwrap() else {
            panic!("not a run job")
        };
        assert_eq!(j.path, "pyemq_jobs");
        assert_eq!(j.callable, "mark");
        assert_eq!(j.args, vec![Value::from("x")]);
        assert_eq!(j.kwargs["k"], Value::from(1));
    }

    #[test]
    fn run_payload_without_optional_keys() {
        let raw = br#"["run", {"path": "pyemq_jobs", "callable": "ret1"}]"#;
        let Job::Run(j) = Job::parse(raw).unwrap() else {
            panic!()
        };
        assert!(j.args.is_empty() && j.kwargs.is_empty());
    }

    #[test]
    fn the_jobs_own_timeout_field() {
        let t = |raw: &str| Job::parse_with_timeout(raw.as_bytes()).map(|(_, t)| t);
        assert_eq!(
            t(r#"["run", {"path": "m", "callable": "f", "timeout": 5}]"#).unwrap(),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            t(r#"["shell", {"argv": ["true"], "timeout": 0.5}]"#).unwrap(),
            Some(Duration::from_millis(500))
        );
        for none in [
            r#"["call", {"handler": "echo"}]"#,
            r#"["call", {"handler": "echo", "timeout": 0}]"#,
            r#"["call", {"handler": "echo", "timeout": null}]"#,
        ] {
            assert_eq!(t(none).unwrap(), None, "{none}");
        }
        for bad in [
            r#"["call", {"handler": "echo", "timeout": -1}]"#,
            r#"["call", {"handler": "echo", "timeout": "5"}]"#,
            r#"["call", {"handler": "echo", "timeout": 1e300}]"#,
        ] {
            assert!(matches!(t(bad), Err(DecodeError::BadValue { .. })), "{bad}");
        }
        // The field is not the job's: a run job without it parses the same.
        let (job, _) = Job::parse_with_timeout(
            br#"["run", {"path": "m", "callable": "f", "args": [1], "timeout": 5}]"#,
        )
        .unwrap();
        assert_eq!(
            job,
            Job::parse(br#"["run", {"path": "m", "callable": "f", "args": [1]}]"#).unwrap()
        );
    }

    #[test]
    fn every_kind_round_trips() {
        let jobs = [
            Job::Run(RunJob {
                path: "m:C".into(),
                callable: "f".into(),
                args: vec![1.into()],
                kwargs: Map::new(),
                class_args: vec![],
                class_kwargs: Map::new(),
            }),
            Job::Shell(ShellJob {
                argv: vec!["echo".into(), "hi".into()],
                stdin: Some("in".into()),
                env: Map::new(),
                cwd: None,
            }),
            Job::Call(CallJob {
                handler: "echo".into(),
                args: serde_json::json!({"a": [1, 2]}),
            }),
        ];
        for j in jobs {
            assert_eq!(Job::parse(&j.to_message()).unwrap(), j);
        }
    }

    #[test]
    fn bad_jobs_are_typed_errors() {
        assert!(matches!(
            Job::parse(b"nope"),
            Err(DecodeError::BadJson { .. })
        ));
        assert!(matches!(
            Job::parse(b"[\"run\"]"),
            Err(DecodeError::BadJson { .. })
        ));
        assert!(matches!(
            Job::parse(b"[\"fly\", {}]"),
            Err(DecodeError::BadValue { .. })
        ));
        assert!(matches!(
            Job::parse(br#"["shell", {"argv": []}]"#),
            Err(DecodeError::BadJson { .. })
        ));
        assert!(matches!(
            Job::parse(br#"["run", {"path": 1}]"#),
            Err(DecodeError::BadJson { .. })
        ));
    }

    #[test]
    fn outcomes_round_trip_and_0_3_13_values_parse() {
        let ok = JobOutcome::Value(serde_json::json!([1, "a"]));
        assert_eq!(JobOutcome::from_payload(&ok.to_payload()).unwrap(), ok);
        let mut e = JobError::new(ErrorKind::Exit, "exit status 3");
        e.exit_status = Some(3);
        let err = JobOutcome::Error(e);
        assert_eq!(JobOutcome::from_payload(&err.to_payload()).unwrap(), err);
        assert!(String::from_utf8(err.to_payload())
            .unwrap()
            .contains("\"kind\":\"exit\""));
        assert_eq!(
            JobOutcome::from_payload(br#"{"value": 1}"#).unwrap(),
            JobOutcome::Value(1.into())
        );
        assert!(JobOutcome::from_payload(b"{}").is_err());
    }

    #[test]
    fn a_traceback_reads_as_text_without_the_runners_frames() {
        let tb = "Traceback (most recent call last):\n  File \"<string>\", line 170, in _run\n  \
                  File \"/app/jobs.py\", line 4, in boom\n    raise ValueError(x)\nValueError: 7\n";
        let want =
            "Traceback (most recent call last):\n  File \"/app/jobs.py\", line 4, in boom\n    \
                    raise ValueError(x)\nValueError: 7\n";
        let result = serde_json::json!({"error": {"kind": "exception", "message": "ValueError: 7", "traceback": tb}});
        assert_eq!(traceback_text(&result).as_deref(), Some(want));
        assert_eq!(traceback_text(&result["error"]).as_deref(), Some(want));
        assert_eq!(
            traceback_text(&serde_json::json!({"error": {"kind": "timeout", "message": "m"}})),
            None
        );
        assert_eq!(traceback_text(&serde_json::json!("text")), None);
    }

    #[test]
    fn json_that_is_not_an_array_is_not_a_job_and_anything_else_may_be() {
        for m in [
            &br#"{"not": "a job"}"#[..],
            b" {}",
            b"\"run\"",
            b"42",
            b"null",
            b"true",
        ] {
            let why =
                not_a_job(m).unwrap_or_else(|| panic!("{:?} passed", String::from_utf8_lossy(m)));
            assert!(
                why.contains("not a job: a job is an array [KIND, PARAMS]"),
                "{why}"
            );
        }
        assert!(
            not_a_job(br#"{"x""#).is_none(),
            "not JSON: may be a custom format"
        );
        assert!(not_a_job(b"nothing like JSON").is_none());
        assert!(not_a_job(b"hello").is_none());
        assert!(not_a_job(b"").is_none());
        // Every 0.3.13 and emq form.
        for m in [
            &br#"["run", {"path": "pyemq_jobs", "callable": "noop", "args": [], "kwargs": {}}]"#[..],
            br#"["shell", {"argv": ["true"]}]"#,
            br#"["call", {"handler": "echo"}]"#,
            b"[]",
        ] {
            assert_eq!(not_a_job(m), None, "{}", String::from_utf8_lossy(m));
        }
    }
}
