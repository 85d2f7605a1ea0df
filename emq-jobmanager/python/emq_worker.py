"""emq job manager's Python fork server and workers.

The Rust job manager starts this script once per pool, as a *fork server*
(`python -u -c SCRIPT HOOKS`), with a Unix stream socket as its stdin and
stdout (the control socket). The server imports what the workers need (and
the hooks' modules), then forks one worker per request. A worker runs
EventMQ `run` jobs one at a time for one slot, over a socket of its own,
and is kept for many jobs (until MAX_JOB_COUNT; then the job manager closes
its socket and it exits).

Control socket, JSON lines:
  argument (argv[1], optional): {"setup": PATH|null, "entry": PATH|null,
                                 "exit": PATH|null}
  first line out:  {"hello": "emq-forkserver", "pid": N, "python": "3.x.y"}
  in:  {"fork": TOKEN}, with one descriptor attached (SCM_RIGHTS): the
       worker's socket
  out: {"forked": TOKEN, "pid": N}
  out: {"exited": PID, "code": N|null, "signal": N|null}, for every
       worker, not reaped yet (waitid WNOWAIT: its pid and process group
       stay reserved)
  in:  {"reap": PID}: the job manager forgot its group; reap it
  in:  {"release": PID, "grace": SECS}: the job manager no longer follows
       it: on its exit, or after SECS (then killed), its group is killed
       and it is reaped
  end of input: every worker's group is killed and the server exits.
A worker is its own process group leader, dies with the server
(PR_SET_PDEATHSIG), runs SUBPROCESS_SETUP_FUNC first, then:

Worker socket, JSON lines:
  first line out:  {"hello": "emq-worker", "pid": N, "python": "3.x.y",
                    "setup_error": str (if the setup function raised),
                    "hooks_error": str (if entry/exit cannot be loaded)}
  in:              {"id": RUN, "msgid": MSGID, "job": {"path", "callable", "args",
                                       "kwargs", "class_args", "class_kwargs"},
                    "context": {"msgid", "queue", "headers", "attempt",
                                "traceparent": str|null}}
  out, while it runs (0 or more, from emq_job.progress):
                   {"progress": {"id": RUN, "percent": 0-100, "message": str}}
  out:             {"id": RUN, "value": <return value>}
               or  {"id": RUN, "error": {"kind": "exception"|"bad-job",
                                         "message": str, "traceback": str}}

`path` is `pkg.module` (call the module attribute `callable`) or
`pkg.module:Class` (instantiate Class(*class_args, **class_kwargs), then call
its method `callable`). The job's own output on stdout goes to stderr, and
its stdin is /dev/null (the server's, inherited), so neither can disturb
the protocol. What the job
writes through sys.stdout and sys.stderr (print, logging to stderr) comes
out one line at a time tagged with its msgid, `[MSGID] line`, so that the
output of jobs on many slots can be told apart (a C extension or a child
process writing to fd 1 or 2 directly is not tagged). A traceback starts
at the job's own code: this script's frames are left out.

The hooks are EventMQ 0.3.13's SUBPROCESS_SETUP_FUNC (called once in each
worker, before its hello line: before its first job), JOB_ENTRY_FUNC and JOB_EXIT_FUNC
(called before and after every job), all with no arguments, named as
0.3.13's `callable_from_name` reads them: `pkg.mod.func`, or
`pkg.mod:Class.method` (Class() instantiated with no arguments). A setup
function that raises is reported and the worker goes on, as in 0.3.13. An
entry function that raises fails the job, which is not run; an exit
function that raises is reported on stderr and the job's result stands.

The job's context: the module `emq_job` is importable in the worker, and
`emq_job.current()` gives the running job's msgid, queue, headers and attempt (None
between jobs), and `emq_job.progress(percent, message=None)` reports how far
it is (the job manager forwards it to the router: `emq-cli job MSGID`). When the job has a `traceparent` (the job manager's span of
the run) and the `opentelemetry` package is importable, the worker makes it
the current OpenTelemetry context while the job runs, so spans the job
starts are children of the run; without the package nothing is imported.
"""

