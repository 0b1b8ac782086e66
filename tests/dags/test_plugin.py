"""The lakehouse Airflow plugin: registered, serves only the reports folder, checks the range
form. (The live api-server is exercised in tests/integration/test_airflow_ui.py.)"""

from __future__ import annotations

import asyncio
import json
from importlib.metadata import entry_points

import pytest
from fastapi import HTTPException

from lakehouse.orchestration.plugin import (
    NOTE_LIMIT,
    BackfillFormCheck,
    LakehousePlugin,
    checked_trigger,
    no_reports_page,
    noted,
    report_file,
    served,
)


def test_the_plugin_is_registered_for_airflow_through_the_package_entry_point():
    (entry,) = [e for e in entry_points(group="airflow.plugins") if e.name == "lakehouse"]
    assert entry.load() is LakehousePlugin
    assert {link.name for link in LakehousePlugin.operator_extra_links} == {
        "Run report",
        "Data quality",
    }


def body(conf: object, **extra: object) -> bytes:
    return json.dumps({"logical_date": None, "conf": conf, **extra}).encode()


def test_a_good_range_passes_with_its_note():
    checked, refusal = checked_trigger(body({"start": "2026-11-01", "end": "2026-11-03"}))
    assert refusal is None
    assert json.loads(checked)["note"] == "backfill 2026-11-01..2026-11-03, layers silver, gold"
    # A note the user wrote is kept.
    checked, _ = checked_trigger(body({"start": "2026-11-01", "end": "2026-11-01"}, note="mine"))
    assert json.loads(checked)["note"] == "mine"


@pytest.mark.parametrize(
    ("conf", "reason"),
    [
        ({"start": "2026-11-03", "end": "2026-11-01"}, "start 2026-11-03 is after end 2026-11-01"),
        ({"start": "2026-11-03"}, "give a start and an end date"),
        ({"start": "2026-11-01", "end": "2026-11-01", "layers": ["bronze"]}, "layers: choose"),
        ({"start": "2026-11-01", "end": "2026-11-01", "layers": 5}, "layers: expected a list"),
        ({"start": "2026-11-01", "end": "2026-11-01", "layers": [5]}, "layers: expected a list"),
        ({"start": 20261101, "end": "2026-11-01"}, "start: expected a date"),
        (["2026-11-01"], "conf: expected an object, got list"),
        (
            {"start": "1900-01-01", "end": "2999-12-31"},
            "1900-01-01..2999-12-31 is 401,767 days, more than 366: check the dates, or tick "
            '"Yes, the whole range"',
        ),
    ],
)
def test_a_bad_range_is_refused_with_the_reason(conf, reason):
    _, refusal = checked_trigger(body(conf))
    assert refusal is not None
    assert refusal.startswith("lakehouse_backfill_range: ") and reason in refusal


def test_a_long_range_runs_with_the_whole_range_box_ticked():
    form = {"start": "2024-01-01", "end": "2026-11-01", "whole_range": True}
    checked, refusal = checked_trigger(body(form))
    assert refusal is None
    assert json.loads(checked)["note"] == "backfill 2024-01-01..2026-11-01, layers silver, gold"


def test_a_runs_note_gets_its_tasks_lines_after_what_it_says():
    warning = "silver: passed with 1 warning(s): silver/late_drops: ..."
    assert noted(None, []) is None
    assert noted("backfill 2026-11-01..2026-11-01, layers gold", []) is None
    assert noted(None, [warning]) == warning
    said = noted("backfill 2026-11-01..2026-11-01, layers gold", [warning])
    assert said == f"backfill 2026-11-01..2026-11-01, layers gold\n{warning}"
    assert noted(said, [warning]) is None  # said once, however often the run ends
    long = noted("note", ["x" * 2000])
    assert long is not None and len(long) == NOTE_LIMIT and long.endswith("…")


def test_a_run_without_reports_gets_a_page_that_says_so_with_its_ids_escaped():
    page = no_reports_page("lakehouse_incremental", "manual__<script>alert(1)</script>")
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "No lakehouse report for <code>lakehouse_incremental</code>" in page


def test_a_caller_without_a_token_passes_to_airflow_unread():
    """The form check answers only callers Airflow lets trigger the DAG: the others'
    requests go on to Airflow (which refuses them) with their bodies unread."""
    passed = []

    async def airflow(scope, receive, send):
        passed.append(scope["path"])

    async def receive():
        raise AssertionError("the body of an unauthenticated request was read")

    check = BackfillFormCheck(airflow)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/v2/dags/lakehouse_backfill_range/dagRuns",
        "headers": [(b"content-type", b"application/json")],
    }
    asyncio.run(check(scope, receive, None))
    assert passed == [scope["path"]]


def test_served_pages_are_sandboxed_and_not_sniffed(tmp_path):
    page = tmp_path / "r.html"
    page.write_text("<p>x</p>")
    headers = served(page).headers
    policy = headers["content-security-policy"]
    assert policy.startswith("sandbox;") and "default-src 'none'" in policy
    assert "script-src" not in policy and "http" not in policy
    assert headers["x-content-type-options"] == "nosniff"


def test_what_is_not_a_json_object_is_left_to_airflow():
    for raw in (b"not json", b"[1, 2]"):
        assert checked_trigger(raw) == (raw, None)


def test_only_files_inside_the_reports_folder_are_served(tmp_path):
    reports = tmp_path / "reports"
    (reports / "runs").mkdir(parents=True)
    (reports / "index.html").write_text("index")
    (reports / "runs" / "r.html").write_text("run")
    (tmp_path / "secret.txt").write_text("no")
    assert report_file(reports, "runs/r.html") == (reports / "runs" / "r.html").resolve()
    assert report_file(reports, "") == (reports / "index.html").resolve()
    for outside in ("../secret.txt", "runs/../../secret.txt", "runs/missing.html", "runs"):
        with pytest.raises(HTTPException) as refused:
            report_file(reports, outside)
        assert refused.value.status_code == 404
