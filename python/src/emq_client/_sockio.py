"""Frames in and out of a zmq socket at the lowest cost pyzmq allows.

Both drivers (:mod:`emq_client.client`, and :mod:`emq_client.aio` on its
shadow socket) send and read every message through these functions; a
REQUEST is seven frames and its acknowledgement five, so the cost per frame
is most of what a bulk submit costs the client (docs/PERFORMANCE.md, "The
Python client's submit path"). Measured with pyzmq 27 on this machine's
Python 3.11:

- **Sending**: the backend (Cython) ``Socket.send`` called directly, one
  frame at a time: about 0.8 µs a frame, where the sugar ``Socket.send``
  (which first looks at ``routing_id``, ``group`` and ``Frame``) costs about
  1.4 µs and ``send_multipart`` about 5 µs.
- **Receiving**: ``recv(copy=False)`` gives a frame that already knows
  whether more follow (``Frame.more``, read by libzmq in the same call);
  ``recv()`` then ``get(RCVMORE)`` costs a second call per frame, and
  ``get`` looks the option up in an enum each time. 5 µs for a five-frame
  message instead of 8 (``recv_multipart``: 12).

The functions take any pyzmq socket of the blocking kind (``zmq.Socket``
and its shadows); flags are plain ints (pyzmq's enum arithmetic costs more
than the call).
"""

from __future__ import annotations

from typing import Any, List, Optional

import zmq

# The class every pyzmq socket derives from: its methods, called unbound,
# skip the sugar layer's checks (we only ever send bytes).
_BACKEND = zmq.backend.Socket
_send = _BACKEND.send
_recv = _BACKEND.recv
_get = _BACKEND.get

SNDMORE = int(zmq.SNDMORE)
NOBLOCK = int(zmq.NOBLOCK)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)


def send_frames(sock: "zmq.Socket[Any]", frames: List[bytes]) -> None:
    """Send one message (blocking as the socket's ``SNDTIMEO`` says:
    ``zmq.Again`` when it runs out)."""
    for f in frames[:-1]:
        _send(sock, f, SNDMORE)
    _send(sock, frames[-1], 0)


def send_frames_now(sock: "zmq.Socket[Any]", frames: List[bytes]) -> bool:
    """Send one message if the socket takes it without waiting; whether it
    did. Once the first frame went the rest always goes (libzmq queues a
    message whole or not at all)."""
    try:
        _send(sock, frames[0], SNDMORE | NOBLOCK if len(frames) > 1 else NOBLOCK)
    except zmq.Again:
        return False
    if len(frames) > 1:
        for f in frames[1:-1]:
            _send(sock, f, SNDMORE)
        _send(sock, frames[-1], 0)
    return True


def recv_ready(sock: "zmq.Socket[Any]") -> Optional[List[bytes]]:
    """One message if one is waiting, else None (never blocks)."""
    try:
        f = _recv(sock, NOBLOCK, False)
    except zmq.Again:
        return None
    frames = [f.bytes]
    while f.more:
        f = _recv(sock, NOBLOCK, False)
        frames.append(f.bytes)
    return frames


def readable(sock: "zmq.Socket[Any]") -> bool:
    """A message is waiting (no system call)."""
    return bool(int(_get(sock, _EVENTS)) & _POLLIN)
