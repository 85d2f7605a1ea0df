"""Everything a client decides, written once for :class:`~emq_client.Client`
and :class:`~emq_client.AsyncClient` (the shape of httpx's
``BaseClient``/``Client``/``AsyncClient``): no socket, no sleep, no event
loop here.

A client call is a *plan*: a generator that yields steps and receives each
step's outcome. The blocking driver (:mod:`emq_client.client`) and the
asyncio driver (:mod:`emq_client.aio`) run plans and do only the I/O a step
names:

- a list of frames (:data:`Send`, the step every job takes, so the
  frames themselves): send it on the frontend (outcome None);
- :class:`SendMany` messages: send them in order, then apply what has
  arrived (outcome None) — ``submit_many``'s step, one per window's worth;
- :class:`Await` until ``cond()`` holds, reading answers, for up to
  ``timeout`` seconds (outcome: whether it holds); ``pending`` names the one
  job waited for (the asyncio driver wakes on that job's changes only);
- :class:`Sleep` (outcome None);
- :class:`Admin`: one control-plane call (outcome: the answer object).

A driver subclasses :class:`BaseClient`: ``_setup()`` sets its job handle
class (``_job_type``) and its sockets (or defers them), ``_run(plan)`` runs
a plan, and each public method is ``self._run(self._<method>(...))``.

The rules the plans follow:

- **Submit.** Every message waits ``ack_timeout`` for its answer (silence:
  :class:`EmqConnectionError`). ``queue-full`` (the router kept nothing)
  and ``journal-uncertain`` (it cannot tell whether it stored the job) are
  not final: the same frames, same msgid, go again after 10 ms, doubling to
  1 s (:class:`Backoff`), for up to ``queue_full_timeout`` seconds
  (``journal-uncertain``: at least ``ack_timeout``); the router takes a
  msgid it already holds as the same job (``duplicate-msgid`` then counts
  as accepted, :class:`~emq_client._core.Tracker`). A client is never told
  "refused" about a job that may run: an uncertain job whose time ran out
  raises :class:`~emq_client.errors.JournalUncertain`, not a ``Rejected``.
- **Bulk window** (:class:`Window`): ``submit_many`` keeps at most
  ``window`` jobs unanswered (and with ``max_unfinished`` that many
  unfinished). It sends as many jobs as the windows have room for in one
  :class:`SendMany` step (at most :data:`SEND_MANY_MAX`, and what the
  items gave within :data:`SEND_MANY_LINGER`); a full window
  waits until an eighth of it is free (many answers or results per
  wake-up, not one), and ``ack_timeout`` without making room while some
  job is unanswered is a connection error.
- **Bulk resends** (:class:`Probe`): jobs answered ``queue-full`` or
  ``journal-uncertain`` go again after the rest, one at first, twice as
  many after a batch all accepted (never more than the call's window),
  half as many (after a backoff pause) when some were refused again.
- **Admin calls** (:class:`AdminCall`): one request, the answer with its
  msgid, or a connection error after ``admin_timeout``; a job known only
  by msgid gets its result by polling the admin ``job`` view, 20 ms
  doubling to 1 s apart.
- **Fork.** A client remembers the process that made its sockets; used in
  a child after ``os.fork()`` it starts over with fresh sockets on a fresh
  zmq context and an empty tracker (the parent's sockets are left alone:
  libzmq's state is not usable in the child, and closing it there would
  touch the parent's connections).
"""

from __future__ import annotations

import itertools
import json
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Generator, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _core, batch, canvas, curve, errors, link, payload, settings, wire
from ._core import Pending
from .payload import Task
from .wire import Frames

if TYPE_CHECKING:
    import zmq

#: What ``submit_many`` takes per job: a Task, a callable or dotted path
#: (called with no arguments), or ``(spec, args)`` / ``(spec, args, kwargs)``.
BulkItem = Union[Task, str, Callable[..., Any], Tuple[Any, ...]]


# -- steps -------------------------------------------------------------------


class Await(NamedTuple):
    """Read answers until ``cond()`` or ``timeout`` seconds (None: no limit);
    the outcome is whether ``cond()`` holds."""

    cond: Callable[[], bool]
    timeout: Optional[float]
    pending: Optional[Pending] = None


