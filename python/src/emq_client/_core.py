"""The state both clients share: outstanding jobs and what arrived for them.

No sockets and no clock here. The sync and the asyncio client each feed
:meth:`Tracker.handle` with what their socket received, and read a job's
:class:`Pending` record. The tracker holds records weakly: a record lives as
long as some job handle refers to it, so a client's memory is bounded by the
handles its caller keeps, however many jobs were submitted; answers for jobs
whose handles are gone are dropped on arrival.

It also keeps what the client needs across a lost connection
(docs/PROTOCOL.md, "Results until delivered"): the frames of every REQUEST,
SCHEDULE and UNSCHEDULE not answered yet (held strongly until answered:
bounded by the submit window), sent again with the same msgid after a
reconnect (:meth:`Tracker.link`) — a ``duplicate-msgid`` REJECT for one of
those means the router had it, and counts as accepted; and the msgids of the
RESULTs received, confirmed to the router with RECEIVED
(:meth:`Tracker.take_receipts`). A RESULT that comes twice (sent again after
a reconnect) changes nothing: it names the same job.
"""

from __future__ import annotations

import json
import logging
import weakref
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from . import errors, otel, wire
from .wire import Frames, Incoming

log = logging.getLogger("emq_client")

#: RESULTs confirmed in one RECEIVED at most.
RECEIPT_BATCH = 256


class Pending:
    """One submitted job as the client knows it: acknowledged, refused,
    uncertain (``journal-uncertain``: the router could not tell whether it
    stored the job; it goes again), finished. ``waker`` (the asyncio
    client's) is called on every change."""

    __slots__ = (
        "msgid", "accepted", "reject", "uncertain", "status", "payload", "reply", "waker", "notices",
        "duplicate_of", "__weakref__",
    )

    def __init__(self, msgid: str, reply: bool) -> None:
        self.msgid = msgid
        self.reply = reply
        self.accepted = False
        self.reject: Optional[errors.Rejected] = None
        self.uncertain: Optional[errors.JournalUncertain] = None
        self.status: Optional[str] = None
        self.payload: Optional[bytes] = None
        self.waker: Optional[Callable[[], None]] = None
        #: The router's NOTICEs about the job, ``(kind, text)``, in order
        #: (a tuple: no list made for the many jobs that get none).
        self.notices: Tuple[Tuple[str, str], ...] = ()
        #: The msgid this job was first sent under, when the router answered
        #: it DUPLICATE (``msgid`` is then the existing job's).
        self.duplicate_of: Optional[str] = None

    @property
    def answered(self) -> bool:
        """The router acknowledged, refused, or was unsure about the message."""
        return self.accepted or self.reject is not None or self.uncertain is not None

    @property
    def finished(self) -> bool:
        """A result or a refusal is here: ``outcome`` will not block."""
        return self.reject is not None or self.status is not None

    def settle(self, status: str, payload: bytes) -> None:
        """Its RESULT is here (so it was accepted): record it, wake the
        waiter."""
        self.accepted = True
        self.status = status
        self.payload = payload
        if self.waker is not None:
            self.waker()


class WeakRecords:
    """Records by msgid, held weakly: a plain weak reference per record in a
    dict, the dead ones swept out whenever the dict has doubled since the
    last sweep (so it holds at most about twice the live records plus
    :data:`SWEEP_MIN`, and sweeping costs O(1) per record added, amortised).
    ``weakref.WeakValueDictionary`` does the same with a Python-level
    keyed reference and callback per record; this is cheaper per job, and
    a bulk submit makes one record per job."""

    __slots__ = ("_refs", "_sweep_at")

    #: The fewest entries before a sweep.
    SWEEP_MIN = 1024

    def __init__(self) -> None:
        self._refs: Dict[str, "weakref.ref[Pending]"] = {}
        self._sweep_at = self.SWEEP_MIN

    def get(self, msgid: str) -> Optional[Pending]:
        """The live record of ``msgid``, or None."""
        r = self._refs.get(msgid)
        return None if r is None else r()

    def __setitem__(self, msgid: str, p: Pending) -> None:
        refs = self._refs
        refs[msgid] = weakref.ref(p)
        if len(refs) >= self._sweep_at:
            self._sweep()

    def __contains__(self, msgid: str) -> bool:
        return self.get(msgid) is not None

    def __len__(self) -> int:
        """The live records (sweeps first)."""
        self._sweep()
        return len(self._refs)

    def _sweep(self) -> None:
        self._refs = {k: r for k, r in self._refs.items() if r() is not None}
        self._sweep_at = max(self.SWEEP_MIN, 2 * len(self._refs))


