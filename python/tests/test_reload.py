"""``emq-jobmanager --reload``: after a watched module is edited, the next
job runs the new code (a real router and job manager; the job manager's
log line "… changed" is the event waited for, never a sleep)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from conftest import PYTHONPATH, START_TIMEOUT, binary, spawn, start_router, wait_until


def test_the_next_job_runs_the_edited_module(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    module = code / "emq_reload_job.py"
    module.write_text("def version():\n    return 1\n")
    router = start_router(tmp_path)
    try:
        before = router.worker_count()
        jm = spawn(
            "emq-jobmanager-reload",
            [str(binary("emq-jobmanager")), "--broker", router.backend, "--python", sys.executable,
             "-J", "2", "--reload-dir", str(code)],
            tmp_path,
            {"PYTHONPATH": os.pathsep.join([str(code), PYTHONPATH])},
        )
        router.workers.append(jm)
        wait_until("the job manager to register", lambda: router.worker_count() > before, START_TIMEOUT, jm)
        with router.client() as c:
            # Both slots' workers have imported the module.
            assert [j.result(30) for j in [c.submit("emq_reload_job.version") for _ in range(4)]] == [1] * 4
            # Another size too: a .pyc is trusted on source mtime (whole
            # seconds) and size.
            module.write_text("def version():\n    return 'two'\n")
            wait_until("the job manager to see the edit",
                       lambda: "emq_reload_job.py changed" in jm.log.read_text(errors="replace"), START_TIMEOUT, jm)
            assert [c.submit("emq_reload_job.version").result(30) for _ in range(4)] == ["two"] * 4
        log = jm.log.read_text(errors="replace")
        assert "the code changed (--reload)" in log, log
    finally:
        router.stop()
