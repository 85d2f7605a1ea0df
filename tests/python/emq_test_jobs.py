"""Job functions for the emq integration tests.

Importable by the real EventMQ 0.3.13 job manager and by emq's job manager
alike: put this directory on PYTHONPATH. Standard library only.

Jobs that record where they ran append one line to a file:
``<tag> <queue-label> <pid> <ppid>`` so a test can tell which job manager
(by its pid: the parent of 0.3.13's worker processes) or which queue ran it.
Appends of one short line with O_APPEND are atomic on Linux, so concurrent
workers never interleave lines.
"""

import os
import time


def add(a, b):
    return a + b


def echo(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


def fail(message="boom"):
    raise ValueError(message)


def sleep(seconds, value=None):
    time.sleep(float(seconds))
    return value


def _append(path, line):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def record(path, tag, label="-", seconds=0):
    """Append ``tag label pid ppid`` to ``path``; return ``tag``."""
    if seconds:
        time.sleep(float(seconds))
    _append(path, "%s %s %d %d" % (tag, label, os.getpid(), os.getppid()))
    return tag


def batch_done(status, path):
    """A batch callback: append the status the router gave it (its first
    argument, a dict) to ``path`` as one JSON line; return it."""
    import json

    _append(path, json.dumps(status, sort_keys=True))
    return status


def stamp(path, tag):
    """Append ``tag unix-time`` to ``path`` (runs of a schedule, with when
    they ran); return ``tag``."""
    _append(path, "%s %.6f" % (tag, time.time()))
    return tag


class Recorder(object):
    """A class job: ``path = "emq_test_jobs:Recorder"``, class_args [file]."""

    def __init__(self, path, prefix=""):
        self.path = path
        self.prefix = prefix

    def write(self, tag, label="-"):
        full = self.prefix + str(tag)
        _append(self.path, "%s %s %d %d" % (full, label, os.getpid(), os.getppid()))
        return full


def pid_then_sleep(path, seconds):
    """Append this worker process's pid to ``path``, then sleep: a job to
    cancel while it runs."""
    _append(path, str(os.getpid()))
    time.sleep(float(seconds))
    return "slept"


def shout_then_fail(word):
    """Print two lines (one partial until the next print), then raise."""
    print("shouting", word)
    print("second", end="")
    print(" line")
    raise ValueError("no %s" % word)
