"""The Python client's vocabulary against the Rust one: the router's ops,
their arguments, error kinds and job states come from ``emq-cli
vocabulary`` (the JSON of ``emqp_proto::admin::vocabulary``), and what this
client sends or expects must be among them; its settings table
(``settings_vocabulary.json``) is the tools' own (``"settings"``)."""

from __future__ import annotations

import json
import subprocess
from typing import Any, Dict

import pytest

from conftest import binary
from emq_client import _base, _core, errors, settings


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


def test_every_reject_reason_of_the_router_has_its_exception(vocabulary: Dict[str, Any]) -> None:
    assert set(errors.REJECT_REASONS) == set(vocabulary["reject_reasons"])


def test_every_op_the_client_sends_exists_with_its_arguments(vocabulary: Dict[str, Any]) -> None:
    ops = vocabulary["ops"]
    for op, args in _core.ADMIN_OPS.items():
        assert op in ops, f"{op} is not an op of the router ({sorted(ops)})"
        assert set(args) <= set(ops[op]["args"]), f"{op}: {args} vs {ops[op]['args']}"
    # The client only reads, except cancel and the flow-control limits.
    assert [op for op in _core.ADMIN_OPS if ops[op]["change"]] == ["cancel", "limits-set", "limits-clear"]


def test_the_final_job_states_are_the_routers(vocabulary: Dict[str, Any]) -> None:
    # A job's, and a workflow's (the handle of submit(chain(...))).
    finished = {name for name, s in vocabulary["job_states"].items() if s["finished"]}
    finished |= {name for name, s in vocabulary["workflow_states"].items() if s["finished"]}
    assert _core.FINAL_STATES == finished


def test_the_clients_own_admin_steps_are_in_its_list() -> None:
    assert _base.own_admin("job", msgid="m") == _base.Admin("job", {"msgid": "m"})
    with pytest.raises(ValueError):
        _base.own_admin("frobnicate")
    with pytest.raises(ValueError):
        _base.own_admin("job", id="m")


def test_the_settings_are_the_tools(vocabulary: Dict[str, Any]) -> None:
    # Regenerate after a change to emq-cli-support's known.rs:
    #   target/debug/emq-cli vocabulary | python3 -c 'import json, sys; \
    #     json.dump(json.load(sys.stdin)["settings"], sys.stdout, indent=1)' \
    #     > python/src/emq_client/settings_vocabulary.json
    assert settings.VOCABULARY == vocabulary["settings"], "python/src/emq_client/settings_vocabulary.json is stale"
    # What the client reads is what the table says [client] holds.
    assert list(settings.KEYS) == ["FRONTEND_ADDR", "ADMINISTRATIVE_ADDR", "CURVE_SERVER_KEY", "CURVE_SECRET_KEY_FILE"]
    assert set(settings.ROUTER_KEYS) <= set(settings.KEYS)
    for key in settings.KEYS:
        assert f"EVENTMQ_{key}" == next(s["env"] for s in vocabulary["settings"] if s["name"] == key)
