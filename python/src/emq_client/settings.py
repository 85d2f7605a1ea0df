"""The client's settings, read as the Rust tools read theirs
(``emq-cli-support``'s ``settings``): an argument wins, else the
environment, else the INI file.

**The file** is ``$EVENTMQ_CONFIG_FILE``, else ``/etc/eventmq.conf`` (a
missing default file is no error; a missing named one is
:class:`SettingsError`). The client reads its own section ``[client]``,
then from ``[router]`` the router's two addresses (``FRONTEND_ADDR``,
``ADMINISTRATIVE_ADDR``; never its key files), then ``[global]``; keys are
case-insensitive (``key = value`` or ``key: value``; ``#`` and
``;`` start comments).

**The layering**, per setting (:data:`KEYS`): the argument, else the
0.3.13 client variable (``EMQ_BROKER_ADDR``, ``EMQ_ADMIN_ADDR``: kept),
else ``EVENTMQ_<KEY>`` (the name the README documents for every tool),
else ``KEY`` in ``[client]``, ``[router]`` (addresses), ``[global]``, else
the default.
A blank value counts as unset.

- **Broker** (the router's frontend): ``EMQ_BROKER_ADDR``,
  ``EVENTMQ_FRONTEND_ADDR``, ``FRONTEND_ADDR``; else
  ``tcp://127.0.0.1:47291``. A router's bind address with a wildcard host
  (``tcp://*:P``, ``tcp://0.0.0.0:P``) is reached at 127.0.0.1, as
  ``emq-sender`` does; a comma-separated list is a failover list.
- **Admin socket**: ``EMQ_ADMIN_ADDR``, ``EVENTMQ_ADMINISTRATIVE_ADDR``,
  ``ADMINISTRATIVE_ADDR``; else **derived from the broker**: each broker
  host with the router's default admin port 47293
  (``tcp://10.0.0.5:47291`` → ``tcp://10.0.0.5:47293``); else
  ``tcp://127.0.0.1:47293``.
- **CURVE**: ``EVENTMQ_CURVE_SERVER_KEY``, ``EVENTMQ_CURVE_SECRET_KEY_FILE``
  and the same keys in the file (:mod:`emq_client.curve`).
- **Inline** (``@job``'s ``delay`` without a router, :mod:`emq_client.jobs`):
  ``EMQ_INLINE=1``, environment only.

**One vocabulary.** The names are the Rust tools' own table
(``emq-cli-support``'s ``known.rs``), as ``emq-cli vocabulary`` prints it
under ``"settings"``, shipped here as ``settings_vocabulary.json``
(``tests/test_vocabulary.py`` checks it against the binary, so the two
cannot drift): :data:`KEYS` are the settings whose sections include
``client``.

**Unknown keys.** As the Rust tools do, a key in any section of the file
that no tool reads (neither a setting's name nor an older name of one) is
reported, once per file and key, with an :class:`UnknownSettingWarning`
naming the file, the line, the section, the key and the nearest known name
(``FRONTEND_ADR`` → did you mean ``FRONTEND_ADDR``?).
"""

from __future__ import annotations

import difflib
import json
import os
import pkgutil
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Set, Tuple

from . import wire
from .errors import EmqError

CONFIG_FILE_VAR = "EVENTMQ_CONFIG_FILE"
DEFAULT_CONFIG_FILE = "/etc/eventmq.conf"
#: The sections read, in order (``[global]`` comes after them all), and
#: the keys read from each: from ``[router]`` only the addresses the
#: router binds (its key files are not the client's), as the Rust
#: clients' ``Settings::load_client`` does.
SECTIONS = ("client", "router")
ROUTER_KEYS = ("FRONTEND_ADDR", "ADMINISTRATIVE_ADDR")

#: The client's own section in the vocabulary (``sections``).
SECTION = "client"


