"""EventMQ 0.3.13's ``eventmq.client.jobs``, drop-in: the ``@job``
decorator (and its class :class:`Job`), ``schedule`` and ``unschedule``.

``f.delay(*args, **kwargs)`` sends the job exactly as 0.3.13 does (same
frames, no waiting) and returns its msgid; without a broker address
(``broker_addr`` or ``$EMQ_BROKER_ADDR``), or with ``async_=False``, it
calls ``f`` right here, as 0.3.13 does. Unlike 0.3.13, which opened a new
socket on every call, one socket per thread and address is kept.

emq adds ``f.submit(*args, **kwargs)``: the same job through this thread's
:class:`~emq_client.Client`, returning a :class:`~emq_client.Job` whose
``result()`` gives the value (emq routers only).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, TypeVar, Union

from . import client as _client
from . import messages
from .errors import EmqConnectionError
from .sender import Sender

logger = logging.getLogger(__name__)

ENV_BROKER_ADDR = "EMQ_BROKER_ADDR"
F = TypeVar("F", bound=Callable[..., Any])

_local = threading.local()


def thread_sender(addr: str) -> Sender:
    """This thread's connected :class:`Sender` for ``addr``."""
    senders: Dict[str, Sender] = _local.__dict__.setdefault("senders", {})
    s = senders.get(addr)
    if s is None:
        s = senders[addr] = Sender()
        s.connect(addr)
    return s


class Job:
    """The decorator class: ``@Job(queue="email")``. ``broker_addr``
    defaults to ``$EMQ_BROKER_ADDR``; ``async_=False`` makes ``delay`` call
    the function in place (for unit tests)."""

    def __init__(self, broker_addr: Optional[str] = None, queue: Optional[str] = None, async_: bool = True, *args: Any, **kwargs: Any) -> None:
        self.broker_addr = broker_addr or os.environ.get(ENV_BROKER_ADDR)
        self.queue = queue
        self.async_ = async_

    def __call__(self, f: F) -> F:
        """Attach ``delay`` (0.3.13) and ``submit`` (emq) to ``f``."""

        def delay(*args: Any, **kwargs: Any) -> Any:
            if self.async_ and self.broker_addr:
                return messages.defer_job(thread_sender(self.broker_addr), f, args=args, kwargs=kwargs, queue=self.queue)
            if self.async_ and not self.broker_addr:
                logger.warning("No EMQ_BROKER_ADDR defined. Running function `%s` synchronously", f.__name__)
            return f(*args, **kwargs)

        def submit(*args: Any, **kwargs: Any) -> "_client.Job":
            c = _client.thread_client(self.broker_addr)
            return c.submit(f, *args, queue=self.queue, **kwargs)

        f.delay = delay  # type: ignore[attr-defined]
        f.submit = submit  # type: ignore[attr-defined]
        return f


def job(func: Optional[Callable[..., Any]] = None, broker_addr: Optional[str] = None, queue: Optional[str] = None, async_: bool = True, *args: Any, **kwargs: Any) -> Any:
    """``@job`` or ``@job(queue=..., broker_addr=..., async_=...)`` (0.3.13
    required ``func`` and so only allowed the bare form; both work here)."""
    decorator = Job(queue=queue, broker_addr=broker_addr, async_=async_)
    if callable(func):
        return decorator(func)
    return decorator


def _broker(broker_addr: Optional[str]) -> str:
    addr = broker_addr or os.environ.get(ENV_BROKER_ADDR)
    if not addr:
        raise EmqConnectionError(f"unknown broker address: {addr}")
    return addr


def schedule(
    func: Union[str, Callable[..., Any]],
    broker_addr: Optional[str] = None,
    interval_secs: Optional[float] = None,
    args: Sequence[Any] = (),
    kwargs: Optional[Mapping[str, Any]] = None,
    class_args: Sequence[Any] = (),
    class_kwargs: Optional[Mapping[str, Any]] = None,
    headers: Sequence[str] = ("guarantee",),
    queue: str = messages.DEFAULT_QUEUE_NAME,
    cron: Optional[str] = None,
) -> Optional[str]:
    """0.3.13's ``eventmq.schedule``: the SCHEDULE's msgid. As in 0.3.13 the
    schedule goes to the default queue whatever ``queue`` says (its frames
    are kept identical so 0.3.13 and emq code can remove each other's
    schedules); ``Client.schedule`` honours the queue."""
    return messages.schedule(
        thread_sender(_broker(broker_addr)), func, interval_secs=interval_secs, args=args,
        kwargs=kwargs, class_args=class_args, class_kwargs=class_kwargs,
        headers=headers, queue=messages.DEFAULT_QUEUE_NAME, cron=cron,
    )


def unschedule(
    func: Union[str, Callable[..., Any]],
    broker_addr: Optional[str] = None,
    interval_secs: Optional[float] = None,
    args: Sequence[Any] = (),
    kwargs: Optional[Mapping[str, Any]] = None,
    class_args: Sequence[Any] = (),
    class_kwargs: Optional[Mapping[str, Any]] = None,
    headers: Sequence[str] = ("guarantee",),
    queue: str = messages.DEFAULT_QUEUE_NAME,
    cron: Optional[str] = None,
) -> Optional[str]:
    """0.3.13's ``eventmq.unschedule``: the UNSCHEDULE's msgid (default
    queue, as :func:`schedule`)."""
    return messages.schedule(
        thread_sender(_broker(broker_addr)), func, interval_secs=interval_secs, args=args,
        kwargs=kwargs, class_args=class_args, class_kwargs=class_kwargs,
        headers=headers, queue=messages.DEFAULT_QUEUE_NAME, cron=cron, unschedule=True,
    )
