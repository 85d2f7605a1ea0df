"""Capture the PUBLISH frames of EventMQ 0.3.13, for emqp-proto's test vectors.

    python capture_publish_vectors.py > emqp-proto/tests/vectors/publisher.json

Run with the 0.3.13 venv's python (scripts/setup-python.sh). Two captures:

1. ``client->pubsub``: 0.3.13's publisher client (``eventmq.sender.Sender``,
   a DEALER with a uuid4 identity, and
   ``eventmq.client.messages.send_publish_request``) sending to a capture
   ROUTER socket: the frames as a ROUTER receives them (identity first).
2. ``pubsub->subscriber``: the same calls sent to the real 0.3.13
   ``emq-pubsub`` (started here on free loopback ports), and what a plain
   zmq SUB socket subscribed to everything receives from its PUB socket.
   A warm-up message is published until the first one arrives (the PUB
   socket drops everything sent before the subscription reached it).

The same calls in the same order, so the n-th ``pubsub->subscriber``
entry is what 0.3.13's emq-pubsub made of the n-th ``client->pubsub`` one.
"""

import json
import os
import socket
import subprocess
import sys
import time

import zmq
from eventmq.client.messages import send_publish_request
from eventmq.sender import Sender

CALLS = [
    ("news", {"headline": "emq", "n": 1}),
    ("news.sports", "a plain string"),
    ("", [1, 2, 3]),
    ("nouvelles-\u00e9t\u00e9", {"caf\u00e9": "cr\u00e8me"}),
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def text(frame):
    return frame.decode("utf-8")


def capture_client(ctx):
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    sender = Sender()
    sender.connect("tcp://127.0.0.1:%d" % port)
    out = []
    t0 = time.time()
    for topic, message in CALLS:
        msgid = send_publish_request(sender, topic, message)
        if not router.poll(5000):
            raise SystemExit("capture ROUTER received nothing")
        frames = router.recv_multipart()
        out.append({
            "t": round(time.time() - t0, 3),
            "direction": "client->pubsub",
            "frames": [text(f) for f in frames],
            "note": "send_publish_request(s, %r, %s)  -> returned %r"
            % (topic, json.dumps(message), msgid),
        })
    sender.zsocket.close(linger=0)
    router.close(linger=0)
    return out


def capture_pubsub(ctx, venv_bin):
    incoming = "tcp://127.0.0.1:%d" % free_port()
    outgoing = "tcp://127.0.0.1:%d" % free_port()
    env = dict(os.environ)
    env.update({
        "EVENTMQ_CONFIG_FILE": "/dev/null",
        "EVENTMQ_PUBLISHER_INCOMING_ADDR": incoming,
        "EVENTMQ_PUBLISHER_OUTGOING_ADDR": outgoing,
    })
    proc = subprocess.Popen([os.path.join(venv_bin, "emq-pubsub")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(outgoing)
        sender = Sender()
        sender.connect(incoming)
        for _ in range(200):
            send_publish_request(sender, "warm-up", "w")
            if sub.poll(50):
                break
        else:
            raise SystemExit("0.3.13 emq-pubsub published nothing")
        while sub.poll(200):
            sub.recv_multipart()
        out = []
        t0 = time.time()
        for topic, message in CALLS:
            send_publish_request(sender, topic, message)
            if not sub.poll(5000):
                raise SystemExit("SUB received nothing for %r" % topic)
            frames = sub.recv_multipart()
            out.append({
                "t": round(time.time() - t0, 3),
                "direction": "pubsub->subscriber",
                "frames": [text(f) for f in frames],
                "note": "0.3.13 emq-pubsub's PUB socket, for send_publish_request(s, %r, %s)"
                % (topic, json.dumps(message)),
            })
        sender.zsocket.close(linger=0)
        sub.close(linger=0)
        return out
    finally:
        proc.terminate()
        proc.wait(10)


def main():
    ctx = zmq.Context.instance()
    venv_bin = os.path.dirname(sys.executable)
    messages = capture_client(ctx) + capture_pubsub(ctx, venv_bin)
    doc = {
        "name": "publisher",
        "description": "EventMQ 0.3.13 pub/sub. client->pubsub: the publisher client "
        "(eventmq.sender.Sender = DEALER with a uuid4 identity, "
        "eventmq.client.messages.send_publish_request) sending to a capture ROUTER; "
        "frame 0 is the client identity. pubsub->subscriber: what the real 0.3.13 "
        "emq-pubsub's PUB socket sent a zmq SUB socket (subscribed to everything) "
        "for the same calls, in the same order. Captured by "
        "tests/python/capture_publish_vectors.py.",
        "frame_encoding": "each frame is a UTF-8 string",
        "eventmq_version": "0.3.13",
        "messages": messages,
    }
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
