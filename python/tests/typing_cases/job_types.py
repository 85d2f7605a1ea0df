"""Checked by ``mypy --strict`` in tests/test_typing.py: the calls in
``correct`` must pass, and each line of ``wrong`` marked ``# E: CODE`` must
be reported with that error code (and no other line)."""

from __future__ import annotations

from typing import Any, List

from emq_client import Client, Job, job


@job
def add(a: int, b: int) -> int:
    return a + b


@job(queue="email")
def greet(name: str, *, loud: bool = False) -> str:
    return name.upper() if loud else name


def correct(c: Client) -> List[Any]:
    j: Job[int] = add.submit(1, 2)
    total: int = j.result(timeout=5) + add(3, 4)
    text: str = greet.options(timeout=3, queue="other").submit("x", loud=True).result()
    anything: Job[Any] = c.submit(add, 1, 2, timeout=3)
    return [total, text, anything.result(), add.delay(1, 2)]


def wrong(c: Client) -> None:
    add.submit(1, "two")  # E: arg-type
    text: str = add.submit(1, 2).result()  # E: assignment
    greet.submit("x", lowd=True)  # E: call-arg
    greet.options(tiemout=3)  # E: call-arg
    add.options(retries="2")  # E: arg-type
    add(1)  # E: call-arg
