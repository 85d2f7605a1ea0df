"""The asyncio client: :class:`AsyncClient` and :class:`AsyncJob`, the same
API as :class:`~emq_client.Client` with ``await``.

One reader task per client receives everything the router sends on the
frontend and wakes the jobs it concerns (an ``asyncio.Event`` per job), so
any number of coroutines can await results at once; it confirms RESULTs with
RECEIVED. A second task watches the connections: after a reconnect (a
router restarted, or another on the failover list took over) it says hello
and sends again what was not answered (see :class:`~emq_client.Client`). A client belongs to
the event loop it was first used on (zmq.asyncio sockets are bound to
one); use from another loop or thread raises :class:`WrongThread`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence

import zmq
import zmq.asyncio

from . import _core, curve, errors, link, payload, wire
from ._core import JobStatus, Pending
from .client import BulkItem, bulk_task, default_admin, default_frontend, readable, recv_ready

_FIRST = int(zmq.SNDMORE) | int(zmq.NOBLOCK)
_MORE = int(zmq.SNDMORE)
from .payload import JobSpec, Task


class _Waiter:
    """The asyncio side of one Pending record: set when it changes."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def __call__(self) -> None:
        self.event.set()


class AsyncClient:
    """An asyncio connection to an emq router; options as :class:`Client`."""

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
        context: Optional[zmq.asyncio.Context] = None,
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
        self._ctx = context or zmq.asyncio.Context.instance()
        self._tracker = _core.Tracker(resend=not legacy)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._sock: Optional[zmq.asyncio.Socket] = None
        # The same socket for calls that never block (sends that fit, reads
        # of what has arrived): no future, no loop round trip per message.
        self._sync: Optional["zmq.Socket[Any]"] = None
        self._admin: Optional[zmq.asyncio.Socket] = None
        self._admin_lock: Optional[asyncio.Lock] = None
        self._reader: Optional["asyncio.Task[None]"] = None
        self._watch: Optional[zmq.asyncio.Socket] = None
        self._watcher: Optional["asyncio.Task[None]"] = None
        self._progress: Optional[asyncio.Event] = None
        self._closed = False

    def _dealer(self, addrs: List[str], watched: bool = False) -> zmq.asyncio.Socket:
        """A DEALER as :meth:`Client._dealer` makes it."""
        sock = self._ctx.socket(zmq.DEALER)
        try:
            sock.setsockopt(zmq.IDENTITY, wire.new_msgid().encode())
            if self._curve is not None:
                self._curve.apply(sock)
            sock.setsockopt(zmq.LINGER, self._linger_ms)
            sock.setsockopt(zmq.RCVHWM, 100_000)
            if watched:
                self._watch = link.watch(sock)  # type: ignore[assignment]
            link.connect(sock, addrs)
        except zmq.ZMQError as e:
            if self._watch is not None:
                link.unwatch(sock, self._watch)  # type: ignore[arg-type]
                self._watch = None
            sock.close(0)
            raise errors.EmqConnectionError(f"cannot connect to {','.join(addrs)}: {e}") from None
        return sock

    def _start(self) -> zmq.asyncio.Socket:
        """Check the caller's loop; on first use bind to it, connect, and
        start the reader task."""
        if self._closed:
            raise errors.EmqError("the client is closed")
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
            self._sock = self._dealer(self._addrs, watched=not self.legacy)
            self._sync = zmq.Socket.shadow(self._sock.underlying)
            self._progress = asyncio.Event()
            self._admin_lock = asyncio.Lock()
            self._reader = loop.create_task(self._read())
            if self._watch is not None:
                self._watcher = loop.create_task(self._links(self._watch))
        elif loop is not self._loop:
            raise errors.WrongThread("this AsyncClient belongs to another event loop: make one per loop")
        assert self._sock is not None
        return self._sock

    async def _read(self) -> None:
        """The reader task: wait until something arrived, apply all of it."""
        assert self._sock is not None
        sock = self._sock
        while True:
            await sock.poll()  # POLLIN, no timeout
            self._drain()

    def _drain(self) -> None:
        """Apply every message that has arrived (never blocks), and pulse
        ``_progress`` if there was any. Also called after each send through
        the shadow socket: libzmq may take in arrivals during a send and
        then not signal the socket's descriptor for them, so the reader's
        poll alone could sleep past them."""
        sync, handle = self._sync, self._tracker.handle
        assert sync is not None and self._progress is not None
        n = 0
        while True:
            frames = recv_ready(sync)
            if frames is None:
                break
            n += 1
            msg = wire.parse(frames)
            if msg is not None:
                handle(msg)
        if n:
            self._send_receipts()
            self._progress.set()

    def _send_receipts(self) -> None:
        """RECEIVED for the RESULTs read so far, without blocking (without a
        connection they wait for the next round)."""
        sync = self._sync
        assert sync is not None
        while True:
            frames = self._tracker.take_receipts()
            if frames is None:
                return
            try:
                sync.send(frames[0], _FIRST)
            except zmq.Again:
                self._tracker.give_back_receipts(frames)
                return
            for f in frames[1:-1]:
                sync.send(f, _MORE)
            sync.send(frames[-1], 0)

    async def _links(self, watch: zmq.asyncio.Socket) -> None:
        """The watch task: after a reconnect, say hello and send again what
        was not answered."""
        while True:
            ev = link.link_event(await watch.recv_multipart())
            if ev is None:
                continue
            assert self._sock is not None
            for f in self._tracker.link(ev[0]):
                await self._send(self._sock, f, self.addr)

    async def _send(self, sock: zmq.asyncio.Socket, frames: List[bytes], addr: str) -> None:
        """Send: at once when the socket has room, else waiting up to the
        ack timeout (no router: connection error)."""
        if sock is self._sock and self._sync is not None:
            try:
                self._sync.send(frames[0], _FIRST)
            except zmq.Again:
                pass
            else:
                # the rest of a message is never refused once its first part went
                for f in frames[1:-1]:
                    self._sync.send(f, _MORE)
                self._sync.send(frames[-1], 0)
                if readable(self._sync):
                    self._drain()
                return
        try:
            await asyncio.wait_for(sock.send_multipart(frames, copy=False), self.ack_timeout)
        except asyncio.TimeoutError:
            raise errors.EmqConnectionError(f"cannot send to {addr}: no router there") from None

    async def _wait_event(self, event: asyncio.Event, timeout: Optional[float]) -> bool:
        """Wait for ``event`` up to ``timeout``; whether it was set."""
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def _await(self, p: Pending, cond: "Any", timeout: Optional[float]) -> bool:
        """Wait until ``cond(p)`` or ``timeout``; whether it holds."""
        waiter = p.waker if isinstance(p.waker, _Waiter) else None
        if waiter is None:
            waiter = _Waiter()
            p.waker = waiter
        deadline = None if timeout is None else time.monotonic() + timeout
        while not cond(p):
            waiter.event.clear()
            self._drain()
            if cond(p):
                break
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            await self._wait_event(waiter.event, remaining)
        return True

    async def _post(self, task: Task, queue: Optional[str], headers: str) -> Pending:
        sock = self._start()
        msgid = wire.new_msgid()
        frames = wire.request(msgid, queue or self.queue, headers, task.message)
        p = self._tracker.add(msgid, reply=not self.legacy, frames=frames)
        await self._send(sock, frames, self.addr)
        return p

    async def _repost(self, p: Pending, task: Task, queue: Optional[str], headers: str) -> None:
        p.reject = None
        await self._send(self._start(), wire.request(p.msgid, queue or self.queue, headers, task.message), self.addr)

    async def submit(
        self,
        func: JobSpec,
        *args: Any,
        queue: Optional[str] = None,
        retries: int = 0,
        timeout: float = 0,
        delay: Optional[float] = None,
        headers: Sequence[str] = (),
        **kwargs: Any,
    ) -> "AsyncJob":
        """As :meth:`Client.submit` (``queue-full`` is sent again with
        backoff for up to ``queue_full_timeout``)."""
        task = payload.build(func, args, kwargs)
        hdrs = _core.submit_headers(self.legacy, retries, timeout, delay, headers)
        p = await self._post(task, queue, hdrs)
        if not self.legacy:
            loop = asyncio.get_running_loop()
            give_up = loop.time() + self.queue_full_timeout
            tries = 0
            while True:
                if not await self._await(p, lambda q: q.answered, self.ack_timeout):
                    raise _core.no_answer(self.addr, self.ack_timeout, f"job {p.msgid}")
                if not _core.is_queue_full(p):
                    break
                tries += 1
                pause = _core.full_backoff(tries)
                if loop.time() + pause >= give_up:
                    break
                await asyncio.sleep(pause)
                await self._repost(p, task, queue, hdrs)
            if p.reject is not None:
                raise p.reject
        return AsyncJob(self, p.msgid, p)

    async def submit_many(
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
    ) -> List["AsyncJob"]:
        """As :meth:`Client.submit_many`."""
        limit = window or self.window
        hdrs = _core.submit_headers(self.legacy, retries, timeout, delay, headers)
        jobs: List[AsyncJob] = []
        unanswered: List[Pending] = []
        unfinished: List[Pending] = []
        for item in items:
            p = await self._post(bulk_task(item), queue, hdrs)
            jobs.append(AsyncJob(self, p.msgid, p))
            if self.legacy:
                continue
            unanswered.append(p)
            if len(unanswered) >= limit:
                await self._await_window(unanswered, limit - 1, finished=False)
            if max_unfinished:
                unfinished.append(p)
                if len(unfinished) >= max_unfinished:
                    await self._await_window(unfinished, max_unfinished - 1, finished=True)
        if not self.legacy:
            await self._await_window(unanswered, 0, finished=False)
            refused = [j._p.reject for j in jobs if j._p is not None and j._p.reject is not None]
            if refused and raise_on_reject:
                raise errors.BulkRejected(jobs, refused)
        return jobs

    async def _await_window(self, unanswered: List[Pending], room: int, finished: bool) -> None:
        """As :meth:`Client._await_window`."""
        progress = self._progress
        assert progress is not None
        while _core.drain_list(unanswered, finished) > room:
            progress.clear()
            self._drain()
            if _core.drain_list(unanswered, finished) <= room:
                break
            if not await self._wait_event(progress, self.ack_timeout) and not all(p.answered for p in unanswered):
                raise _core.no_answer(self.addr, self.ack_timeout, f"{len(unanswered)} jobs")

    async def schedule(
        self,
        func: JobSpec,
        *args: Any,
        interval: Optional[float] = None,
        cron: Optional[str] = None,
        queue: Optional[str] = None,
        headers: Sequence[str] = ("guarantee",),
        **kwargs: Any,
    ) -> str:
        """As :meth:`Client.schedule`."""
        return await self._schedule(payload.build(func, args, kwargs), interval, cron, queue, headers, False)

    async def unschedule(
        self,
        func: JobSpec,
        *args: Any,
        queue: Optional[str] = None,
        headers: Sequence[str] = ("guarantee",),
        **kwargs: Any,
    ) -> str:
        """As :meth:`Client.unschedule`."""
        return await self._schedule(payload.build(func, args, kwargs), None, None, queue, headers, True)

    async def _schedule(
        self,
        task: Task,
        interval: Optional[float],
        cron: Optional[str],
        queue: Optional[str],
        headers: Sequence[str],
        unschedule: bool,
    ) -> str:
        if not unschedule and (interval is None) == (cron is None):
            raise ValueError("give either interval or cron")
        sock = self._start()
        msgid = wire.new_msgid()
        frames = wire.schedule(
            msgid, queue or self.queue, ",".join(headers), task.message,
            interval_secs=interval, cron=cron, unschedule=unschedule,
        )
        p = self._tracker.add(msgid, reply=False, frames=frames)
        await self._send(sock, frames, self.addr)
        if not self.legacy:
            if not await self._await(p, lambda q: q.answered, self.ack_timeout):
                raise _core.no_answer(self.addr, self.ack_timeout, f"schedule {msgid}")
            if p.reject is not None:
                raise p.reject
        return msgid

    def job(self, msgid: str) -> "AsyncJob":
        """As :meth:`Client.job`."""
        return AsyncJob(self, msgid, None)

    async def admin(self, op: str, **args: Any) -> Dict[str, Any]:
        """As :meth:`Client.admin`; one request at a time per client."""
        self._start()
        if self.legacy:
            raise errors.Unsupported(f"admin op {op!r} needs an emq router")
        assert self._admin_lock is not None
        async with self._admin_lock:
            if self._admin is None:
                self._admin = self._dealer(self._admin_addrs)
            sock = self._admin
            msgid = wire.new_msgid("admin:")
            await self._send(sock, wire.admin(msgid, {"op": op, **args}), self.admin_addr)
            deadline = time.monotonic() + self.admin_timeout
            while True:
                remaining = deadline - time.monotonic()
                try:
                    if remaining <= 0:
                        raise asyncio.TimeoutError
                    frames = await asyncio.wait_for(sock.recv_multipart(), remaining)
                except asyncio.TimeoutError:
                    sock.close(0)
                    self._admin = None
                    raise errors.EmqConnectionError(
                        f"no answer from the admin socket {self.admin_addr} to {op!r} within {self.admin_timeout} s"
                    ) from None
                msg = wire.parse(frames)
                if msg is not None and msg.command == "REPLY" and msg.orig == msgid:
                    return _core.admin_answer(op, msg.payload)

    async def close(self) -> None:
        """Stop the reader and close the sockets."""
        if self._closed:
            return
        self._closed = True
        for task in (self._reader, self._watcher):
            if task is not None:
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        if self._sync is not None:
            self._send_receipts()
        link.close_sockets(self._sock, self._watch, self._admin, self._linger_ms)

    def __del__(self) -> None:
        link.close_on_drop(self)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def outstanding(self) -> int:
        """Jobs whose handles are alive."""
        return len(self._tracker)


