"""The project's jobs."""

import os

import djangoish
from djangoish import db


def record(token):
    """A job that needs the set-up project and its entry hook; returns what
    the worker process has seen so far."""
    djangoish.check_apps_ready()
    if not db.IN_JOB:
        raise RuntimeError("JOB_ENTRY_FUNC did not run before the job")
    db.CONNECTION["queries"] += 1
    djangoish.log("job %s" % token)
    return {
        "token": token,
        "pid": os.getpid(),
        "setup_calls": djangoish.SETUP_CALLS,
        "entries": db.ENTRIES,
        "exits": db.EXITS,
        "queries": db.CONNECTION["queries"],
    }
