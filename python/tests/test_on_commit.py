"""Enqueue on commit (issue 28): ``emq_client.django.submit_on_commit`` with a
real SQLite-backed Django project (settings configured here, a table made
with SQL), and ``emq_client.sqlalchemy.submit_on_commit`` on a real SQLite
engine, against a real emq-router and job manager: a job submitted inside
a transaction that commits runs; one whose transaction (or savepoint)
rolls back is never sent (the router's ``accepted`` counter does not
move)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

import emq_test_jobs
from emq_client import Client

from conftest import Router

import django  # installed by scripts/setup-python.sh (and the test extra)


@pytest.fixture
def client(cluster: Router) -> Iterator[Client]:
    with Client(cluster.frontend, admin_addr=cluster.admin) as c:
        yield c


def accepted(c: Client) -> int:
    return int(c.admin("status")["counters"]["accepted"])


@pytest.fixture(scope="module")
def django_db(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A Django project on a SQLite file: settings, setup, one table."""
    from django.conf import settings

    if not settings.configured:
        db = tmp_path_factory.mktemp("django") / "app.sqlite3"
        settings.configure(
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(db)}},
            INSTALLED_APPS=[],
            USE_TZ=True,
        )
        django.setup()
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT)")
    return connection


def test_django_commit_submits_and_rollback_does_not(django_db: Any, client: Client) -> None:
    from django.db import transaction

    from emq_client.django import submit_on_commit

    before = accepted(client)
    with transaction.atomic():
        with django_db.cursor() as cur:
            cur.execute("INSERT INTO orders (item) VALUES ('book')")
        h = submit_on_commit(emq_test_jobs.add, 2, 3, client=client)
        assert h.state == "waiting" and h.job is None, "nothing sent before the commit"
        assert accepted(client) == before
    assert h.state == "submitted", h
    assert h.job.result(30) == 5

    class Boom(Exception):
        pass

    before = accepted(client)
    with pytest.raises(Boom):
        with transaction.atomic():
            with django_db.cursor() as cur:
                cur.execute("INSERT INTO orders (item) VALUES ('lamp')")
            gone = submit_on_commit(emq_test_jobs.add, 1, 1, client=client)
            raise Boom()
    assert gone.job is None and gone.state == "waiting", "never run: Django dropped the callback"
    # A savepoint that rolls back drops what was registered inside it.
    with transaction.atomic():
        kept = submit_on_commit(emq_test_jobs.add, 10, 1, client=client)
        try:
            with transaction.atomic():
                submit_on_commit(emq_test_jobs.add, 99, 1, client=client)
                raise Boom()
        except Boom:
            pass
    assert kept.job is not None and kept.job.result(30) == 11
    assert accepted(client) == before + 1, "only the committed job reached the router"
    with django_db.cursor() as cur:
        cur.execute("SELECT item FROM orders ORDER BY id")
        assert [r[0] for r in cur.fetchall()] == ["book"]


def test_sqlalchemy_commit_submits_and_rollback_does_not(tmp_path: Path, client: Client) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy.orm import Session

    from emq_client.sqlalchemy import submit_on_commit

    engine = create_engine(f"sqlite:///{tmp_path / 'app.sqlite3'}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)"))

    before = accepted(client)
    with Session(engine) as session:
        with session.begin():
            session.execute(text("INSERT INTO orders (item) VALUES ('book')"))
            h = submit_on_commit(session, emq_test_jobs.add, 2, 3, client=client)
            assert h.job is None and accepted(client) == before
        assert h.state == "submitted", h
        assert h.job.result(30) == 5

        before = accepted(client)
        session.execute(text("INSERT INTO orders (item) VALUES ('lamp')"))
        gone = submit_on_commit(session, emq_test_jobs.add, 1, 1, client=client)
        session.rollback()
        assert gone.state == "dropped" and gone.job is None

        # A rolled-back savepoint drops its own; the outer commit sends the rest.
        with session.begin():
            kept = submit_on_commit(session, emq_test_jobs.add, 10, 1, client=client)
            nested = session.begin_nested()
            inner = submit_on_commit(session, emq_test_jobs.add, 99, 1, client=client)
            nested.rollback()
            saved = session.begin_nested()
            also = submit_on_commit(session, emq_test_jobs.add, 20, 2, client=client)
            saved.commit()
            assert also.job is None, "a savepoint's commit is not the transaction's"
        assert inner.state == "dropped"
        assert kept.job is not None and kept.job.result(30) == 11
        assert also.job is not None and also.job.result(30) == 22
        assert accepted(client) == before + 2
        # A savepoint that committed inside a transaction that rolls back.
        session.begin()
        sp = session.begin_nested()
        lost = submit_on_commit(session, emq_test_jobs.add, 7, 7, client=client)
        sp.commit()
        session.rollback()
        assert lost.state == "dropped" and accepted(client) == before + 2
    with engine.connect() as conn:
        assert [r[0] for r in conn.execute(text("SELECT item FROM orders ORDER BY id"))] == ["book"]


def test_a_submit_that_fails_after_the_commit_is_kept_not_raised() -> None:
    from emq_client._oncommit import OnCommit

    class Down:
        def submit(self, *a: Any, **k: Any) -> Any:
            raise ConnectionError("no router")

    h = OnCommit("pkg.f", (), {}, Down())
    h.submit()
    assert h.state == "failed" and isinstance(h.error, ConnectionError)
