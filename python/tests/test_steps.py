"""The client's decisions without sockets or a clock (emq_client._core and
_base): the tracker's resend rules across connection changes, and the step
objects (Backoff, Window, Probe, AdminCall) and plans on given times."""

from __future__ import annotations

import json
from typing import Any, List

import pytest

from emq_client import _base, _core, errors, wire
from emq_client._base import READ, Await, Send, Sleep
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


def test_window_waits_when_full_and_probe_halves_and_doubles() -> None:
    w = _base.Window(limit=2, max_unfinished=3)
    ps = [_core.Pending(f"m{i}", True) for i in range(3)]
    assert w.sent(ps[0]) == []
    assert w.sent(ps[1]) == [(w.unanswered, 1, False)]
    assert w.sent(ps[2]) == [(w.unanswered, 1, False), (w.unfinished, 2, True)]
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


def test_the_bulk_plan_reads_every_32_sends() -> None:
    c = FakeClient("tcp://127.0.0.1:1", legacy=False)
    steps = []
    plan = c._submit_many([_base.bulk_task("pkg.f")] * 40, None, "", None, None, True)
    step: Any = next(plan)
    while isinstance(step, (Send, type(READ))):
        steps.append(step)
        step = plan.send(None)
    assert [i for i, s in enumerate(steps) if s is READ] == [32]
    assert isinstance(step, Await)  # then waits for every acknowledgement
