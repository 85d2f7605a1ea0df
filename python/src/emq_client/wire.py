"""eMQP/1.0 frames as this client sends and reads them (no sockets here).

Every message from a DEALER is ``['', 'eMQP/1.0', COMMAND, MSGID, body...]``
(docs/PROTOCOL.md, "Envelope"). The client sends REQUEST, SCHEDULE,
UNSCHEDULE on the router's frontend and ADMIN on its admin socket; it reads
REPLY (acknowledgement, or an admin answer), RESULT and REJECT; it confirms
RESULTs with RECEIVED and says hello (HEARTBEAT) after a reconnect. Message ids
have the text form of a uuid4, as 0.3.13's ``generate_msgid`` (see
:func:`new_msgid`); admin ids carry ``admin:``.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

PROTOCOL = b"eMQP/1.0"
DEFAULT_FRONTEND = "tcp://127.0.0.1:47291"
DEFAULT_ADMIN = "tcp://127.0.0.1:47293"
DEFAULT_QUEUE = "default"
#: The largest frame an emq router takes by default (its
#: ``--max-message-size``, ``EVENTMQ_MAX_MESSAGE_SIZE``): 16 MiB, as
#: ``emqp_proto::DEFAULT_MAX_MESSAGE_SIZE``.
DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024
#: emq: the client confirms each RESULT with RECEIVED, so the router keeps
#: the result (journaled) until then (docs/PROTOCOL.md, "Results until
#: delivered").
RESULT_RECEIPT = "result-receipt"
#: emq: unique jobs (docs/PROTOCOL.md, "Unique jobs"): ``unique-key:K``,
#: ``unique-for:SECS``, ``on-conflict:existing|reject|replace``.
UNIQUE_KEY = "unique-key"
UNIQUE_FOR = "unique-for"
ON_CONFLICT = "on-conflict"
ON_CONFLICT_RULES = ("existing", "reject", "replace")
#: The longest unique key the router takes, in bytes.
MAX_UNIQUE_KEY = 256
#: emq: the client takes NOTICEs about the job (e.g. sent to ``default``
#: because no job manager serves its queue; docs/PROTOCOL.md, "Queues
#: nobody serves"). 0.3.13 routers ignore it.
NOTICES = "notices"
#: emq: the client takes its acknowledgements as ``ACKS [msgid, ...]``,
#: several REQUESTs' in one message (docs/PROTOCOL.md, "Batched
#: acknowledgements"); ``emqp_proto::headers::BATCHED_ACKS``. 0.3.13 routers
#: ignore it and send ``REPLY [msgid]``.
BATCHED_ACKS = "batched-acks"

Frames = List[bytes]


def _msgid_base() -> Tuple[str, Iterator[int]]:
    """The random part of this process's message ids and its counter."""
    h = os.urandom(16).hex()
    variant = "89ab"[int(h[16], 16) & 3]
    head = f"{h[0:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-"
    return head, itertools.count(int(h[20:32], 16))


_MSGID_HEAD, _MSGID_COUNT = _msgid_base()
_MSGID_MASK = (1 << 48) - 1


def _new_msgid_base_in_child() -> None:
    global _MSGID_HEAD, _MSGID_COUNT
    _MSGID_HEAD, _MSGID_COUNT = _msgid_base()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_msgid_base_in_child)


def new_msgid(prefix: str = "") -> str:
    """A fresh message id, optionally prefixed: the text of a version 4
    (random) UUID, as 0.3.13's ``generate_msgid`` — whose first 74 random
    bits are drawn once per process (again in a forked child) and whose
    last 48 bits count up from a random start. As unique as ``uuid4()``
    across processes (122 random bits of state at the start), unique within
    one by construction, and about a tenth of its cost (no system call,
    no UUID object: a bulk submit makes one per job)."""
    return f"{prefix}{_MSGID_HEAD}{next(_MSGID_COUNT) & _MSGID_MASK:012x}"


#: The longest flow-control key (``key:K``), in UTF-8 bytes.
MAX_FLOW_KEY = 128


def flow_key(key: str) -> str:
    """``key``, checked as the router checks a ``key:K`` header (1 to
    :data:`MAX_FLOW_KEY` UTF-8 bytes, no comma, no surrounding blanks)."""
    if not isinstance(key, str) or not key or key != key.strip() or "," in key:
        raise ValueError(f"bad key {key!r}: a non-empty string without commas or surrounding blanks")
    n = len(key.encode("utf-8"))
    if n > MAX_FLOW_KEY:
        raise ValueError(f"bad key: {n} bytes, the longest flow-control key is {MAX_FLOW_KEY} bytes")
    return key


