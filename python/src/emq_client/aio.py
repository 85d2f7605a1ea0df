"""The asyncio client: :class:`AsyncClient` and :class:`AsyncJob`, the same
API as :class:`~emq_client.Client` with ``await``.

One reader task per client receives everything the router sends on the
frontend and wakes the jobs it concerns (an ``asyncio.Event`` per job), so
any number of coroutines can await results at once; it confirms RESULTs with
RECEIVED. A second task watches the connections: after a reconnect (a
router restarted, or another on the failover list took over) it says hello
and sends again what was not answered (see :class:`~emq_client.Client`). A client belongs to
the event loop it was first used on (zmq.asyncio sockets are bound to
one); use from another loop or thread raises :class:`WrongThread`. In a
child after ``os.fork()`` it starts over on the child's loop with fresh
sockets.

What the client decides is in :mod:`emq_client._base`, shared with the
blocking client; this module is the asyncio driver of its plans.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Union

import zmq
import zmq.asyncio

from . import _base, _core, errors, link, options, payload, wire
from ._base import Admin, Await, BulkItem, Plan, SendMany, Sleep
from ._core import JobProgress, JobStatus, Pending
from ._sockio import readable, recv_ready, send_frames_now
from .batch import AsyncBatch
from .canvas import Canvas
from .payload import JobSpec, Task


class _Waiter:
    """The asyncio side of one Pending record: set when it changes."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def __call__(self) -> None:
        self.event.set()


