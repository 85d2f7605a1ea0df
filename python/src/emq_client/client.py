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
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import zmq

from . import _core, curve, errors, link, payload, wire
from ._core import JobStatus, Pending
from .payload import JobSpec, Task

#: What ``submit_many`` takes per job: a Task, a callable or dotted path
#: (called with no arguments), or ``(spec, args)`` / ``(spec, args, kwargs)``.
BulkItem = Union[Task, str, Callable[..., Any], Tuple[Any, ...]]


# Flags as plain ints: pyzmq's enum arithmetic costs more than the send.
_SNDMORE = int(zmq.SNDMORE)
_NOBLOCK = int(zmq.NOBLOCK)
_RCVMORE = int(zmq.RCVMORE)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)


def send_frames(sock: "zmq.Socket[Any]", frames: List[bytes]) -> None:
    """``send_multipart`` for small frames, a third of its cost."""
    send = sock.send
    for f in frames[:-1]:
        send(f, _SNDMORE)
    send(frames[-1], 0)


def recv_ready(sock: "zmq.Socket[Any]") -> Optional[List[bytes]]:
    """One message if one is waiting, else None (never blocks)."""
    try:
        frames = [sock.recv(_NOBLOCK)]
    except zmq.Again:
        return None
    get = sock.get
    while get(_RCVMORE):
        frames.append(sock.recv(_NOBLOCK))
    return frames


def readable(sock: "zmq.Socket[Any]") -> bool:
    """A message is waiting (no system call)."""
    return bool(int(sock.get(_EVENTS)) & _POLLIN)


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
    """``$EMQ_BROKER_ADDR`` (0.3.13's variable for clients), else the default."""
    return os.environ.get("EMQ_BROKER_ADDR") or wire.DEFAULT_FRONTEND


def default_admin() -> str:
    """``$EMQ_ADMIN_ADDR``, else the router's default admin address."""
    return os.environ.get("EMQ_ADMIN_ADDR") or wire.DEFAULT_ADMIN


