"""Batches with callbacks, Sidekiq Pro's model, run by the router
(``BATCH`` and the ``batch:ID`` header, docs/PROTOCOL.md "Batches").

    from emq_client import Client, task
    with Client() as c:
        with c.batch(on_success=task(notify, "all ok"), on_complete=task(report)) as b:
            for row in rows:
                b.add(import_row, row)       # any number of adds, from any client
        # closed here: the router runs the callbacks once every job ended
        b.status()                           # BatchStatus(pending=..., succeeded=..., failed=...)

- ``client.batch(on_success=..., on_complete=..., description=..., id=...)``
  opens a batch (the router journals it) and returns its handle.
- ``b.add(func, *args, **kwargs)`` submits a job into it (``submit`` with
  the ``batch:ID`` header; every ``submit`` option applies) and returns the
  job's handle. Another client adds with ``client.batch_of(id).add(...)``
  or ``submit(..., headers=["batch:ID"])``.
- ``b.add_many(items, ...)``: ``submit_many`` into the batch (pipelined).
- ``b.close()`` (or leaving the ``with`` block, also on an exception): no
  more jobs join; adding after that raises :class:`~emq_client.BatchClosed`
  (as adding to a batch the router does not hold).
- Once closed and every job ended (after its retries), the router submits
  ``on_success`` (only if no job failed) and ``on_complete`` (always), each
  once, as ordinary jobs; each gets the batch's status first in its
  arguments: ``{"batch": ID, "event": "success" | "complete", "total",
  "succeeded", "failed", "failed_ids": [msgid, ...]}``.
- ``b.status()``: live counts (:class:`BatchStatus`); ``b.wait(timeout)``
  until the batch is finished (its callbacks submitted).
- ``b.cancel()``: close it and cancel its unfinished jobs (admin op
  ``cancel`` of the batch id); they count as failed, so ``on_success`` is
  skipped and ``on_complete`` runs once the last of them stopped.

A callback is a :func:`~emq_client.task` or :func:`~emq_client.call` job
(not a shell job: it takes an argument).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from . import wire
from .payload import Task


class BatchStatus:
    """A batch's counts as the router reports them: ``total`` jobs,
    ``pending`` (unfinished), ``succeeded``, ``failed`` (after their
    retries); ``state`` is ``open``, ``closed`` or ``finished`` (its
    callbacks submitted); ``failed_ids`` the first failed jobs' msgids;
    ``cancelled``: an operator cancelled it (:meth:`Batch.cancel`);
    ``view`` the router's whole answer (times, callbacks)."""

    __slots__ = ("id", "state", "total", "pending", "succeeded", "failed", "failed_ids", "cancelled", "view")

    def __init__(self, view: Dict[str, Any]) -> None:
        self.view = view
        self.id = str(view.get("batch", ""))
        self.state = str(view.get("state", ""))
        self.total = int(view.get("total", 0))
        self.pending = int(view.get("pending", 0))
        self.succeeded = int(view.get("succeeded", 0))
        self.failed = int(view.get("failed", 0))
        self.failed_ids: List[str] = list(view.get("failed_ids") or [])
        self.cancelled = view.get("cancelled_at_unix_ms") is not None

    @property
    def finished(self) -> bool:
        """Closed, every job ended, the callbacks submitted."""
        return self.state == "finished"

    def __repr__(self) -> str:
        return (
            f"BatchStatus(id={self.id!r}, state={self.state!r}, total={self.total}, pending={self.pending}, "
            f"succeeded={self.succeeded}, failed={self.failed})"
        )


def callback_spec(what: str, t: Optional[Task], queue: str) -> Optional[Dict[str, Any]]:
    """A callback as the ``open`` spec carries it."""
    if t is None:
        return None
    if not isinstance(t, Task):
        raise TypeError(f"{what} must be a task(...) or call(...), got {t!r}")
    try:
        msg = json.loads(t.message)
    except ValueError:
        raise TypeError(f"{what}: {t!r} is not a JSON job (use task() or call())") from None
    return {"queue": queue, "headers": "", "msg": msg}


def open_spec(
    on_success: Optional[Task], on_complete: Optional[Task], description: str, queue: str
) -> bytes:
    """The ``BATCH`` SPEC of an ``open``."""
    spec = {
        "op": "open",
        "on_success": callback_spec("on_success", on_success, queue),
        "on_complete": callback_spec("on_complete", on_complete, queue),
        "description": description,
    }
    return json.dumps(spec).encode("utf-8")


CLOSE_SPEC = json.dumps({"op": "close"}).encode("utf-8")


