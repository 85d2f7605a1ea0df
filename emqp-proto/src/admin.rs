//! The control plane's vocabulary, typed: the ops an `ADMIN` request asks
//! for ([`AdminOp`], each with its arguments), the error kinds of a refusal
//! ([`ErrorKind`], [`AdminError`]) and the answer object (docs/PROTOCOL.md,
//! "Control plane").
//!
//! - **One place.** An op's name is its variant's name in kebab case
//!   (`DeadRetry` is `dead-retry`), spelled by serde on the wire and by
//!   [`OpName`] everywhere else; nothing else in the workspace spells it.
//!   Adding an op is one variant here, one arm in the router core, one
//!   emq-cli subcommand.
//! - **The wire is `{"op": OP, ...arguments}`**: absent and `null`
//!   optional arguments are the same; unknown keys are ignored. A request
//!   that does not decode into an [`AdminOp`] (not JSON, not an object, an
//!   unknown op, a missing or malformed argument) is a `bad-request` whose
//!   message says why ([`AdminOp::decode`]).
//! - **The answer** is `{"ok": true, ...}` or `{"ok": false, "error":
//!   {"kind", "message"}}` ([`encode_answer`], [`decode_answer`]). A kind
//!   this build does not know (a newer router's) decodes as
//!   [`ErrorKind::Other`]: still a refusal.
//! - Which ops change state ([`OpName::is_change`]: the dashboard wants
//!   POST for them) and which of those are journaled
//!   ([`OpName::is_journaled`]: refused while the journal fails) is said
//!   here, once. Sans-IO: plain data and serde.

use std::num::NonZeroU64;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use strum::{EnumDiscriminants, EnumIter, IntoStaticStr};

/// `OpName::iter()`, `ErrorKind::iter()`, `ViewState::iter()`.
pub use strum::IntoEnumIterator;

/// One control-plane operation with its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, EnumDiscriminants)]
#[serde(tag = "op", rename_all = "kebab-case")]
#[strum_discriminants(
    name(OpName),
    derive(EnumIter, IntoStaticStr, Hash, strum::EnumString),
    strum(serialize_all = "kebab-case")
)]
pub enum AdminOp {
    /// STATUS's object plus `"version"`.
    Status,
    /// One job's view.
    Job { msgid: String },
    /// A page of job views.
    Jobs(JobsQuery),
    /// Cancel a job, a workflow (by its id) or a batch (by its id).
    Cancel { msgid: String },
    /// A page of dead letters.
    Dead(DeadQuery),
    /// Put dead letters back on their queues.
    DeadRetry(DeadTarget),
    /// Drop dead letters for good.
    DeadDiscard(DeadTarget),
    /// Run a failed or cancelled job again: a retained finished one is
    /// accepted again under its msgid, a dead letter as `dead-retry`.
    Requeue { msgid: String },
    /// Every queue's figures.
    Queues,
    /// Stop dispatching a queue's jobs.
    Pause { queue: String },
    /// Dispatch a paused queue's jobs again.
    Resume { queue: String },
    /// Cancel every waiting job of a queue.
    Purge { queue: String },
    /// Every connected worker.
    Workers,
    /// Hand a worker nothing new.
    Drain { worker: String },
    /// Hand a drained worker jobs again.
    Undrain { worker: String },
    /// The schedules.
    Schedules,
    /// Remove a schedule.
    Unschedule { id: String },
    /// The orderly shutdown of DISCONNECT.
    Shutdown,
    /// Set (change) a queue's flow-control policy.
    LimitsSet(LimitsSetArgs),
    /// The flow-control policies with their keys (one queue, or all).
    LimitsShow {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        queue: Option<String>,
    },
    /// Remove a queue's flow-control policy.
    LimitsClear { queue: String },
    /// One workflow's nodes with their states and times (`cancel` takes a
    /// workflow id too).
    Workflow { id: String },
    /// One batch's counts (pending, succeeded, failed, total), whether it
    /// is closed and its callbacks' state.
    Batch { id: String },
}

/// The arguments of `limits-set`: the queue and the fields to change
/// (`crate::flow::PolicyChange`: each given one replaces the policy's; a
/// concurrency of 0 or a rate `none` removes that limit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitsSetArgs {
    pub queue: String,
    #[serde(flatten)]
    pub change: crate::flow::PolicyChange,
}

/// The arguments of `jobs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobsQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ViewState>,
    /// A substring of the MSG frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// `newest` first when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Order>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<NonZeroU64>,
    /// The `next_cursor` of the page before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// The arguments of `dead`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<NonZeroU64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// Which dead letters `dead-retry` / `dead-discard` take: `msgid`, or
