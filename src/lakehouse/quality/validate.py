"""Data-quality checkpoints between stages: which tables each layer checks, and on which rows.

A run checks each table with its suite (`src/lakehouse/quality/suites/<layer>/<table>.json`,
see src/lakehouse/quality/gate.py) right after the query that wrote it
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

A scope's rows, when few (`rows_to_check`), are an Arrow copy of their data
files: GX's pandas engine checks the column rules, Spark the SQL rules over
the copy; more are read by Spark from the table (docs/data-quality.md).

Every outcome is appended to the Delta table `lakehouse/_meta/dq_results`,
which is also where the last passing version of each table is read from.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from lakehouse.catalog import (
    LATE_DROPS_COLUMNS,
    LAYERS,
    RECONCILIATION_COLUMNS,
    SOURCES,
    TABLES_BY_ID,
    bronze_tables,
    sql_parameters,
    tables_in,
)
from lakehouse.catalog.schemas import meta_schema, struct
from lakehouse.quality.gate import ArrowRows, Outcome, QualityGate, Suite, load_suites
from lakehouse.quality.ledger import ledger_path
from lakehouse.runtime.progress import StageResult
from lakehouse.runtime.settings import Settings
from lakehouse.storage.delta import (
    append_rows,
    is_delta_table,
    latest_version,
    read_files,
    read_table,
)
from lakehouse.storage.delta.log import (
    add_actions,
    added_file_actions,
    column_max,
    data_files,
    file_names,
    file_rows,
    partition_values,
    query,
    read_arrow,
    rows_written,
)
from lakehouse.storage.objects import Root

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

RECONCILIATION = "bronze/reconciliation"
# Per layer with stateful queries: the share of each query's input it dropped as late.
LATE_DROPS = {layer: f"{layer}/late_drops" for layer in ("silver", "gold")}
# Checks of a frame derived from the run or the tables, not of a table.
DERIVED_CHECKS = frozenset({RECONCILIATION, *LATE_DROPS.values()})
# What each layer's checkpoint checks: its tables, then the derived checks.
LAYER_CHECKS: dict[str, tuple[str, ...]] = {
    layer: (*bronze_tables(), RECONCILIATION)
    if layer == "bronze"
    else (*(t.id for t in tables_in(layer)), LATE_DROPS[layer])
    for layer in LAYERS
}
# `silver_clicks` in a suite's SQL is the table silver/clicks (see register_views).
TABLE_REFERENCE = re.compile(r"\b(bronze|quarantine|silver|gold)_([a-z0-9_]+)\b")
# Freshness expectations compare the newest ingestion time with this.
FRESHNESS = dt.timedelta(hours=24)
# New rows are cached for their checks up to this many. Measured in local
# mode with a 1 GiB driver heap (2 GiB since): a million rows of the widest
# table fit in Spark's storage memory; the 10M first run's 5M-row tables did
# not, and caching them cost more than reading Parquet once per rule
# (docs/benchmarks.md).
CACHE_MAX_ROWS = 1_000_000

RESULTS_SCHEMA = meta_schema("dq_results")
RECONCILIATION_SCHEMA = struct(RECONCILIATION_COLUMNS)
LATE_DROPS_SCHEMA = struct(LATE_DROPS_COLUMNS)


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
    layer: str
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


def suite_parameters(settings: Settings) -> dict[str, str]:
    """What fills the suites' `${name}` placeholders: the catalog's rules and the settings'."""
    tolerance = int(settings.future_tolerance.total_seconds())
    share = settings.late_share_warning
    return sql_parameters() | {
        "future_tolerance": f"INTERVAL {tolerance} SECONDS",
        "late_share_warning": repr(share),
        "late_share_percent": f"{share * 100:g}%",
    }


def date_column(table: str) -> str | None:
    """The column holding a row's date (the partition column), if the table has one."""
    entry = TABLES_BY_ID.get(table)
    return entry.date_column if entry else None