class Sleep(NamedTuple):
    """Wait ``seconds`` (reading nothing)."""

    seconds: float


class Admin(NamedTuple):
    """One admin call; the outcome is its answer object."""

    op: str
    args: Dict[str, Any]


def own_admin(op: str, **args: Any) -> Admin:
    """An admin step of the client's own methods: one of
    :data:`_core.ADMIN_OPS` with its arguments (else a bug: ``ValueError``)."""
    known = _core.ADMIN_OPS.get(op)
    if known is None or not set(args) <= set(known):
        raise ValueError(f"admin {op!r} with {sorted(args)}: not in ADMIN_OPS {_core.ADMIN_OPS}")
    return Admin(op, args)


#: A send step is the message's frames themselves (no wrapper per job).
Send = list


class SendMany(NamedTuple):
    """Send these messages in order, then apply what has arrived (a bulk
    submit's step; not :class:`emq_client.Batch`, the router's batches)."""

    messages: List[Frames]


#: The most messages in one :class:`SendMany` (the driver reads answers
#: between them).
SEND_MANY_MAX = 256
#: Seconds a :class:`SendMany` is built at most before it goes: the jobs of
#: an iterable that yields slowly are sent as they come, not held back.
SEND_MANY_LINGER = 0.002

Step = Union[Frames, SendMany, Await, Sleep, Admin]
Plan = Generator[Step, Any, Any]


# -- step objects ------------------------------------------------------------


class Backoff:
    """When a job answered ``queue-full`` or ``journal-uncertain`` goes
    again: 10 ms doubling to 1 s (:func:`~emq_client._core.full_backoff`),
    until ``full_for`` seconds after ``now`` (``uncertain_for`` for an
    uncertain answer). Time is given, never read."""

    def __init__(self, now: float, full_for: float, uncertain_for: float) -> None:
        self.full_until = now + full_for
        self.uncertain_until = now + uncertain_for
        self.tries = 0

    def pause(self, p: Pending, now: float) -> Optional[float]:
        """The wait before ``p`` goes again, or None: its answer stands
        (accepted, refused for good, or its time is spent)."""
        if not _core.wants_resend(p):
            return None
        self.tries += 1
        pause = _core.full_backoff(self.tries)
        until = self.uncertain_until if p.uncertain is not None else self.full_until
        if now + pause >= until:
            return None
        return pause


