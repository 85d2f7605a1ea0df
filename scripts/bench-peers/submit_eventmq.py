"""Submit N jobs with EventMQ 0.3.13's own client (run with the test
virtualenv's python): prints one line per job, ``i unix_time`` of its
submit, then ``sent``."""

import sys
import time

from eventmq.client.messages import defer_job
from eventmq.sender import Sender


def main():
    frontend, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = Sender()
    s.connect(frontend)
    time.sleep(0.3)
    out = []
    for i in range(n):
        out.append("%d %.6f" % (i, time.time()))
        defer_job(s, "peer_jobs.done", args=[path, i])
    sys.stdout.write("\n".join(out) + "\nsent\n")
    sys.stdout.flush()
    s.zsocket.close(linger=5000)


if __name__ == "__main__":
    main()
