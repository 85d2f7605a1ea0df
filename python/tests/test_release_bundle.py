"""The release bundle (``scripts/release.sh``): what the tarball holds, and
that its example ``/etc/eventmq.conf`` is a config the binaries take.

The bundle is made from the binaries ``scripts/test.sh`` already built
(``--debug --no-build``). ``release.sh`` itself verifies the systemd units
with ``systemd-analyze verify`` and the user with ``systemd-sysusers`` where
the machine has them (Debian 12 does), and fails when they complain.

The example config lists every key with its default, commented out. With
every one of those lines uncommented (flags only for the ports and the
journal), a router starts and serves and a job manager registers and runs a
job: the defaults written there are values the binaries accept.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import BIN_DIR, REPO, Router, free_port, spawn, wait_until
from emq_client import EmqError, shell

BINARIES = ["emq-router", "emq-jobmanager", "emq-sender", "emq-cli", "emq-receiver", "emq-pubsub"]


def test_bundle_holds_binaries_units_and_a_config_the_binaries_take(tmp_path: Path) -> None:
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / "release.sh"), "--debug", "--no-build", "--bin-dir", str(BIN_DIR),
         "--out", str(tmp_path / "dist")],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, f"release.sh failed:\n{out.stdout}\n{out.stderr}"
    if shutil.which("systemd-analyze"):
        assert "units verified" in out.stdout, out.stdout
    else:
        assert "units were not verified" in out.stdout, out.stdout
    tarballs = list((tmp_path / "dist").glob("*.tar.gz"))
    assert len(tarballs) == 1 and re.fullmatch(r"emq-\d+\.\d+\.\d+-x86_64-linux\.tar\.gz", tarballs[0].name), tarballs

    with tarfile.open(tarballs[0]) as tar:
        tar.extractall(tmp_path / "x")
    (root,) = list((tmp_path / "x").iterdir())
    for name in BINARIES:
        path = root / "bin" / name
        assert os.access(path, os.X_OK), path
    for name in ["systemd/emq-router.service", "systemd/emq-jobmanager@.service", "sysusers.d/emq.conf",
                 "eventmq.conf", "jobmanager.env.example", "LICENSE", "CHANGELOG.md", "README.md", "INSTALL.md"]:
        assert (root / name).is_file(), name
    router_unit = (root / "systemd/emq-router.service").read_text()
    jm_unit = (root / "systemd/emq-jobmanager@.service").read_text()
    for unit in (router_unit, jm_unit):
        for line in ["Type=notify", "User=emq", "Restart=on-failure", "Environment=EVENTMQ_CONFIG_FILE=/etc/eventmq.conf"]:
            assert line in unit.splitlines(), line
    assert "EnvironmentFile=-/etc/emq/jobmanager-%i.env" in jm_unit

    # Every key, commented out with its default; uncommented, the binaries take it.
    conf = (root / "eventmq.conf").read_text()
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(conf)
    assert parser.sections() == ["router", "jobmanager", "publisher"], parser.sections()
    for key in ["FRONTEND_ADDR", "HWM", "JOURNAL", "LEASE_TTL", "DRAIN_TIMEOUT", "CURVE_KEYS"]:
        assert re.search(rf"^#{key} =", conf.split("[jobmanager]")[0], re.M), key
    for key in ["BACKEND_ADDR", "QUEUES", "CONCURRENT_JOBS", "KILL_GRACE_PERIOD", "PYTHON", "GLOBAL_TIMEOUT"]:
        assert re.search(rf"^#{key} =", conf.split("[jobmanager]")[1], re.M), key
    live = re.sub(r"^#([A-Z][A-Z0-9_]* = \S.*)$", r"\1", conf, flags=re.M)
    assert live.count("\n") == conf.count("\n") and live != conf
    config = tmp_path / "eventmq.conf"
    config.write_text(live)

    env = {"EVENTMQ_CONFIG_FILE": str(config)}
    fe, be, ad = (f"tcp://127.0.0.1:{free_port()}" for _ in range(3))
    router_proc = spawn("emq-router", [str(root / "bin/emq-router"), "--frontend", fe, "--backend", be,
                                       "--admin", ad, "--journal", "none"], tmp_path, env)
    router = Router(fe, be, ad, router_proc, tmp_path)
    try:
        def serves() -> bool:
            try:
                with router.client(admin_timeout=0.5) as c:
                    c.admin("status")
                return True
            except EmqError:
                return False

        wait_until("the router to serve with the example config", serves, 20, router_proc)
        jm = spawn("emq-jobmanager", [str(root / "bin/emq-jobmanager"), "--broker", be], tmp_path, env)
        router.workers.append(jm)
        wait_until("the job manager to register", lambda: router.worker_count() == 1, 20, jm)
        with router.client() as c:
            result = c.submit(shell(["sh", "-c", "echo configured"])).result(timeout=60)
        assert result["stdout"].strip() == "configured", result
    finally:
        router.stop()
    log = router_proc.log.read_text(errors="replace")
    assert "bad value" not in log, log[-3000:]
