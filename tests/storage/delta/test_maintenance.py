"""Maintenance never breaks a stream: vacuum keeps the files a stream has not read yet.

One data root runs bronze only for two days of new events (the silver and
gold streams fall two runs behind), then `lakehouse maintain --retain-hours
0` compacts and vacuums everything it may, then a full run catches up. Its
tables equal those of a root that ran every day in full.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from lakehouse.samples.generate import GeneratorConfig, generate
from tests.helpers import TABLE_NAMES, delta_rows, run_cli, settings_for

DAYS = [dt.datetime(2026, 11, d, tzinfo=dt.UTC) for d in (1, 2, 3)]


def new_day(root: Path, day: int) -> None:
    config = GeneratorConfig(events=800, seed=40 + day, start=DAYS[day], late_rate=0.0)
    generate(config, root / "landing")


def ok(*args: str) -> str:
    done = run_cli(*args)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.full
def test_a_stream_runs_behind_then_maintain_then_run_equals_an_uninterrupted_run(tmp_path):
    behind, steady = tmp_path / "behind", tmp_path / "steady"
    for day in range(3):
        for root in (behind, steady):
            new_day(root, day)
        ok("run", "--data-root", str(steady))
        ok("run", *([] if day == 0 else ["--layer", "bronze"]), "--data-root", str(behind))

    maintained = ok("maintain", "--retain-hours", "0", "--data-root", str(behind))
    for source in ("impressions", "clicks", "user_actions"):
        line = next(x for x in maintained.splitlines() if x.startswith(f"bronze/{source} "))
        assert f"vacuum skipped: silver/{source} (2 commit(s) unread)" in line, line
    assert "silver/impressions" in maintained and "vacuumed" in maintained

    ok("run", "--data-root", str(behind))
    for layer, name in TABLE_NAMES:
        ours = delta_rows(settings_for(behind).table(layer, name))
        assert ours == delta_rows(settings_for(steady).table(layer, name)), f"{layer}/{name}"
        assert sum(ours.values()) > 0
    # Caught up, the next maintain vacuums bronze too.
    again = ok("maintain", "--retain-hours", "0", "--data-root", str(behind))
    assert "vacuum skipped" not in again
