"""The project's "database": a connection opened by ``djangoish.setup()``,
and the per-job hooks."""

import os

from djangoish import log

CONNECTION = None
ENTRIES = 0
EXITS = 0
IN_JOB = False


def connect():
    global CONNECTION
    CONNECTION = {"pid": os.getpid(), "queries": 0}


def entry():
    """JOB_ENTRY_FUNC."""
    global ENTRIES, IN_JOB
    ENTRIES += 1
    IN_JOB = True
    log("entry")


def exit():
    """JOB_EXIT_FUNC."""
    global EXITS, IN_JOB
    EXITS += 1
    IN_JOB = False
    log("exit")