/// `all: true` with the filters. Anything else is a `bad-request`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "DeadTargetArgs", into = "DeadTargetArgs")]
pub enum DeadTarget {
    One {
        msgid: String,
    },
    All {
        queue: Option<String>,
        contains: Option<String>,
    },
}

/// [`DeadTarget`] as it is on the wire.
#[derive(Serialize, Deserialize)]
struct DeadTargetArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    msgid: Option<String>,
    /// Only `true` is true (as it always was on the wire).
    #[serde(
        default,
        deserialize_with = "only_true",
        skip_serializing_if = "std::ops::Not::not"
    )]
    all: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    contains: Option<String>,
}

fn only_true<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Value::deserialize(d)? == Value::Bool(true))
}

impl TryFrom<DeadTargetArgs> for DeadTarget {
    type Error = &'static str;

    fn try_from(a: DeadTargetArgs) -> Result<DeadTarget, &'static str> {
        match (a.msgid, a.all) {
            (Some(msgid), false) => Ok(DeadTarget::One { msgid }),
            (None, true) => Ok(DeadTarget::All {
                queue: a.queue,
                contains: a.contains,
            }),
            _ => Err("give either msgid or all: true"),
        }
    }
}

impl From<DeadTarget> for DeadTargetArgs {
    fn from(t: DeadTarget) -> DeadTargetArgs {
        match t {
            DeadTarget::One { msgid } => DeadTargetArgs {
                msgid: Some(msgid),
                all: false,
                queue: None,
                contains: None,
            },
            DeadTarget::All { queue, contains } => DeadTargetArgs {
                msgid: None,
                all: true,
                queue,
                contains,
            },
        }
    }
}

/// A job's state in its view (and the `state` filter of `jobs`, which
/// lists no dead letters: `dead` does).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    EnumIter,
    IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum ViewState {
    Delayed,
    Queued,
    InFlight,
    Cancelling,
    Retrying,
    Done,
    Failed,
    Cancelled,
    DeadLettered,
}

impl ViewState {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// `done`, `failed`, `cancelled` or `dead-lettered`.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            ViewState::Done | ViewState::Failed | ViewState::Cancelled | ViewState::DeadLettered
        )
    }
}

/// A workflow's state as a whole (the `workflow` view, and the `job`
/// view of a workflow id): `pending` (no node dispatched yet), `running`,
/// `cancelling` (cancelled, a started node not yet ended), then
/// `succeeded`, `failed` or `cancelled`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, EnumIter, IntoStaticStr,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum WorkflowState {
    Pending,
    Running,
    Cancelling,
    Succeeded,
    Failed,
    Cancelled,
}

impl WorkflowState {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// `succeeded`, `failed` or `cancelled`.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            WorkflowState::Succeeded | WorkflowState::Failed | WorkflowState::Cancelled
        )
    }
}

/// The order of a `jobs` page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    Newest,
    Oldest,
}

impl OpName {
    /// The op's name on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Every op but the reads changes something (the dashboard asks POST
    /// and its access rules for these).
    pub fn is_change(self) -> bool {
        !matches!(
            self,
            OpName::Status
                | OpName::Job
                | OpName::Jobs
                | OpName::Dead
                | OpName::Queues
                | OpName::Workers
                | OpName::Schedules
                | OpName::LimitsShow
                | OpName::Workflow
                | OpName::Batch
        )
    }

    /// A change the journal keeps, refused `journal-unavailable` while the
    /// journal fails. `drain` / `undrain` act on a connection, which does
    /// not outlive the router, and `shutdown` on the process.
    pub fn is_journaled(self) -> bool {
        self.is_change() && !matches!(self, OpName::Drain | OpName::Undrain | OpName::Shutdown)
    }

    /// The op of this name, if there is one.
    pub fn parse(name: &str) -> Option<OpName> {
        name.parse().ok()
    }
}

impl std::fmt::Display for OpName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AdminOp {
    /// The op's name.
    pub fn name(&self) -> OpName {
        self.into()
    }

    /// See [`OpName::is_change`].
    pub fn is_change(&self) -> bool {
        self.name().is_change()
    }

    /// Decode a request's JSON; every failure is a `bad-request` saying why.
    pub fn decode(request: &[u8]) -> Result<AdminOp, AdminError> {
        let v: Value = serde_json::from_slice(request)
            .map_err(|e| AdminError::bad_request(format!("the request is not JSON: {e}")))?;
        AdminOp::from_value(v)
    }

