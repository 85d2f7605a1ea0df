"""The frames emq_client sends, checked against what EventMQ 0.3.13's client
library sent on the wire (``shared/vectors/client_to_router.json``), on a
capture ROUTER socket. Message ids and identities differ per run and are
compared by shape; every other frame byte for byte."""

from __future__ import annotations

import json
import os
import re
import threading
import types
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest
import zmq

import emq_client
from emq_client import JobFailed, JournalUncertain, QueueFull, Rejected, messages, wire
from emq_client.sender import Sender

from conftest import REPO, make_client

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def vectors_dir() -> Path:
    """``$EMQ_VECTORS`` or ``shared/vectors`` beside the repository (the
    layout of the workplace and of CI)."""
    env = os.environ.get("EMQ_VECTORS")
    candidates = [Path(env)] if env else []
    candidates += [REPO.parent / "shared" / "vectors", Path("/work/shared/vectors")]
    for c in candidates:
        if (c / "client_to_router.json").is_file():
            return c
    pytest.fail(f"captured vectors not found in {[str(c) for c in candidates]}")


@pytest.fixture(scope="module")
def vectors() -> List[Dict[str, Any]]:
    data = json.loads((vectors_dir() / "client_to_router.json").read_text())
    return [m for m in data["messages"] if m["direction"] == "client->router"]


def vector(vectors: List[Dict[str, Any]], note_start: str) -> List[str]:
    """The frames of the captured message whose note starts so."""
    found = [m["frames"] for m in vectors if m.get("note", "").startswith(note_start)]
    assert len(found) == 1, (note_start, len(found))
    return found[0]


def same_frames(got: List[bytes], want: List[str]) -> None:
    """Identity (frame 0) and msgid (frame 4) are fresh uuid4s on both
    sides; the rest must be equal byte for byte."""
    text = [f.decode("utf-8") for f in got]
    assert len(text) == len(want), (text, want)
    assert UUID.match(text[0]) and UUID.match(want[0])
    assert UUID.match(text[4]) and UUID.match(want[4]), text[4]
    assert text[:4][1:] == want[:4][1:]
    assert text[5:] == want[5:]


class Capture:
    """A ROUTER on a free port that records what arrives and answers each
    REQUEST as ``answer`` says (default: REPLY, then RESULT value 42)."""

    def __init__(self, answer: Optional[Callable[[List[bytes]], List[List[bytes]]]] = None) -> None:
        self.ctx = zmq.Context.instance()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        # A port the kernel picks, kept bound (no probe-then-bind race).
        self.sock.bind("tcp://127.0.0.1:*")
        self.addr = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.got: List[List[bytes]] = []
        self.answer = answer or self.ack_and_result
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    @staticmethod
    def ack_and_result(frames: List[bytes]) -> List[List[bytes]]:
        ident, msgid = frames[0], frames[4]
        if frames[3] not in (b"REQUEST", b"SCHEDULE", b"UNSCHEDULE"):
            return []
        out = [[ident, b"", wire.PROTOCOL, b"REPLY", wire.new_msgid().encode(), msgid]]
        if frames[3] == b"REQUEST" and b"reply-requested" in frames[6]:
            out.append([ident, b"", wire.PROTOCOL, b"RESULT", wire.new_msgid().encode(), msgid, b"ok", b'{"value": 42}'])
        return out

    def run(self) -> None:
        while not self.stop.is_set():
            if self.sock.poll(50):
                frames = self.sock.recv_multipart()
                self.got.append(frames)
                for reply in self.answer(frames):
                    self.sock.send_multipart(reply)

    def wait_for(self, n: int) -> List[List[bytes]]:
        deadline = 100  # 100 polls of 50 ms: 5 s at most
        while len(self.got) < n and deadline:
            self.stop.wait(0.05)
            deadline -= 1
        assert len(self.got) >= n, f"got {len(self.got)} messages, want {n}"
        return self.got

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close(0)


@pytest.fixture
def capture() -> Any:
    c = Capture()
    yield c
    c.close()


def mark(*args: Any, **kwargs: Any) -> None:
    """Stands for the vectors' ``pyemq_jobs.mark``."""


mark.__module__ = "pyemq_jobs"
pyemq_jobs = types.SimpleNamespace(mark=mark)


