"""The backfill DAGs' requests: plain Python, checked before any Spark job starts."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from lakehouse.catalog.dates import DateRange
from lakehouse.cli import build_parser
from lakehouse.orchestration.requests import backfill_request, nightly_request

DAY = dt.datetime(2026, 11, 5, tzinfo=dt.UTC)
INTERVAL = (DAY, DAY + dt.timedelta(days=1))


def test_the_form_gives_the_three_commands():
    request = backfill_request("2026-11-01", "2026-11-03", ["gold"])
    assert (request.dates.start, request.dates.end) == (dt.date(2026, 11, 1), dt.date(2026, 11, 3))
    commands = request.commands()
    assert commands["backfill"] == [
        "backfill", "--start", "2026-11-01", "--end", "2026-11-03", "--layer", "gold"
    ]  # fmt: skip
    assert commands["validate"] == ["validate", "--layer", "gold", "--new-rows"]
    assert commands["parity"] == ["parity", "--start", "2026-11-01", "--end", "2026-11-03"]
    for arguments in commands.values():  # every command is one the CLI accepts
        build_parser().parse_args(arguments)
    assert request.describe() == "backfill 2026-11-01..2026-11-03, layers gold"


def test_a_range_may_span_years_once_the_form_says_the_whole_range():
    request = backfill_request("2000-01-01", "2026-11-01", None, whole_range=True)
    assert (request.dates.end - request.dates.start).days > 9000


@pytest.mark.parametrize("whole_range", [False, None, "true", 1])
def test_a_range_longer_than_the_limit_is_refused_without_the_box_ticked(whole_range):
    with pytest.raises(ValueError, match="is 367 days, more than 366: check the dates"):
        backfill_request("2025-01-01", "2026-01-02", None, whole_range)
    # A year and a day is the longest range that runs without it.
    assert backfill_request("2025-01-01", "2026-01-01", None, whole_range).dates


def test_layers_come_back_in_pipeline_order():
    request = backfill_request("2026-11-01", "2026-11-01", ["gold", "silver"])
    assert request.layers == ("silver", "gold")


@pytest.mark.parametrize(
    ("start", "end", "layers", "message"),
    [
        ("2026-11-03", "2026-11-01", None, "start 2026-11-03 is after end 2026-11-01"),
        ("2026-13-01", "2026-11-01", None, "start: not a date (YYYY-MM-DD): '2026-13-01'"),
        ("2026-11-01", "tomorrow", None, "end: not a date"),
        ("2026-11-01", None, None, "give a start and an end date"),
        (None, None, None, "give a start and an end date"),
        ("2026-11-01", "2026-11-01", ["bronze"], "layers: choose from silver, gold"),
        ("2026-11-01", "2026-11-01", [], "layers: choose from silver, gold"),
        (20261101, "2026-11-01", None, "start: expected a date YYYY-MM-DD, got 20261101"),
        ("2026-11-01", "2026-11-01", 5, "layers: expected a list of layer names, got 5"),
        ("2026-11-01", "2026-11-01", [5], "layers: expected a list of layer names, got [5]"),
    ],
)
def test_a_bad_form_gets_a_clear_message(start, end, layers, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        backfill_request(start, end, layers)


def test_the_nightly_run_recomputes_the_pending_dates_and_checks_parity_of_its_day():
    nightly = nightly_request("scheduled", INTERVAL, DAY + dt.timedelta(days=1, minutes=3))
    assert nightly.pending and nightly.layers == ("silver", "gold")
    commands = nightly.commands()
    assert commands["backfill"] == [
        "backfill", "--pending", "--layer", "silver", "--layer", "gold"
    ]  # fmt: skip
    assert commands["parity"] == ["parity", "--start", "2026-11-05", "--end", "2026-11-05"]
    build_parser().parse_args(commands["backfill"])
    assert nightly.describe() == "backfill the pending dates, layers silver, gold"


def test_a_manual_trigger_of_the_nightly_dag_does_what_the_night_does():
    # Parity checks the day that ended, with or without the data interval Airflow
    # infers for a manual run (the 24 hours before it, over two dates).
    later = DAY + dt.timedelta(hours=9)
    for interval in (None, (later - dt.timedelta(days=1), later)):
        manual = nightly_request("manual", interval, later)
        assert manual.pending
        assert manual.dates == DateRange(dt.date(2026, 11, 4), dt.date(2026, 11, 4))


def test_airflow_backfill_create_runs_recompute_their_data_interval_end_exclusive():
    request = nightly_request("backfill", INTERVAL, DAY)
    assert not request.pending
    assert request.dates == DateRange(dt.date(2026, 11, 5), dt.date(2026, 11, 5))
    three_days = (DAY, DAY + dt.timedelta(days=3))
    assert nightly_request("backfill", three_days, DAY).dates == DateRange(
        dt.date(2026, 11, 5), dt.date(2026, 11, 7)
    )
