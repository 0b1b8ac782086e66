"""Batch driver: recompute silver and gold for a date range from bronze.

The same transforms as the streaming queries, run over bronze snapshots, with
the closing rules applied to given watermarks:

- `backfill`: each source's watermark is the largest event time in its whole
  bronze table minus its delay (contract section 5), so a backfill of any
  range closes exactly what a backfill of everything closes. Each table's
  dates in the range are replaced in one atomic, conflict-checked Delta commit
  (`gold/user_status`, a current-state table, is replaced whole).
- The dates follow the copies (`widen`): an event id whose copies fall on
  several dates belongs to the date of its first arrival, and a stream may
  have written a later copy on another date (the first arrived after the
  watermark). A backfill that recomputes one of those dates recomputes them
  all, and the dates of the copies of the ids those hold, until nothing is
  added; afterwards each id is on one date, its first arrival's.
- `parity` (src/lakehouse/drivers/parity.py) uses the watermarks the streaming queries reached.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.catalog import (
    DERIVED_LAYERS,
    EVENT_TIME,
    SOURCES,
    DerivedLayer,
    Table,
    all_tables,
    tables_in,
)
from lakehouse.catalog.dates import DateRange
from lakehouse.drivers.late import pending_dates, record_backfill
from lakehouse.drivers.pipeline import reported
from lakehouse.drivers.tables import refuse_changed_rules, transform_of
from lakehouse.reports.outcome import RunOutcome
from lakehouse.runtime.progress import StageResult, timed
from lakehouse.runtime.runs import new_run_id
from lakehouse.runtime.settings import Settings
from lakehouse.storage.delta import (
    ensure_table,
    is_delta_table,
    read_table,
    replace_dates,
    replace_range,
    replace_table,
)
from lakehouse.transforms.closing import close

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Watermark (epoch ms) of each table's query that closes rows, None if it saw no data.
Watermarks = dict[str, int | None]

# Spark's watermark before a query has seen any data.
NO_WATERMARK = 0


def bronze_watermarks(spark: SparkSession, settings: Settings) -> Watermarks:
    """Per table: its sources' largest bronze event time (ms, as Spark keeps it) minus the delay."""
    source_ms: dict[str, int | None] = {}
    for name, spec in SOURCES.items():
        largest = (
            read_table(spark, settings.table("bronze", name))
            .agg(F.max(F.unix_micros(EVENT_TIME)))
            .first()
        )
        micros = largest[0] if largest else None
        delay_ms = int(spec.watermark.total_seconds() * 1000)
        source_ms[name] = None if micros is None else micros // 1000 - delay_ms
    # A query over several sources follows the slowest (Spark's "min" policy),
    # counting only inputs that have seen data, as Spark's WatermarkTracker does.
    return {
        table.id: min(
            (ms for ms in (source_ms[s] for s in table.watermark_sources) if ms is not None),
            default=None,
        )
        for table in all_tables()
    }


def compute_tables(
    spark: SparkSession, settings: Settings, watermarks: Watermarks
) -> dict[str, DataFrame]:
    """Every silver and gold table (by id) as the streaming queries would have finalised it.

    Each table's transform runs on its inputs as batch DataFrames: bronze
    tables as read, silver and gold ones as computed here before closing
    (what the streaming query reads is what the query before it wrote, and
    the transforms only ever read tables whose rows are final when written).
    """
    computed: dict[str, DataFrame] = {}
    closed: dict[str, DataFrame] = {}
    feeds = {source for table in all_tables() for source in table.inputs}
    for table in all_tables():
        inputs = [
            read_table(spark, settings.table(*source.split("/")))
            if source.startswith("bronze/")
            else computed[source]
            for source in table.inputs
        ]
        watermark_ms = _or_no_watermark(watermarks.get(table.id))
        frame = transform_of(table, watermark_ms)(*inputs)
        if table.id in feeds:
            frame = frame.persist()
        computed[table.id] = frame
        closed[table.id] = frame.transform(close(table.closing, watermark_ms))
    return closed


def _or_no_watermark(watermark_ms: int | None) -> int:
    return NO_WATERMARK if watermark_ms is None else watermark_ms


