"""Client and AsyncClient against a real emq-router and emq-jobmanager:
results of Python, shell and call jobs, failures, timeouts, cancel, rejects,
connection errors, thread ownership, bounded memory. Every test but the
thread one runs with both clients (the ``kind`` fixture; the AsyncClient
behind conftest's ``AsyncAsSync``)."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any, Iterator, List

import pytest

import emq_test_jobs
from emq_client import (
    AdminError,
    BulkRejected,
    Client,
    EmqConnectionError,
    JobCancelled,
    JobFailed,
    JobNotFound,
    JobTimedOut,
    Malformed,
    MessageTooLarge,
    QueueFull,
    ResultTimeout,
    WrongThread,
    call,
    python,
    shell,
)

from conftest import Router, free_port, make_client, wait_until


@pytest.fixture
def any_client(cluster: Router, kind: str) -> Iterator[Any]:
    """A Client or an AsyncClient (as AsyncAsSync) on the shared cluster."""
    with cluster.connect(kind) as c:
        yield c


def test_python_job_results(any_client: Any) -> None:
    assert any_client.submit("emq_test_jobs.add", 1, 2).result(30) == 3
    assert any_client.submit(emq_test_jobs.echo, 1, "a", k=[1, 2]).result(30) == {"args": [1, "a"], "kwargs": {"k": [1, 2]}}
    greet = python("emq_pyclient_jobs:Greeter.greet", args=["emq"], class_kwargs={"greeting": "Hi"})
    assert any_client.submit(greet).result(30) == "Hi, emq"
    # a job kwarg named like a submit option goes through python()
    assert any_client.submit(python(emq_test_jobs.echo, kwargs={"queue": "q"})).result(30) == {"args": [], "kwargs": {"queue": "q"}}


def test_shell_and_call_results(any_client: Any) -> None:
    out = any_client.submit(shell(["sh", "-c", "cat; echo $X"], stdin="in\n", env={"X": "x"})).result(30)
    assert out == {"exit_status": 0, "stdout": "in\nx\n", "stderr": ""}
    with pytest.raises(JobFailed) as e:
        any_client.submit(shell(["sh", "-c", "echo no >&2; exit 3"])).result(30)
    assert e.value.kind == "exit" and e.value.error["exit_status"] == 3
    assert any_client.submit(call("echo", {"a": [1, 2]})).result(30) == {"a": [1, 2]}
    assert any_client.submit(call("noop")).result(30) is None
    with pytest.raises(JobFailed) as e:
        any_client.submit(call("no-such-handler")).result(30)
    assert e.value.kind == "unknown-handler"


def test_raising_job(any_client: Any) -> None:
    job = any_client.submit("emq_test_jobs.fail", "bad input")
    with pytest.raises(JobFailed) as e:
        job.result(30)
    assert e.value.kind == "exception"
    assert "bad input" in e.value.message
    assert e.value.traceback and "ValueError" in e.value.traceback and "emq_test_jobs.py" in e.value.traceback
    assert e.value.msgid == job.msgid
    assert job.status().state == "failed"


def test_retries_then_failure(any_client: Any) -> None:
    with pytest.raises(JobFailed) as e:
        any_client.submit("emq_test_jobs.fail", retries=1).result(30)
    assert e.value.error.get("attempts") == 2


def test_timed_out_job(any_client: Any) -> None:
    started = time.monotonic()
    with pytest.raises(JobTimedOut) as e:
        any_client.submit("emq_test_jobs.sleep", 30, timeout=1).result(25)
    assert e.value.kind == "timeout"
    assert time.monotonic() - started < 20


def test_result_wait_timeout_then_cancel_running(any_client: Any) -> None:
    job = any_client.submit("emq_test_jobs.sleep", 30, "late")
    with pytest.raises(ResultTimeout):
        job.result(timeout=0.2)
    wait_until("the job to run", lambda: job.status().state == "in-flight", 20)
    assert job.cancel() in ("cancelling", "cancelled")
    with pytest.raises(JobCancelled):
        job.result(20)
    assert job.status().state == "cancelled"
    with pytest.raises(AdminError) as e:
        job.cancel()
    assert e.value.kind == "conflict"


def test_cancel_queued_job(bare_router: Router, kind: str) -> None:
    with bare_router.connect(kind) as c:
        job = c.submit(call("noop"))
        assert job.accepted
        assert job.status().state == "queued"
        assert job.cancel() == "cancelled"
        with pytest.raises(JobCancelled):
            job.result(10)
        assert job.status().state == "cancelled"
        with pytest.raises(JobNotFound):
            c.job("no-such-job").status()


def test_delayed_job(any_client: Any) -> None:
    job = any_client.submit(call("echo", 7), delay=2)
    assert job.status().state == "delayed"
    assert job.result(20) == 7


def test_queue_full_and_bulk_reject(bare_router: Router, kind: str) -> None:
    """The bare router holds 3 jobs per queue (--hwm 3); with
    ``queue_full_timeout=0`` a refusal is raised at once."""
    with bare_router.connect(kind, queue_full_timeout=0) as c:
        jobs = [c.submit(call("noop")) for _ in range(3)]
        with pytest.raises(QueueFull) as e:
            c.submit(call("noop"))
        assert e.value.reason == "queue-full"
        with pytest.raises(BulkRejected) as b:
            c.submit_many([call("noop")] * 2, queue="other")
        # "other" falls back to default (no worker serves it): both refused
        assert len(b.value.rejected) == 2 and len(b.value.jobs) == 2
        with pytest.raises(QueueFull):
            b.value.jobs[0].result(1)
        for j in jobs:
            assert j.cancel() == "cancelled"
        assert c.submit(call("noop")).accepted


def test_queue_full_is_backpressure_a_refused_job_goes_again_once_there_is_room(bare_router: Router, kind: str) -> None:
    """--hwm 3 and no job manager: the 4th submit is refused queue-full and
    sent again (same msgid) until a queued job is cancelled from another
    thread; then it is accepted. With a short queue_full_timeout, the
    refusal is raised once the time is spent."""
    with bare_router.connect(kind, queue_full_timeout=20) as c:
        jobs = [c.submit(call("noop")) for _ in range(3)]

        def make_room() -> None:
            with bare_router.client() as other:
                other.job(jobs[0].msgid).cancel()

        timer = threading.Timer(0.5, make_room)
        t0 = time.monotonic()
        timer.start()
        try:
            fourth = c.submit(call("noop"))
        finally:
            timer.join()
        assert fourth.accepted
        assert time.monotonic() - t0 >= 0.4, "it waited for the room"
        assert fourth.status().state == "queued"
    with bare_router.connect(kind, queue_full_timeout=0.3) as c:
        t0 = time.monotonic()
        with pytest.raises(QueueFull):
            c.submit(call("noop"))
        assert 0.1 <= time.monotonic() - t0 < 5


def test_submit_many_sends_queue_full_refusals_again(bare_router: Router, kind: str) -> None:
    """A bulk submit far over --hwm 3, with a job manager draining the
    queue: every job is accepted and runs once."""
    bare_router.add_jobmanager(concurrency=2)
    with bare_router.connect(kind) as c:
        jobs = c.submit_many([call("echo", i) for i in range(300)])
        assert [j.result(60) for j in jobs] == list(range(300))


def test_a_job_over_the_size_limit_is_refused_before_it_is_sent(bare_router: Router, kind: str) -> None:
    """Issue 26 item 9: a 17 MB job, over the router's default limit
    (16 MiB), raises MessageTooLarge at once and sends nothing (before: a
    wait for an answer that did not come); so does a schedule; the client
    goes on. max_message_size sets another limit."""
    big = "x" * 17_000_000
    with bare_router.connect(kind, ack_timeout=10) as c:
        t0 = time.monotonic()
        with pytest.raises(MessageTooLarge) as e:
            c.submit(call("echo", big))
        assert time.monotonic() - t0 < 2
        assert e.value.limit == 16 * 1024 * 1024 < e.value.size
        with pytest.raises(MessageTooLarge):
            c.schedule(call("echo", big), interval=60)
        assert c.outstanding == 0
        assert c.submit(call("noop")).accepted
    with bare_router.connect(kind, max_message_size=1000) as c:
        with pytest.raises(MessageTooLarge, match="limit of 1000 bytes"):
            c.submit(call("echo", "y" * 2000))


def test_bad_schedule_is_malformed(any_client: Any) -> None:
    with pytest.raises(Malformed):
        any_client.schedule(call("noop"), cron="not a cron")


def test_schedule_runs_and_unschedules(any_client: Any, tmp_path) -> None:
    out = tmp_path / "sched.txt"
    any_client.schedule("emq_test_jobs.record", str(out), "tick", interval=0.3)
    wait_until("two scheduled runs", lambda: out.exists() and len(out.read_text().splitlines()) >= 2, 20)
    any_client.unschedule("emq_test_jobs.record", str(out), "tick")


def test_connection_errors(kind: str) -> None:
    nobody = f"tcp://127.0.0.1:{free_port()}"
    with make_client(kind, nobody, admin_addr=nobody, ack_timeout=0.3, admin_timeout=0.3) as c:
        started = time.monotonic()
        with pytest.raises(EmqConnectionError, match="no answer"):
            c.submit(call("noop"))
        with pytest.raises(EmqConnectionError):
            c.job("x").status()
        # A bulk submit: a few jobs wait for answers that do not come;
        # more than the socket queues (1,000) cannot even be sent.
        with pytest.raises(EmqConnectionError, match="no answer"):
            c.submit_many([call("noop")] * 3)
        with pytest.raises(EmqConnectionError, match="no router there"):
            c.submit_many([call("noop")] * 3000, window=5000)
        assert time.monotonic() - started < 10
    with pytest.raises(EmqConnectionError):
        make_client(kind, "not-an-address")


def test_one_client_per_thread(client: Client) -> None:
    job = client.submit(call("echo", 1))
    errors: List[BaseException] = []

    def other() -> None:
        for f in (lambda: client.submit(call("noop")), lambda: job.result(1)):
            try:
                f()
            except BaseException as e:  # noqa: BLE001 - collected for the assert
                errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    assert len(errors) == 2 and all(isinstance(e, WrongThread) for e in errors)
    assert job.result(30) == 1


def test_memory_bounded_by_live_handles(any_client: Any) -> None:
    """Dropped handles free their records; their results are discarded."""
    jobs = any_client.submit_many([call("noop")] * 2000)
    assert any_client.outstanding >= 2000
    last = jobs[-1]
    del jobs
    gc.collect()
    assert any_client.outstanding <= 1
    assert last.result(30) is None


def test_a_job_sent_to_default_carries_the_routers_notice(any_client: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 26 item 5: the client asks for notices; a job for a queue no
    job manager serves runs through ``default`` and the router's NOTICE is
    on the job (``(kind, text)``) and logged as a warning on ``emq_client``.
    A job for a served queue has none."""
    caplog.set_level("WARNING", logger="emq_client")
    job = any_client.submit("emq_test_jobs.add", 1, 2, queue="nobody")
    assert job.result(30) == 3
    assert [k for k, _ in job.notices] == ["routed-to-default"], job.notices
    assert '"nobody"' in job.notices[0][1] and '"default"' in job.notices[0][1]
    logged = [r.getMessage() for r in caplog.records if r.name == "emq_client"]
    assert any(job.msgid in m and '"nobody"' in m for m in logged), logged
    served = any_client.submit("emq_test_jobs.add", 1, 2)
    assert served.result(30) == 3 and served.notices == []