    /// [`AdminOp::decode`] of a JSON value.
    pub fn from_value(request: Value) -> Result<AdminOp, AdminError> {
        let Value::Object(m) = &request else {
            return Err(AdminError::bad_request(format!(
                "the request must be a JSON object, got {request}"
            )));
        };
        let op = match m.get("op") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(AdminError::bad_request(format!(
                    "op must be a string, got {other}"
                )))
            }
            None => return Err(AdminError::bad_request("missing argument op")),
        };
        AdminOp::deserialize(request).map_err(|e| match OpName::parse(&op) {
            Some(_) => AdminError::bad_request(format!("{op}: {e}")),
            None => AdminError::bad_request(format!(
                "unknown op {op:?} (ops: {})",
                OpName::iter()
                    .map(OpName::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        })
    }

    /// The request object.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("an op serializes")
    }

    /// One op of each name with every argument set (`dead-retry` and
    /// `dead-discard` twice: by msgid and with filters): the argument names
    /// of [`vocabulary`], and the round-trip tests.
    pub fn examples() -> Vec<AdminOp> {
        let s = |x: &str| x.to_string();
        let jobs = JobsQuery {
            queue: Some(s("q")),
            state: Some(ViewState::InFlight),
            contains: Some(s("c")),
            order: Some(Order::Oldest),
            limit: NonZeroU64::new(7),
            cursor: Some(s("u1")),
        };
        let dead = DeadQuery {
            queue: Some(s("q")),
            contains: Some(s("c")),
            limit: NonZeroU64::new(7),
            cursor: Some(s("1")),
        };
        let one = DeadTarget::One { msgid: s("m") };
        let all = DeadTarget::All {
            queue: Some(s("q")),
            contains: Some(s("c")),
        };
        vec![
            AdminOp::Status,
            AdminOp::Job { msgid: s("m") },
            AdminOp::Jobs(jobs),
            AdminOp::Cancel { msgid: s("m") },
            AdminOp::Dead(dead),
            AdminOp::DeadRetry(one.clone()),
            AdminOp::DeadRetry(all.clone()),
            AdminOp::DeadDiscard(one),
            AdminOp::DeadDiscard(all),
            AdminOp::Requeue { msgid: s("m") },
            AdminOp::Queues,
            AdminOp::Pause { queue: s("q") },
            AdminOp::Resume { queue: s("q") },
            AdminOp::Purge { queue: s("q") },
            AdminOp::Workers,
            AdminOp::Drain { worker: s("w") },
            AdminOp::Undrain { worker: s("w") },
            AdminOp::Schedules,
            AdminOp::Unschedule { id: s("s") },
            AdminOp::Shutdown,
            AdminOp::LimitsSet(LimitsSetArgs {
                queue: s("q"),
                change: crate::flow::PolicyChange {
                    concurrency: Some(2),
                    concurrency_per_key: Some(1),
                    rate: Some(crate::flow::RateChange::Set(crate::flow::Rate {
                        n: 10,
                        per: std::time::Duration::from_secs(1),
                    })),
                    rate_per_key: Some(crate::flow::RateChange::Remove),
                    fair: Some(true),
                },
            }),
            AdminOp::LimitsShow {
                queue: Some(s("q")),
            },
            AdminOp::LimitsClear { queue: s("q") },
            AdminOp::Workflow { id: s("w") },
            AdminOp::Batch { id: s("b") },
        ]
    }
}

/// Why the router refused an op: the `error` of a `{"ok": false}` answer.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, EnumIter, IntoStaticStr,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum ErrorKind {
    /// Unknown op, missing or malformed argument, undecodable ADMIN.
    BadRequest,
    NotFound,
    /// E.g. cancelling a job that runs on a 0.3.13 job manager.
    Unsupported,
    /// The job is not in a state the op applies to.
    Conflict,
    JournalUnavailable,
    ShuttingDown,
    /// A kind this build does not know (a newer router's); never sent.
    #[serde(other)]
    Other,
}

impl ErrorKind {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The kinds a router sends (all but [`ErrorKind::Other`]).
    pub fn on_the_wire() -> impl Iterator<Item = ErrorKind> {
        ErrorKind::iter().filter(|k| *k != ErrorKind::Other)
    }

