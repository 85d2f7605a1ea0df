//! Workflows: a DAG of ordinary jobs, run by the router.
//!
//! - **Intake.** `WORKFLOW [SPEC]` (emq; msgid = the workflow id) is
//!   accepted whole or refused whole: checked (`crate::workflow`: at most
//!   [`MAX_NODES`] nodes, ids, parents known, no cycle, MSGs that can take
//!   their parents' results), refused as a REQUEST would be
//!   (`journal-uncertain`, `shutting-down`, `journal-unavailable`,
//!   `duplicate-msgid`, `malformed`, `queue-full` at [`MAX_WORKFLOWS`]
//!   held). Accepted: one journal batch holds the graph (a state row
//!   `workflow`/ID) and the `Accepted` record of every node without
//!   parents; `REPLY [ID]` once it commits. A WORKFLOW sent again (same
//!   msgid, same spec) while held, or after it finished (while it is
//!   kept, "Finished workflows"), is acknowledged again, not run again.
//! - **Nodes are ordinary jobs**, msgid `ID/NODE`, no client (no RESULT
//!   of their own), each with its own queue and headers (`retry-count`,
//!   `timeout`, `key`, `priority`, ...): dispatch, flow control, retries
//!   and dead letters as for any REQUEST. A node's times are kept: its
//!   job accepted (`queued`), first dispatched (`started`), ended.
//! - **Advance.** When a node's job ends (`completion.rs` calls
//!   [`Router::workflow_job_ended`]), the node is done (its result value
//!   kept, at most [`MAX_RESULT_BYTES`], else failed `result-too-large`),
//!   failed (its job failed for good, dead-lettered, or cancelled), in
//!   the same batch as the job's own record: a state row
//!   `workflow-node`/ID/NODE. Each child whose parents are all done is
//!   accepted then as a job with its parents' results passed into its MSG
//!   (`crate::workflow`, "Passing results"), in that same batch. A failed
//!   node cancels every node that waits for it, directly or not, with an
//!   error naming it; nodes on other branches go on.
//! - **End.** When every node is done, failed or cancelled, the client
//!   gets `RESULT [ID, ok, {"value": V}]` (V: the output node's value, or
//!   the list of the output nodes' values) or `RESULT [ID, failed,
//!   {"error": {"kind": "workflow-failed" | "cancelled", "node": N,
//!   "cause": ...}}]`, held until delivered as any result (`results.rs`),
//!   and in that batch the workflow's graph and node rows are replaced by
//!   one `workflow-finished`/ID row (graph, every node's state, times and
//!   value; a value over `Config::retain_result_bytes` is dropped, its
//!   size kept, as a finished job's result is).
//! - **Finished workflows** stay visible (`workflow`, `job` of the
//!   workflow id, the dashboard), across restarts: at most
//!   `Config::workflows_keep` (the oldest go first), none finished longer
//!   than `Config::workflows_keep_for` ago (checked at each timeout and
//!   lookup); a pruned one's row is deleted and it answers not-found.
//!   `workflows_keep = 0` keeps none (nor writes the rows).
//! - **Cancel.** Admin `cancel` of a workflow id cancels its waiting nodes
//!   and cancels each started node's job as `cancel` does for a job.
//! - **Restore.** At start the finished workflows come back (pruned as
//!   above), then the graph and finished-node rows;
//!   a node whose parents are all done is started — its job is among the
//!   restored jobs (its `Accepted` was in its last parent's batch), or,
//!   if not, accepted again. Each node runs once (or is counted as run
//!   twice, as any job delivered when the router died).
//! - **Journal failure.** If the acceptance batch fails, the workflow is
//!   forgotten (its acknowledgement becomes a REJECT, as a REQUEST's); a
//!   node job accepted in a failed batch is accepted again (its parent's
//!   record is written again with the next batch).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use emqp_proto::{Command, RejectReason, Reply, ResultStatus};
use serde_json::{json, Value};

use super::{frames_of, Router};
use crate::event::{Action, Socket};
use crate::jobs::{Job, JobId};
use crate::journal::{Record, StateKind};
use crate::util::FastMap;
use crate::workflow::{
    decode_node, encode_node, error_value, result_value, NodeMeta, NodeState, Spec, Workflow,
    MAX_NODES, MAX_RESULT_BYTES, MAX_WORKFLOWS,
};

