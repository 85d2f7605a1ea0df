//! Admin queries on the router's administrative socket (0.3.13 and ours):
//! `['', eMQP/1.0, CMD, admin:<uuid4>]` → `REPLY [json]`, through the
//! workspace's one admin client (`emq_transport::admin`).

use std::time::{Duration, Instant};

use emq_transport::admin::AdminClient;
use emqp_proto::Command;
use serde_json::Value;

use crate::zmq_ctx;

/// Send `cmd` (STATUS, ROUTER_SHOW_WORKERS, ...) and parse the REPLY JSON.
pub fn query(endpoint: &str, cmd: Command, timeout: Duration) -> Result<Value, String> {
    query_as(endpoint, cmd, timeout, None)
}

/// [`query`] as a CURVE client with `curve`'s keys (or in clear text).
pub fn query_as(
    endpoint: &str,
    cmd: Command,
    timeout: Duration,
    curve: Option<&emq_transport::curve::CurveClient>,
) -> Result<Value, String> {
    let client = AdminClient::connect(zmq_ctx(), endpoint, "it-admin", timeout, curve.cloned())
        .map_err(|e| e.to_string())?;
    client
        .query(cmd)
        .map(|a| a.json)
        .map_err(|e| format!("{e} (from {endpoint})"))
}

pub fn status(endpoint: &str) -> Result<Value, String> {
    query(endpoint, Command::Status, Duration::from_secs(5))
}

pub fn show_workers(endpoint: &str) -> Result<Value, String> {
    query(endpoint, Command::RouterShowWorkers, Duration::from_secs(5))
}

/// One entry of `connected_workers`.
#[derive(Debug, Clone)]
pub struct WorkerView {
    pub id: String,
    pub queues: Value,
    pub available_slots: i64,
    pub raw: Value,
}

impl WorkerView {
    /// Queue names the router has for this worker.
    pub fn queue_names(&self) -> Vec<String> {
        self.queues
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|q| match q {
                        Value::Array(p) if p.len() == 2 => p[1].as_str().map(String::from),
                        Value::String(s) => Some(s.clone()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// `connected_workers` of ROUTER_SHOW_WORKERS.
pub fn workers(endpoint: &str) -> Result<Vec<WorkerView>, String> {
    let v = show_workers(endpoint)?;
    let Some(map) = v.get("connected_workers").and_then(Value::as_object) else {
        return Err(format!(
            "ROUTER_SHOW_WORKERS without connected_workers: {v}"
        ));
    };
    Ok(map
        .iter()
        .map(|(id, w)| WorkerView {
            id: id.clone(),
            queues: w.get("queues").cloned().unwrap_or(Value::Null),
            available_slots: w
                .get("available_slots")
                .and_then(Value::as_i64)
                .unwrap_or(-1),
            raw: w.clone(),
        })
        .collect())
}

/// Sum of the numbers in the object `v[key]` (e.g. STATUS
/// `inflight_messages_by_queue`); 0 when absent.
pub fn sum_of(v: &Value, key: &str) -> i64 {
    v.get(key)
        .and_then(Value::as_object)
        .map(|m| m.values().filter_map(Value::as_i64).sum())
        .unwrap_or(0)
}

/// Poll ROUTER_SHOW_WORKERS until `ok(workers)`; the last view, or an error
/// with it.
pub fn wait_workers(
    endpoint: &str,
    timeout: Duration,
    mut ok: impl FnMut(&[WorkerView]) -> bool,
) -> Result<Vec<WorkerView>, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let last = match workers(endpoint) {
            Ok(w) if ok(&w) => return Ok(w),
            other => other,
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "workers not as expected within {timeout:?}; last view: {last:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Wait for `n` workers with `slots` free slots in total.
pub fn wait_idle_workers(
    endpoint: &str,
    n: usize,
    slots: i64,
    timeout: Duration,
) -> Result<Vec<WorkerView>, String> {
    wait_workers(endpoint, timeout, |w| {
        w.len() == n && w.iter().map(|x| x.available_slots).sum::<i64>() == slots
    })
}

/// Call one admin op with the workspace's admin client; the REPLY's JSON,
/// `None` when the router does not answer or refuses.
pub fn op(endpoint: &str, op: &emqp_proto::AdminOp) -> Option<serde_json::Map<String, Value>> {
    let client = AdminClient::connect(
        zmq_ctx(),
        endpoint,
        "it-admin",
        Duration::from_secs(5),
        None,
    )
    .ok()?;
    client.call(op).ok()
}

/// A workflow's view (`AdminOp::Workflow`: state, nodes).
pub fn workflow(endpoint: &str, id: &str) -> Option<Value> {
    let v = op(endpoint, &emqp_proto::AdminOp::Workflow { id: id.into() })?;
    v.get("workflow").cloned()
}

/// How many nodes of a workflow's view are done.
pub fn done_nodes(workflow: &Value) -> usize {
    workflow["nodes"]
        .as_array()
        .map(|a| a.iter().filter(|n| n["state"] == "done").count())
        .unwrap_or(0)
}

/// A batch's view (`AdminOp::Batch`: state, total, counts).
pub fn batch(endpoint: &str, id: &str) -> Option<Value> {
    let v = op(endpoint, &emqp_proto::AdminOp::Batch { id: id.into() })?;
    v.get("batch").cloned()
}

/// A job's state (`AdminOp::Job`: "queued", "done", ...).
pub fn job_state(endpoint: &str, msgid: &str) -> Option<String> {
    let v = op(
        endpoint,
        &emqp_proto::AdminOp::Job {
            msgid: msgid.into(),
        },
    )?;
    v["job"]["state"].as_str().map(String::from)
}
