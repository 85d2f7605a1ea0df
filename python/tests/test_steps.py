"""The client's decisions without sockets or a clock (emq_client._core and
_base): the tracker's resend rules across connection changes, and the step
objects (Backoff, Window, Probe, AdminCall) and plans on given times."""

from __future__ import annotations

import json
from typing import Any, List

import pytest

from emq_client import _base, _core, errors, payload, wire
from emq_client._base import Await, Send, SendMany, Sleep
from emq_client.wire import Incoming

A, B = "tcp://127.0.0.1:1", "tcp://127.0.0.1:2"


def msgids(frames: List[List[bytes]]) -> List[str]:
    """The msgids of the REQUESTs among ``frames`` (the hello left out)."""
    return [f[3].decode() for f in frames if f[2] == b"REQUEST"]


def tracked(t: _core.Tracker, n: int) -> List[_core.Pending]:
    out = []
    for i in range(n):
        msgid = f"m{i}"
        out.append(t.add(msgid, True, wire.request(msgid, "q", "", b"x")))
    return out


def test_a_reconnect_sends_the_unanswered_again_in_order() -> None:
    t = _core.Tracker()
    jobs = tracked(t, 3)
    assert t.link(True, A, 0.0) == []  # the first connection: nothing to repeat
    t.handle(Incoming("REPLY", "m1"))
    assert t.link(False, A, 1.0) == []  # nothing serves
    assert t.poll_timeout() is None
    again = t.link(True, A, 2.0)
    assert again[0][2] == b"HEARTBEAT" and msgids(again) == ["m0", "m2"]
    # The router had m0: duplicate-msgid for a message sent again is an acknowledgement.
    t.handle(Incoming("REJECT", "m0", reason="duplicate-msgid"))
    assert jobs[0].accepted and jobs[0].reject is None


def test_a_drop_while_another_connection_serves_sends_again_after_settling() -> None:
    t = _core.Tracker()
    tracked(t, 2)
    t.link(True, A, 0.0)
    t.link(True, B, 0.0)
    assert t.link(False, A, 10.0) == []  # not at once: the dead pipe may still take them
    assert t.poll_timeout() == pytest.approx(10.0 + _core.SETTLE)
    assert t.handle_timeout(10.0 + _core.SETTLE / 2) == []
    again = t.handle_timeout(10.0 + _core.SETTLE)
    assert msgids(again) == ["m0", "m1"]
    assert t.poll_timeout() is None and t.handle_timeout(99.0) == []


def test_a_drop_of_a_connection_never_up_or_of_the_last_one_waits_for_the_next() -> None:
    t = _core.Tracker()
    tracked(t, 1)
    t.link(True, B, 0.0)
    assert t.link(False, A, 1.0) == [] and t.poll_timeout() is None  # A was never up
    t.link(True, A, 2.0)  # after a "loss" that was not one: sent again, harmless
    t.link(False, A, 3.0)
    t.link(False, B, 3.1)  # the last one: nothing serves
    assert t.handle_timeout(9.0) == []
    assert msgids(t.link(True, B, 10.0)) == ["m0"]


def test_journal_uncertain_is_not_a_refusal_and_a_resend_forgets_it() -> None:
    t = _core.Tracker()
    (p,) = tracked(t, 1)
    t.handle(Incoming("REJECT", "m0", reason="journal-uncertain", text="unsure"))
    assert p.answered and not p.finished and p.reject is None
    assert isinstance(p.uncertain, errors.JournalUncertain) and not isinstance(p.uncertain, errors.Rejected)
    assert _core.wants_resend(p)
    t.again(p, wire.request("m0", "q", "", b"x"))
    assert not p.answered
    t.handle(Incoming("REJECT", "m0", reason="duplicate-msgid"))  # it had been stored
    assert p.accepted and p.reject is None


def test_backoff_doubles_to_a_second_until_the_time_is_spent() -> None:
    p = _core.Pending("m", True)
    p.reject = errors.rejected("m", "queue-full", "")
    b = _base.Backoff(now=0.0, full_for=1.0, uncertain_for=5.0)
    assert [b.pause(p, 0.0) for _ in range(4)] == [0.01, 0.02, 0.04, 0.08]
    assert b.pause(p, 0.95) is None  # 0.16 more would pass 1 s
    p.reject, p.uncertain = None, errors.JournalUncertain("m", "journal-uncertain", "")
    assert b.pause(p, 0.95) == 0.32  # an uncertain job has its own, longer time
    p.uncertain = None
    p.accepted = True
    assert b.pause(p, 0.0) is None


