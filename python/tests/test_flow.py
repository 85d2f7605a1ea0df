"""Flow control with real processes (docs/PROTOCOL.md, "Flow control"): a
per-key concurrency limit holds with a real job manager, measured by the
jobs themselves; other keys pass the held ones; the policy is set, shown and
cleared through the Python client and emq-cli, and kept across a router
restart by the SQLite journal."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from conftest import binary, start_router, wait_until
from emq_client import AdminError


def peak_running(path: Path) -> Dict[str, int]:
    """Per key (the tag's prefix before ``-``), the most jobs that ran at
    once, from the jobs' own start/end lines."""
    events: List[Tuple[float, int, str]] = []
    for line in path.read_text().splitlines():
        what, tag, t = line.split()
        key = tag.split("-")[0]
        # Ends before starts at the same instant.
        events.append((float(t), 1 if what == "start" else 0, key))
    events.sort()
    running: Dict[str, int] = {}
    peak: Dict[str, int] = {}
    for _, start, key in events:
        running[key] = running.get(key, 0) + (1 if start else -1)
        peak[key] = max(peak.get(key, 0), running[key])
    return peak


def cli(router, *args: str) -> str:
    out = subprocess.run(
        [str(binary("emq-cli")), "--admin", router.admin, *args], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_per_key_concurrency_limit_holds_with_a_real_job_manager(tmp_path: Path) -> None:
    router = start_router(tmp_path, "--limit", "flowq:concurrency-per-key=2")
    try:
        router.add_jobmanager("--queues", "10:flowq", concurrency=6)
        probe = tmp_path / "probe.log"
        with router.client() as c:
            assert c.limits("flowq")[0]["policy"] == {"concurrency_per_key": 2, "fair": False}
            jobs = [
                c.submit("emq_pyclient_jobs.flow_probe", str(probe), f"acme-{i}", 0.3, queue="flowq", key="acme")
                for i in range(8)
            ]
            # Behind acme's held jobs, bolt's go at once (no head-of-line blocking).
            bolt = [
                c.submit("emq_pyclient_jobs.flow_probe", str(probe), f"bolt-{i}", 0.3, queue="flowq", key="bolt")
                for i in range(2)
            ]
            # Until the job manager has started acme's first two, every job
            # is "waiting its turn" (seen under load once the client
            # submitted faster): wait for the limit to be what holds them.
            waiting: List[str] = []

            def acme_held_at_its_limit() -> bool:
                waiting[:] = [c.admin("job", msgid=j.msgid)["job"].get("waiting", "") for j in jobs[2:]]
                return any(w == "limited: key acme at 2/2 running" for w in waiting)

            wait_until("acme's jobs held at its limit", acme_held_at_its_limit, 10)
            shown = json.loads(cli(router, "--json", "limits", "show", "flowq"))
            keys = {k["key"]: k for k in shown["limits"][0]["keys"]}
            assert keys["acme"]["running"] <= 2
            for j in bolt + jobs:
                j.result(timeout=30)
        peak = peak_running(probe)
        assert peak["acme"] == 2, peak
        assert peak["bolt"] == 2, peak
        # bolt's first job started before acme's last one: it was not held
        # behind acme's queue.
        starts = [l.split() for l in probe.read_text().splitlines() if l.startswith("start")]
        order = [s[1] for s in sorted(starts, key=lambda s: float(s[2]))]
        assert order.index("bolt-0") < order.index("acme-7"), order
    finally:
        router.stop()


def test_limits_helpers_and_emq_cli_share_one_policy(tmp_path: Path) -> None:
    router = start_router(tmp_path)
    try:
        with router.client() as c:
            assert c.limits() == []
            p = c.set_limits("q1", concurrency=3, rate=(10, 1), fair=True)
            assert p == {"concurrency": 3, "rate": "10/1", "fair": True}
            p = c.set_limits("q1", concurrency=None, rate_per_key="1/0.5")
            assert p == {"rate": "10/1", "rate_per_key": "1/0.5", "fair": True}
            assert "queue q1: rate=10/1,rate-per-key=1/0.5,fair" in cli(router, "limits", "show")
            cli(router, "limits", "set", "q1", "--no-fair", "--concurrency-per-key", "4")
            assert c.limits("q1")[0]["text"] == "concurrency-per-key=4,rate=10/1,rate-per-key=1/0.5"
            with pytest.raises(ValueError):
                c.submit("emq_pyclient_jobs.multiply", 1, 2, queue="q1", key="k" * 129)
            with pytest.raises(ValueError):
                c.submit("emq_pyclient_jobs.multiply", 1, 2, queue="q1", priority=10)
            c.clear_limits("q1")
            assert c.limits() == []
            with pytest.raises(AdminError):
                c.clear_limits("q1")
    finally:
        router.stop()


def test_a_policy_survives_a_router_restart_with_the_sqlite_journal(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite"
    router = start_router(tmp_path, journal=journal)
    try:
        with router.client() as c:
            c.set_limits("billing", concurrency_per_key=1, rate_per_key="5/1", fair=True)
    finally:
        router.stop()
    again = start_router(tmp_path, journal=journal)
    try:
        with again.client() as c:
            shown = c.limits("billing")
            assert shown[0]["policy"] == {"concurrency_per_key": 1, "rate_per_key": "5/1", "fair": True}
        assert "billing: concurrency-per-key=1,rate-per-key=5/1,fair" in cli(again, "limits", "show")
    finally:
        again.stop()
