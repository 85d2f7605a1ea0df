//! Workflows as data: the `WORKFLOW` spec a client sends (a DAG of jobs),
//! its validation, the state of each node, the journal blobs, and how a
//! node's payload gets its parents' results. No behaviour of the state
//! machine: the rules (when a node starts, what a failure or a cancel
//! does, restore) are `router/workflow.rs`.
//!
//! **Passing results.** A node with parents starts when every parent is
//! done; its MSG gets one argument prepended, by its `pass`:
//! `one` (exactly one parent: that parent's result value — a chain),
//! `list` (the list of its parents' values in `after` order — a chord's
//! callback, or what follows a group in a chain), `none` (nothing). The
//! argument goes first in `args` of a `run` job (`["run", {"args": [...]}]`)
//! or of a `call` job whose `args` is a list (absent or null: `[value]`;
//! anything else: `[value, args]`); a `shell` job cannot take one. A
//! result value is the `value` of the REPLY payload `{"value": V}` (null
//! when there is none).
//!
//! **Nested lists (`shape`).** A node may give `shape` instead of taking
//! a flat list: a JSON tree of arrays whose leaves are ids of its parents
//! (`[["a", "b"], "c"]`); the argument passed is that tree with each id
//! replaced by the parent's value (`[[A, B], C]`). The workflow's result
//! may likewise be shaped by `output_shape` (leaves: any node ids). A
//! group inside a group (Celery gives a nested list when the inner one is
//! not directly a member, e.g. a chain ending in a group) is written so.
//! At most [`MAX_SHAPE_DEPTH`] levels; `shape` implies `pass: list`.
//!
//! **Per-node options.** Each node has its own `queue` and `headers`
//! (`retry-count`, `timeout`, `key`, `priority`, ...): its job is exactly a
//! REQUEST with those; the headers are checked as a REQUEST's are
//! (flow-control items included), a bad one refuses the workflow.
//!
//! **States.** A workflow is `pending` (no node dispatched yet),
//! `running`, `cancelling` (cancelled, a started node not yet ended),
//! then `succeeded`, `failed` or `cancelled` ([`WorkflowState`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Nodes per workflow, at most.
pub const MAX_NODES: usize = 1_000;
/// Unfinished workflows the router holds, at most (more: `queue-full`).
pub const MAX_WORKFLOWS: usize = 10_000;
/// Bytes of a node's result value (as JSON) the router keeps and passes
/// on; a bigger result fails the node (`result-too-large`).
pub const MAX_RESULT_BYTES: usize = 1 << 20;
/// Bytes of a node id.
pub const MAX_NODE_ID: usize = 64;
/// Levels of arrays in a `shape` or `output_shape`.
pub const MAX_SHAPE_DEPTH: usize = 32;

/// How a node takes its parents' results (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pass {
    One,
    List,
    None,
}

/// One node as the client describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Unique in its workflow; 1 to 64 bytes, no `/` nor `,`.
    pub id: String,
    #[serde(default = "default_queue")]
    pub queue: String,
    /// The HEADERS frame of its job (csv).
    #[serde(default)]
    pub headers: String,
    /// Its MSG (the job payload, as JSON).
    pub msg: Value,
    /// Its parents' ids.
    #[serde(default)]
    pub after: Vec<String>,
    /// Default: `one` with one parent, `list` with more, `none` without.
    #[serde(default)]
    pub pass: Option<Pass>,
    /// The nested list its parents' values are passed as (module
    /// documentation, "Nested lists"); absent: `pass` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Value>,
}

fn default_queue() -> String {
    emqp_proto::DEFAULT_QUEUE.to_string()
}

/// A workflow as the client sends it (the `WORKFLOW` SPEC frame).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub nodes: Vec<NodeSpec>,
    /// The nodes whose results make the workflow's result. Default: the
    /// nodes nobody waits for, in spec order.
    #[serde(default)]
    pub output: Vec<String>,
    /// `one`: the one output node's value; `list`: the list of the output
    /// nodes' values. Default: `one` for one output node, else `list`.
    #[serde(default)]
    pub output_pass: Option<Pass>,
    /// The workflow's result as a nested list of node values (leaves:
    /// node ids); replaces `output` and `output_pass`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_shape: Option<Value>,
}