/// The workflows the router holds.
#[derive(Debug, Default)]
pub(crate) struct Workflows {
    pub(crate) live: BTreeMap<String, Workflow>,
    /// Job msgid → (workflow id, node index), for started nodes.
    jobs: FastMap<String, (String, usize)>,
    /// Finished workflows kept ("Finished workflows"), by id ...
    finished: FastMap<String, Workflow>,
    /// ... and in finishing order: (finished unix ms, id).
    finished_order: VecDeque<(u64, String)>,
    pub(crate) accepted: u64,
    pub(crate) succeeded: u64,
    pub(crate) failed: u64,
}

impl Workflows {
    pub(crate) fn len(&self) -> usize {
        self.live.len()
    }

    /// A kept finished workflow.
    pub(crate) fn finished(&self, wf: &str) -> Option<&Workflow> {
        self.finished.get(wf)
    }

    /// A held workflow, unfinished or kept.
    pub(crate) fn get(&self, wf: &str) -> Option<&Workflow> {
        self.live.get(wf).or_else(|| self.finished.get(wf))
    }

    /// The workflow of job `msgid` (`ID/NODE`), if it is a node's of an
    /// unfinished or recent workflow.
    pub(crate) fn of_job(&self, msgid: &str) -> Option<&str> {
        if let Some((w, _)) = self.jobs.get(msgid) {
            return Some(w);
        }
        let (wf, node) = msgid.rsplit_once('/')?;
        self.get(wf)
            .filter(|w| w.index_of(node).is_some())
            .map(|w| w.id.as_str())
    }
}

impl Router {
    /// `WORKFLOW [SPEC]` from `client`.
    pub(super) fn on_workflow(
        &mut self,
        client: Vec<u8>,
        msgid: String,
        spec: Vec<u8>,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let parsed: Result<Spec, String> = serde_json::from_slice(&spec).map_err(|e| e.to_string());
        // Finished already (its RESULT may be delivered): not again.
        let held = self.workflows.get(&msgid);
        if let (Some(w), Ok(s)) = (held, &parsed) {
            if &w.spec == s {
                log::debug!("WORKFLOW {msgid} sent again: acknowledged as the one held");
                let ack = frames_of(self.ids.next_id(), Command::Reply(Reply::ack_of(&msgid)));
                self.send_after_journal(Socket::Frontend, client, ack, None, out);
                return;
            }
        }
        let accepted_ms = self.unix_ms(now);
        let refusal = if self.journal.is_uncertain(&msgid) {
            Err((
                RejectReason::JournalUncertain,
                "the router cannot yet tell whether its journal stored this workflow; send it \
                 again with the same msgid"
                    .to_string(),
            ))
        } else if self.is_draining() {
            Err((
                RejectReason::ShuttingDown,
                "the router is shutting down".to_string(),
            ))
        } else if let Some(why) = self.journal.refusal() {
            self.journal.count_refused();
            Err((RejectReason::JournalUnavailable, why))
        } else if self.workflows.get(&msgid).is_some()
            || self.store.find(&msgid).is_some()
            || self.results.holds(&msgid)
        {
            Err((
                RejectReason::DuplicateMsgid,
                format!("the router already holds a workflow, job or result with msgid {msgid}"),
            ))
        } else if self.workflows.len() >= MAX_WORKFLOWS {
            Err((
                RejectReason::QueueFull,
                format!("the router holds {MAX_WORKFLOWS} unfinished workflows (its limit)"),
            ))
        } else {
            parsed
                .and_then(|s| Workflow::new(&msgid, &client, s, accepted_ms))
                .map_err(|e| (RejectReason::Malformed, format!("workflow: {e}")))
        };
        let w = match refusal {
            Ok(w) => w,
            Err((reason, text)) => {
                log::warn!("WORKFLOW {msgid} rejected ({}): {text}", reason.as_str());
                self.reject(client, msgid, reason, text, out);
                return;
            }
        };
        log::info!(
            "workflow {msgid} accepted: {} node(s), {} to start",
            w.spec.nodes.len(),
            w.parents.iter().filter(|p| p.is_empty()).count()
        );
        self.journal.record(
            Record::PutState {
                kind: StateKind::Workflow,
                id: msgid.clone(),
                blob: w.encode(),
            },
            None,
        );
        let roots: Vec<usize> = (0..w.spec.nodes.len())
            .filter(|i| w.parents[*i].is_empty())
            .collect();
        self.workflows.accepted += 1;
        self.workflows.live.insert(msgid.clone(), w);
        let mut first = None;
        for i in roots {
            let jid = self.start_node(&msgid, i, now, out);
            first = first.or(jid);
        }
        let ack = frames_of(self.ids.next_id(), Command::Reply(Reply::ack_of(&msgid)));
        let tag = first.map(|j| (j, msgid.clone()));
        self.send_after_journal(Socket::Frontend, client, ack, tag, out);
        self.settle_workflow(&msgid, now, out);
    }

