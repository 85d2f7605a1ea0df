"""Submit-and-result rate from Python, next to emq-sender's bulk mode.

    python python/tools/bench_submit.py [--bin-dir target/release] [-n 20000] [--runs 3]

Starts an emq-router (``--journal none``) and an emq-jobmanager (``-J 8``)
from ``--bin-dir`` on free loopback ports, then, ``--runs`` times each and
alternating: ``Client.submit_many`` of N no-op ``call`` jobs and every
``result()`` (one client, pipelined, window 1,000), and ``emq-sender --wait``
reading the same N jobs from stdin, and the same with ``AsyncClient``. Each run is timed from the client's
start to the last result. Prints every run and the medians, as text and as
one JSON line.

    python python/tools/bench_submit.py --submit-only [--bin-dir ...] [-n 20000] [--runs 3]

The client alone: how many jobs/s ``submit_many`` hands to the router, and
its CPU per job. The job manager is connected but the queue is paused
(admin ``pause``): the router acknowledges and holds every job, none runs,
no RESULT comes back. Each job is a Python job built by the caller as it
goes (``python("pkg.mod.func", [path, i])``: the payload's cost counts),
timed from the call to its return (every acknowledgement in), with
``Client`` and with ``AsyncClient``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from emq_client import AsyncClient, Client, EmqError, call, python


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def python_run(fe: str, ad: str, n: int, window: int, cpu: List[float]) -> float:
    """Jobs/s for one submit_many + results run; appends this process's CPU
    time per job (µs) to ``cpu``."""
    started, cpu0 = time.perf_counter(), time.process_time()
    with Client(fe, admin_addr=ad, window=window) as c:
        jobs = c.submit_many([call("noop")] * n, max_unfinished=10_000)
        for j in jobs:
            j.result(120)
    elapsed = time.perf_counter() - started
    cpu.append((time.process_time() - cpu0) / n * 1e6)
    return n / elapsed


def async_run(fe: str, ad: str, n: int, window: int) -> float:
    """Jobs/s for the same run with AsyncClient."""

    async def run() -> float:
        started = time.perf_counter()
        async with AsyncClient(fe, admin_addr=ad, window=window) as c:
            jobs = await c.submit_many([call("noop")] * n, max_unfinished=10_000)
            for j in jobs:
                await j.result(120)
        return n / (time.perf_counter() - started)

    return asyncio.run(run())


def submit_only_run(fe: str, ad: str, n: int, window: int, use_async: bool, cpu: List[float]) -> float:
    """Jobs/s for one ``submit_many`` of ``n`` fresh Python jobs to the
    paused queue, acknowledgements only; appends CPU µs per job to ``cpu``."""

    def items():  # type: ignore[no-untyped-def]
        for i in range(n):
            yield python("peer_jobs.done", ["/tmp/emq-bench-submit-only", i])

    async def run_async() -> int:
        async with AsyncClient(fe, admin_addr=ad, window=window) as c:
            return len(await c.submit_many(items()))

    started, cpu0 = time.perf_counter(), time.process_time()
    if use_async:
        done = asyncio.run(run_async())
    else:
        with Client(fe, admin_addr=ad, window=window) as c:
            done = len(c.submit_many(items()))
    elapsed = time.perf_counter() - started
    assert done == n
    cpu.append((time.process_time() - cpu0) / n * 1e6)
    return n / elapsed


def sender_run(sender: Path, fe: str, n: int) -> float:
    """Jobs/s for one ``emq-sender --wait -`` run over n stdin lines."""
    lines = ('["call", {"handler": "noop"}]\n' * n).encode()
    started = time.perf_counter()
    out = subprocess.run([str(sender), "--broker", fe, "--wait", "-"], input=lines,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
    elapsed = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"emq-sender exited {out.returncode}: {out.stderr.decode()[-2000:]}")
    return n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", default="target/release")
    ap.add_argument("-n", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--submit-only", action="store_true", help="the client alone: submit_many to a paused queue")
    opts = ap.parse_args()
    bins = Path(opts.bin_dir)
    fe, be, ad = (f"tcp://127.0.0.1:{free_port()}" for _ in range(3))
    logs = Path(tempfile.mkdtemp(prefix="emq-bench-py-"))
    procs = [subprocess.Popen([str(bins / "emq-router"), "--frontend", fe, "--backend", be, "--admin", ad,
                               "--journal", "none"], stdout=subprocess.DEVNULL, stderr=open(logs / "router.log", "wb"))]
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with Client(fe, admin_addr=ad, admin_timeout=0.5) as c:
                    c.admin("status")
                break
            except EmqError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"router did not start; see {logs}")
        # No Python job runs here: `--python false` keeps the job manager
        # from starting a Python worker per slot, whose interpreter starts
        # took the CPU during the first run.
        procs.append(subprocess.Popen([str(bins / "emq-jobmanager"), "--broker", be, "-J", str(opts.concurrency),
                                       "--python", "false"],
                                      stdout=subprocess.DEVNULL, stderr=open(logs / "jobmanager.log", "wb")))
        with Client(fe, admin_addr=ad) as c:  # warm-up; waits for the worker
            for j in c.submit_many([call("noop")] * 1000):
                j.result(60)
        if opts.submit_only:
            submit_only(fe, ad, opts)
            return
        rates: Dict[str, List[float]] = {"python": [], "python-async": [], "emq-sender": []}
        cpu: List[float] = []
        for i in range(opts.runs):
            rates["python"].append(python_run(fe, ad, opts.n, opts.window, cpu))
            rates["python-async"].append(async_run(fe, ad, opts.n, opts.window))
            rates["emq-sender"].append(sender_run(bins / "emq-sender", fe, opts.n))
            print(f"run {i + 1}: python {rates['python'][-1]:,.0f} jobs/s ({cpu[-1]:.0f} µs CPU/job), "
                  f"asyncio {rates['python-async'][-1]:,.0f} jobs/s, emq-sender {rates['emq-sender'][-1]:,.0f} jobs/s",
                  flush=True)
        med = {k: statistics.median(v) for k, v in rates.items()}
        print(f"median of {opts.runs}, {opts.n} no-op call jobs: python submit_many+result {med['python']:,.0f} jobs/s, "
              f"asyncio {med['python-async']:,.0f} jobs/s, emq-sender --wait {med['emq-sender']:,.0f} jobs/s "
              f"(python/emq-sender {med['python'] / med['emq-sender']:.0%})")
        print(json.dumps({"n": opts.n, "runs": rates, "median": med, "python_cpu_us_per_job": cpu, "python": sys.version.split()[0]}))
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


def submit_only(fe: str, ad: str, opts: argparse.Namespace) -> None:
    """The ``--submit-only`` runs (see the module documentation)."""
    with Client(fe, admin_addr=ad) as c:
        c.admin("pause", queue="default")
    rates: Dict[str, List[float]] = {"python": [], "python-async": []}
    cpu: Dict[str, List[float]] = {"python": [], "python-async": []}
    for i in range(opts.runs):
        for kind in ("python", "python-async"):
            rates[kind].append(submit_only_run(fe, ad, opts.n, opts.window, kind == "python-async", cpu[kind]))
        print(f"run {i + 1}: Client {rates['python'][-1]:,.0f} jobs/s ({cpu['python'][-1]:.1f} µs CPU/job), "
              f"AsyncClient {rates['python-async'][-1]:,.0f} jobs/s ({cpu['python-async'][-1]:.1f} µs CPU/job), "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"median of {opts.runs}, {opts.n} Python jobs acknowledged (queue paused): "
          f"Client {med['python']:,.0f} jobs/s ({med_cpu['python']:.1f} µs CPU/job), "
          f"AsyncClient {med['python-async']:,.0f} jobs/s ({med_cpu['python-async']:.1f} µs CPU/job)")
    print(json.dumps({"n": opts.n, "mode": "submit-only", "runs": rates, "cpu_us_per_job": cpu, "median": med,
                      "median_cpu_us_per_job": med_cpu, "python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