/// A `shape` checked: leaves are node indexes.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Node(usize),
    List(Vec<Shape>),
}

impl Shape {
    /// Read `v` (arrays of arrays of node ids), each id looked up by
    /// `index` (None: not allowed there).
    fn parse(
        v: &Value,
        index: &dyn Fn(&str) -> Option<usize>,
        depth: usize,
    ) -> Result<Shape, String> {
        match v {
            Value::String(id) => index(id)
                .map(Shape::Node)
                .ok_or_else(|| format!("shape: {id} is not a node it may name")),
            Value::Array(a) if depth < MAX_SHAPE_DEPTH => a
                .iter()
                .map(|x| Shape::parse(x, index, depth + 1))
                .collect::<Result<_, _>>()
                .map(Shape::List),
            Value::Array(_) => Err(format!("shape: deeper than {MAX_SHAPE_DEPTH} levels")),
            _ => Err("shape: arrays of node ids only".into()),
        }
    }

    /// The nodes it names, in order.
    fn leaves(&self, out: &mut Vec<usize>) {
        match self {
            Shape::Node(i) => out.push(*i),
            Shape::List(l) => l.iter().for_each(|s| s.leaves(out)),
        }
    }

    /// The tree with each node replaced by `value(node)`.
    fn fill(&self, value: &dyn Fn(usize) -> Value) -> Value {
        match self {
            Shape::Node(i) => value(*i),
            Shape::List(l) => Value::Array(l.iter().map(|s| s.fill(value)).collect()),
        }
    }
}

/// Where a workflow is, as a whole (module documentation, "States"): the
/// wire vocabulary's.
pub use emqp_proto::admin::WorkflowState;

/// What is known of a node besides its [`NodeState`]: its times, unix
/// milliseconds — its job accepted (`queued`), first dispatched to a
/// worker (`started`); its end is in its state — and, once its workflow
/// finished, the size of a value too large to keep (`value_dropped`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<u64>,
    /// Bytes (as JSON) of the value dropped when the workflow was kept
    /// finished (over `Config::retain_result_bytes`); its value is null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_dropped: Option<u64>,
}

/// Where a node is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum NodeState {
    /// Some parent is not done yet.
    Waiting,
    /// Its job is accepted (buffered, delayed, running or retrying).
    Started { at: u64 },
    /// Its job finished ok with this value.
    Done { at: u64, value: Value },
    /// Its job failed for good (its error payload).
    Failed { at: u64, error: Value },
    /// It never ran to an end: a parent failed, or the workflow was
    /// cancelled (`error` says which).
    Cancelled { at: u64, error: Value },
}

impl NodeState {
    pub fn name(&self) -> &'static str {
        match self {
            NodeState::Waiting => "waiting",
            NodeState::Started { .. } => "started",
            NodeState::Done { .. } => "done",
            NodeState::Failed { .. } => "failed",
            NodeState::Cancelled { .. } => "cancelled",
        }
    }

    /// When it ended (terminal states).
    pub fn ended_at(&self) -> Option<u64> {
        match self {
            NodeState::Done { at, .. }
            | NodeState::Failed { at, .. }
            | NodeState::Cancelled { at, .. } => Some(*at),
            _ => None,
        }
    }

    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            NodeState::Done { .. } | NodeState::Failed { .. } | NodeState::Cancelled { .. }
        )
    }
}

/// An unfinished (or just finished) workflow.
#[derive(Debug, Clone)]
pub struct Workflow {
    pub id: String,
    /// The submitter's frontend identity (its RESULT goes there).
    pub client: Vec<u8>,
    pub spec: Spec,
    pub accepted_unix_ms: u64,
    /// Per node (spec order): its parents' and children's indexes, its pass.
    pub parents: Vec<Vec<usize>>,
    pub children: Vec<Vec<usize>>,
    pub pass: Vec<Pass>,
    pub output: Vec<usize>,
    pub output_pass: Pass,
    pub states: Vec<NodeState>,
    pub meta: Vec<NodeMeta>,
    /// Per node: its `shape`, checked.
    pub shapes: Vec<Option<Shape>>,
    pub output_shape: Option<Shape>,
    /// Cancelled by an operator.
    pub cancelled: bool,
    pub finished_unix_ms: Option<u64>,
}

