"""Publish with the real EventMQ 0.3.13 publisher client, until stopped.

Used by the pub/sub interop tests: 0.3.13's client (``eventmq.sender.Sender``
and ``eventmq.client.messages.send_publish_request``) publishing through
emq-pubsub.

    python eventmq_0313_publisher.py --addr tcp://127.0.0.1:PORT \\
        --topics news,weather [--max 1500] [--interval 0.02]

Round ``i`` (0, 1, ...) publishes ``{"seq": i, "topic": T}`` on each topic T,
then waits ``--interval`` seconds; after ``--max`` rounds it exits. A PUB
socket drops what is published before a subscription reaches it, so the
test lets this run until its subscribers have received enough, then stops
it (SIGTERM). Prints one JSON line per round: {"seq": i, "msgids": [...]}.
"""

import argparse
import json
import signal
import sys
import time

from eventmq.client.messages import send_publish_request
from eventmq.sender import Sender


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--topics", required=True, help="comma-separated")
    ap.add_argument("--max", type=int, default=1500)
    ap.add_argument("--interval", type=float, default=0.02)
    opts = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    topics = opts.topics.split(",")
    s = Sender()
    s.connect(opts.addr)
    for i in range(opts.max):
        msgids = [send_publish_request(s, t, {"seq": i, "topic": t}) for t in topics]
        print(json.dumps({"seq": i, "msgids": msgids}), flush=True)
        time.sleep(opts.interval)
    s.zsocket.close(linger=1000)


if __name__ == "__main__":
    main()