    /// The HTTP status of a refusal of this kind (the dashboard's API).
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::BadRequest => 400,
            ErrorKind::NotFound => 404,
            ErrorKind::Conflict | ErrorKind::Unsupported => 409,
            ErrorKind::JournalUnavailable | ErrorKind::ShuttingDown => 503,
            ErrorKind::Other => 500,
        }
    }
}

/// A refusal: `{"kind", "message"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminError {
    pub kind: ErrorKind,
    #[serde(default)]
    pub message: String,
}

impl AdminError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> AdminError {
        AdminError {
            kind,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> AdminError {
        AdminError::new(ErrorKind::BadRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> AdminError {
        AdminError::new(ErrorKind::NotFound, message)
    }
}

impl std::fmt::Display for AdminError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)
    }
}

impl std::error::Error for AdminError {}

/// The answer object of an op's outcome: an object answer gets `"ok":
/// true` added, any other value is `{"ok": true, "value": V}`; a refusal is
/// `{"ok": false, "error": {"kind", "message"}}`.
pub fn encode_answer(outcome: Result<Value, AdminError>) -> Value {
    match outcome {
        Ok(Value::Object(mut m)) => {
            m.insert("ok".into(), Value::Bool(true));
            Value::Object(m)
        }
        Ok(other) => json!({"ok": true, "value": other}),
        Err(e) => json!({"ok": false, "error": e}),
    }
}

/// An answer object read back: the object of `"ok": true`, the refusal of
/// `"ok": false` (a missing or unreadable `error` is a refusal of kind
/// [`ErrorKind::Other`]), or `None` when `answer` has no boolean `ok` (it is
/// not a control-plane answer).
pub fn decode_answer(answer: &Value) -> Option<Result<&Map<String, Value>, AdminError>> {
    let m = answer.as_object()?;
    match m.get("ok")?.as_bool()? {
        true => Some(Ok(m)),
        false => Some(Err(m
            .get("error")
            .and_then(|e| AdminError::deserialize(e).ok())
            .unwrap_or_else(|| {
                AdminError::new(ErrorKind::Other, "a refusal without an error object")
            }))),
    }
}

