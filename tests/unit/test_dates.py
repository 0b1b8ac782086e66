"""The backfill DAG's form check: plain Python, before any Spark job starts."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from jobs.cli import build_parser
from jobs.dates import DateRange, backfill_request, covered_interval

DAY = dt.datetime(2026, 11, 5, tzinfo=dt.UTC)
INTERVAL = (DAY, DAY + dt.timedelta(days=1))


def test_form_dates_win_and_give_the_three_commands():
    request = backfill_request("2026-11-01", "2026-11-03", ["gold"], INTERVAL)
    assert (request.dates.start, request.dates.end) == (dt.date(2026, 11, 1), dt.date(2026, 11, 3))
    commands = request.commands()
    assert commands["backfill"] == [
        "backfill", "--start", "2026-11-01", "--end", "2026-11-03", "--layer", "gold"
    ]  # fmt: skip
    assert commands["validate"] == ["validate", "--layer", "gold", "--new-rows"]
    assert commands["parity"] == ["parity", "--start", "2026-11-01", "--end", "2026-11-03"]
    for arguments in commands.values():  # every command is one the CLI accepts
        build_parser().parse_args(arguments)


def test_a_run_with_a_logical_date_covers_its_data_interval_end_exclusive():
    request = backfill_request(None, None, None, INTERVAL)
    assert request.dates == DateRange(dt.date(2026, 11, 5), dt.date(2026, 11, 5))
    assert request.layers == ("silver", "gold")
    three_days = (DAY, DAY + dt.timedelta(days=3))
    assert backfill_request(None, None, None, three_days).dates == DateRange(
        dt.date(2026, 11, 5), dt.date(2026, 11, 7)
    )
    # A manual run with a logical date but no schedule interval: that one day.
    assert backfill_request(None, None, None, (DAY, DAY)).dates == request.dates


def test_a_range_may_span_years():
    request = backfill_request("2000-01-01", "2026-11-01", None, None)
    assert (request.dates.end - request.dates.start).days > 9000


def test_manual_runs_cover_their_logical_date_and_the_others_their_interval():
    assert covered_interval("scheduled", DAY, INTERVAL) == INTERVAL
    assert covered_interval("backfill", DAY, INTERVAL) == INTERVAL
    assert covered_interval("manual", DAY, (DAY - dt.timedelta(days=1), DAY)) == (DAY, DAY)
    assert covered_interval("manual", None, (DAY, DAY)) is None


def test_layers_come_back_in_pipeline_order():
    request = backfill_request("2026-11-01", "2026-11-01", ["gold", "silver"], None)
    assert request.layers == ("silver", "gold")


@pytest.mark.parametrize(
    ("start", "end", "layers", "interval", "message"),
    [
        ("2026-11-03", "2026-11-01", None, INTERVAL, "start 2026-11-03 is after end 2026-11-01"),
        ("2026-13-01", "2026-11-01", None, None, "start: not a date (YYYY-MM-DD): '2026-13-01'"),
        ("2026-11-01", "tomorrow", None, INTERVAL, "end: not a date"),
        ("2026-11-01", None, None, INTERVAL, "give both a start and an end date, or neither"),
        (None, None, None, None, "no dates: give a start and an end date"),
        ("2026-11-01", "2026-11-01", ["bronze"], INTERVAL, "layers: choose from silver, gold"),
        ("2026-11-01", "2026-11-01", [], INTERVAL, "layers: choose from silver, gold"),
        (20261101, "2026-11-01", None, INTERVAL, "start: expected a date YYYY-MM-DD, got 20261101"),
    ],
)
def test_a_bad_request_gets_a_clear_message(start, end, layers, interval, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        backfill_request(start, end, layers, interval)


def test_the_nightly_run_recomputes_the_pending_dates_and_checks_parity_of_its_day():
    nightly = backfill_request(None, None, None, INTERVAL, scheduled=True)
    assert nightly.pending
    commands = nightly.commands()
    assert commands["backfill"] == [
        "backfill", "--pending", "--layer", "silver", "--layer", "gold"
    ]  # fmt: skip
    assert commands["parity"] == ["parity", "--start", "2026-11-05", "--end", "2026-11-05"]
    build_parser().parse_args(commands["backfill"])
    # Runs with dates (the form), and runs `airflow backfill create` makes, take their range.
    assert not backfill_request("2026-11-01", "2026-11-02", None, INTERVAL, scheduled=True).pending
    assert not backfill_request(None, None, None, INTERVAL).pending
