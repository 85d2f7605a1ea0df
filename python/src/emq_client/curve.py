"""CURVE encryption for the client's connections (a router started with
``--curve-secret-key-file`` and authorised keys).

The keys are the router's public key and the client's own key pair, as
``emq-cli keygen NAME`` writes them (``NAME.key``, ``NAME.key_secret``: the
czmq / pyzmq certificate layout, which :func:`zmq.auth.load_certificate`
reads) or as Z85 text. As in the Rust binaries, a secret key file that its
group or others may read is refused, and a server key without an own key
pair makes a fresh pair for this process (let in only by a router socket
that accepts any key).

Defaults come from ``$EVENTMQ_CURVE_SERVER_KEY`` and
``$EVENTMQ_CURVE_SECRET_KEY_FILE`` (or ``CURVE_SERVER_KEY`` and
``CURVE_SECRET_KEY_FILE`` in the config file, :mod:`emq_client.settings`),
as for ``emq-sender``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import zmq
import zmq.auth

from . import settings
from .errors import EmqError

ENV_SERVER_KEY = "EVENTMQ_CURVE_SERVER_KEY"
ENV_SECRET_KEY_FILE = "EVENTMQ_CURVE_SECRET_KEY_FILE"

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class CurveKeys:
    """The router's public key and ours, as Z85 bytes (``repr`` hides the
    secret key)."""

    server_key: bytes
    public_key: bytes
    secret_key: bytes = field(repr=False)

    def apply(self, sock: "zmq.Socket[Any]") -> None:
        """Make ``sock`` a CURVE client (before it connects)."""
        sock.setsockopt(zmq.CURVE_SERVERKEY, self.server_key)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.public_key)
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.secret_key)


def _z85_key(text: str) -> Optional[bytes]:
    """``text`` as a Z85 key if it is one (40 characters that decode)."""
    t = text.strip()
    if len(t) != 40:
        return None
    try:
        if len(zmq.utils.z85.decode(t)) == 32:
            return t.encode()
    except (ValueError, KeyError, TypeError):
        pass
    return None


def read_public_key(key_or_path: PathLike) -> bytes:
    """A public key given as Z85 text, or as a file holding one (the
    router's ``NAME.key``)."""
    text = os.fspath(key_or_path)
    key = _z85_key(text)
    if key is not None and not os.path.exists(text):
        return key
    try:
        public, _ = zmq.auth.load_certificate(text)
    except (OSError, ValueError) as e:
        raise EmqError(f"CURVE server key {text}: {e}") from None
    return public


def read_key_pair(path: PathLike) -> "tuple[bytes, bytes]":
    """Our ``(public, secret)`` keys from a ``NAME.key_secret`` file,
    refused when its group or others may read it."""
    p = os.fspath(path)
    try:
        mode = os.stat(p).st_mode
    except OSError as e:
        raise EmqError(f"CURVE secret key file {p}: {e}") from None
    if mode & 0o077:
        raise EmqError(
            f"secret key file {p} can be read by its group or others (mode {stat.S_IMODE(mode):04o}); "
            f"refusing to use it: run `chmod 600 {p}`"
        )
    try:
        public, secret = zmq.auth.load_certificate(p)
    except (OSError, ValueError) as e:
        raise EmqError(f"CURVE secret key file {p}: {e}") from None
    if not secret:
        raise EmqError(f"CURVE secret key file {p}: no secret-key in it (use the NAME.key_secret file)")
    return public, secret


def curve_keys(
    server_key: Optional[PathLike] = None, secret_key_file: Optional[PathLike] = None
) -> Optional[CurveKeys]:
    """Resolve the CURVE settings: the arguments, else the environment.
    ``None`` when no server key is given (no encryption)."""
    conf = settings.load() if server_key is None or secret_key_file is None else None
    server = server_key if server_key is not None else (conf.get("CURVE_SERVER_KEY") if conf else None)
    secret_file = secret_key_file if secret_key_file is not None else (conf.get("CURVE_SECRET_KEY_FILE") if conf else None)
    if server is None:
        if secret_file is not None:
            raise EmqError("a CURVE secret key file needs the router's public key (curve_server_key)")
        return None
    if not zmq.has("curve"):
        raise EmqError("this pyzmq's libzmq has no CURVE support")
    server_bytes = read_public_key(server)
    if secret_file is not None:
        public, secret = read_key_pair(secret_file)
    else:
        public, secret = zmq.curve_keypair()
    return CurveKeys(server_bytes, public, secret)