/// The journal blob of a workflow's graph (`StateKind::Workflow`).
#[derive(Serialize, Deserialize)]
struct GraphBlob {
    client: Vec<u8>,
    accepted: u64,
    spec: Spec,
    #[serde(default)]
    cancelled: bool,
}

impl Workflow {
    /// Check `spec` and build the workflow (every node waiting).
    pub fn new(
        id: &str,
        client: &[u8],
        spec: Spec,
        accepted_unix_ms: u64,
    ) -> Result<Workflow, String> {
        let n = spec.nodes.len();
        if n == 0 {
            return Err("a workflow needs at least one node".into());
        }
        if n > MAX_NODES {
            return Err(format!(
                "a workflow has at most {MAX_NODES} nodes (this one {n})"
            ));
        }
        if id.is_empty() {
            return Err("a workflow needs a msgid".into());
        }
        let mut index = std::collections::HashMap::with_capacity(n);
        for (i, node) in spec.nodes.iter().enumerate() {
            let bad =
                node.id.is_empty() || node.id.len() > MAX_NODE_ID || node.id.contains(['/', ',']);
            if bad {
                return Err(format!(
                    "node id {:?}: 1 to {MAX_NODE_ID} bytes, no '/' nor ','",
                    node.id
                ));
            }
            if index.insert(node.id.as_str(), i).is_some() {
                return Err(format!("node id {} used twice", node.id));
            }
        }
        let mut parents = vec![Vec::new(); n];
        let mut children = vec![Vec::new(); n];
        let mut pass = Vec::with_capacity(n);
        let mut shapes = Vec::with_capacity(n);
        for (i, node) in spec.nodes.iter().enumerate() {
            if node.queue.is_empty() {
                return Err(format!("node {}: empty queue", node.id));
            }
            emqp_proto::Headers::parse(node.headers.as_bytes())
                .map_err(|e| format!("node {}: headers: {e}", node.id))?;
            emqp_proto::headers::frame_flow(node.headers.as_bytes())
                .map_err(|e| format!("node {}: headers: {e}", node.id))?;
            let kind = msg_kind(&node.msg)
                .ok_or_else(|| format!("node {}: msg is not [kind, {{...}}]", node.id))?;
            for p in &node.after {
                let Some(&j) = index.get(p.as_str()) else {
                    return Err(format!("node {}: no node {p} to wait for", node.id));
                };
                if parents[i].contains(&j) {
                    return Err(format!("node {}: waits for {p} twice", node.id));
                }
                parents[i].push(j);
                children[j].push(i);
            }
            if let Some(v) = &node.shape {
                if !matches!(node.pass, None | Some(Pass::List)) {
                    return Err(format!(
                        "node {}: a shape passes a list (pass list)",
                        node.id
                    ));
                }
                let mine = &parents[i];
                let shape = Shape::parse(
                    v,
                    &|id| index.get(id).copied().filter(|j| mine.contains(j)),
                    0,
                )
                .map_err(|e| format!("node {}: {e} (its leaves: ids in after)", node.id))?;
                shapes.push(Some(shape));
            } else {
                shapes.push(None);
            }
            let default_pass = if node.shape.is_some() {
                Pass::List
            } else {
                match parents[i].len() {
                    0 => Pass::None,
                    1 => Pass::One,
                    _ => Pass::List,
                }
            };
            let p = node.pass.unwrap_or(default_pass);
            if p == Pass::One && parents[i].len() != 1 {
                return Err(format!(
                    "node {}: pass one needs exactly one parent (it has {})",
                    node.id,
                    parents[i].len()
                ));
            }
            if p != Pass::None && !matches!(kind, "run" | "call") {
                return Err(format!(
                    "node {}: a {kind} job cannot take its parents' results (pass none)",
                    node.id
                ));
            }
            pass.push(p);
        }
        // Kahn: every node reachable in a topological order, or a cycle.
        let mut indeg: Vec<usize> = parents.iter().map(Vec::len).collect();
        let mut ready: Vec<usize> = (0..n).filter(|i| indeg[*i] == 0).collect();
        let mut seen = 0;
        while let Some(i) = ready.pop() {
            seen += 1;
            for &c in &children[i] {
                indeg[c] -= 1;
                if indeg[c] == 0 {
                    ready.push(c);
                }
            }
        }
        if seen != n {
            return Err("the nodes' dependencies make a cycle".into());
        }
        let output_shape = match &spec.output_shape {
            None => None,
            Some(_) if !spec.output.is_empty() || spec.output_pass.is_some() => {
                return Err("output_shape replaces output and output_pass".into())
            }
            Some(v) => Some(
                Shape::parse(v, &|id| index.get(id).copied(), 0)
                    .map_err(|e| format!("output_{e}"))?,
            ),
        };
        let output: Vec<usize> = if let Some(s) = &output_shape {
            let mut o = Vec::new();
            s.leaves(&mut o);
            o
        } else if spec.output.is_empty() {
            (0..n).filter(|i| children[*i].is_empty()).collect()
        } else {
            spec.output
                .iter()
                .map(|o| {
                    index
                        .get(o.as_str())
                        .copied()
                        .ok_or_else(|| format!("output: no node {o}"))
                })
                .collect::<Result<_, _>>()?
        };
        let output_pass =
            spec.output_pass
                .unwrap_or(if output.len() == 1 && output_shape.is_none() {
                    Pass::One
                } else {
                    Pass::List
                });
        if output_pass == Pass::One && output.len() != 1 {
            return Err("output_pass one needs exactly one output node".into());
        }
        Ok(Workflow {
            id: id.to_string(),
            client: client.to_vec(),
            states: vec![NodeState::Waiting; n],
            meta: vec![NodeMeta::default(); n],
            shapes,
            output_shape,
            spec,
            accepted_unix_ms,
            parents,
            children,
            pass,
            output,
            output_pass,
            cancelled: false,
            finished_unix_ms: None,
        })
    }

