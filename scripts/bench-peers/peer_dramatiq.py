"""Dramatiq app of the peers bench: a Redis broker on the Redis the bench
started ($PEERS_REDIS_URL) and one actor, `done`, that runs the same job
as every other system (`peer_jobs.done`); no retries, no results."""

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

import peer_jobs

dramatiq.set_broker(RedisBroker(url=os.environ.get("PEERS_REDIS_URL", "redis://127.0.0.1:6379/0")))


@dramatiq.actor(actor_name="done", queue_name="default", max_retries=0)
def done(path, i):
    peer_jobs.done(path, i)