def test_window_room_and_waits() -> None:
    """Room is the window less the jobs from the first unanswered one on;
    a full window waits until an eighth of it (refill) is free; with
    max_unfinished the unfinished jobs count too, the same way."""
    w = _base.Window(limit=16, max_unfinished=None)
    assert w.refill == 2 and w.room() == 16 and w.waits() == []
    ps = [_core.Pending(f"m{i}", True) for i in range(16)]
    for p in ps[:15]:
        w.sent(p)
    assert w.room() == 1 and w.waits() == []
    w.sent(ps[15])
    assert w.room() == 0 and w.waits() == [(w.unanswered, 14, False)]
    ps[1].accepted = True  # behind an unanswered job: still in the window
    assert w.room() == 0
    ps[0].reject = errors.rejected("m0", "malformed", "")  # answered too
    assert w.room() == 2 and len(w.unanswered) == 14 and w.waits() == []
    u = _base.Window(limit=100, max_unfinished=3)
    qs = [_core.Pending(f"q{i}", True) for i in range(3)]
    for p in qs:
        u.sent(p)
        p.accepted = True
    assert u.room() == 0 and u.waits() == [(u.unfinished, 2, True)]  # answered is not finished
    qs[1].status = "ok"
    assert u.room() == 0  # behind an unfinished job
    qs[0].status = "ok"
    assert u.room() == 2 and u.waits() == []
    assert _base.Window(limit=3, max_unfinished=None).refill == 1
    big = _base.Window(limit=1000, max_unfinished=80)
    assert big.refill_unfinished == 10
    for i in range(80):
        big.sent(_core.Pending(f"b{i}", True))
    assert big.waits() == [(big.unfinished, 70, True)]


def test_probe_halves_and_doubles() -> None:
    ps = [_core.Pending(f"m{i}", True) for i in range(3)]
    full = [(p, [b""]) for p in ps]
    for p in ps:
        p.reject = errors.rejected(p.msgid, "queue-full", "")
    probe = _base.Probe(list(full), window=4)
    assert probe.pause() == _core.FULL_BACKOFF_FIRST
    batch = probe.batch()
    assert [p.msgid for p, _ in batch] == ["m0"]
    ps[0].reject, ps[0].accepted = None, True
    probe.settled(batch)
    assert probe.size == 2 and [p.msgid for p, _ in probe.batch()] == ["m1", "m2"]
    probe.settled([(ps[1], [b""]), (ps[2], [b""])])  # still full: back to the front
    assert probe.size == 1 and probe.pauses == 1 and [p.msgid for p, _ in probe.waiting] == ["m1", "m2"]
    assert probe.pause() == _core.full_backoff(2)


def test_admin_call_takes_only_its_own_answer() -> None:
    call = _base.AdminCall("job", {"msgid": "x"}, "tcp://a", 5.0)
    assert json.loads(call.frames[4]) == {"op": "job", "msgid": "x"}
    other = [b"", wire.PROTOCOL, b"REPLY", b"r", b'{"ok": true}', b"admin:old"]
    assert call.answer(other) is None
    mine = [b"", wire.PROTOCOL, b"REPLY", b"r", b'{"ok": true, "job": {}}', call.msgid.encode()]
    assert call.answer(mine) == {"ok": True, "job": {}}
    failed = [b"", wire.PROTOCOL, b"REPLY", b"r", b'{"ok": false, "error": {"kind": "not-found"}}', call.msgid.encode()]
    with pytest.raises(errors.JobNotFound):
        call.answer(failed)
    assert "within 5.0 s" in str(call.expired())


class FakeClient(_base.BaseClient):
    """A BaseClient whose plans are run by hand on a fake clock."""

    def _setup(self) -> None:
        self.now = 0.0
        self._clock = lambda: self.now
        self._job_type = lambda client, msgid, p: (msgid, p)