def register_views(
    spark: SparkSession,
    settings: Settings,
    suite: Suite,
    dates: list[dt.date] | None = None,
    version: int | None = None,
) -> None:
    """The tables a suite's SQL rules refer to (`silver_clicks`), as temp views.

    With `dates`, another table partitioned by date is limited to the days
    from the day before the first date to the day after the last; the suite's
    own table stays whole (an id of the new rows on any other date), at the
    `version` its rows are checked at (a writer may commit meanwhile).
    """
    queries = " ".join(
        str(e["kwargs"].get("unexpected_rows_query", "")) for e in suite.expectations
    )
    for layer, name in sorted(set(TABLE_REFERENCE.findall(queries))):
        path = settings.table(layer, name)
        if not is_delta_table(path):
            continue
        own = f"{layer}/{name}" == suite.table
        view = read_table(spark, path, version if own else None)
        column = date_column(f"{layer}/{name}")
        if dates and column is not None and not own:
            day = dt.timedelta(days=1)
            view = view.where(F.col(column).between(min(dates) - day, max(dates) + day))
        view.createOrReplaceTempView(f"{layer}_{name}")


def _idle(stages: Iterable[StageResult]) -> bool:
    """The layer's queries ran in this command and none read anything."""
    found = list(stages)
    return bool(found) and all(s.caught_up for s in found)


# Expectations a frame of the log's statistics answers as the whole table would: the
# largest value of a column is the largest of its files' maximums.
STATISTICS_RULES = frozenset({"expect_column_max_to_be_between"})


def statistics_frame(path: Root, expectations: Sequence[dict[str, Any]]) -> pd.DataFrame | None:
    """One row holding the largest value of each column the expectations check, from
    the Delta log's file statistics, for GX's pandas engine: no Spark job. None when
    an expectation needs the rows, or a column has no statistics (an empty table).

    Delta records timestamps to the millisecond: a maximum can read up to 1 ms
    lower than the row's (a freshness limit is a day).
    """
    if not expectations or any(e["type"] not in STATISTICS_RULES for e in expectations):
        return None
    values = {}
    for expectation in expectations:
        name = expectation["kwargs"]["column"]
        value = column_max(path, name)
        if value is None:
            return None
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)  # as Spark hands GX times
        values[name] = value
    import pandas as pd

    return pd.DataFrame([values])


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
        path = settings.table(layer, source)
        if not is_delta_table(path):
            return 0
        known = rows_total(rows for _, rows in data_files(path).values())
        return read_table(spark, path).count() if known is None else known

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

    path = settings.table(suite.layer, suite.name)
    if not is_delta_table(path):
        return TableCheck(suite.table, None, None, [_missing_table(suite.table)])
    version = latest_version(path)
    if whole_table or (since is not None and since > version):
        since = None  # a rebuilt table: check all of it
    check = TableCheck(suite.table, version, since)
    check.rows_written = None if since == version else rows_written(path, since, version)
    if since == version and not suite.scoped("table", time_dependent_only=True):
        # Unchanged since it passed, and no rule depends on the time: nothing to
        # check, and no Spark job (an empty run's silver and gold need none).
        check.seconds = time.perf_counter() - started
        return check
    # Each scope's row count, for the outcomes, from the log's statistics.
    column = date_column(suite.table)
    actions = add_actions(path, version)
    files = file_rows(actions, column)
    whole_rows = rows_total(rows for _, rows in files.values())
    if since == version:
        # Unchanged since it passed: row rules have no new rows, and whole-table
        # rules would give the same answer, except those that depend on the time.
        # Those (freshness) are answered from the log's statistics when they can be.
        timed = suite.scoped("table", time_dependent_only=True)
        checked: Any = statistics_frame(path, timed)
        if checked is None:
            register_views(spark, settings, suite)
            checked = rows_to_check(
                spark, settings, path, actions, whole_rows, lambda: read_table(spark, path, version)
            )
        check.outcomes = gate.validate(
            suite, "table", checked, parameters, time_dependent_only=True, rows=whole_rows
        )
        check.seconds = time.perf_counter() - started
        return check
    whole = rows_to_check(
        spark, settings, path, actions, whole_rows, lambda: read_table(spark, path, version)
    )
    touched, dates, new_count, touched_count = whole, None, whole_rows, whole_rows
    # The files the new rows are in, from the log: the rows to read, their count and
    # their dates.
    added = None if since is None else added_file_actions(path, since, version)
    new_rows = whole
    if added is not None:
        names = file_names(added)
        new_count = rows_total(rows for name, (_, rows) in files.items() if name in names)
        new_rows = rows_to_check(
            spark, settings, path, added, new_count, lambda: read_files(spark, path, added, version)
        )
    # Row rules read the new rows several times (a few column rules, each SQL
    # rule): cached when they fit in Spark's storage memory, else read from
    # Parquet by each rule, a column set at a time (docs/data-quality.md#cost).
    cached = None
    fits = new_count is not None and new_count <= CACHE_MAX_ROWS
    if fits and not isinstance(new_rows, ArrowRows):
        new_rows = cached = new_rows.cache()
    try:
        if added is not None and column is not None:
            # The tables are partitioned by their date column: the log names the dates.
            found = partition_values(added, column)
            if found is None:  # a table of an old version, not partitioned
                found = _distinct(new_rows, column)
                touched_count = None
            dates = sorted(day for day in found if day is not None)  # null: a row rule fails
            if touched_count is not None:
                touched_count = rows_total(rows for day, rows in files.values() if day in dates)
            in_dates = (
                actions.filter(
                    pc.is_in(actions.column(f"partition.{column}"), pa.array(dates, pa.date32()))
                )
                if touched_count is not None
                else None
            )
            touched = rows_to_check(
                spark,
                settings,
                path,
                in_dates,
                touched_count,
                lambda: read_table(spark, path, version).where(F.col(column).isin(dates)),
            )
        register_views(spark, settings, suite, dates, version)
        check.outcomes = gate.validate(suite, "new_rows", new_rows, parameters, rows=new_count)
        check.outcomes += gate.validate(
            suite, "partitions", touched, parameters, rows=touched_count
        )
        check.outcomes += gate.validate(suite, "table", whole, parameters, rows=whole_rows)
    finally:
        if cached is not None:
            cached.unpersist()
    check.seconds = time.perf_counter() - started
    return check


