"""emq job manager's Python worker.

Runs EventMQ `run` jobs one at a time for the Rust job manager, which starts
one of these per slot and keeps it for many jobs. Protocol: JSON lines on the
process's original stdin/stdout.

  first line out:  {"hello": "emq-worker", "pid": N, "python": "3.x.y"}
  in:              {"id": RUN, "job": {"path", "callable", "args", "kwargs",
                                       "class_args", "class_kwargs"}}
  out:             {"id": RUN, "value": <return value>}
               or  {"id": RUN, "error": {"kind": "exception"|"bad-job",
                                         "message": str, "traceback": str}}

`path` is `pkg.module` (call the module attribute `callable`) or
`pkg.module:Class` (instantiate Class(*class_args, **class_kwargs), then call
its method `callable`). The job's own output on stdout goes to stderr, and
its stdin is /dev/null, so neither can disturb the protocol.
"""

import importlib
import json
import os
import sys
import traceback


def _protocol_streams():
    """Keep private copies of fd 0/1 for the protocol; give the job
    /dev/null as stdin and stderr as stdout (also at the fd level, so C
    extensions and child processes cannot write into the protocol)."""
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8", errors="replace")
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, "r")
    sys.stdout = sys.stderr
    return proto_in, proto_out


class BadJob(Exception):
    pass


def _resolve(job):
    if not isinstance(job, dict):
        raise BadJob("job must be an object")
    path = job.get("path")
    name = job.get("callable")
    if not isinstance(path, str) or not path:
        raise BadJob("'path' must be a non-empty string")
    if not isinstance(name, str) or not name:
        raise BadJob("'callable' must be a non-empty string")
    module_name, _, class_name = path.partition(":")
    module = importlib.import_module(module_name)
    if class_name:
        cls = getattr(module, class_name)
        obj = cls(*(job.get("class_args") or []), **(job.get("class_kwargs") or {}))
        return getattr(obj, name)
    return getattr(module, name)


def _error(kind, exc, tb=True):
    text = str(exc)
    message = "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__
    err = {"kind": kind, "message": message}
    if tb:
        err["traceback"] = traceback.format_exc()
    return err


def _run(req):
    rid = req.get("id") if isinstance(req, dict) else None
    job = req.get("job") if isinstance(req, dict) else None
    try:
        fn = _resolve(job)
        args = job.get("args") or []
        kwargs = job.get("kwargs") or {}
        value = fn(*args, **kwargs)
    except BadJob as e:
        return {"id": rid, "error": _error("bad-job", e, tb=False)}
    except BaseException as e:  # SystemExit and KeyboardInterrupt too: the worker lives on
        return {"id": rid, "error": _error("exception", e)}
    try:
        return json.dumps({"id": rid, "value": value}, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as e:
        return {
            "id": rid,
            "error": {
                "kind": "exception",
                "message": "return value is not JSON serialisable: %s" % e,
            },
        }


def main():
    proto_in, proto_out = _protocol_streams()
    if "" not in sys.path:
        sys.path.insert(0, "")
    hello = {"hello": "emq-worker", "pid": os.getpid(), "python": sys.version.split()[0]}
    proto_out.write(json.dumps(hello) + "\n")
    proto_out.flush()
    for line in proto_in:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
        except ValueError as e:
            out = {"id": None, "error": {"kind": "bad-job", "message": "bad request line: %s" % e}}
        else:
            out = _run(req)
        if not isinstance(out, str):
            out = json.dumps(out)
        try:
            sys.stderr.flush()
        except Exception:
            pass
        proto_out.write(out + "\n")
        proto_out.flush()


if __name__ == "__main__":
    main()
