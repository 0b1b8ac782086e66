"""One incremental run: every query, each followed by the checks of the tables it wrote.

bronze/<source> -> check bronze/<source> and quarantine/<source> -> ... ->
check bronze/reconciliation -> silver/impressions -> check it -> ... -> gold.
A layer's queries run side by side, each once the tables of its layer it
reads have been written and checked (`run_queries`). A blocking failure
blocks the run: no query that reads the failed table, directly or not, runs,
nor any later layer (their streams keep their checkpoints, so a later run
picks up exactly where this one stopped); the layer's other queries run.
Warnings are reported and the run goes on. Whatever happens, the run summary
page is written to `reports/runs/<run_id>.html`.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from graphlib import TopologicalSorter
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.catalog import LAYERS, SOURCES, Layer, tables_in
from lakehouse.catalog.schemas import table_schema
from lakehouse.drivers.bronze import bronze_queries
from lakehouse.drivers.late import ensure_late_dates
from lakehouse.drivers.tables import refuse_changed_rules, run_table
from lakehouse.errors import explain
from lakehouse.quality.results import last_passed_versions
from lakehouse.quality.runner import QualityGate
from lakehouse.quality.scopes import fits_an_arrow_copy
from lakehouse.quality.validate import LayerValidation, tables_written_by
from lakehouse.reports.outcome import RunOutcome
from lakehouse.reports.pages import write_run_report
from lakehouse.runtime.monitoring import record_progress
from lakehouse.runtime.progress import StageResult
from lakehouse.runtime.runs import new_run_id
from lakehouse.runtime.settings import Settings
from lakehouse.runtime.spark import label_jobs
from lakehouse.storage.delta import Snapshot
from lakehouse.transforms.landing import reason_class, reason_class_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# A unit of work of a layer: one query, or (bronze) a source's queries one after the other.
Query = Callable[[], list[StageResult]]


@dataclass(frozen=True)
class LayerQuery:
    """A unit of a layer's work, named by the table it writes, and the tables of its
    own layer it reads (its inputs of earlier layers were written and checked before)."""

    name: str
    run: Query
    reads: frozenset[str] = frozenset()


def layer_queries(spark: SparkSession, settings: Settings, layer: Layer) -> list[LayerQuery]:
    """The layer's queries in catalog order: bronze's sources (which read nothing of
    each other), or its tables, each with the tables of the layer it reads."""
    if layer == "bronze":
        queries = bronze_queries(spark, settings)
        return [LayerQuery(f"bronze/{s}", q) for s, q in zip(SOURCES, queries, strict=True)]
    ensure_late_dates(spark, settings)  # any stateful query of the layer may append to it
    tables = tables_in(layer)
    ids = {t.id for t in tables}
    return [
        LayerQuery(t.id, partial(run_table, spark, settings, t), frozenset(ids & set(t.inputs)))
        for t in tables
    ]


def run_queries(
    queries: Sequence[LayerQuery],
    threads: int = 1,
    ended: Callable[[list[StageResult]], bool] = lambda results: True,
) -> tuple[list[StageResult], BaseException | None]:
    """Run each query once the queries whose tables it reads have ended and passed, on
    up to `threads` threads at a time: never a query at the same time as one it reads.

    Spark runs the jobs of several queries side by side: while one query plans,
    commits or waits for Python, another's tasks can use the cores. Each
    streaming query runs on its own clone of the session (Spark's), so settings
    a foreachBatch function sets (a MERGE's app transaction) stay its own.
    `ended` runs on this thread as each query ends, with its results (a run
    checks the query's tables there, before anything reads them); False: they
    failed a blocking check, and no query that reads them, directly or not,
    runs. After an error no query starts; those running end. Returns the
    results of the queries that ended, in the queries' order, and the error of
    the first query in that order that failed.
    """
    threads = max(threads, 1)
    named = {q.name: q for q in queries}
    order = list(named)
    # A query becomes ready once every query it reads is done, that is ended and passed.
    graph = TopologicalSorter({q.name: q.reads for q in queries})
    graph.prepare()
    ready: list[str] = []
    results: dict[str, list[StageResult]] = {}
    errors: dict[str, BaseException] = {}
    with ThreadPoolExecutor(threads, thread_name_prefix="query") as pool:
        running: dict[Future[list[StageResult]], LayerQuery] = {}
        while True:
            ready = [] if errors else sorted([*ready, *graph.get_ready()], key=order.index)
            while ready and len(running) < threads:
                query = named[ready.pop(0)]
                running[pool.submit(query.run)] = query
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: order.index(running[f].name)):
                query = running.pop(future)
                failure = future.exception()
                if failure is not None:
                    errors[query.name] = failure
                    continue
                results[query.name] = future.result()
                if ended(results[query.name]):
                    graph.done(query.name)
    # The error of the first query in order (not the first to end): the same error each time.
    error = next((errors[q.name] for q in queries if q.name in errors), None)
    return [r for q in queries for r in results.get(q.name, [])], error


def run_layer(spark: SparkSession, settings: Settings, layer: Layer) -> Iterator[StageResult]:
    """The queries of one layer, without checks."""
    results, error = run_queries(layer_queries(spark, settings, layer), settings.query_threads)
    yield from results
    if error is not None:
        raise error


def quarantine_by_reason(
    spark: SparkSession, settings: Settings, since: dict[str, int | None]
) -> dict[str, dict[str, int]]:
    """Quarantined lines per source and reason class, added since the given versions.

    A few new rows (up to `Settings.check_arrow_max_rows`, counted from the log)
    are read from their data files with pyarrow, their reasons alone; more, with Spark.
    """
    counts: dict[str, dict[str, int]] = {}
    for source in SOURCES:
        snapshot = Snapshot.latest(settings.table("quarantine", source))
        if snapshot is None:
            continue
        before = since.get(source)
        if source in since and before == snapshot.version:
            counts[source] = {}  # no new version: nothing quarantined, no Spark job needed
            continue
        added = snapshot.gained_since(before)
        if fits_an_arrow_copy(settings, added.rows):
            reasons = added.arrow(["reason"]).column("reason").to_pylist()
            by_class = Counter(reason_class_of(reason) for reason in reasons)
        else:
            by_class = Counter({
                row["reason"]: row["count"]
                for row in added.frame(spark)
                .groupBy(reason_class(F.col("reason")).alias("reason"))
                .count()
                .collect()
            })  # fmt: skip
        counts[source] = dict(sorted(by_class.items()))
    return counts


# The column whose largest value is a gold table's newest event, in order of preference.
EVENT_END_COLUMNS = ("window_end", "last_event_time")


def newest_events(settings: Settings) -> dict[str, str | None]:
    """Per gold table, the newest event time it holds (ISO, UTC), from its log's
    statistics: its windows' end, the last event time, or the day after its last date."""
    newest: dict[str, str | None] = {}
    for table in tables_in("gold"):
        snapshot = Snapshot.latest(settings.table(table.layer, table.name))
        if snapshot is None:
            continue
        names = table_schema(table.id).names
        column = next((c for c in EVENT_END_COLUMNS if c in names), table.date_column)
        value = snapshot.files.largest(column) if column else None
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            value = dt.datetime.combine(value + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
        newest[table.id] = value.isoformat() if value is not None else None
    return newest


@contextmanager
def reported(
    settings: Settings, outcome: RunOutcome, spark: SparkSession | None = None
) -> Iterator[RunOutcome]:
    """Time the run, note its error if it fails, and write its report whatever happens;
    with `spark`, its stages' progress to the event log too (one commit)."""
    started = time.perf_counter()
    try:
        yield outcome
    except Exception as error:
        outcome.error = explain(error)
        raise
    finally:
        try:
            if spark is not None:
                stages = [(s.stage, s.progress) for s in outcome.stages]
                record_progress(spark, settings, outcome.run_id, stages)
        finally:
            outcome.seconds = time.perf_counter() - started
            outcome.report = write_run_report(settings, outcome)


def _record_and_check(
    spark: SparkSession,
    outcome: RunOutcome,
    validation: LayerValidation,
    echo: Callable[[str], None],
) -> Callable[[list[StageResult]], bool]:
    """What a run does as each query of a layer ends: record and print its results,
    then check the tables it wrote. False if they failed a blocking check."""

    def ended(results: list[StageResult]) -> bool:
        for result in results:
            outcome.stages.append(result)
            echo(result.summary())
            for notice in result.notices:
                echo(f"  {notice}")
        label_jobs(spark, f"checks {validation.result.layer}")
        written = dict.fromkeys(t for r in results for t in tables_written_by(r.stage))
        check = validation.check(written)
        return not any(failure.table in written for failure in check.failures)

    return ended


def run_pipeline(
    spark: SparkSession,
    settings: Settings,
    run_id: str,
    echo: Callable[[str], None] = print,
    layers: Sequence[Layer] = LAYERS,
) -> RunOutcome:
    """Run every query of the given layers, each followed by its tables' checks.

    A blocking failure stops what reads the failed table and every later layer.
    Airflow runs one layer per task; `lakehouse run` runs them all.
    """
    unknown = set(layers) - set(LAYERS)
    if unknown:
        raise ValueError(f"unknown layers: {', '.join(sorted(unknown))}")
    gate = QualityGate(settings.reports / "data_docs")
    quarantine_before: dict[str, int | None] = {}
    for source in SOURCES:
        snapshot = Snapshot.latest(settings.table("quarantine", source))
        quarantine_before[source] = None if snapshot is None else snapshot.version
    run = RunOutcome(run_id, "run", dt.datetime.now(dt.UTC), layers=tuple(layers))
    with reported(settings, run, spark) as outcome:
        refuse_changed_rules(settings, layers)
        baselines = last_passed_versions(settings)
        try:
            for layer in (layer for layer in LAYERS if layer in layers):
                layer_started = time.perf_counter()
                validation = LayerValidation(
                    spark, settings, gate, layer, run_id, baselines, stages=outcome.stages
                )
                outcome.checks.append(validation.result)
                first = len(outcome.stages)
                queries = layer_queries(spark, settings, layer)
                ended = _record_and_check(spark, outcome, validation, echo)
                results, error = run_queries(queries, settings.query_threads, ended)
                outcome.stages[first:] = results  # in catalog order, not the order they ended
                if error is not None:
                    raise error
                if not validation.result.failures:
                    validation.check(validation.unchecked)  # checks of the whole layer
                if layer == "bronze":
                    outcome.quarantine = quarantine_by_reason(spark, settings, quarantine_before)
                if layer == "gold":
                    outcome.newest_events = newest_events(settings)
                for line in validation.finish(build_docs=False).lines():
                    echo(line)
                outcome.layer_seconds[layer] = time.perf_counter() - layer_started
                if validation.result.failures:
                    outcome.blocked_at = layer
                    break
        finally:
            gate.build_docs()  # once, for every layer checked
    return outcome


def validate_tables(
    spark: SparkSession,
    settings: Settings,
    layers: Sequence[Layer],
    echo: Callable[[str], None] = print,
    whole_table: bool = True,
) -> RunOutcome:
    """`lakehouse validate`: every expectation of the layers, on the whole current tables.

    With `whole_table=False`, only rows written since each table last passed
    (the Airflow validate tasks): the same semantics as the checks in `run`.
    """
    gate = QualityGate(settings.reports / "data_docs")
    run = RunOutcome(new_run_id("validate"), "validate", dt.datetime.now(dt.UTC))
    with reported(settings, run) as outcome:
        if "bronze" in layers:
            outcome.quarantine = quarantine_by_reason(spark, settings, {})
        baselines = {} if whole_table else last_passed_versions(settings)
        for layer in layers:
            validation = LayerValidation(
                spark, settings, gate, layer, outcome.run_id, baselines, whole_table
            )
            check = validation.check_all()
            outcome.checks.append(check)
            for line in check.lines():
                echo(line)
    return outcome
