"""A backfill and an incremental run started at the same moment on one data root.

They serialise on the data root's writer lock: both succeed, the Delta
histories show one writer's commits entirely before the other's, and a third
writer that will not wait fails at once with a message naming the holder.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lakehouse.runtime.locks import LOCK_FILE
from lakehouse.samples.generate import GeneratorConfig, generate
from tests.helpers import delta_rows, kill_group, run_cli, settings_for, start_cli

pytestmark = [pytest.mark.system, pytest.mark.full]

WAITING = "waiting for the writer lock"


def writers_of(table: Path, after_version: int) -> list[str]:
    """Who made each commit after a version: 'stream' or 'backfill'."""
    kinds = []
    for commit in sorted(DeltaTable(str(table)).history(), key=lambda c: c["version"]):
        if commit["version"] <= after_version:
            continue
        metadata = json.loads(commit.get("userMetadata") or "{}")
        if "streamingQueryId" in metadata:
            kinds.append("stream")
        elif metadata.get("lakehouseOperation") == "backfill":
            kinds.append("backfill")
    return kinds


def blocks(kinds: list[str]) -> list[str]:
    """Runs of equal neighbours collapsed: ['a', 'a', 'b'] -> ['a', 'b']."""
    return [kind for i, kind in enumerate(kinds) if i == 0 or kinds[i - 1] != kind]


def test_backfill_and_run_at_once_serialise_and_a_third_writer_fails_cleanly(tmp_path):
    root = tmp_path / "data"
    generate(GeneratorConfig(events=1500, seed=11, days=2, file_minutes=240), root / "landing")
    first = run_cli("run", "--data-root", str(root))
    assert first.returncode == 0, first.stderr
    silver_impressions = settings_for(root).table("silver", "impressions")
    streamed_until = DeltaTable(str(silver_impressions)).version()
    # New files for the same days: the run appends to the range the backfill replaces.
    generate(GeneratorConfig(events=500, seed=12, days=2, file_minutes=240), root / "landing")

    run = start_cli("run", "--data-root", str(root))
    backfill = start_cli(
        "backfill", "--start", "2026-11-01", "--end", "2026-11-02", "--data-root", str(root)
    )
    try:
        lock = root / LOCK_FILE
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not lock.read_text():
            time.sleep(0.1)
        impatient = run_cli(
            "maintain", "--data-root", str(root), env={"LAKEHOUSE_LOCK_TIMEOUT": "0"}
        )
        run_out, run_err = run.communicate(timeout=600)
        backfill_out, backfill_err = backfill.communicate(timeout=600)
    finally:
        kill_group(run)
        kill_group(backfill)

    assert impatient.returncode == 1
    assert f"another writer is working on {root}" in impatient.stderr
    assert "lakehouse run" in impatient.stderr or "lakehouse backfill" in impatient.stderr
    assert "maintain finished" not in impatient.stdout

    assert run.returncode == 0, run_err
    assert backfill.returncode == 0, backfill_err
    assert (WAITING in run_out) != (WAITING in backfill_out), "exactly one of them waited"

    # After the first run, each writer's commits form one block.
    kinds = writers_of(silver_impressions, after_version=streamed_until)
    assert set(kinds) == {"stream", "backfill"}
    assert len(blocks(kinds)) == 2, kinds
    expected_first = "backfill" if WAITING in run_out else "stream"
    assert blocks(kinds)[0] == expected_first

    rows = delta_rows(silver_impressions, ["impression_id"])
    assert rows and max(rows.values()) == 1, "duplicate impressions in silver"
    assert Counter(rows).total() == len(rows)