    /// The journal blob of the graph.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(&GraphBlob {
            client: self.client.clone(),
            accepted: self.accepted_unix_ms,
            spec: self.spec.clone(),
            cancelled: self.cancelled,
        })
        .unwrap_or_default()
    }

    /// A workflow from its journal blob (every node waiting).
    pub fn decode(id: &str, blob: &[u8]) -> Result<Workflow, String> {
        let b: GraphBlob = serde_json::from_slice(blob).map_err(|e| e.to_string())?;
        let mut w = Workflow::new(id, &b.client, b.spec, b.accepted)?;
        w.cancelled = b.cancelled;
        Ok(w)
    }

    /// The msgid of node `i`'s job: `WORKFLOW_ID/NODE_ID`.
    pub fn job_msgid(&self, i: usize) -> String {
        format!("{}/{}", self.id, self.spec.nodes[i].id)
    }

    pub fn index_of(&self, node: &str) -> Option<usize> {
        self.spec.nodes.iter().position(|n| n.id == node)
    }

    pub fn is_finished(&self) -> bool {
        self.states.iter().all(NodeState::is_terminal)
    }

    /// Node `i`'s value, if done.
    fn value(&self, i: usize) -> Option<&Value> {
        match &self.states[i] {
            NodeState::Done { value, .. } => Some(value),
            _ => None,
        }
    }

    /// Whether every parent of node `i` is done.
    pub fn parents_done(&self, i: usize) -> bool {
        self.parents[i].iter().all(|p| self.value(*p).is_some())
    }

    /// The first parent of `i` that failed or was cancelled.
    pub fn parent_failed(&self, i: usize) -> Option<usize> {
        self.parents[i].iter().copied().find(|p| {
            matches!(
                self.states[*p],
                NodeState::Failed { .. } | NodeState::Cancelled { .. }
            )
        })
    }

    /// The MSG of node `i` with its parents' results passed (every parent
    /// done).
    pub fn payload(&self, i: usize) -> Result<Vec<u8>, String> {
        let node = &self.spec.nodes[i];
        let arg = match self.pass[i] {
            Pass::None => return serde_json::to_vec(&node.msg).map_err(|e| e.to_string()),
            Pass::One => self
                .value(self.parents[i][0])
                .cloned()
                .unwrap_or(Value::Null),
            Pass::List => match &self.shapes[i] {
                Some(shape) => shape.fill(&|p| self.value(p).cloned().unwrap_or(Value::Null)),
                None => Value::Array(
                    self.parents[i]
                        .iter()
                        .map(|p| self.value(*p).cloned().unwrap_or(Value::Null))
                        .collect(),
                ),
            },
        };
        let mut msg = node.msg.clone();
        prepend_arg(&mut msg, arg)?;
        serde_json::to_vec(&msg).map_err(|e| e.to_string())
    }

    /// The workflow's result: ok with the output value, or failed with the
    /// first failed node's error (spec order).
    pub fn result(&self) -> (emqp_proto::ResultStatus, Value) {
        let failed = self
            .states
            .iter()
            .enumerate()
            .find_map(|(i, s)| match s {
                NodeState::Failed { error, .. } => Some((i, error.clone(), "failed")),
                _ => None,
            })
            .or_else(|| {
                self.states.iter().enumerate().find_map(|(i, s)| match s {
                    NodeState::Cancelled { error, .. } => Some((i, error.clone(), "cancelled")),
                    _ => None,
                })
            });
        if let Some((i, error, how)) = failed {
            let node = &self.spec.nodes[i].id;
            let kind = if self.cancelled {
                "cancelled"
            } else {
                "workflow-failed"
            };
            return (
                emqp_proto::ResultStatus::Failed,
                serde_json::json!({ "error": {
                    "kind": kind,
                    "message": format!("workflow {}: node {node} {how}", self.id),
                    "node": node,
                    "cause": error.get("error").cloned().unwrap_or(error),
                }}),
            );
        }
        let value = match self.output_pass {
            _ if self.output_shape.is_some() => self
                .output_shape
                .as_ref()
                .map(|s| s.fill(&|o| self.value(o).cloned().unwrap_or(Value::Null)))
                .unwrap_or(Value::Null),
            Pass::One => self.value(self.output[0]).cloned().unwrap_or(Value::Null),
            _ => Value::Array(
                self.output
                    .iter()
                    .map(|o| self.value(*o).cloned().unwrap_or(Value::Null))
                    .collect(),
            ),
        };
        (
            emqp_proto::ResultStatus::Ok,
            serde_json::json!({ "value": value }),
        )
    }
}

