"""The blocking client: :class:`Client` and its job handle :class:`Job`.

A Client is one DEALER socket on the router's frontend (and, once status or
cancel is asked, one on its admin socket). It has no thread of its own: the
router's answers are read while a call waits (for an acknowledgement, a
result, or room in the ``submit_many`` window), with ``zmq.poll`` and the
caller's timeout, never in a busy loop. Answers for other jobs that arrive
meanwhile are kept on those jobs' handles.

**Failover.** ``addr`` (and ``admin_addr``) may be a comma-separated list
of routers: the client connects to every one and talks to the router that
serves (:mod:`emq_client.link`). It keeps its identity across reconnects;
after one it says hello and sends again whatever was not answered, and the
router sends the results it holds for it. Results are confirmed with
RECEIVED (``result-receipt``), so a result produced just before a router
crash or failover still arrives (docs/PROTOCOL.md, "Results until
delivered").

**Threads.** zmq sockets must not be shared between threads, so a Client
belongs to the thread that made it: any call from another thread (on the
Client or on one of its Jobs) raises :class:`~emq_client.errors.WrongThread`.
Make one Client per thread; they are cheap (one socket each, one shared
zmq context). :func:`thread_client` keeps one per thread and address.

**Fork.** A Client used in a child after ``os.fork()`` reconnects there
with fresh sockets (the parent's are left alone; :mod:`emq_client._base`).

What the client decides is in :mod:`emq_client._base`, shared with the
asyncio client; this module is the blocking driver: it runs the plans,
doing the I/O each step names.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Generic, Iterable, List, Optional, Sequence, TypeVar, Union

import zmq

from . import _base, _core, errors, link, options, payload, wire
from ._base import Admin, Await, BulkItem, Plan, SendMany, Sleep
from ._sockio import readable, recv_ready, send_frames, send_frames_now
from ._core import JobProgress, JobStatus
from .batch import Batch
from .canvas import Canvas
from .payload import JobSpec, Task


class Client(_base.BaseClient):
    """A connection to an emq router's frontend (and admin socket).

    ``addr``: the frontend (default ``$EMQ_BROKER_ADDR``, else
    ``tcp://127.0.0.1:47291``), or a comma-separated failover list of
    frontends; ``admin_addr``: the admin socket (or list) for
    ``status``/``cancel`` (default ``$EMQ_ADMIN_ADDR``, else
    ``tcp://127.0.0.1:47293``); ``queue``: the default queue;
    ``ack_timeout``: seconds to wait for the router's answer to a submit
    before raising :class:`EmqConnectionError`; ``window``: jobs
    ``submit_many`` keeps unacknowledged at once;
    ``queue_full_timeout``: a job refused ``queue-full`` is backpressure,
    not a failure — it is sent again (same msgid) after 10 ms, doubling to
    1 s between tries, for up to this many seconds before
    :class:`QueueFull` is raised; 0 raises it at once. A job answered
    ``journal-uncertain`` (the router cannot tell whether it stored it) is
    sent again the same way, for at least ``ack_timeout``, then
    :class:`JournalUncertain` (not a refusal: it may run) is raised.
    ``max_message_size``: the router's ``--max-message-size`` (default
    16 MiB; None or 0: no limit): a job or schedule with a bigger frame
    raises :class:`MessageTooLarge` before anything is sent.

    ``legacy=True`` is for an EventMQ 0.3.13 router, which acknowledges only
    jobs it can dispatch at once and never returns results: submits are fire
    and forget (no ``reply-requested``, no waiting), schedules are sent
    without waiting, and ``result``, ``status`` and ``cancel`` raise
    :class:`Unsupported` — results need an emq router.

    ``curve_server_key`` (the router's public key: Z85 text or its
    ``NAME.key`` file) and ``curve_secret_key_file`` (our ``NAME.key_secret``
    from ``emq-cli keygen``) encrypt both connections with CURVE, for a
    router started with ``--curve-secret-key-file``; defaults
    ``$EVENTMQ_CURVE_SERVER_KEY`` and ``$EVENTMQ_CURVE_SECRET_KEY_FILE``
    (:mod:`emq_client.curve`). ``context``: the zmq context (default
    ``zmq.Context.instance()``).
    """

    def _setup(self) -> None:
        self._job_type = Job
        self._owner = threading.get_ident()
        self._connect()

    # -- sockets ---------------------------------------------------------

    def _connect(self) -> None:
        """Make the frontend DEALER (watched, unless legacy); the admin one
        comes with the first admin call."""
        self._ctx: "zmq.Context[Any]" = self._context or zmq.Context.instance()
        self._watch: Optional["zmq.Socket[Any]"] = None
        self._poll: Optional[zmq.Poller] = None
        self._admin: Optional["zmq.Socket[Any]"] = None
        self._sock, self._watch = self._dealer(self._addrs, watched=not self.legacy)

    def _dealer(self, addrs: List[str], watched: bool = False) -> "Any":
        try:
            return link.dealer(
                self._ctx, addrs, keys=self._curve, linger_ms=self._linger_ms,
                send_timeout_ms=int(self.ack_timeout * 1000), watched=watched,
            )
        except zmq.ZMQError as e:
            raise errors.EmqConnectionError(f"cannot connect to {','.join(addrs)}: {e}") from None

    def _check(self) -> None:
        """Refuse use from another thread, or after close; reconnect in a
        forked child."""
        if threading.get_ident() != self._owner:
            raise errors.WrongThread(
                "this Client belongs to another thread: make one Client per thread (emq_client.thread_client)"
            )
        if self._closed:
            raise errors.EmqError("the client is closed")
        if self._forked():
            self._connect()

    def _send(self, sock: "zmq.Socket[Any]", frames: List[bytes], addr: str) -> None:
        """Send one message; a send that cannot proceed within the ack
        timeout (no router ever connected) is a connection error."""
        try:
            send_frames(sock, frames)
        except zmq.Again:
            raise errors.EmqConnectionError(f"cannot send to {addr}: no router there") from None

    def _send_many(self, messages: List[List[bytes]]) -> None:
        """A :class:`~emq_client._base.SendMany`: send each message (as
        :meth:`_send`), then apply what has arrived meanwhile."""
        sock = self._sock
        try:
            for frames in messages:
                send_frames(sock, frames)
        except zmq.Again:
            raise errors.EmqConnectionError(f"cannot send to {self.addr}: no router there") from None
        if readable(sock):
            self._pump(0)

    def _pump(self, timeout: Optional[float]) -> int:
        """Wait up to ``timeout`` seconds (None: no limit) for the router to
        say something, then apply everything already received (and send the
        receipts for the RESULTs among it). Connection changes are handled on
        the way. Returns the number of messages read."""
        sock = self._sock
        self._links()
        if not readable(sock):
            if self._watch is None:
                ms = None if timeout is None else max(0, int(timeout * 1000 + 0.999))
                if not sock.poll(ms, zmq.POLLIN):
                    return 0
            else:
                # A connection event wakes the poll too: wait on until
                # the router says something or the time is up.
                deadline = None if timeout is None else time.monotonic() + timeout
                while True:
                    wake = _base.earliest(deadline, self._tracker.poll_timeout())
                    left = None if wake is None else wake - time.monotonic()
                    ms = None if left is None else max(0, int(left * 1000 + 0.999))
                    self._poller().poll(ms)
                    self._links()
                    if readable(sock):
                        break
                    if deadline is not None and time.monotonic() >= deadline:
                        return 0
        n = 0
        handle = self._tracker.handle_frames
        while n < 100_000:
            frames = recv_ready(sock)
            if frames is None:
                break
            n += 1
            handle(frames)
        self._send_receipts()
        return n

    def _poller(self) -> zmq.Poller:
        """A poller on the DEALER and its connection watch (made once)."""
        if self._poll is None:
            self._poll = zmq.Poller()
            self._poll.register(self._sock, zmq.POLLIN)
            if self._watch is not None:
                self._poll.register(self._watch, zmq.POLLIN)
        return self._poll

    def _links(self) -> None:
        """Apply the connection changes waiting on the watch, and what the
        tracker sends again after a reconnect or a drop."""
        watch = self._watch
        if watch is None:
            return
        tracker = self._tracker
        again: List[List[bytes]] = []
        while readable(watch):
            frames = recv_ready(watch)
            if frames is None:
                break
            ev = link.link_event(frames)
            if ev is not None:
                again += tracker.link(*ev, time.monotonic())
        if tracker.poll_timeout() is not None:
            again += tracker.handle_timeout(time.monotonic())
        if again:
            readable(self._sock)  # libzmq applies its pipe changes first
            for f in again:
                self._send(self._sock, f, self.addr)

    def _send_receipts(self) -> None:
        """RECEIVED for the RESULTs read so far (never blocks: without a
        connection they wait for the next round)."""
        while True:
            frames = self._tracker.take_receipts()
            if frames is None:
                return
            if not send_frames_now(self._sock, frames):
                self._tracker.give_back_receipts(frames)
                return

    def _until(self, done: Callable[[], bool], timeout: Optional[float]) -> bool:
        """Read answers until ``done()`` or ``timeout`` seconds pass;
        whether ``done()`` holds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            self._pump(remaining)
        return True

    def _run(self, plan: Plan) -> Any:
        """Run a plan of :mod:`emq_client._base`: do each step's I/O, hand
        back its outcome; the plan's value."""
        out: Any = None
        try:
            while True:
                step = plan.send(out)
                out = None
                if isinstance(step, list):
                    self._send(self._sock, step, self.addr)
                elif isinstance(step, SendMany):
                    self._send_many(step.messages)
                elif isinstance(step, Await):
                    out = self._until(step.cond, step.timeout)
                elif isinstance(step, Sleep):
                    time.sleep(step.seconds)
                elif isinstance(step, Admin):
                    out = self.admin(step.op, **step.args)
                else:
                    raise TypeError(f"not a plan step: {step!r}")
        except StopIteration as stop:
            return stop.value

    # -- the API ------------------------------------------------------------

    def submit(
        self,
        func: Union[JobSpec, "Canvas"],
        *args: Any,
        queue: Optional[str] = None,
        retries: Optional[int] = None,
        timeout: Optional[float] = None,
        delay: Optional[float] = None,
        headers: Optional[Sequence[str]] = None,
        unique_key: Optional[str] = None,
        unique_for: Optional[float] = None,
        on_conflict: Optional[str] = None,
        key: Optional[str] = None,
        priority: Optional[int] = None,
        **kwargs: Any,
    ) -> "Job[Any]":
        """Submit ``func(*args, **kwargs)`` and wait for the router to accept
        it; return its :class:`Job`.

        ``func`` is a callable, a dotted path (``pkg.mod.func``,
        ``pkg.mod:Class.method``) or a :class:`Task` (``emq_client.call``,
        ``shell``, ``python``). The job's options (:mod:`emq_client.options`,
        None: the default): ``queue``; ``retries``: ``retry-count:N``;
        ``timeout``: seconds before the job is killed (``timeout:N``);
        ``delay``: seconds before it may run (``delay:SECS``); ``headers``:
        more headers. Every other keyword is ``func``'s. An option given
        whose name is also a parameter of ``func`` raises
        :class:`~emq_client.options.OptionCollision` (nothing is sent): say
        which is meant with ``f.options(timeout=3).submit(...)`` (``@job``
        functions) or ``c.submit(python(f, args, kwargs), timeout=3)``.
        ``unique_key``: at most one job with this key at a time
        (``unique-key:K``; ``unique_for``: seconds the key stays taken from
        acceptance, also after the job finished; ``on_conflict``:
        ``existing`` (default), ``reject`` or ``replace``). When another
        job holds the key the returned Job is that job (``job.msgid`` is
        its msgid, ``job.duplicate`` is True) and ``result()`` gives its
        result; ``reject`` raises :class:`DuplicateJob` instead.
        ``key``: the job's flow-control key (``key:K``, e.g. a tenant: the
        queue's per-key limits and fairness apply to it); ``priority``:
        0–9, higher runs first (``priority:N``; docs/PROTOCOL.md, "Flow
        control").
        Raises :class:`Rejected` (e.g. :class:`QueueFull`) when refused and
        :class:`EmqConnectionError` when no router answers in time."""
        self._check()
        plan = self._maybe_workflow(func, args, kwargs, queue, retries, timeout, delay, headers, unique_key, key, priority)
        if plan is not None:
            return self._run(plan)  # type: ignore[no-any-return]
        assert not isinstance(func, Canvas)
        options.refuse_collisions(func, options.given(locals()))
        task = payload.build(func, args, kwargs)
        unique = wire.unique_headers(unique_key, unique_for, on_conflict)
        hdrs = self._headers(retries or 0, timeout or 0, delay, headers or (), unique, key, priority)
        return self._run(self._submit(task, queue, hdrs))  # type: ignore[no-any-return]

    def submit_many(
        self,
        items: Iterable[BulkItem],
        *,
        queue: Optional[str] = None,
        retries: int = 0,
        timeout: float = 0,
        delay: Optional[float] = None,
        headers: Sequence[str] = (),
        key: Optional[str] = None,
        priority: Optional[int] = None,
        window: Optional[int] = None,
        max_unfinished: Optional[int] = None,
        raise_on_reject: bool = True,
    ) -> List["Job[Any]"]:
        """Submit many jobs pipelined: up to ``window`` (default the client's)
        unacknowledged at once, then wait until every one is answered. With
        ``max_unfinished``, also at most that many submitted and not yet
        finished (flow control that keeps a bulk submit under the router's
        per-queue limit, as ``emq-sender --window`` does with ``--wait``).
        Jobs refused ``queue-full`` are sent again after the others (a few
        at a time: one, then twice as many for every one accepted), with
        backoff, for up to ``queue_full_timeout``.
        Returns the Jobs in order. If any was refused, raises
        :class:`BulkRejected` (holding all Jobs) unless
        ``raise_on_reject=False``, when the refused Jobs raise their
        :class:`Rejected` from ``result()``."""
        self._check()
        hdrs = self._headers(retries, timeout, delay, headers, (), key, priority)
        return self._run(self._submit_many(items, queue, hdrs, window, max_unfinished, raise_on_reject))  # type: ignore[no-any-return]

    def schedule(
        self,
        func: JobSpec,
        *args: Any,
        interval: Optional[float] = None,
        cron: Optional[str] = None,
        queue: Optional[str] = None,
        headers: Sequence[str] = ("guarantee",),
        **kwargs: Any,
    ) -> str:
        """Run ``func(*args, **kwargs)`` every ``interval`` seconds or on a
        5-field ``cron`` string (UTC); returns the SCHEDULE's msgid once the
        router took it (raises :class:`Malformed` for a bad cron). Frames as
        0.3.13's ``schedule()`` sends them, so either library can remove
        the schedule."""
        self._check()
        task = payload.build(func, args, kwargs)
        return self._run(self._schedule(task, interval, cron, queue, headers, False))  # type: ignore[no-any-return]

    def unschedule(
        self,
        func: JobSpec,
        *args: Any,
        queue: Optional[str] = None,
        headers: Sequence[str] = ("guarantee",),
        **kwargs: Any,
    ) -> str:
        """Remove the schedule of this job on this queue (the router matches
        queue and payload); raises :class:`ScheduleNotFound` when none
        matches."""
        self._check()
        task = payload.build(func, args, kwargs)
        return self._run(self._schedule(task, None, None, queue, headers, True))  # type: ignore[no-any-return]

    def send_raw(self, command: str, body: Sequence[bytes]) -> str:
        """Send ``[command, msgid, *body]`` with a fresh msgid, unanswered
        (the compatibility functions of :mod:`emq_client.messages` use it)."""
        self._check()
        return self._run(self._send_raw(command, body))  # type: ignore[no-any-return]

    def set_limits(
        self,
        queue: str,
        *,
        concurrency: Any = _core._UNSET,
        concurrency_per_key: Any = _core._UNSET,
        rate: Any = _core._UNSET,
        rate_per_key: Any = _core._UNSET,
        fair: Any = _core._UNSET,
    ) -> Dict[str, Any]:
        """Change ``queue``'s flow-control policy (docs/PROTOCOL.md, "Flow
        control"): each limit given replaces the policy's, the others stay
        (``None`` removes a limit). Rates are ``"N/SECS"`` or ``(N, SECS)``.
        Returns the queue's policy now, e.g. ``{"concurrency_per_key": 2,
        "fair": True}``. The router journals it."""
        args = _core.limits_args(queue, concurrency, concurrency_per_key, rate, rate_per_key, fair)
        return self._run(self._set_limits(args))  # type: ignore[no-any-return]

    def limits(self, queue: Optional[str] = None) -> List[Dict[str, Any]]:
        """The flow-control policies (of ``queue``, or all), each with its
        figures and keys (``running``, ``waiting``, ``blocked``)."""
        return self._run(self._limits(queue))  # type: ignore[no-any-return]

    def clear_limits(self, queue: str) -> None:
        """Remove ``queue``'s flow-control policy."""
        self._run(self._clear_limits(queue))

    def batch(
        self,
        on_success: Optional[Task] = None,
        on_complete: Optional[Task] = None,
        *,
        description: str = "",
        queue: Optional[str] = None,
        id: Optional[str] = None,
    ) -> Batch:
        """Open a batch (Sidekiq Pro's batches, :mod:`emq_client.batch`):
        jobs join it with ``b.add(...)`` until ``b.close()`` (or the end of
        a ``with`` block); then the router runs ``on_success`` (no job
        failed) and ``on_complete`` (always) once, each given the batch's
        status first. ``queue``: the callbacks' queue; ``id``: the batch's
        id (default: a new one)."""
        self._check()
        bid, plan = self._batch_open(id, on_success, on_complete, description, queue)
        self._run(plan)
        return Batch(self, bid)

    def batch_of(self, batch_id: str) -> Batch:
        """The handle of a batch opened elsewhere (to add, close or read it)."""
        return Batch(self, batch_id)

    def job(self, msgid: str) -> "Job[Any]":
        """A handle for a job submitted elsewhere (another client, another
        process, EventMQ 0.3.13's ``defer_job``): ``status`` and ``cancel``
        work; ``result`` asks the admin socket until the job is finished."""
        self._check()
        return Job[Any](self, msgid, None)

    def admin(self, op: str, **args: Any) -> Dict[str, Any]:
        """One control-plane operation (docs/PROTOCOL.md, "Control plane"):
        the answer object, or :class:`AdminError` raised."""
        self._check()
        call = self._admin_call(op, args)
        if self._admin is None:
            self._admin, _ = self._dealer(self._admin_addrs)
        sock = self._admin
        self._send(sock, call.frames, self.admin_addr)
        deadline = time.monotonic() + self.admin_timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not sock.poll(int(remaining * 1000) + 1, zmq.POLLIN):
                # The answer may still come: a fresh socket keeps it from
                # being taken for the next request's.
                sock.close(0)
                self._admin = None
                raise call.expired()
            answer = call.answer(sock.recv_multipart())
            if answer is not None:
                return answer

    def close(self) -> None:
        """Close the sockets (unsent messages get ``linger`` seconds)."""
        if self._closed:
            return
        self._closed = True
        if self._forked():
            return  # the parent's sockets: left alone
        self._send_receipts()
        link.close_sockets(self._sock, self._watch, self._admin, self._linger_ms)

    def __del__(self) -> None:
        link.close_on_drop(self)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


#: The value a job's ``result()`` gives (``Job[int]``: an ``@job`` function
#: returning int; ``Job[Any]``: anything submitted by path or Task).
T = TypeVar("T", covariant=True)


class Job(_base.BaseJob, Generic[T]):
    """A submitted job. ``msgid`` is its id on the router.

    ``result(timeout)`` blocks for the value; ``status()`` and ``cancel()``
    use the admin socket. A Job belongs to its Client's thread. ``Job[T]``:
    ``result()`` gives a ``T`` (``@job`` functions' ``submit`` says which)."""

    __slots__ = ()
    client: Client

    def done(self) -> bool:
        """Whether ``result()`` would return at once (reads what has arrived,
        without waiting)."""
        self.client._check()
        if self._p is None:
            return False
        self.client._pump(0)
        return self._p.finished

    def result(self, timeout: Optional[float] = None) -> T:
        """Wait up to ``timeout`` seconds (None: no limit) for the job to
        finish; return its value. Raises :class:`JobFailed` (``kind``,
        ``message``, ``traceback``) when it failed, :class:`Rejected` when it
        was refused, :class:`ResultTimeout` when the time ran out."""
        self.client._check()
        return self.client._run(self.client._result(self.msgid, self._p, timeout))  # type: ignore[no-any-return]

    def status(self) -> JobStatus:
        """The job's state on the router (admin op ``job``); raises
        :class:`JobNotFound` for a job the router neither holds nor keeps.
        The handle of ``submit(chain(...))`` gives the workflow's state
        (``pending``, ``running``, ``cancelling``, ``succeeded``,
        ``failed``, ``cancelled``; :class:`JobStatus`)."""
        self.client._check()
        return self.client._run(self.client._status(self.msgid))  # type: ignore[no-any-return]

    def progress(self) -> Optional[JobProgress]:
        """The job's last reported progress while it runs (``percent``,
        ``message``, ``at``; from ``emq_job.progress`` in the job, admin op
        ``job``), or None when it reported none or is not running. Raises
        :class:`JobNotFound` like :meth:`status`."""
        self.client._check()
        return self.client._run(self.client._job_progress(self.msgid))  # type: ignore[no-any-return]

    def cancel(self) -> str:
        """Cancel the job (admin op ``cancel``): a waiting job is removed at
        once (returns ``cancelled``), a running one is stopped by its job
        manager (returns ``cancelling``). Its ``result()`` then raises
        :class:`JobCancelled`. :class:`AdminError` kind ``conflict`` when it
        had already finished. A workflow's handle cancels the workflow: its
        waiting nodes, and its running ones as a job's (``cancelling``
        until they stopped)."""
        self.client._check()
        return self.client._run(self.client._cancel(self.msgid))  # type: ignore[no-any-return]


_local = threading.local()


def thread_client(addr: Optional[str] = None, **options: Any) -> Client:
    """This thread's Client for ``addr`` (made on first use, kept for the
    thread's life); what the ``@job`` decorator's ``submit`` uses."""
    key = (addr or _base.default_frontend(), tuple(sorted(options.items())))
    clients: Dict[Any, Client] = _local.__dict__.setdefault("clients", {})
    c = clients.get(key)
    if c is None or c._closed:
        c = clients[key] = Client(addr, **options)
    return c
