"""EventMQ 0.3.13's ``eventmq.client.jobs``, drop-in: the ``@job``
decorator (and its class :class:`Job`), ``schedule`` and ``unschedule``.

``f.delay(*args, **kwargs)`` sends the job exactly as 0.3.13 does (same
frames, no waiting) and returns its msgid. Unlike 0.3.13, which opened a new
socket on every call, one socket per thread and address is kept.

**Inline execution is an opt-in.** 0.3.13 ran ``f`` right here, with only a
log warning, when no broker address was set: a forgotten variable went
unnoticed in production. Here ``delay`` runs ``f`` in the caller only when
asked: ``@job(async_=False)`` (0.3.13's flag), ``@job(inline=True)``, or
``EMQ_INLINE=1`` in the environment (for tests and local runs, read at each
call). Without a broker address (``broker_addr``, ``$EMQ_BROKER_ADDR``,
``$EVENTMQ_FRONTEND_ADDR`` or ``FRONTEND_ADDR`` in the config file:
:mod:`emq_client.settings`) and without the opt-in, ``delay`` raises
:class:`~emq_client.errors.EmqConnectionError` saying both.

emq adds, typed (``mypy --strict`` checks the arguments against ``f``'s
signature, and the result's type against ``f``'s return type):

- ``f.submit(*args, **kwargs)`` → :class:`~emq_client.Job` ``[T]``: the
  job through this thread's :class:`~emq_client.Client`; ``result()``
  gives ``f``'s value (emq routers only). Its keywords are ``f``'s
  arguments.
- ``f.options(queue=, retries=, timeout=, delay=, headers=)`` → an object
  whose ``submit(*args, **kwargs)`` submits with those job options: the
  explicit form that keeps options apart from ``f``'s own arguments
  (:mod:`emq_client.options`). ``f.options(timeout=3).submit(url,
  timeout=10)`` gives the job a 3 s limit and ``f`` ``timeout=10``.

For existing callers, ``f.submit(x, timeout=3)`` where ``f`` has no
parameter named ``timeout`` still takes it as the job's option (with a
``DeprecationWarning``: use ``f.options``); where ``f`` has one, it is
``f``'s argument, as its type says.
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import TYPE_CHECKING, Any, Callable, Dict, Generic, Mapping, Optional, Sequence, TypeVar, Union, overload

from . import client as _client
from . import messages, options as _options, payload, settings
from .errors import EmqConnectionError
from .sender import Sender

ENV_BROKER_ADDR = "EMQ_BROKER_ADDR"
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

if TYPE_CHECKING:
    from typing_extensions import ParamSpec, Protocol, Unpack

    P = ParamSpec("P")

    class WithOptions(Protocol[P, T_co]):
        """``f.options(...)``: ``submit`` takes exactly ``f``'s arguments."""

        def submit(self, *args: P.args, **kwargs: P.kwargs) -> "_client.Job[T_co]": ...

    class JobFunction(Protocol[P, T_co]):
        """What ``@job`` makes of a function ``Callable[P, T]`` (for type
        checkers; at run time it is the function itself, with these
        attributes, as in 0.3.13)."""

        def __call__(self, *args: P.args, **kwargs: P.kwargs) -> T_co: ...

        def delay(self, *args: P.args, **kwargs: P.kwargs) -> Any:
            """The msgid (or, run inline, ``f``'s value)."""

        def submit(self, *args: P.args, **kwargs: P.kwargs) -> "_client.Job[T_co]": ...

        def options(self, **options: Unpack[_options.SubmitOptions]) -> "WithOptions[P, T_co]": ...


_local = threading.local()


def thread_sender(addr: str) -> Sender:
    """This thread's connected :class:`Sender` for ``addr``."""
    senders: Dict[str, Sender] = _local.__dict__.setdefault("senders", {})
    s = senders.get(addr)
    if s is None:
        s = senders[addr] = Sender()
        s.connect(addr)
    return s


def _configured_broker() -> Optional[str]:
    """The broker address the settings name, or None (the built-in default
    does not count: ``delay`` is fire and forget, and would send into a
    router that is not there)."""
    conf = settings.load()
    if conf.get("FRONTEND_ADDR") is None:
        return None
    return settings.broker_addr(conf)[0]


def _name(f: Callable[..., Any]) -> str:
    return f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', getattr(f, '__name__', repr(f)))}"


