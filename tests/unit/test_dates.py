"""The backfill DAG's form check: plain Python, before any Spark job starts."""

from __future__ import annotations

import datetime as dt

import pytest

from jobs.cli import build_parser
from jobs.dates import MAX_BACKFILL_DAYS, backfill_request

DAY = dt.datetime(2026, 11, 5, tzinfo=dt.UTC)
INTERVAL = (DAY, DAY + dt.timedelta(days=1))


def test_form_dates_win_and_give_the_three_commands():
    request = backfill_request("2026-11-01", "2026-11-03", ["gold"], "manual", INTERVAL)
    assert (request.dates.start, request.dates.end) == (dt.date(2026, 11, 1), dt.date(2026, 11, 3))
    commands = request.commands()
    assert commands["backfill"] == [
        "backfill", "--start", "2026-11-01", "--end", "2026-11-03", "--layer", "gold"
    ]  # fmt: skip
    assert commands["validate"] == ["validate", "--layer", "gold", "--new-rows"]
    assert commands["parity"] == ["parity", "--start", "2026-11-01", "--end", "2026-11-03"]
    for arguments in commands.values():  # every command is one the CLI accepts
        build_parser().parse_args(arguments)


def test_scheduled_and_backfill_runs_cover_their_data_interval_end_exclusive():
    for run_type in ("scheduled", "backfill"):
        request = backfill_request(None, None, None, run_type, INTERVAL)
        assert request.dates.dates == [dt.date(2026, 11, 5)]
        assert request.layers == ("silver", "gold")
    three_days = (DAY, DAY + dt.timedelta(days=3))
    assert len(backfill_request(None, None, None, "backfill", three_days).dates.dates) == 3


def test_layers_come_back_in_pipeline_order():
    assert backfill_request(
        "2026-11-01", "2026-11-01", ["gold", "silver"], "manual", None
    ).layers == (
        "silver",
        "gold",
    )


@pytest.mark.parametrize(
    ("start", "end", "layers", "run_type", "message"),
    [
        ("2026-11-03", "2026-11-01", None, "manual", "start 2026-11-03 is after end 2026-11-01"),
        (
            "2026-13-01",
            "2026-11-01",
            None,
            "manual",
            "start: not a date (YYYY-MM-DD): '2026-13-01'",
        ),
        ("2026-11-01", "tomorrow", None, "manual", "end: not a date"),
        ("2026-11-01", None, None, "manual", "give both a start and an end date, or neither"),
        (None, None, None, "manual", "a manual backfill needs both a start and an end date"),
        ("2026-11-01", "2026-11-01", ["bronze"], "manual", "layers: choose from silver, gold"),
        ("2026-11-01", "2026-11-01", [], "manual", "layers: choose from silver, gold"),
        ("2024-01-01", "2026-11-01", None, "manual", f"at most {MAX_BACKFILL_DAYS} days"),
        (20261101, "2026-11-01", None, "manual", "start: expected a date YYYY-MM-DD, got 20261101"),
    ],
)
def test_a_bad_request_gets_a_clear_message(start, end, layers, run_type, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        backfill_request(start, end, layers, run_type, INTERVAL)