class Tracker:
    """Outstanding jobs by msgid (weakly held), the dispatch of answers, and
    what a reconnect needs (see the module documentation). ``resend``: keep
    unanswered messages (off for a 0.3.13 router, which answers few)."""

    def __init__(self, resend: bool = True) -> None:
        self._jobs = WeakRecords()
        #: Duplicates (DUPLICATE answers) by the existing job's msgid: they
        #: take that job's RESULT too.
        self._dupes: "Dict[str, weakref.WeakSet[Pending]]" = {}
        self.resend = resend
        self._unanswered: Dict[str, Frames] = {}
        self._resent: Set[str] = set()
        self._receipts: List[str] = []
        self._connected = False
        self._lost = False
        self._up: Set[str] = set()
        self._again_at: Optional[float] = None

    def __len__(self) -> int:
        return len(self._jobs)

    def add(self, msgid: str, reply: bool, frames: Optional[Frames] = None) -> Pending:
        """Record a job (or schedule) about to be sent as ``frames``."""
        p = Pending(msgid, reply)
        self._jobs[msgid] = p
        if frames is not None and self.resend:
            self._unanswered[msgid] = frames
        return p

    def again(self, p: Pending, frames: Frames) -> None:
        """``p`` goes again as ``frames`` (same msgid) after a ``queue-full``
        or ``journal-uncertain`` answer: forget that answer, keep the frames
        for a reconnect, and take a ``duplicate-msgid`` answer as accepted
        (the router had stored it)."""
        p.reject = None
        p.uncertain = None
        if self.resend:
            self._unanswered[p.msgid] = frames
            self._resent.add(p.msgid)

    @property
    def unanswered(self) -> int:
        """Messages kept to be sent again after a reconnect."""
        return len(self._unanswered)

    def handle_frames(self, frames: Frames) -> Optional[Pending]:
        """Apply one message as the socket gave it (:func:`wire.parse`, then
        :meth:`handle`). The two answers every job gets skip the parse:
        ``REPLY [orig]`` is :meth:`accepted`, ``RESULT [orig, status,
        payload]`` :meth:`finished` (the frames :func:`wire.parse` reads).
        ``ACKS [orig, ...]`` (asked for with ``batched-acks``) is
        :meth:`accepted` for each msgid; the last record it changed is
        returned."""
        n = len(frames)
        if n >= 5 and frames[0] == b"" and frames[1] == wire.PROTOCOL:
            command = frames[2]
            try:
                if command == b"REPLY" and n == 5:
                    return self.accepted(frames[4].decode())
                if command == b"ACKS":
                    last = None
                    for f in frames[4:]:
                        last = self.accepted(f.decode()) or last
                    return last
                if command == b"RESULT" and n >= 7:
                    return self.finished(frames[4].decode(), frames[5].decode(), frames[6])
            except UnicodeDecodeError:
                return None
        msg = wire.parse(frames)
        return None if msg is None else self.handle(msg)

    def accepted(self, orig: str) -> Optional[Pending]:
        """The router acknowledged ``orig`` (REPLY): it holds the job."""
        self._unanswered.pop(orig, None)
        p = self._jobs.get(orig)
        if p is None:
            return None
        p.accepted = True
        if p.waker is not None:
            p.waker()
        return p

    def finished(self, orig: str, status: str, payload: bytes) -> Optional[Pending]:
        """``orig``'s RESULT: the job is done (and so accepted); its msgid
        goes into the next RECEIVED; duplicates of it (DUPLICATE answers)
        take the same result."""
        self._unanswered.pop(orig, None)
        self._resent.discard(orig)
        self._receipts.append(orig)
        if orig in self._dupes:
            for d in list(self._dupes.pop(orig)):
                if d is not self._jobs.get(orig):
                    d.settle(status, payload)
        p = self._jobs.get(orig)
        if p is None:
            return None
        p.settle(status, payload)
        return p

    def handle(self, msg: Incoming) -> Optional[Pending]:
        """Apply one answer; the record it changed, or None when nobody waits
        for it (unknown msgid, handle dropped, or not a job answer)."""
        if msg.command == "REJECT" and msg.reason == "duplicate-msgid":
            known = self._jobs.get(msg.orig)
            if msg.orig in self._resent or (known is not None and known.accepted):
                # Sent again (after a reconnect, or a journal-uncertain
                # answer): the router had taken it.
                msg = Incoming("REPLY", msg.orig)
        if msg.command == "DUPLICATE":
            return self._duplicate(msg)
        if msg.command == "REPLY":
            return self.accepted(msg.orig)
        if msg.command == "RESULT":
            return self.finished(msg.orig, msg.status, msg.payload)
        if msg.command == "REJECT":
            self._unanswered.pop(msg.orig, None)
            self._resent.discard(msg.orig)
        if msg.command == "NOTICE":
            log.warning("job %s: %s", msg.orig, msg.text)
        p = self._jobs.get(msg.orig)
        if p is None:
            return None
        if msg.command == "NOTICE":
            p.notices += ((msg.reason, msg.text),)
            return p
        if msg.command == "REJECT":
            answer = errors.rejected(msg.orig, msg.reason, msg.text)
            if isinstance(answer, errors.JournalUncertain):
                p.uncertain = answer
            else:
                p.reject = answer
        else:
            return None
        if p.waker is not None:
            p.waker()
        return p

    def _duplicate(self, msg: Incoming) -> Optional[Pending]:
        """``DUPLICATE [orig, existing, text]``: the job ``orig`` is the
        existing job ``existing`` (which holds its unique key): its record
        is acknowledged, takes the existing msgid, and waits for that job's
        RESULT."""
        self._unanswered.pop(msg.orig, None)
        self._resent.discard(msg.orig)
        p = self._jobs.get(msg.orig)
        if p is None:
            return None
        existing = msg.reason
        log.info("job %s is a duplicate of %s: %s", msg.orig, existing, msg.text)
        p.accepted = True
        p.duplicate_of = p.msgid
        p.msgid = existing
        if existing in self._jobs:
            self._dupes.setdefault(existing, weakref.WeakSet()).add(p)
        else:
            self._jobs[existing] = p
        if p.waker is not None:
            p.waker()
        return p

    def take_receipts(self, everything: bool = True) -> Optional[Frames]:
        """The RECEIVED message for the RESULTs read so far (at most
        :data:`RECEIPT_BATCH`; with ``everything`` False only once that many
        wait), or None."""
        if not self._receipts or (not everything and len(self._receipts) < RECEIPT_BATCH):
            return None
        batch, self._receipts = self._receipts[:RECEIPT_BATCH], self._receipts[RECEIPT_BATCH:]
        return wire.received(batch)

    def give_back_receipts(self, frames: Frames) -> None:
        """A RECEIVED that could not be sent: keep its msgids for the next."""
        self._receipts[:0] = [f.decode() for f in frames[4:]]

    def link(self, up: bool, endpoint: str, now: float) -> List[Frames]:
        """A connection to ``endpoint`` came up (``up``) or went down at
        ``now``; what to send now. Once a connection serves after one was
        lost, the hello and every unanswered message go again (in the order
        they were first sent): at once when one comes up after a loss;
        :data:`SETTLE` seconds later (:meth:`poll_timeout`,
        :meth:`handle_timeout`) when one that was up goes down while another
        still is — a failover list whose router froze: what went into its
        connection goes to the router that serves. (libzmq drops the dead
        connection's pipe a moment after it reports the drop; a message
        sent in between could go into that pipe and be lost.)"""
        if up:
            self._up.add(endpoint)
            first, self._connected = not self._connected, True
            if first or not self._lost:
                return []
            return self._send_again()
        was_up = endpoint in self._up
        self._up.discard(endpoint)
        self._lost = True
        if was_up and self._up:
            self._again_at = now + SETTLE
        return []

    def poll_timeout(self) -> Optional[float]:
        """When :meth:`handle_timeout` has something to send, or None."""
        return self._again_at

    def handle_timeout(self, now: float) -> List[Frames]:
        """What to send at ``now``: see :meth:`link`."""
        if self._again_at is None or now < self._again_at:
            return []
        self._again_at = None
        if not self._lost or not self._up:
            return []  # sent already, or nothing serves: the next link up sends
        return self._send_again()

    def _send_again(self) -> List[Frames]:
        self._lost = False
        self._again_at = None
        self._resent.update(self._unanswered)
        return [wire.hello(), *self._unanswered.values()]


