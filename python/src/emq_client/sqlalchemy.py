"""Enqueue on commit for SQLAlchemy sessions: ``submit_on_commit``.

    from emq_client.sqlalchemy import submit_on_commit

    with Session(engine) as session, session.begin():
        session.add(order)
        submit_on_commit(session, "shop.jobs.send_receipt", order.id)

The job is kept on the session and submitted through ``client`` (default:
this thread's :func:`~emq_client.thread_client`) after the session's
outermost transaction commits (its ``after_commit``, then its
``after_transaction_end``; a savepoint's commit does not count); it is
dropped when that transaction rolls back, and when a savepoint
(``session.begin_nested()``) it was registered in rolls back
(``after_soft_rollback``). Arguments are ``Client.submit``'s. Returns an
:class:`~emq_client._oncommit.OnCommit` handle (``.job`` once submitted).
SQLAlchemy is imported only when this is called.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from ._oncommit import OnCommit

__all__ = ["submit_on_commit", "OnCommit"]

#: Where a session keeps its waiting submits: ``session.info[KEY]``, a list
#: of ``(transaction, OnCommit)``.
KEY = "emq_client.on_commit"
#: Set when the session's outermost transaction committed (between its
#: ``after_commit`` and its ``after_transaction_end``).
COMMITTED = "emq_client.on_commit.committed"


def submit_on_commit(session: Any, func: Any, *args: Any, client: Optional[Any] = None, **kwargs: Any) -> OnCommit:
    """Submit ``func(*args, **kwargs)`` once ``session``'s transaction
    commits (see the module documentation)."""
    from sqlalchemy import event  # type: ignore[import-not-found,unused-ignore]

    handle = OnCommit(func, args, kwargs, client)
    # The innermost transaction: a savepoint's rollback drops what was
    # registered inside it. A session outside a transaction begins one
    # (autobegin), as the next statement would.
    tx = session.get_nested_transaction() or session.get_transaction() or session.begin()
    waiting: Optional[List[Tuple[Any, OnCommit]]] = session.info.get(KEY)
    if waiting is None:
        waiting = session.info[KEY] = []
        event.listen(session, "after_commit", _after_commit)
        event.listen(session, "after_soft_rollback", _after_soft_rollback)
        event.listen(session, "after_transaction_end", _after_transaction_end)
    waiting.append((tx, handle))
    return handle


def _after_commit(session: Any) -> None:
    # Also called when a savepoint commits (the savepoint is still the
    # session's nested transaction then): only the outermost counts.
    if session.get_nested_transaction() is None:
        session.info[COMMITTED] = True


def _after_transaction_end(session: Any, transaction: Any) -> None:
    """The outermost transaction ended: committed, its submits go (what a
    rollback dropped is gone already)."""
    if getattr(transaction, "parent", None) is not None:
        return
    committed = session.info.pop(COMMITTED, False)
    waiting = session.info.get(KEY) or []
    session.info[KEY] = []
    for _, handle in waiting:
        if committed:
            handle.submit()
        else:
            handle.drop()


def _after_soft_rollback(session: Any, previous_transaction: Any) -> None:
    """``previous_transaction`` rolled back: drop what was registered in it
    or in a transaction nested inside it."""
    waiting = session.info.get(KEY) or []
    keep = []
    for tx, handle in waiting:
        if _within(tx, previous_transaction):
            handle.drop()
        else:
            keep.append((tx, handle))
    session.info[KEY] = keep
    if getattr(previous_transaction, "parent", None) is None:
        session.info.pop(COMMITTED, None)


def _within(tx: Any, outer: Any) -> bool:
    while tx is not None:
        if tx is outer:
            return True
        tx = getattr(tx, "parent", None)
    return False
