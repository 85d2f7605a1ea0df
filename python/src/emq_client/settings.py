"""The client's settings, read as the Rust tools read theirs
(``emq-cli-support``'s ``settings``): an argument wins, else the
environment, else the INI file.

**The file** is ``$EVENTMQ_CONFIG_FILE``, else ``/etc/eventmq.conf`` (a
missing default file is no error; a missing named one is
:class:`SettingsError`). The client reads its own section ``[client]``,
then ``[router]`` (where the router's addresses are), then ``[global]``;
keys are case-insensitive (``key = value`` or ``key: value``; ``#`` and
``;`` start comments).

**The layering**, per setting (:data:`KEYS`): the argument, else the
0.3.13 client variable (``EMQ_BROKER_ADDR``, ``EMQ_ADMIN_ADDR``: kept),
else ``EVENTMQ_<KEY>`` (the name the README documents for every tool),
else ``KEY`` in ``[client]``, ``[router]``, ``[global]``, else the default.
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

**Unknown keys.** A key of ``[client]`` that is not in :data:`KEYS` is
reported once per file and key with an :class:`UnknownSettingWarning`
naming the key, the file and the nearest known name (``FRONTEND_ADR`` →
``FRONTEND_ADDR``). ``[router]`` and ``[global]`` belong to every tool:
their keys are the router's to check.
"""

from __future__ import annotations

import difflib
import os
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Set, Tuple

from . import wire
from .errors import EmqError

CONFIG_FILE_VAR = "EVENTMQ_CONFIG_FILE"
DEFAULT_CONFIG_FILE = "/etc/eventmq.conf"
#: The sections read, in order (``[global]`` comes after them all).
SECTIONS = ("client", "router")

#: Every key the client reads: ``KEY`` (``EVENTMQ_KEY`` in the
#: environment) → what it is. The Rust tools use the same names.
KEYS: Dict[str, str] = {
    "FRONTEND_ADDR": "the router's frontend (a wildcard bind host is reached at 127.0.0.1)",
    "ADMINISTRATIVE_ADDR": "the router's admin socket",
    "CURVE_SERVER_KEY": "the router's public CURVE key (Z85 text or its NAME.key file)",
    "CURVE_SECRET_KEY_FILE": "our CURVE key pair's NAME.key_secret file",
}
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


def parse_ini(path: str, text: str) -> Dict[str, Dict[str, str]]:
    """The sections of an INI text: section → key (upper case) → value.
    As the Rust reader: a line outside ``[section]``, ``key=value``,
    ``key: value``, comment or blank is :class:`SettingsError`."""
    out: Dict[str, Dict[str, str]] = {}
    current: Optional[str] = None
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
            out.setdefault(current, {})
            continue
        sep = "=" if "=" in line else ":" if ":" in line else None
        if sep is None:
            raise SettingsError(f"{path}:{i}: not an INI line: {raw!r}")
        k, _, v = line.partition(sep)
        if current is not None:
            out.setdefault(current, {})[k.strip().upper()] = v.strip()
    return out


def nearest(key: str) -> Optional[str]:
    """The known key closest to ``key`` (for a "did you mean")."""
    close = difflib.get_close_matches(key, list(KEYS), n=1, cutoff=0.6)
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
    sections = parse_ini(path, text)
    for key in sections.get("client", {}):
        if key not in KEYS and (path, key) not in _reported:
            _reported.add((path, key))
            hint = nearest(key)
            warnings.warn(
                UnknownSettingWarning(
                    f"{path} [client]: unknown key {key}"
                    + (f" (did you mean {hint}?)" if hint else "")
                    + f"; the client reads {', '.join(KEYS)}"
                ),
                stacklevel=3,
            )
    for section in (*SECTIONS, "global"):
        for key, value in sections.get(section, {}).items():
            if key in KEYS and key not in s.values and value.strip():
                s.values[key] = value
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
