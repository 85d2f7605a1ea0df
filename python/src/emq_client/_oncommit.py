"""What both enqueue-on-commit hooks share (:mod:`emq_client.django`,
:mod:`emq_client.sqlalchemy`): a submit kept until the database transaction
it was made in commits, and dropped if it rolls back.

A job submitted inside a transaction that then rolls back must not run,
and a job must not reach a worker before the rows it reads are
committed. So the submit is deferred: :class:`OnCommit` holds the call,
and the hook runs it after the commit. The job is then submitted like any
other (``client.submit``), so a process that dies between the commit and
the submit loses it: for atomic enqueueing with the application's own
writes see docs/UNIQUE_AND_ON_COMMIT.md ("PostgreSQL outbox").
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Optional, Tuple

log = logging.getLogger("emq_client")


class OnCommit:
    """A submit waiting for its transaction: ``job`` is the
    :class:`~emq_client.Job` once the transaction committed and the router
    accepted it (None before, and for good when the transaction rolled
    back: ``state`` says which: ``waiting``, ``submitted``, ``dropped``,
    ``failed`` with ``error``)."""

    __slots__ = ("func", "args", "kwargs", "client", "job", "state", "error")

    def __init__(self, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], client: Optional[Any]) -> None:
        self.func = func
        self.args = args
        self.kwargs = kwargs
        self.client = client
        self.job: Optional[Any] = None
        self.state = "waiting"
        self.error: Optional[BaseException] = None

    def __repr__(self) -> str:
        return f"OnCommit({self.state}, job={self.job!r})"

    def submit(self) -> None:
        """Submit now (the transaction committed). A failure is logged and
        kept (``state`` ``failed``, ``error``), not raised: the commit
        already happened, and the hook runs inside the database layer's
        own callback."""
        client = self.client if self.client is not None else _default_client()
        try:
            self.job = client.submit(self.func, *self.args, **self.kwargs)
            self.state = "submitted"
        except Exception as e:  # noqa: BLE001 - kept on the handle and logged
            self.state = "failed"
            self.error = e
            log.error("submit after commit failed (the transaction is committed): %s", e)

    def drop(self) -> None:
        """The transaction rolled back: never submitted."""
        if self.state == "waiting":
            self.state = "dropped"


def _default_client() -> Any:
    from .client import thread_client

    return thread_client()


Submitter = Callable[[], None]
