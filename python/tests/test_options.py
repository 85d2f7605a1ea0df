"""Job options apart from the job's arguments (emq_client.options): a
keyword of ``submit`` named like an option that the function also takes is
refused, and the explicit forms (``f.options(...).submit``, a ``python()``
Task) send each where it belongs — checked on a real job manager."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import pytest

import emq_pyclient_jobs
from emq_client import AsyncClient, Client, OptionCollision, python
from emq_client.options import SUBMIT_OPTIONS

from conftest import Router


def test_the_option_table_is_submits_keywords() -> None:
    # A new submit option is one entry in SubmitOptions and one keyword of
    # submit: this keeps the two (and so the collision check) together.
    for submit in (Client.submit, AsyncClient.submit):
        kw = [n for n, p in inspect.signature(submit).parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
        assert kw == list(SUBMIT_OPTIONS), submit


def test_a_collision_is_refused_before_anything_is_sent(cluster: Router, kind: str) -> None:
    with cluster.connect(kind) as c:
        with pytest.raises(OptionCollision) as e:
            c.submit(emq_pyclient_jobs.fetch, "http://x", timeout=3)
        text = str(e.value)
        assert "fetch() has a parameter named 'timeout'" in text, text
        assert "fetch.options(timeout=...).submit" in text and "emq_client.python(fetch" in text, text
        assert isinstance(e.value, TypeError) and e.value.names == ["timeout"]
        with pytest.raises(OptionCollision):
            c.submit(emq_pyclient_jobs.fetch, url="http://x", timeout=3, queue="default")
        # Options the function does not take are options, as before.
        assert c.submit(emq_pyclient_jobs.multiply, 6, 7, timeout=30, retries=1).result(30) == 42
        # A keyword that is only the function's goes to it.
        assert c.submit(emq_pyclient_jobs.fetch, "http://x", 5).result(30) == ["http://x", 5]


def test_the_explicit_forms_keep_options_and_arguments_apart(cluster: Router, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMQ_BROKER_ADDR", cluster.frontend)
    monkeypatch.setenv("EMQ_ADMIN_ADDR", cluster.admin)
    fetch = emq_pyclient_jobs.fetch
    j = fetch.options(timeout=7, retries=2).submit("http://x", timeout=10)
    assert j.result(30) == ["http://x", 10]
    headers = j.status().view.get("headers")
    assert "timeout:7" in headers and "retry-count:2" in headers, headers
    # The function's own keyword through f.submit is the function's.
    assert fetch.submit("http://y", timeout=3).result(30) == ["http://y", 3]
    with cluster.client() as c:
        j2 = c.submit(python(fetch, ["http://z"], {"timeout": 11}), timeout=9)
        assert j2.result(30) == ["http://z", 11]
        assert "timeout:9" in j2.status().view.get("headers")
    with pytest.raises(TypeError, match="unknown job option"):
        fetch.options(tiemout=3)


def test_decorated_submit_takes_legacy_options_with_a_warning(cluster: Router, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMQ_BROKER_ADDR", cluster.frontend)
    monkeypatch.setenv("EMQ_ADMIN_ADDR", cluster.admin)
    with pytest.warns(DeprecationWarning, match=r"multiply.options\(timeout=...\)"):
        j = emq_pyclient_jobs.multiply.submit(2, 3, timeout=30)
    assert j.result(30) == 6
    assert "timeout:30" in j.status().view.get("headers")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert emq_pyclient_jobs.multiply.options(timeout=30).submit(2, 4).result(30) == 8


def test_a_dotted_path_is_not_inspected(cluster: Router) -> None:
    # The module is not imported to read a signature: keywords named like
    # options are options (documented).
    with cluster.client() as c:
        j = c.submit("emq_pyclient_jobs.fetch", "http://x", timeout=20)
        assert j.result(30) == ["http://x", 10]


def test_unknown_values_stay_unsent(cluster: Any) -> None:
    with cluster.client() as c:
        before = c.outstanding
        with pytest.raises(OptionCollision):
            c.submit(emq_pyclient_jobs.fetch, "u", delay=1, timeout=1)
        assert c.outstanding == before
