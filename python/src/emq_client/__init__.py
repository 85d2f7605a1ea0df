"""emq_client: the Python client for emq, the Rust EventMQ job broker.

    from emq_client import Client
    with Client("tcp://127.0.0.1:47291") as c:
        print(c.submit("mypkg.jobs.add", 1, 2).result(timeout=30))

:class:`Client` (blocking) and :class:`AsyncClient` (asyncio) submit jobs
and return handles (:class:`Job`, :class:`AsyncJob`) with ``result``,
``status`` and ``cancel``; ``submit`` also takes a workflow: ``chain``,
``group``, ``chord`` of ``task(...)`` jobs, with Celery's semantics, run by
the router (:mod:`emq_client.canvas`); ``batch`` opens a Sidekiq-style batch
with ``on_success`` / ``on_complete`` callbacks (:mod:`emq_client.batch`). ``job``, ``schedule``,
``unschedule`` and ``defer_job`` are EventMQ 0.3.13's (``from eventmq
import job`` becomes ``from emq_client import job``); :mod:`emq_client.messages`,
:mod:`emq_client.jobs` and :mod:`emq_client.sender` mirror
``eventmq.client.messages``, ``eventmq.client.jobs`` and ``eventmq.sender``.

Threads: a Client (and its Jobs) is used by the thread that made it only —
enforced; an AsyncClient by one event loop.
"""

from .aio import AsyncClient, AsyncJob
from .batch import AsyncBatch, Batch, BatchStatus
from .canvas import chain, chord, group
from .client import Client, Job, thread_client
from ._core import JobProgress, JobStatus
from .errors import (
    AdminError,
    BatchClosed,
    BulkRejected,
    DeadLettered,
    DuplicateJob,
    DuplicateMsgid,
    EmqConnectionError,
    EmqError,
    JobCancelled,
    JobFailed,
    JobNotFound,
    JobTimedOut,
    JournalUnavailable,
    JournalUncertain,
    Malformed,
    MessageTooLarge,
    ProtocolError,
    QueueFull,
    Rejected,
    ResultTimeout,
    NotAJob,
    RejectedDeadLettered,
    ScheduleNotFound,
    ShuttingDown,
    Unsupported,
    WrongThread,
)
from .jobs import job, schedule, unschedule
from .messages import defer_job
from .options import OptionCollision, SubmitOptions
from .payload import NotSerializable, Task, call, python, raw, shell, task
from .settings import SettingsError, UnknownSettingWarning

__version__ = "0.1.0"

__all__ = [
    "AdminError", "AsyncBatch", "AsyncClient", "Batch", "BatchClosed", "BatchStatus", "chain", "chord", "group", "AsyncJob", "BulkRejected", "Client", "DeadLettered",
    "DuplicateJob", "DuplicateMsgid", "EmqConnectionError", "EmqError", "Job", "JobCancelled", "JobFailed",
    "JobNotFound", "JobProgress", "JobStatus", "JobTimedOut", "JournalUnavailable", "JournalUncertain", "Malformed",
    "MessageTooLarge", "NotSerializable", "OptionCollision", "SettingsError", "SubmitOptions",
    "UnknownSettingWarning",
    "ProtocolError", "QueueFull", "Rejected", "ResultTimeout", "ScheduleNotFound", "NotAJob", "RejectedDeadLettered",
    "ShuttingDown", "Task", "Unsupported", "WrongThread", "call", "defer_job", "job",
    "python", "raw", "schedule", "shell", "task", "thread_client", "unschedule",
]
