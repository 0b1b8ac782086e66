"""One answer in streaming and batch (docs/contract.md, section 5)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from lakehouse.catalog import LAYERS, TABLES_BY_ID
from lakehouse.catalog.dates import DateRange
from lakehouse.catalog.schemas import table_schema
from lakehouse.drivers.backfill import run_backfill
from lakehouse.drivers.closed import applied_watermark
from lakehouse.drivers.pipeline import run_layer
from lakehouse.samples.generate import GeneratorConfig, generate
from tests.helpers import TABLE_NAMES, delta_rows, delta_table, run_in_process, settings_for

DAYS = DateRange(dt.date(2026, 10, 31), dt.date(2026, 11, 3))


def run_pipeline(spark, settings) -> dict[str, object]:
    return {r.stage: r for layer in LAYERS for r in run_layer(spark, settings, layer)}


def table_rows(settings, layer: str, name: str) -> Counter:
    schema = table_schema(f"{layer}/{name}")
    return delta_rows(settings.table(layer, name), schema.names)


def all_tables(settings) -> dict[str, Counter]:
    return {f"{layer}/{name}": table_rows(settings, layer, name) for layer, name in TABLE_NAMES}


@pytest.fixture(scope="module")
def streamed(spark, tmp_path_factory):
    """Generated input (duplicates and out-of-order arrivals within the watermarks,
    no late events) split into many small files, fed over two runs of several
    micro-batches each."""
    incoming = tmp_path_factory.mktemp("incoming")
    generate(GeneratorConfig(events=6000, seed=41, days=2, late_rate=0, file_minutes=60), incoming)
    settings = settings_for(tmp_path_factory.mktemp("streamed"), max_files_per_trigger=16)
    files = sorted(incoming.rglob("*.jsonl*"), key=lambda p: p.name.split("-", 1)[1])
    for chunk in range(2):
        for file in files[len(files) * chunk // 2 : len(files) * (chunk + 1) // 2]:
            target = settings.landing / file.parent.name / file.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(file, target)
        run_pipeline(spark, settings)
    return settings


def test_parity_command_finds_streaming_and_batch_identical(spark, streamed):
    span = ["--start", str(DAYS.start), "--end", str(DAYS.end)]
    done = run_in_process("parity", *span, "--data-root", str(streamed.data_root))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"parity {DAYS.start}..{DAYS.end}: streaming and batch agree" in done.stdout
    # Its report page holds every table's comparison.
    (report,) = (streamed.reports / "runs").glob("parity-*.json")
    summary = json.loads(report.read_text())
    assert summary["status"] == "passed" and summary["dates"] == f"{DAYS.start}..{DAYS.end}"
    assert {p["table"] for p in summary["parity"]} == {
        f"{layer}/{name}" for layer, name in TABLE_NAMES
    }
    for table in summary["parity"]:
        assert table["equal"] and table["live_rows"] > 0, table
    assert report.with_suffix(".html").is_file()


def test_parity_and_backfill_refuse_while_the_streams_have_rows_to_write(spark, tmp_path):
    """After a bronze-only increment, streaming differs from batch by what silver and gold
    have not written yet: parity would report differences that are not there."""
    root = str(tmp_path / "root")
    generate(GeneratorConfig(events=200, seed=3, days=1), Path(root) / "landing")
    assert run_in_process("run", "--layer", "bronze", "--data-root", root).returncode == 0
    span = ["--start", str(DAYS.start), "--end", str(DAYS.end), "--data-root", root]
    for command in ("parity", "backfill"):
        done = run_in_process(command, *span)
        assert done.returncode == 4, done.stdout + done.stderr
        assert f"lakehouse {command}: refused: the streams still have rows to write" in (
            done.stderr
        )
        assert "silver/clicks: its stream has never run" in done.stderr


def test_one_backfill_equals_many_streaming_runs(spark, streamed, tmp_path):
    backfilled = settings_for(tmp_path / "backfilled")
    shutil.copytree(streamed.lakehouse / "bronze", backfilled.lakehouse / "bronze")
    run_backfill(spark, backfilled, DAYS)
    assert all_tables(backfilled) == all_tables(streamed)


@pytest.mark.full  # the parity tests in CI compare backfills with the streams
def test_backfill_is_repeatable_and_a_sub_range_matches_the_full_one(spark, streamed, tmp_path):
    full = settings_for(tmp_path / "full")
    shutil.copytree(streamed.lakehouse / "bronze", full.lakehouse / "bronze")
    run_backfill(spark, full, DAYS)
    first = all_tables(full)
    run_backfill(spark, full, DAYS)
    assert all_tables(full) == first

    one_day = settings_for(tmp_path / "one-day")
    shutil.copytree(streamed.lakehouse / "bronze", one_day.lakehouse / "bronze")
    day = dt.date(2026, 11, 2)
    run_backfill(spark, one_day, DateRange(day, day))
    for layer, name in TABLE_NAMES:
        schema = table_schema(f"{layer}/{name}")
        column = TABLES_BY_ID[f"{layer}/{name}"].date_column
        if column is None:
            continue
        date_at = schema.names.index(column)
        expected = Counter(
            {row: n for row, n in first[f"{layer}/{name}"].items() if row[date_at] == day}
        )
        assert table_rows(one_day, layer, name) == expected, name
        # The second day is not closed for a daily table yet.
        assert expected or name == "campaign_daily", f"{name} has rows on {day}"


def test_campaign_daily_sums_the_hourly_rows_of_each_closed_day(streamed):
    hourly = delta_table(streamed.table("gold", "ad_performance_hourly")).to_pylist()
    daily = delta_table(streamed.table("gold", "campaign_daily")).to_pylist()
    sums: Counter = Counter()
    for row in hourly:
        sums[(row["campaign_id"], row["event_date"], "impressions")] += row["impressions"]
        sums[(row["campaign_id"], row["event_date"], "clicks")] += row["clicks"]
    watermark_ms = applied_watermark(streamed, TABLES_BY_ID["gold/campaign_daily"])
    assert watermark_ms is not None
    # A day is written once its last hour is closed: day + 1 day <= watermark - 1 hour.
    closed_before = (
        dt.datetime.fromtimestamp(watermark_ms / 1000, dt.UTC) - dt.timedelta(hours=1)
    ).date()
    written_days = {row["day"] for row in daily}
    assert written_days == {day for (_, day, _) in sums if day < closed_before}
    assert written_days, "the first day is closed"
    for row in daily:
        key = (row["campaign_id"], row["day"])
        assert row["impressions"] == sums[(*key, "impressions")], row
        assert row["clicks"] == sums[(*key, "clicks")], row
        assert row["ctr"] == pytest.approx(row["clicks"] / row["impressions"])


def write_lines(landing: Path, source: str, name: str, records: list[dict]) -> None:
    folder = landing / source
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def action(event_id: str, user: str, when: str, kind: str = "view") -> dict:
    return {"event_id": event_id, "user_id": user, "action": kind, "event_time": when}


@pytest.mark.full  # test_late_data.py keeps late rows in CI
def test_late_events_are_dropped_and_counted_by_streaming_and_kept_by_backfill(spark, settings):
    write_lines(
        settings.landing,
        "user_actions",
        "a.jsonl",
        [
            action("e1", "u1", "2026-11-01T10:00:00Z", "login"),
            action("e2", "u1", "2026-11-01T10:30:00Z"),
        ],
    )
    run_pipeline(spark, settings)
    # Watermark now 10:20; 10:05 is late, 10:25 is not.
    write_lines(
        settings.landing,
        "user_actions",
        "b.jsonl",
        [
            action("late", "u2", "2026-11-01T10:05:00Z"),
            action("on-time", "u2", "2026-11-01T10:25:00Z"),
        ],
    )
    results = run_pipeline(spark, settings)
    assert results["silver/user_actions"].dropped_late == 1
    streamed_ids = {r[0] for r in table_rows(settings, "silver", "user_actions")}
    assert streamed_ids == {"e1", "e2", "on-time"}

    run_backfill(spark, settings, DateRange(dt.date(2026, 11, 1), dt.date(2026, 11, 1)))
    backfilled_ids = {r[0] for r in table_rows(settings, "silver", "user_actions")}
    assert backfilled_ids == {"e1", "e2", "late", "on-time"}


def iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# In `make test-full`; CI's parity tests cover the usual event times.
@pytest.mark.full
def test_the_earliest_and_latest_accepted_event_times_go_through_streaming_and_backfill(
    spark, settings
):
    """1900-01-01T00:00:00Z and nearly a day after ingestion: accepted, no stage fails on them."""
    earliest = dt.datetime(1900, 1, 1)
    latest = dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0) + dt.timedelta(hours=23)
    impressions = [
        {
            "impression_id": f"i-{n}",
            "ad_id": "a",
            "campaign_id": "c",
            "user_id": f"u-{n}",
            "event_time": iso(when),
        }
        for n, when in (("old", earliest), ("new", latest - dt.timedelta(hours=2)))
    ]
    click = {
        "click_id": "k-new",
        "impression_id": "i-new",
        "ad_id": "a",
        "user_id": "u-new",
        "event_time": iso(latest - dt.timedelta(hours=2) + dt.timedelta(minutes=5)),
    }
    actions = [
        action("old-1", "u-old", iso(earliest), "login"),
        action("old-2", "u-old", iso(earliest + dt.timedelta(minutes=5)), "logout"),
        action("new-1", "u-new", iso(latest - dt.timedelta(hours=1)), "login"),
        action("new-2", "u-new", iso(latest - dt.timedelta(minutes=50)), "logout"),
        action("new-3", "u-new", iso(latest)),
    ]
    write_lines(settings.landing, "impressions", "ends.jsonl", impressions)
    write_lines(settings.landing, "clicks", "ends.jsonl", [click])
    write_lines(settings.landing, "user_actions", "ends.jsonl", actions)
    for _ in range(2):  # and a second run after it
        run_pipeline(spark, settings)
    for source in ("impressions", "clicks", "user_actions"):
        assert delta_rows(settings.table("quarantine", source)).total() == 0, source
    for day in (earliest.date(), latest.date()):
        run_backfill(spark, settings, DateRange(day, day))

    impressions_in_silver = {r[0] for r in table_rows(settings, "silver", "impressions")}
    assert impressions_in_silver == {"i-old", "i-new"}
    attribution = {(r[0], r[5]) for r in table_rows(settings, "silver", "ad_attribution")}
    assert ("i-new", "k-new") in attribution
    sessions = {(r[1], r[2], r[5]) for r in table_rows(settings, "silver", "user_sessions")}
    assert (("u-old", earliest, "logout")) in sessions
    assert ("u-new", latest - dt.timedelta(hours=1), "logout") in sessions
    statuses = {r[0]: r[1] for r in table_rows(settings, "gold", "user_status")}
    assert statuses["u-old"] == "offline" and statuses["u-new"] == "active"
