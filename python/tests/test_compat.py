"""EventMQ 0.3.13 compatibility: the @job decorator, a job submitted by the
real 0.3.13 client library and looked up here, schedules, and fire and
forget against a real 0.3.13 router."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Iterator

import pytest

import emq_client
import emq_pyclient_jobs
from emq_client import Client, Unsupported, jobs as emq_jobs

from conftest import Proc, Router, binary, free_port, spawn, wait_until, PYTHONPATH


@pytest.fixture
def broker_env(cluster: Router, monkeypatch: pytest.MonkeyPatch) -> Router:
    monkeypatch.setenv("EMQ_BROKER_ADDR", cluster.frontend)
    monkeypatch.setenv("EMQ_ADMIN_ADDR", cluster.admin)
    return cluster


def test_decorator_delay_and_submit(broker_env: Router, tmp_path: Path) -> None:
    # The decorator reads $EMQ_BROKER_ADDR when it decorates (as 0.3.13's):
    # decorate again now that it is set, as an application would.
    f = emq_client.job(emq_pyclient_jobs.multiply)
    msgid = f.delay(6, 7)
    assert isinstance(msgid, str)
    with broker_env.client() as c:
        assert c.job(msgid).result(30) == 42  # fire and forget, found by msgid
    assert f.submit(3, 4).result(30) == 12
    assert emq_pyclient_jobs.local_only.delay(1) == 2  # async_=False runs here
    g = emq_jobs.Job(queue="default")(emq_pyclient_jobs.multiply)
    assert isinstance(g.delay(2, 2), str)


@pytest.fixture
def no_broker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No broker address anywhere: no variable, an empty config file."""
    for var in ("EMQ_BROKER_ADDR", "EVENTMQ_FRONTEND_ADDR", "EMQ_INLINE"):
        monkeypatch.delenv(var, raising=False)
    conf = tmp_path / "empty.conf"
    conf.write_text("")
    monkeypatch.setenv("EVENTMQ_CONFIG_FILE", str(conf))


def test_decorator_without_broker_fails_loudly(no_broker: None) -> None:
    # 0.3.13 ran the function here with only a log line; now that is an
    # opt-in, and the error says how to do either.
    f = emq_client.job(emq_pyclient_jobs.multiply)
    with pytest.raises(emq_client.EmqConnectionError) as e:
        f.delay(2, 5)
    text = str(e.value)
    assert "emq_pyclient_jobs.multiply.delay(): no broker address" in text, text
    assert "EMQ_BROKER_ADDR" in text and "EMQ_INLINE=1" in text and "inline=True" in text, text