/// The kind of a MSG `[kind, {...}]`.
fn msg_kind(msg: &Value) -> Option<&str> {
    let a = msg.as_array()?;
    let kind = a.first()?.as_str()?;
    a.get(1)?.as_object()?;
    Some(kind)
}

/// Put `arg` first in the MSG's arguments (module documentation).
pub fn prepend_arg(msg: &mut Value, arg: Value) -> Result<(), String> {
    let kind = msg_kind(msg).unwrap_or_default().to_string();
    let Some(obj) = msg.get_mut(1).and_then(Value::as_object_mut) else {
        return Err("msg is not [kind, {...}]".into());
    };
    match kind.as_str() {
        "run" | "call" => {
            let args = obj.entry("args").or_insert(Value::Null);
            match args {
                Value::Array(a) => a.insert(0, arg),
                Value::Null => *args = Value::Array(vec![arg]),
                _ if kind == "call" => {
                    let old = std::mem::take(args);
                    *args = Value::Array(vec![arg, old]);
                }
                _ => return Err("a run job's args must be a list".into()),
            }
            Ok(())
        }
        k => Err(format!("a {k} job cannot take its parents' results")),
    }
}

/// The value of a REPLY payload `{"value": V}` (null when there is none).
pub fn result_value(payload: &[u8]) -> Value {
    serde_json::from_slice::<Value>(payload)
        .ok()
        .and_then(|mut v| v.get_mut("value").map(Value::take))
        .unwrap_or(Value::Null)
}

/// The error object of a failed payload (the payload itself as text when it
/// is not JSON).
pub fn error_value(payload: &[u8]) -> Value {
    serde_json::from_slice::<Value>(payload)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(payload).into_owned()))
}

/// A node's state and times as one JSON object (`{"state": ..., "at":
/// ..., "queued": ..., "started": ...}`).
fn node_json(state: &NodeState, times: &NodeMeta) -> Value {
    let mut v = serde_json::to_value(state).unwrap_or(Value::Null);
    if let (Some(m), Ok(Value::Object(t))) = (v.as_object_mut(), serde_json::to_value(times)) {
        m.extend(t);
    }
    v
}

