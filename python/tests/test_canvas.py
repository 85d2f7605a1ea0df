"""Workflows (``chain``, ``group``, ``chord`` of ``task``) through Client
and AsyncClient against a real emq-router and emq-jobmanager
(docs/PROTOCOL.md, "Workflows"): Celery's semantics, results passed by the
router, nesting, failure naming the node."""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

import emq_pyclient_jobs
import emq_test_jobs
from emq_client import JobFailed, chain, chord, group, task

from conftest import Router, make_client


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
    spec = chord(group([task("m.a"), chain(task("m.b"), task("m.c"))]), task("m.cb")).spec("q", "")
    nodes = {n["id"]: n for n in spec["nodes"]}
    assert [n["msg"][1]["callable"] for n in spec["nodes"]] == ["a", "b", "c", "cb"]
    assert nodes["n2"]["after"] == ["n1"] and nodes["n2"]["pass"] == "one"
    assert nodes["n3"]["after"] == ["n0", "n2"] and nodes["n3"]["pass"] == "list"
    assert spec["output"] == ["n3"] and spec["output_pass"] == "one"
    json.dumps(spec)
    with pytest.raises(TypeError):
        group([group([task("m.a")])]).spec("q", "")
