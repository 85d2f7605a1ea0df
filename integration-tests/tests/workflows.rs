//! Workflows with real processes (issue 30): a chord of 40 shell jobs and
//! an `echo` callback, submitted as one WORKFLOW to a router with a SQLite
//! journal that is killed (-9) while the group runs. The restarted router
//! finishes it: every member ran (once, or twice when its REPLY was lost
//! with the router, as for any job), the callback once, with the 40
//! results in order, and the client gets one RESULT. The finished
//! workflow is kept in the journal: after another restart `emq-cli
//! workflow ID` still prints its tree with every node's times.

use std::collections::BTreeMap;
use std::time::Duration;

use emqp_proto::{Command, Message};
use integration_tests::admin::done_nodes;
use integration_tests::client::Client;
use integration_tests::cluster::{start_jobmanager, start_router_on};
use integration_tests::process::{run, scratch_dir};
use integration_tests::{bins, poll_until, Addrs, Spawn};
use serde_json::{json, Value};

const MEMBERS: usize = 40;
const SLOTS: usize = 4;

fn workflow_view(addrs: &Addrs, id: &str) -> Option<Value> {
    integration_tests::admin::workflow(&addrs.admin, id)
}

#[test]
fn a_chord_of_40_survives_a_router_kill9_each_node_once_callback_once() {
    let dir = scratch_dir("workflows");
    let journal = dir.join("router.journal").display().to_string();
    let runs = dir.join("runs.log");
    let addrs = Addrs::fresh();
    let mut router = start_router_on(&addrs, &["--journal", &journal]).expect("router starts");

    // Each member notes its run, sleeps a little (so the kill finds the
    // group half done), prints its number.
    let mut nodes: Vec<Value> = (0..MEMBERS)
        .map(|i| {
            json!({
                "id": format!("m{i}"),
                "msg": ["shell", {"argv": [
                    "sh", "-c", "echo $0 >> \"$1\"; sleep 0.3; printf %s $0",
                    i.to_string(), runs.display().to_string()
                ]}],
            })
        })
        .collect();
    let members: Vec<String> = (0..MEMBERS).map(|i| format!("m{i}")).collect();
    nodes.push(json!({
        "id": "cb",
        "msg": ["call", {"handler": "echo"}],
        "after": members,
    }));
    let spec = serde_json::to_vec(&json!({ "nodes": nodes })).unwrap();
    let mut client = Client::connect(&addrs.frontend);
    let msg = Message::new(Command::Workflow { spec });
    let wf = msg.msgid.clone();
    client.send_frames(msg.encode());
    assert!(
        client.wait_for(Duration::from_secs(20), |c| c.acks.contains_key(&wf)),
        "WORKFLOW acknowledged: {:?} {:?}",
        client.acks,
        client.rejects
    );

    let slots = SLOTS.to_string();
    let mut jm = start_jobmanager("emq-jobmanager", &addrs.backend, &["-J", &slots]);
    let done_before = poll_until(Duration::from_secs(60), Duration::from_millis(20), || {
        let v = workflow_view(&addrs, &wf)?;
        let n = done_nodes(&v);
        (n >= MEMBERS / 4).then_some(n)
    })
    .expect("a quarter of the group done");
    router.kill9();
    drop(router);
    // Members that had started by the kill (each writes its line first).
    let started_before = std::fs::read_to_string(&runs)
        .map(|t| t.lines().count())
        .unwrap_or(0);
    let mut router = start_router_on(&addrs, &["--journal", &journal]).expect("router restarts");
    let v = workflow_view(&addrs, &wf).expect("the restarted router holds the workflow");
    // Not compared with `done_before`: the admin view shows a node done
    // as its REPLY is read, before its end is committed, so a node seen
    // done may be restored unfinished and run again (counted below).
    let restored_done = done_nodes(&v);

    // The client's hello after the restart: the router sends the RESULT
    // again if it was handed out before the client heard it.
    let got = poll_until(Duration::from_secs(90), Duration::from_millis(50), || {
        client.send_frames(Message::new(Command::Heartbeat { timestamp: None }).encode());
        client.pump(Duration::from_millis(50));
        client.results.get(&wf).cloned()
    })
    .expect("the workflow's RESULT");
    assert_eq!(got.len(), 1, "one RESULT: {got:?}");
    let value = got[0].json();
    let list = value["value"][0]
        .as_array()
        .unwrap_or_else(|| panic!("callback value [[...40 results]]: {value}"));
    assert_eq!(list.len(), MEMBERS);
    for (i, r) in list.iter().enumerate() {
        assert_eq!(r["stdout"], i.to_string(), "member {i} in order: {r}");
    }

    // Each member ran at least once; a second run only for one that may
    // have: started before the kill without its end committed, or on its
    // way to a slot.
    let text = std::fs::read_to_string(&runs).expect("runs log");
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for l in text.lines() {
        *counts
            .entry(l.trim().parse().expect("a member number"))
            .or_default() += 1;
    }
    assert_eq!(counts.len(), MEMBERS, "every member ran: {counts:?}");
    let twice: Vec<usize> = counts
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(i, _)| *i)
        .collect();
    let may_run_again = started_before.saturating_sub(restored_done) + SLOTS;
    assert!(
        twice.len() <= may_run_again && counts.values().all(|n| *n <= 2),
        "only members whose end the journal did not hold run again (at most \
         {may_run_again}: {started_before} started before the kill, {restored_done} restored \
         done, {SLOTS} slots): {counts:?}"
    );
    let v = workflow_view(&addrs, &wf).expect("the finished workflow is still shown");
    assert_eq!(v["state"], "succeeded", "{v}");
    assert_eq!(done_nodes(&v), MEMBERS + 1);
    // `emq-cli workflow ID` prints the tree: the callback under its first
    // parent, naming the others.
    let out = run(
        Spawn::new("emq-cli", bins::bin("emq-cli")).args([
            "--admin",
            &addrs.admin,
            "workflow",
            &wf,
        ]),
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), Some(0), "{}", out.describe());
    assert!(
        out.stdout.starts_with(&format!("workflow {wf}: succeeded")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("\n    cb [done] queued "),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("(also after m1, m2,"), "{}", out.stdout);
    assert_eq!(out.stdout.lines().count(), MEMBERS + 2, "{}", out.stdout);
    // Every node line has its times: queued, started, finished, took.
    for l in out.stdout.lines().skip(1) {
        for word in [" queued ", " started ", " finished ", " took "] {
            assert!(l.contains(word), "{word:?} in {l:?}\n{}", out.stdout);
        }
    }

    // The finished workflow is durable: a router killed again and
    // restarted on the same journal shows it, with the same tree.
    let before = out.stdout.clone();
    router.kill9();
    drop(router);
    let router = start_router_on(&addrs, &["--journal", &journal]).expect("router restarts");
    let v = workflow_view(&addrs, &wf).expect("the finished workflow after a restart");
    assert_eq!(v["state"], "succeeded", "{v}");
    assert_eq!(done_nodes(&v), MEMBERS + 1);
    assert_eq!(
        v["nodes"][MEMBERS]["value"], value["value"],
        "the callback's value kept"
    );
    let again = run(
        Spawn::new("emq-cli", bins::bin("emq-cli")).args([
            "--admin",
            &addrs.admin,
            "workflow",
            &wf,
        ]),
        Duration::from_secs(30),
    );
    assert_eq!(again.code(), Some(0), "{}", again.describe());
    assert_eq!(
        again.stdout.lines().count(),
        before.lines().count(),
        "{}",
        again.stdout
    );
    assert!(
        again.stdout.contains("\n    cb [done] queued "),
        "{}",
        again.stdout
    );
    // A workflow the router never held, or no longer keeps: not found.
    let missing = run(
        Spawn::new("emq-cli", bins::bin("emq-cli")).args([
            "--admin",
            &addrs.admin,
            "workflow",
            "no-such-workflow",
        ]),
        Duration::from_secs(30),
    );
    assert_ne!(missing.code(), Some(0), "{}", missing.describe());
    assert!(
        missing.stderr.contains("no workflow no-such-workflow"),
        "{}",
        missing.describe()
    );
    drop(router);
    println!(
        "chord of {MEMBERS} across a router kill -9 (SQLite journal): {done_before} members \
         done before the kill, {restored_done} restored done, {} run twice (in flight at the \
         kill), callback once with {MEMBERS} results in order",
        twice.len()
    );
    jm.stop();
}
