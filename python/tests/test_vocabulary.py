"""The Python client's control-plane vocabulary against the Rust one: the
router's ops, their arguments, error kinds and job states come from
``emq-cli vocabulary`` (the JSON of ``emqp_proto::admin::vocabulary``), and
what this client sends or expects must be among them."""

from __future__ import annotations

import json
import subprocess
from typing import Any, Dict

import pytest

from conftest import binary
from emq_client import _base, _core, errors


@pytest.fixture(scope="module")
def vocabulary() -> Dict[str, Any]:
    out = subprocess.run(
        [str(binary("emq-cli")), "vocabulary"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    v: Dict[str, Any] = json.loads(out.stdout)
    return v


def test_the_admin_error_kinds_are_the_routers(vocabulary: Dict[str, Any]) -> None:
    assert list(errors.ADMIN_ERROR_KINDS) == vocabulary["error_kinds"]


def test_every_op_the_client_sends_exists_with_its_arguments(vocabulary: Dict[str, Any]) -> None:
    ops = vocabulary["ops"]
    for op, args in _core.ADMIN_OPS.items():
        assert op in ops, f"{op} is not an op of the router ({sorted(ops)})"
        assert set(args) <= set(ops[op]["args"]), f"{op}: {args} vs {ops[op]['args']}"
    # The client only reads, except cancel and the flow-control limits.
    assert [op for op in _core.ADMIN_OPS if ops[op]["change"]] == ["cancel", "limits-set", "limits-clear"]


def test_the_final_job_states_are_the_routers(vocabulary: Dict[str, Any]) -> None:
    finished = {name for name, s in vocabulary["job_states"].items() if s["finished"]}
    assert _core.FINAL_STATES == finished


def test_the_clients_own_admin_steps_are_in_its_list() -> None:
    assert _base.own_admin("job", msgid="m") == _base.Admin("job", {"msgid": "m"})
    with pytest.raises(ValueError):
        _base.own_admin("frobnicate")
    with pytest.raises(ValueError):
        _base.own_admin("job", id="m")
