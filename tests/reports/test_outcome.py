"""What a run reports: the stages a blocked run did not run (the whole pipeline, one
layer for Airflow), and each stateful stage's state."""

from __future__ import annotations

import datetime as dt

from lakehouse.catalog import LAYERS
from lakehouse.reports.outcome import RunOutcome
from lakehouse.runtime.monitoring import operator_state
from lakehouse.runtime.progress import StageResult, size_text

NOW = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)


def blocked_after_silver_impressions(layers: tuple[str, ...]) -> RunOutcome:
    outcome = RunOutcome("run-1", "run", NOW, layers=layers, blocked_at="silver")
    outcome.stages.append(StageResult("silver/impressions"))
    return outcome


def test_a_whole_run_blocked_in_silver_did_not_run_the_rest_of_silver_nor_gold():
    assert blocked_after_silver_impressions(LAYERS).not_run == [
        "silver/clicks",
        "silver/user_actions",
        "silver/ad_attribution",
        "silver/user_sessions",
        "gold",
    ]


def test_a_silver_task_blocked_names_only_its_own_layer():
    assert blocked_after_silver_impressions(("silver",)).not_run[-1] == "silver/user_sessions"


def test_a_passing_run_or_a_validation_has_nothing_not_run():
    assert RunOutcome("run-2", "run", NOW, layers=LAYERS).not_run == []
    validation = RunOutcome("v-1", "validate", NOW, blocked_at="silver")
    assert validation.not_run == []


# A stateful operator's progress as Spark reports it (the fields read), per store.
ROCKSDB_OPERATOR = {
    "operatorName": "dedupeWithinWatermark",
    "numRowsTotal": 0,
    "memoryUsedBytes": 28200,
    "customMetrics": {"rocksdbSstFileSize": 3_250_000, "rocksdbTotalBytesWritten": 0},
}
HDFS_OPERATOR = {
    "operatorName": "dedupeWithinWatermark",
    "numRowsTotal": 1500,
    "memoryUsedBytes": 90000,
    "customMetrics": {"stateOnCurrentVersionSizeBytes": 80000},
}


def stateful_stage(operators: list[dict], rocksdb_counts: bool) -> StageResult:
    result = StageResult("silver/impressions", rows_in=10, batches=1, seconds=1.0)
    result.state_operators = [operator_state(op, rocksdb_counts) for op in operators]
    return result


def test_a_rocksdb_state_that_does_not_count_its_rows_is_shown_by_its_size():
    stage = stateful_stage([ROCKSDB_OPERATOR, ROCKSDB_OPERATOR], rocksdb_counts=False)
    assert stage.state_rows is None
    assert stage.state_bytes == 6_500_000
    assert stage.summary().endswith("late 0, state 6.2 MiB on disk")


def test_a_store_that_counts_its_rows_shows_them():
    assert (
        stateful_stage([HDFS_OPERATOR], rocksdb_counts=False).summary().endswith("state 1,500 rows")
    )
    counted = stateful_stage([ROCKSDB_OPERATOR], rocksdb_counts=True)
    assert counted.state_rows == 0 and counted.summary().endswith("state 0 rows")


def test_a_stateless_stage_shows_no_state():
    stage = StageResult("gold/ad_performance_hourly", rows_in=10, batches=1, seconds=1.0)
    assert stage.state_text is None and "state" not in stage.summary()


def test_sizes_read_in_binary_units():
    assert [size_text(n) for n in (812, 2048, 5 * 2**20, 3 * 2**40, None)] == [
        "812 bytes",
        "2.0 KiB",
        "5.0 MiB",
        "3,072.0 GiB",
        "size unknown",
    ]