def test_the_submit_plan_resends_queue_full_with_backoff_under_the_same_msgid() -> None:
    c = FakeClient("tcp://127.0.0.1:1", queue_full_timeout=1.0)
    plan = c._submit(_base.bulk_task(("pkg.f", (1,))), None, "")
    step: Any = next(plan)
    assert isinstance(step, Send)
    first = step
    msgid = first[3].decode()
    step = next(plan)
    assert isinstance(step, Await) and step.timeout == c.ack_timeout
    c._tracker.handle(Incoming("REJECT", msgid, reason="queue-full"))
    step = plan.send(True)
    assert step == Sleep(0.01)
    c.now += 0.01
    step = plan.send(None)
    assert isinstance(step, Send) and step == first
    step = plan.send(None)
    assert isinstance(step, Await)
    c._tracker.handle(Incoming("REPLY", msgid))
    with pytest.raises(StopIteration) as done:
        plan.send(True)
    assert done.value.value[0] == msgid
    # Silence for ack_timeout is a connection error.
    plan = c._submit(_base.bulk_task("pkg.f"), None, "")
    next(plan)
    next(plan)
    with pytest.raises(errors.EmqConnectionError, match="no answer"):
        plan.send(False)


def ack(c: FakeClient, batch: Any, reject: Any = ()) -> None:
    """The router's answers to the REQUESTs of ``batch``: REPLY, or REJECT
    with the reason ``reject`` gives a msgid."""
    for frames in batch.messages:
        msgid = frames[3].decode()
        reason = reject(msgid) if reject else None
        c._tracker.handle(Incoming("REJECT", msgid, reason=reason) if reason else Incoming("REPLY", msgid))


def test_the_bulk_plan_sends_what_the_window_has_room_for_in_batches() -> None:
    """40 jobs, window 16: a batch of 16, then a wait until 2 are answered
    (the refill), a batch of as many as are free, and so on; then a wait
    for every answer. Jobs go in order, each once."""
    c = FakeClient("tcp://127.0.0.1:1", window=16)
    plan = c._submit_many([_base.bulk_task(("pkg.f", (i,))) for i in range(40)], None, "", None, None, True)
    step: Any = next(plan)
    sizes, sent, waits, msgids = [], [], [], []
    while True:
        if isinstance(step, SendMany):
            sizes.append(len(step.messages))
            sent += [json.loads(f[6])[1]["args"][0] for f in step.messages]
            msgids += [f[3].decode() for f in step.messages]
            batch = step
            step = plan.send(None)
            continue
        assert isinstance(step, Await)
        waits.append(step.timeout)
        ack(c, batch)  # the router answers the last batch
        try:
            step = plan.send(True)
        except StopIteration as done:
            handles = done.value
            break
    assert sent == list(range(40))
    assert sizes[0] == 16 and all(2 <= n <= 16 for n in sizes) and sum(sizes) == 40
    assert waits and all(t == c.ack_timeout for t in waits)
    assert [h[0] for h in handles] == msgids and len(set(msgids)) == 40
    assert all(h[1].accepted for h in handles)


def test_a_bulk_window_with_refusals_answers_every_job() -> None:
    """A router that refuses every third job for good ("malformed") and
    answers queue-full to every fifth once: every job is answered, the
    refused ones raise their Rejected, the queue-full ones went again
    (same frames) and were accepted, and no more than the window was
    ever unanswered."""
    c = FakeClient("tcp://127.0.0.1:1", window=8, queue_full_timeout=5.0)
    items = [_base.bulk_task(("pkg.f", (i,))) for i in range(50)]
    plan = c._submit_many(items, None, "", None, None, False)
    index: dict = {}
    full_once: set = set()

    def reason(msgid: str) -> Any:
        i = index[msgid]
        if i % 3 == 0:
            return "malformed"
        if i % 5 == 0 and msgid not in full_once:
            full_once.add(msgid)
            return "queue-full"
        return None

    outstanding: List[List[bytes]] = []
    sends: List[List[bytes]] = []
    step: Any = next(plan)
    while True:
        if isinstance(step, (SendMany, Send)):
            msgs = step.messages if isinstance(step, SendMany) else [step]
            for frames in msgs:
                index.setdefault(frames[3].decode(), len(index))
            sends += msgs
            outstanding += msgs
            assert len(outstanding) <= 8
            step = plan.send(None)
        elif isinstance(step, Sleep):
            c.now += step.seconds
            step = plan.send(None)
        else:
            assert isinstance(step, Await)
            ack(c, SendMany(outstanding), reason)
            outstanding = []
            try:
                step = plan.send(True)
            except StopIteration as done:
                handles = done.value
                break
    assert len(handles) == 50
    for i, (msgid, p) in enumerate(handles):
        assert index[msgid] == i
        if i % 3 == 0:
            assert isinstance(p.reject, errors.Rejected) and p.reject.reason == "malformed" and not p.accepted
        else:
            assert p.accepted and p.reject is None
    again = sends[50:]
    assert sorted(index[f[3].decode()] for f in again) == [i for i in range(50) if i % 5 == 0 and i % 3]
    first = {f[3]: f for f in sends[:50]}
    assert all(f == first[f[3]] for f in again)  # the same frames, same msgid


