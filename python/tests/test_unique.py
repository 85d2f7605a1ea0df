"""Unique jobs through Client and AsyncClient against a real emq-router and
emq-jobmanager (docs/PROTOCOL.md, "Unique jobs"): a duplicate submit
returns a Job for the existing job whose ``result()`` works; ``reject``
raises :class:`DuplicateJob`; ``unique_for`` keeps the key after the job
finished; bad values are refused before anything is sent."""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest

import emq_test_jobs
from emq_client import DuplicateJob, wire

from conftest import Router, make_client


@pytest.fixture
def any_client(cluster: Router, kind: str) -> Iterator[Any]:
    with make_client(kind, cluster.frontend, admin_addr=cluster.admin) as c:
        yield c


def key() -> str:
    return "k-" + uuid.uuid4().hex


def test_a_duplicate_is_the_existing_job_and_gets_its_result(any_client: Any) -> None:
    k = key()
    first = any_client.submit(emq_test_jobs.sleep, 0.5, "once", unique_key=k)
    second = any_client.submit(emq_test_jobs.sleep, 0.5, "twice", unique_key=k)
    assert not first.duplicate
    assert second.duplicate
    assert second.msgid == first.msgid
    assert second.result(30) == "once"
    assert first.result(30) == "once"
    assert second.status().state == "done"


def test_reject_raises_duplicate_job_naming_the_existing_one(any_client: Any) -> None:
    k = key()
    first = any_client.submit(emq_test_jobs.sleep, 0.5, unique_key=k)
    with pytest.raises(DuplicateJob) as e:
        any_client.submit(emq_test_jobs.sleep, 0.5, unique_key=k, on_conflict="reject")
    assert e.value.reason == "duplicate"
    assert e.value.existing == first.msgid
    first.result(30)


def test_unique_for_keeps_the_key_after_the_job_finished(any_client: Any) -> None:
    k = key()
    first = any_client.submit(emq_test_jobs.add, 1, 2, unique_key=k, unique_for=60)
    assert first.result(30) == 3
    again = any_client.submit(emq_test_jobs.add, 5, 5, unique_key=k)
    assert again.duplicate and again.msgid == first.msgid
    assert again.result(10) == 3, "the finished job's kept result, at once"
    # Without a window the key is free once the job finished.
    k2 = key()
    a = any_client.submit(emq_test_jobs.add, 1, 1, unique_key=k2)
    assert a.result(30) == 2
    b = any_client.submit(emq_test_jobs.add, 2, 2, unique_key=k2)
    assert not b.duplicate and b.result(30) == 4


def test_replace_takes_the_key_from_a_waiting_job(cluster: Router, kind: str) -> None:
    k = key()
    with make_client(kind, cluster.frontend, admin_addr=cluster.admin) as c:
        old = c.submit(emq_test_jobs.add, 1, 1, unique_key=k, delay=30)
        new = c.submit(emq_test_jobs.add, 2, 2, unique_key=k, on_conflict="replace")
        assert not new.duplicate and new.msgid != old.msgid
        assert new.result(30) == 4
        assert old.status().state == "cancelled"


def test_bad_unique_options_are_refused_before_sending() -> None:
    with pytest.raises(ValueError):
        wire.unique_headers("")
    with pytest.raises(ValueError):
        wire.unique_headers("a,b")
    with pytest.raises(ValueError):
        wire.unique_headers(None, unique_for=5)
    with pytest.raises(ValueError):
        wire.unique_headers("k", on_conflict="merge")
    assert wire.unique_headers("k", 60, "reject") == ["unique-key:k", "unique-for:60", "on-conflict:reject"]