def with_batch_header(batch_id: str, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """``submit`` keywords with ``batch:ID`` added to its ``headers``."""
    out = dict(kwargs)
    out["headers"] = [*(out.get("headers") or ()), f"{wire.BATCH_HEADER}:{batch_id}"]
    return out


class Batch:
    """A batch of the blocking :class:`~emq_client.Client`. ``id`` is its
    id on the router. A ``with`` block closes it at its end."""

    __slots__ = ("client", "id")

    def __init__(self, client: Any, batch_id: str) -> None:
        self.client = client
        self.id = batch_id

    def __repr__(self) -> str:
        return f"Batch({self.id!r})"

    def add(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        """Submit ``func(*args, **kwargs)`` into the batch (``submit``'s
        options apply); the job's handle."""
        return self.client.submit(func, *args, **with_batch_header(self.id, kwargs))

    def add_many(self, items: Any, **kwargs: Any) -> Any:
        """``submit_many`` into the batch (pipelined; its options apply);
        the jobs' handles."""
        return self.client.submit_many(items, **with_batch_header(self.id, kwargs))

    def close(self) -> None:
        """No more jobs join; the callbacks run once every job ended.
        Closing a closed or finished batch is fine; one the router does
        not hold raises :class:`~emq_client.Rejected` (reason
        ``not-found``)."""
        self.client._run(self.client._batch_send(self.id, CLOSE_SPEC, "close"))

    def status(self) -> BatchStatus:
        """The batch's live counts. A batch the router does not hold
        (unknown, or finished before the router's last 1,000) raises
        :class:`~emq_client.JobNotFound` (an ``AdminError`` of kind
        ``not-found``)."""
        return self.client._run(self.client._batch_status(self.id))  # type: ignore[no-any-return]

    def wait(self, timeout: Optional[float] = None) -> BatchStatus:
        """Wait until the batch is finished (closed, every job ended, its
        callbacks submitted); its status. Raises
        :class:`~emq_client.ResultTimeout` after ``timeout`` seconds."""
        return self.client._run(self.client._batch_wait(self.id, timeout))  # type: ignore[no-any-return]

    def cancel(self) -> str:
        """Close the batch and cancel its unfinished jobs (admin op
        ``cancel``): waiting ones at once, running ones by their job
        managers. Returns ``cancelled`` when every job has ended (the
        callbacks are submitted), ``cancelling`` while some still stop.
        They count as failed: ``on_success`` is skipped, ``on_complete``
        runs. :class:`~emq_client.AdminError` kind ``conflict`` when the
        batch had already finished."""
        return self.client._run(self.client._cancel(self.id))  # type: ignore[no-any-return]

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncBatch:
    """A batch of the :class:`~emq_client.AsyncClient`: ``b = await
    c.batch(...)``, or ``async with c.batch(...) as b:`` (closed at its
    end)."""

    __slots__ = ("client", "id", "_open")

    def __init__(self, client: Any, batch_id: str, open_plan: Any = None) -> None:
        self.client = client
        self.id = batch_id
        self._open = open_plan

    def __repr__(self) -> str:
        return f"AsyncBatch({self.id!r})"

    async def _opened(self) -> "AsyncBatch":
        plan, self._open = self._open, None
        if plan is not None:
            await self.client._run(plan)
        return self

    def __await__(self) -> Any:
        return self._opened().__await__()

    async def add(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        """As :meth:`Batch.add`."""
        return await self.client.submit(func, *args, **with_batch_header(self.id, kwargs))

    async def add_many(self, items: Any, **kwargs: Any) -> Any:
        """As :meth:`Batch.add_many`."""
        return await self.client.submit_many(items, **with_batch_header(self.id, kwargs))

    async def close(self) -> None:
        """As :meth:`Batch.close`."""
        await self.client._run(self.client._batch_send(self.id, CLOSE_SPEC, "close"))

    async def status(self) -> BatchStatus:
        """As :meth:`Batch.status`."""
        return await self.client._run(self.client._batch_status(self.id))  # type: ignore[no-any-return]

    async def wait(self, timeout: Optional[float] = None) -> BatchStatus:
        """As :meth:`Batch.wait`."""
        return await self.client._run(self.client._batch_wait(self.id, timeout))  # type: ignore[no-any-return]

    async def cancel(self) -> str:
        """As :meth:`Batch.cancel`."""
        return await self.client._run(self.client._cancel(self.id))  # type: ignore[no-any-return]

    async def __aenter__(self) -> "AsyncBatch":
        return await self._opened()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


def check_id(batch_id: str) -> str:
    """A batch id the router takes (1 to 128 bytes, no ``,`` nor ``/``)."""
    b = batch_id.encode("utf-8")
    if not b or len(b) > 128 or "," in batch_id or "/" in batch_id or batch_id.strip() != batch_id:
        raise ValueError(f"batch id {batch_id!r}: 1 to 128 bytes, no ',' nor '/', no spaces at its ends")
    return batch_id


__all__ = ["AsyncBatch", "Batch", "BatchStatus"]