class Client:
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
    :class:`QueueFull` is raised; 0 raises it at once.

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
    (:mod:`emq_client.curve`).
    """

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
        context: Optional[zmq.Context] = None,  # type: ignore[type-arg]
        queue_full_timeout: float = 30.0,
        curve_server_key: Optional[curve.PathLike] = None,
        curve_secret_key_file: Optional[curve.PathLike] = None,
    ) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        if queue_full_timeout < 0:
            raise ValueError("queue_full_timeout must be >= 0")
        self.queue_full_timeout = float(queue_full_timeout)
        self._curve = curve.curve_keys(curve_server_key, curve_secret_key_file)
        self.addr = addr or default_frontend()
        self.admin_addr = admin_addr or default_admin()
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
        self._owner = threading.get_ident()
        self._ctx = context or zmq.Context.instance()
        self._tracker = _core.Tracker(resend=not legacy)
        self._watch: Optional["zmq.Socket[Any]"] = None
        self._poll: Optional[zmq.Poller] = None
        self._sock = self._dealer(self._addrs, watched=not legacy)
        self._admin: Optional[zmq.Socket] = None  # type: ignore[type-arg]
        self._closed = False

    # -- sockets ---------------------------------------------------------

    def _dealer(self, addrs: List[str], watched: bool = False) -> "zmq.Socket[Any]":
        """A DEALER with a uuid4 identity (as 0.3.13's Sender), a send timeout
        (a send that blocks this long means no router: a connection error)
        and a short linger, connected to every address of ``addrs``; with
        ``watched``, its connections are watched (``self._watch``)."""
        sock = self._ctx.socket(zmq.DEALER)
        try:
            sock.setsockopt(zmq.IDENTITY, wire.new_msgid().encode())
            if self._curve is not None:
                self._curve.apply(sock)
            sock.setsockopt(zmq.SNDTIMEO, int(self.ack_timeout * 1000))
            sock.setsockopt(zmq.LINGER, self._linger_ms)
            sock.setsockopt(zmq.RCVHWM, 100_000)
            if watched:
                self._watch = link.watch(sock)
            link.connect(sock, addrs)
        except zmq.ZMQError as e:
            if self._watch is not None:
                link.unwatch(sock, self._watch)
                self._watch = None
            sock.close(0)
            raise errors.EmqConnectionError(f"cannot connect to {','.join(addrs)}: {e}") from None
        return sock

    def _check(self) -> None:
        """Refuse use from another thread, or after close."""
        if threading.get_ident() != self._owner:
            raise errors.WrongThread(
                "this Client belongs to another thread: make one Client per thread (emq_client.thread_client)"
            )
        if self._closed:
            raise errors.EmqError("the client is closed")

    def _send(self, sock: "zmq.Socket[Any]", frames: List[bytes], addr: str) -> None:
        """Send one message; a send that cannot proceed within the ack
        timeout (no router ever connected) is a connection error."""
        try:
            send_frames(sock, frames)
        except zmq.Again:
            raise errors.EmqConnectionError(f"cannot send to {addr}: no router there") from None

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
                    left = None if deadline is None else deadline - time.monotonic()
                    ms = None if left is None else max(0, int(left * 1000 + 0.999))
                    self._poller().poll(ms)
                    self._links()
                    if readable(sock):
                        break
                    if deadline is not None and time.monotonic() >= deadline:
                        return 0
        n = 0
        handle = self._tracker.handle
        while n < 100_000:
            frames = recv_ready(sock)
            if frames is None:
                break
            n += 1
            msg = wire.parse(frames)
            if msg is not None:
                handle(msg)
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
        """Apply the connection changes waiting on the watch: after a
        reconnect, say hello and send again what was not answered."""
        watch = self._watch
        if watch is None:
            return
        while True:
            frames = recv_ready(watch)
            if frames is None:
                return
            ev = link.link_event(frames)
            if ev is None:
                continue
            for f in self._tracker.link(ev[0]):
                self._send(self._sock, f, self.addr)

    def _send_receipts(self) -> None:
        """RECEIVED for the RESULTs read so far (never blocks: without a
        connection they wait for the next round)."""
        while True:
            frames = self._tracker.take_receipts()
            if frames is None:
                return
            try:
                send = self._sock.send
                for f in frames[:-1]:
                    send(f, _SNDMORE | _NOBLOCK)
                send(frames[-1], _NOBLOCK)
            except zmq.Again:
                self._tracker.give_back_receipts(frames)
                return

    def _wait(self, done: Callable[[], bool], timeout: Optional[float], expired: Callable[[], Exception]) -> None:
        """Read answers until ``done()`` or ``timeout`` seconds pass (then
        raise ``expired()``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise expired()
            self._pump(remaining)

    # -- submitting -------------------------------------------------------

    def _post(self, task: Task, queue: Optional[str], headers: str) -> Pending:
        """Send one REQUEST and record it."""
        msgid = wire.new_msgid()
        frames = wire.request(msgid, queue or self.queue, headers, task.message)
        p = self._tracker.add(msgid, reply=not self.legacy, frames=frames)
        self._send(self._sock, frames, self.addr)
        return p

    def _repost(self, p: Pending, task: Task, queue: Optional[str], headers: str) -> None:
        """Send a refused REQUEST again under its msgid (the router kept
        nothing of it)."""
        p.reject = None
        self._send(self._sock, wire.request(p.msgid, queue or self.queue, headers, task.message), self.addr)

    def submit(
        self,
        func: JobSpec,
        *args: Any,
        queue: Optional[str] = None,
        retries: int = 0,
        timeout: float = 0,
        delay: Optional[float] = None,
        headers: Sequence[str] = (),
        **kwargs: Any,
    ) -> "Job":
        """Submit ``func(*args, **kwargs)`` and wait for the router to accept
        it; return its :class:`Job`.

        ``func`` is a callable, a dotted path (``pkg.mod.func``,
        ``pkg.mod:Class.method``) or a :class:`Task` (``emq_client.call``,
        ``shell``, ``python``; use ``python()`` for keyword arguments named
        like these options). ``retries``: ``retry-count:N``; ``timeout``:
        seconds before the job is killed (``timeout:N``); ``delay``: seconds
        before it may run (``delay:SECS``); ``headers``: more headers.
        Raises :class:`Rejected` (e.g. :class:`QueueFull`) when refused and
        :class:`EmqConnectionError` when no router answers in time."""
        self._check()
        task = payload.build(func, args, kwargs)
        hdrs = _core.submit_headers(self.legacy, retries, timeout, delay, headers)
        p = self._post(task, queue, hdrs)
        if not self.legacy:
            give_up = time.monotonic() + self.queue_full_timeout
            tries = 0
            while True:
                self._wait(lambda: p.answered, self.ack_timeout, lambda: _core.no_answer(self.addr, self.ack_timeout, f"job {p.msgid}"))
                if not _core.is_queue_full(p):
                    break
                tries += 1
                pause = _core.full_backoff(tries)
                if time.monotonic() + pause >= give_up:
                    break
                time.sleep(pause)
                self._repost(p, task, queue, hdrs)
            if p.reject is not None:
                raise p.reject
        return Job(self, p.msgid, p)

    def submit_many(
        self,
        items: Iterable[BulkItem],
        *,
        queue: Optional[str] = None,
        retries: int = 0,
        timeout: float = 0,
        delay: Optional[float] = None,
        headers: Sequence[str] = (),
        window: Optional[int] = None,
        max_unfinished: Optional[int] = None,
        raise_on_reject: bool = True,
    ) -> List["Job"]:
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
        limit = window or self.window
        hdrs = _core.submit_headers(self.legacy, retries, timeout, delay, headers)
        jobs: List[Job] = []
        tasks: List[Task] = []
        unanswered: List[Pending] = []
        unfinished: List[Pending] = []
        for item in items:
            task = bulk_task(item)
            p = self._post(task, queue, hdrs)
            jobs.append(Job(self, p.msgid, p))
            tasks.append(task)
            if self.legacy:
                continue
            unanswered.append(p)
            if len(jobs) % 32 == 0 and readable(self._sock):
                self._pump(0)
            if len(unanswered) >= limit:
                self._await_window(unanswered, limit - 1, finished=False)
            if max_unfinished:
                unfinished.append(p)
                if len(unfinished) >= max_unfinished:
                    self._await_window(unfinished, max_unfinished - 1, finished=True)
        if not self.legacy:
            self._await_window(unanswered, 0, finished=False)
            self._resend_full(jobs, tasks, queue, hdrs)
            refused = [p.reject for p in (j._p for j in jobs) if p is not None and p.reject is not None]
            if refused and raise_on_reject:
                raise errors.BulkRejected(jobs, refused)
        return jobs

    def _resend_full(self, jobs: List["Job"], tasks: List[Task], queue: Optional[str], hdrs: str) -> None:
        """Send the jobs refused ``queue-full`` again until accepted or
        ``queue_full_timeout`` is over: ``probe`` at a time, doubled when
        all were taken, halved (after a backoff pause) when some were
        refused again."""
        give_up = time.monotonic() + self.queue_full_timeout
        waiting = [(j._p, t) for j, t in zip(jobs, tasks) if j._p is not None and _core.is_queue_full(j._p)]
        probe, pauses = 1, 0
        while waiting:
            pause = _core.full_backoff(pauses + 1) if pauses else _core.FULL_BACKOFF_FIRST
            if time.monotonic() + pause >= give_up:
                return
            time.sleep(pause)
            batch, waiting = waiting[:probe], waiting[probe:]
            for p, t in batch:
                self._repost(p, t, queue, hdrs)
            sent = [p for p, _ in batch]
            self._await_window(sent, 0, finished=False)
            again = [(p, t) for p, t in batch if _core.is_queue_full(p)]
            if again:
                probe, pauses = max(1, probe // 2), pauses + 1
            else:
                probe, pauses = min(probe * 2, self.window), 0
            waiting = again + waiting

    def _await_window(self, unanswered: List[Pending], room: int, finished: bool) -> None:
        """Read answers until at most ``room`` jobs are unanswered (with
        ``finished``: unfinished). Silence for ``ack_timeout`` while some
        job is unacknowledged is a connection error; accepted jobs may run
        as long as they take."""
        while _core.drain_list(unanswered, finished) > room:
            if not self._pump(self.ack_timeout) and not all(p.answered for p in unanswered):
                raise _core.no_answer(self.addr, self.ack_timeout, f"{len(unanswered)} jobs")

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
        return self._schedule(payload.build(func, args, kwargs), interval, cron, queue, headers, False)

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
        return self._schedule(payload.build(func, args, kwargs), None, None, queue, headers, True)

    def _schedule(
        self,
        task: Task,
        interval: Optional[float],
        cron: Optional[str],
        queue: Optional[str],
        headers: Sequence[str],
        unschedule: bool,
    ) -> str:
        """Send SCHEDULE or UNSCHEDULE and wait for its answer (emq only)."""
        self._check()
        if not unschedule and (interval is None) == (cron is None):
            raise ValueError("give either interval or cron")
        msgid = wire.new_msgid()
        frames = wire.schedule(
            msgid, queue or self.queue, ",".join(headers), task.message,
            interval_secs=interval, cron=cron, unschedule=unschedule,
        )
        p = self._tracker.add(msgid, reply=False, frames=frames)
        self._send(self._sock, frames, self.addr)
        if not self.legacy:
            self._wait(lambda: p.answered, self.ack_timeout, lambda: _core.no_answer(self.addr, self.ack_timeout, f"schedule {msgid}"))
            if p.reject is not None:
                raise p.reject
        return msgid

    def send_raw(self, command: str, body: Sequence[bytes]) -> str:
        """Send ``[command, msgid, *body]`` with a fresh msgid, unanswered
        (the compatibility functions of :mod:`emq_client.messages` use it)."""
        self._check()
        msgid = wire.new_msgid()
        frames = [b"", wire.PROTOCOL, command.encode(), msgid.encode(), *body]
        self._send(self._sock, frames, self.addr)
        return msgid

    # -- jobs by msgid, admin ------------------------------------------------

    def job(self, msgid: str) -> "Job":
        """A handle for a job submitted elsewhere (another client, another
        process, EventMQ 0.3.13's ``defer_job``): ``status`` and ``cancel``
        work; ``result`` asks the admin socket until the job is finished."""
        self._check()
        return Job(self, msgid, None)

    def admin(self, op: str, **args: Any) -> Dict[str, Any]:
        """One control-plane operation (docs/PROTOCOL.md, "Control plane"):
        the answer object, or :class:`AdminError` raised."""
        self._check()
        if self.legacy:
            raise errors.Unsupported(f"admin op {op!r} needs an emq router")
        if self._admin is None:
            self._admin = self._dealer(self._admin_addrs)
        sock = self._admin
        msgid = wire.new_msgid("admin:")
        self._send(sock, wire.admin(msgid, {"op": op, **args}), self.admin_addr)
        deadline = time.monotonic() + self.admin_timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not sock.poll(int(remaining * 1000) + 1, zmq.POLLIN):
                # The answer may still come: a fresh socket keeps it from
                # being taken for the next request's.
                sock.close(0)
                self._admin = None
                raise errors.EmqConnectionError(
                    f"no answer from the admin socket {self.admin_addr} to {op!r} within {self.admin_timeout} s"
                )
            msg = wire.parse(sock.recv_multipart())
            if msg is not None and msg.command == "REPLY" and msg.orig == msgid:
                return _core.admin_answer(op, msg.payload)

    def close(self) -> None:
        """Close the sockets (unsent messages get ``linger`` seconds)."""
        if self._closed:
            return
        self._closed = True
        self._send_receipts()
        link.close_sockets(self._sock, self._watch, self._admin, self._linger_ms)

    def __del__(self) -> None:
        link.close_on_drop(self)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def outstanding(self) -> int:
        """Jobs whose handles are alive (what the client keeps memory for)."""
        return len(self._tracker)


class Job:
    """A submitted job. ``msgid`` is its id on the router.

    ``result(timeout)`` blocks for the value; ``status()`` and ``cancel()``
    use the admin socket. A Job belongs to its Client's thread."""

    __slots__ = ("client", "msgid", "_p")

    def __init__(self, client: Client, msgid: str, pending: Optional[Pending]) -> None:
        self.client = client
        self.msgid = msgid
        self._p = pending

    def __repr__(self) -> str:
        return f"Job({self.msgid!r})"

    @property
    def accepted(self) -> bool:
        """The router acknowledged the job (False while unknown or refused)."""
        return self._p is not None and self._p.accepted

    def done(self) -> bool:
        """Whether ``result()`` would return at once (reads what has arrived,
        without waiting)."""
        self.client._check()
        if self._p is None:
            return False
        self.client._pump(0)
        return self._p.finished

    def result(self, timeout: Optional[float] = None) -> Any:
        """Wait up to ``timeout`` seconds (None: no limit) for the job to
        finish; return its value. Raises :class:`JobFailed` (``kind``,
        ``message``, ``traceback``) when it failed, :class:`Rejected` when it
        was refused, :class:`ResultTimeout` when the time ran out."""
        c = self.client
        c._check()
        p = self._p
        if c.legacy:
            raise errors.Unsupported("results need an emq router (EventMQ 0.3.13 returns none)")
        if p is None or not p.reply:
            return self._result_by_admin(timeout)
        c._wait(lambda: p.finished, timeout, lambda: errors.ResultTimeout(self.msgid, timeout))
        return _core.outcome(p)

    def _result_by_admin(self, timeout: Optional[float]) -> Any:
        """Poll the admin ``job`` view until it is finished: 20 ms at first,
        doubling to 1 s between polls, until ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.02
        while True:
            finished, value = _core.finished_view_outcome(self.msgid, self.status().view)
            if finished:
                return value
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise errors.ResultTimeout(self.msgid, timeout)
            time.sleep(pause if deadline is None else min(pause, deadline - now))
            pause = min(pause * 2, 1.0)

    def status(self) -> JobStatus:
        """The job's state on the router (admin op ``job``); raises
        :class:`JobNotFound` for a job the router neither holds nor keeps."""
        answer = self.client.admin("job", msgid=self.msgid)
        return _core.status_of(answer.get("job") or {})

    def cancel(self) -> str:
        """Cancel the job (admin op ``cancel``): a waiting job is removed at
        once (returns ``cancelled``), a running one is stopped by its job
        manager (returns ``cancelling``). Its ``result()`` then raises
        :class:`JobCancelled`. :class:`AdminError` kind ``conflict`` when it
        had already finished."""
        answer = self.client.admin("cancel", msgid=self.msgid)
        return str(answer.get("state", ""))


_local = threading.local()


def thread_client(addr: Optional[str] = None, **options: Any) -> Client:
    """This thread's Client for ``addr`` (made on first use, kept for the
    thread's life); what the ``@job`` decorator's ``submit`` uses."""
    key = (addr or default_frontend(), tuple(sorted(options.items())))
    clients: Dict[Any, Client] = _local.__dict__.setdefault("clients", {})
    c = clients.get(key)
    if c is None or c._closed:
        c = clients[key] = Client(addr, **options)
    return c