fn node_from_json(v: Value) -> Result<(NodeState, NodeMeta), String> {
    let times: NodeMeta = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    let state: NodeState = serde_json::from_value(v).map_err(|e| e.to_string())?;
    Ok((state, times))
}

/// The journal blob of a finished node (`StateKind::WorkflowNode`).
pub fn encode_node(state: &NodeState, times: &NodeMeta) -> Vec<u8> {
    serde_json::to_vec(&node_json(state, times)).unwrap_or_default()
}

/// A node blob (one written before times were kept has none).
pub fn decode_node(blob: &[u8]) -> Result<(NodeState, NodeMeta), String> {
    node_from_json(serde_json::from_slice(blob).map_err(|e| e.to_string())?)
}

/// The journal blob of a finished workflow (`StateKind::WorkflowFinished`):
/// its graph, every node's state and times, when it finished.
#[derive(Serialize, Deserialize)]
struct FinishedBlob {
    #[serde(flatten)]
    graph: GraphBlob,
    finished: u64,
    nodes: Vec<Value>,
}

impl Workflow {
    /// Where it is as a whole.
    pub fn state(&self) -> WorkflowState {
        if self.finished_unix_ms.is_some() {
            return match self.result().0 {
                emqp_proto::ResultStatus::Ok => WorkflowState::Succeeded,
                emqp_proto::ResultStatus::Failed if self.cancelled => WorkflowState::Cancelled,
                emqp_proto::ResultStatus::Failed => WorkflowState::Failed,
            };
        }
        if self.cancelled {
            WorkflowState::Cancelling
        } else if self.states.iter().any(NodeState::is_terminal)
            || self.meta.iter().any(|t| t.started.is_some())
        {
            WorkflowState::Running
        } else {
            WorkflowState::Pending
        }
    }

    /// Drop the node values over `max` bytes (as JSON): a finished
    /// workflow is kept with small values only, as a finished job is.
    pub fn drop_values_over(&mut self, max: usize) {
        for (s, m) in self.states.iter_mut().zip(self.meta.iter_mut()) {
            if let NodeState::Done { value, .. } = s {
                let size = serde_json::to_vec(value).map(|v| v.len()).unwrap_or(0);
                if size > max {
                    *value = Value::Null;
                    m.value_dropped = Some(size as u64);
                }
            }
        }
    }

    /// Whether an output node's value was dropped (the result cannot be
    /// told again).
    pub fn result_dropped(&self) -> bool {
        self.output
            .iter()
            .any(|o| self.meta[*o].value_dropped.is_some())
    }

    /// The journal blob of a finished workflow.
    pub fn encode_finished(&self) -> Vec<u8> {
        serde_json::to_vec(&FinishedBlob {
            graph: GraphBlob {
                client: self.client.clone(),
                accepted: self.accepted_unix_ms,
                spec: self.spec.clone(),
                cancelled: self.cancelled,
            },
            finished: self.finished_unix_ms.unwrap_or(0),
            nodes: self
                .states
                .iter()
                .zip(&self.meta)
                .map(|(s, t)| node_json(s, t))
                .collect(),
        })
        .unwrap_or_default()
    }

    /// A finished workflow from its journal blob.
    pub fn decode_finished(id: &str, blob: &[u8]) -> Result<Workflow, String> {
        let b: FinishedBlob = serde_json::from_slice(blob).map_err(|e| e.to_string())?;
        let mut w = Workflow::new(id, &b.graph.client, b.graph.spec, b.graph.accepted)?;
        if b.nodes.len() != w.states.len() {
            return Err(format!(
                "{} node states for {} nodes",
                b.nodes.len(),
                w.states.len()
            ));
        }
        for (i, v) in b.nodes.into_iter().enumerate() {
            let (s, t) = node_from_json(v)?;
            w.states[i] = s;
            w.meta[i] = t;
        }
        w.cancelled = b.graph.cancelled;
        w.finished_unix_ms = Some(b.finished);
        Ok(w)
    }
}