def _vocabulary() -> List[Dict[str, Any]]:
    data = pkgutil.get_data(__name__.rpartition(".")[0], "settings_vocabulary.json")
    if data is None:  # pragma: no cover - a broken install
        raise SettingsError("emq_client/settings_vocabulary.json is missing from the installed package")
    v: List[Dict[str, Any]] = json.loads(data)
    return v


#: Every setting of every emq tool (``emq-cli vocabulary``'s ``settings``):
#: ``name``, older ``aliases``, the ``sections`` that read it, ``env``,
#: ``help``.
VOCABULARY: List[Dict[str, Any]] = _vocabulary()
#: Every name a config file may use (names and older names).
KNOWN_NAMES: FrozenSet[str] = frozenset(
    n for s in VOCABULARY for n in [s["name"], *s.get("aliases", [])]
)
#: The keys the client reads (``EVENTMQ_KEY`` in the environment) → what
#: each is: the vocabulary's settings of section ``client``.
KEYS: Dict[str, str] = {s["name"]: s["help"] for s in VOCABULARY if SECTION in s["sections"]}
#: 0.3.13's client variables, read before ``EVENTMQ_<KEY>``.
LEGACY_ENV: Dict[str, str] = {"FRONTEND_ADDR": "EMQ_BROKER_ADDR", "ADMINISTRATIVE_ADDR": "EMQ_ADMIN_ADDR"}
#: ``@job``'s explicit opt-in to running ``delay`` in the caller.
INLINE_ENV = "EMQ_INLINE"
DEFAULT_ADMIN_PORT = 47293


class SettingsError(EmqError):
    """The config file named by ``$EVENTMQ_CONFIG_FILE`` cannot be read, or
    a line of it is not INI."""


class UnknownSettingWarning(UserWarning):
    """A key in the client's section of the config file that it does not
    know (a typo, most likely)."""


@dataclass
class Settings:
    """The values found (keys upper-cased) and where each came from."""

    values: Dict[str, str] = field(default_factory=dict)
    sources: Dict[str, str] = field(default_factory=dict)

    def get(self, key: str) -> Optional[str]:
        """``key``'s value (None: unset or blank)."""
        v = self.values.get(key)
        return v.strip() if v is not None and v.strip() else None

    def source(self, key: str) -> Optional[str]:
        """Where ``key`` was set: ``environment EMQ_BROKER_ADDR``,
        ``/etc/eventmq.conf [router]``."""
        return self.sources.get(key)


_reported: Set[Tuple[str, str]] = set()


class Line(NamedTuple):
    """One ``key = value`` line of the file."""

    section: Optional[str]
    key: str
    value: str
    number: int


def parse_ini(path: str, text: str) -> List[Line]:
    """The ``key = value`` lines of an INI text, keys upper-cased. As the
    Rust reader: a line other than ``[section]``, ``key=value``,
    ``key: value``, a comment or a blank one is :class:`SettingsError`."""
    out: List[Line] = []
    current: Optional[str] = None
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
            continue
        sep = "=" if "=" in line else ":" if ":" in line else None
        if sep is None:
            raise SettingsError(f"{path}:{i}: not an INI line: {raw!r}")
        k, _, v = line.partition(sep)
        out.append(Line(current, k.strip().upper(), v.strip(), i))
    return out


def nearest(key: str) -> Optional[str]:
    """The known name closest to ``key``, if one is close enough to be a
    typo (for a "did you mean")."""
    close = difflib.get_close_matches(key, sorted(KNOWN_NAMES), n=1, cutoff=0.8)
    return close[0] if close else None