def flow_priority(priority: int) -> int:
    """``priority``, checked: an integer from 0 to 9 (higher runs first)."""
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 9:
        raise ValueError(f"bad priority {priority!r}: an integer from 0 to 9")
    return priority



def unique_headers(
    unique_key: Optional[str], unique_for: Optional[float] = None, on_conflict: Optional[str] = None
) -> List[str]:
    """The unique-job headers (``unique-key:K``, ``unique-for:SECS``,
    ``on-conflict:RULE``), checked as the router checks them (a bad value
    raises ValueError before anything is sent)."""
    if unique_key is None:
        if unique_for is not None or on_conflict is not None:
            raise ValueError("unique_for and on_conflict need a unique_key")
        return []
    key = str(unique_key).strip()
    if not key:
        raise ValueError("unique_key must not be empty")
    if "," in key:
        raise ValueError(f"unique_key {key!r} has a comma (headers are comma-separated)")
    if len(key.encode()) > MAX_UNIQUE_KEY:
        raise ValueError(f"unique_key is over {MAX_UNIQUE_KEY} bytes")
    out = [f"{UNIQUE_KEY}:{key}"]
    if unique_for is not None:
        if not 0 <= unique_for <= 315_360_000:
            raise ValueError(f"unique_for must be 0 to 315360000 seconds, got {unique_for}")
        out.append(f"{UNIQUE_FOR}:{_number(unique_for)}")
    if on_conflict is not None:
        if on_conflict not in ON_CONFLICT_RULES:
            raise ValueError(f"on_conflict must be one of {ON_CONFLICT_RULES}, got {on_conflict!r}")
        out.append(f"{ON_CONFLICT}:{on_conflict}")
    return out


def headers_frame(
    *,
    reply_requested: bool = False,
    receipt: bool = False,
    notices: bool = False,
    batched_acks: bool = False,
    guarantee: bool = False,
    retries: int = 0,
    timeout: float = 0,
    delay: Optional[float] = None,
    key: Optional[str] = None,
    priority: Optional[int] = None,
    extra: Iterable[str] = (),
) -> str:
    """The HEADERS frame: 0.3.13's order (``reply-requested``, ``guarantee``,
    ``retry-count:N``, ``timeout:N``), then emq's ``delay:SECS`` and (with
    ``receipt`` and ``reply_requested``) ``result-receipt``, (with
    ``notices``) ``notices``, (with ``batched_acks``) ``batched-acks``, then
    the caller's own headers. Zero retries and a zero timeout are left out, as
    0.3.13 leaves them out."""
    out: List[str] = []
    if reply_requested:
        out.append("reply-requested")
    if guarantee:
        out.append("guarantee")
    if retries and retries > 0:
        out.append("retry-count:%d" % retries)
    if timeout and timeout > 0:
        out.append("timeout:%d" % _whole_seconds(timeout, "timeout"))
    if delay is not None:
        if delay < 0:
            raise ValueError(f"delay must be >= 0 seconds, got {delay}")
        out.append("delay:" + _number(delay))
    if key is not None:
        out.append("key:" + flow_key(key))
    if priority is not None:
        out.append("priority:%d" % flow_priority(priority))
    if receipt and reply_requested:
        out.append(RESULT_RECEIPT)
    if notices:
        out.append(NOTICES)
    if batched_acks:
        out.append(BATCHED_ACKS)
    for h in extra:
        if not h or "," in h:
            raise ValueError(f"bad header {h!r}: headers are non-empty and have no commas")
        if h not in out:
            out.append(h)
    return ",".join(out)


def _whole_seconds(value: float, what: str) -> int:
    """Job timeouts are whole seconds on the wire (``timeout:N``); a fraction
    is rounded up so a job never gets less time than asked."""
    n = int(value)
    if n < value:
        n += 1
    if n <= 0:
        raise ValueError(f"{what} must be > 0 seconds, got {value}")
    return n


def _number(value: float) -> str:
    """A number as short text: ``2`` for 2.0, ``0.5`` for 0.5."""
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def request(msgid: str, queue: str, headers: str, message: bytes) -> Frames:
    """``REQUEST [queue, headers, message]``."""
    return [b"", PROTOCOL, b"REQUEST", msgid.encode(), queue.encode(), headers.encode(), message]