def rows_to_check(
    spark: SparkSession,
    settings: Settings,
    path: Root,
    actions: Any,
    rows: int | None,
    spark_frame: Callable[[], DataFrame],
) -> DataFrame | ArrowRows:
    """The rows of these data files (add actions) for a scope's checks: an Arrow copy,
    read on first use, when they are few (`Settings.check_arrow_max_rows`);
    otherwise `spark_frame()`, Spark's read of the same rows.

    Spark plans a read of a Delta table against the table's whole state (a
    job per table version it has not seen), and each GX rule is a Spark job:
    seconds per table for the few hundred rows of a small run. In the copy, GX's
    pandas engine checks the column rules in milliseconds, and the SQL rules
    run on Spark over the copy, with nothing to plan or read.
    """
    if actions is None or not fits_an_arrow_copy(settings, rows):
        return spark_frame()
    return ArrowRows(lambda: read_arrow(path, actions), spark)


def fits_an_arrow_copy(settings: Settings, rows: int | None) -> bool:
    """Whether rows this many (None: not known from the log) are few enough to read
    into memory with pyarrow instead of with Spark (`Settings.check_arrow_max_rows`)."""
    return rows is not None and rows <= settings.check_arrow_max_rows


def _distinct(frame: DataFrame | ArrowRows, column: str) -> set[Any]:
    if isinstance(frame, ArrowRows):
        return set(frame.table.column(column).to_pylist())
    return {day for (day,) in frame.select(column).distinct().collect()}


def rows_total(counts: Iterable[int | None]) -> int | None:
    """The sum of files' row counts; None if a file has none recorded."""
    found = list(counts)
    known = [rows for rows in found if rows is not None]
    return sum(known) if len(known) == len(found) else None


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
        layer: str,
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