def test_compat_messages_match_0313_vectors(vectors: List[Dict[str, Any]], capture: Capture) -> None:
    """emq_client.messages sends what eventmq.client.messages sent."""
    s = Sender()
    s.connect(capture.addr)
    job = ["run", {"path": "pyemq_jobs", "callable": "noop", "args": [], "kwargs": {}, "class_args": [], "class_kwargs": {}}]
    calls = [
        ("send_request(s, job)  ", lambda: messages.send_request(s, job)),
        ("send_request(s, job, reply_requested=True)  ", lambda: messages.send_request(s, job, reply_requested=True)),
        ("send_request(s, job, reply_requested=True, guarantee=True", lambda: messages.send_request(
            s, job, reply_requested=True, guarantee=True, retry_count=3, timeout=10, queue="other")),
        ("defer_job(s, 'pyemq_jobs.noop')  ", lambda: messages.defer_job(s, "pyemq_jobs.noop")),
        ("defer_job(s, pyemq_jobs.mark", lambda: messages.defer_job(
            s, pyemq_jobs.mark, args=("x",), kwargs={"k": 1}, reply_requested=True)),
        ("defer_job(s, 'pyemq_jobs.noop', class_args", lambda: messages.defer_job(
            s, "pyemq_jobs.noop", class_args=(1,), class_kwargs={"a": 2}, queue=None)),
        ("schedule(s, 'pyemq_jobs.noop', interval_secs=60)  ", lambda: messages.schedule(s, "pyemq_jobs.noop", interval_secs=60)),
        ("schedule(s, 'pyemq_jobs.noop', cron=", lambda: messages.schedule(
            s, "pyemq_jobs.noop", cron="*/5 * * * *", headers=("nohaste",))),
        ("schedule(s, 'pyemq_jobs.noop', interval_secs=60, unschedule=True)", lambda: messages.schedule(
            s, "pyemq_jobs.noop", interval_secs=60, unschedule=True)),
    ]
    ids = [call() for _, call in calls]
    assert all(isinstance(i, str) and UUID.match(i) for i in ids)
    got = capture.wait_for(len(calls))
    for (note, _), frames, msgid in zip(calls, got, ids):
        same_frames(frames, vector(vectors, note))
        assert frames[4].decode() == msgid
    s.close(0)


def test_client_frames_match_0313_vectors(vectors: List[Dict[str, Any]], capture: Capture, kind: str) -> None:
    """Client.submit and Client.schedule (and AsyncClient's) send 0.3.13's
    frames: the legacy client exactly defer_job's, the emq client the same
    plus reply-requested and result-receipt (and a RECEIVED for the result);
    schedules exactly schedule()'s."""
    with make_client(kind, capture.addr, legacy=True) as legacy:
        legacy.submit("pyemq_jobs.noop")
        capture.wait_for(1)  # two connections: keep their messages in order
    with make_client(kind, capture.addr) as c:
        job = c.submit(pyemq_jobs.mark, "x", k=1)
        assert job.result(5) == 42
        c.schedule("pyemq_jobs.noop", interval=60)
        c.schedule("pyemq_jobs.noop", cron="*/5 * * * *", headers=("nohaste",))
        c.unschedule("pyemq_jobs.noop")
    # The emq client also confirms the RESULT (RECEIVED): 6 messages.
    got = [f for f in capture.wait_for(6) if f[3] != b"RECEIVED"]
    assert [f[3] for f in capture.got if f[3] == b"RECEIVED"] == [b"RECEIVED"]
    same_frames(got[0], vector(vectors, "defer_job(s, 'pyemq_jobs.noop')  "))
    # emq's client asks for the receipt of its result (result-receipt), for
    # notices (notices) and for batched acknowledgements (batched-acks).
    mark = vector(vectors, "defer_job(s, pyemq_jobs.mark")
    same_frames(got[1], mark[:6] + [mark[6] + ",result-receipt,notices,batched-acks"] + mark[7:])
    same_frames(got[2], vector(vectors, "schedule(s, 'pyemq_jobs.noop', interval_secs=60)  "))
    same_frames(got[3], vector(vectors, "schedule(s, 'pyemq_jobs.noop', cron="))
    unsched = vector(vectors, "schedule(s, 'pyemq_jobs.noop', interval_secs=60, unschedule=True)")
    # Client.unschedule sends no interval (-1): the router matches queue + job.
    same_frames(got[4], unsched[:7] + ["-1"] + unsched[8:])


def test_headers_and_payload_forms() -> None:
    assert wire.headers_frame(reply_requested=True, retries=2, timeout=1.5, delay=0.25, extra=["x"]) == \
        "reply-requested,retry-count:2,timeout:2,delay:0.25,x"
    assert wire.headers_frame(delay=3.0) == "delay:3"
    with pytest.raises(ValueError):
        wire.headers_frame(extra=["a,b"])
    assert emq_client.call("noop").message == b'["call", {"handler": "noop"}]'
    assert emq_client.shell(["echo", "hi"], stdin="x").message == b'["shell", {"argv": ["echo", "hi"], "stdin": "x"}]'
    assert emq_client.python("pkg.mod:Cls.m", class_args=[1]).message == \
        b'["run", {"callable": "m", "path": "pkg.mod:Cls", "args": [], "kwargs": {}, "class_args": [1], "class_kwargs": {}}]'
    with pytest.raises(ValueError):
        emq_client.task(lambda: None)
    with pytest.raises(ValueError):
        emq_client.task("nodots")


