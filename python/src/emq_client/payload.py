"""Job payloads: the MSG frame of a REQUEST.

A :class:`Task` is a finished MSG frame. Python jobs are written exactly as
EventMQ 0.3.13's ``defer_job`` writes them (``json.dumps`` with its default
separators, keys in the order ``callable, path, args, kwargs, class_args,
class_kwargs``), so the router and a 0.3.13 job manager see the same bytes
from either library; the router names schedules by these bytes. ``call`` and
``shell`` build emq's Rust-handler and shell-command jobs.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

from .options import node_options

#: What ``submit`` accepts as the job: a callable, a dotted path string
#: (``pkg.mod.func`` or ``pkg.mod:Class.method``), or a built :class:`Task`.
JobSpec = Union["Task", str, Callable[..., Any]]


@dataclass(frozen=True)
class Task:
    """A job payload ready to send: ``message`` is the MSG frame;
    ``node_options``: the options it has as a workflow node
    (:meth:`options`)."""

    kind: str
    message: bytes
    node_options: Tuple[Tuple[str, Any], ...] = ()

    def __repr__(self) -> str:
        text = self.message[:80].decode("utf-8", "replace")
        extra = "".join(f", {k}={v!r}" for k, v in self.node_options)
        return f"Task({self.kind}, {text}{extra})"

    def options(self, **opts: Any) -> "Task":
        """This task as a workflow node with options of its own
        (``queue``, ``retries``, ``timeout``, ``headers``, ``key``,
        ``priority``: :class:`emq_client.options.NodeOptions`), the same
        names as ``submit``'s and ``f.options(...)``'s; each one given
        replaces the workflow's (``submit(chain(...), queue=...)``) for
        this node. ``task(f, 1).options(queue="gpu", retries=3)``."""
        merged = dict(self.node_options)
        merged.update(node_options(opts))
        return Task(self.kind, self.message, tuple(merged.items()))


def name_from_callable(func: Callable[..., Any]) -> str:
    """The dotted name EventMQ 0.3.13 gives a callable: ``module.func`` for a
    function, ``module:Class.method`` for a bound method (the job manager
    instantiates Class with the class args, then calls the method)."""
    if inspect.ismethod(func):
        owner = func.__self__
        cls = owner if inspect.isclass(owner) else owner.__class__
        return f"{func.__module__}:{cls.__name__}.{func.__name__}"
    if inspect.isfunction(func) or inspect.isbuiltin(func):
        return f"{func.__module__}.{func.__name__}"
    raise TypeError(f"cannot name {func!r}: pass a function, a method or a dotted path")


def split_callable_name(name: str) -> Tuple[str, str]:
    """Split ``pkg.mod.func`` into ``("pkg.mod", "func")`` at the last dot,
    as 0.3.13 does (``pkg.mod:Class.method`` gives ``pkg.mod:Class``)."""
    if "." not in name:
        raise ValueError(f"invalid callable path {name!r}: an absolute path is required")
    path, _, func = name.rpartition(".")
    if not path or not func:
        raise ValueError(f"invalid callable path {name!r}")
    return path, func


def resolve(func: Union[str, Callable[..., Any]]) -> Tuple[str, str]:
    """``(path, callable)`` for a dotted string or a callable. Functions that
    a job manager could not import (defined in ``__main__``, nested, lambdas)
    are refused here rather than failing later on the worker."""
    if isinstance(func, str):
        return split_callable_name(func)
    if not callable(func):
        raise TypeError(f"not a callable or a dotted path: {func!r}")
    qualname = getattr(func, "__qualname__", "")
    if "<locals>" in qualname or "<lambda>" in qualname:
        raise ValueError(f"{qualname} cannot be imported by a job manager: define it at module level")
    if getattr(func, "__module__", None) in (None, "__main__"):
        raise ValueError(f"{qualname} is defined in __main__: a job manager cannot import it")
    return split_callable_name(name_from_callable(func))


def _fast_encoder() -> Optional[Callable[[Any], str]]:
    """``json.dumps`` with its defaults, minus the encoder it builds on every
    call (``c_make_encoder``, more than half the cost of a small job's
    payload) and minus the circular-reference bookkeeping; None where the C
    encoder is not there or does not write what ``json.dumps`` writes. A
    circular value ends in ``RecursionError`` here: callers fall back to
    ``json.dumps`` for its own error."""
    try:
        from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]

        def refuse(o: Any) -> Any:
            raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")

        if c_make_encoder is None:
            return None
        encode = c_make_encoder(None, refuse, encode_basestring_ascii, None, ": ", ", ", False, False, True)

        def dumps(o: Any) -> str:
            return "".join(encode(o, 0))

        probe = ["run", {"a": [1, 2.5, None, True, "\u00e9\n"], "b": (), "c": {"d": -1e300}}]
        if dumps(probe) != json.dumps(probe):
            return None
        return dumps
    except Exception:
        return None


_dumps = _fast_encoder()


def _json(value: Any) -> bytes:
    """``json.dumps(value)`` as UTF-8, through the kept encoder when it can
    write it (else ``json.dumps`` itself, with its errors)."""
    if _dumps is not None:
        try:
            return _dumps(value).encode("utf-8")
        except Exception:
            pass
    return json.dumps(value).encode("utf-8")

#: ``["run", {"callable": C, "path": P, "args": `` by ``(P, C)``, for the
#: callables submitted lately (bounded: cleared when full).
_RUN_HEADS: Dict[Tuple[str, str], str] = {}
_RUN_HEADS_MAX = 1024
#: The rest of a run job without keyword or class arguments.
_RUN_TAIL = ', "kwargs": {}, "class_args": [], "class_kwargs": {}}]'


def _run_message_fast(
    path: str,
    callable_name: str,
    args: Sequence[Any],
    kwargs: Optional[Mapping[str, Any]],
    class_args: Sequence[Any],
    class_kwargs: Optional[Mapping[str, Any]],
) -> Optional[bytes]:
    """:func:`run_message`'s bytes written piece by piece with the kept
    encoder (the same bytes: each piece is what ``json.dumps`` writes for
    it, with its separators); None when they cannot be (no fast encoder, or
    a value it refuses: the caller then takes the slow path and its
    errors)."""
    dumps = _dumps
    if dumps is None:
        return None
    try:
        head = _RUN_HEADS.get((path, callable_name))
        if head is None:
            if len(_RUN_HEADS) >= _RUN_HEADS_MAX:
                _RUN_HEADS.clear()
            head = _RUN_HEADS[(path, callable_name)] = (
                '["run", {"callable": ' + dumps(callable_name) + ', "path": ' + dumps(path) + ', "args": '
            )
        if not kwargs and not class_kwargs and type(class_args) in (tuple, list) and not class_args:
            text = head + dumps(args) + _RUN_TAIL
        else:
            text = (
                head + dumps(args) + ', "kwargs": ' + dumps(kwargs or {}) + ', "class_args": ' + dumps(class_args)
                + ', "class_kwargs": ' + dumps(class_kwargs or {}) + "}]"
            )
        return text.encode("utf-8")
    except Exception:
        return None


def run_message(
    path: str,
    callable_name: str,
    args: Sequence[Any] = (),
    kwargs: Optional[Mapping[str, Any]] = None,
    class_args: Sequence[Any] = (),
    class_kwargs: Optional[Mapping[str, Any]] = None,
) -> bytes:
    """The MSG frame of a 0.3.13 ``run`` job, byte for byte as ``defer_job``
    writes it (tuples become lists, empty kwargs ``{}``). An argument JSON
    cannot write raises :class:`NotSerializable` naming it and the
    function."""
    fast = _run_message_fast(path, callable_name, args, kwargs, class_args, class_kwargs)
    if fast is not None:
        return fast
    msg = [
        "run",
        {
            "callable": callable_name,
            "path": path,
            "args": args,
            "kwargs": kwargs or {},
            "class_args": class_args,
            "class_kwargs": class_kwargs or {},
        },
    ]
    try:
        return json.dumps(msg).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise NotSerializable.find(f"{path}.{callable_name}", args, kwargs, class_args, class_kwargs, e) from None


class NotSerializable(TypeError):
    """A job argument that JSON cannot write (the job is not sent).
    ``argument`` names it: ``argument 2``, ``keyword argument 'when'``,
    ``class argument 1``, ``class keyword argument 'x'``."""

    def __init__(self, function: str, argument: str, value: Any, error: Exception) -> None:
        self.function = function
        self.argument = argument
        super().__init__(
            f"{argument} of {function} is not JSON-serialisable ({type(value).__name__}: {error}): "
            "job arguments travel as JSON — pass str, int, float, bool, None, lists or dicts of them "
            "(e.g. a datetime as .isoformat(), a Decimal as str)"
        )

    @classmethod
    def find(
        cls,
        function: str,
        args: Sequence[Any],
        kwargs: Optional[Mapping[str, Any]],
        class_args: Sequence[Any],
        class_kwargs: Optional[Mapping[str, Any]],
        error: Exception,
    ) -> Exception:
        """The error for the first argument that does not serialise (the
        original ``error`` when none alone fails)."""
        named = [(f"argument {i + 1}", v) for i, v in enumerate(args)]
        named += [(f"keyword argument {k!r}", v) for k, v in (kwargs or {}).items()]
        named += [(f"class argument {i + 1}", v) for i, v in enumerate(class_args)]
        named += [(f"class keyword argument {k!r}", v) for k, v in (class_kwargs or {}).items()]
        for where, value in named:
            try:
                json.dumps(value)
            except (TypeError, ValueError) as e:
                return cls(function, where, value, e)
        if not isinstance(kwargs or {}, Mapping) or any(not isinstance(k, str) for k in (kwargs or {})):
            return TypeError(f"keyword arguments of {function} must have str names: {error}")
        return error


def python(
    func: Union[str, Callable[..., Any]],
    args: Sequence[Any] = (),
    kwargs: Optional[Mapping[str, Any]] = None,
    class_args: Sequence[Any] = (),
    class_kwargs: Optional[Mapping[str, Any]] = None,
) -> Task:
    """A Python (``run``) job with every field explicit, for class jobs or
    for keyword arguments named like ``submit``'s options."""
    path, name = resolve(func)
    return Task("run", run_message(path, name, args, kwargs, class_args, class_kwargs))


