//! Workflows (`router/workflow.rs`): acceptance in one batch, results
//! passed from parents, chords, failure propagation, cancel, restore.

use super::*;
use crate::journal::StateKind;
use serde_json::{json, Value};

fn durable() -> H {
    H::with(Config {
        journal: true,
        epoch_unix_micros: 1_700_000_000_000_000,
        ..Config::default()
    })
}

/// A `call echo` node (the router passes results into `args`).
fn node(id: &str, after: &[&str], args: Value) -> Value {
    json!({ "id": id, "msg": ["call", { "handler": "echo", "args": args }], "after": after })
}

fn submit(h: &mut H, client: &str, wf: &str, spec: Value) -> Vec<Sent> {
    let spec = serde_json::to_vec(&spec).unwrap();
    h.msg(Frontend, client, wf, Command::Workflow { spec })
}

/// The REQUESTs forwarded to worker `id`: (msgid, MSG as JSON).
fn requests(sent: &[Sent], id: &str) -> Vec<(String, Value)> {
    to(sent, Backend, id)
        .into_iter()
        .filter_map(|m| match &m.command {
            Command::Request(r) => {
                Some((m.msgid.clone(), serde_json::from_slice(&r.message).unwrap()))
            }
            _ => None,
        })
        .collect()
}

/// Worker `w` finishes `msgid` with `{"value": v}` and gives its slot back;
/// what that sent.
fn done(h: &mut H, w: &str, msgid: &str, v: Value) -> Vec<Sent> {
    let mut sent = h.reply(
        w,
        msgid,
        &json!({ "value": v }).to_string(),
        Some(ResultStatus::Ok),
    );
    sent.extend(h.ready(w));
    sent
}

fn args_of(msg: &Value) -> Value {
    msg[1]["args"].clone()
}