/// The vocabulary as JSON, for clients in other languages to check theirs
/// against: `{"ops": {NAME: {"args": [..], "change": bool, "journaled":
/// bool}}, "error_kinds": [..], "job_states": {NAME: {"finished": bool}},
/// "workflow_states": {NAME: {"finished": bool}}, "reject_reasons": [..]}`.
pub fn vocabulary() -> Value {
    let examples = AdminOp::examples();
    let mut ops = Map::new();
    for name in OpName::iter() {
        let mut args: Vec<String> = Vec::new();
        for ex in examples.iter().filter(|e| e.name() == name) {
            if let Value::Object(m) = ex.to_value() {
                for k in m.keys().filter(|k| *k != "op") {
                    if !args.contains(k) {
                        args.push(k.clone());
                    }
                }
            }
        }
        ops.insert(
            name.as_str().into(),
            json!({"args": args, "change": name.is_change(), "journaled": name.is_journaled()}),
        );
    }
    let kinds: Vec<&str> = ErrorKind::on_the_wire().map(ErrorKind::as_str).collect();
    let states: Map<String, Value> = ViewState::iter()
        .map(|s| (s.as_str().into(), json!({"finished": s.is_finished()})))
        .collect();
    let workflow_states: Map<String, Value> = WorkflowState::iter()
        .map(|s| (s.as_str().into(), json!({"finished": s.is_finished()})))
        .collect();
    let rejects: Vec<&str> = crate::RejectReason::KNOWN
        .iter()
        .map(crate::RejectReason::as_str)
        .collect();
    json!({
        "ops": ops,
        "error_kinds": kinds,
        "job_states": states,
        "workflow_states": workflow_states,
        "reject_reasons": rejects,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn back(v: Value) -> AdminOp {
        AdminOp::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"))
    }

    /// Every op against the JSON the router has always read (the tables of
    /// docs/PROTOCOL.md, "Control plane").
    #[test]
    fn every_op_round_trips_to_the_json_of_the_wire() {
        let wire = [
            json!({"op": "status"}),
            json!({"op": "job", "msgid": "m"}),
            json!({"op": "jobs", "queue": "q", "state": "in-flight", "contains": "c",
                   "order": "oldest", "limit": 7, "cursor": "u1"}),
            json!({"op": "cancel", "msgid": "m"}),
            json!({"op": "dead", "queue": "q", "contains": "c", "limit": 7, "cursor": "1"}),
            json!({"op": "dead-retry", "msgid": "m"}),
            json!({"op": "dead-retry", "all": true, "queue": "q", "contains": "c"}),
            json!({"op": "dead-discard", "msgid": "m"}),
            json!({"op": "dead-discard", "all": true, "queue": "q", "contains": "c"}),
            json!({"op": "requeue", "msgid": "m"}),
            json!({"op": "queues"}),
            json!({"op": "pause", "queue": "q"}),
            json!({"op": "resume", "queue": "q"}),
            json!({"op": "purge", "queue": "q"}),
            json!({"op": "workers"}),
            json!({"op": "drain", "worker": "w"}),
            json!({"op": "undrain", "worker": "w"}),
            json!({"op": "schedules"}),
            json!({"op": "unschedule", "id": "s"}),
            json!({"op": "shutdown"}),
            json!({"op": "limits-set", "queue": "q", "concurrency": 2,
                   "concurrency_per_key": 1, "rate": "10/1", "rate_per_key": "none",
                   "fair": true}),
            json!({"op": "limits-show", "queue": "q"}),
            json!({"op": "limits-clear", "queue": "q"}),
            json!({"op": "workflow", "id": "w"}),
            json!({"op": "batch", "id": "b"}),
        ];
        let examples = AdminOp::examples();
        assert_eq!(examples.len(), wire.len());
        for (op, json) in examples.iter().zip(wire) {
            assert_eq!(op.to_value(), json, "{op:?}");
            assert_eq!(&back(json.clone()), op, "{json}");
            assert_eq!(json["op"], op.name().as_str());
            assert_eq!(
                AdminOp::decode(json.to_string().as_bytes()).as_ref(),
                Ok(op)
            );
        }
        let named: Vec<OpName> = examples.iter().map(AdminOp::name).collect();
        for name in OpName::iter() {
            assert!(named.contains(&name), "{name} has an example");
        }
    }

    #[test]
    fn optional_arguments_may_be_absent_or_null_and_unknown_keys_are_ignored() {
        assert_eq!(
            back(json!({"op": "jobs"})),
            AdminOp::Jobs(JobsQuery::default())
        );
        assert_eq!(
            back(json!({"op": "jobs", "queue": null, "limit": null, "x": 1})),
            AdminOp::Jobs(JobsQuery::default())
        );
        assert_eq!(back(json!({"op": "status", "x": 1})), AdminOp::Status);
        // A msgid wins over filters; `all` is only ever `true`.
        assert_eq!(
            back(json!({"op": "dead-retry", "msgid": "m", "queue": "q", "all": "yes"})),
            AdminOp::DeadRetry(DeadTarget::One { msgid: "m".into() })
        );
        assert_eq!(
            back(json!({"op": "dead-discard", "all": true})),
            AdminOp::DeadDiscard(DeadTarget::All {
                queue: None,
                contains: None
            })
        );
    }

    #[test]
    fn what_does_not_decode_is_a_bad_request_saying_why() {
        for (req, why) in [
            (&b"{"[..], "not JSON"),
            (b"[1]", "must be a JSON object"),
            (br#"{"nop": 1}"#, "missing argument op"),
            (br#"{"op": 3}"#, "op must be a string"),
            (
                br#"{"op": "frobnicate"}"#,
                "unknown op \"frobnicate\" (ops: status, job,",
            ),
            (br#"{"op": "job"}"#, "job: missing field `msgid`"),
            (br#"{"op": "cancel", "msgid": 5}"#, "cancel: invalid type"),
            (br#"{"op": "jobs", "limit": 0}"#, "jobs: invalid value"),
            (br#"{"op": "jobs", "limit": -1}"#, "jobs: invalid value"),
            (
                br#"{"op": "jobs", "state": "sleeping"}"#,
                "unknown variant `sleeping`",
            ),
            (br#"{"op": "jobs", "order": "up"}"#, "unknown variant `up`"),
            (br#"{"op": "dead-retry"}"#, "give either msgid or all: true"),
            (
                br#"{"op": "dead-discard", "msgid": "m", "all": true}"#,
                "give either msgid or all: true",
            ),
        ] {
            let e = AdminOp::decode(req).unwrap_err();
            assert_eq!(e.kind, ErrorKind::BadRequest);
            assert!(
                e.message.contains(why),
                "{}: {e}",
                String::from_utf8_lossy(req)
            );
        }
    }

    #[test]
    fn reads_and_changes() {
        let reads: Vec<&str> = OpName::iter()
            .filter(|n| !n.is_change())
            .map(OpName::as_str)
            .collect();
        assert_eq!(
            reads,
            [
                "status",
                "job",
                "jobs",
                "dead",
                "queues",
                "workers",
                "schedules",
                "limits-show",
                "workflow",
                "batch"
            ]
        );
        let journaled: Vec<&str> = OpName::iter()
            .filter(|n| n.is_journaled())
            .map(OpName::as_str)
            .collect();
        assert_eq!(
            journaled,
            [
                "cancel",
                "dead-retry",
                "dead-discard",
                "requeue",
                "pause",
                "resume",
                "purge",
                "unschedule",
                "limits-set",
                "limits-clear"
            ]
        );
        assert_eq!(OpName::parse("dead-retry"), Some(OpName::DeadRetry));
        assert_eq!(OpName::parse("dead_retry"), None);
    }

    #[test]
    fn every_error_kind_has_its_name_and_http_status() {
        let table = [
            (ErrorKind::BadRequest, "bad-request", 400),
            (ErrorKind::NotFound, "not-found", 404),
            (ErrorKind::Unsupported, "unsupported", 409),
            (ErrorKind::Conflict, "conflict", 409),
            (ErrorKind::JournalUnavailable, "journal-unavailable", 503),
            (ErrorKind::ShuttingDown, "shutting-down", 503),
        ];
        assert_eq!(
            ErrorKind::on_the_wire().collect::<Vec<_>>(),
            table.iter().map(|t| t.0).collect::<Vec<_>>()
        );
        for (kind, name, status) in table {
            assert_eq!(kind.as_str(), name);
            assert_eq!(kind.http_status(), status, "{name}");
            assert_eq!(serde_json::to_value(kind).unwrap(), json!(name));
            assert_eq!(
                serde_json::from_value::<ErrorKind>(json!(name)).unwrap(),
                kind
            );
        }
        assert_eq!(ErrorKind::Other.http_status(), 500);
        assert_eq!(
            serde_json::from_value::<ErrorKind>(json!("a-future-kind")).unwrap(),
            ErrorKind::Other
        );
    }

    #[test]
    fn answers_encode_and_decode() {
        let ok = encode_answer(Ok(json!({"jobs": []})));
        assert_eq!(ok, json!({"jobs": [], "ok": true}));
        assert_eq!(decode_answer(&ok).unwrap().unwrap()["jobs"], json!([]));
        assert_eq!(encode_answer(Ok(json!(3))), json!({"ok": true, "value": 3}));
        let refused = encode_answer(Err(AdminError::not_found("no job m")));
        assert_eq!(
            refused,
            json!({"ok": false, "error": {"kind": "not-found", "message": "no job m"}})
        );
        assert_eq!(
            decode_answer(&refused).unwrap().unwrap_err(),
            AdminError::not_found("no job m")
        );
        let future = json!({"ok": false, "error": {"kind": "a-future-kind", "message": "m"}});
        assert_eq!(
            decode_answer(&future).unwrap().unwrap_err().kind,
            ErrorKind::Other
        );
        assert_eq!(
            decode_answer(&json!({"ok": false}))
                .unwrap()
                .unwrap_err()
                .kind,
            ErrorKind::Other
        );
        assert!(decode_answer(&json!({"jobs": []})).is_none());
        assert!(decode_answer(&json!([1])).is_none());
    }

    #[test]
    fn the_vocabulary_lists_each_op_with_its_arguments() {
        let v = vocabulary();
        assert_eq!(
            v["ops"]["jobs"]["args"],
            json!(["queue", "state", "contains", "order", "limit", "cursor"])
        );
        assert_eq!(
            v["ops"]["dead-retry"],
            json!({"args": ["msgid", "all", "queue", "contains"], "change": true, "journaled": true})
        );
        assert_eq!(
            v["ops"]["drain"],
            json!({"args": ["worker"], "change": true, "journaled": false})
        );
        assert_eq!(v["ops"]["status"]["args"], json!([]));
        assert_eq!(v["ops"].as_object().unwrap().len(), OpName::iter().count());
        assert_eq!(v["error_kinds"].as_array().unwrap().len(), 6);
        assert_eq!(v["job_states"]["dead-lettered"], json!({"finished": true}));
        assert_eq!(v["job_states"]["in-flight"], json!({"finished": false}));
        assert_eq!(v["job_states"].as_object().unwrap().len(), 9);
        assert_eq!(v["workflow_states"]["succeeded"], json!({"finished": true}));
        assert_eq!(v["workflow_states"]["pending"], json!({"finished": false}));
    }
}
