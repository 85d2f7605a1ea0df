"""Job options apart from the job's own arguments.

``c.submit(func, *args, queue=, retries=, timeout=, delay=, headers=,
**kwargs)`` takes the job's options and ``func``'s arguments in one call:
a keyword named like an option is the option, everything else goes to
``func``. That is ambiguous when ``func`` itself has a parameter with an
option's name (``def fetch(url, timeout=10)``: is ``timeout=3`` the job's
limit or ``fetch``'s argument?), and it used to be decided silently for
the option. The rule now:

- **A collision is refused.** When ``func`` is a callable and an option is
  given (not None) whose name is also a named parameter of ``func``,
  ``submit`` raises :class:`OptionCollision` (a ``TypeError``) before
  anything is sent, naming the option, the function and the two explicit
  forms below. A dotted path (``"pkg.mod.fetch"``) cannot be inspected
  without importing it: there a keyword named like an option is the
  option, as before. A ``**kwargs`` parameter alone is not a collision.
- **The explicit forms** keep the two apart whatever the names:
  ``fetch.options(timeout=3).submit("http://x", timeout=10)`` on an
  ``@job`` function (options first, then exactly ``fetch``'s arguments:
  typed, see :mod:`emq_client.jobs`), and for any callable or path
  ``c.submit(emq_client.python(fetch, ["http://x"], {"timeout": 10}),
  timeout=3)`` (a :class:`~emq_client.Task` takes no further arguments, so
  every keyword of ``submit`` is an option).

:class:`SubmitOptions` is the one table of option names: the collision
check, ``f.options(...)`` and its type all read it. A new ``submit``
option is one entry here and one keyword-only parameter of
``Client.submit`` / ``AsyncClient.submit`` (which hand their ``locals()``
to :func:`given`; ``tests/test_options.py`` checks that the table and the
signatures agree).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, TypedDict


class SubmitOptions(TypedDict, total=False):
    """Every option of ``submit`` besides the job's arguments (all
    optional; None or absent: the default)."""

    #: The queue (default: the client's).
    queue: Optional[str]
    #: ``retry-count:N``: run again up to N times after a failure.
    retries: Optional[int]
    #: ``timeout:N``: seconds before the job is killed.
    timeout: Optional[float]
    #: ``delay:SECS``: seconds before it may run.
    delay: Optional[float]
    #: More headers, as given.
    headers: Optional[Sequence[str]]
    #: ``unique-key:K``: at most one job with this key at a time (a
    #: duplicate submit returns the existing job).
    unique_key: Optional[str]
    #: ``unique-for:SECS``: the key stays taken this long from acceptance.
    unique_for: Optional[float]
    #: ``on-conflict:``: ``existing`` (default), ``reject`` or ``replace``.
    on_conflict: Optional[str]
    #: ``key:K``: the flow-control key (a tenant: per-key limits, fairness).
    key: Optional[str]
    #: ``priority:N``: 0–9, higher runs first.
    priority: Optional[int]


#: The option names, in order (from :class:`SubmitOptions`).
SUBMIT_OPTIONS: Tuple[str, ...] = tuple(SubmitOptions.__annotations__)


class NodeOptions(TypedDict, total=False):
    """The options a workflow node may have of its own
    (``task(f, ...).options(...)``, :mod:`emq_client.canvas`): those of
    :class:`SubmitOptions` that a node's job takes. ``delay`` and the
    unique-job options are not node options (a node starts when its
    parents are done, and runs once per workflow)."""

    queue: Optional[str]
    retries: Optional[int]
    timeout: Optional[float]
    headers: Optional[Sequence[str]]
    key: Optional[str]
    priority: Optional[int]


#: The node option names, in order (from :class:`NodeOptions`).
NODE_OPTIONS: Tuple[str, ...] = tuple(NodeOptions.__annotations__)
assert set(NODE_OPTIONS) <= set(SUBMIT_OPTIONS)


def node_options(options: Mapping[str, Any]) -> Tuple[Tuple[str, Any], ...]:
    """``options`` checked as a node's (``TypeError`` naming the ones a
    node cannot have), as a hashable tuple; None values dropped."""
    bad = [k for k in options if k not in NODE_OPTIONS]
    if bad:
        raise TypeError(
            f"{', '.join(bad)}: not a workflow node option; a node takes {', '.join(NODE_OPTIONS)}"
        )
    return tuple((k, tuple(v) if k == "headers" else v) for k, v in options.items() if v is not None)


class OptionCollision(TypeError):
    """``submit`` was given an option whose name is also a parameter of the
    job's function: which one was meant cannot be told."""

    def __init__(self, func_name: str, names: Sequence[str]) -> None:
        self.func_name = func_name
        self.names = list(names)
        given = ", ".join(f"{n}=" for n in names)
        one = names[0]
        super().__init__(
            f"submit({func_name}, ..., {given}): {func_name}() has a parameter named "
            f"{' and '.join(repr(n) for n in names)} too, so it is unclear whether "
            f"{one}= is the job's option or {func_name}'s argument. Say which: "
            f"{func_name}.options({one}=...).submit(*args, **kwargs) on an @job function, "
            f"or c.submit(emq_client.python({func_name}, args, kwargs), {one}=...) — "
            f"every keyword of submit is then an option and kwargs are {func_name}'s"
        )


def unknown(options: Mapping[str, Any]) -> None:
    """Raise ``TypeError`` for a name that is not a submit option."""
    bad = [k for k in options if k not in SUBMIT_OPTIONS]
    if bad:
        raise TypeError(f"unknown job option(s) {', '.join(bad)}: the options are {', '.join(SUBMIT_OPTIONS)}")


def given(params: Mapping[str, Any]) -> Dict[str, Any]:
    """The options among a ``submit`` call's parameters (its ``locals()``
    on entry): adding an option to :class:`SubmitOptions` and to
    ``submit``'s signature is all it takes for the collision check."""
    return {n: params[n] for n in SUBMIT_OPTIONS if n in params}


@functools.lru_cache(maxsize=512)
def _parameters(func: Callable[..., Any]) -> Optional[Dict[str, inspect.Parameter]]:
    """``func``'s named parameters (those a keyword can fill), or None when
    it has no signature to read (cached: a submit loop reads it once)."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {n: p for n, p in sig.parameters.items() if p.kind in named}


def takes_keyword(func: Callable[..., Any], name: str) -> bool:
    """A call of ``func`` may fill ``name`` by keyword (a named parameter,
    or ``**kwargs``; True when there is no signature to read)."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return True
    p = sig.parameters.get(name)
    if p is not None and p.kind is not inspect.Parameter.POSITIONAL_ONLY:
        return True
    return any(q.kind is inspect.Parameter.VAR_KEYWORD for q in sig.parameters.values())


def refuse_collisions(func: Any, given: Mapping[str, Any]) -> None:
    """Raise :class:`OptionCollision` when an option of ``given`` (name →
    value; None: not given) is also a named parameter of ``func`` (a
    callable; paths and Tasks are not inspected)."""
    if isinstance(func, str) or not callable(func):
        return
    set_names = [n for n, v in given.items() if v is not None]
    if not set_names:
        return
    try:
        params = _parameters(func)
    except TypeError:  # unhashable callable
        params = _parameters.__wrapped__(func)
    if not params:
        return
    clash = [n for n in set_names if n in params]
    if clash:
        name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
        raise OptionCollision(name, clash)