def task(func: Union[str, Callable[..., Any]], *args: Any, **kwargs: Any) -> Task:
    """A Python job calling ``func(*args, **kwargs)``."""
    return python(func, args, kwargs)


def call(handler: str, args: Any = None) -> Task:
    """A job for the job manager's registered Rust handler (``echo``,
    ``noop`` are built in); ``args`` is any JSON value, left out when None."""
    body: Dict[str, Any] = {"handler": handler}
    if args is not None:
        body["args"] = args
    try:
        return Task("call", _json(["call", body]))
    except (TypeError, ValueError) as e:
        raise NotSerializable(f"the {handler!r} handler", "args", args, e) from None


def shell(
    argv: Sequence[str],
    *,
    stdin: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
) -> Task:
    """A shell-command job: ``argv`` run in its own process group; the result
    is ``{"exit_status", "stdout", "stderr"}`` (a non-zero exit fails with
    kind ``exit``)."""
    if isinstance(argv, str):
        raise TypeError("argv must be a list of strings, e.g. ['sh', '-c', 'echo hi']")
    body: Dict[str, Any] = {"argv": list(argv)}
    if stdin is not None:
        body["stdin"] = stdin
    if env:
        body["env"] = dict(env)
    if cwd is not None:
        body["cwd"] = cwd
    return Task("shell", _json(["shell", body]))


def raw(message: Union[bytes, str, Sequence[Any]]) -> Task:
    """A payload given as is: bytes or text are sent unchanged, anything else
    is written with ``json.dumps``."""
    if isinstance(message, bytes):
        return Task("raw", message)
    if isinstance(message, str):
        return Task("raw", message.encode("utf-8"))
    return Task("raw", _json(message))


def build(spec: JobSpec, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Task:
    """The Task for ``submit(spec, *args, **kwargs)``: a Task is taken as it
    is (and then takes no arguments), anything else is a Python job."""
    if isinstance(spec, Task):
        if args or kwargs:
            raise TypeError("a Task takes no further arguments: build it with them")
        if spec.node_options:
            raise TypeError(
                "task(...).options(...) are a workflow node's options: give a job's options to submit "
                f"({', '.join(k + '=' for k, _ in spec.node_options)})"
            )
        return spec
    return python(spec, args, kwargs)
