"""Fixtures: real emq-router and emq-jobmanager processes on free loopback
ports, started from ``$EMQ_BIN_DIR`` (default ``<repo>/target/debug``, built
by ``scripts/test.sh``), and stopped again by the fixture that started them.

Python jobs come from ``tests/python/emq_test_jobs.py`` and this directory
(``emq_pyclient_jobs.py``), both on the job manager's PYTHONPATH and on this
process's ``sys.path``. Every wait is bounded; readiness is asked of the
router (admin ops), never slept for.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

from emq_client import AsyncClient, AsyncJob, BulkRejected, Client, EmqError

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TESTS_PY = REPO / "tests" / "python"
TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
if not TARGET.is_absolute():
    TARGET = REPO / TARGET
BIN_DIR = Path(os.environ.get("EMQ_BIN_DIR") or TARGET / "debug")
# The test job module (tests/python/emq_test_jobs.py) is importable by
# the job manager's Python workers and by these tests.
JOBS_DIR = TESTS_PY
PYTHONPATH = os.pathsep.join([str(JOBS_DIR), str(HERE)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
for p in (str(JOBS_DIR), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

START_TIMEOUT = 20.0


def binary(name: str) -> Path:
    """An emq binary; a missing one fails the test (never a skip)."""
    path = BIN_DIR / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: build it first (scripts/test.sh does; or cargo build --bins)")
    return path


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(what: str, cond: Callable[[], bool], timeout: float, proc: Optional["Proc"] = None) -> None:
    """Poll ``cond`` (20 ms apart) until true; fail after ``timeout`` s or
    when ``proc`` exits."""
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.popen.poll() is not None:
            pytest.fail(f"{proc.name} exited ({proc.popen.returncode}) while waiting for {what}:\n{proc.tail()}")
        if time.monotonic() > deadline:
            extra = f"\n{proc.name} log:\n{proc.tail()}" if proc is not None else ""
            pytest.fail(f"timed out after {timeout} s waiting for {what}{extra}")
        time.sleep(0.02)


@dataclass
class Proc:
    """A child process with its output in a log file."""

    name: str
    popen: "subprocess.Popen[bytes]"
    log: Path

    def tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout``."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


def spawn(name: str, argv: List[str], log_dir: Path, env: Optional[dict] = None) -> Proc:
    log = log_dir / f"{name}.log"
    full_env = dict(os.environ)
    full_env.update(env or {})
    out = open(log, "wb")
    try:
        popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=full_env, stdin=subprocess.DEVNULL)
    finally:
        out.close()
    return Proc(name, popen, log)


@dataclass
class Router:
    """A running emq-router and its addresses; ``workers`` are its job managers."""

    frontend: str
    backend: str
    admin: str
    proc: Proc
    log_dir: Path
    workers: List[Proc] = field(default_factory=list)
    #: Options every ``client()`` gets (e.g. CURVE keys).
    client_options: Dict[str, object] = field(default_factory=dict)

    def client(self, **options: object) -> Client:
        return Client(self.frontend, admin_addr=self.admin, **{**self.client_options, **options})  # type: ignore[arg-type]

    def connect(self, kind: str, **options: object) -> Any:
        """A ``Client`` (``kind`` "sync") or an :class:`AsyncAsSync` over an
        ``AsyncClient`` ("async"), with the same options."""
        return make_client(kind, self.frontend, admin_addr=self.admin, **{**self.client_options, **options})

    def add_jobmanager(self, *extra: str, concurrency: int = 4) -> Proc:
        """Start an emq-jobmanager on this router; return once the router
        lists it among its workers."""
        before = self.worker_count()
        jm = spawn(
            f"emq-jobmanager-{len(self.workers)}",
            [str(binary("emq-jobmanager")), "--broker", self.backend, "--python", sys.executable,
             "-J", str(concurrency), *extra],
            self.log_dir,
            {"PYTHONPATH": PYTHONPATH},
        )
        self.workers.append(jm)
        wait_until("the job manager to register", lambda: self.worker_count() > before, START_TIMEOUT, jm)
        return jm

    def worker_count(self) -> int:
        with self.client(admin_timeout=1.0) as c:
            return len(c.admin("workers").get("workers", []))

    def stop(self) -> None:
        for w in self.workers:
            w.stop()
        self.proc.stop()


def start_router(
    log_dir: Path,
    *extra: str,
    journal: Optional[Path] = None,
    ports: Optional[List[int]] = None,
    client_options: Optional[Dict[str, object]] = None,
) -> Router:
    """An emq-router on fresh ports (three tries: a port may be taken
    between choosing and binding), or on ``ports`` (frontend, backend,
    admin; one try), with ``--journal none`` or the ``journal`` file;
    ``client_options`` go to every client the Router makes (readiness is
    asked with them)."""
    last = ""
    for attempt in range(3 if ports is None else 1):
        fe, be, ad = (f"tcp://127.0.0.1:{p}" for p in (ports or [free_port() for _ in range(3)]))
        proc = spawn(
            f"emq-router-{attempt}" if attempt else "emq-router" if ports is None else f"emq-router-{ports[0]}",
            [str(binary("emq-router")), "--frontend", fe, "--backend", be, "--admin", ad,
             "--journal", str(journal) if journal else "none", *extra],
            log_dir,
        )
        router = Router(fe, be, ad, proc, log_dir, client_options=dict(client_options or {}))
        deadline = time.monotonic() + START_TIMEOUT
        while proc.popen.poll() is None and time.monotonic() < deadline:
            try:
                with router.client(admin_timeout=0.5) as c:
                    c.admin("status")
                return router
            except EmqError:
                continue
        last = proc.tail()
        proc.stop()
    pytest.fail(f"emq-router did not start:\n{last}")


class AsyncAsSync:
    """An :class:`AsyncClient` called like a :class:`Client`: every call
    runs to completion on the proxy's own event loop (bounded), and
    :class:`AsyncJob` results come back as :class:`AsyncAsSync` proxies
    too. One test body then checks both clients (the ``kind`` fixture)."""

    BOUND = 120.0

    def __init__(self, target: Any, loop: Optional[asyncio.AbstractEventLoop] = None) -> None:
        self._target = target
        self._loop = loop or asyncio.new_event_loop()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return self._wrap(value)

        def call(*args: Any, **kwargs: Any) -> Any:
            out = value(*args, **kwargs)
            if inspect.isawaitable(out):
                try:
                    out = self._loop.run_until_complete(asyncio.wait_for(out, self.BOUND))
                except BulkRejected as e:
                    e.jobs = [self._wrap(j) for j in e.jobs]
                    raise
            return self._wrap(out)

        return call

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, (AsyncClient, AsyncJob)):
            return AsyncAsSync(value, self._loop)
        if isinstance(value, list) and value and isinstance(value[0], AsyncJob):
            return [AsyncAsSync(v, self._loop) for v in value]
        return value

    def __enter__(self) -> "AsyncAsSync":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
        self._loop.close()


def make_client(kind: str, *args: Any, **options: Any) -> Any:
    """``Client(*args, **options)``, or for ``kind`` "async" the same
    ``AsyncClient`` behind an :class:`AsyncAsSync`."""
    if kind == "sync":
        return Client(*args, **options)
    assert kind == "async", kind
    return AsyncAsSync(AsyncClient(*args, **options))


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    """Run a test once with :class:`Client`, once with :class:`AsyncClient`."""
    return str(request.param)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Router]:
    """A router with one job manager (4 slots), shared by a test module."""
    router = start_router(tmp_path_factory.mktemp("cluster"), "--retry-backoff", "0.2")
    try:
        router.add_jobmanager()
        yield router
    finally:
        router.stop()


@pytest.fixture
def bare_router(tmp_path: Path) -> Iterator[Router]:
    """A router with no job manager: jobs stay queued."""
    router = start_router(tmp_path, "--hwm", "3")
    try:
        yield router
    finally:
        router.stop()


@pytest.fixture
def client(cluster: Router) -> Iterator[Client]:
    c = cluster.client()
    try:
        yield c
    finally:
        c.close()
