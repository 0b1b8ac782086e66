"""The derived checks: frames built from a run or from the tables, checked like a table.

- `bronze/reconciliation`: per source, the lines bronze read (the ingest ledger)
  against its bronze and quarantine rows;
- `<layer>/late_drops`: per stateful query that ran, the share of its input it
  dropped as late.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from lakehouse.catalog import LATE_DROPS_COLUMNS, RECONCILIATION_COLUMNS, SOURCES
from lakehouse.catalog.schemas import struct
from lakehouse.quality.ledger import ledger_path
from lakehouse.quality.results import TableCheck, reconciliation_last_passed
from lakehouse.quality.runner import QualityGate
from lakehouse.quality.suite import Suite
from lakehouse.runtime.progress import StageResult
from lakehouse.runtime.settings import Settings
from lakehouse.storage.delta import Snapshot, is_delta_table
from lakehouse.storage.delta.log import query

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


RECONCILIATION = "bronze/reconciliation"


# Per layer with stateful queries: the share of each query's input it dropped as late.
LATE_DROPS = {layer: f"{layer}/late_drops" for layer in ("silver", "gold")}


# Checks of a frame derived from the run or the tables, not of a table.
DERIVED_CHECKS = frozenset({RECONCILIATION, *LATE_DROPS.values()})


RECONCILIATION_SCHEMA = struct(RECONCILIATION_COLUMNS)


LATE_DROPS_SCHEMA = struct(LATE_DROPS_COLUMNS)


def _idle(stages: Iterable[StageResult]) -> bool:
    """The layer's queries ran in this command and none read anything."""
    found = list(stages)
    return bool(found) and all(s.caught_up for s in found)


def _ran_stateful(stages: Iterable[StageResult]) -> list[StageResult]:
    return [s for s in stages if s.state_operators and not s.caught_up]


def late_drops_frame(spark: SparkSession, stages: Iterable[StageResult]) -> DataFrame:
    """Per stateful query that ran: its input rows, and those it dropped as late."""
    rows = [
        (s.stage, s.rows_in, s.dropped_late, s.dropped_late / s.rows_in if s.rows_in else 0.0)
        for s in _ran_stateful(stages)
    ]
    return spark.createDataFrame(rows, LATE_DROPS_SCHEMA)


def reconciliation_frame(spark: SparkSession, settings: Settings) -> DataFrame:
    """Per source: lines read by bronze (the ledger) against bronze and quarantine rows."""
    lines_read: dict[str, int] = {}
    if is_delta_table(ledger_path(settings)):
        # Bookkeeping, like the last passing versions: read with delta-rs.
        sums = query(
            ledger_path(settings),
            "SELECT source, sum(lines_read) AS lines_read FROM ledger GROUP BY source",
            name="ledger",
        )
        lines_read = {row["source"]: int(row["lines_read"]) for row in sums.to_pylist()}

    def count(layer: str, source: str) -> int:
        """Rows in the table: from the log's file statistics (Spark counts if a file has none)."""
        snapshot = Snapshot.latest(settings.table(layer, source))
        if snapshot is None:
            return 0
        known = snapshot.files.rows
        return snapshot.files.frame(spark).count() if known is None else known

    rows = []
    for source in SOURCES:
        read = lines_read.get(source, 0)
        quarantined = count("quarantine", source)
        rows.append(
            (
                source,
                read,
                count("bronze", source),
                quarantined,
                quarantined / read if read else 0.0,
            )
        )
    return spark.createDataFrame(rows, RECONCILIATION_SCHEMA)


def check_derived(
    spark: SparkSession,
    settings: Settings,
    gate: QualityGate,
    suite: Suite,
    stages: Iterable[StageResult],
    parameters: dict[str, Any],
) -> TableCheck:
    """Check the derived frame `suite` names; nothing (no Spark job) when nothing could
    have changed it: no stateful query ran, or no bronze query read anything since the
    reconciliation last passed."""
    started = time.perf_counter()
    if suite.table != RECONCILIATION and not _ran_stateful(stages):
        # No stateful query ran (caught up, or `validate`): no drops to check, no Spark job.
        return TableCheck(suite.table, None, None)
    if suite.table == RECONCILIATION and _idle(stages) and reconciliation_last_passed(settings):
        # No bronze query read anything: the ledger and the tables are as they were
        # when the reconciliation last passed.
        return TableCheck(suite.table, None, None)
    frame = (
        reconciliation_frame(spark, settings)
        if suite.table == RECONCILIATION
        else late_drops_frame(spark, stages)
    ).cache()
    check = TableCheck(suite.table, None, None)
    try:
        check.facts = [row.asDict() for row in frame.collect()]
        check.outcomes = gate.validate(suite, "table", frame, parameters, rows=len(check.facts))
    finally:
        frame.unpersist()
    check.seconds = time.perf_counter() - started
    return check
