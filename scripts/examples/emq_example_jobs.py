"""Example jobs for emq (EventMQ-compatible "run" jobs).

Used by scripts/submit-example.sh; the job manager finds this module through
PYTHONPATH=scripts/examples, which scripts/local-cluster.sh exports.

    emq-sender --wait --python emq_example_jobs.add --args '[1, 2]'
    emq-sender --wait --python emq_example_jobs:Greeter.greet \
        --class-args '["Hello"]' --kwargs '{"name": "emq"}'
"""

import os
import time


def add(a, b):
    """Return a + b."""
    return a + b


def echo(*args, **kwargs):
    """Return the arguments it was called with."""
    return {"args": list(args), "kwargs": kwargs}


def fail(message="this job fails on purpose"):
    """Raise, to show a failed job (emq-sender --wait exits 4)."""
    raise RuntimeError(message)


def nap(seconds=1.0):
    """Sleep, then return how long it slept (try with --header timeout:1)."""
    time.sleep(float(seconds))
    return seconds


def whoami():
    """Return the process id of the Python worker that ran the job."""
    return {"pid": os.getpid()}


class Greeter:
    """A class for pkg.module:Class.method jobs."""

    def __init__(self, greeting="Hello"):
        self.greeting = greeting

    def greet(self, name="world"):
        return "{}, {}!".format(self.greeting, name)
