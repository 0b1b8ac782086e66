"""Late data: which event dates hold rows the streams dropped, and which a backfill owes.

A streaming query drops an input row whose event time is at or below its
watermark (docs/contract.md, section 8: such rows reach the tables by the next
night's `lakehouse backfill --pending`). Spark counts the rows it drops
(`numRowsDroppedByWatermark`) but does not say which they were. So after a
run of a silver or gold stream, `record_late_dates` looks at the rows read
since the stream's last successful run (the files its source tables gained
since the versions its checkpoint's sidecar records) and records in
`_meta/late_dates` the event dates of those at or below the highest watermark
its micro-batches since then ran with (read from the checkpoint's offsets
files). That may name a date whose rows a batch with a lower watermark still
used (never one with a dropped row missing): recomputing a date is always
correct, only a little more work.

The record does not depend on the run that made the batches: the sidecar
moves on only after it, so a run killed anywhere between its first
micro-batch and the sidecar leaves those batches to the next run, which
records their dates even though it reads nothing new itself. A run whose own
progress covers every batch since the sidecar and that counted no drop
records nothing and costs no query.

Every backfill appends the dates it recomputed to `_meta/backfills`. A date
is pending while a late row was recorded for it after its last backfill of
both layers. (Read with Spark: a process that read them with delta-rs and
pyarrow and exited at once was seen to abort in CI, `terminate called
without an active exception`, after printing its answer.)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.catalog import DERIVED_LAYERS, EVENT_TIME
from lakehouse.catalog.schemas import meta_schema
from lakehouse.runtime.progress import StageResult
from lakehouse.runtime.settings import Settings
from lakehouse.storage.checkpoints import (
    BACKFILL_WATERMARK,
    BACKFILLED_VERSIONS,
    COMPLETED_BATCH,
    batches_with_input,
    read_sidecar,
)
from lakehouse.storage.delta import (
    append_rows,
    ensure_table,
    is_delta_table,
    read_added_since,
    read_table,
)
from lakehouse.storage.objects import Root

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LATE_DATES_SCHEMA = meta_schema("late_dates")
BACKFILLS_SCHEMA = meta_schema("backfills")


def late_dates_path(settings: Settings) -> Root:
    return settings.meta("late_dates")


def backfills_path(settings: Settings) -> Root:
    return settings.meta("backfills")


def record_late_dates(
    spark: SparkSession,
    settings: Settings,
    result: StageResult,
    checkpoint: Root,
    sources: Sequence[Root],
) -> list[dt.date]:
    """After a run of a stream: the dates of the rows read since its last successful
    run at or below the watermark, appended to `_meta/late_dates`, when the
    stream may have dropped some.

    The first run of a stream `lakehouse recover` (or `migrate`) restarted over
    the table its backfill rebuilt reads its inputs whole and writes only keys
    the backfill did not: rows its inputs gained since that backfill, at or
    below the watermark the backfill applied, are late to it, as they would
    have been to the stream it replaced."""
    sidecar = read_sidecar(checkpoint)
    batches = batches_with_input(checkpoint, result.stage, sidecar.get(COMPLETED_BATCH))
    unseen = batches.keys() - {p["batchId"] for p in result.progress}
    dropped = result.dropped_late or unseen
    rebuilt_ms = sidecar.get(BACKFILL_WATERMARK) or 0
    watermark_ms = max(max(batches.values(), default=0) if dropped else 0, rebuilt_ms)
    if watermark_ms <= 0:
        return []
    watermark = dt.datetime.fromtimestamp(watermark_ms / 1000, dt.UTC)
    read_before = sidecar.get("read_versions") or sidecar.get(BACKFILLED_VERSIONS, {})
    counts: dict[dt.date, int] = {}
    for source in sources:
        since = read_before.get(str(source.resolve()))
        rows = (
            read_added_since(spark, source, since)
            .where(F.col(EVENT_TIME) <= F.lit(watermark))
            .groupBy(F.to_date(EVENT_TIME).alias("day"))
            .count()
            .collect()
        )
        for row in rows:
            counts[row["day"]] = counts.get(row["day"], 0) + row["count"]
    if not counts:
        return []
    now = dt.datetime.now(dt.UTC)
    append_rows(
        spark,
        late_dates_path(settings),
        [
            {
                "event_date": day,
                "query": result.stage,
                "rows_below_watermark": rows,
                "watermark": watermark,
                "detected_at": now,
            }
            for day, rows in sorted(counts.items())
        ],
        LATE_DATES_SCHEMA,
    )
    return sorted(counts)


def ensure_late_dates(spark: SparkSession, settings: Settings) -> None:
    """The late dates' table, created before the queries that append to it side by side."""
    ensure_table(spark, late_dates_path(settings), LATE_DATES_SCHEMA)


def record_backfill(
    spark: SparkSession, settings: Settings, dates: Sequence[dt.date], layers: Sequence[str]
) -> None:
    """A backfill recomputed these dates of these layers."""
    if not dates:
        return
    now = dt.datetime.now(dt.UTC)
    rows = [{"event_date": d, "layers": list(layers), "completed_at": now} for d in dates]
    append_rows(spark, backfills_path(settings), rows, BACKFILLS_SCHEMA)


def pending_dates(spark: SparkSession, settings: Settings) -> list[dt.date]:
    """Dates with late rows recorded after their last backfill of every layer."""
    late_path = late_dates_path(settings)
    if not is_delta_table(late_path):
        return []
    detected = (
        read_table(spark, late_path).groupBy("event_date").agg(F.max("detected_at").alias("at"))
    )
    if is_delta_table(backfills_path(settings)):
        covering = F.forall(
            F.array(*[F.lit(layer) for layer in DERIVED_LAYERS]),
            lambda layer: F.array_contains(F.col("layers"), layer),
        )
        backfilled = (
            read_table(spark, backfills_path(settings))
            .where(covering)
            .groupBy("event_date")
            .agg(F.max("completed_at").alias("done"))
        )
        detected = detected.join(backfilled, "event_date", "left").where(
            F.col("done").isNull() | (F.col("at") > F.col("done"))
        )
    return sorted(row["event_date"] for row in detected.select("event_date").collect())