    /// Accept node `i` of workflow `wf` as a job (its parents are done).
    fn start_node(
        &mut self,
        wf: &str,
        i: usize,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Option<JobId> {
        let at = self.unix_ms(now);
        let w = self.workflows.live.get(wf)?;
        let msgid = w.job_msgid(i);
        let node = w.spec.nodes[i].clone();
        let payload = match w.payload(i) {
            Ok(p) => p,
            Err(e) => {
                self.node_ended(wf, i, fail("bad-job", &e, at), now, out);
                return None;
            }
        };
        if let Some(max) = self.cfg.max_message_size {
            if payload.len() > max {
                let e = format!(
                    "with its parents' results its message is {} bytes, over the router's \
                     limit of {max}",
                    payload.len()
                );
                self.node_ended(wf, i, fail("payload-too-large", &e, at), now, out);
                return None;
            }
        }
        if self.store.find(&msgid).is_some() {
            let e = format!("msgid {msgid} is taken by another job");
            self.node_ended(wf, i, fail("bad-job", &e, at), now, out);
            return None;
        }
        let (jid, route) =
            self.accept_own(&msgid, &node.queue, node.headers.as_bytes(), &payload, now);
        if let Some(w) = self.workflows.live.get_mut(wf) {
            w.states[i] = NodeState::Started { at };
            w.meta[i] = NodeMeta {
                queued: Some(at),
                ..NodeMeta::default()
            };
        }
        self.workflows.jobs.insert(msgid, (wf.to_string(), i));
        self.pump(&route, now, out);
        Some(jid)
    }

    /// Job `msgid` was dispatched: a node's first dispatch is its start.
    pub(super) fn workflow_job_dispatched(&mut self, msgid: &str, now: Duration) {
        if self.workflows.jobs.is_empty() {
            return;
        }
        let Some((wf, i)) = self.workflows.jobs.get(msgid) else {
            return;
        };
        let at = self.unix_ms(now);
        if let Some(t) = self
            .workflows
            .live
            .get_mut(wf)
            .and_then(|w| w.meta.get_mut(*i))
        {
            t.started.get_or_insert(at);
        }
    }

    /// A job ended (done, failed for good, dead-lettered or cancelled):
    /// if it is a workflow node, the workflow advances.
    pub(super) fn workflow_job_ended(
        &mut self,
        job: &Job,
        status: ResultStatus,
        payload: &[u8],
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        if self.workflows.jobs.is_empty() {
            return;
        }
        let msgid = job.msgid().to_string();
        let Some((wf, i)) = self.workflows.jobs.remove(&msgid) else {
            return;
        };
        let at = self.unix_ms(now);
        let state = match status {
            ResultStatus::Ok => {
                let value = result_value(payload);
                let size = serde_json::to_vec(&value).map(|v| v.len()).unwrap_or(0);
                if size > MAX_RESULT_BYTES {
                    let e = format!(
                        "its result value is {size} bytes, over the {MAX_RESULT_BYTES} a \
                         workflow passes on"
                    );
                    fail("result-too-large", &e, at)
                } else {
                    NodeState::Done { at, value }
                }
            }
            ResultStatus::Failed => NodeState::Failed {
                at,
                error: error_value(payload),
            },
        };
        self.node_ended(&wf, i, state, now, out);
    }

    /// Node `i` of `wf` ends in `state`: journal it, start the children
    /// that can start, cancel those that never will, finish the workflow
    /// when every node ended.
    fn node_ended(
        &mut self,
        wf: &str,
        i: usize,
        state: NodeState,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let at = self.unix_ms(now);
        let Some(w) = self.workflows.live.get_mut(wf) else {
            return;
        };
        if w.states[i].is_terminal() {
            return;
        }
        let node_id = w.spec.nodes[i].id.clone();
        log::info!("workflow {wf}: node {node_id} {}", state.name());
        let ok = matches!(state, NodeState::Done { .. });
        self.journal.record(
            Record::PutState {
                kind: StateKind::WorkflowNode,
                id: format!("{wf}/{node_id}"),
                blob: encode_node(&state, &w.meta[i]),
            },
            None,
        );
        w.states[i] = state;
        let children = w.children[i].clone();
        if ok {
            for c in children {
                let Some(w) = self.workflows.live.get(wf) else {
                    return;
                };
                if matches!(w.states[c], NodeState::Waiting) && w.parents_done(c) {
                    self.start_node(wf, c, now, out);
                }
            }
        } else {
            let error = json!({ "error": {
                "kind": "parent-failed",
                "message": format!("node {node_id} of workflow {wf} failed"),
                "node": node_id,
            }});
            for c in children {
                self.cancel_waiting(wf, c, &error, at);
            }
        }
        self.settle_workflow(wf, now, out);
    }

    /// Cancel node `i` and what waits for it, if it waits still.
    fn cancel_waiting(&mut self, wf: &str, i: usize, error: &Value, at: u64) {
        let mut stack = vec![i];
        while let Some(n) = stack.pop() {
            let Some(w) = self.workflows.live.get_mut(wf) else {
                return;
            };
            if !matches!(w.states[n], NodeState::Waiting) {
                continue;
            }
            let state = NodeState::Cancelled {
                at,
                error: error.clone(),
            };
            let id = format!("{wf}/{}", w.spec.nodes[n].id);
            self.journal.record(
                Record::PutState {
                    kind: StateKind::WorkflowNode,
                    id,
                    blob: encode_node(&state, &w.meta[n]),
                },
                None,
            );
            w.states[n] = state;
            stack.extend(w.children[n].iter().copied());
        }
    }

    /// If every node of `wf` ended: its RESULT, its rows deleted.
    fn settle_workflow(&mut self, wf: &str, now: Duration, out: &mut Vec<Action>) {
        if !self.workflows.live.get(wf).is_some_and(|w| w.is_finished()) {
            return;
        }
        let Some(mut w) = self.workflows.live.remove(wf) else {
            return;
        };
        w.finished_unix_ms = Some(self.unix_ms(now));
        for n in &w.spec.nodes {
            self.journal.record(
                Record::DeleteState {
                    kind: StateKind::WorkflowNode,
                    id: format!("{wf}/{}", n.id),
                },
                None,
            );
        }
        self.journal.record(
            Record::DeleteState {
                kind: StateKind::Workflow,
                id: wf.to_string(),
            },
            None,
        );
        let (status, value) = w.result();
        match status {
            ResultStatus::Ok => self.workflows.succeeded += 1,
            ResultStatus::Failed => self.workflows.failed += 1,
        }
        log::info!("workflow {wf} finished ({})", status.as_str());
        if !w.client.is_empty() {
            let payload = serde_json::to_vec(&value).unwrap_or_default();
            self.send_result_for(
                wf.to_string(),
                w.client.clone(),
                false,
                status,
                payload,
                now,
                out,
            );
        }
        w.drop_values_over(self.cfg.retain_result_bytes);
        self.keep_finished_workflow(w, true);
        self.trim_finished_workflows(now);
    }

    /// Keep finished `w` for lookups (journaled when `record`: at its
    /// end, not at restore).
    fn keep_finished_workflow(&mut self, w: Workflow, record: bool) {
        if self.cfg.workflows_keep == 0 {
            return;
        }
        let id = w.id.clone();
        if record {
            self.journal.record(
                Record::PutState {
                    kind: StateKind::WorkflowFinished,
                    id: id.clone(),
                    blob: w.encode_finished(),
                },
                None,
            );
        }
        let at = w.finished_unix_ms.unwrap_or(0);
        if self.workflows.finished.insert(id.clone(), w).is_none() {
            self.workflows.finished_order.push_back((at, id));
        }
    }

    /// Finished workflows no longer kept: fewer than `workflows_keep`,
    /// none finished before `workflows_keep_for` ago; each pruned one's
    /// row deleted.
    pub(super) fn trim_finished_workflows(&mut self, now: Duration) {
        let cutoff = self.workflow_cutoff(now);
        while let Some((at, _)) = self.workflows.finished_order.front() {
            let over = self.workflows.finished_order.len() > self.cfg.workflows_keep;
            if !over && *at >= cutoff {
                break;
            }
            let Some((_, id)) = self.workflows.finished_order.pop_front() else {
                break;
            };
            self.workflows.finished.remove(&id);
            log::debug!("finished workflow {id} no longer kept");
            self.journal.record(
                Record::DeleteState {
                    kind: StateKind::WorkflowFinished,
                    id,
                },
                None,
            );
        }
    }

    /// Finished workflows that ended before this (unix ms) are not kept.
    fn workflow_cutoff(&self, now: Duration) -> u64 {
        let keep_for = u64::try_from(self.cfg.workflows_keep_for.as_millis()).unwrap_or(u64::MAX);
        self.unix_ms(now).saturating_sub(keep_for)
    }

    /// A workflow held, unfinished or kept and not yet past its age.
    fn workflow_held(&self, wf: &str, now: Duration) -> Option<&Workflow> {
        if let Some(w) = self.workflows.live.get(wf) {
            return Some(w);
        }
        let cutoff = self.workflow_cutoff(now);
        self.workflows
            .finished(wf)
            .filter(|w| w.finished_unix_ms.unwrap_or(0) >= cutoff)
    }

    /// Admin `cancel` of a workflow: its waiting nodes are cancelled, its
    /// started nodes' jobs cancelled as `cancel` does. `None`: no such
    /// unfinished workflow.
    pub(super) fn cancel_workflow(
        &mut self,
        wf: &str,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Option<Value> {
        let at = self.unix_ms(now);
        let w = self.workflows.live.get_mut(wf)?;
        w.cancelled = true;
        let blob = w.encode();
        let started: Vec<String> = (0..w.states.len())
            .filter(|i| matches!(w.states[*i], NodeState::Started { .. }))
            .map(|i| w.job_msgid(i))
            .collect();
        let waiting: Vec<usize> = (0..w.states.len())
            .filter(|i| matches!(w.states[*i], NodeState::Waiting))
            .collect();
        self.journal.record(
            Record::PutState {
                kind: StateKind::Workflow,
                id: wf.to_string(),
                blob,
            },
            None,
        );
        log::info!(
            "workflow {wf} cancelled: {} waiting node(s), {} started",
            waiting.len(),
            started.len()
        );
        let error = json!({ "error": {
            "kind": "cancelled",
            "message": format!("workflow {wf} cancelled by an operator"),
        }});
        for i in &waiting {
            self.cancel_waiting(wf, *i, &error, at);
        }
        let jobs = self.cancel_each(started, now, out);
        self.settle_workflow(wf, now, out);
        // Cancelling while a started node's job is being stopped.
        let state = if self.workflows.live.contains_key(wf) {
            "cancelling"
        } else {
            "cancelled"
        };
        Some(json!({
            "workflow": wf,
            "state": state,
            "nodes_cancelled": waiting.len(),
            "jobs": jobs,
        }))
    }

    /// The acceptance batch of workflows with a root job in `failed`
    /// failed: forget them. Other node jobs of the failed batch are
    /// accepted again.
    pub(super) fn workflow_batch_failed(
        &mut self,
        failed: &[(JobId, String)],
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let mut again = Vec::new();
        for (_, msgid) in failed {
            let Some((wf, i)) = self.workflows.jobs.remove(msgid) else {
                continue;
            };
            let Some(w) = self.workflows.live.get_mut(&wf) else {
                continue;
            };
            if w.parents[i].is_empty() {
                log::warn!("workflow {wf} not accepted: its journal batch failed");
                self.workflows.live.remove(&wf);
                self.journal.record(
                    Record::DeleteState {
                        kind: StateKind::Workflow,
                        id: wf.clone(),
                    },
                    None,
                );
                self.workflows.accepted = self.workflows.accepted.saturating_sub(1);
            } else {
                w.states[i] = NodeState::Waiting;
                again.push((wf, i));
            }
        }
        let live = &self.workflows.live;
        self.workflows
            .jobs
            .retain(|_, (wf, _)| live.contains_key(wf));
        for (wf, i) in again {
            self.start_node(&wf, i, now, out);
        }
    }

    /// Workflows from the journal's state rows (after the jobs): graphs,
    /// finished nodes, and the started nodes' jobs found again.
    pub(super) fn restore_workflows(
        &mut self,
        states: &[(StateKind, String, Vec<u8>)],
        now: Duration,
        out: &mut Vec<Action>,
    ) -> usize {
        let mut finished: Vec<Workflow> = states
            .iter()
            .filter(|(kind, _, _)| *kind == StateKind::WorkflowFinished)
            .filter_map(|(_, id, blob)| match Workflow::decode_finished(id, blob) {
                Ok(w) => Some(w),
                Err(e) => {
                    log::warn!("journal: finished workflow {id} unreadable ({e}): skipped");
                    None
                }
            })
            .collect();
        finished.sort_by_key(|w| w.finished_unix_ms);
        for w in finished {
            self.keep_finished_workflow(w, false);
        }
        self.trim_finished_workflows(now);
        for (kind, id, blob) in states {
            if *kind != StateKind::Workflow {
                continue;
            }
            match Workflow::decode(id, blob) {
                Ok(w) => {
                    self.workflows.live.insert(id.clone(), w);
                }
                Err(e) => log::warn!("journal: workflow {id} unreadable ({e}): skipped"),
            }
        }
        for (kind, id, blob) in states {
            if *kind != StateKind::WorkflowNode {
                continue;
            }
            let Some((wf, node)) = id.rsplit_once('/') else {
                continue;
            };
            let Some(w) = self.workflows.live.get_mut(wf) else {
                continue;
            };
            let (Some(i), Ok((s, t))) = (w.index_of(node), decode_node(blob)) else {
                log::warn!("journal: workflow node {id} unreadable: skipped");
                continue;
            };
            w.states[i] = s;
            w.meta[i] = t;
        }
        let ids: Vec<String> = self.workflows.live.keys().cloned().collect();
        let at = self.unix_ms(now);
        for wf in &ids {
            let Some(w) = self.workflows.live.get(wf) else {
                continue;
            };
            let n = w.states.len();
            for i in 0..n {
                let Some(w) = self.workflows.live.get(wf) else {
                    break;
                };
                if !matches!(w.states[i], NodeState::Waiting) {
                    continue;
                }
                if let Some(p) = w.parent_failed(i) {
                    let node_id = w.spec.nodes[p].id.clone();
                    let error = json!({ "error": {
                        "kind": "parent-failed",
                        "message": format!("node {node_id} of workflow {wf} failed"),
                        "node": node_id,
                    }});
                    self.cancel_waiting(wf, i, &error, at);
                    continue;
                }
                if !w.parents_done(i) {
                    continue;
                }
                let msgid = w.job_msgid(i);
                if let Some(jid) = self.store.find(&msgid) {
                    let epoch = self.cfg.epoch_unix_micros;
                    let queued = self
                        .store
                        .jobs
                        .get(&jid)
                        .map_or(at, |j| j.accepted_unix(epoch) / 1000);
                    if let Some(w) = self.workflows.live.get_mut(wf) {
                        w.states[i] = NodeState::Started { at: queued };
                        w.meta[i].queued = Some(queued);
                    }
                    self.workflows.jobs.insert(msgid, (wf.clone(), i));
                } else if w.cancelled {
                    let error = json!({ "error": {
                        "kind": "cancelled",
                        "message": format!("workflow {wf} cancelled by an operator"),
                    }});
                    self.cancel_waiting(wf, i, &error, at);
                } else {
                    log::warn!("journal: workflow {wf} node job {msgid} not found: accepted again");
                    self.start_node(wf, i, now, out);
                }
            }
            self.settle_workflow(wf, now, out);
        }
        self.workflows.live.len()
    }

    /// The admin view of a workflow: its state, its nodes with states
    /// and times (unix ms: `queued_at`, `started_at`, `finished_at`;
    /// `took_ms` from start, else from queued, to end), values, errors.
    pub(crate) fn workflow_view(&self, wf: &str, now: Duration) -> Option<Value> {
        let w = self.workflow_held(wf, now)?;
        let nodes: Vec<Value> = w
            .spec
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut v = json!({
                    "id": n.id,
                    "msgid": w.job_msgid(i),
                    "queue": n.queue,
                    "after": n.after,
                    "state": w.states[i].name(),
                });
                let t = w.meta[i];
                if let Some(q) = t.queued {
                    v["queued_at_unix_ms"] = json!(q);
                }
                if let Some(s) = t.started {
                    v["started_at_unix_ms"] = json!(s);
                }
                if let Some(end) = w.states[i].ended_at() {
                    v["finished_at_unix_ms"] = json!(end);
                    if let Some(from) = t.started.or(t.queued) {
                        v["took_ms"] = json!(end.saturating_sub(from));
                    }
                }
                if let Some(n) = t.value_dropped {
                    v["value_dropped_bytes"] = json!(n);
                }
                match &w.states[i] {
                    NodeState::Done { value, .. } => v["value"] = value.clone(),
                    NodeState::Failed { error, .. } | NodeState::Cancelled { error, .. } => {
                        v["error"] = error.clone()
                    }
                    _ => {}
                }
                v
            })
            .collect();
        Some(json!({
            "workflow": w.id,
            "state": w.state().as_str(),
            "accepted_at_unix_ms": w.accepted_unix_ms,
            "finished_at_unix_ms": w.finished_unix_ms,
            "nodes": nodes,
            "limits": {
                "max_nodes": MAX_NODES,
                "max_result_bytes": MAX_RESULT_BYTES,
                "keep": self.cfg.workflows_keep,
                "keep_for_secs": self.cfg.workflows_keep_for.as_secs(),
            },
        }))
    }

