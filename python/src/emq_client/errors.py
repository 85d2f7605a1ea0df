"""Exceptions raised by the client.

Every exception of this package derives from :class:`EmqError`. Who caused an
error is part of its class: the router refused a message (:class:`Rejected`
and its subclasses, one per REJECT reason), the job ran and failed
(:class:`JobFailed`, with the job's error kind, message and traceback), the
admin socket refused an operation (:class:`AdminError`), the router could not
be reached (:class:`EmqConnectionError`), or the caller waited too long
(:class:`ResultTimeout`) or misused the client (:class:`WrongThread`,
:class:`Unsupported`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Type, Union


class EmqError(Exception):
    """Base class of every error raised by emq_client."""


class EmqConnectionError(EmqError, ConnectionError):
    """The router did not answer in time, or a message could not be sent."""


class WrongThread(EmqError, RuntimeError):
    """A client (or a job handle) was used outside the thread or event loop
    that owns it. Make one client per thread."""


class Unsupported(EmqError):
    """The operation needs an emq router (results, status, cancel), and the
    client was made for an EventMQ 0.3.13 router (``legacy=True``), or the
    job was submitted without asking for its result."""


class ProtocolError(EmqError):
    """The router sent something this client cannot read."""


class ResultTimeout(EmqError, TimeoutError):
    """No result arrived within the caller's timeout. The job may still run:
    ask again, or cancel it."""

    def __init__(self, msgid: str, timeout: Optional[float]) -> None:
        super().__init__(f"no result for job {msgid} within {timeout} s")
        self.msgid = msgid
        self.timeout = timeout


class MessageTooLarge(EmqError, ValueError):
    """A frame of the message is over the router's size limit (the
    client's ``max_message_size``): it was not sent. A router drops such a
    message without a word (libzmq disconnects its sender), so the client
    says so before sending instead of waiting for an answer that never
    comes."""

    def __init__(self, msgid: str, what: str, size: int, limit: int) -> None:
        super().__init__(
            f"{what} {msgid} not sent: a frame of {size} bytes is over the router's limit of "
            f"{limit} bytes (max_message_size; the router's --max-message-size)"
        )
        self.msgid = msgid
        self.size = size
        self.limit = limit


class Rejected(EmqError):
    """The router refused a message: ``REJECT [msgid, reason, text]``."""

    def __init__(self, msgid: str, reason: str, text: str) -> None:
        super().__init__(f"job {msgid} rejected: {reason}: {text}")
        self.msgid = msgid
        self.reason = reason
        self.text = text


class QueueFull(Rejected):
    """REJECT queue-full: the queue's buffer is at its high-water mark."""


class Malformed(Rejected):
    """REJECT malformed: the router could not decode the message."""


class ShuttingDown(Rejected):
    """REJECT shutting-down: the router is draining."""


class JournalUnavailable(Rejected):
    """REJECT journal-unavailable: nothing was stored; try again later."""


class JournalUncertain(EmqConnectionError):
    """REJECT journal-uncertain, still the answer when the submit's time
    ran out: the router could not tell whether it stored the job. **Not a
    refusal** — the job may run. The client sends such a job again under
    the same msgid (the router takes it as the same job) until it is
    acknowledged; this is raised only when ``queue_full_timeout`` (at least
    ``ack_timeout``) is spent. Ask ``client.job(msgid)`` later. From
    ``submit_many``, ``jobs`` holds every handle."""

    def __init__(self, msgid: str, reason: str, text: str) -> None:
        super().__init__(f"job {msgid}: the router could not tell whether it stored the job (it may run): {text}")
        self.msgid = msgid
        self.reason = reason
        self.text = text
        self.jobs: List[Any] = []


class DuplicateMsgid(Rejected):
    """REJECT duplicate-msgid: the router holds an unfinished job with it."""


class DuplicateJob(Rejected):
    """REJECT duplicate: another job holds the submit's ``unique_key``
    (``on_conflict="reject"``); ``existing`` is its msgid."""

    @property
    def existing(self) -> str:
        return self.text.split(": ", 1)[0]


class ScheduleNotFound(Rejected):
    """REJECT not-found: an UNSCHEDULE matched no schedule."""


class NotAJob(Rejected):
    """REJECT not-a-job: the message is JSON but no job form (every job is
    an array ``[KIND, PARAMS]``); nothing was stored."""


class BatchClosed(Rejected):
    """REJECT batch-closed: the job's ``batch:ID`` names a batch that is
    closed or finished, or one the router does not hold; nothing was
    stored."""


class RejectedDeadLettered(Rejected):
    """REJECT dead-lettered: the router gave up on the job (its retries or
    deliveries were spent) and told its submitter with a REJECT."""