#: Seconds between a connection's drop (another still up) and sending
#: again what was not answered (:meth:`Tracker.link`).
SETTLE = 0.2


def decode_result(msgid: str, status: str, payload: bytes) -> Any:
    """A RESULT's value, or the job's failure raised as :class:`JobFailed`.

    ``{"value": v}`` gives v; ``{"error": {...}}`` (or status ``failed``)
    raises. A payload that is not JSON (a 0.3.13 worker's odd reply) is
    returned as text."""
    try:
        body = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        if status == "failed":
            raise errors.job_failed(msgid, {"kind": "unknown", "message": payload.decode("utf-8", "replace")})
        return payload.decode("utf-8", "replace")
    return decode_body(msgid, status, body)


def decode_body(msgid: str, status: str, body: Any) -> Any:
    """As :func:`decode_result`, for a payload already parsed (the admin
    ``job`` view keeps finished jobs' results as JSON)."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        raise errors.job_failed(msgid, body["error"])
    if status == "failed":
        raise errors.job_failed(msgid, {"kind": "unknown", "message": json.dumps(body)})
    if isinstance(body, dict) and "value" in body:
        return body["value"]
    return body


def outcome(p: Pending) -> Any:
    """The finished record's value, or raise its refusal or failure."""
    if p.reject is not None:
        raise p.reject
    assert p.status is not None and p.payload is not None
    return decode_result(p.msgid, p.status, p.payload)


