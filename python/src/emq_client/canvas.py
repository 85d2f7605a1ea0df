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
- Nesting, as Celery: a chain inside a group or chord, a group inside a
  chain (what follows it gets the list), a group inside a chain inside a
  group (``group([chain(a, group([b, c])), d])`` gives ``[[b, c], d]``: a
  nested list). A group *directly* inside a group is unrolled into it, as
  Celery's ``group`` does (``group([group([a, b]), c])`` gives
  ``[a, b, c]``).
- Per-node options: ``task(f, ...).options(queue=, retries=, timeout=,
  headers=, key=, priority=)`` (the names of ``submit``'s options,
  :class:`~emq_client.options.NodeOptions`); each one given replaces, for
  that node, the workflow's own (``submit(flow, queue=..., retries=...)``,
  the defaults of every node).

The router accepts the whole workflow or nothing, runs each node as an
ordinary job once its parents are done, and keeps the results itself. A
node that fails (after its retries) cancels what waits for it; the
workflow's ``result()`` then raises :class:`~emq_client.JobFailed` whose
error names the node. At most 1,000 nodes per workflow.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Mapping, Sequence, Tuple, Union

from . import wire
from .payload import Task

#: What a canvas is made of.
Signature = Union[Task, "chain", "group", "chord"]

#: What a part of a canvas gives: one node's id (its value), or a list,
#: possibly nested, of them.
Shape = Union[str, List[Any]]

#: Nodes per workflow, at most (the router's limit).
MAX_NODES = 1000


class Canvas:
    """A workflow description (``chain``, ``group`` or ``chord``)."""

    def spec(self, queue: str, **defaults: Any) -> Dict[str, Any]:
        """The ``WORKFLOW`` SPEC: every node as a job for ``queue`` with the
        node options ``defaults`` (``retries``, ``timeout``, ``headers``,
        ``key``, ``priority``), each replaced by a node's own."""
        b = _Builder(dict(defaults, queue=queue))
        out = b.build(self, None)
        if len(b.nodes) > MAX_NODES:
            raise ValueError(f"a workflow has at most {MAX_NODES} nodes (this one {len(b.nodes)})")
        spec: Dict[str, Any] = {"nodes": b.nodes}
        if isinstance(out, str):
            spec.update(output=[out], output_pass="one")
        elif all(isinstance(o, str) for o in out):
            spec.update(output=list(out), output_pass="list")
        else:
            spec["output_shape"] = out
        return spec


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


def _leaves(shape: Shape) -> List[str]:
    """The node ids of ``shape``, in order."""
    if isinstance(shape, str):
        return [shape]
    return [leaf for s in shape for leaf in _leaves(s)]


class _Builder:
    """Flattens a canvas into the router's nodes (``after``, ``pass`` and,
    for nested lists, ``shape``)."""

    def __init__(self, defaults: Mapping[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.nodes: List[Dict[str, Any]] = []

    def add(self, t: Task, given: Union[Shape, None]) -> str:
        """Node ``t`` taking ``given`` (None: nothing) as its first
        argument."""
        try:
            msg = json.loads(t.message)
        except ValueError:
            raise TypeError(f"{t!r} is not a JSON job: a workflow node must be task(), call() or shell()") from None
        opts = dict(self.defaults)
        opts.update(t.node_options)
        headers = wire.headers_frame(
            retries=opts.get("retries") or 0,
            timeout=opts.get("timeout") or 0,
            key=opts.get("key"),
            priority=opts.get("priority"),
            extra=opts.get("headers") or (),
        )
        node: Dict[str, Any] = {"id": f"n{len(self.nodes)}", "queue": opts["queue"], "headers": headers, "msg": msg}
        if given is None:
            node.update(after=[], **{"pass": "none"})
        elif isinstance(given, str):
            node.update(after=[given], **{"pass": "one"})
        else:
            node.update(after=_leaves(given), **{"pass": "list"})
            if not all(isinstance(g, str) for g in given):
                node["shape"] = given
        self.nodes.append(node)
        return str(node["id"])

    def build(self, sig: Any, given: Union[Shape, None]) -> Shape:
        """Add ``sig`` taking ``given`` (what precedes it gives; None:
        nothing); what it gives."""
        if isinstance(sig, Task):
            return self.add(sig, given)
        if isinstance(sig, chain):
            out: Union[Shape, None] = given
            for s in sig.tasks:
                out = self.build(s, out)
            assert out is not None
            return out
        if isinstance(sig, group):
            outs: List[Any] = []
            for s in sig.tasks:
                o = self.build(s, given)
                if isinstance(s, group):
                    outs.extend(o)  # Celery unrolls a group directly in a group
                else:
                    outs.append(o)
            return outs
        if isinstance(sig, chord):
            return self.build(sig.body, self.build(sig.header, given))
        raise TypeError(f"not a workflow part: {sig!r} (use task(), call(), chain, group, chord)")
