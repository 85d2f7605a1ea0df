"""Job.progress()'s reading of the router's job view (admin op ``job``)."""

from emq_client import Client, JobProgress, _core


def test_a_reported_progress_is_read_from_the_job_view() -> None:
    answer = {"ok": True, "job": {"msgid": "m", "state": "in-flight",
                                  "progress": {"percent": 42, "message": "half way", "at_ms": 1_700_000_000_500}}}
    p = _core.job_progress_of(answer)
    assert isinstance(p, JobProgress)
    assert (p.percent, p.message, p.at) == (42, "half way", 1_700_000_000.5)


def test_no_progress_is_none() -> None:
    assert _core.job_progress_of({"ok": True, "job": {"msgid": "m", "state": "queued"}}) is None
    assert _core.job_progress_of({"ok": True, "job": {"progress": None}}) is None


def test_a_job_learns_its_attempt_from_emq_job_current(client: Client) -> None:
    # The first delivery fails (it sees attempt 1); the router sends the job
    # again with attempt:2 in its headers, and the job sees it.
    job = client.submit("emq_pyclient_jobs.context_on_retry", retries=1)
    assert job.result(timeout=60) == {"attempt": 2, "msgid": job.msgid, "queue": "default"}