#: The control-plane ops the client's own methods send (``result``,
#: ``status``, ``cancel``), with their arguments (tests/test_vocabulary.py
#: checks them against ``emq-cli vocabulary``). ``Client.admin`` sends any.
ADMIN_OPS: Dict[str, Tuple[str, ...]] = {
    "job": ("msgid",),
    "cancel": ("msgid",),
    "limits-set": ("queue", "concurrency", "concurrency_per_key", "rate", "rate_per_key", "fair"),
    "limits-show": ("queue",),
    "limits-clear": ("queue",),
    "batch": ("id",),
}


def admin_answer(op: str, payload: bytes) -> Dict[str, Any]:
    """An admin answer as a dict, or its error raised as :class:`AdminError`."""
    try:
        answer = json.loads(payload)
    except ValueError as e:
        raise errors.ProtocolError(f"admin {op}: answer is not JSON: {e}") from None
    if not isinstance(answer, dict):
        raise errors.ProtocolError(f"admin {op}: answer is not an object")
    if answer.get("ok") is not True:
        err = answer.get("error") or {}
        raise errors.admin_error(op, str(err.get("kind", "unknown")), str(err.get("message", "")))
    return answer


#: Job states after which nothing changes (docs/PROTOCOL.md, "Jobs").
#: A job's final states, and a workflow's (``succeeded``: the router's
#: ``WorkflowState``, docs/PROTOCOL.md "Workflows").
FINAL_STATES = frozenset({"done", "succeeded", "failed", "cancelled", "dead-lettered"})