# A backfill's dates: a range, or the dates of a set (`backfill --pending`).
Dates = DateRange | Sequence[dt.date]


def _covers(dates: Dates, day: dt.date) -> bool:
    if isinstance(dates, DateRange):
        return dates.start <= day <= dates.end
    return day in dates


def in_range(
    frame: DataFrame, dates: Dates, column: str, also: Iterable[dt.date] = ()
) -> DataFrame:
    """The rows of `frame` whose `column` is one of the dates, or one of `also`."""
    extra = sorted(also)
    if isinstance(dates, DateRange):
        chosen = F.col(column).between(F.lit(dates.start), F.lit(dates.end))
        return frame.where(chosen | F.col(column).isin(extra) if extra else chosen)
    return frame.where(F.col(column).isin(sorted({*dates, *extra})))


def copy_dates(spark: SparkSession, settings: Settings) -> list[frozenset[dt.date]]:
    """The sets of UTC event dates that one event id's copies fall on, for the ids of
    the first-arrival sources whose copies lie on more than one date (each distinct
    set once). Per bronze table, two jobs: the ids whose copies' earliest and latest
    dates differ (a hash aggregation by id of the id and date columns: a
    `collect_set` per id fell back to sorting and took over ten minutes on 10M
    events), then every date of those few ids (their ids broadcast)."""
    found: set[frozenset[dt.date]] = set()
    for table in all_tables():
        if not table.first_write_wins:
            continue
        (source,) = table.inputs
        path = settings.table(*source.split("/"))
        if not is_delta_table(path):
            continue
        (key,) = table.keys
        copies = read_table(spark, path).select(key, F.to_date(EVENT_TIME).alias("day"))
        spread = (
            copies.groupBy(key)
            .agg(F.min("day").alias("first"), F.max("day").alias("last"))
            .where(F.col("first") < F.col("last"))
            .select(key)
        )
        days: dict[str, set[dt.date]] = {}
        for row in copies.join(F.broadcast(spread), key).distinct().collect():
            days.setdefault(row[key], set()).add(row["day"])
        found |= {frozenset(group) for group in days.values()}
    return sorted(found, key=sorted)


def widen(dates: Dates, copies: Iterable[frozenset[dt.date]]) -> list[dt.date]:
    """The dates outside `dates` that a backfill of them must recompute too: those
    of the copies (`copy_dates`) of ids with a copy on a date recomputed, until
    nothing is added."""
    groups = list(copies)
    added: set[dt.date] = set()
    grew = True
    while grew:
        grew = False
        for group in groups:
            if any(_covers(dates, d) or d in added for d in group):
                new = {d for d in group if not _covers(dates, d)} - added
                if new:
                    added |= new
                    grew = True
    return sorted(added)


def write_range(
    frames: dict[str, DataFrame],
    settings: Settings,
    dates: Dates,
    layout: Settings | None = None,
    tables: Sequence[Table] | None = None,
    new_schema: bool = False,
    also: Sequence[dt.date] = (),
) -> list[StageResult]:
    """Replace the range, and the dates `also`, in each of `tables` (every table if
    none are given; under `layout`'s data root if given).

    `new_schema`: a table whose columns changed in the catalog is replaced
    whole, with its new schema (`lakehouse migrate` recomputes every date).
    """
    target = layout or settings
    results = []
    for table in all_tables() if tables is None else tables:
        result = StageResult(table.id, batch=True)
        with timed(result):
            rows = _replace(frames[table.id], table, target, dates, new_schema, also)
            result.rows_out = {table.name: rows}
        results.append(result)
    return results


def _columns(frame: DataFrame) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]


def _replace(
    frame: DataFrame,
    table: Table,
    target: Settings,
    dates: Dates,
    new_schema: bool,
    also: Sequence[dt.date],
) -> int:
    path = target.table(table.layer, table.name)
    column = table.date_column
    ensure_table(frame.sparkSession, path, frame.schema, list(table.partition_by))
    if new_schema and _columns(read_table(frame.sparkSession, path)) != _columns(frame):
        return replace_table(frame, path, overwrite_schema=True)
    if column is None:
        return replace_table(frame, path)
    rows = in_range(frame, dates, column, also)
    if isinstance(dates, DateRange):
        return replace_range(rows, path, column, dates.start, dates.end, also)
    return replace_dates(rows, path, column, [*dates, *also])


