"""A job argument JSON cannot write is refused before anything is sent,
with an error naming the argument (position or keyword) and the function."""

from __future__ import annotations

import datetime
import decimal

import pytest

import emq_pyclient_jobs
from emq_client import Client, NotSerializable, call, defer_job, python, task
from emq_client.sender import Sender


WHEN = datetime.datetime(2026, 12, 6, 12, 0)


def test_the_argument_and_function_are_named() -> None:
    # No router needed: nothing is sent.
    with Client("tcp://127.0.0.1:9", admin_addr="tcp://127.0.0.1:9", ack_timeout=0.2) as c:
        with pytest.raises(NotSerializable) as e:
            c.submit(emq_pyclient_jobs.multiply, 2, WHEN)
        text = str(e.value)
        assert text.startswith("argument 2 of emq_pyclient_jobs.multiply is not JSON-serialisable (datetime: "), text
        assert isinstance(e.value, TypeError) and e.value.argument == "argument 2"
        with pytest.raises(NotSerializable, match=r"^keyword argument 'b' of emq_pyclient_jobs\.multiply .*Decimal"):
            c.submit(emq_pyclient_jobs.multiply, 1, b=decimal.Decimal("1.5"))
        with pytest.raises(NotSerializable, match=r"^argument 1 of emq_pyclient_jobs\.multiply .*\(set: "):
            c.submit("emq_pyclient_jobs.multiply", {1}, 2)
        assert c.outstanding == 0


def test_every_way_of_building_a_job_names_it() -> None:
    with pytest.raises(NotSerializable, match=r"^class keyword argument 'greeting' of emq_pyclient_jobs:Greeter\.greet "):
        python("emq_pyclient_jobs:Greeter.greet", ["x"], class_kwargs={"greeting": object()})
    with pytest.raises(NotSerializable, match=r"^keyword argument 'b' of emq_pyclient_jobs\.multiply "):
        task(emq_pyclient_jobs.multiply, 1, b=WHEN)
    # 0.3.13's defer_job path (and so @job's delay).
    with pytest.raises(NotSerializable, match=r"^argument 1 of emq_pyclient_jobs\.multiply "):
        defer_job(Sender(), emq_pyclient_jobs.multiply, args=[WHEN, 1])
    with pytest.raises(NotSerializable, match=r"^args of the 'echo' handler is not JSON-serialisable \(dict: "):
        call("echo", {"when": WHEN})