def test_inline_is_an_explicit_opt_in(no_broker: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert emq_client.job(emq_pyclient_jobs.multiply, inline=True).delay(2, 5) == 10
    assert emq_client.job(inline=True)(emq_pyclient_jobs.multiply).delay(3, 5) == 15
    assert emq_client.job(emq_pyclient_jobs.multiply, async_=False).delay(4, 5) == 20  # 0.3.13's flag
    monkeypatch.setenv("EMQ_INLINE", "1")
    assert emq_client.job(emq_pyclient_jobs.multiply).delay(2, 6) == 12
    monkeypatch.setenv("EMQ_INLINE", "0")
    with pytest.raises(emq_client.EmqConnectionError):
        emq_client.job(emq_pyclient_jobs.multiply).delay(2, 6)


def test_delay_finds_the_broker_in_the_settings(broker_env: Router, monkeypatch: pytest.MonkeyPatch) -> None:
    # Decorated with no address known, then EVENTMQ_FRONTEND_ADDR is set:
    # delay reads the settings when it is called.
    monkeypatch.delenv("EMQ_BROKER_ADDR")
    f = emq_client.job(emq_pyclient_jobs.multiply)
    monkeypatch.setenv("EVENTMQ_FRONTEND_ADDR", broker_env.frontend)
    msgid = f.delay(3, 3)
    with broker_env.client() as c:
        assert c.job(msgid).result(30) == 9


def test_job_from_0313_client_library_looked_up(cluster: Router) -> None:
    try:
        import eventmq
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("EventMQ 0.3.13 is not importable: run scripts/setup-python.sh")
        pytest.skip("EventMQ 0.3.13 is not importable: run scripts/setup-python.sh")
    from eventmq.client.messages import defer_job
    from eventmq.sender import Sender

    s = Sender()
    s.connect(cluster.frontend)
    msgid = defer_job(s, "emq_test_jobs.add", args=[20, 22])
    assert msgid
    with cluster.client() as c:
        job = c.job(msgid)
        assert job.result(30) == 42
        st = job.status()
        assert st.state == "done" and st.msgid == msgid and st.queue == "default"
    s.zsocket.close(0)
    assert eventmq.__version__ == "0.3.13"


def test_compat_schedule_and_unschedule(broker_env: Router, tmp_path: Path) -> None:
    out = tmp_path / "compat-sched.txt"
    sid = emq_client.schedule("emq_test_jobs.record", interval_secs=1, args=[str(out), "c"])
    assert sid
    wait_until("a scheduled run", lambda: out.exists() and out.read_text().strip() != "", 20)
    assert emq_client.unschedule("emq_test_jobs.record", interval_secs=1, args=[str(out), "c"])
    with broker_env.client() as c:
        wait_until("the schedule to go", lambda: not c.admin("schedules")["schedules"], 10)


def py_router_ready(admin: str) -> bool:
    """0.3.13's router answers STATUS on its admin socket."""
    import zmq

    s = zmq.Context.instance().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.IDENTITY, emq_client.wire.new_msgid().encode())  # 0.3.13 decodes it as text
    s.connect(admin)
    try:
        s.send_multipart([b"", b"eMQP/1.0", b"STATUS", b"admin:probe"])
        return bool(s.poll(300))
    finally:
        s.close(0)


@pytest.fixture
def legacy_router(tmp_path: Path) -> Iterator[Router]:
    """EventMQ 0.3.13's own router (from the venv) with an emq job manager."""
    script = Path(sys.executable).parent / "emq-router"
    if not script.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{script} missing: run scripts/setup-python.sh")
        pytest.skip(f"{script} missing: run scripts/setup-python.sh")
    fe, be, ad = (f"tcp://127.0.0.1:{free_port()}" for _ in range(3))
    proc = spawn("py-emq-router", [str(script)], tmp_path, {
        "EVENTMQ_FRONTEND_ADDR": fe, "EVENTMQ_BACKEND_ADDR": be, "EVENTMQ_ADMINISTRATIVE_ADDR": ad,
        "PYTHONUNBUFFERED": "1",
    })
    router = Router(fe, be, ad, proc, tmp_path)
    try:
        wait_until("the 0.3.13 router", lambda: py_router_ready(ad), 20, proc)
        jm = spawn("emq-jobmanager", [str(binary("emq-jobmanager")), "--broker", be, "--python", sys.executable, "-J", "2"],
                   tmp_path, {"PYTHONPATH": PYTHONPATH})
        router.workers.append(jm)
        yield router
    finally:
        router.stop()


def test_fire_and_forget_on_0313_router(legacy_router: Router, tmp_path: Path) -> None:
    out = tmp_path / "legacy.txt"
    with Client(legacy_router.frontend, legacy=True) as c:
        job = c.submit("emq_test_jobs.record", str(out), "legacy-1")
        c.submit_many([("emq_test_jobs.record", [str(out), f"legacy-{i}"]) for i in range(2, 6)])
        with pytest.raises(Unsupported, match="emq router"):
            job.result(1)
        with pytest.raises(Unsupported):
            job.status()
        wait_until("5 jobs to run on the 0.3.13 router", lambda: out.exists() and len(out.read_text().splitlines()) == 5, 30)
    tags = sorted(line.split()[0] for line in out.read_text().splitlines())
    assert tags == [f"legacy-{i}" for i in range(1, 6)]
