"""Install without Rust: the wheels ``scripts/build-wheel.sh`` makes (the
``emq`` binaries and the ``emq-client`` client), installed into a fresh
virtualenv outside the checkout, run the README's quick start from that
virtualenv alone.

The wheels are packed from the binaries ``scripts/test.sh`` already built
(``$EMQ_BIN_DIR``, debug) rather than from a release build of their own:
the same packaging step, minutes cheaper. Every program runs with
``PATH`` = the virtualenv's ``bin/`` and ``/usr/bin`` (no cargo, no
target/), in a working directory outside the checkout, with no
``PYTHONPATH``: a router with its default journal, a job manager, a
Python job from ``emq-sender`` and from ``emq_client``, and ``emq-cli``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import BIN_DIR, REPO

#: What an installed binary may link: glibc's libraries, libstdc++, libgcc.
ALLOWED_LIBS = {
    "linux-vdso.so.1",
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libstdc++.so.6",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
}
BINARIES = ["emq-router", "emq-jobmanager", "emq-sender", "emq-cli", "emq-receiver", "emq-pubsub"]


def run(argv: List[str], env: Dict[str, str], cwd: Path, timeout: float) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def wait_for_line(log: Path, pattern: str, proc: "subprocess.Popen[bytes]", timeout: float) -> "re.Match[str]":
    """The first match of ``pattern`` in ``log`` (bounded; fails if ``proc`` exits)."""
    deadline = time.monotonic() + timeout
    while True:
        text = log.read_text(errors="replace") if log.exists() else ""
        m = re.search(pattern, text)
        if m:
            return m
        if proc.poll() is not None:
            pytest.fail(f"exited ({proc.returncode}) before {pattern!r}:\n{text[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {pattern!r} within {timeout} s:\n{text[-3000:]}")
        time.sleep(0.05)


def stop(proc: "subprocess.Popen[bytes]", log: Path) -> int:
    """SIGTERM and the exit status (SIGKILL after 30 s)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            pytest.fail(f"did not stop within 30 s of SIGTERM:\n{log.read_text(errors='replace')[-3000:]}")
    return int(proc.returncode)