def test_answers_reject_and_failure(kind: str) -> None:
    """REJECT becomes its reason's exception; a failed RESULT a JobFailed
    with kind, message and traceback."""

    def answer(frames: List[bytes]) -> List[List[bytes]]:
        ident, msgid = frames[0], frames[4]
        if b"noop" in frames[-1]:
            return [[ident, b"", wire.PROTOCOL, b"REJECT", b"m", msgid, b"queue-full", b"queue default is full"]]
        err = {"error": {"kind": "exception", "message": "ValueError: x", "traceback": "Traceback...\nValueError: x\n"}}
        return [[ident, b"", wire.PROTOCOL, b"REPLY", b"m", msgid],
                [ident, b"", wire.PROTOCOL, b"HEARTBEAT", b"m"],
                [ident, b"", wire.PROTOCOL, b"RESULT", b"m", msgid, b"failed", json.dumps(err).encode()]]

    cap = Capture(answer)
    try:
        # queue_full_timeout=0: the REJECT is raised at once instead of
        # being retried as backpressure (test_client.py covers that).
        with make_client(kind, cap.addr, queue_full_timeout=0) as c:
            with pytest.raises(QueueFull) as e:
                c.submit(emq_client.call("noop"))
            assert e.value.reason == "queue-full" and "full" in e.value.text
            job = c.submit(emq_client.call("echo"))
            with pytest.raises(JobFailed) as f:
                job.result(5)
            assert (f.value.kind, f.value.message) == ("exception", "ValueError: x")
            assert "Traceback" in (f.value.traceback or "")
    finally:
        cap.close()


def uncertain_once() -> Callable[[List[bytes]], List[List[bytes]]]:
    """A router that answers the first send of every REQUEST ``REJECT
    journal-uncertain`` and a send of the same msgid again with REPLY and a
    RESULT (the msgid's text as the value)."""
    seen: set = set()

    def answer(frames: List[bytes]) -> List[List[bytes]]:
        ident, msgid = frames[0], frames[4]
        if frames[3] != b"REQUEST":
            return []
        if msgid not in seen:
            seen.add(msgid)
            return [[ident, b"", wire.PROTOCOL, b"REJECT", wire.new_msgid().encode(), msgid,
                     b"journal-uncertain", b"the journal could not tell whether it stored the job"]]
        value = json.dumps({"value": msgid.decode()}).encode()
        return [[ident, b"", wire.PROTOCOL, b"REPLY", wire.new_msgid().encode(), msgid],
                [ident, b"", wire.PROTOCOL, b"RESULT", wire.new_msgid().encode(), msgid, b"ok", value]]

    return answer


def requests(cap: Capture) -> List[List[bytes]]:
    return [f for f in cap.got if f[3] == b"REQUEST"]


def test_journal_uncertain_is_sent_again_under_the_same_msgid(kind: str) -> None:
    """``journal-uncertain`` is not a refusal: the job goes again, same
    msgid and frames, and the acknowledgement of the second send counts
    (queue_full_timeout=0: it does not depend on the queue-full budget)."""
    cap = Capture(uncertain_once())
    try:
        with make_client(kind, cap.addr, queue_full_timeout=0, ack_timeout=5) as c:
            job = c.submit(emq_client.call("echo", 1))
            assert job.accepted
            assert job.result(5) == job.msgid
            sent = requests(cap)
            assert len(sent) == 2
            assert sent[0][4] == sent[1][4] == job.msgid.encode()
            assert sent[0][1:] == sent[1][1:]
            jobs = c.submit_many([emq_client.call("echo", i) for i in range(20)], window=5)
            assert [j.result(5) for j in jobs] == [j.msgid for j in jobs]
            msgids = [f[4].decode() for f in requests(cap)[2:]]
            assert sorted(msgids) == sorted(2 * [j.msgid for j in jobs])
    finally:
        cap.close()


def test_journal_uncertain_past_the_time_is_not_a_refusal(kind: str) -> None:
    """A router that stays unsure: once the time is spent the submit raises
    JournalUncertain, which says the job may run and is no Rejected."""

    def always(frames: List[bytes]) -> List[List[bytes]]:
        if frames[3] != b"REQUEST":
            return []
        return [[frames[0], b"", wire.PROTOCOL, b"REJECT", b"m", frames[4], b"journal-uncertain", b"unsure"]]

    cap = Capture(always)
    try:
        with make_client(kind, cap.addr, queue_full_timeout=0, ack_timeout=0.3) as c:
            with pytest.raises(JournalUncertain) as e:
                c.submit(emq_client.call("noop"))
            assert not isinstance(e.value, Rejected)
            assert "may run" in str(e.value)
            sent = requests(cap)
            assert len(sent) >= 2 and len({f[4] for f in sent}) == 1 and sent[0][4] == e.value.msgid.encode()
    finally:
        cap.close()
