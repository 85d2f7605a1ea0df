"""The progress test's Python side (integration-tests/tests/job_progress.rs).

`report_and_wait(release)` is a job that reports progress (10 %, then 50 %
"half way") and waits (at most 60 s) until the file `release` exists. Run as
a script it is the client:

    python emq_test_progress.py FRONTEND ADMIN RELEASE

It submits the job, prints `msgid MSGID`, polls Job.progress() until it
says 50 % and prints `progress {"percent", "message"}`, then waits for the
result and prints `result VALUE` (the test creates RELEASE in between).
"""

import json
import os
import sys
import time


def report_and_wait(release):
    import emq_job  # the job manager's worker provides it

    emq_job.progress(10, "starting")
    time.sleep(0.3)  # past the router's rate limit (200 ms), so both count
    emq_job.progress(50.7, "half way")
    deadline = time.monotonic() + 60
    while not os.path.exists(release):
        if time.monotonic() > deadline:
            raise TimeoutError("never released")
        time.sleep(0.02)
    return "released"


def main():
    frontend, admin, release = sys.argv[1:4]
    from emq_client import Client

    with Client(frontend, admin_addr=admin) as c:
        job = c.submit("emq_test_progress.report_and_wait", release, queue="progress")
        print("msgid " + job.msgid, flush=True)
        deadline = time.monotonic() + 30
        while True:
            p = job.progress()
            if p is not None and p.percent == 50:
                break
            if time.monotonic() > deadline:
                raise SystemExit("no 50 %% progress within 30 s (last: %r)" % (p,))
            time.sleep(0.05)
        print("progress " + json.dumps({"percent": p.percent, "message": p.message}), flush=True)
        print("result " + json.dumps(job.result(timeout=60)), flush=True)
        # Gone once the job ended.
        print("after " + json.dumps(job.progress() is None), flush=True)


if __name__ == "__main__":
    main()