class _WithOptions(Generic[T]):
    """``f.options(...)``: ``f`` with job options; ``submit(*args,
    **kwargs)`` passes every argument to ``f``."""

    def __init__(self, decorator: "Job", f: Callable[..., T], opts: Mapping[str, Any]) -> None:
        _options.unknown(opts)
        self._decorator = decorator
        self._f = f
        self._opts = dict(opts)

    def submit(self, *args: Any, **kwargs: Any) -> "_client.Job[T]":
        """Submit ``f(*args, **kwargs)`` with the options; its Job."""
        return self._decorator._submit(self._f, args, kwargs, self._opts)


class Job:
    """The decorator class: ``@Job(queue="email")``. ``broker_addr``
    defaults to the settings (``$EMQ_BROKER_ADDR``, ...: module
    documentation); ``async_=False`` or ``inline=True`` make ``delay`` call
    the function in place (for unit tests), as does ``$EMQ_INLINE=1``."""

    def __init__(
        self,
        broker_addr: Optional[str] = None,
        queue: Optional[str] = None,
        async_: bool = True,
        *args: Any,
        inline: bool = False,
        **kwargs: Any,
    ) -> None:
        self.broker_addr = broker_addr or os.environ.get(ENV_BROKER_ADDR)
        self.queue = queue
        self.async_ = async_
        self.inline = inline

    def __call__(self, f: "Callable[P, T]") -> "JobFunction[P, T]":
        """Attach ``delay`` (0.3.13), ``submit`` and ``options`` (emq) to
        ``f``."""

        def delay(*args: Any, **kwargs: Any) -> Any:
            if not self.async_ or self.inline or settings.inline_enabled():
                return f(*args, **kwargs)
            addr = self.broker_addr or _configured_broker()
            if not addr:
                raise EmqConnectionError(
                    f"{_name(f)}.delay(): no broker address: set EMQ_BROKER_ADDR (or "
                    "EVENTMQ_FRONTEND_ADDR, FRONTEND_ADDR in the config file, @job(broker_addr=...)); "
                    f"to run the function here instead, opt in with {settings.INLINE_ENV}=1 or @job(inline=True)"
                )
            return messages.defer_job(thread_sender(addr), f, args=args, kwargs=kwargs, queue=self.queue)

        def submit(*args: Any, **kwargs: Any) -> "_client.Job[Any]":
            opts = {k: kwargs.pop(k) for k in list(kwargs) if k in _options.SUBMIT_OPTIONS and not _options.takes_keyword(f, k)}
            if opts:
                warnings.warn(
                    f"{_name(f)}.submit(..., {', '.join(f'{k}=' for k in opts)}): job options among the "
                    f"function's arguments; say {getattr(f, '__name__', 'f')}.options({next(iter(opts))}=...).submit(...)",
                    DeprecationWarning,
                    stacklevel=2,
                )
            return self._submit(f, args, kwargs, opts)

        def with_options(**opts: Any) -> _WithOptions[Any]:
            return _WithOptions(self, f, opts)

        f.delay = delay  # type: ignore[attr-defined]
        f.submit = submit  # type: ignore[attr-defined]
        f.options = with_options  # type: ignore[attr-defined]
        return f  # type: ignore[return-value]

    def _submit(self, f: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any], opts: Mapping[str, Any]) -> "_client.Job[Any]":
        """``f(*args, **kwargs)`` as a Task (every keyword is ``f``'s), with
        the job options ``opts`` (the decorator's queue unless given)."""
        c = _client.thread_client(self.broker_addr)
        task = payload.python(f, args, kwargs)
        opts = dict(opts)
        opts.setdefault("queue", self.queue)
        return c.submit(task, **opts)


@overload
def job(func: "Callable[P, T]", broker_addr: Optional[str] = None, queue: Optional[str] = None, async_: bool = True, *, inline: bool = False) -> "JobFunction[P, T]": ...


@overload
def job(func: None = None, broker_addr: Optional[str] = None, queue: Optional[str] = None, async_: bool = True, *, inline: bool = False) -> Job: ...


def job(func: Optional[Callable[..., Any]] = None, broker_addr: Optional[str] = None, queue: Optional[str] = None, async_: bool = True, *args: Any, inline: bool = False, **kwargs: Any) -> Any:
    """``@job`` or ``@job(queue=..., broker_addr=..., async_=..., inline=...)``
    (0.3.13 required ``func`` and so only allowed the bare form; both work
    here)."""
    decorator = Job(queue=queue, broker_addr=broker_addr, async_=async_, inline=inline)
    if callable(func):
        return decorator(func)
    return decorator


def _broker(broker_addr: Optional[str]) -> str:
    addr = broker_addr or _configured_broker()
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
