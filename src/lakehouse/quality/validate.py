"""Data-quality checkpoints between stages: which tables each layer checks, and on which rows.

A run checks each table with its suite (`src/lakehouse/quality/suites/<layer>/<table>.json`,
see src/lakehouse/quality/suite.py) right after the query that wrote it
(`LayerValidation`); `lakehouse validate` checks whole layers
(`LayerValidation.check_all`).

- `new_rows` expectations run on the rows written since the table's last
  passing validation: normally exactly what this run wrote. A table that
  failed is checked again from the same version on the next run, so bad rows
  cannot slip through because a later run did not write them. `lakehouse
  validate` runs them on the whole table.
- `partitions` expectations relate rows to each other (uniqueness of keys)
  and run on every row of the date partitions the new rows went to:
  a run's cost then follows its increment, not the table's history. They are
  exact for keys that fix the row's date (a window, a session, an
  impression's rows); for event ids they cover redeliveries, which carry the
  same event time. `lakehouse validate` runs them on the whole table; a table
  without a date column is always checked whole.
- `table` expectations (reconciliation, freshness, row count) run on the
  whole table.
- SQL rules that name other tables (`silver_clicks`) see, in a run, the
  partitions of those tables from the day before the new rows' first date to
  the day after their last (whole tables under `lakehouse validate`).

How a scope's rows are read: `lakehouse.quality.scopes`. The checks of frames
derived from the run (bronze's reconciliation, late drops):
`lakehouse.quality.derived`. Every outcome is appended to the Delta table
`lakehouse/_meta/dq_results`, which is also where the last passing version of each
table is read from: `lakehouse.quality.results`.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from lakehouse.catalog import LAYERS, Layer, bronze_tables, sql_parameters, tables_in
from lakehouse.quality.derived import DERIVED_CHECKS, LATE_DROPS, RECONCILIATION, check_derived
from lakehouse.quality.results import LayerCheck, TableCheck, record_results
from lakehouse.quality.runner import Outcome, QualityGate
from lakehouse.quality.scopes import (
    CACHE_MAX_ROWS,
    ArrowRows,
    date_column,
    distinct_values,
    register_views,
    rows_to_check,
    statistics_frame,
)
from lakehouse.quality.suite import Suite, load_suites
from lakehouse.runtime.progress import StageResult
from lakehouse.runtime.settings import Settings
from lakehouse.storage.delta import Snapshot

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# What each layer's checkpoint checks: its tables, then the derived checks.
LAYER_CHECKS: dict[str, tuple[str, ...]] = {
    layer: (*bronze_tables(), RECONCILIATION)
    if layer == "bronze"
    else (*(t.id for t in tables_in(layer)), LATE_DROPS[layer])
    for layer in LAYERS
}


# Freshness expectations compare the newest ingestion time with this.
FRESHNESS = dt.timedelta(hours=24)


def suite_parameters(settings: Settings) -> dict[str, str]:
    """What fills the suites' `${name}` placeholders: the catalog's rules and the settings'."""
    tolerance = int(settings.future_tolerance.total_seconds())
    share = settings.late_share_warning
    return sql_parameters() | {
        "future_tolerance": f"INTERVAL {tolerance} SECONDS",
        "late_share_warning": repr(share),
        "late_share_percent": f"{share * 100:g}%",
    }


def _missing_table(table: str) -> Outcome:
    return Outcome(
        table=table,
        scope="table",
        expectation="table_exists",
        description="the Delta table exists (run the pipeline first)",
        blocking=True,
        success=False,
        rows_checked=0,
        unexpected_count=None,
        observed="no Delta table",
    )


