"""Celery app of the peers bench: broker and result backend on the Redis the
bench started ($PEERS_REDIS_URL); results ignored (fire and forget)."""

import os

from celery import Celery

import peer_jobs

app = Celery("peer_celery", broker=os.environ.get("PEERS_REDIS_URL", "redis://127.0.0.1:6379/0"))
app.conf.task_ignore_result = True
app.conf.worker_prefetch_multiplier = 4
app.conf.broker_connection_retry_on_startup = True


@app.task(name="peer_celery.done")
def done(path, i):
    return peer_jobs.done(path, i)