def test_a_job_that_cannot_be_built_raises_after_the_ones_before_it_went() -> None:
    c = FakeClient("tcp://127.0.0.1:1")
    items: List[Any] = [("pkg.f", (1,)), ("pkg.f", (2,)), ("pkg.f", (object(),)), ("pkg.f", (4,))]
    plan = c._submit_many(items, None, "", None, None, True)
    step: Any = next(plan)
    assert isinstance(step, SendMany) and len(step.messages) == 2
    with pytest.raises(payload.NotSerializable, match="argument 1 of pkg.f"):
        plan.send(None)


def test_answers_read_from_frames_do_what_parsed_answers_do() -> None:
    """Tracker.handle_frames (REPLY and RESULT without the parse) leaves
    every record and the receipts as wire.parse + Tracker.handle do, for
    the usual answers and odd ones."""
    P = wire.PROTOCOL
    answers = [
        [b"", P, b"REPLY", b"r", b"m0"],
        [b"", P, b"RESULT", b"r", b"m1", b"ok", b'{"value": 1}'],
        [b"", P, b"result", b"r", b"m2", b"failed", b"{}"],  # lower case: parsed
        [b"", P, b"RESULT", b"r", b"m3", b"ok"],  # too short: ignored
        [b"", P, b"REPLY", b"r", b"\xff"],  # not UTF-8: ignored
        [b"", P, b"REJECT", b"r", b"m4", b"malformed", b"no"],
        [b"", P, b"REPLY", b"r", b"m5", b"extra"],  # admin shape: m5 is not the msgid
        [b"x", P, b"REPLY", b"r", b"m6"],  # no envelope: ignored
        [b"", P, b"RESULT", b"r", b"m7", b"ok", b"1", b"more"],
    ]
    fast, slow = _core.Tracker(), _core.Tracker()
    keep = [t.add(f"m{i}", True, [b""]) for t in (fast, slow) for i in range(8)]
    for frames in answers:
        fast.handle_frames(frames)
        msg = wire.parse(frames)
        if msg is not None:
            slow.handle(msg)

    def state(t: _core.Tracker) -> Any:
        recs = [t._jobs.get(f"m{i}") for i in range(8)]
        return [(p.accepted, p.status, p.payload, type(p.reject)) for p in recs if p], t._receipts, t.unanswered

    assert state(fast) == state(slow)
    assert state(fast)[0][1] == (True, "ok", b'{"value": 1}', type(None)) and len(keep) == 16


def test_an_acks_accepts_every_msgid_it_lists() -> None:
    """``ACKS [orig, ...]`` (batched-acks) does what a ``REPLY [orig]`` per
    msgid does: each job accepted and no longer kept to be sent again;
    unknown msgids are ignored."""
    P = wire.PROTOCOL
    acks, replies = _core.Tracker(), _core.Tracker()
    keep = [t.add(f"m{i}", True, [b""]) for t in (acks, replies) for i in range(3)]
    p = acks.handle_frames([b"", P, b"ACKS", b"r", b"m0", b"zz", b"m2"])
    assert p is not None and p.msgid == "m2"
    for m in (b"m0", b"zz", b"m2"):
        replies.handle_frames([b"", P, b"REPLY", b"r", m])

    def state(t: _core.Tracker) -> Any:
        recs = [t._jobs.get(f"m{i}") for i in range(3)]
        return [p.accepted for p in recs if p], t.unanswered

    assert state(acks) == state(replies) == ([True, False, True], state(replies)[1])
    assert len(keep) == 6
    assert wire.headers_frame(reply_requested=True, notices=True, batched_acks=True) == \
        "reply-requested,notices,batched-acks"


def test_the_jobs_of_a_slow_iterable_go_as_they_come() -> None:
    """An iterable that takes a second per item: each job is sent as soon
    as it is built (a SendMany of one), not held back for a full batch."""
    c = FakeClient("tcp://127.0.0.1:1", window=16)

    def slow() -> Any:
        for i in range(3):
            c.now += 1.0
            yield ("pkg.f", (i,))

    plan = c._submit_many(slow(), None, "", None, None, True)
    step: Any = next(plan)
    sizes = []
    while isinstance(step, SendMany):
        sizes.append(len(step.messages))
        step = plan.send(None)
    assert sizes == [1, 1, 1] and isinstance(step, Await)