import importlib
import json
import os
import sys
import traceback


class BadJob(Exception):
    pass


# The running job's context (emq_job.current()), None between jobs.
_current = None
# The protocol's output stream and its lock (progress lines may come from
# the job's own threads).
_proto_out = None
_proto_lock = None


def _write_line(line):
    with _proto_lock:
        _proto_out.write(line + "\n")
        _proto_out.flush()


def _emq_job_module():
    """The `emq_job` module jobs import: current() for now."""
    import types

    mod = types.ModuleType("emq_job")
    mod.__doc__ = "The running emq job: emq_job.current()."

    def current():
        """The running job: {"msgid", "queue", "headers", "attempt"} (a
        copy; attempt is 1 for the first delivery), or None outside a job."""
        if _current is None:
            return None
        return {k: v for k, v in _current.items() if not k.startswith("_")}

    def progress(percent, message=None):
        """Report how far the running job is: `percent` 0-100 (a number,
        rounded down to a whole percent), `message` an optional line of
        text. The router keeps the last report (at most one each 200 ms,
        100 always); outside a job it raises RuntimeError."""
        job = _current
        if job is None:
            raise RuntimeError("emq_job.progress() called outside a running job")
        if isinstance(percent, bool) or not isinstance(percent, (int, float)):
            raise TypeError("percent must be a number, got %r" % (percent,))
        if not 0 <= percent <= 100:
            raise ValueError("percent must be within 0-100, got %r" % (percent,))
        if message is not None and not isinstance(message, str):
            raise TypeError("message must be a str or None, got %r" % (message,))
        line = {"id": job["_run"], "percent": int(percent), "message": message or ""}
        _write_line(json.dumps({"progress": line}))

    mod.current = current
    mod.progress = progress
    return mod


# opentelemetry, once looked for: None = not yet, False = not importable.
_otel = None


def _otel_attach(traceparent):
    """Make `traceparent` the current OpenTelemetry context; a token for
    _otel_detach, or None (no traceparent, or no opentelemetry)."""
    global _otel
    if not traceparent:
        return None
    if _otel is None:
        try:
            from opentelemetry import context as otel_context
            from opentelemetry.trace.propagation.tracecontext import (
                TraceContextTextMapPropagator,
            )

            _otel = (otel_context, TraceContextTextMapPropagator())
        except Exception:
            _otel = False
    if not _otel:
        return None
    otel_context, propagator = _otel
    try:
        return otel_context.attach(propagator.extract({"traceparent": traceparent}))
    except Exception:
        return None


def _otel_detach(token):
    if token is not None and _otel:
        try:
            _otel[0].detach(token)
        except Exception:
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
    # A module already imported is taken as import_module would return it,
    # without its import lock and path handling (a few microseconds a job).
    module = sys.modules.get(module_name)
    if module is None:
        module = importlib.import_module(module_name)
    if class_name:
        cls = getattr(module, class_name)
        obj = cls(*(job.get("class_args") or []), **(job.get("class_kwargs") or {}))
        return getattr(obj, name)
    return getattr(module, name)


def _callable_from_name(name):
    """0.3.13's `callable_from_name`: `pkg.mod.func` or
    `pkg.mod:Class.method` (without its module reload)."""
    if not isinstance(name, str) or "." not in name:
        raise ValueError("%r is not a dotted path (pkg.module.function)" % (name,))
    path, _, attr = name.rpartition(".")
    module_name, _, class_name = path.partition(":")
    obj = importlib.import_module(module_name)
    if class_name:
        obj = getattr(obj, class_name)()
    return getattr(obj, attr)


_OWN_FILE = (lambda: None).__code__.co_filename


