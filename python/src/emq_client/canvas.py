"""Workflows with Celery's canvas spelling: ``chain``, ``group``, ``chord``
of :func:`~emq_client.task` jobs, run by the router (``WORKFLOW``,
docs/PROTOCOL.md "Workflows").

    from emq_client import Client, chain, chord, group, task
    with Client() as c:
        c.submit(chain(task(add, 2, 2), task(mul, 10))).result()    # mul(4, 10)
        c.submit(group([task(add, i, i) for i in range(3)])).result()  # [0, 2, 4]
        c.submit(chord(group([task(add, i, i) for i in range(3)]), task(tsum))).result()

- ``chain(t1, t2, ...)``: each job's result is passed as the first argument
  of the next; the workflow's result is the last one's.
- ``group([t1, ..., tn])``: in parallel; its result is the list of their
  results, in order.
- ``chord(group([...]), callback)``: the callback runs once, with the
  group's list of results as its first argument.
- Nesting: a chain inside a group or chord, a group inside a chain (what
  follows it gets the list). A group whose member is itself a group (or a
  chain ending in one) is refused: the router passes flat lists.

The router accepts the whole workflow or nothing, runs each node as an
ordinary job once its parents are done, and keeps the results itself. A
node that fails (after its retries) cancels what waits for it; the
workflow's ``result()`` then raises :class:`~emq_client.JobFailed` whose
error names the node. At most 1,000 nodes per workflow.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Sequence, Tuple, Union

from .payload import Task

#: What a canvas is made of.
Signature = Union[Task, "chain", "group", "chord"]

#: Nodes per workflow, at most (the router's limit).
MAX_NODES = 1000


class Canvas:
    """A workflow description (``chain``, ``group`` or ``chord``)."""

    def spec(self, queue: str, headers: str) -> Dict[str, Any]:
        """The ``WORKFLOW`` SPEC: every node as a job for ``queue`` with
        ``headers``."""
        b = _Builder(queue, headers)
        outputs, output_pass = b.build(self, [], "none")
        if len(b.nodes) > MAX_NODES:
            raise ValueError(f"a workflow has at most {MAX_NODES} nodes (this one {len(b.nodes)})")
        return {"nodes": b.nodes, "output": outputs, "output_pass": output_pass}


class chain(Canvas):
    """``chain(t1, t2, t3)``: t2 gets t1's result as its first argument, t3
    gets t2's; the result is t3's."""

    def __init__(self, *tasks: Signature) -> None:
        if len(tasks) == 1 and isinstance(tasks[0], (list, tuple)):
            tasks = tuple(tasks[0])
        if not tasks:
            raise ValueError("chain() needs at least one task")
        self.tasks: Tuple[Signature, ...] = tasks

    def __repr__(self) -> str:
        return "chain(" + ", ".join(map(repr, self.tasks)) + ")"


class group(Canvas):
    """``group([t1, ..., tn])``: run in parallel; the result is the list of
    their results, in order."""

    def __init__(self, *tasks: Union[Signature, Iterable[Signature]]) -> None:
        items: List[Signature] = []
        for t in tasks:
            if isinstance(t, (Task, Canvas)):
                items.append(t)
            else:
                items.extend(t)
        if not items:
            raise ValueError("group() needs at least one task")
        self.tasks: Tuple[Signature, ...] = tuple(items)

    def __repr__(self) -> str:
        return "group([" + ", ".join(map(repr, self.tasks)) + "])"


class chord(Canvas):
    """``chord(group([...]), callback)``: the callback runs once with the
    group's list of results first."""

    def __init__(self, header: Union[group, Sequence[Signature]], body: Signature) -> None:
        self.header = header if isinstance(header, group) else group(list(header))
        self.body = body

    def __repr__(self) -> str:
        return f"chord({self.header!r}, {self.body!r})"


class _Builder:
    """Flattens a canvas into the router's nodes (``after`` and ``pass``)."""

    def __init__(self, queue: str, headers: str) -> None:
        self.queue = queue
        self.headers = headers
        self.nodes: List[Dict[str, Any]] = []

    def add(self, t: Task, after: List[str], how: str) -> str:
        try:
            msg = json.loads(t.message)
        except ValueError:
            raise TypeError(f"{t!r} is not a JSON job: a workflow node must be task(), call() or shell()") from None
        node_id = f"n{len(self.nodes)}"
        self.nodes.append(
            {"id": node_id, "queue": self.queue, "headers": self.headers, "msg": msg, "after": list(after), "pass": how}
        )
        return node_id

    def build(self, sig: Any, after: List[str], how: str) -> Tuple[List[str], str]:
        """Add ``sig`` waiting for ``after`` (taking their results as
        ``how`` says); its output nodes and how they make its result
        (``one``: the one node's value, ``list``: their values)."""
        if isinstance(sig, Task):
            return [self.add(sig, after, how)], "one"
        if isinstance(sig, chain):
            for s in sig.tasks:
                after, how = self.build(s, after, how)
            return after, how
        if isinstance(sig, group):
            outs: List[str] = []
            for s in sig.tasks:
                o, h = self.build(s, after, how)
                if h != "one":
                    raise TypeError(
                        f"{s!r} in a group gives a list: a group inside a group is not supported "
                        "(the router passes flat lists)"
                    )
                outs.extend(o)
            return outs, "list"
        if isinstance(sig, chord):
            outs, h = self.build(sig.header, after, how)
            return self.build(sig.body, outs, h)
        raise TypeError(f"not a workflow part: {sig!r} (use task(), call(), chain, group, chord)")
