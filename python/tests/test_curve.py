"""CURVE: the client's connections to a router whose sockets are CURVE
(``--curve-secret-key-file``, ``--curve-keys``), with keys made by the real
``emq-cli keygen``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
import zmq

from emq_client import Client, EmqConnectionError, EmqError, call
from emq_client.curve import curve_keys

from conftest import Router, binary, start_router, make_client


def keygen(name: Path) -> None:
    subprocess.run([str(binary("emq-cli")), "keygen", str(name)], check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("keys")
    (d / "clients").mkdir()
    keygen(d / "router")
    keygen(d / "clients" / "alice")
    keygen(d / "stranger")
    return d


@pytest.fixture(scope="module")
def curve_cluster(tmp_path_factory: pytest.TempPathFactory, keys: Path) -> Iterator[Router]:
    alice = {"curve_server_key": str(keys / "router.key"),
             "curve_secret_key_file": str(keys / "clients" / "alice.key_secret")}
    router = start_router(
        tmp_path_factory.mktemp("curve"),
        "--curve-secret-key-file", str(keys / "router.key_secret"),
        "--curve-keys", str(keys / "clients"),
        client_options=alice,
    )
    try:
        router.add_jobmanager("--curve-server-key", str(keys / "router.key"),
                              "--curve-secret-key-file", str(keys / "clients" / "alice.key_secret"))
        yield router
    finally:
        router.stop()


def test_an_authorised_key_submits_and_gets_results_and_status(curve_cluster: Router, kind: str) -> None:
    with curve_cluster.connect(kind) as c:
        job = c.submit(call("echo", {"secret": 42}))
        assert job.result(timeout=30) == {"secret": 42}
        assert job.status().state == "done"


def test_keys_also_come_from_the_environment(curve_cluster: Router, keys: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENTMQ_CURVE_SERVER_KEY", str(keys / "router.key"))
    monkeypatch.setenv("EVENTMQ_CURVE_SECRET_KEY_FILE", str(keys / "clients" / "alice.key_secret"))
    with Client(curve_cluster.frontend, admin_addr=curve_cluster.admin) as c:
        assert c.submit(call("echo", [1])).result(timeout=30) == [1]


@pytest.mark.parametrize("who", ["stranger", "no-key"])
def test_an_unknown_key_or_no_key_gets_no_answer(curve_cluster: Router, keys: Path, who: str, kind: str) -> None:
    opts = {"curve_server_key": None, "curve_secret_key_file": None}
    if who == "stranger":
        opts = {"curve_server_key": str(keys / "router.key"),
                "curve_secret_key_file": str(keys / "stranger.key_secret")}
    with make_client(kind, curve_cluster.frontend, admin_addr=curve_cluster.admin, ack_timeout=1.0, **opts) as c:
        with pytest.raises(EmqConnectionError):
            c.submit(call("echo", [1]))
    assert "not authorised" in curve_cluster.proc.log.read_text() or who == "no-key"


def test_a_secret_key_file_others_can_read_is_refused(keys: Path, tmp_path: Path) -> None:
    f = tmp_path / "open.key_secret"
    f.write_bytes((keys / "stranger.key_secret").read_bytes())
    os.chmod(f, 0o644)
    with pytest.raises(EmqError, match="chmod 600"):
        curve_keys(str(keys / "router.key"), str(f))
    with pytest.raises(EmqError, match="curve_server_key"):
        curve_keys(None, str(keys / "stranger.key_secret"))
    k = curve_keys(zmq.curve_keypair()[0].decode())
    assert k is not None and b"secret" not in repr(k).encode() and k.secret_key.decode() not in repr(k)