def finished_view_outcome(msgid: str, view: Mapping[str, Any]) -> Tuple[bool, Any]:
    """For a job known only through the admin ``job`` view: ``(False, None)``
    while it is unfinished, else ``(True, value)`` or the failure raised."""
    state = str(view.get("state", ""))
    if state not in FINAL_STATES:
        return False, None
    if view.get("result_truncated"):
        raise errors.EmqError(f"job {msgid} finished ({state}) but its result was too large for the router to keep")
    result = view.get("result")
    if state in ("done", "succeeded"):
        return True, decode_body(msgid, "ok", result)
    if isinstance(result, dict) and isinstance(result.get("error"), dict):
        raise errors.job_failed(msgid, result["error"])
    last = view.get("last_error")
    if isinstance(last, dict):
        raise errors.job_failed(msgid, last)
    kind = state if state != "failed" else "unknown"
    raise errors.job_failed(msgid, {"kind": kind, "message": f"job {state}" + (f": {last}" if last else "")})


def status_of(view: Mapping[str, Any]) -> "JobStatus":
    """The typed summary of an admin job view."""
    return JobStatus(
        msgid=str(view.get("msgid", "")),
        state=str(view.get("state", "")),
        queue=str(view.get("queue", "")),
        attempts=int(view.get("attempts") or 0),
        view=dict(view),
    )


def job_progress_of(answer: Mapping[str, Any]) -> Optional["JobProgress"]:
    """The progress in an admin ``job`` answer."""
    return progress_of(answer.get("job") or {})


class JobProgress:
    """A running job's last reported progress (``emq_job.progress`` in the
    job): ``percent`` 0-100, ``message`` ("" for none) and ``at`` (unix
    seconds when the router took it)."""

    __slots__ = ("percent", "message", "at")

    def __init__(self, percent: int, message: str, at: float) -> None:
        self.percent = percent
        self.message = message
        self.at = at

    def __repr__(self) -> str:
        return f"JobProgress(percent={self.percent}, message={self.message!r})"


def progress_of(view: Mapping[str, Any]) -> Optional[JobProgress]:
    """The ``progress`` of an admin job view: None when the job reported
    none (or is not running)."""
    p = view.get("progress")
    if not isinstance(p, Mapping):
        return None
    return JobProgress(
        percent=int(p.get("percent") or 0),
        message=str(p.get("message") or ""),
        at=float(p.get("at_ms") or 0) / 1000.0,
    )


class JobStatus:
    """A job's state as the router reports it: ``state`` is one of
    ``delayed``, ``queued``, ``in-flight``, ``cancelling``, ``retrying``,
    ``done``, ``failed``, ``cancelled``, ``dead-lettered``; for a workflow
    (the handle of ``submit(chain(...))``, ``view["kind"] == "workflow"``)
    one of ``pending``, ``running``, ``cancelling``, ``succeeded``,
    ``failed``, ``cancelled``. ``view`` is the router's whole view (times,
    worker, last error, result; a workflow's ``node_states`` counts)."""

    __slots__ = ("msgid", "state", "queue", "attempts", "view")

    def __init__(self, msgid: str, state: str, queue: str, attempts: int, view: Dict[str, Any]) -> None:
        self.msgid = msgid
        self.state = state
        self.queue = queue
        self.attempts = attempts
        self.view = view

    @property
    def finished(self) -> bool:
        """The job is done, failed, cancelled or dead-lettered."""
        return self.state in FINAL_STATES

    def __repr__(self) -> str:
        return f"JobStatus(msgid={self.msgid!r}, state={self.state!r}, queue={self.queue!r}, attempts={self.attempts})"


#: ``queue-full`` backpressure: the first wait before a refused job is
#: sent again, doubling up to :data:`FULL_BACKOFF_MAX` (as ``emq-sender``).
FULL_BACKOFF_FIRST = 0.01
FULL_BACKOFF_MAX = 1.0


def full_backoff(attempt: int) -> float:
    """The wait before try ``attempt + 1`` of a job refused ``queue-full``
    ``attempt`` times (1, 2, ...): 10 ms doubling to 1 s."""
    return min(FULL_BACKOFF_MAX, FULL_BACKOFF_FIRST * float(2 ** max(0, attempt - 1)))