    /// The admin `job` view of a workflow id, so that a workflow's handle
    /// reads like a job's: `kind: workflow`, its [`WorkflowState`] as
    /// `state`, node counts by state, times, and once finished its
    /// `result` (`{"value": V}` or `{"error": ...}`, as the client's
    /// RESULT).
    ///
    /// [`WorkflowState`]: crate::workflow::WorkflowState
    pub(crate) fn workflow_job_view(&self, wf: &str, now: Duration) -> Option<Value> {
        let w = self.workflow_held(wf, now)?;
        let mut counts = serde_json::Map::new();
        for s in &w.states {
            let n = counts.entry(s.name()).or_insert(json!(0));
            *n = json!(n.as_u64().unwrap_or(0) + 1);
        }
        let mut v = json!({
            "msgid": w.id,
            "kind": "workflow",
            "workflow": w.id,
            "state": w.state().as_str(),
            "queue": "",
            "attempts": 0,
            "accepted_at_ms": w.accepted_unix_ms,
            "nodes": w.spec.nodes.len(),
            "node_states": counts,
        });
        if let Some(at) = w.finished_unix_ms {
            v["finished_at_ms"] = json!(at);
            if w.result_dropped() && w.result().0 == ResultStatus::Ok {
                v["result_truncated"] = json!(true);
            } else {
                v["result"] = w.result().1;
            }
        }
        Some(v)
    }
}

fn fail(kind: &str, message: &str, at: u64) -> NodeState {
    NodeState::Failed {
        at,
        error: json!({ "error": { "kind": kind, "message": message } }),
    }
}