class AsyncClient(_base.BaseClient):
    """An asyncio connection to an emq router; options as :class:`Client`
    (``context``: a ``zmq.asyncio.Context``)."""

    def _setup(self) -> None:
        self._job_type = AsyncJob
        self._reset()

    def _reset(self) -> None:
        """No loop, no sockets yet: the first call binds and connects."""
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

    def _dealer(self, addrs: List[str], watched: bool = False) -> Any:
        try:
            return link.dealer(self._ctx, addrs, keys=self._curve, linger_ms=self._linger_ms, watched=watched)
        except zmq.ZMQError as e:
            raise errors.EmqConnectionError(f"cannot connect to {','.join(addrs)}: {e}") from None

    def _start(self) -> zmq.asyncio.Socket:
        """Check the caller's loop; on first use (and first use in a forked
        child) bind to it, connect, and start the reader task."""
        if self._closed:
            raise errors.EmqError("the client is closed")
        if self._forked():
            self._reset()  # the parent's sockets and tasks: left alone
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
            self._ctx: "zmq.Context[Any]" = self._context or zmq.asyncio.Context.instance()
            self._sock, self._watch = self._dealer(self._addrs, watched=not self.legacy)
            assert self._sock is not None
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
        sync, handle = self._sync, self._tracker.handle_frames
        assert sync is not None and self._progress is not None
        n = 0
        while True:
            frames = recv_ready(sync)
            if frames is None:
                break
            n += 1
            handle(frames)
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
            if not send_frames_now(sync, frames):
                self._tracker.give_back_receipts(frames)
                return

    async def _links(self, watch: zmq.asyncio.Socket) -> None:
        """The watch task: apply connection changes, and send what the
        tracker sends again after a reconnect or a drop (when it says)."""
        tracker = self._tracker
        while True:
            wake = tracker.poll_timeout()
            ms = None if wake is None else max(0, int((wake - time.monotonic()) * 1000 + 0.999))
            again: List[List[bytes]] = []
            if await watch.poll(ms):
                ev = link.link_event(await watch.recv_multipart())
                if ev is not None:
                    again += tracker.link(*ev, time.monotonic())
            again += tracker.handle_timeout(time.monotonic())
            if again and self._sock is not None and self._sync is not None:
                readable(self._sync)  # libzmq applies its pipe changes first
                for f in again:
                    await self._send(self._sock, f, self.addr)

    async def _send(self, sock: zmq.asyncio.Socket, frames: List[bytes], addr: str) -> None:
        """Send: at once when the socket has room, else waiting up to the
        ack timeout (no router: connection error)."""
        if sock is self._sock and self._sync is not None and send_frames_now(self._sync, frames):
            if readable(self._sync):
                self._drain()
            return
        try:
            await asyncio.wait_for(sock.send_multipart(frames, copy=False), self.ack_timeout)
        except asyncio.TimeoutError:
            raise errors.EmqConnectionError(f"cannot send to {addr}: no router there") from None

    async def _send_many(self, sock: zmq.asyncio.Socket, messages: List[List[bytes]]) -> None:
        """A :class:`~emq_client._base.SendMany`: each message at once while
        the socket has room (else as :meth:`_send`), then apply what has
        arrived meanwhile."""
        sync = self._sync
        assert sync is not None
        for frames in messages:
            if not send_frames_now(sync, frames):
                await self._send(sock, frames, self.addr)
        if readable(sync):
            self._drain()

    async def _until(self, cond: Callable[[], bool], timeout: Optional[float], p: Optional[Pending]) -> bool:
        """Wait until ``cond()`` or ``timeout``; whether it holds. Woken by
        ``p``'s changes when given (many coroutines may each await their
        job), else by any arrival."""
        if p is None:
            event = self._progress
        else:
            if not isinstance(p.waker, _Waiter):
                p.waker = _Waiter()
            event = p.waker.event
        assert event is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while not cond():
            event.clear()
            self._drain()
            if cond():
                break
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except asyncio.TimeoutError:
                pass
        return True

    async def _run(self, plan: Plan) -> Any:
        """Run a plan of :mod:`emq_client._base` on this loop: do each
        step's I/O, hand back its outcome; the plan's value."""
        sock = self._start()
        out: Any = None
        try:
            while True:
                step = plan.send(out)
                out = None
                if isinstance(step, list):
                    await self._send(sock, step, self.addr)
                elif isinstance(step, SendMany):
                    await self._send_many(sock, step.messages)
                elif isinstance(step, Await):
                    out = await self._until(step.cond, step.timeout, step.pending)
                elif isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                elif isinstance(step, Admin):
                    out = await self.admin(step.op, **step.args)
                else:
                    raise TypeError(f"not a plan step: {step!r}")
        except StopIteration as stop:
            return stop.value

    # -- the API ------------------------------------------------------------

    async def submit(
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
    ) -> "AsyncJob":
        """As :meth:`Client.submit`."""
        plan = self._maybe_workflow(func, args, kwargs, queue, retries, timeout, delay, headers, unique_key, key, priority)
        if plan is not None:
            return await self._run(plan)  # type: ignore[no-any-return]
        assert not isinstance(func, Canvas)
        options.refuse_collisions(func, options.given(locals()))
        task = payload.build(func, args, kwargs)
        unique = wire.unique_headers(unique_key, unique_for, on_conflict)
        hdrs = self._headers(retries or 0, timeout or 0, delay, headers or (), unique, key, priority)
        return await self._run(self._submit(task, queue, hdrs))  # type: ignore[no-any-return]

    async def submit_many(
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
    ) -> List["AsyncJob"]:
        """As :meth:`Client.submit_many`."""
        hdrs = self._headers(retries, timeout, delay, headers, (), key, priority)
        return await self._run(self._submit_many(items, queue, hdrs, window, max_unfinished, raise_on_reject))  # type: ignore[no-any-return]

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
        task = payload.build(func, args, kwargs)
        return await self._run(self._schedule(task, interval, cron, queue, headers, False))  # type: ignore[no-any-return]

    async def unschedule(
        self,
        func: JobSpec,
        *args: Any,
        queue: Optional[str] = None,
        headers: Sequence[str] = ("guarantee",),
        **kwargs: Any,
    ) -> str:
        """As :meth:`Client.unschedule`."""
        task = payload.build(func, args, kwargs)
        return await self._run(self._schedule(task, None, None, queue, headers, True))  # type: ignore[no-any-return]

    async def set_limits(
        self,
        queue: str,
        *,
        concurrency: Any = _core._UNSET,
        concurrency_per_key: Any = _core._UNSET,
        rate: Any = _core._UNSET,
        rate_per_key: Any = _core._UNSET,
        fair: Any = _core._UNSET,
    ) -> Dict[str, Any]:
        """As :meth:`Client.set_limits`."""
        args = _core.limits_args(queue, concurrency, concurrency_per_key, rate, rate_per_key, fair)
        return await self._run(self._set_limits(args))  # type: ignore[no-any-return]

    async def limits(self, queue: Optional[str] = None) -> List[Dict[str, Any]]:
        """As :meth:`Client.limits`."""
        return await self._run(self._limits(queue))  # type: ignore[no-any-return]

    async def clear_limits(self, queue: str) -> None:
        """As :meth:`Client.clear_limits`."""
        await self._run(self._clear_limits(queue))

    def batch(
        self,
        on_success: Optional[Task] = None,
        on_complete: Optional[Task] = None,
        *,
        description: str = "",
        queue: Optional[str] = None,
        id: Optional[str] = None,
    ) -> AsyncBatch:
        """As :meth:`Client.batch`: ``b = await c.batch(...)`` or ``async
        with c.batch(...) as b:`` (opened on entry, closed at its end)."""
        bid, plan = self._batch_open(id, on_success, on_complete, description, queue)
        return AsyncBatch(self, bid, plan)

    def batch_of(self, batch_id: str) -> AsyncBatch:
        """As :meth:`Client.batch_of`."""
        return AsyncBatch(self, batch_id)

    def job(self, msgid: str) -> "AsyncJob":
        """As :meth:`Client.job`."""
        return AsyncJob(self, msgid, None)

    async def admin(self, op: str, **args: Any) -> Dict[str, Any]:
        """As :meth:`Client.admin`; one request at a time per client."""
        self._start()
        call = self._admin_call(op, args)
        assert self._admin_lock is not None
        async with self._admin_lock:
            if self._admin is None:
                self._admin, _ = self._dealer(self._admin_addrs)
            sock = self._admin
            assert sock is not None
            await self._send(sock, call.frames, self.admin_addr)
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
                    raise call.expired() from None
                answer = call.answer(frames)
                if answer is not None:
                    return answer

    async def close(self) -> None:
        """Stop the reader and close the sockets."""
        if self._closed:
            return
        self._closed = True
        if self._forked():
            return  # the parent's sockets and tasks: left alone
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


class AsyncJob(_base.BaseJob):
    """A submitted job, awaited on its client's event loop."""

    __slots__ = ()
    client: AsyncClient

    def done(self) -> bool:
        """Whether ``await result()`` would return at once."""
        return self._p is not None and self._p.finished

    async def result(self, timeout: Optional[float] = None) -> Any:
        """As :meth:`Job.result`."""
        return await self.client._run(self.client._result(self.msgid, self._p, timeout))

    async def status(self) -> JobStatus:
        """As :meth:`Job.status`."""
        return await self.client._run(self.client._status(self.msgid))  # type: ignore[no-any-return]

    async def progress(self) -> Optional[JobProgress]:
        """As :meth:`Job.progress`."""
        return await self.client._run(self.client._job_progress(self.msgid))  # type: ignore[no-any-return]

    async def cancel(self) -> str:
        """As :meth:`Job.cancel`."""
        return await self.client._run(self.client._cancel(self.msgid))  # type: ignore[no-any-return]