def test_quick_start_from_the_wheels_in_a_fresh_venv(tmp_path: Path) -> None:
    for name in BINARIES:
        if not (BIN_DIR / name).is_file():
            pytest.fail(f"{BIN_DIR / name} is missing: build the binaries first (scripts/test.sh does)")
    assert not str(tmp_path.resolve()).startswith(str(REPO.resolve()) + os.sep), "scratch dir inside the checkout"

    # 1. The wheels, from the binaries the suite built.
    wheels = tmp_path / "wheels"
    build_env = dict(os.environ, EMQ_PYTHON=sys.executable)
    t0 = time.monotonic()
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-wheel.sh"), "--no-build", "--bin-dir", str(BIN_DIR), "--out", str(wheels)],
        env=build_env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, f"build-wheel.sh failed:\n{out.stdout}\n{out.stderr}"
    built = sorted(p.name for p in wheels.glob("*.whl"))
    assert len(built) == 2, built
    assert re.fullmatch(r"emq-\d+\.\d+\.\d+-py3-none-manylinux_2_\d+_x86_64\.whl", built[0]), built
    assert re.fullmatch(r"emq_client-\d+\.\d+\.\d+-py3-none-any\.whl", built[1]), built
    t_build = time.monotonic() - t0

    # 2. A fresh virtualenv outside the checkout: pyzmq from the index (or
    # pip's cache), then emq with no index at all, so that its dependency
    # emq-client can only be the wheel built here.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    vbin = venv / "bin"
    pip_env = dict(os.environ, PATH=f"{vbin}:/usr/bin")
    pip_env.pop("PYTHONPATH", None)
    pip = [str(vbin / "python"), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--quiet"]
    for args in (["pyzmq>=22"], ["--no-index", "--find-links", str(wheels), "emq"]):
        out = subprocess.run(pip + args, env=pip_env, capture_output=True, text=True, timeout=300,
                             stdin=subprocess.DEVNULL)
        assert out.returncode == 0, f"pip install {args} failed:\n{out.stdout}\n{out.stderr}"
    t_install = time.monotonic() - t0 - t_build

    # From here on: the virtualenv and /usr/bin only.
    env = {"PATH": f"{vbin}:/usr/bin", "HOME": str(tmp_path / "home"), "LANG": "C.UTF-8",
           "EMQ_DATA_DIR": str(tmp_path / "data")}
    assert shutil.which("cargo", path=env["PATH"]) is None, "cargo must not be on the quick start's PATH"
    for name in BINARIES:
        assert shutil.which(name, path=env["PATH"]) == str(vbin / name), name
        libs = run(["ldd", str(vbin / name)], env, tmp_path, 30).stdout
        needed = {line.split()[0].rsplit("/", 1)[-1] for line in libs.splitlines() if line.strip()}
        assert needed <= ALLOWED_LIBS, f"{name} links {sorted(needed - ALLOWED_LIBS)}:\n{libs}"
    version = run(["emq-router", "--version"], env, tmp_path, 30)
    assert version.returncode == 0 and "emq-router" in version.stdout, version

    work = tmp_path / "work"
    work.mkdir()
    (work / "jobs.py").write_text("def add(a, b):\n    return a + b\n")
    router_log, jm_log = tmp_path / "router.log", tmp_path / "jobmanager.log"
    with open(router_log, "wb") as log:
        router = subprocess.Popen(
            ["emq-router", "--frontend", "tcp://127.0.0.1:*", "--backend", "tcp://127.0.0.1:*",
             "--admin", "tcp://127.0.0.1:*"],
            env=env, cwd=work, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    jm = None
    try:
        addr = {
            name: wait_for_line(router_log, rf"listening: {name} (tcp://127\.0\.0\.1:\d+)", router, 30).group(1)
            for name in ("frontend", "backend", "admin")
        }
        assert (tmp_path / "data" / "journal.sqlite").exists(), "the default journal is in EMQ_DATA_DIR"
        with open(jm_log, "wb") as log:
            jm = subprocess.Popen(
                ["emq-jobmanager", "--broker", addr["backend"], "--concurrency", "2"],
                env=env, cwd=work, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )

        sent = run(["emq-sender", "--broker", addr["frontend"], "--wait", "--timeout", "60",
                    "--python", "jobs.add", "--args", "[1, 2]"], env, work, 90)
        assert sent.returncode == 0, f"{sent}\n{jm_log.read_text(errors='replace')[-3000:]}"
        assert json.loads(sent.stdout.strip().splitlines()[-1]) == {"value": 3}, sent.stdout

        script = (
            "import sys, emq_client\n"
            "from emq_client import Client\n"
            "print(emq_client.__file__)\n"
            "with Client(sys.argv[1], admin_addr=sys.argv[2]) as c:\n"
            "    job = c.submit('jobs.add', 20, 22)\n"
            "    print(job.result(timeout=60))\n"
            "    print(job.status().state)\n"
        )
        py = run(["python", "-c", script, addr["frontend"], addr["admin"]], env, work, 120)
        assert py.returncode == 0, py
        where, value, state = py.stdout.split()
        assert where.startswith(str(venv) + os.sep), f"emq_client came from {where}, not the fresh venv"
        assert (value, state) == ("42", "done"), py.stdout

        status = run(["emq-cli", "--admin", addr["admin"], "--json", "status"], env, work, 30)
        assert status.returncode == 0, status
        counters = json.loads(status.stdout)["counters"]
        assert (counters["accepted"], counters["completed"]) == (2, 2), status.stdout
    finally:
        codes = []
        if jm is not None:
            codes.append(("emq-jobmanager", stop(jm, jm_log)))
        codes.append(("emq-router", stop(router, router_log)))
    assert all(code == 0 for _, code in codes), codes
    print(f"wheel: built in {t_build:.1f} s, installed in {t_install:.1f} s, quick start in "
          f"{time.monotonic() - t0 - t_build - t_install:.1f} s")