def check_table(
    spark: SparkSession,
    settings: Settings,
    gate: QualityGate,
    suite: Suite,
    since: int | None,
    whole_table: bool,
    stages: Iterable[StageResult] = (),
) -> TableCheck:
    """`stages`: the queries of the layer that ran (for its late_drops check)."""
    # Spark hands GX naive UTC datetimes; the parameter must be naive UTC too.
    fresh_after = dt.datetime.now(dt.UTC).replace(tzinfo=None) - FRESHNESS
    parameters = {"fresh_after": fresh_after}
    started = time.perf_counter()
    if suite.table in DERIVED_CHECKS:
        return check_derived(spark, settings, gate, suite, stages, parameters)

    snapshot = Snapshot.latest(settings.table(suite.layer, suite.name))
    if snapshot is None:
        return TableCheck(suite.table, None, None, [_missing_table(suite.table)])
    version = snapshot.version
    if whole_table or (since is not None and since > version):
        since = None  # a rebuilt table: check all of it
    check = TableCheck(suite.table, version, since, rows_written=snapshot.rows_written_since(since))
    if since == version:
        # Unchanged since it passed: row rules have no new rows, and whole-table
        # rules would give the same answer, except those that depend on the time
        # (freshness), answered from the log's statistics when they can be. With
        # none, nothing to check and no Spark job (an empty run's silver and gold).
        timed = suite.scoped("table", time_dependent_only=True)
        if timed:
            checked: Any = statistics_frame(snapshot.files, timed)
            if checked is None:
                register_views(spark, settings, suite)
                checked = rows_to_check(spark, settings, snapshot.files)
            check.outcomes = gate.validate(
                suite, "table", checked, parameters, time_dependent_only=True,
                rows=snapshot.files.rows,
            )  # fmt: skip
        check.seconds = time.perf_counter() - started
        return check
    # The files the new rows are in, from the log: the rows to read, their count and,
    # in the tables partitioned by their date column, their dates.
    added = snapshot.gained_since(since)
    whole = rows_to_check(spark, settings, snapshot.files)
    new_rows = whole if added is snapshot.files else rows_to_check(spark, settings, added)
    # Row rules read the new rows several times (a few column rules, each SQL
    # rule): cached when they fit in Spark's storage memory, else read from
    # Parquet by each rule, a column set at a time (docs/data-quality.md#cost).
    cached = None
    fits = added.rows is not None and added.rows <= CACHE_MAX_ROWS
    if fits and not isinstance(new_rows, ArrowRows):
        new_rows = cached = new_rows.cache()
    try:
        touched, dates = snapshot.files, None
        column = date_column(suite.table)
        if since is not None and column is not None:
            found = added.partition_values(column)
            if found is None:  # a table of an old version, not partitioned
                found = distinct_values(new_rows, column)
            dates = sorted(day for day in found if day is not None)  # null: a row rule fails
            touched = snapshot.on_dates(column, dates)
        register_views(spark, settings, suite, dates, version)
        check.outcomes = gate.validate(suite, "new_rows", new_rows, parameters, rows=added.rows)
        partitions = whole if touched is snapshot.files else rows_to_check(spark, settings, touched)
        check.outcomes += gate.validate(
            suite, "partitions", partitions, parameters, rows=touched.rows
        )
        check.outcomes += gate.validate(suite, "table", whole, parameters, rows=snapshot.files.rows)
    finally:
        if cached is not None:
            cached.unpersist()
    check.seconds = time.perf_counter() - started
    return check


def tables_written_by(query: str) -> tuple[str, ...]:
    """The tables a stage's query writes: a bronze query also writes its quarantine.

    `bronze/<source>[kafka]`, the query of the source's topic, writes the same two.
    """
    layer, name = query.split("[")[0].split("/")
    query = f"{layer}/{name}"
    return (query, f"quarantine/{name}") if layer == "bronze" else (query,)


class LayerValidation:
    """The checkpoint of one layer, run table by table as the layer's queries finish.

    Checking a table right after its query, before the next query reads it,
    keeps bad rows from spreading even within a layer.
    """

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        gate: QualityGate,
        layer: Layer,
        run_id: str,
        baselines: dict[str, int],
        whole_table: bool = False,
        stages: Sequence[StageResult] = (),
    ) -> None:
        """`baselines`: `last_passed_versions`, read once per command (a layer's
        validation records only its own tables, so it holds for every layer).
        `stages`: the run's queries so far (a list the run appends to)."""
        self.spark, self.settings, self.gate = spark, settings, gate
        self.run_id, self.whole_table = run_id, whole_table
        self.stages = stages
        self.result = LayerCheck(layer)
        self._suites = load_suites(parameters=suite_parameters(settings))
        self._baselines = {} if whole_table else baselines

    @property
    def unchecked(self) -> list[str]:
        done = {t.table for t in self.result.tables}
        return [table for table in LAYER_CHECKS[self.result.layer] if table not in done]

    def check(self, tables: Iterable[str]) -> LayerCheck:
        started = time.perf_counter()
        for table in tables:
            suite = self._suites[table]
            self.result.tables.append(
                check_table(
                    self.spark,
                    self.settings,
                    self.gate,
                    suite,
                    self._baselines.get(table),
                    self.whole_table,
                    [s for s in self.stages if s.stage.split("/")[0] == self.result.layer],
                )
            )
        self.result.seconds += time.perf_counter() - started
        return self.result

    def check_all(self) -> LayerCheck:
        """Check every table of the layer, record it, render Data Docs (`lakehouse
        validate`)."""
        self.check(LAYER_CHECKS[self.result.layer])
        return self.finish()

    def finish(self, build_docs: bool = True) -> LayerCheck:
        """Record every outcome of the layer; render Data Docs unless the caller does
        it once for several layers (`QualityGate.build_docs`)."""
        started = time.perf_counter()
        order = LAYER_CHECKS[self.result.layer]
        self.result.tables.sort(key=lambda t: order.index(t.table))  # whatever order they ran
        if build_docs:
            self.gate.build_docs()
        record_results(self.spark, self.settings, self.run_id, self.result)
        self.result.seconds += time.perf_counter() - started
        return self.result
