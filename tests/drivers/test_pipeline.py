"""The whole pipeline through the `lakehouse` command: the session's streamed root (one
`lakehouse run`, `streamed_root`), then the other commands, each in a fresh process."""

from __future__ import annotations

import json
import re
import stat
from collections import Counter

import pytest

from lakehouse.runtime.monitoring import event_log_path
from tests.helpers import (
    TABLE_NAMES,
    assert_gold_agrees_with_duckdb,
    delta_count,
    delta_table,
    run_cli,
    settings_for,
)

pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def root(streamed_root):
    return streamed_root


def test_run_prints_a_line_per_query_and_where_things_are(root):
    out = root.joinpath("run.out").read_text()
    for layer, name in TABLE_NAMES:
        assert f"{layer}/{name} " in out
    assert "event log:" in out and "tables:" in out


def test_event_log_holds_every_query_of_the_run(root):
    settings = settings_for(root)
    log = delta_table(event_log_path(settings)).to_pylist()
    queries = Counter(row["query"] for row in log)
    assert set(queries) >= {
        f"{layer}/{name}" for layer, name in TABLE_NAMES if name != "impressions"
    }
    assert len({row["run_id"] for row in log}) == 1
    # A bronze stream's input rows are landing files; silver's, the bronze rows.
    bronze_in = sum(r["num_input_rows"] for r in log if r["query"] == "bronze/impressions")
    assert bronze_in == len(list((root / "landing" / "impressions").iterdir()))
    silver_in = sum(r["num_input_rows"] for r in log if r["query"] == "silver/impressions")
    assert silver_in == delta_count(settings.table("bronze", "impressions")) > 0
    stateful = [r for r in log if r["query"] == "silver/impressions"]
    assert all(r["watermark"] is not None for r in stateful)
    # RocksDB does not count its rows (lakehouse.runtime.spark): the log holds the state's size.
    assert all(r["state_rows"] is None for r in stateful)
    sizes = [
        op["customMetrics"]["rocksdbSstFileSize"]
        for r in stateful
        for op in json.loads(r["progress_json"])["stateOperators"]
    ]
    assert max(sizes) > 0
    out = root.joinpath("run.out").read_text()
    state = r"late [\d,]+, state [\d.,]+ (bytes|KiB|MiB) on disk"
    assert re.search(rf"silver/impressions .* {state}", out)


def test_nothing_the_run_created_is_writable_by_other_users(root):
    created = [path for path in root.rglob("*") if not path.is_symlink()]
    assert len(created) > 100
    writable = [str(path) for path in created if path.stat().st_mode & stat.S_IWOTH]
    assert not writable, writable[:5]
    report = next((root / "reports" / "runs").glob("*.html"))
    assert report.stat().st_mode & 0o777 in (0o644, 0o640, 0o600)


def test_state_command_lists_every_stateful_operator(root):
    done = run_cli("state", "--data-root", str(root))
    assert done.returncode == 0, done.stderr
    assert "silver/impressions" in done.stdout and "dedupeWithinWatermark" in done.stdout
    assert "symmetricHashJoin" in done.stdout
    assert done.stdout.count("applyInPandasWithState") == 2


def test_every_gold_row_agrees_with_duckdb_computing_gold_from_the_landing_files(root, tmp_path):
    pytest.importorskip("duckdb")
    assert_gold_agrees_with_duckdb(settings_for(root), root, tmp_path)


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        ("2026-11-05", "2026-11-01", "is after end"),
        ("2026-11-31", "2026-12-01", "not a date"),
    ],
)
def test_backfill_refuses_bad_ranges_before_starting_spark(tmp_path, start, end, message):
    # With no Java, starting Spark would fail first, with another message.
    no_java = {"JAVA_HOME": str(tmp_path / "no-java")}
    root = tmp_path / "data"
    root.mkdir()  # a root that does not exist is refused first (test_cli_options.py)
    done = run_cli(
        "backfill", "--start", start, "--end", end, "--data-root", str(root), env=no_java
    )
    assert done.returncode in (1, 2)
    assert message in done.stderr, done.stderr
    assert not (root / "lakehouse").exists()
