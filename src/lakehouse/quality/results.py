"""The results table, `lakehouse/_meta/dq_results`: every outcome of every check, and
what it says since (the last version of each table a validation passed, whether the
last bronze reconciliation passed), read with delta-rs: every run asks before
anything else, and a Spark session's first Delta query costs seconds.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse.catalog import Layer
from lakehouse.catalog.schemas import meta_schema
from lakehouse.quality.runner import Outcome
from lakehouse.runtime.settings import Settings
from lakehouse.storage.delta import append_rows, is_delta_table
from lakehouse.storage.delta.log import query
from lakehouse.storage.objects import Root

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


RESULTS_SCHEMA = meta_schema("dq_results")


@dataclass
class TableCheck:
    """One table's validation: its version and every expectation's outcome."""

    table: str
    version: int | None
    since_version: int | None
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    # The rows a derived check validated (reconciliation: one per source), for the report.
    facts: list[dict[str, Any]] = field(default_factory=list)
    # Rows written since `since_version` (all the table's rows without one); None when
    # nothing changed its data: what the table's Airflow Asset event says.
    rows_written: int | None = None

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.blocking and not o.success]

    @property
    def warnings(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.blocking and not o.success]


@dataclass
class LayerCheck:
    layer: Layer
    tables: list[TableCheck] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[Outcome]:
        return [o for t in self.tables for o in t.failures]

    @property
    def warnings(self) -> list[Outcome]:
        return [o for t in self.tables for o in t.warnings]

    @property
    def expectations(self) -> int:
        return sum(len(t.outcomes) for t in self.tables)

    def summary(self) -> str:
        passed = self.expectations - len(self.failures) - len(self.warnings)
        return (
            f"{passed}/{self.expectations} passed, {len(self.failures)} blocking failed, "
            f"{len(self.warnings)} warning(s) ({self.seconds:.1f} s)"
        )

    def lines(self) -> list[str]:
        """What the command prints: the summary, then every failure and warning."""
        return [f"{'checks ' + self.layer:<30} {self.summary()}"] + [
            f"  {'BLOCKING' if o.blocking else 'warning '} {o.message()}"
            for o in self.failures + self.warnings
        ]


def results_path(settings: Settings) -> Root:
    return settings.meta("dq_results")


def last_passed_versions(settings: Settings) -> dict[str, int]:
    """For each table, the newest version a validation passed (no blocking failure).

    Read with delta-rs (`lakehouse.storage.delta.log.query`): every run asks this before
    anything else, and a Spark session's first Delta query costs seconds.
    """
    path = results_path(settings)
    if not is_delta_table(path):
        return {}
    passed = query(
        path,
        """
        SELECT table_name, max(table_version) AS table_version FROM (
            SELECT table_name, run_id, max(table_version) AS table_version,
                   bool_and(success OR severity <> 'critical') AS passed
            FROM dq_results WHERE table_version IS NOT NULL
            GROUP BY table_name, run_id
        ) WHERE passed GROUP BY table_name
        """,
        name="dq_results",
    ).to_pylist()
    return {row["table_name"]: int(row["table_version"]) for row in passed}


def reconciliation_last_passed(settings: Settings) -> bool:
    """Whether the latest recorded bronze reconciliation met every expectation."""
    path = results_path(settings)
    if not is_delta_table(path):
        return False
    found = query(
        path,
        "SELECT run_id, validated_at, success FROM dq_results "
        "WHERE table_name = 'bronze/reconciliation'",
        name="dq_results",
    ).to_pylist()
    if not found:
        return False
    latest = max(found, key=lambda row: row["validated_at"])["run_id"]
    return all(row["success"] for row in found if row["run_id"] == latest)


def record_results(
    spark: SparkSession, settings: Settings, run_id: str, result: LayerCheck
) -> None:
    now = dt.datetime.now(dt.UTC)
    rows = [
        {
            "run_id": run_id,
            "validated_at": now,
            "layer": result.layer,
            "table_name": check.table,
            "table_version": check.version,
            "scope": outcome.scope,
            "expectation": outcome.expectation,
            "description": outcome.description,
            "severity": "critical" if outcome.blocking else "warning",
            "success": outcome.success,
            "rows_checked": outcome.rows_checked,
            "unexpected_count": outcome.unexpected_count,
            "observed": outcome.observed,
            "sample": json.dumps(list(outcome.sample)),
            "docs_page": (
                outcome.docs_page.relative_to(settings.reports).as_posix()
                if outcome.docs_page
                else None
            ),
        }
        for check in result.tables
        for outcome in check.outcomes
    ]
    if rows:
        append_rows(spark, results_path(settings), rows, RESULTS_SCHEMA)