def wants_resend(p: Pending) -> bool:
    """The job goes again under its msgid: its queue was full, or the
    router could not tell whether it stored it."""
    return p.uncertain is not None or isinstance(p.reject, errors.QueueFull)


def drain_list(items: List[Pending], finished: bool = False) -> int:
    """Drop answered (with ``finished``: finished) records from the front of
    a send-ordered list; how many are left (the pipelining window)."""
    i = 0
    if finished:
        while i < len(items) and items[i].finished:
            i += 1
    else:
        while i < len(items) and items[i].answered:
            i += 1
    del items[:i]
    return len(items)


def submit_headers(
    legacy: bool,
    retries: int,
    timeout: float,
    delay: Optional[float],
    headers: Iterable[str],
    unique: Iterable[str] = (),
    key: Optional[str] = None,
    priority: Optional[int] = None,
) -> str:
    """The HEADERS frame of a submit: an emq client asks for the result and
    its receipt; a ``legacy`` one (0.3.13's router) cannot delay nor make
    jobs unique (``unique``: :func:`wire.unique_headers`). ``key`` and
    ``priority``: flow control (``key:K``, ``priority:N``; a 0.3.13 router
    ignores them). The current OpenTelemetry span goes along as
    ``traceparent`` when ``opentelemetry`` is installed
    (:mod:`emq_client.otel`)."""
    if legacy and delay is not None:
        raise errors.Unsupported("delay needs an emq router (0.3.13 has no delay header)")
    unique = list(unique)
    if legacy and unique:
        raise errors.Unsupported("unique jobs need an emq router (0.3.13 has no unique-key header)")
    headers = list(headers) + unique
    return wire.headers_frame(
        reply_requested=not legacy,
        receipt=not legacy,
        notices=not legacy,
        batched_acks=not legacy,
        retries=retries,
        timeout=timeout,
        delay=delay,
        key=key,
        priority=priority,
        extra=otel.with_traceparent(headers),
    )


def rate_text(rate: Any) -> str:
    """A rate for ``limits-set``: ``"N/SECS"``, ``(N, SECS)``, or ``None``
    / ``"none"`` to remove the limit (sent as ``"none"``)."""
    if rate is None or rate == "none":
        return "none"
    if isinstance(rate, str):
        return rate
    if isinstance(rate, (tuple, list)) and len(rate) == 2:
        n, secs = rate
        return f"{int(n)}/{secs:g}" if isinstance(secs, float) else f"{int(n)}/{secs}"
    raise ValueError(f"bad rate {rate!r}: 'N/SECS' or (N, SECS)")


_UNSET: Any = object()


def limits_args(
    queue: str,
    concurrency: Any = _UNSET,
    concurrency_per_key: Any = _UNSET,
    rate: Any = _UNSET,
    rate_per_key: Any = _UNSET,
    fair: Any = _UNSET,
) -> Dict[str, Any]:
    """The arguments of ``limits-set``: only the fields given change (a
    concurrency of ``None`` or 0 and a rate of ``None`` remove that limit)."""
    args: Dict[str, Any] = {"queue": queue}
    for name, value in (("concurrency", concurrency), ("concurrency_per_key", concurrency_per_key)):
        if value is not _UNSET:
            args[name] = 0 if value is None else int(value)
    for name, value in (("rate", rate), ("rate_per_key", rate_per_key)):
        if value is not _UNSET:
            args[name] = rate_text(value)
    if fair is not _UNSET:
        args["fair"] = bool(fair)
    if len(args) == 1:
        raise ValueError("set_limits: give concurrency, concurrency_per_key, rate, rate_per_key or fair")
    return args


def no_answer(addr: str, ack_timeout: float, what: str) -> Exception:
    """The error when the router at ``addr`` did not answer ``what`` in
    time."""
    return errors.EmqConnectionError(f"no answer from the router at {addr} to {what} within {ack_timeout} s")