#: The REJECT reasons (docs/PROTOCOL.md, "REJECT reasons") and their
#: exceptions. A separate list from the admin error kinds (:class:`AdminError`).
#: ``queue-full`` and ``journal-uncertain`` are sent again by the client
#: (same msgid, backoff) before either is raised.
REJECT_REASONS: Dict[str, Union[Type[Rejected], Type[JournalUncertain]]] = {
    "queue-full": QueueFull,
    "malformed": Malformed,
    "shutting-down": ShuttingDown,
    "journal-unavailable": JournalUnavailable,
    "journal-uncertain": JournalUncertain,
    "duplicate-msgid": DuplicateMsgid,
    "not-found": ScheduleNotFound,
    "duplicate": DuplicateJob,
    "not-a-job": NotAJob,
    "dead-lettered": RejectedDeadLettered,
    "batch-closed": BatchClosed,
}


def rejected(msgid: str, reason: str, text: str) -> "Union[Rejected, JournalUncertain]":
    """The exception for a REJECT reason (unknown reasons give the base
    class, so a newer router's reasons still surface); ``journal-uncertain``
    gives :class:`JournalUncertain`, which is not a refusal."""
    return REJECT_REASONS.get(reason, Rejected)(msgid, reason, text)


class JobFailed(EmqError):
    """The job ran (or was stopped) and failed. ``kind`` is the router's error
    kind (``exception``, ``exit``, ``timeout``, ``cancelled``, ``crash``,
    ``bad-job``, ``unknown-handler``, ``dead-lettered``, ``result-too-large``),
    ``traceback`` the Python traceback text for ``exception``, and ``error``
    the whole error object (``exit_status``, ``stdout``, ``attempts``, ...)."""

    def __init__(self, msgid: str, error: Mapping[str, Any]) -> None:
        self.msgid = msgid
        self.error: Dict[str, Any] = dict(error)
        self.kind: str = str(error.get("kind", "unknown"))
        self.message: str = str(error.get("message", ""))
        tb = error.get("traceback")
        self.traceback: Optional[str] = None if tb is None else str(tb)
        text = f"job {msgid} failed ({self.kind}): {self.message}"
        if self.traceback:
            text += "\n" + self.traceback.rstrip()
        super().__init__(text)


class JobTimedOut(JobFailed):
    """Error kind ``timeout``: the job ran past its ``timeout`` and was killed."""


class JobCancelled(JobFailed):
    """Error kind ``cancelled``: the job was cancelled."""


class DeadLettered(JobFailed):
    """Error kind ``dead-lettered``: the router gave up on the job."""


_FAILURES: Dict[str, Type[JobFailed]] = {
    "timeout": JobTimedOut,
    "cancelled": JobCancelled,
    "dead-lettered": DeadLettered,
}


def job_failed(msgid: str, error: Mapping[str, Any]) -> JobFailed:
    """The exception for a job's error object, by its kind."""
    return _FAILURES.get(str(error.get("kind", "")), JobFailed)(msgid, error)


#: The error kinds of the control plane (docs/PROTOCOL.md, "Control plane"),
#: the router's own list (tests/test_vocabulary.py checks it against
#: ``emq-cli vocabulary``).
ADMIN_ERROR_KINDS = (
    "bad-request",
    "not-found",
    "unsupported",
    "conflict",
    "journal-unavailable",
    "shutting-down",
)


class AdminError(EmqError):
    """The admin socket answered ``{"ok": false, "error": {kind, message}}``;
    ``kind`` is one of :data:`ADMIN_ERROR_KINDS` (``not-found``,
    ``conflict``, ``unsupported``, ``bad-request``, ``journal-unavailable``,
    ``shutting-down``), or a newer router's."""

    def __init__(self, op: str, kind: str, message: str) -> None:
        super().__init__(f"admin {op}: {kind}: {message}")
        self.op = op
        self.kind = kind
        self.message = message


class JobNotFound(AdminError):
    """The router neither holds the job nor retains it finished."""


def admin_error(op: str, kind: str, message: str) -> AdminError:
    """The exception for an admin answer's error kind."""
    cls = JobNotFound if kind == "not-found" else AdminError
    return cls(op, kind, message)


class BulkRejected(EmqError):
    """Some jobs of a ``submit_many`` were refused. ``jobs`` holds every
    handle in submission order (accepted ones can still be awaited),
    ``rejected`` the exception of each refused one."""

    def __init__(self, jobs: List[Any], rejected: List[Rejected]) -> None:
        reasons = sorted({r.reason for r in rejected})
        super().__init__(
            f"{len(rejected)} of {len(jobs)} jobs rejected ({', '.join(reasons)})"
        )
        self.jobs = jobs
        self.rejected = rejected
