"""``@job`` keeps types (ParamSpec and ``Job[T]``): ``mypy --strict`` on
tests/typing_cases/job_types.py accepts the correct calls and reports each wrong
one, on its line, with the expected error code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Set, Tuple

import pytest

HERE = Path(__file__).resolve().parent
CASES = HERE / "typing_cases" / "job_types.py"
SRC = HERE.parent / "src"


def expected() -> Set[Tuple[int, str]]:
    out = set()
    for n, line in enumerate(CASES.read_text().splitlines(), 1):
        m = re.search(r"#\s*E:\s*([a-z-]+)\s*$", line)
        if m:
            out.add((n, m.group(1)))
    return out


def test_mypy_checks_job_arguments_and_result_types(tmp_path: Path) -> None:
    try:
        import mypy  # noqa: F401
    except ImportError:
        pytest.fail("mypy is not installed in this venv: run scripts/setup-python.sh")
    env = dict(os.environ, MYPYPATH=str(SRC))
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--show-error-codes",
         "--cache-dir", str(tmp_path / "cache"), str(CASES)],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    got = set()
    for line in run.stdout.splitlines():
        m = re.match(r".*job_types\.py:(\d+): error: .*\[([a-z-]+)\]$", line)
        if m:
            got.add((int(m.group(1)), m.group(2)))
    want = expected()
    assert len(want) >= 6
    assert got == want, f"mypy said:\n{run.stdout}{run.stderr}"
