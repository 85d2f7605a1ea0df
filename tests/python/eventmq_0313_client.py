"""Submit jobs with the real EventMQ 0.3.13 client library.

Used by the interop tests to show that a Python client talks to emq's router
(and to the Python router, for comparison) unchanged.

    python emq_client.py --frontend tcp://127.0.0.1:PORT [--wait-acks SECS] < jobs.jsonl

Each stdin line is a JSON object:
    {"via": "defer_job", "func": "emq_test_jobs.record", "args": [...],
     "kwargs": {...}, "class_args": [...], "class_kwargs": {...},
     "queue": "default", "reply_requested": false}
or  {"via": "send_request", "message": ["run", {...}], "queue": ..., ...}
or  {"via": "schedule", "func": "emq_test_jobs.stamp", "args": [...],
     "interval_secs": 1, "unschedule": false, "queue": "default"}
    (eventmq.client.messages.schedule: SCHEDULE, or UNSCHEDULE with
    "unschedule": true; headers default to 0.3.13's ["guarantee"])

Prints one JSON line per job: {"i": N, "msgid": "..."}, then one line per
message received from the router within --wait-acks seconds:
{"recv": [frames...]}, and finally {"done": true, "acks": K}. With
--stop-after-acks it stops as soon as every job was acknowledged (REPLY).
"""

import argparse
import json
import sys
import time

import zmq
from eventmq.client.messages import defer_job, schedule, send_request
from eventmq.sender import Sender


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frontend", required=True)
    ap.add_argument("--wait-acks", type=float, default=2.0)
    ap.add_argument("--connect-delay", type=float, default=0.3)
    ap.add_argument("--stop-after-acks", action="store_true")
    opts = ap.parse_args()

    jobs = [json.loads(line) for line in sys.stdin if line.strip()]
    s = Sender()
    s.connect(opts.frontend)
    time.sleep(opts.connect_delay)

    for i, job in enumerate(jobs):
        flags = dict(
            reply_requested=bool(job.get("reply_requested", False)),
            guarantee=bool(job.get("guarantee", False)),
            retry_count=int(job.get("retry_count", 0)),
            timeout=int(job.get("timeout", 0)),
            queue=job.get("queue"),
        )
        via = job.get("via", "defer_job")
        if via == "send_request":
            msgid = send_request(s, job["message"], **flags)
        elif via == "schedule":
            msgid = schedule(
                s,
                job["func"],
                interval_secs=job.get("interval_secs"),
                cron=job.get("cron"),
                args=job.get("args", []),
                kwargs=job.get("kwargs") or None,
                headers=job.get("headers", ["guarantee"]),
                queue=job.get("queue") or "default",
                unschedule=bool(job.get("unschedule", False)),
            )
        else:
            if flags["queue"] is None:
                del flags["queue"]
            msgid = defer_job(
                s,
                job["func"],
                args=job.get("args", []),
                kwargs=job.get("kwargs") or None,
                class_args=job.get("class_args", []),
                class_kwargs=job.get("class_kwargs") or None,
                **flags
            )
        print(json.dumps({"i": i, "msgid": msgid}), flush=True)

    poller = zmq.Poller()
    poller.register(s.zsocket, zmq.POLLIN)
    acks = 0
    deadline = time.time() + opts.wait_acks
    while time.time() < deadline:
        if poller.poll(100):
            frames = [f.decode("utf-8", "replace") for f in s.zsocket.recv_multipart()]
            if len(frames) >= 3 and frames[2] == "REPLY":
                acks += 1
            print(json.dumps({"recv": frames}), flush=True)
            if opts.stop_after_acks and acks >= len(jobs):
                break
    print(json.dumps({"done": True, "acks": acks}), flush=True)
    s.zsocket.close(linger=1000)


if __name__ == "__main__":
    main()
