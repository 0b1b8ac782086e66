"""Retention of reports, Data Docs pages and parity scratch (no Spark involved)."""

from __future__ import annotations

import json
import os
import time

import pytest

from lakehouse.drivers.maintain import expire_reports

DAY = 24 * 3600


def touch(path, age_days: float, now: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text("x")
    os.utime(path, (now - age_days * DAY, now - age_days * DAY))


def test_only_what_is_older_than_the_retention_goes(settings):
    now = time.time()
    reports = settings.reports
    old_run = reports / "runs" / "run-old.json"
    new_run = reports / "runs" / "run-new.json"
    for path, started in ((old_run, "2026-10-01"), (new_run, "2026-11-20")):
        summary = {"run_id": path.stem, "started_at": f"{started}T00:00:00", "command": "run"}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**summary, "status": "passed", "seconds": 1.0}))
    touch(old_run, 40, now)
    old_quality = reports / "quality" / "run-old.html"
    old_dag_run = reports / "dag-runs" / "lakehouse_incremental" / "scheduled__2026-10-01.html"
    new_quality = reports / "quality" / "run-new.html"
    touch(old_quality, 40, now)
    touch(old_dag_run, 40, now)
    touch(new_quality, 1, now)
    old_page = reports / "data_docs" / "validations" / "silver.clicks" / "r1" / "page.html"
    new_page = reports / "data_docs" / "validations" / "silver.clicks" / "r2" / "page.html"
    touch(old_page, 31, now)
    touch(new_page, 1, now)
    old_scratch = settings.data_root / "scratch" / "parity-20261001T000000-abcdef"
    old_scratch.mkdir(parents=True)
    (old_scratch / "table").mkdir()
    os.utime(old_scratch, (now - 40 * DAY, now - 40 * DAY))

    expired = expire_reports(settings, keep_days=30, now=now)

    assert (expired.run_pages, expired.data_docs_pages, expired.scratch_folders) == (3, 1, 1)
    assert not old_run.exists() and new_run.exists()
    assert not old_quality.exists() and not old_dag_run.exists() and new_quality.exists()
    assert not old_page.exists() and not old_page.parent.exists() and new_page.exists()
    assert not old_scratch.exists()
    index = (reports / "index.html").read_text()
    assert "run-new" in index and "run-old" not in index


def test_negative_retention_is_refused(settings):
    with pytest.raises(ValueError, match="keep_days must not be negative"):
        expire_reports(settings, keep_days=-1)