class Window:
    """The bulk window: jobs sent and not answered (at most ``limit``), and
    with ``max_unfinished`` jobs sent and not finished (at most that many).
    A full window waits until an eighth of it is free (``refill``,
    ``refill_unfinished``), so that one wake-up brings many answers and the
    next send is as many jobs."""

    def __init__(self, limit: int, max_unfinished: Optional[int]) -> None:
        self.limit = limit
        self.max_unfinished = max_unfinished or 0
        self.refill = max(1, limit // 8)
        self.refill_unfinished = max(1, self.max_unfinished // 8)
        self.unanswered: List[Pending] = []
        self.unfinished: List[Pending] = []

    def room(self) -> int:
        """How many jobs may be sent now (answered, and finished, jobs leave
        the front of the window)."""
        room = self.limit - _core.drain_list(self.unanswered)
        if self.max_unfinished:
            room = min(room, self.max_unfinished - _core.drain_list(self.unfinished, True))
        return room

    def sent(self, p: Pending) -> None:
        """Count ``p`` in."""
        self.unanswered.append(p)
        if self.max_unfinished:
            self.unfinished.append(p)

    def waits(self) -> List[Tuple[List[Pending], int, bool]]:
        """The waits due before the next send: ``(jobs, room, finished)``
        each (wait until at most ``room`` of ``jobs`` are unanswered, or
        with ``finished`` unfinished)."""
        waits = []
        if len(self.unanswered) >= self.limit:
            waits.append((self.unanswered, self.limit - self.refill, False))
        if self.max_unfinished and len(self.unfinished) >= self.max_unfinished:
            waits.append((self.unfinished, self.max_unfinished - self.refill_unfinished, True))
        return waits


class Probe:
    """Bulk resends: the jobs answered ``queue-full`` or
    ``journal-uncertain``, ``size`` at a time (1 at first; doubled up to
    ``window`` after a batch all accepted, halved after a refusal, which
    also lengthens the pause)."""

    def __init__(self, waiting: List[Tuple[Pending, Frames]], window: int) -> None:
        self.waiting = waiting
        self.window = window
        self.size = 1
        self.pauses = 0

    def pause(self) -> float:
        """The wait before the next batch."""
        return _core.full_backoff(self.pauses + 1) if self.pauses else _core.FULL_BACKOFF_FIRST

    def batch(self) -> List[Tuple[Pending, Frames]]:
        """The next jobs to send again."""
        batch, self.waiting = self.waiting[: self.size], self.waiting[self.size:]
        return batch

    def settled(self, batch: List[Tuple[Pending, Frames]]) -> None:
        """The batch is answered: the ones to go again return to the front."""
        again = [(p, f) for p, f in batch if _core.wants_resend(p)]
        if again:
            self.size, self.pauses = max(1, self.size // 2), self.pauses + 1
        else:
            self.size, self.pauses = min(self.size * 2, self.window), 0
        self.waiting = again + self.waiting


class AdminCall:
    """One admin request: its frames, and the answer among what arrives."""

    def __init__(self, op: str, args: Dict[str, Any], addr: str, timeout: float) -> None:
        self.op = op
        self.addr = addr
        self.timeout = timeout
        self.msgid = wire.new_msgid("admin:")
        self.frames = wire.admin(self.msgid, {"op": op, **args})

    def answer(self, frames: Sequence[bytes]) -> Optional[Dict[str, Any]]:
        """The answer object if ``frames`` are ours (or its error raised),
        else None (an answer to an earlier call that timed out)."""
        msg = wire.parse(frames)
        if msg is not None and msg.command == "REPLY" and msg.orig == self.msgid:
            return _core.admin_answer(self.op, msg.payload)
        return None

    def expired(self) -> errors.EmqConnectionError:
        """The error when no answer came within the timeout."""
        return errors.EmqConnectionError(
            f"no answer from the admin socket {self.addr} to {self.op!r} within {self.timeout} s"
        )


# -- the client --------------------------------------------------------------


def earliest(*times: Optional[float]) -> Optional[float]:
    """The earliest of the given times (None: no time)."""
    given = [t for t in times if t is not None]
    return min(given) if given else None


def bulk_task(item: BulkItem) -> Task:
    """The Task for one ``submit_many`` item."""
    if isinstance(item, tuple):
        if not 1 <= len(item) <= 3:
            raise TypeError("a submit_many tuple is (spec, args) or (spec, args, kwargs)")
        spec = item[0]
        args = tuple(item[1]) if len(item) > 1 else ()
        kwargs = dict(item[2]) if len(item) > 2 else {}
        return payload.build(spec, args, kwargs)
    return payload.build(item, (), {})


def default_frontend() -> str:
    """The broker from the settings (:mod:`emq_client.settings`:
    ``$EMQ_BROKER_ADDR``, ``$EVENTMQ_FRONTEND_ADDR``, the INI file), else
    the default."""
    return settings.broker_addr()[0]


def default_admin(broker: Optional[str] = None) -> str:
    """The admin socket from the settings (``$EMQ_ADMIN_ADDR``,
    ``$EVENTMQ_ADMINISTRATIVE_ADDR``, the INI file), else derived from
    ``broker`` (default: the settings' broker)."""
    return settings.admin_addr(broker)[0]


class BaseClient:
    """Options, the tracker of outstanding jobs, and the plans of every
    call (see the module documentation). The options are documented on
    :class:`~emq_client.Client`; ``context`` is the driver's zmq context."""

    #: The job handle class of the driver (``Job``, ``AsyncJob``).
    _job_type: Callable[[Any, str, Optional[Pending]], Any]

    def __init__(
        self,
        addr: Optional[str] = None,
        *,
        admin_addr: Optional[str] = None,
        queue: str = wire.DEFAULT_QUEUE,
        ack_timeout: float = 10.0,
        admin_timeout: float = 5.0,
        window: int = 1000,
        legacy: bool = False,
        linger: float = 1.0,
        context: "Optional[zmq.Context[Any]]" = None,
        queue_full_timeout: float = 30.0,
        curve_server_key: Optional[curve.PathLike] = None,
        curve_secret_key_file: Optional[curve.PathLike] = None,
        max_message_size: Optional[int] = wire.DEFAULT_MAX_MESSAGE_SIZE,
    ) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        if queue_full_timeout < 0:
            raise ValueError("queue_full_timeout must be >= 0")
        self.queue_full_timeout = float(queue_full_timeout)
        self.max_message_size = max_message_size if max_message_size and max_message_size > 0 else None
        self._curve = curve.curve_keys(curve_server_key, curve_secret_key_file)
        conf = settings.load() if not (addr and admin_addr) else None
        self.addr = addr or settings.broker_addr(conf)[0]
        self.admin_addr = admin_addr or settings.admin_addr(self.addr, conf)[0]
        try:
            self._addrs = link.parse_endpoints(self.addr, "addr")
            self._admin_addrs = link.parse_endpoints(self.admin_addr, "admin_addr")
        except ValueError as e:
            raise errors.EmqConnectionError(f"cannot connect: {e}") from None
        self.queue = queue
        self.ack_timeout = float(ack_timeout)
        self.admin_timeout = float(admin_timeout)
        self.window = window
        self.legacy = legacy
        self._linger_ms = int(linger * 1000)
        self._context: "Optional[zmq.Context[Any]]" = context
        self._pid = os.getpid()
        self._tracker = _core.Tracker(resend=not legacy)
        self._closed = False
        self._clock: Callable[[], float] = time.monotonic
        self._setup()

    def _setup(self) -> None:
        """The driver's part of ``__init__`` (its sockets, or nothing yet)."""

    # -- fork ---------------------------------------------------------------

    def _forked(self) -> bool:
        """This process is a child forked after the sockets were made: they
        are the parent's (module documentation, "Fork")."""
        if self._pid == os.getpid():
            return False
        self._pid = os.getpid()
        self._context = None  # the parent's; a fresh one is made
        self._tracker = _core.Tracker(resend=not self.legacy)
        return True

    # -- plans ----------------------------------------------------------------

    def _headers(
        self,
        retries: int,
        timeout: float,
        delay: Optional[float],
        headers: Iterable[str],
        unique: Iterable[str] = (),
        key: Optional[str] = None,
        priority: Optional[int] = None,
    ) -> str:
        return _core.submit_headers(self.legacy, retries, timeout, delay, headers, unique, key, priority)

    def _record(self, task: Task, queue: Optional[str], headers: str) -> Tuple[Pending, Frames]:
        """A REQUEST for ``task``, recorded and ready to send."""
        msgid = wire.new_msgid()
        frames = wire.request(msgid, queue or self.queue, headers, task.message)
        self._check_size(msgid, "job", frames)
        return self._tracker.add(msgid, reply=not self.legacy, frames=frames), frames

    def _check_size(self, msgid: str, what: str, frames: Frames) -> None:
        """Raise :class:`~emq_client.errors.MessageTooLarge` when a frame is
        over ``max_message_size`` (nothing is sent then)."""
        limit = self.max_message_size
        if limit is None:
            return
        size = max(map(len, frames))
        if size > limit:
            raise errors.MessageTooLarge(msgid, what, size, limit)

    def _until_answered(self, p: Pending, frames: Frames, what: str) -> Plan:
        """Wait for ``p``'s answer, sending it again while it is
        ``queue-full`` or ``journal-uncertain`` (:class:`Backoff`)."""
        backoff = Backoff(self._clock(), self.queue_full_timeout, max(self.queue_full_timeout, self.ack_timeout))
        while True:
            if not (yield Await(lambda: p.answered, self.ack_timeout, p)):
                raise _core.no_answer(self.addr, self.ack_timeout, what)
            pause = backoff.pause(p, self._clock())
            if pause is None:
                break
            yield Sleep(pause)
            self._tracker.again(p, frames)
            yield frames
        if p.reject is not None:
            raise p.reject
        if p.uncertain is not None:
            raise p.uncertain

    def _submit(self, task: Task, queue: Optional[str], headers: str) -> Plan:
        """``submit``: send, wait for the acknowledgement; the job handle."""
        p, frames = self._record(task, queue, headers)
        yield frames
        if not self.legacy:
            yield from self._until_answered(p, frames, f"job {p.msgid}")
        return self._job_type(self, p.msgid, p)

    def _maybe_workflow(
        self,
        func: Any,
        args: Sequence[Any],
        kwargs: Dict[str, Any],
        queue: Optional[str],
        retries: Optional[int],
        timeout: Optional[float],
        delay: Optional[float],
        headers: Optional[Sequence[str]],
        unique_key: Optional[str],
        key: Optional[str] = None,
        priority: Optional[int] = None,
    ) -> Optional[Plan]:
        """The plan of ``submit(chain(...))`` (a workflow), or None for a job.
        ``queue``, ``retries``, ``timeout``, ``headers``, ``key`` and
        ``priority`` are every node's, unless a node has its own
        (``task(...).options(...)``)."""
        if not isinstance(func, canvas.Canvas):
            return None
        if args or kwargs:
            raise TypeError("a workflow takes no further arguments: give them to its tasks")
        if delay is not None or unique_key is not None:
            raise TypeError("delay and unique_key are job options, not workflow ones")
        defaults = dict(retries=retries, timeout=timeout, headers=headers, key=key, priority=priority)
        return self._submit_workflow(func, queue, defaults)

    def _submit_workflow(self, flow: "canvas.Canvas", queue: Optional[str], defaults: Dict[str, Any]) -> Plan:
        """``submit(chain(...))``: one ``WORKFLOW``, acknowledged whole; the
        handle's result is the workflow's."""
        if self.legacy:
            raise errors.Unsupported("workflows need an emq router (0.3.13 has no WORKFLOW)")
        spec = json.dumps(flow.spec(queue or self.queue, **defaults)).encode("utf-8")
        msgid = wire.new_msgid()
        frames = wire.workflow(msgid, spec)
        self._check_size(msgid, "workflow", frames)
        p = self._tracker.add(msgid, reply=True, frames=frames)
        yield frames
        yield from self._until_answered(p, frames, f"workflow {msgid}")
        return self._job_type(self, p.msgid, p)

    def _batch_open(
        self,
        batch_id: Optional[str],
        on_success: Optional[Task],
        on_complete: Optional[Task],
        description: str,
        queue: Optional[str],
    ) -> Tuple[str, Plan]:
        """``client.batch(...)``: the batch id and the plan that opens it
        (one ``BATCH open``, acknowledged once journaled)."""
        if self.legacy:
            raise errors.Unsupported("batches need an emq router (0.3.13 has no BATCH)")
        bid = batch.check_id(batch_id) if batch_id is not None else wire.new_msgid()
        spec = batch.open_spec(on_success, on_complete, description, queue or self.queue)
        return bid, self._batch_send(bid, spec, "open")

    def _batch_send(self, batch_id: str, spec: bytes, what: str) -> Plan:
        """One ``BATCH`` (open or close) until acknowledged; refusals raise."""
        if self.legacy:
            raise errors.Unsupported("batches need an emq router (0.3.13 has no BATCH)")
        frames = wire.batch(batch_id, spec)
        self._check_size(batch_id, "batch", frames)
        p = self._tracker.add(batch_id, reply=False, frames=frames)
        yield frames
        yield from self._until_answered(p, frames, f"batch {batch_id} {what}")
        return None

    def _batch_status(self, batch_id: str) -> Plan:
        answer = yield own_admin("batch", id=batch_id)
        return batch.BatchStatus(answer.get("batch") or {})

    def _batch_wait(self, batch_id: str, timeout: Optional[float]) -> Plan:
        """``b.wait()``: poll the batch's view until it is finished (its
        callbacks submitted); its last status."""
        deadline = None if timeout is None else self._clock() + timeout
        pause = 0.02
        while True:
            st = yield from self._batch_status(batch_id)
            if st.finished:
                return st
            now = self._clock()
            if deadline is not None and now >= deadline:
                raise errors.ResultTimeout(batch_id, timeout)
            yield Sleep(pause if deadline is None else min(pause, deadline - now))
            pause = min(pause * 2, 1.0)

    def _submit_many(
        self,
        items: Iterable[BulkItem],
        queue: Optional[str],
        headers: str,
        window: Optional[int],
        max_unfinished: Optional[int],
        raise_on_reject: bool,
    ) -> Plan:
        """``submit_many``: pipelined through a :class:`Window` in
        :class:`SendMany` steps, then the jobs to send again through a
        :class:`Probe`; the handles. A job that cannot be built (its
        arguments, its size) raises once the jobs before it were sent."""
        win = Window(window or self.window, max_unfinished)
        sent: List[Tuple[Pending, Frames]] = []
        todo = iter(items)
        record, legacy, clock = self._record, self.legacy, self._clock
        while True:
            room = SEND_MANY_MAX if legacy else min(SEND_MANY_MAX, win.room())
            out: List[Frames] = []
            until = clock() + SEND_MANY_LINGER
            try:
                for item in itertools.islice(todo, room):
                    p, frames = record(bulk_task(item), queue, headers)
                    out.append(frames)
                    sent.append((p, frames))
                    win.sent(p)
                    if clock() >= until:
                        break
            except Exception:
                if out:
                    yield SendMany(out)
                raise
            if not out:
                break
            yield SendMany(out)
            if not legacy:
                for jobs, left, finished in win.waits():
                    yield from self._make_room(jobs, left, finished)
        handles = [self._job_type(self, p.msgid, p) for p, _ in sent]
        if self.legacy:
            return handles
        yield from self._make_room(win.unanswered, 0, False)
        yield from self._resend(sent, win.limit)
        refused = [p.reject for p, _ in sent if p.reject is not None]
        if refused and raise_on_reject:
            raise errors.BulkRejected(handles, refused)
        uncertain = [p.uncertain for p, _ in sent if p.uncertain is not None]
        if uncertain:
            uncertain[0].jobs = handles
            raise uncertain[0]
        return handles

    def _make_room(self, jobs: List[Pending], room: int, finished: bool) -> Plan:
        """Read answers until at most ``room`` of ``jobs`` are unanswered
        (``finished``: unfinished); accepted jobs may run as long as they
        take, an unanswered one waits ``ack_timeout`` at most."""
        while _core.drain_list(jobs, finished) > room:
            made = yield Await(lambda: _core.drain_list(jobs, finished) <= room, self.ack_timeout)
            if not made and not all(p.answered for p in jobs):
                raise _core.no_answer(self.addr, self.ack_timeout, f"{len(jobs)} jobs")

    def _resend(self, sent: List[Tuple[Pending, Frames]], window: int) -> Plan:
        """Send the jobs answered ``queue-full`` or ``journal-uncertain``
        again (:class:`Probe`, at most ``window`` at a time) until accepted
        or their time is spent."""
        now = self._clock()
        full_until = now + self.queue_full_timeout
        uncertain_until = now + max(self.queue_full_timeout, self.ack_timeout)
        probe = Probe([(p, f) for p, f in sent if _core.wants_resend(p)], window)
        while probe.waiting:
            pause = probe.pause()
            until = uncertain_until if any(p.uncertain is not None for p, _ in probe.waiting) else full_until
            if self._clock() + pause >= until:
                return
            yield Sleep(pause)
            batch = probe.batch()
            for p, frames in batch:
                self._tracker.again(p, frames)
                yield frames
            yield from self._make_room([p for p, _ in batch], 0, False)
            probe.settled(batch)

    def _schedule(
        self,
        task: Task,
        interval: Optional[float],
        cron: Optional[str],
        queue: Optional[str],
        headers: Sequence[str],
        unschedule: bool,
    ) -> Plan:
        """SCHEDULE or UNSCHEDULE, waiting for its answer (emq only)."""
        if not unschedule and (interval is None) == (cron is None):
            raise ValueError("give either interval or cron")
        msgid = wire.new_msgid()
        frames = wire.schedule(
            msgid, queue or self.queue, ",".join(headers), task.message,
            interval_secs=interval, cron=cron, unschedule=unschedule,
        )
        self._check_size(msgid, "schedule", frames)
        p = self._tracker.add(msgid, reply=False, frames=frames)
        yield frames
        if not self.legacy:
            yield from self._until_answered(p, frames, f"schedule {msgid}")
        return msgid

    def _send_raw(self, command: str, body: Sequence[bytes]) -> Plan:
        """``[command, msgid, *body]`` with a fresh msgid, unanswered."""
        msgid = wire.new_msgid()
        yield [b"", wire.PROTOCOL, command.encode(), msgid.encode(), *body]
        return msgid

    def _admin_call(self, op: str, args: Dict[str, Any]) -> AdminCall:
        if self.legacy:
            raise errors.Unsupported(f"admin op {op!r} needs an emq router")
        return AdminCall(op, args, self.admin_addr, self.admin_timeout)

    def _result(self, msgid: str, p: Optional[Pending], timeout: Optional[float]) -> Plan:
        """A job's value: from its RESULT, or (a job submitted elsewhere) by
        polling the admin ``job`` view until it is finished."""
        if self.legacy:
            raise errors.Unsupported("results need an emq router (EventMQ 0.3.13 returns none)")
        if p is not None and p.reply:
            pending = p
            if not (yield Await(lambda: pending.finished, timeout, pending)):
                raise errors.ResultTimeout(msgid, timeout)
            return _core.outcome(pending)
        deadline = None if timeout is None else self._clock() + timeout
        pause = 0.02
        while True:
            answer = yield own_admin("job", msgid=msgid)
            finished, value = _core.finished_view_outcome(msgid, answer.get("job") or {})
            if finished:
                return value
            now = self._clock()
            if deadline is not None and now >= deadline:
                raise errors.ResultTimeout(msgid, timeout)
            yield Sleep(pause if deadline is None else min(pause, deadline - now))
            pause = min(pause * 2, 1.0)

    def _status(self, msgid: str) -> Plan:
        answer = yield own_admin("job", msgid=msgid)
        return _core.status_of(answer.get("job") or {})

    def _job_progress(self, msgid: str) -> Plan:
        answer = yield own_admin("job", msgid=msgid)
        return _core.job_progress_of(answer)

    def _cancel(self, msgid: str) -> Plan:
        answer = yield own_admin("cancel", msgid=msgid)
        return str(answer.get("state", ""))

    def _set_limits(self, args: Dict[str, Any]) -> Plan:
        answer = yield own_admin("limits-set", **args)
        return dict(answer.get("policy") or {})

    def _limits(self, queue: Optional[str]) -> Plan:
        answer = yield (own_admin("limits-show", queue=queue) if queue is not None else own_admin("limits-show"))
        return list(answer.get("limits") or [])

    def _clear_limits(self, queue: str) -> Plan:
        yield own_admin("limits-clear", queue=queue)
        return None

    @property
    def outstanding(self) -> int:
        """Jobs whose handles are alive (what the client keeps memory for)."""
        return len(self._tracker)


class BaseJob:
    """What both job handles share. ``msgid`` is the job's id on the
    router."""

    __slots__ = ("client", "msgid", "_p")

    def __init__(self, client: Any, msgid: str, pending: Optional[Pending]) -> None:
        self.client = client
        self.msgid = msgid
        self._p = pending

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.msgid!r})"

    @property
    def accepted(self) -> bool:
        """The router acknowledged the job (False while unknown or refused)."""
        return self._p is not None and self._p.accepted

    @property
    def duplicate(self) -> bool:
        """The router answered the submit as a duplicate (``unique_key``
        held by another job): ``msgid`` is that existing job's, and
        ``result()`` gives its result."""
        return self._p is not None and self._p.duplicate_of is not None

    @property
    def notices(self) -> List[Tuple[str, str]]:
        """The router's NOTICEs about the job read so far, ``(kind, text)``
        in order: ``routed-to-default`` (no job manager served its queue;
        the router sent it to ``default``), ``held-unserved`` (held in its
        queue until a job manager for it connects). Each is also logged as
        a warning on the ``emq_client`` logger."""
        return list(self._p.notices) if self._p is not None else []

