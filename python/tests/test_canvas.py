"""Workflows (``chain``, ``group``, ``chord`` of ``task``) through Client
and AsyncClient against a real emq-router and emq-jobmanager
(docs/PROTOCOL.md, "Workflows"): Celery's semantics, results passed by the
router, nesting, failure naming the node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

import emq_pyclient_jobs
import emq_test_jobs
from emq_client import JobCancelled, JobFailed, chain, chord, group, task

from conftest import Router, free_port, make_client, start_router, wait_until


@pytest.fixture
def any_client(cluster: Router, kind: str) -> Iterator[Any]:
    with make_client(kind, cluster.frontend, admin_addr=cluster.admin) as c:
        yield c


def test_chain_passes_each_result_on_and_gives_the_last(any_client: Any) -> None:
    j = any_client.submit(chain(task(emq_test_jobs.add, 2, 2), task(emq_pyclient_jobs.multiply, 10), task(emq_test_jobs.add, 1)))
    assert j.result(60) == 41  # add(multiply(add(2, 2), 10), 1)


def test_group_result_is_the_list_in_order(any_client: Any) -> None:
    j = any_client.submit(group([task(emq_test_jobs.sleep, 0.3 - i * 0.1, i) for i in range(3)]))
    assert j.result(60) == [0, 1, 2]


def test_chord_callback_gets_the_list_once(any_client: Any) -> None:
    header = group(task(emq_test_jobs.add, i, i) for i in range(5))
    j = any_client.submit(chord(header, task(emq_pyclient_jobs.total, plus=100)))
    assert j.result(60) == 100 + sum(2 * i for i in range(5))


def test_nesting_chain_in_chord_and_group_in_chain(any_client: Any) -> None:
    inner = chain(task(emq_test_jobs.add, 1, 1), task(emq_pyclient_jobs.multiply, 3))  # 6
    flow = chain(
        chord(group([inner, task(emq_test_jobs.add, 2, 2)]), task(emq_pyclient_jobs.pair)),  # [6, 4]
        group([task(emq_pyclient_jobs.total), task(emq_pyclient_jobs.total, plus=1)]),  # [10, 11]
        task(emq_pyclient_jobs.total),  # 21
    )
    assert any_client.submit(flow).result(60) == 21


def test_a_failed_node_fails_the_chain_naming_it(any_client: Any) -> None:
    j = any_client.submit(chain(task(emq_test_jobs.fail, "nope"), task(emq_test_jobs.add, 5), task(emq_test_jobs.add, 1)))
    with pytest.raises(JobFailed) as e:
        j.result(60)
    assert e.value.kind == "workflow-failed"
    assert e.value.error["node"] == "n0"
    assert "nope" in e.value.error["cause"]["message"], e.value.error
    # What waited for it never ran: cancelled, naming it.
    tree = any_client.admin("workflow", id=j.msgid)["workflow"]
    assert [n["state"] for n in tree["nodes"]] == ["failed", "cancelled", "cancelled"]
    assert tree["nodes"][1]["error"]["error"]["node"] == "n0"


def test_the_spec_follows_celerys_shape() -> None:
    spec = chord(group([task("m.a"), chain(task("m.b"), task("m.c"))]), task("m.cb")).spec("q")
    nodes = {n["id"]: n for n in spec["nodes"]}
    assert [n["msg"][1]["callable"] for n in spec["nodes"]] == ["a", "b", "c", "cb"]
    assert nodes["n2"]["after"] == ["n1"] and nodes["n2"]["pass"] == "one"
    assert nodes["n3"]["after"] == ["n0", "n2"] and nodes["n3"]["pass"] == "list"
    assert spec["output"] == ["n3"] and spec["output_pass"] == "one"
    json.dumps(spec)
    # A group directly in a group is unrolled (Celery); one that a chain
    # ends in gives a nested list: the callback's ``shape``.
    flat = group([group([task("m.a"), task("m.b")]), task("m.c")]).spec("q")
    assert flat["output"] == ["n0", "n1", "n2"] and "output_shape" not in flat
    nested = chord(group([chain(task("m.a"), group([task("m.b"), task("m.c")])), task("m.d")]), task("m.cb")).spec("q")
    cb = nested["nodes"][-1]
    assert cb["shape"] == [["n1", "n2"], "n3"] and cb["after"] == ["n1", "n2", "n3"] and cb["pass"] == "list"
    # Per-node options replace the workflow's defaults for that node.
    spec = chain(task("m.a"), task("m.b").options(queue="gpu", retries=3, key="t1", priority=7)).spec(
        "q", retries=1, timeout=30
    )
    a, b = spec["nodes"]
    assert (a["queue"], a["headers"]) == ("q", "retry-count:1,timeout:30")
    assert b["queue"] == "gpu"
    assert b["headers"].split(",")[:2] == ["retry-count:3", "timeout:30"], b["headers"]
    assert "key:t1" in b["headers"] and "priority:7" in b["headers"], b["headers"]
    with pytest.raises(TypeError, match="delay"):
        task("m.a").options(delay=3)


def test_groups_nest_as_celerys(any_client: Any) -> None:
    # A group directly in a group: unrolled, one flat list (Celery).
    flat = group([group([task(emq_test_jobs.add, 1, 1), task(emq_test_jobs.add, 2, 2)]), task(emq_test_jobs.add, 3, 3)])
    assert any_client.submit(flat).result(60) == [2, 4, 6]
    # A group in a chain in a group: a nested list.
    inner = chain(task(emq_test_jobs.add, 1, 1), group([task(emq_test_jobs.add, 1), task(emq_pyclient_jobs.multiply, 10)]))
    nested = group([inner, task(emq_test_jobs.add, 0, 5)])
    assert any_client.submit(nested).result(60) == [[3, 20], 5]
    # ... and that inside a chord: the callback gets the nested list.
    assert any_client.submit(chord(nested, task(emq_pyclient_jobs.pair))).result(60) == [[3, 20], 5]
    # A chain in a group in a chord, then a group after it in the chain.
    flow = chain(
        chord(group([chain(task(emq_test_jobs.add, 1, 1), task(emq_pyclient_jobs.multiply, 3))]), task(emq_pyclient_jobs.total)),
        group([task(emq_test_jobs.add, 1), group([task(emq_test_jobs.add, 2), task(emq_test_jobs.add, 3)])]),
    )
    assert any_client.submit(flow).result(60) == [7, 8, 9]


@pytest.fixture(scope="module")
def side_queue(cluster: Router) -> str:
    """A job manager serving only the queue ``wf-side``."""
    cluster.add_jobmanager("--queues", "wf-side", concurrency=1)
    return "wf-side"


def test_each_node_has_its_own_options(any_client: Any, side_queue: str) -> None:
    # Node b runs on its own queue: the job manager serving it ran it.
    j = any_client.submit(chain(task(emq_test_jobs.add, 1, 1), task(emq_pyclient_jobs.multiply, 10).options(queue=side_queue)))
    assert j.result(60) == 20
    nodes = any_client.admin("workflow", id=j.msgid)["workflow"]["nodes"]
    assert [n["queue"] for n in nodes] == ["default", side_queue]
    assert any_client.admin("job", msgid=nodes[1]["msgid"])["job"]["queue"] == side_queue
    # Its own retries: the node that fails its first delivery succeeds
    # with retries=1, while the workflow's default (none) fails it.
    ok = any_client.submit(chain(task(emq_pyclient_jobs.context_on_retry).options(retries=1)))
    assert ok.result(60)["attempt"] == 2
    bad = any_client.submit(chain(task(emq_pyclient_jobs.context_on_retry)))
    with pytest.raises(JobFailed):
        bad.result(60)
    # The workflow's options are the defaults a node's own replace.
    both = any_client.submit(
        group([task(emq_pyclient_jobs.context_on_retry), task(emq_pyclient_jobs.context_on_retry).options(retries=0)]),
        retries=1,
    )
    with pytest.raises(JobFailed) as e:
        both.result(60)
    assert e.value.error["node"] == "n1"
    with pytest.raises(TypeError, match="workflow node"):
        any_client.submit(task(emq_test_jobs.add, 1, 2).options(queue="x"))


def test_the_handle_reports_the_workflows_state(any_client: Any) -> None:
    j = any_client.submit(chain(task(emq_test_jobs.sleep, 0.5, 1), task(emq_test_jobs.add, 1)))
    st = j.status()
    assert st.state in ("pending", "running") and not st.finished, st
    assert st.view["kind"] == "workflow"
    assert j.result(60) == 2
    st = j.status()
    assert (st.state, st.finished) == ("succeeded", True), st
    assert st.view["result"] == {"value": 2}
    failed = any_client.submit(chain(task(emq_test_jobs.fail, "no"), task(emq_test_jobs.add, 1)))
    with pytest.raises(JobFailed):
        failed.result(60)
    assert failed.status().state == "failed"
    # Cancel: the running node is stopped, the rest never run.
    long = any_client.submit(chain(task(emq_test_jobs.sleep, 30, 1), task(emq_test_jobs.add, 1)))
    wait_until("the first node to run", lambda: long.status().state == "running", 30)
    assert long.cancel() in ("cancelling", "cancelled")
    with pytest.raises(JobCancelled):
        long.result(60)
    assert long.status().state == "cancelled"


def test_a_finished_workflow_is_still_known_after_a_restart(tmp_path: Path, kind: str) -> None:
    """Finished workflows are journaled: after the router restarts on its
    journal, a handle made from the id (``c.job(msgid)``) reads the state
    and the result, and the tree keeps every node's times."""
    journal = tmp_path / "router.journal"
    ports = [free_port() for _ in range(3)]
    router = start_router(tmp_path, journal=journal, ports=ports)
    try:
        router.add_jobmanager(concurrency=2)
        with router.connect(kind) as c:
            flow = chord(group([task(emq_test_jobs.add, 1, 1), task(emq_test_jobs.add, 2, 2)]), task(emq_pyclient_jobs.pair))
            j = c.submit(flow)
            assert j.result(60) == [2, 4]
            wf = j.msgid
        router.stop()
        router = start_router(tmp_path, journal=journal, ports=ports)
        with router.connect(kind) as c:
            again = c.job(wf)
            assert again.status().state == "succeeded"
            assert again.result(10) == [2, 4]
            tree = c.admin("workflow", id=wf)["workflow"]
            assert [n["state"] for n in tree["nodes"]] == ["done", "done", "done"]
            assert all({"queued_at_unix_ms", "started_at_unix_ms", "took_ms"} <= set(n) for n in tree["nodes"]), tree
    finally:
        router.stop()
