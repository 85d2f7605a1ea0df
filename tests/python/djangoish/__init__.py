"""A small Django-like project for emq's job manager tests.

Like a Django project, its jobs need the project set up in the worker
process first: ``djangoish.setup()`` (what ``django.setup()`` is to Django;
give it to the job manager as SUBPROCESS_SETUP_FUNC) loads the "apps" and
opens the "database connection". A job run without it fails with
``AppRegistryNotReady``, as a Django ORM job does. ``djangoish.db.entry`` and
``djangoish.db.exit`` are per-job hooks (JOB_ENTRY_FUNC / JOB_EXIT_FUNC),
like Django's ``close_old_connections`` around a request.

Everything observable goes two ways: module counters that the jobs return,
and one line per event appended to the file named by ``$DJANGOISH_EVENTS``
(``<pid> setup``, ``<pid> entry``, ``<pid> job <token>``, ``<pid> exit``).
One short ``O_APPEND`` write per line: lines of concurrent workers never
interleave. Standard library only.
"""

import os

APPS_READY = False
SETUP_CALLS = 0


class AppRegistryNotReady(Exception):
    pass


def log(event):
    path = os.environ.get("DJANGOISH_EVENTS")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, ("%d %s\n" % (os.getpid(), event)).encode("utf-8"))
    finally:
        os.close(fd)


def setup():
    """SUBPROCESS_SETUP_FUNC: load the apps, connect the database."""
    global APPS_READY, SETUP_CALLS
    from djangoish import db

    SETUP_CALLS += 1
    db.connect()
    APPS_READY = True
    log("setup")


def check_apps_ready():
    if not APPS_READY:
        raise AppRegistryNotReady("Apps aren't loaded yet.")
