"""``Sender``: the socket object of EventMQ 0.3.13's client API
(``eventmq.sender.Sender``), for code that passes one to ``defer_job`` or
``schedule``.

A DEALER with a uuid4 identity. ``send_multipart(message, protocol_version)``
puts ``['', protocol_version]`` before the message, as 0.3.13 does. Like a
zmq socket it must stay in one thread: use from another raises
:class:`~emq_client.errors.WrongThread`.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, List, Optional, Sequence, Union

import zmq

from . import errors
from ._base import default_frontend

Frame = Union[str, bytes]


def _bytes(frame: Frame) -> bytes:
    return frame if isinstance(frame, bytes) else str(frame).encode("utf-8")


class Sender:
    """0.3.13's ``Sender``: ``connect(addr)``, ``send_multipart``,
    ``recv_multipart``, ``zsocket``, ``name``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.zcontext: zmq.Context = kwargs.pop("context", None) or zmq.Context.instance()  # type: ignore[type-arg]
        self.name: str = kwargs.pop("name", None) or str(uuid.uuid4())
        self._owner = threading.get_ident()
        self.zsocket: "zmq.Socket[Any]" = self.zcontext.socket(zmq.DEALER)
        self.zsocket.setsockopt(zmq.IDENTITY, self.name.encode())
        self.zsocket.setsockopt(zmq.LINGER, 2000)

    def _check(self) -> None:
        if threading.get_ident() != self._owner:
            raise errors.WrongThread("this Sender belongs to another thread: make one per thread")

    def connect(self, addr: Optional[str] = None) -> None:
        """Connect to ``addr`` (default ``$EMQ_BROKER_ADDR`` or the default frontend)."""
        self._check()
        self.zsocket.connect(addr or default_frontend())

    def listen(self, addr: str) -> None:
        """Bind to ``addr``."""
        self._check()
        self.zsocket.bind(addr)

    def send_multipart(self, message: Sequence[Frame], protocol_version: Optional[str], _recipient_id: Optional[Frame] = None) -> None:
        """Send ``(_recipient_id,) '', protocol_version, *message``."""
        self._check()
        if not isinstance(message, (tuple, list)):
            raise TypeError(f"{type(message)} message type not one of (tuple, list)")
        frames: List[bytes] = []
        if _recipient_id:
            frames.append(_bytes(_recipient_id))
        frames.append(b"")
        if protocol_version is not None:
            frames.append(_bytes(protocol_version))
        frames.extend(_bytes(f) for f in message)
        self.zsocket.send_multipart(frames)

    def recv_multipart(self) -> List[str]:
        """Receive one message, frames decoded as text (as 0.3.13)."""
        self._check()
        return [f.decode("utf-8", "replace") for f in self.zsocket.recv_multipart()]

    def close(self, linger: Optional[float] = None) -> None:
        """Close the socket (``linger`` seconds for unsent messages)."""
        self.zsocket.close(None if linger is None else int(linger * 1000))