def _job_traceback(exc):
    """The traceback of `exc` from the first frame that is not this
    script's (`File "<string>", line N, in _run` means nothing to the job's
    author)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == _OWN_FILE:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _error(kind, exc, tb=True, prefix=""):
    text = str(exc)
    message = "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__
    err = {"kind": kind, "message": prefix + message}
    if tb:
        err["traceback"] = _job_traceback(exc)
    return err


class _Tagged:
    """A text stream that writes whole lines to `out`, each after `tag`
    (a partial line waits for its newline, or for `close_line`)."""

    def __init__(self, out, tag):
        self._out = out
        self._tag = tag
        self._partial = ""

    def write(self, text):
        if not isinstance(text, str):
            text = str(text)
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._out.write(self._tag + line + "\n")
        return len(text)

    def close_line(self):
        if self._partial:
            self._out.write(self._tag + self._partial + "\n")
            self._partial = ""
        self._out.flush()

    def flush(self):
        self._out.flush()

    def isatty(self):
        return False

    def writable(self):
        return True

    def __getattr__(self, name):
        return getattr(self._out, name)


class _tagged_output:
    """sys.stdout and sys.stderr tagged with `[msgid] ` while a job runs."""

    def __init__(self, msgid):
        self.tag = "[%s] " % msgid if msgid else ""

    def __enter__(self):
        self.saved = (sys.stdout, sys.stderr)
        if self.tag:
            self.stream = _Tagged(sys.__stderr__, self.tag)
            sys.stdout = sys.stderr = self.stream
        return self

    def __exit__(self, *exc):
        if self.tag:
            try:
                self.stream.close_line()
            except Exception:
                pass
        sys.stdout, sys.stderr = self.saved
        return False


class Hooks:
    """The configured setup, entry and exit functions."""

    def __init__(self, cfg):
        self.setup_name = cfg.get("setup") or None
        self.entry_name = cfg.get("entry") or None
        self.exit_name = cfg.get("exit") or None
        self.entry = None
        self.exit = None
        # Set when entry/exit cannot be loaded: every job fails with it.
        self.error = None

    def preimport(self):
        """Import the hooks' modules, without calling anything (in the
        fork server, so that every worker finds them imported). A module
        that cannot be imported yet is left to the workers, which report
        it as before."""
        for name in (self.setup_name, self.entry_name, self.exit_name):
            if not isinstance(name, str) or "." not in name:
                continue
            module_name = name.rpartition(".")[0].partition(":")[0]
            try:
                importlib.import_module(module_name)
            except BaseException:
                pass

    def run_setup(self):
        """Call SUBPROCESS_SETUP_FUNC; the error text if it raised."""
        if not self.setup_name:
            return None
        try:
            _callable_from_name(self.setup_name)()
        except BaseException as e:  # SystemExit too: the worker lives on, as in 0.3.13
            traceback.print_exc()
            return _error("exception", e, tb=False)["message"]
        return None

    def load(self):
        """Resolve JOB_ENTRY_FUNC and JOB_EXIT_FUNC (after setup, which may
        make their modules importable); the error text if one cannot be."""
        for setting, name, attr in (
            ("JOB_ENTRY_FUNC", self.entry_name, "entry"),
            ("JOB_EXIT_FUNC", self.exit_name, "exit"),
        ):
            if not name:
                continue
            try:
                setattr(self, attr, _callable_from_name(name))
            except BaseException as e:
                traceback.print_exc()
                self.error = {
                    "kind": "exception",
                    "message": "cannot load %s %r: %s" % (
                        setting, name, _error("exception", e, tb=False)["message"]),
                }
                return self.error["message"]
        return None

    def call_exit(self):
        if self.exit is None:
            return
        try:
            self.exit()
        except BaseException:
            sys.stderr.write("emq worker: JOB_EXIT_FUNC %r raised (the job's result stands):\n"
                             % self.exit_name)
            traceback.print_exc()


def _run(req, hooks):
    global _current
    ctx = req.get("context") if isinstance(req, dict) else None
    ctx = ctx if isinstance(ctx, dict) else {}
    _current = {
        "_run": req.get("id") if isinstance(req, dict) else None,
        "msgid": ctx.get("msgid"),
        "queue": ctx.get("queue"),
        "headers": ctx.get("headers"),
        "attempt": ctx.get("attempt", 1),
    }
    token = _otel_attach(ctx.get("traceparent"))
    try:
        return _run_job(req, hooks)
    finally:
        _otel_detach(token)
        _current = None


def _run_job(req, hooks):
    rid = req.get("id") if isinstance(req, dict) else None
    job = req.get("job") if isinstance(req, dict) else None
    if hooks.error is not None:
        return {"id": rid, "error": dict(hooks.error)}
    if hooks.entry is not None:
        try:
            hooks.entry()
        except BaseException as e:
            prefix = "JOB_ENTRY_FUNC %s raised " % hooks.entry_name
            return {"id": rid, "error": _error("exception", e, prefix=prefix)}
    msgid = req.get("msgid") if isinstance(req.get("msgid"), str) else None
    try:
        fn = _resolve(job)
        args = job.get("args") or []
        kwargs = job.get("kwargs") or {}
        with _tagged_output(msgid):
            value = fn(*args, **kwargs)
    except BadJob as e:
        return {"id": rid, "error": _error("bad-job", e, tb=False)}
    except BaseException as e:  # SystemExit and KeyboardInterrupt too: the worker lives on
        return {"id": rid, "error": _error("exception", e)}
    finally:
        hooks.call_exit()
    try:
        return _encode_strict({"id": rid, "value": value})
    except (TypeError, ValueError, RecursionError) as e:
        return {
            "id": rid,
            "error": {
                "kind": "exception",
                "message": "return value is not JSON serialisable: %s" % e,
            },
        }


# json.dumps(..., allow_nan=False) builds an encoder per call (a few
# microseconds a job); this one is built once.
_encode_strict = json.JSONEncoder(allow_nan=False).encode


def _serve(proto_in, proto_out, hooks, hello):
    """The worker's loop: the hello line, then one answer per request
    line, until its socket is closed."""
    global _proto_out, _proto_lock
    import threading

    _proto_out, _proto_lock = proto_out, threading.Lock()
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
            out = _run(req, hooks)
        if not isinstance(out, str):
            out = json.dumps(out)
        try:
            sys.stderr.flush()
        except Exception:
            pass
        _write_line(out)


def _worker_exit():
    """End a forked worker as an interpreter ends (non-daemon threads
    joined, atexit handlers run, streams flushed), without the full
    teardown of every module the fork server imported (tens of
    milliseconds), and never back into the fork server's loop."""
    code = 0
    try:
        import atexit
        import threading

        threading._shutdown()
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def _die_with_parent():
    """PR_SET_PDEATHSIG(SIGKILL): a worker dies with its fork server."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    except Exception:
        pass


def _status(pid):
    """The exit of child `pid`, without reaping it (its pid and process
    group stay reserved until the job manager says `reap`)."""
    import signal as _signal

    try:
        res = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    except ChildProcessError:
        return {"code": None, "signal": None}
    if res is None:
        return None
    if res.si_code == os.CLD_EXITED:
        return {"code": res.si_status, "signal": None}
    return {"code": None, "signal": int(res.si_status) if res.si_status else _signal.SIGKILL}


def _fork_server(ctl, hooks, hello):
    """Fork workers on request over the control socket `ctl` (see
    python.rs and forkserver.rs for the protocol): every fork gets a
    descriptor (SCM_RIGHTS), the worker's socket. Exits of the workers are
    seen on their pidfds and reported; a worker is reaped only when the job
    manager says so (`reap`), or by the server itself once it is
    `release`d (after killing what is left of its group)."""
    import select
    import signal as _signal
    import socket
    import time

    me = os.getpid()
    pidfds = {}  # pidfd -> pid, workers that have not exited
    exited = set()  # exited, reported, not reaped
    released = {}  # pid -> deadline: the server reaps it
    buf = b""
    fds = []

    def send(obj):
        ctl.sendall((json.dumps(obj) + "\n").encode())

    def finish(pid):
        """Reap a released worker that exited (its group's leftovers go)."""
        try:
            os.killpg(pid, _signal.SIGKILL)
        except OSError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        released.pop(pid, None)
        exited.discard(pid)

    def handle(msg):
        if "fork" in msg:
            fd = fds.pop(0)
            pid = os.fork()
            if pid == 0:
                try:
                    os.setpgid(0, 0)
                    _die_with_parent()
                    if os.getppid() != me:
                        os._exit(1)
                    ctl.close()
                    for f in list(pidfds) + fds:
                        os.close(f)
                    if "random" in sys.modules:
                        sys.modules["random"].seed()
                    proto_in = os.fdopen(os.dup(fd), "r", encoding="utf-8", errors="replace")
                    proto_out = os.fdopen(fd, "w", encoding="utf-8")
                    h = dict(hello, pid=os.getpid())
                except BaseException:
                    traceback.print_exc()
                    os._exit(70)
                try:
                    # 0.3.13's meaning: setup once in each worker process,
                    # first; then the entry and exit functions are loaded.
                    setup_error = hooks.run_setup()
                    if setup_error:
                        h["setup_error"] = setup_error
                    hooks_error = hooks.load()
                    if hooks_error:
                        h["hooks_error"] = hooks_error
                    try:
                        sys.stderr.flush()
                    except Exception:
                        pass
                except BaseException:
                    traceback.print_exc()
                    _worker_exit()
                try:
                    _serve(proto_in, proto_out, hooks, h)
                finally:
                    _worker_exit()
            os.close(fd)
            pidfds[os.pidfd_open(pid)] = pid
            send({"forked": msg["fork"], "pid": pid})
        elif "reap" in msg:
            pid = msg["reap"]
            if pid in exited:
                exited.discard(pid)
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        elif "release" in msg:
            pid = msg["release"]
            if pid in exited:
                finish(pid)
            elif pid in pidfds.values():
                released[pid] = time.monotonic() + float(msg.get("grace", 0))

    while True:
        now = time.monotonic()
        timeout = None
        for pid, deadline in released.items():
            # inf: killed after its grace, its exit report comes.
            if pid not in exited and deadline != float("inf"):
                timeout = max(0.0, min(timeout if timeout is not None else 1e9, deadline - now))
        ready, _, _ = select.select([ctl] + list(pidfds), [], [], timeout)
        for r in ready:
            if r is ctl:
                data, new_fds, _, _ = socket.recv_fds(ctl, 65536, 64)
                fds.extend(new_fds)
                if not data:
                    # The job manager is gone or stops us: every worker
                    # group goes, then the server.
                    for pid in list(pidfds.values()) + list(exited):
                        try:
                            os.killpg(pid, _signal.SIGKILL)
                        except OSError:
                            pass
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        handle(json.loads(line))
            else:
                pid = pidfds.pop(r)
                os.close(r)
                status = _status(pid) or {"code": None, "signal": None}
                exited.add(pid)
                send(dict({"exited": pid}, **status))
                if pid in released:
                    finish(pid)
        now = time.monotonic()
        for pid, deadline in list(released.items()):
            if pid not in exited and now >= deadline:
                sys.stderr.write(
                    "emq: retired Python worker pid %d did not exit in time; killing it\n" % pid)
                try:
                    os.killpg(pid, _signal.SIGKILL)
                except OSError:
                    pass
                released[pid] = float("inf")


def main():
    import socket

    # The control socket is fd 0 (and 1): keep a private copy, give fd 0
    # /dev/null and fd 1 stderr (what setup and the jobs print).
    ctl = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, "r")
    sys.stdout = sys.stderr
    sys.modules.setdefault("emq_job", _emq_job_module())
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        cfg = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    except ValueError:
        cfg = {}
    hooks = Hooks(cfg if isinstance(cfg, dict) else {})
    hello = {"hello": "emq-worker", "pid": os.getpid(), "python": sys.version.split()[0]}
    hooks.preimport()
    try:
        sys.stderr.flush()
    except Exception:
        pass
    ctl.sendall((json.dumps(dict(hello, hello="emq-forkserver")) + "\n").encode())
    _fork_server(ctl, hooks, hello)


if __name__ == "__main__":
    main()
