"""Pipeline event log and state inspection.

- `record_progress`: every micro-batch of every query of a run, appended to the
  Delta table `lakehouse/_meta/query_progress` in one commit at the run's end
  (a run that fails records what it did): input rows, rows dropped as later
  than the watermark, state rows (null from RocksDB, which does not count
  them: src/lakehouse/runtime/spark.py) and memory of the stateful operators, duration,
  watermark, and the full progress JSON. Query it like any table.
- `describe_state`: open state per stateful operator, read from the
  checkpoints with Spark's state data source.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse.catalog.schemas import meta_schema
from lakehouse.runtime.settings import Settings
from lakehouse.runtime.spark import TRACK_ROCKSDB_ROWS
from lakehouse.storage.delta import append_rows
from lakehouse.storage.objects import Root

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROGRESS_SCHEMA = meta_schema("query_progress")


def event_log_path(settings: Settings) -> Root:
    return settings.meta("query_progress")


def _time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def rocksdb_counts_rows(spark: SparkSession) -> bool:
    """Whether RocksDB state stores count their rows (`runtime.spark` turns it off)."""
    return str(spark.conf.get(TRACK_ROCKSDB_ROWS, "true")).lower() == "true"


def operator_state(operator: dict[str, Any], rocksdb_counts: bool) -> dict[str, Any]:
    """One stateful operator's progress: its name, rows held (None when its store
    does not count them), state size on disk and memory used, in bytes."""
    metrics = operator.get("customMetrics", {})
    rocksdb = "rocksdbSstFileSize" in metrics
    counted = rocksdb_counts or not rocksdb
    return {
        "operator": operator.get("operatorName"),
        "rows": operator.get("numRowsTotal", 0) if counted else None,
        "state_bytes": metrics.get(
            "rocksdbSstFileSize" if rocksdb else "stateOnCurrentVersionSizeBytes"
        ),
        "memory_bytes": operator.get("memoryUsedBytes"),
    }


def total(figures: Iterable[dict[str, Any]], key: str) -> int | None:
    """The sum of a figure over operators, None if any of them lacks it."""
    values = [figure[key] for figure in figures]
    return None if any(value is None for value in values) else sum(values)


def progress_row(
    run_id: str, query: str, progress: dict[str, Any], rocksdb_counts: bool
) -> dict[str, Any]:
    operators = progress.get("stateOperators", [])
    state = [operator_state(op, rocksdb_counts) for op in operators]
    return {
        "run_id": run_id,
        "query": query,
        "query_id": progress["id"],
        "batch_id": progress["batchId"],
        "started_at": _time(progress["timestamp"]),
        "num_input_rows": progress.get("numInputRows", 0),
        "processed_rows_per_second": float(progress.get("processedRowsPerSecond") or 0.0),
        "duration_ms": progress.get("durationMs", {}).get("triggerExecution", 0),
        "watermark": _time(progress.get("eventTime", {}).get("watermark")),
        "state_rows": total(state, "rows"),
        "state_memory_bytes": sum(op.get("memoryUsedBytes", 0) for op in operators),
        "rows_dropped_by_watermark": sum(
            op.get("numRowsDroppedByWatermark", 0) for op in operators
        ),
        "progress_json": json.dumps(progress),
    }


def record_progress(
    spark: SparkSession,
    settings: Settings,
    run_id: str,
    stages: Iterable[tuple[str, list[dict[str, Any]]]],
) -> None:
    """Every micro-batch of the run's queries, (query, progress) per stage, in one commit."""
    stages = [(query, progress) for query, progress in stages if progress]
    if not stages:
        return  # no query ran: nothing to record, and no Spark needed
    counts = rocksdb_counts_rows(spark)
    rows = [progress_row(run_id, query, p, counts) for query, progress in stages for p in progress]
    append_rows(spark, event_log_path(settings), rows, PROGRESS_SCHEMA)


@dataclass(frozen=True)
class OperatorState:
    query: str
    operator_id: int
    operator: str
    state_rows: int
    last_batch: int

    def summary(self) -> str:
        return (
            f"{self.query:<30} operator {self.operator_id} {self.operator:<34} "
            f"{self.state_rows:>9,} rows  (batch {self.last_batch})"
        )


def describe_state(spark: SparkSession, settings: Settings) -> list[OperatorState]:
    """Open state of every stateful query, read from its checkpoint."""
    # The state reader talks to the StateStoreCoordinator, which Spark starts
    # with the streaming query manager: make sure it exists in this session.
    spark.streams.active  # noqa: B018
    found = []
    checkpoints: list[Root] = list(settings.checkpoints.glob("*/*"))
    for checkpoint in sorted(checkpoints, key=str):
        if not (checkpoint / "state").is_dir():
            continue
        operators = (
            spark.read.format("state-metadata")
            .load(str(checkpoint))
            .select("operatorId", "operatorName", "maxBatchId")
            .distinct()
            .collect()
        )
        for operator_id, name, last_batch in sorted(operators):
            reader = spark.read.format("statestore").option("operatorId", operator_id)
            if "join" in name.lower():
                rows = sum(
                    reader.option("joinSide", side).load(str(checkpoint)).count()
                    for side in ("left", "right")
                )
            else:
                rows = reader.load(str(checkpoint)).count()
            query = f"{checkpoint.parent.name}/{checkpoint.name}"
            found.append(OperatorState(query, operator_id, name, rows, last_batch))
    return found
