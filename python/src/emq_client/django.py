"""Enqueue on commit for Django: ``submit_on_commit``.

    from emq_client.django import submit_on_commit

    with transaction.atomic():
        order = Order.objects.create(...)
        submit_on_commit("shop.jobs.send_receipt", order.pk, unique_key=f"receipt-{order.pk}")

The job is submitted through ``client`` (default: this thread's
:func:`~emq_client.thread_client`, ``$EMQ_FRONTEND_ADDR`` or the default
address) by Django's ``transaction.on_commit`` once the transaction (of
database ``using``) commits; never if it rolls back (also a rolled-back
savepoint drops what was registered inside it). Outside a transaction
(autocommit) it is submitted at once, as ``on_commit`` does. Arguments
are ``Client.submit``'s (job arguments, ``queue=``, ``unique_key=``...).
Returns an :class:`~emq_client._oncommit.OnCommit` handle: ``.job`` is the
Job once submitted. Django is imported only when this is called.
"""

from __future__ import annotations

from typing import Any, Optional

from ._oncommit import OnCommit

__all__ = ["submit_on_commit", "OnCommit"]


def submit_on_commit(func: Any, *args: Any, using: Optional[str] = None, client: Optional[Any] = None, **kwargs: Any) -> OnCommit:
    """Submit ``func(*args, **kwargs)`` once the current transaction of
    database ``using`` commits (see the module documentation)."""
    from django.db import transaction  # type: ignore[import-untyped,import-not-found,unused-ignore]

    handle = OnCommit(func, args, kwargs, client)
    transaction.on_commit(handle.submit, using=using)
    return handle
