"""SIGKILL a real `lakehouse run` and run it again: the same tables as an uninterrupted run.

Bronze and quarantine hold every line exactly once; silver and gold (stateful
queries restarted from their checkpoints) match row for row.
"""

from __future__ import annotations

import shutil
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from jobs.backfill import TABLES
from jobs.contract import QUARANTINE_SCHEMA, SOURCES, table_schema
from jobs.generate import GeneratorConfig, generate
from tests.helpers import delta_rows, kill_group, landing_lines, run_cli, settings_for, start_cli

pytestmark = pytest.mark.slow

# Several micro-batches per source, so crashes fall between batches too.
SMALL_BATCHES = {"LAKEHOUSE_MAX_FILES_PER_TRIGGER": "8"}


def tables(root: Path) -> dict[str, Counter]:
    """Every row of every table; bronze and quarantine with the file name, not its path."""
    settings = settings_for(root)
    result = {
        f"{layer}/{name}": delta_rows(
            settings.table(layer, name),
            table_schema(layer, name).names,
        )
        for layer, name in TABLES
    }
    for source, spec in SOURCES.items():
        for layer, columns in (
            ("bronze", list(spec.fields)),
            ("quarantine", ["raw", "reason"]),
        ):
            rows = delta_rows(settings.table(layer, source), [*columns, "_source_file"])
            result[f"{layer}/{source}"] = Counter(
                (*r[:-1], Path(r[-1]).name) for r in rows.elements()
            )
    return result


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("landing")
    generate(GeneratorConfig(events=4000, seed=5, malformed_rate=0.02, file_minutes=60), root)
    return root


@pytest.fixture(scope="module")
def reference(tmp_path_factory, landing) -> dict[str, Counter]:
    root = tmp_path_factory.mktemp("reference")
    shutil.copytree(landing, root / "landing")
    done = run_cli("run", "--data-root", str(root), env=SMALL_BATCHES)
    assert done.returncode == 0, done.stderr
    assert "bronze/impressions" in done.stdout and "tables:" in done.stdout
    expected = tables(root)
    for source in SOURCES:
        lines = len(landing_lines(landing, source))
        assert (
            sum(expected[f"bronze/{source}"].values())
            + sum(expected[f"quarantine/{source}"].values())
            == lines
        )
    return expected


def fresh_root(tmp_path: Path, landing: Path) -> Path:
    root = tmp_path / "data"
    shutil.copytree(landing, root / "landing")
    return root


@pytest.mark.parametrize(
    "crash_at",
    [
        # Parquet files written for the 2nd table commit, not yet committed.
        "sink.before_commit:2",
        # bronze/impressions batch committed, its quarantine rows and Spark's
        # checkpoint not yet: the batch is replayed on restart.
        "sink.after_commit:1",
        # In silver: a stateful query's batch committed, then replayed.
        "sink.after_commit:17",
    ],
)
def test_killed_at_a_commit_point_then_rerun_equals_uninterrupted(
    tmp_path, landing, reference, crash_at
):
    root = fresh_root(tmp_path, landing)
    crashed = run_cli(
        "run", "--data-root", str(root), env={**SMALL_BATCHES, "LAKEHOUSE_CRASH_AT": crash_at}
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    recovered = run_cli("run", "--data-root", str(root), env=SMALL_BATCHES)
    assert recovered.returncode == 0, recovered.stderr
    assert tables(root) == reference


@pytest.mark.parametrize(
    ("table", "commits", "extra_seconds"),
    [
        ("bronze/impressions", 3, 0.0),
        ("gold/ad_performance_hourly", 1, 0.3),
    ],
)
def test_killed_at_a_random_moment_then_rerun_equals_uninterrupted(
    tmp_path, landing, reference, table, commits, extra_seconds
):
    root = fresh_root(tmp_path, landing)
    log = root / "lakehouse" / table / "_delta_log"
    process = start_cli("run", "--data-root", str(root), env=SMALL_BATCHES)
    deadline = time.monotonic() + 240
    # Kill once the table has `commits` commits (after its creation), a little later.
    while time.monotonic() < deadline and len(list(log.glob("*.json"))) < commits + 1:
        assert process.poll() is None, process.communicate()[1]
        time.sleep(0.05)
    time.sleep(extra_seconds)
    kill_group(process)
    assert process.returncode == -signal.SIGKILL

    recovered = run_cli("run", "--data-root", str(root), env=SMALL_BATCHES)
    assert recovered.returncode == 0, recovered.stderr
    assert tables(root) == reference


def test_quarantine_schema_is_the_contract(reference, tmp_path, landing):
    assert QUARANTINE_SCHEMA.names[:2] == ["raw", "reason"]
    assert {"_source_file", "_ingested_at"} <= set(QUARANTINE_SCHEMA.names)
