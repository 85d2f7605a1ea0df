"""EventMQ 0.3.13's ``eventmq.client.messages``, drop-in.

``defer_job``, ``schedule``, ``send_request``, ``send_schedule_request`` and
``send_publish_request`` with 0.3.13's signatures, defaults, return values
(the msgid, or None after logging an error for a bad callable) and frames,
byte for byte (tests check them against captured 0.3.13 traffic). They
send and return at once; nothing waits for the router. ``socket`` is a
:class:`~emq_client.sender.Sender`, an ``eventmq.sender.Sender``, a
:class:`~emq_client.Client`, or a plain zmq DEALER.

To get a job's result, submit it with :class:`~emq_client.Client` instead,
or look it up later: ``Client().job(msgid).result()`` (emq routers only).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Mapping, Optional, Sequence, Tuple, Union

import zmq

from . import otel, payload, wire
from .client import Client

logger = logging.getLogger(__name__)

DEFAULT_QUEUE_NAME = wire.DEFAULT_QUEUE

Func = Union[str, Callable[..., Any]]


def _callable_parts(func: Func) -> Optional[Tuple[str, str]]:
    """``(path, callable)`` as 0.3.13 finds them, or None (logged) when the
    func is no dotted path or nameable callable."""
    try:
        if func and isinstance(func, str):
            if "." not in func:
                logger.error('Invalid callable string passed, absolute path required: "%s"', func)
                return None
            return payload.split_callable_name(func)
        if callable(func):
            return payload.split_callable_name(payload.name_from_callable(func))
    except (TypeError, ValueError) as e:
        logger.error("Encountered invalid callable, will not proceed: %s", e)
        return None
    logger.error("Encountered non-callable func: %s", func)
    return None


def send_emqp_message(socket: Any, command: str, message: Sequence[str]) -> str:
    """Send ``[COMMAND, msgid, *message]`` on any supported socket; the msgid."""
    if isinstance(socket, Client):
        return socket.send_raw(command.upper(), [m.encode("utf-8") for m in message])
    msgid = wire.new_msgid()
    body = (command.upper(), msgid) + tuple(message)
    if isinstance(socket, zmq.Socket):
        socket.send_multipart([b"", wire.PROTOCOL] + [m.encode("utf-8") for m in body])
    else:
        socket.send_multipart(body, wire.PROTOCOL.decode())
    return msgid


def schedule(
    socket: Any,
    func: Func,
    interval_secs: Optional[float] = None,
    args: Sequence[Any] = (),
    kwargs: Optional[Mapping[str, Any]] = None,
    class_args: Sequence[Any] = (),
    class_kwargs: Optional[Mapping[str, Any]] = None,
    headers: Sequence[str] = ("guarantee",),
    queue: str = DEFAULT_QUEUE_NAME,
    unschedule: bool = False,
    cron: Optional[str] = None,
) -> Optional[str]:
    """Run ``func`` every ``interval_secs`` or on ``cron``; the SCHEDULE's
    msgid (UNSCHEDULE with ``unschedule=True``), or None on a bad call."""
    if not unschedule and ((interval_secs and cron) or (not interval_secs and not cron)):
        logger.error("You must sepcify either `interval_secs` or `cron`, but not both (or neither)")
        return None
    parts = _callable_parts(func)
    if parts is None:
        return None
    path, name = parts
    msg = payload.run_message(path, name, args, kwargs, class_args, class_kwargs)
    return send_schedule_request(
        socket, json.loads(msg), interval_secs=interval_secs or -1, cron=cron or "",
        headers=headers, queue=queue, unschedule=unschedule,
    )


def defer_job(
    socket: Any,
    func: Func,
    args: Sequence[Any] = (),
    kwargs: Optional[Mapping[str, Any]] = None,
    class_args: Sequence[Any] = (),
    class_kwargs: Optional[Mapping[str, Any]] = None,
    reply_requested: bool = False,
    guarantee: bool = False,
    retry_count: int = 0,
    timeout: int = 0,
    debounce_secs: Union[bool, float] = False,
    queue: Optional[str] = DEFAULT_QUEUE_NAME,
) -> Optional[str]:
    """Send ``func(*args, **kwargs)`` as a job; its msgid, or None on a bad
    callable. ``debounce_secs`` is accepted and ignored, as in 0.3.13."""
    parts = _callable_parts(func)
    if parts is None:
        return None
    path, name = parts
    msg = payload.run_message(path, name, args, kwargs, class_args, class_kwargs)
    return _send_request_bytes(
        socket, msg, reply_requested=reply_requested, guarantee=guarantee,
        retry_count=retry_count, timeout=timeout, queue=queue or DEFAULT_QUEUE_NAME,
    )


def send_request(
    socket: Any,
    message: Any,
    reply_requested: bool = False,
    guarantee: bool = False,
    retry_count: int = 0,
    timeout: int = 0,
    queue: Optional[str] = None,
) -> str:
    """Send ``REQUEST [queue, headers, json.dumps(message)]``; the msgid."""
    return _send_request_bytes(
        socket, json.dumps(message).encode("utf-8"), reply_requested=reply_requested,
        guarantee=guarantee, retry_count=retry_count, timeout=timeout, queue=queue,
    )


def _send_request_bytes(
    socket: Any,
    message: bytes,
    *,
    reply_requested: bool,
    guarantee: bool,
    retry_count: int,
    timeout: int,
    queue: Optional[str],
) -> str:
    """REQUEST with 0.3.13's header spelling (``timeout:%d``)."""
    headers = []
    if reply_requested:
        headers.append("reply-requested")
    if guarantee:
        headers.append("guarantee")
    if retry_count > 0:
        headers.append("retry-count:%d" % retry_count)
    if timeout > 0:
        headers.append("timeout:%d" % timeout)
    headers = otel.with_traceparent(headers)
    return send_emqp_message(
        socket, "REQUEST", (queue or DEFAULT_QUEUE_NAME, ",".join(headers), message.decode("utf-8"))
    )


def send_schedule_request(
    socket: Any,
    message: Any,
    interval_secs: float = -1,
    headers: Sequence[str] = (),
    queue: Optional[str] = None,
    unschedule: bool = False,
    cron: str = "",
) -> str:
    """Send ``SCHEDULE`` / ``UNSCHEDULE [queue, headers, interval, message,
    cron]``; the msgid."""
    command = "UNSCHEDULE" if unschedule else "SCHEDULE"
    return send_emqp_message(
        socket, command,
        (queue or DEFAULT_QUEUE_NAME, ",".join(headers), str(interval_secs), json.dumps(message), cron),
    )


def send_publish_request(socket: Any, topic: str, message: Any) -> str:
    """Send ``PUBLISH [topic, json.dumps(message)]`` (0.3.13's publisher
    device; the emq router does not serve it)."""
    return send_emqp_message(socket, "PUBLISH", (topic, json.dumps(message)))
