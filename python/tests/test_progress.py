"""Job.progress()'s reading of the router's job view (admin op ``job``)."""

from emq_client import JobProgress, _core


def test_a_reported_progress_is_read_from_the_job_view() -> None:
    answer = {"ok": True, "job": {"msgid": "m", "state": "in-flight",
                                  "progress": {"percent": 42, "message": "half way", "at_ms": 1_700_000_000_500}}}
    p = _core.job_progress_of(answer)
    assert isinstance(p, JobProgress)
    assert (p.percent, p.message, p.at) == (42, "half way", 1_700_000_000.5)


def test_no_progress_is_none() -> None:
    assert _core.job_progress_of({"ok": True, "job": {"msgid": "m", "state": "queued"}}) is None
    assert _core.job_progress_of({"ok": True, "job": {"progress": None}}) is None