def backfill(
    spark: SparkSession,
    settings: Settings,
    dates: DateRange | None,
    layers: Sequence[DerivedLayer] = DERIVED_LAYERS,
    echo: Callable[[str], None] = print,
) -> RunOutcome:
    """`lakehouse backfill`: recompute the layers for a range, or (`dates` None) for the
    dates holding rows the streams dropped as late since their last backfill, saying
    which; then the dates holding other copies of their ids (`run_backfill`). Reported
    as a run of its own (its report page)."""
    run = RunOutcome(
        new_run_id("backfill"), "backfill", dt.datetime.now(dt.UTC), layers=tuple(layers)
    )
    with reported(settings, run) as outcome:
        chosen: Dates
        if dates is None:
            chosen = pending_dates(spark, settings)
            named = ", ".join(map(str, chosen))
            outcome.dates = f"pending: {named or 'none'}"
            echo(
                f"backfill --pending: {len(chosen)} date(s): {named}"
                if chosen
                else "backfill --pending: no date holds late rows since its last backfill; "
                "nothing to do"
            )
        else:
            chosen = dates
            outcome.dates = f"{dates.start}..{dates.end}"
        if chosen:
            results, also = run_backfill(spark, settings, chosen, layers)
            if also:
                named = ", ".join(map(str, also))
                outcome.dates += f", and {named}"
                copies = "holding other copies of their event ids"
                echo(f"backfill: also {len(also)} date(s) {copies}: {named}")
            for result in results:
                outcome.stages.append(result)
                echo(result.summary())
    if chosen:
        echo(f"backfill {outcome.dates} finished in {outcome.seconds:.1f} s")
    return outcome


def run_backfill(
    spark: SparkSession,
    settings: Settings,
    dates: Dates,
    layers: Sequence[DerivedLayer] = DERIVED_LAYERS,
    tables: Sequence[Table] | None = None,
    new_schema: bool = False,
) -> tuple[list[StageResult], list[dt.date]]:
    """Recompute the layers' tables (or the given `tables`) for the dates, and for the
    dates the copies of their ids lie on (`widen`): the results, and those added dates.

    Gold comes from bronze, like silver. The dates of whole layers recomputed
    are recorded in `_meta/backfills` (`lakehouse.drivers.late`): for a range, the dates
    in it that bronze holds, and the dates added.
    """
    chosen = list(tables) if tables is not None else [t for t in all_tables() if t.layer in layers]
    # Rows with the catalog's new rules beside a stream's old ones: `migrate` first.
    refuse_changed_rules(settings, {table.layer for table in chosen})
    # `recover` and `migrate` (`new_schema`) recompute every date bronze holds already.
    also = [] if new_schema else widen(dates, copy_dates(spark, settings))
    watermarks = bronze_watermarks(spark, settings)
    frames = compute_tables(spark, settings, watermarks)
    results = write_range(frames, settings, dates, None, chosen, new_schema, also)
    ids = {table.id for table in chosen}
    whole = [layer for layer in DERIVED_LAYERS if {t.id for t in tables_in(layer)} <= ids]
    if whole:
        recorded = bronze_days(spark, settings, dates) if isinstance(dates, DateRange) else dates
        record_backfill(spark, settings, sorted({*recorded, *also}), whole)
    return results, also


def bronze_days(
    spark: SparkSession, settings: Settings, within: DateRange | None = None
) -> list[dt.date]:
    """The UTC event dates bronze holds rows for (within a range, if given), in order."""
    found: set[dt.date] = set()
    for name in SOURCES:
        path = settings.table("bronze", name)
        if not is_delta_table(path):
            continue
        days = read_table(spark, path).select(F.to_date(EVENT_TIME).alias("day"))
        if within is not None:
            days = days.where(F.col("day").between(F.lit(within.start), F.lit(within.end)))
        found |= {row["day"] for row in days.distinct().collect()}
    return sorted(found)
