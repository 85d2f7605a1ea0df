"""Jobs for the emq_client tests, importable by the job manager's Python
workers (this directory is on their PYTHONPATH): functions decorated with
emq_client's 0.3.13-compatible ``@job``."""

from emq_client import job


@job
def multiply(a, b):
    return a * b


@job(async_=False)
def local_only(x):
    return x + 1


class Greeter(object):
    """A class job: ``emq_pyclient_jobs:Greeter.greet``."""

    def __init__(self, greeting="Hello"):
        self.greeting = greeting

    def greet(self, name):
        return "%s, %s" % (self.greeting, name)


def flow_probe(path, tag, secs):
    """Flow-control probe: append ``start TAG T`` and ``end TAG T`` (unix
    time) to ``path`` around a ``secs`` sleep, so the test measures from the
    jobs themselves how many ran at once."""
    import time as _time

    with open(path, "a") as f:
        f.write("start %s %.6f\n" % (tag, _time.time()))
    _time.sleep(secs)
    with open(path, "a") as f:
        f.write("end %s %.6f\n" % (tag, _time.time()))
    return tag


@job
def fetch(url, timeout=10):
    """A job with a parameter named like a submit option."""
    return [url, timeout]


def total(values, plus=0):
    """A chord callback: the sum of the group's results."""
    return sum(values) + plus


def pair(values):
    """A chord callback that shows what it got."""
    return list(values)


def context_on_retry():
    """Fail the first delivery; on the next return what ``emq_job.current()``
    says (its attempt must be 2)."""
    import emq_job  # the job manager's worker provides it

    ctx = emq_job.current()
    if ctx["attempt"] < 2:
        raise RuntimeError("the first delivery fails")
    return {"attempt": ctx["attempt"], "msgid": ctx["msgid"], "queue": ctx["queue"]}


def batch_callback(status, path):
    """A batch callback: append the status the router gave it (its first
    argument) to ``path`` as one JSON line, and return it."""
    import json as _json

    with open(path, "a") as f:
        f.write(_json.dumps(status) + "\n")
    return status