def load(env: Optional[Mapping[str, str]] = None) -> Settings:
    """The settings from ``env`` (default ``os.environ``) and the config
    file (module documentation); unknown ``[client]`` keys are warned
    about."""
    env = os.environ if env is None else env
    s = Settings()
    named = env.get(CONFIG_FILE_VAR) or ""
    path = named or DEFAULT_CONFIG_FILE
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        if named:
            raise SettingsError(f"cannot read config file {path} (${CONFIG_FILE_VAR}): no such file") from None
        text = ""
    except OSError as e:
        raise SettingsError(f"cannot read config file {path}: {e}") from None
    lines = parse_ini(path, text)
    for ln in lines:
        if ln.key not in KNOWN_NAMES and (path, ln.key) not in _reported:
            _reported.add((path, ln.key))
            hint = nearest(ln.key)
            warnings.warn(
                UnknownSettingWarning(
                    f"{path}:{ln.number}: unknown setting {ln.key} in [{ln.section or ''}] (ignored)"
                    + (f"; did you mean {hint}?" if hint else "")
                ),
                stacklevel=3,
            )
    # The client's section, then the router's, then [global]; the last
    # line of a section wins, as in the Rust reader.
    for section in (*SECTIONS, "global"):
        wanted = ROUTER_KEYS if section == "router" else KEYS
        found = {ln.key: ln for ln in lines if ln.section == section and ln.key in wanted and ln.value}
        for key, ln in found.items():
            if key not in s.values:
                s.values[key] = ln.value
                s.sources[key] = f"{path} [{section}]"
    for key in KEYS:
        for var in (LEGACY_ENV.get(key), f"EVENTMQ_{key}"):
            if var and (env.get(var) or "").strip():
                s.values[key] = env[var]
                s.sources[key] = f"environment {var}"
                break
    return s


def _loopback_for_wildcard(addr: str) -> str:
    a = addr.strip()
    for wildcard in ("tcp://*:", "tcp://0.0.0.0:"):
        if a.startswith(wildcard):
            return "tcp://127.0.0.1:" + a[len(wildcard):]
    return a


def connect_list(addrs: str) -> str:
    """A bind address (or list) as the address(es) to connect to."""
    return ",".join(_loopback_for_wildcard(a) for a in addrs.split(",") if a.strip())


def admin_for_broker(broker: str) -> str:
    """The admin address(es) derived from a broker address (list): each
    ``tcp://`` host with :data:`DEFAULT_ADMIN_PORT`; other transports
    (``ipc://``, ``inproc://``) cannot be derived and give the default."""
    out: List[str] = []
    for a in broker.split(","):
        a = _loopback_for_wildcard(a)
        if not a.startswith("tcp://") or ":" not in a[len("tcp://"):]:
            return wire.DEFAULT_ADMIN
        host = a[len("tcp://"):].rsplit(":", 1)[0]
        out.append(f"tcp://{host}:{DEFAULT_ADMIN_PORT}")
    return ",".join(out) or wire.DEFAULT_ADMIN


def broker_addr(settings: Optional[Settings] = None) -> Tuple[str, str]:
    """The broker address(es) and where they came from."""
    s = load() if settings is None else settings
    v = s.get("FRONTEND_ADDR")
    if v is None:
        return wire.DEFAULT_FRONTEND, "the default"
    return connect_list(v), s.source("FRONTEND_ADDR") or ""


def admin_addr(broker: Optional[str] = None, settings: Optional[Settings] = None) -> Tuple[str, str]:
    """The admin address(es) and where they came from: the settings, else
    derived from ``broker`` (default: :func:`broker_addr`)."""
    s = load() if settings is None else settings
    v = s.get("ADMINISTRATIVE_ADDR")
    if v is not None:
        return connect_list(v), s.source("ADMINISTRATIVE_ADDR") or ""
    b = broker if broker is not None else broker_addr(s)[0]
    return admin_for_broker(b), f"derived from the broker {b}"


def inline_enabled(env: Optional[Mapping[str, str]] = None) -> bool:
    """``$EMQ_INLINE`` is ``1``/``true``/``yes``/``on``."""
    env = os.environ if env is None else env
    return (env.get(INLINE_ENV) or "").strip().lower() in ("1", "true", "yes", "on")