/// A chain a → b → c: one batch at acceptance (the graph and a's job
/// only), ACK once it commits; each next node is dispatched only after
/// its parent is done, with the parent's value first in its args; the
/// client's RESULT is c's value, and the rows are gone at the end.
#[test]
fn chain_passes_each_result_to_the_next_and_ends_with_the_last() {
    let mut h = durable();
    worker(&mut h, "w1", "", 4);
    let before = h.journal.len();
    let spec = json!({ "nodes": [
        node("a", &[], json!([1])),
        node("b", &["a"], json!([10])),
        node("c", &["b"], json!(null)),
    ]});
    let sent = submit(&mut h, "c1", "wf1", spec);
    assert!(
        to(&sent, Frontend, "c1")
            .iter()
            .any(|m| is_ack_of(m, "wf1")),
        "{sent:?}"
    );
    let recs = &h.journal[before..];
    assert!(recs.iter().any(|r| matches!(r,
        Record::PutState { kind: StateKind::Workflow, id, .. } if id == "wf1")));
    let accepted: Vec<&str> = recs
        .iter()
        .filter_map(|r| match r {
            Record::Accepted(j) => Some(j.msgid.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(accepted, ["wf1/a"]);
    let reqs = requests(&sent, "w1");
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].0, "wf1/a");
    assert_eq!(args_of(&reqs[0].1), json!([1]));

    let sent = done(&mut h, "w1", "wf1/a", json!("A"));
    let reqs = requests(&sent, "w1");
    assert_eq!(reqs.len(), 1, "{sent:?}");
    assert_eq!(reqs[0].0, "wf1/b");
    assert_eq!(args_of(&reqs[0].1), json!(["A", 10]));
    assert!(results(&sent, "c1").is_empty());

    let sent = done(&mut h, "w1", "wf1/b", json!({"k": 2}));
    let reqs = requests(&sent, "w1");
    assert_eq!(
        args_of(&reqs[0].1),
        json!([{"k": 2}]),
        "null args become [value]"
    );

    let sent = done(&mut h, "w1", "wf1/c", json!("C"));
    let r = results(&sent, "c1");
    assert_eq!(r.len(), 1, "{sent:?}");
    assert_eq!(r[0].orig_msgid, "wf1");
    assert_eq!(r[0].status, ResultStatus::Ok);
    let v: Value = serde_json::from_slice(&r[0].payload).unwrap();
    assert_eq!(v, json!({ "value": "C" }));
    assert_eq!(h.r.workflow_count(), 0);
    let s = admin(&mut h, admin_req(json!({ "op": "status" })));
    assert_eq!(
        s["workflows"],
        json!({"held": 0, "accepted": 1, "succeeded": 1, "failed": 0})
    );
    assert!(h.journal.iter().any(|r| matches!(r,
        Record::DeleteState { kind: StateKind::Workflow, id } if id == "wf1")));
    assert_eq!(h.r.stats().dispatched, 3);
}

/// A chord: a group of 3 in parallel, then a callback given the list of
/// their results in group order (whatever order they finished in); the
/// workflow's result is the callback's.
#[test]
fn chord_callback_gets_the_group_results_in_order() {
    let mut h = durable();
    worker(&mut h, "w1", "", 8);
    let spec = json!({ "nodes": [
        node("g0", &[], json!([0])),
        node("g1", &[], json!([1])),
        node("g2", &[], json!([2])),
        node("cb", &["g0", "g1", "g2"], json!(["extra"])),
    ]});
    let sent = submit(&mut h, "c1", "ch", spec);
    let mut ids: Vec<String> = requests(&sent, "w1").into_iter().map(|r| r.0).collect();
    ids.sort();
    assert_eq!(ids, ["ch/g0", "ch/g1", "ch/g2"]);
    assert!(requests(&done(&mut h, "w1", "ch/g2", json!(20)), "w1").is_empty());
    assert!(requests(&done(&mut h, "w1", "ch/g0", json!(0)), "w1").is_empty());
    let sent = done(&mut h, "w1", "ch/g1", json!(10));
    let reqs = requests(&sent, "w1");
    assert_eq!(reqs.len(), 1);
    assert_eq!(args_of(&reqs[0].1), json!([[0, 10, 20], "extra"]));
    let sent = done(&mut h, "w1", "ch/cb", json!(30));
    let v: Value = serde_json::from_slice(&results(&sent, "c1")[0].payload).unwrap();
    assert_eq!(v, json!({ "value": 30 }));
    // Views: the workflow's tree, and its jobs link to it.
    let w = admin(&mut h, admin_req(json!({ "op": "workflow", "id": "ch" })));
    assert_eq!(w["workflow"]["state"], "succeeded");
    assert_eq!(w["workflow"]["nodes"][3]["value"], 30);
    assert_eq!(
        w["workflow"]["nodes"][3]["after"],
        json!(["g0", "g1", "g2"])
    );
    let j = admin(&mut h, admin_req(json!({ "op": "job", "msgid": "ch/g1" })));
    assert_eq!(j["job"]["workflow"], "ch", "{j}");
}

fn admin_req(v: Value) -> Command {
    Command::Admin {
        request: serde_json::to_vec(&v).unwrap(),
    }
}

/// A group alone: the result is the list of its members' results.
#[test]
fn group_result_is_the_list_in_order() {
    let mut h = durable();
    worker(&mut h, "w1", "", 4);
    let spec = json!({ "nodes": [node("x", &[], json!([])), node("y", &[], json!([]))] });
    submit(&mut h, "c1", "g", spec);
    done(&mut h, "w1", "g/y", json!("Y"));
    let sent = done(&mut h, "w1", "g/x", json!("X"));
    let v: Value = serde_json::from_slice(&results(&sent, "c1")[0].payload).unwrap();
    assert_eq!(v, json!({ "value": ["X", "Y"] }));
}

/// A node that fails after its retries cancels what waits for it (with
/// an error naming it), never dispatched; an independent branch still
/// runs; the client gets a failed RESULT naming the node.
#[test]
fn failure_after_retries_cancels_dependents_and_names_the_node() {
    let mut h = durable();
    worker(&mut h, "w1", "", 4);
    let mut a = node("a", &[], json!([]));
    a["headers"] = json!("retry-count:1");
    let spec = json!({ "nodes": [
        a,
        node("b", &["a"], json!([])),
        node("c", &["b"], json!([])),
        node("side", &[], json!([])),
    ]});
    submit(&mut h, "c1", "wf", spec);
    let fail = r#"{"error": {"kind": "exception", "message": "boom"}}"#;
    h.reply("w1", "wf/a", fail, Some(ResultStatus::Failed));
    h.ready("w1");
    assert_eq!(h.r.delayed_count(), 1, "a is retried first");
    for _ in 0..60 {
        if h.r.delayed_count() == 0 {
            break;
        }
        h.heartbeat("w1");
        h.advance(SECOND);
    }
    assert_eq!(h.r.inflight_count(), 2, "a again, and side");
    let sent = h.reply("w1", "wf/a", fail, Some(ResultStatus::Failed));
    assert!(requests(&sent, "w1").is_empty());
    assert!(results(&sent, "c1").is_empty(), "side still runs");
    let view = h.r.workflow_view("wf", h.now).unwrap();
    let states: Vec<&str> = view["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["failed", "cancelled", "cancelled", "started"]);
    assert_eq!(view["nodes"][2]["error"]["error"]["node"], "a");
    h.ready("w1");
    let sent = done(&mut h, "w1", "wf/side", json!(1));
    let r = results(&sent, "c1");
    assert_eq!(r[0].status, ResultStatus::Failed);
    let v: Value = serde_json::from_slice(&r[0].payload).unwrap();
    assert_eq!(v["error"]["kind"], "workflow-failed");
    assert_eq!(v["error"]["node"], "a");
    assert_eq!(v["error"]["cause"]["message"], "boom");
    assert_eq!(h.r.stats().dispatched, 3, "b and c never ran");
}

/// Admin `cancel` of a workflow cancels its waiting nodes and its
/// buffered jobs; the client gets a failed RESULT of kind `cancelled`.
#[test]
fn cancel_cancels_unfinished_nodes() {
    let mut h = durable();
    let spec = json!({ "nodes": [
        node("a", &[], json!([])),
        node("b", &["a"], json!([])),
    ]});
    submit(&mut h, "c1", "wf", spec);
    assert_eq!(h.r.buffered_count(), 1);
    let req = serde_json::to_vec(&json!({ "op": "cancel", "msgid": "wf" })).unwrap();
    let sent = h.msg(Admin, "adm", "admin:1", Command::Admin { request: req });
    assert_eq!(h.r.buffered_count(), 0);
    let r = results(&sent, "c1");
    assert_eq!(r.len(), 1, "{sent:?}");
    let v: Value = serde_json::from_slice(&r[0].payload).unwrap();
    assert_eq!(v["error"]["kind"], "cancelled");
    assert_eq!(h.r.workflow_count(), 0);
    assert_eq!(
        h.r.workflow_view("wf", h.now).unwrap()["state"],
        "cancelled"
    );
}

/// Bad specs are refused whole (`malformed`), nothing recorded: a cycle,
/// an unknown parent, `pass: one` with two parents, a shell node given
/// results.
#[test]
fn bad_specs_are_refused_whole() {
    let mut h = durable();
    let shell = json!({ "id": "s", "msg": ["shell", {"argv": ["true"]}], "after": ["a"] });
    let bad = [
        json!({ "nodes": [node("a", &["b"], json!([])), node("b", &["a"], json!([]))] }),
        json!({ "nodes": [node("a", &["zz"], json!([]))] }),
        json!({ "nodes": [] }),
        json!({ "nodes": [node("a", &[], json!([])), node("a", &[], json!([]))] }),
        json!({ "nodes": [node("a/x", &[], json!([]))] }),
        json!({ "nodes": [node("a", &[], json!([])), shell] }),
    ];
    let before = h.journal.len();
    for (n, spec) in bad.into_iter().enumerate() {
        let sent = submit(&mut h, "c1", &format!("bad{n}"), spec);
        let rj = rejects(&sent, "c1");
        assert_eq!(rj.len(), 1, "{n}: {sent:?}");
        assert_eq!(rj[0].reason, RejectReason::Malformed, "{n}");
    }
    assert_eq!(h.journal.len(), before);
    assert_eq!(h.r.buffered_count(), 0);
}

/// What a store holding `records` gives back.
pub(super) fn restored_from(records: &[Record]) -> Restored {
    let mut jobs: Vec<JobRecord> = Vec::new();
    let mut states: std::collections::BTreeMap<(StateKind, String), Vec<u8>> = Default::default();
    for r in records {
        match r {
            Record::Accepted(j) => jobs.push(j.clone()),
            Record::Completed { msgid } => jobs.retain(|j| &j.msgid != msgid),
            Record::Finished { record, .. } => jobs.retain(|j| j.msgid != record.job.msgid),
            Record::DeadLettered { msgid, .. } => jobs.retain(|j| &j.msgid != msgid),
            Record::PutState { kind, id, blob } => {
                states.insert((*kind, id.clone()), blob.clone());
            }
            Record::DeleteState { kind, id } => {
                states.remove(&(*kind, id.clone()));
            }
            _ => {}
        }
    }
    Restored {
        jobs,
        states: states.into_iter().map(|((k, i), b)| (k, i, b)).collect(),
        ..Restored::default()
    }
}

/// A router killed while a chord runs (two of three done, one in
/// flight): the new one restores the graph and done nodes, runs the
/// unfinished member once (the in-flight one again: its REPLY was lost),
/// the done ones not again, and the callback once with every result.
#[test]
fn restore_runs_each_node_once_and_the_callback_with_all_results() {
    let mut h = durable();
    worker(&mut h, "w1", "", 8);
    let spec = json!({ "nodes": [
        node("g0", &[], json!([])),
        node("g1", &[], json!([])),
        node("g2", &[], json!([])),
        node("cb", &["g0", "g1", "g2"], json!([])),
    ]});
    submit(&mut h, "c1", "ch", spec);
    done(&mut h, "w1", "ch/g0", json!("r0"));
    done(&mut h, "w1", "ch/g2", json!("r2"));
    // kill -9: only the journal survives.
    let restored = restored_from(&h.journal);
    let mut h2 = durable();
    let mut out = Vec::new();
    let counts = h2.r.restore(restored, h2.now, &mut out);
    assert_eq!((counts.jobs, counts.workflows), (1, 1));
    worker(&mut h2, "w2", "", 8);
    assert_eq!(h2.r.inflight_count(), 1, "only g1 runs again");
    let sent = done(&mut h2, "w2", "ch/g1", json!("r1"));
    let reqs = requests(&sent, "w2");
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].0, "ch/cb");
    assert_eq!(args_of(&reqs[0].1), json!([["r0", "r1", "r2"]]));
    // Killed again with the callback in flight.
    let restored = restored_from(&[h.journal.clone(), h2.journal.clone()].concat());
    let mut h3 = durable();
    let counts = h3.r.restore(restored, h3.now, &mut out);
    assert_eq!((counts.jobs, counts.workflows), (1, 1));
    worker(&mut h3, "w3", "", 8);
    let sent = h3.reply("w3", "ch/cb", r#"{"value": "all"}"#, Some(ResultStatus::Ok));
    let r = results(&sent, "c1");
    assert_eq!(r.len(), 1, "{sent:?}");
    let v: Value = serde_json::from_slice(&r[0].payload).unwrap();
    assert_eq!(v, json!({ "value": "all" }));
    assert_eq!(h3.r.workflow_count(), 0);
}

/// A WORKFLOW sent again (same msgid and spec), held or finished, is
/// acknowledged, not run twice; another spec under a held msgid is
/// `duplicate-msgid`.
#[test]
fn resent_workflow_is_acknowledged_and_run_once() {
    let mut h = durable();
    let spec = json!({ "nodes": [node("a", &[], json!([]))] });
    submit(&mut h, "c1", "wf", spec.clone());
    let sent = submit(&mut h, "c1", "wf", spec.clone());
    assert!(to(&sent, Frontend, "c1").iter().any(|m| is_ack_of(m, "wf")));
    assert_eq!(h.r.buffered_count(), 1);
    let other = json!({ "nodes": [node("b", &[], json!([]))] });
    let sent = submit(&mut h, "c1", "wf", other);
    assert_eq!(rejects(&sent, "c1")[0].reason, RejectReason::DuplicateMsgid);
    // Finished, its RESULT delivered: sent again, it is not run again.
    worker(&mut h, "w1", "", 1);
    let sent = done(&mut h, "w1", "wf/a", json!(1));
    assert_eq!(results(&sent, "c1").len(), 1);
    h.input(Input::Flushed);
    let sent = submit(&mut h, "c1", "wf", spec);
    assert!(
        to(&sent, Frontend, "c1").iter().any(|m| is_ack_of(m, "wf")),
        "{sent:?}"
    );
    assert_eq!(h.r.buffered_count() + h.r.inflight_count(), 0);
    assert_eq!(h.r.stats().dispatched, 1);
}

/// The acceptance batch fails: the workflow is refused
/// `journal-unavailable` and forgotten.
#[test]
fn failed_acceptance_batch_forgets_the_workflow() {
    let mut h = durable();
    h.fail_journal = Some("disk full".into());
    let spec = json!({ "nodes": [node("a", &[], json!([])), node("b", &[], json!([]))] });
    let sent = submit(&mut h, "c1", "wf", spec);
    let rj = rejects(&sent, "c1");
    assert_eq!(rj.len(), 1, "{sent:?}");
    assert_eq!(rj[0].reason, RejectReason::JournalUnavailable);
    assert_eq!(h.r.workflow_count(), 0);
    assert_eq!(h.r.buffered_count(), 0);
}

/// Nested lists (`shape`): a group inside a group. The callback gets
/// `[[a, b], c]` (its `shape`), and the workflow's result is shaped by
/// `output_shape` (`[[a, b], [c, cb]]`), whatever order they ended in.
#[test]
fn shapes_pass_and_return_nested_lists() {
    let mut h = durable();
    worker(&mut h, "w1", "", 8);
    let mut cb = node("cb", &["a", "b", "c"], json!([]));
    cb["shape"] = json!([["a", "b"], "c"]);
    let spec = json!({
        "nodes": [node("a", &[], json!([])), node("b", &[], json!([])), node("c", &[], json!([])), cb],
        "output_shape": [["a", "b"], ["c", "cb"]],
    });
    submit(&mut h, "c1", "nest", spec);
    done(&mut h, "w1", "nest/c", json!("C"));
    done(&mut h, "w1", "nest/b", json!("B"));
    let sent = done(&mut h, "w1", "nest/a", json!("A"));
    let reqs = requests(&sent, "w1");
    assert_eq!(reqs.len(), 1, "{sent:?}");
    assert_eq!(args_of(&reqs[0].1), json!([[["A", "B"], "C"]]));
    let sent = done(&mut h, "w1", "nest/cb", json!("CB"));
    let v: Value = serde_json::from_slice(&results(&sent, "c1")[0].payload).unwrap();
    assert_eq!(v, json!({ "value": [["A", "B"], ["C", "CB"]] }));
}

/// Bad shapes are refused whole: a leaf that is not a parent, a shape
/// with `pass: one`, a leaf that is not a string, `output_shape` with
/// `output`, an unknown node in `output_shape`.
#[test]
fn bad_shapes_are_refused_whole() {
    let mut h = durable();
    let with = |shape: Value, pass: Option<&str>| {
        let mut cb = node("cb", &["a"], json!([]));
        cb["shape"] = shape;
        if let Some(p) = pass {
            cb["pass"] = json!(p);
        }
        json!({ "nodes": [node("a", &[], json!([])), node("b", &[], json!([])), cb] })
    };
    let bad = [
        with(json!([["a", "b"]]), None),
        with(json!(["a"]), Some("one")),
        with(json!([["a", 1]]), None),
        json!({ "nodes": [node("a", &[], json!([]))], "output": ["a"], "output_shape": ["a"] }),
        json!({ "nodes": [node("a", &[], json!([]))], "output_shape": [["zz"]] }),
    ];
    for (n, spec) in bad.into_iter().enumerate() {
        let sent = submit(&mut h, "c1", &format!("bad{n}"), spec);
        let rj = rejects(&sent, "c1");
        assert_eq!(rj.len(), 1, "{n}: {sent:?}");
        assert_eq!(rj[0].reason, RejectReason::Malformed, "{n}");
    }
    assert_eq!(h.r.workflow_count(), 0);
}

/// Each node's job has its own queue and headers: `a` goes to the
/// `fast` worker only, `b` to the default one with its own retry count
/// (retried once, then failed), and a node's flow-control headers are
/// checked as a REQUEST's (a bad `priority` refuses the workflow).
#[test]
fn each_node_runs_with_its_own_queue_and_headers() {
    let mut h = durable();
    worker(&mut h, "wfast", "fast", 4);
    worker(&mut h, "wdef", "default", 4);
    let mut a = node("a", &[], json!([]));
    a["queue"] = json!("fast");
    a["headers"] = json!("priority:7,key:tenant-1,timeout:5");
    let mut b = node("b", &[], json!([]));
    b["headers"] = json!("retry-count:1");
    let c = node("c", &[], json!([]));
    let sent = submit(&mut h, "c1", "opts", json!({ "nodes": [a, b, c] }));
    let fast: Vec<String> = requests(&sent, "wfast").into_iter().map(|r| r.0).collect();
    let mut def: Vec<String> = requests(&sent, "wdef").into_iter().map(|r| r.0).collect();
    def.sort();
    assert_eq!(fast, ["opts/a"]);
    assert_eq!(def, ["opts/b", "opts/c"]);
    let hdrs = to(&sent, Backend, "wfast")
        .iter()
        .find_map(|m| match &m.command {
            Command::Request(r) => Some(r.headers.encode()),
            _ => None,
        })
        .unwrap();
    assert!(
        hdrs.contains("priority:7") && hdrs.contains("key:tenant-1"),
        "{hdrs}"
    );
    assert!(hdrs.contains("timeout:5"), "{hdrs}");
    let j = admin(&mut h, admin_req(json!({ "op": "job", "msgid": "opts/a" })));
    assert_eq!(j["job"]["queue"], "fast", "{j}");
    // b has one retry of its own, c none: c fails at once, b is retried.
    let fail = r#"{"error": {"kind": "exception", "message": "boom"}}"#;
    h.reply("wdef", "opts/b", fail, Some(ResultStatus::Failed));
    h.reply("wdef", "opts/c", fail, Some(ResultStatus::Failed));
    assert_eq!(h.r.delayed_count(), 1, "b waits for its retry, c failed");
    let view = h.r.workflow_view("opts", h.now).unwrap();
    assert_eq!(view["nodes"][1]["state"], "started");
    assert_eq!(view["nodes"][2]["state"], "failed");

    let mut bad = node("x", &[], json!([]));
    bad["headers"] = json!("priority:high");
    let sent = submit(&mut h, "c1", "badopts", json!({ "nodes": [bad] }));
    assert_eq!(rejects(&sent, "c1")[0].reason, RejectReason::Malformed);
}

/// The admin `job` view of a workflow id reads like a job's, so that the
/// handle `submit(chain(...))` returns answers `status()`: `pending`
/// until a node is dispatched, `running`, then `succeeded` with its
/// `result`; `cancel` of a finished one is a `conflict`. The id is exact,
/// not a msgid prefix of its nodes' jobs (`ID/NODE`).
#[test]
fn a_workflow_id_has_a_job_view_with_its_state() {
    let mut h = durable();
    let spec = json!({ "nodes": [node("a", &[], json!([])), node("b", &["a"], json!([]))] });
    submit(&mut h, "c1", "wf-job-view", spec);
    let job = |h: &mut H| {
        admin(h, admin_req(json!({ "op": "job", "msgid": "wf-job-view" })))["job"].clone()
    };
    let j = job(&mut h);
    assert_eq!(
        (j["kind"].as_str(), j["state"].as_str()),
        (Some("workflow"), Some("pending")),
        "{j}"
    );
    assert_eq!(j["node_states"], json!({"started": 1, "waiting": 1}));
    worker(&mut h, "w1", "", 2);
    assert_eq!(job(&mut h)["state"], "running");
    done(&mut h, "w1", "wf-job-view/a", json!(1));
    done(&mut h, "w1", "wf-job-view/b", json!(2));
    let j = job(&mut h);
    assert_eq!(j["state"], "succeeded", "{j}");
    assert_eq!(j["result"], json!({ "value": 2 }));
    let c = admin(
        &mut h,
        admin_req(json!({ "op": "cancel", "msgid": "wf-job-view" })),
    );
    assert_eq!(c["error"]["kind"], "conflict", "{c}");
}

/// `emq-cli workflow ID` shows each node's times: queued (its job
/// accepted), started (first dispatch), finished, and how long it took.
#[test]
fn the_view_gives_each_nodes_times() {
    let mut h = durable();
    let t0 = h.r.workflow_count(); // nothing yet
    assert_eq!(t0, 0);
    submit(
        &mut h,
        "c1",
        "wt",
        json!({ "nodes": [node("a", &[], json!([]))] }),
    );
    h.advance(2 * SECOND);
    worker(&mut h, "w1", "", 1);
    h.advance(3 * SECOND);
    h.heartbeat("w1");
    done(&mut h, "w1", "wt/a", json!(1));
    let v = h.r.workflow_view("wt", h.now).unwrap();
    let n = &v["nodes"][0];
    let q = n["queued_at_unix_ms"].as_u64().unwrap();
    let s = n["started_at_unix_ms"].as_u64().unwrap();
    let f = n["finished_at_unix_ms"].as_u64().unwrap();
    assert_eq!((s - q, f - s), (2_000, 3_000), "{n}");
    assert_eq!(n["took_ms"], 3_000);
    assert_eq!(v["state"], "succeeded");
}

fn keeping(keep: usize, keep_for: Duration) -> H {
    H::with(Config {
        journal: true,
        epoch_unix_micros: 1_700_000_000_000_000,
        workflows_keep: keep,
        workflows_keep_for: keep_for,
        ..Config::default()
    })
}

/// Finished workflows are journaled (one `workflow-finished` row in
/// place of the graph and node rows): a restarted router shows them with
/// their node states, times and values, answers their job view and
/// acknowledges a resent WORKFLOW without running it. At most
/// `workflows_keep` are kept (the oldest pruned, its row deleted), none
/// older than `workflows_keep_for`: a pruned one is not found.
#[test]
fn finished_workflows_survive_a_restart_within_their_retention() {
    let mut h = keeping(2, 100 * SECOND);
    worker(&mut h, "w1", "", 4);
    for wf in ["f1", "f2", "f3"] {
        submit(
            &mut h,
            "c1",
            wf,
            json!({ "nodes": [node("a", &[], json!([])), node("b", &["a"], json!([]))] }),
        );
        done(&mut h, "w1", &format!("{wf}/a"), json!(wf));
        done(&mut h, "w1", &format!("{wf}/b"), json!(7));
        h.advance(SECOND);
    }
    assert!(h.journal.iter().any(|r| matches!(r,
        Record::DeleteState { kind: StateKind::WorkflowFinished, id } if id == "f1")));
    let restored = restored_from(&h.journal);
    let kinds: Vec<(StateKind, &str)> = restored
        .states
        .iter()
        .map(|(k, i, _)| (*k, i.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (StateKind::WorkflowFinished, "f2"),
            (StateKind::WorkflowFinished, "f3")
        ],
        "only the kept ones' rows, no graph nor node rows"
    );
    let mut h2 = keeping(2, 100 * SECOND);
    h2.advance(3 * SECOND);
    let mut out = Vec::new();
    let counts = h2.r.restore(restored, h2.now, &mut out);
    assert_eq!(counts.workflows, 0, "none unfinished");
    assert!(h2.r.workflow_view("f1", h2.now).is_none(), "pruned");
    let v = h2.r.workflow_view("f3", h2.now).unwrap();
    assert_eq!(v["state"], "succeeded");
    assert_eq!(v["nodes"][0]["value"], "f3");
    assert_eq!(v["nodes"][1]["state"], "done");
    assert!(v["nodes"][1]["took_ms"].is_u64(), "{v}");
    let j = admin(&mut h2, admin_req(json!({ "op": "job", "msgid": "f2" })));
    assert_eq!(j["job"]["result"], json!({ "value": 7 }), "{j}");
    let nf = admin(&mut h2, admin_req(json!({ "op": "workflow", "id": "f1" })));
    assert_eq!(nf["error"]["kind"], "not-found", "{nf}");
    // Sent again after the restart: acknowledged, not run.
    let spec = json!({ "nodes": [node("a", &[], json!([])), node("b", &["a"], json!([]))] });
    let sent = submit(&mut h2, "c1", "f3", spec);
    assert!(
        to(&sent, Frontend, "c1").iter().any(|m| is_ack_of(m, "f3")),
        "{sent:?}"
    );
    assert_eq!(h2.r.buffered_count(), 0);
    // Past their age: pruned at the next timeout, rows deleted.
    let before = h2.journal.len();
    h2.advance(100 * SECOND);
    h2.heartbeat("nobody");
    h2.advance(SECOND);
    assert!(h2.r.workflow_view("f3", h2.now).is_none());
    let deleted = h2.journal[before..]
        .iter()
        .filter(|r| {
            matches!(
                r,
                Record::DeleteState {
                    kind: StateKind::WorkflowFinished,
                    ..
                }
            )
        })
        .count();
    assert_eq!(deleted, 2);
}

/// `workflows_keep = 0`: nothing kept nor journaled once finished.
#[test]
fn keeping_no_finished_workflow_writes_no_row() {
    let mut h = keeping(0, 100 * SECOND);
    worker(&mut h, "w1", "", 1);
    submit(
        &mut h,
        "c1",
        "z",
        json!({ "nodes": [node("a", &[], json!([]))] }),
    );
    done(&mut h, "w1", "z/a", json!(1));
    assert!(!h.journal.iter().any(|r| matches!(
        r,
        Record::PutState {
            kind: StateKind::WorkflowFinished,
            ..
        }
    )));
    assert!(h.r.workflow_view("z", h.now).is_none());
}

/// A finished workflow is kept with small node values only (at most
/// `retain_result_bytes`, as a finished job's result): a bigger one is
/// dropped, its size kept; the client's RESULT had it whole, and the job
/// view says the result is no longer kept. Another spec under a kept
/// finished id is `duplicate-msgid`.
#[test]
fn a_kept_workflow_drops_values_over_the_retained_size() {
    let mut h = H::with(Config {
        journal: true,
        retain_result_bytes: 16,
        ..Config::default()
    });
    worker(&mut h, "w1", "", 2);
    let spec = json!({ "nodes": [node("a", &[], json!([])), node("b", &["a"], json!([]))] });
    submit(&mut h, "c1", "big", spec);
    done(&mut h, "w1", "big/a", json!(1));
    let big = "x".repeat(100);
    let sent = done(&mut h, "w1", "big/b", json!(big));
    let v: Value = serde_json::from_slice(&results(&sent, "c1")[0].payload).unwrap();
    assert_eq!(v["value"], json!(big), "the RESULT is whole");
    let view = h.r.workflow_view("big", h.now).unwrap();
    assert_eq!(view["nodes"][0]["value"], 1);
    assert_eq!(view["nodes"][1]["value"], Value::Null);
    assert_eq!(view["nodes"][1]["value_dropped_bytes"], 102);
    let j = admin(&mut h, admin_req(json!({ "op": "job", "msgid": "big" })));
    assert_eq!(j["job"]["result_truncated"], true, "{j}");
    assert!(j["job"].get("result").is_none(), "{j}");
    let other = json!({ "nodes": [node("z", &[], json!([]))] });
    let sent = submit(&mut h, "c1", "big", other);
    assert_eq!(rejects(&sent, "c1")[0].reason, RejectReason::DuplicateMsgid);
}

/// A node's flow-control headers apply to its job as to a REQUEST's: on a
/// queue limited to one job per key at a time, two nodes of key `k1`
/// run one after the other while `k2`'s runs beside them, the higher
/// `priority` first.
#[test]
fn nodes_obey_their_queues_flow_control_by_their_own_key() {
    let mut h = durable();
    let r = admin(
        &mut h,
        admin_req(json!({"op": "limits-set", "queue": "q", "concurrency_per_key": 1})),
    );
    assert_eq!(r["ok"], true, "{r}");
    worker(&mut h, "w1", "q", 8);
    let with = |id: &str, headers: &str| {
        let mut n = node(id, &[], json!([]));
        n["queue"] = json!("q");
        n["headers"] = json!(headers);
        n
    };
    let spec = json!({ "nodes": [
        with("a", "key:k1"),
        with("b", "key:k1,priority:1"),
        with("c", "key:k1,priority:9"),
        with("d", "key:k2"),
    ]});
    let sent = submit(&mut h, "c1", "fc", spec);
    let mut first: Vec<String> = requests(&sent, "w1").into_iter().map(|r| r.0).collect();
    first.sort();
    assert_eq!(
        first,
        ["fc/c", "fc/d"],
        "one per key, k1's highest priority first"
    );
    let sent = done(&mut h, "w1", "fc/c", json!(1));
    let next: Vec<String> = requests(&sent, "w1").into_iter().map(|r| r.0).collect();
    assert_eq!(next, ["fc/b"], "then priority 1 before a's 0");
    let sent = done(&mut h, "w1", "fc/b", json!(1));
    let next: Vec<String> = requests(&sent, "w1").into_iter().map(|r| r.0).collect();
    assert_eq!(next, ["fc/a"]);
}
