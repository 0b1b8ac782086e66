"""Landing values written by an attacker: markup in every kind of value, copies of an id far
apart, a 2.3 GB line.

Two `lakehouse run`s in a row (in this process) over a small hand-written
landing folder. Markup (`<img src=x onerror=…>`, `<script>`) is in ids,
enums, times, a malformed line and lines bronze quarantines; the second run
brings a second copy of an impression, a click and a user action, each later
than the watermark delay after its first copy (so the stream's own
deduplication has forgotten the id); and beside the first run's files lies a
plain 2.3 GB file with no newline (sparse, made with `truncate`). Both runs
pass; silver keeps the first copy of each id and equals a batch recomputation
(`lakehouse parity`); the long line is one quarantine row; every HTML page
under reports/ holds the markup only as text.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.helpers import delta_rows, run_in_process, settings_for

IMG = "<img src=x onerror=alert(document.domain)>"
SCRIPT = "<script>alert(1)</script>"
DAY = "2026-11-01"
HUGE_BYTES = 2_300_000_000


def at(clock: str) -> str:
    return f"{DAY}T{clock}:00Z"


def impression(impression_id: str, clock: str, **fields: object) -> dict:
    return {"impression_id": impression_id, "ad_id": "a-1", "campaign_id": "c-1",
            "user_id": "u-1", "event_time": at(clock), **fields}  # fmt: skip


def click(click_id: str, impression_id: str, clock: str, **fields: object) -> dict:
    return {"click_id": click_id, "impression_id": impression_id, "ad_id": "a-1",
            "user_id": "u-1", "event_time": at(clock), **fields}  # fmt: skip


def action(event_id: str, clock: str, **fields: object) -> dict:
    return {"event_id": event_id, "user_id": "u-1", "action": "view", "event_time": at(clock),
            **fields}  # fmt: skip


# Run 1. The watermarks end at 13:00 (impressions, 2 h), 14:00 (clicks, 3 h), 14:50
# (user_actions, 10 min): past each marked id's first copy plus its delay.
FIRST = {
    "impressions": [
        impression(IMG, "10:00", ad_id=SCRIPT, campaign_id=IMG, user_id=SCRIPT),
        *(impression(f"i-{hour}", f"{hour}:00") for hour in range(11, 16)),
        SCRIPT,  # not JSON
        impression("i-bad-time", "10:00", event_time=IMG),
        impression(SCRIPT, "10:00", ad_id=7),  # a number where a string is required
        {"impression_id": IMG, "event_time": at("10:00")},  # fields missing
    ],
    "clicks": [
        click(IMG, IMG, "10:30", ad_id=SCRIPT, user_id=IMG),
        *(click(f"c-{hour}", f"i-{hour}", f"{hour}:10") for hour in range(11, 18)),
        IMG,
    ],
    "user_actions": [
        action(IMG, "10:00", user_id=SCRIPT, action="login"),
        action("a-bad", "10:05", action=IMG),  # not one of the five actions
        *(action(f"a-{hour}", f"{hour}:00") for hour in range(11, 16)),
    ],
}
# Run 2: each marked id again, later than its first copy by more than the delay, and not
# late (at or after the watermark).
SECOND = {
    "impressions": [impression(IMG, "13:30", ad_id="other"), impression("i-16", "16:00")],
    "clicks": [click(IMG, "i-14", "14:30")],
    "user_actions": [action(IMG, "14:55", action="logout")],
}
FIRST_COPY = {
    ("silver", "impressions", "impression_id"): at("10:00"),
    ("silver", "clicks", "click_id"): at("10:30"),
    ("silver", "user_actions", "event_id"): at("10:00"),
}


def write_lines(landing: Path, name: str, lines: dict[str, list]) -> None:
    for source, events in lines.items():
        folder = landing / source
        folder.mkdir(parents=True, exist_ok=True)
        text = "".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events)
        (folder / f"{name}.jsonl").write_text(text)


@pytest.fixture(scope="module")
def attacked(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("markup")
    landing = root / "landing"
    write_lines(landing, "first", FIRST)
    with (landing / "impressions" / "huge.jsonl").open("wb") as huge:
        huge.truncate(HUGE_BYTES)  # sparse: no disk used, no newline in it
    runs = [run_in_process("run", "--data-root", str(root))]
    write_lines(landing, "second", SECOND)
    runs.append(run_in_process("run", "--data-root", str(root)))
    parity = run_in_process("parity", "--start", DAY, "--end", DAY, "--data-root", str(root))
    return settings_for(root), runs, parity


def test_two_runs_pass_and_silver_keeps_the_first_copy_of_an_id_however_late(attacked):
    settings, runs, parity = attacked
    for run in runs:
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for (layer, name, key), first in FIRST_COPY.items():
        rows = delta_rows(settings.table(layer, name), [key, "event_time"])
        assert max(rows.values()) == 1, (name, rows)
        marked = [time for value, time in rows if value == IMG]
        assert marked == [naive_utc(first)], (name, marked)
    # Bronze keeps every accepted copy; silver and gold equal a batch recomputation.
    assert delta_rows(settings.table("bronze", "impressions"), ["impression_id"])[(IMG,)] == 2
    assert parity.returncode == 0, parity.stdout[-3000:] + parity.stderr[-3000:]


def naive_utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).astimezone(dt.UTC).replace(tzinfo=None)


def test_a_line_of_gigabytes_is_one_quarantine_row_and_the_other_files_are_ingested(attacked):
    settings, _, _ = attacked
    quarantine = settings.table("quarantine", "impressions")
    quarantined = delta_rows(quarantine, ["_source_file", "reason"])
    huge = [(file, reason) for file, reason in quarantined if file.endswith("huge.jsonl")]
    assert len(huge) == 1 and quarantined[huge[0]] == 1, quarantined
    assert "too long" in huge[0][1]
    # Every line of the two small files is in bronze or quarantine, once.
    lines = len(FIRST["impressions"]) + len(SECOND["impressions"])
    bronze = delta_rows(settings.table("bronze", "impressions"), ["impression_id"])
    assert bronze.total() + quarantined.total() == lines + 1
    assert bronze.total() == 1 + 5 + 2  # the marked impression, i-11..i-15, the second file


def test_every_report_page_holds_the_markup_only_as_text(attacked):
    settings, _, _ = attacked
    pages = sorted(settings.reports.rglob("*.html"))
    assert any("data_docs" in page.parts for page in pages), pages
    for page in pages:
        text = page.read_text()
        assert IMG not in text and SCRIPT not in text, page
        assert "<script" not in text.lower(), page


def test_every_link_of_every_report_page_leads_to_a_file_of_the_reports_folder(attacked):
    """Two runs and a parity check: the second run's Data Docs build keeps the first's
    pages (its report links them), and no page links the web (offline, dead) or the Data
    Docs index (not built: its table needs scripts). Over HTTP, behind Airflow's login:
    tests/dags/test_airflow_ui.py's crawl."""
    settings, _, _ = attacked
    reports = settings.reports.resolve()
    docs_links: dict[str, int] = {}
    for page in sorted(reports.rglob("*.html")):
        for link in re.findall(r'(?:href|src)="([^"#]*)[^"]*"', page.read_text()):
            if not link:
                continue  # an anchor in the page itself
            assert not re.match(r"[a-z]+:|//", link), (page, link)
            target = (page.parent / unquote(link)).resolve()
            assert target.is_relative_to(reports) and target.is_file(), (page, link)
            if page.parent.name == "runs" and "data_docs" in target.parts:
                docs_links[page.stem] = docs_links.get(page.stem, 0) + 1
    # The two runs' reports (the parity check runs no checks) each link Data Docs pages.
    assert len(docs_links) == 2 and min(docs_links.values()) > 10, docs_links
