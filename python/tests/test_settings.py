"""The client reads the settings the Rust tools read (emq_client.settings):
EMQ_BROKER_ADDR / EMQ_ADMIN_ADDR (0.3.13's, kept), the EVENTMQ_* names, the
INI file of EVENTMQ_CONFIG_FILE; the admin address is derived from the
broker's; unknown keys of the client's section are reported."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from emq_client import Client, SettingsError, UnknownSettingWarning, settings

from conftest import START_TIMEOUT, binary, free_port, spawn, wait_until


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No client variable set, and an empty config file named."""
    for var in ("EMQ_BROKER_ADDR", "EMQ_ADMIN_ADDR", "EVENTMQ_FRONTEND_ADDR", "EVENTMQ_ADMINISTRATIVE_ADDR",
                "EVENTMQ_CURVE_SERVER_KEY", "EVENTMQ_CURVE_SECRET_KEY_FILE"):
        monkeypatch.delenv(var, raising=False)
    conf = tmp_path / "eventmq.conf"
    conf.write_text("")
    monkeypatch.setenv("EVENTMQ_CONFIG_FILE", str(conf))
    return conf


def addrs(**kw: str) -> Dict[str, str]:
    with Client(**kw) as c:  # type: ignore[arg-type]
        return {"addr": c.addr, "admin": c.admin_addr}


def test_defaults() -> None:
    assert addrs() == {"addr": "tcp://127.0.0.1:47291", "admin": "tcp://127.0.0.1:47293"}


def test_the_eventmq_names_and_wildcard_bind_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENTMQ_FRONTEND_ADDR", "tcp://*:5555")
    monkeypatch.setenv("EVENTMQ_ADMINISTRATIVE_ADDR", "tcp://0.0.0.0:5557")
    assert addrs() == {"addr": "tcp://127.0.0.1:5555", "admin": "tcp://127.0.0.1:5557"}
    # 0.3.13's client variables are kept and come first.
    monkeypatch.setenv("EMQ_BROKER_ADDR", "tcp://10.1.1.1:1")
    monkeypatch.setenv("EMQ_ADMIN_ADDR", "tcp://10.1.1.1:3")
    assert addrs() == {"addr": "tcp://10.1.1.1:1", "admin": "tcp://10.1.1.1:3"}
    # An argument beats everything.
    assert addrs(addr="tcp://h:1", admin_addr="tcp://h:2") == {"addr": "tcp://h:1", "admin": "tcp://h:2"}


def test_the_admin_address_is_derived_from_the_brokers(monkeypatch: pytest.MonkeyPatch) -> None:
    assert addrs(addr="tcp://10.0.0.5:47291") == {"addr": "tcp://10.0.0.5:47291", "admin": "tcp://10.0.0.5:47293"}
    assert addrs(addr="tcp://a:1,tcp://b:1")["admin"] == "tcp://a:47293,tcp://b:47293"
    monkeypatch.setenv("EMQ_BROKER_ADDR", "tcp://db.example:6000")
    assert addrs()["admin"] == "tcp://db.example:47293"
    assert settings.admin_addr()[1] == "derived from the broker tcp://db.example:6000"


def test_the_ini_file_layered_like_the_rust_tools(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env.write_text(
        "[global]\nfrontend_addr = tcp://g:1\nadministrative_addr = tcp://g:3\n"
        "[router]\nfrontend_addr: tcp://*:4100\n"
        "[jobmanager]\nadministrative_addr = tcp://j:3\n"
    )
    assert addrs() == {"addr": "tcp://127.0.0.1:4100", "admin": "tcp://g:3"}
    s = settings.load()
    assert s.source("FRONTEND_ADDR") == f"{clean_env} [router]"
    clean_env.write_text(clean_env.read_text() + "[client]\nFRONTEND_ADDR=tcp://c:1\n")
    assert addrs()["addr"] == "tcp://c:1"
    monkeypatch.setenv("EVENTMQ_FRONTEND_ADDR", "tcp://e:1")
    assert addrs()["addr"] == "tcp://e:1"
    assert settings.load().source("FRONTEND_ADDR") == "environment EVENTMQ_FRONTEND_ADDR"


def test_unknown_keys_are_reported_with_the_file_and_a_guess(clean_env: Path) -> None:
    # Any section, as the Rust tools report them; known keys of other
    # tools (HWM, the router's) and 0.3.13's older names are not unknown.
    clean_env.write_text(
        "[client]\nFRONTEND_ADR = tcp://x:1\n[router]\nhwm = 3\nHTTP_ADR = 127.0.0.1:1\n"
        "[jobmanager]\nworker_addr = tcp://r:1\nfrobnicate = 1\n"
    )
    with pytest.warns(UnknownSettingWarning) as w:
        settings.load()
    said = [str(x.message) for x in w]
    assert said == [
        f"{clean_env}:2: unknown setting FRONTEND_ADR in [client] (ignored); did you mean FRONTEND_ADDR?",
        f"{clean_env}:5: unknown setting HTTP_ADR in [router] (ignored); did you mean HTTP_ADDR?",
        f"{clean_env}:8: unknown setting FROBNICATE in [jobmanager] (ignored)",
    ], said


def test_the_routers_key_files_are_not_the_clients(clean_env: Path) -> None:
    clean_env.write_text(
        "[router]\nCURVE_SECRET_KEY_FILE = /etc/emq/router.key_secret\nFRONTEND_ADDR = tcp://*:1\n"
        "[global]\nCURVE_SERVER_KEY = /etc/emq/router.key\n"
    )
    s = settings.load()
    assert s.get("CURVE_SECRET_KEY_FILE") is None
    assert s.get("CURVE_SERVER_KEY") == "/etc/emq/router.key"
    assert s.get("FRONTEND_ADDR") == "tcp://*:1"


def test_a_bad_config_file_is_an_error(clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.write_text("[client]\njust words\n")
    with pytest.raises(SettingsError, match=r"eventmq.conf:2: not an INI line"):
        Client()
    monkeypatch.setenv("EVENTMQ_CONFIG_FILE", str(tmp_path / "missing.conf"))
    with pytest.raises(SettingsError, match="missing.conf"):
        Client()


def test_one_config_file_for_the_router_and_the_client(clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The router binds what [router] says; the client, given nothing, finds
    # both of its addresses in the same file.
    fe, be, ad = (free_port() for _ in range(3))
    clean_env.write_text(
        f"[router]\nFRONTEND_ADDR = tcp://*:{fe}\nBACKEND_ADDR = tcp://127.0.0.1:{be}\n"
        f"ADMINISTRATIVE_ADDR = tcp://127.0.0.1:{ad}\n"
    )
    proc = spawn("emq-router-ini", [str(binary("emq-router")), "--journal", "none"], tmp_path,
                 {"EVENTMQ_CONFIG_FILE": str(clean_env)})
    try:
        def up() -> bool:
            try:
                with Client(admin_timeout=0.5) as c:
                    c.admin("status")
                return True
            except Exception:
                return False

        wait_until("the router from the config file", up, START_TIMEOUT, proc)
        with Client() as c:
            assert (c.addr, c.admin_addr) == (f"tcp://127.0.0.1:{fe}", f"tcp://127.0.0.1:{ad}")
            assert c.submit("emq_pyclient_jobs.multiply", 2, 3).status().state == "queued"
    finally:
        proc.stop()