class AsyncJob:
    """A submitted job, awaited on its client's event loop."""

    __slots__ = ("client", "msgid", "_p")

    def __init__(self, client: AsyncClient, msgid: str, pending: Optional[Pending]) -> None:
        self.client = client
        self.msgid = msgid
        self._p = pending

    def __repr__(self) -> str:
        return f"AsyncJob({self.msgid!r})"

    @property
    def accepted(self) -> bool:
        return self._p is not None and self._p.accepted

    def done(self) -> bool:
        """Whether ``await result()`` would return at once."""
        return self._p is not None and self._p.finished

    async def result(self, timeout: Optional[float] = None) -> Any:
        """As :meth:`Job.result`."""
        c = self.client
        c._start()
        p = self._p
        if c.legacy:
            raise errors.Unsupported("results need an emq router (EventMQ 0.3.13 returns none)")
        if p is None or not p.reply:
            return await self._result_by_admin(timeout)
        if not await c._await(p, lambda q: q.finished, timeout):
            raise errors.ResultTimeout(self.msgid, timeout)
        return _core.outcome(p)

    async def _result_by_admin(self, timeout: Optional[float]) -> Any:
        """As :meth:`Job._result_by_admin`, sleeping with asyncio."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.02
        while True:
            finished, value = _core.finished_view_outcome(self.msgid, (await self.status()).view)
            if finished:
                return value
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise errors.ResultTimeout(self.msgid, timeout)
            await asyncio.sleep(pause if deadline is None else min(pause, deadline - now))
            pause = min(pause * 2, 1.0)

    async def status(self) -> JobStatus:
        """As :meth:`Job.status`."""
        answer = await self.client.admin("job", msgid=self.msgid)
        return _core.status_of(answer.get("job") or {})

    async def cancel(self) -> str:
        """As :meth:`Job.cancel`."""
        answer = await self.client.admin("cancel", msgid=self.msgid)
        return str(answer.get("state", ""))