#: emq: the header a REQUEST joins a batch with (``batch:ID``).
BATCH_HEADER = "batch"


def batch(msgid: str, spec: bytes) -> Frames:
    """``BATCH [spec]`` (emq): open or close a batch, the msgid its id."""
    return [b"", PROTOCOL, b"BATCH", msgid.encode(), spec]


def workflow(msgid: str, spec: bytes) -> Frames:
    """``WORKFLOW [spec]`` (emq): a whole workflow, the msgid its id."""
    return [b"", PROTOCOL, b"WORKFLOW", msgid.encode(), spec]


def schedule(
    msgid: str,
    queue: str,
    headers: str,
    message: bytes,
    *,
    interval_secs: Optional[float] = None,
    cron: Optional[str] = None,
    unschedule: bool = False,
) -> Frames:
    """``SCHEDULE`` or ``UNSCHEDULE [queue, headers, interval, message, cron]``
    as 0.3.13 sends it: ``str(interval_secs)`` or ``-1``, cron or empty."""
    command = b"UNSCHEDULE" if unschedule else b"SCHEDULE"
    interval = str(interval_secs or -1)
    return [
        b"",
        PROTOCOL,
        command,
        msgid.encode(),
        queue.encode(),
        headers.encode(),
        interval.encode(),
        message,
        (cron or "").encode(),
    ]


def received(msgids: Sequence[str]) -> Frames:
    """``RECEIVED [orig_msgid, ...]``: this client has these jobs' RESULTs."""
    return [b"", PROTOCOL, b"RECEIVED", new_msgid().encode(), *(m.encode() for m in msgids)]


def hello() -> Frames:
    """``HEARTBEAT`` on the frontend: this client (re)connected, the router
    sends again every result it holds for it."""
    return [b"", PROTOCOL, b"HEARTBEAT", new_msgid().encode()]


def admin(msgid: str, op: Dict[str, Any]) -> Frames:
    """``ADMIN [request JSON]`` for the admin socket."""
    return [b"", PROTOCOL, b"ADMIN", msgid.encode(), json.dumps(op).encode()]


class Incoming(NamedTuple):
    """A message from the router, reduced to what the client acts on.

    ``command`` is REPLY, RESULT, REJECT, NOTICE, DUPLICATE or anything
    else (ignored); ``orig`` the msgid it answers; ``status``/``payload``
    for RESULT, ``reason``/``text`` for REJECT (for NOTICE: its kind and
    text; for DUPLICATE: the existing job's msgid and text), ``payload``
    for an admin REPLY."""

    command: str
    orig: str
    status: str = ""
    payload: bytes = b""
    reason: str = ""
    text: str = ""


def parse(frames: Sequence[bytes]) -> Optional[Incoming]:
    """Read one message from the router; None for anything that is not an
    eMQP answer this client knows (heartbeats, other commands, garbage).

    Frontend REPLY is ``[orig]``; admin REPLY is ``[answer, orig]``; RESULT
    ``[orig, status, payload]``; REJECT ``[orig, reason, text]``; NOTICE
    ``[orig, kind, text]``."""
    if len(frames) < 5 or frames[0] != b"" or frames[1] != PROTOCOL:
        return None
    command = frames[2].decode("ascii", "replace").upper()
    body = frames[4:]
    try:
        if command == "REPLY":
            if len(body) == 1:
                return Incoming("REPLY", body[0].decode())
            return Incoming("REPLY", body[1].decode(), payload=body[0])
        if command == "RESULT" and len(body) >= 3:
            return Incoming("RESULT", body[0].decode(), status=body[1].decode(), payload=body[2])
        if command == "REJECT" and len(body) >= 2:
            text = body[2].decode("utf-8", "replace") if len(body) > 2 else ""
            return Incoming("REJECT", body[0].decode(), reason=body[1].decode(), text=text)
        if command == "NOTICE" and len(body) >= 3:
            text = body[2].decode("utf-8", "replace")
            return Incoming("NOTICE", body[0].decode(), reason=body[1].decode(), text=text)
        if command == "DUPLICATE" and len(body) >= 2:
            text = body[2].decode("utf-8", "replace") if len(body) > 2 else ""
            return Incoming("DUPLICATE", body[0].decode(), reason=body[1].decode(), text=text)
    except UnicodeDecodeError:
        return None
    return None
