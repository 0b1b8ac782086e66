"""Changing a rule on a running lakehouse: refused until `lakehouse migrate` moves it over."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from lakehouse import catalog
from lakehouse.catalog.dates import DateRange
from lakehouse.cli import main
from lakehouse.drivers.parity import run_parity
from lakehouse.samples.generate import GeneratorConfig, generate
from tests.helpers import delta_table, settings_for

# Two full runs, a refused run and backfill, a migration and parity.
pytestmark = pytest.mark.full


def attribution_delays(settings) -> list[dt.timedelta]:
    rows = delta_table(settings.table("silver", "ad_attribution")).to_pylist()
    return [r["click_time"] - r["impression_time"] for r in rows if r["click_id"] is not None]


def test_a_wider_attribution_window_is_refused_then_migrated(spark, tmp_path, monkeypatch, capsys):
    settings = settings_for(tmp_path / "data")
    root = ["--data-root", str(settings.data_root)]
    generate(GeneratorConfig(events=3000, seed=61, days=2, late_rate=0), settings.landing)
    assert main(["run", *root]) == 0
    assert max(attribution_delays(settings)) <= dt.timedelta(hours=1)
    capsys.readouterr()

    # One edit in the catalog: the window goes from 1 to 2 hours.
    wider = dataclasses.replace(catalog.RULES, attribution_window=dt.timedelta(hours=2))
    monkeypatch.setattr(catalog, "RULES", wider)

    assert main(["run", *root]) != 0
    refused = capsys.readouterr()
    message = refused.out + refused.err
    for expected in (
        "silver/ad_attribution",
        "gold/ad_performance_hourly",
        "gold/campaign_daily",
        "attribution_window: 1:00:00 -> 2:00:00",
        "lakehouse migrate",
    ):
        assert expected in message, message
    assert "silver/user_sessions" not in message.split("lakehouse migrate")[1]

    # A backfill would mix old and new rules too.
    assert main(["backfill", "--start", "2026-11-01", "--end", "2026-11-02", *root]) != 0
    assert "lakehouse migrate" in "".join(capsys.readouterr())

    assert main(["migrate", *root]) == 0
    migrated = capsys.readouterr().out
    assert "migrated 3 table(s)" in migrated, migrated
    assert main(["migrate", *root]) == 0
    assert "nothing to migrate" in capsys.readouterr().out

    # The clicks between one and two hours after their impression now match.
    assert max(attribution_delays(settings)) > dt.timedelta(hours=1)
    assert main(["run", *root]) == 0
    results, _ = run_parity(spark, settings, DateRange(dt.date(2026, 10, 31), dt.date(2026, 11, 3)))
    assert all(r.equal for r in results), [r.summary() for r in results if not r.equal]
