"""Tables of closed windows over silver: written in batch as silver's watermark closes them.

`gold/ad_performance_hourly` aggregates `silver/ad_attribution`, and
`gold/campaign_daily` sums its hours per day (contract 4.4, 4.5). A window of
them is final once every attribution row of its impressions is in silver:
when its end is at or before the attribution query's watermark less the
attribution window (the join writes an unmatched impression only then, and
drops clicks older than the watermark). So each run reads the watermark of
the attribution query's last completed micro-batch from its checkpoint, and
writes, in one Delta commit, exactly the windows closed between the
watermark it applied last and this one, computed in batch from its input
table (the dates those windows can hold only: a run's cost follows its
increment). The daily table reads the hourly one and goes no further than
the watermark the hourly table applied: every hour of a closed day is then
written.

Why not a stateful query chained after silver: its watermark would follow
the impression times it reads from silver, not the watermark that closed
them, and a micro-batch of matched clicks can carry impression times hours
past unmatched impressions silver writes in its next batch: those would be
dropped as late. Recomputing the join in gold instead (lakehouse 0.5) cost
as much as silver's own join, twice.

Exactly once: each commit is Delta's idempotent write with the app id
`closed-windows:<table>` and the watermark it applied as the version. The
next run reads that version back from the table's log as the watermark
already applied, so a run repeated after a crash writes nothing twice, and
the window bounds need no other bookkeeping. The table's checkpoint folder
holds only `lakehouse.json` (the catalog fingerprint, and the rebuilt flag
`lakehouse recover` sets: the first run after it inserts only windows the
backfill did not write).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from lakehouse.catalog import Table, micros, table
from lakehouse.catalog.schemas import table_schema
from lakehouse.runtime.progress import StageResult, timed
from lakehouse.runtime.settings import Settings
from lakehouse.storage.checkpoints import (
    REBUILT_BY_BACKFILL,
    read_position,
    read_sidecar,
    write_sidecar,
)
from lakehouse.storage.delta import (
    append,
    ensure_table,
    is_delta_table,
    latest_version,
    merge_upsert,
    read_table,
)
from lakehouse.storage.delta.log import committed_batch, rows_from
from lakehouse.storage.delta.writes import rows_committed
from lakehouse.transforms.closing import close, closed_before

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

APP_PREFIX = "closed-windows"


def app_id(entry: Table) -> str:
    return f"{APP_PREFIX}:{entry.id}"


def completed_watermark(settings: Settings, query: str) -> int | None:
    """The watermark (epoch ms) the query's last completed micro-batch ran with; None
    before its first."""
    checkpoint = settings.checkpoint(*query.split("/"))
    position = read_position(checkpoint, query)
    if position is None or position.completed is None:
        return None
    offsets = checkpoint / "offsets" / str(position.completed)
    metadata = json.loads(offsets.read_text().splitlines()[1])
    return int(metadata.get("batchWatermarkMs", 0))


def applied_watermark(settings: Settings, entry: Table) -> int | None:
    """The watermark whose closed windows the table holds (None: none written yet)."""
    path = settings.table(entry.layer, entry.name)
    return committed_batch(path, app_id(entry)) if is_delta_table(path) else None


def windows_to_close(settings: Settings, entry: Table) -> tuple[int | None, int] | None:
    """(applied watermark, new watermark) when the table has windows to write; else None.

    A table computed from another closed table (`campaign_daily` from
    `ad_performance_hourly`) goes no further than the watermark that one applied.
    """
    assert entry.closed_by is not None
    watermark = completed_watermark(settings, entry.closed_by)
    (source,) = entry.inputs
    if watermark is not None and source != entry.closed_by:
        held = applied_watermark(settings, table(source))
        watermark = None if held is None else min(watermark, held)
    applied = applied_watermark(settings, entry)
    if watermark is None or (applied is not None and watermark <= applied):
        return None
    return applied, watermark


def write_closed_windows(
    spark: SparkSession,
    settings: Settings,
    entry: Table,
    transform: Callable[[DataFrame], DataFrame],
) -> StageResult:
    """Write the table's windows closed since its last run (computed by `transform`, its
    catalog transform, from its input); caught up when there are none."""
    result = StageResult(entry.id)
    checkpoint = settings.checkpoint(entry.layer, entry.name)
    sidecar = read_sidecar(checkpoint)
    due = windows_to_close(settings, entry)
    if due is None:
        result.caught_up = True
        return result
    applied, watermark = due
    path = settings.table(entry.layer, entry.name)
    (source,) = entry.inputs
    with timed(result):
        ensure_table(spark, path, table_schema(entry), list(entry.partition_by))
        input_path = settings.table(*source.split("/"))
        rows = read_table(spark, input_path)
        first = None if applied is None else _first_date(entry, applied)
        if first is not None:
            # Only the dates a window still open at the applied watermark can hold.
            rows = rows.where(F.col(_date_column(source)) >= first)
        windows = transform(rows).transform(close(entry.closing, watermark))
        if applied is not None:
            windows = windows.where(~closed_before(entry.closing, applied))
        if sidecar.get(REBUILT_BY_BACKFILL):
            keys = list(entry.keys)
            merge_upsert(windows, path, keys, app_id(entry), watermark, update=False)
        else:
            append(windows, path, list(entry.partition_by), app_id(entry), watermark)
        result.rows_in = rows_from(input_path, _date_column(source), first)
        result.rows_out = {entry.name: rows_committed(path)}
        result.batches = 1
    result.progress = [_progress(entry, result, watermark, latest_version(path))]
    sidecar.pop(REBUILT_BY_BACKFILL, None)
    write_sidecar(checkpoint, {**sidecar, "query": entry.id, "applied_watermark_ms": watermark})
    return result


def _progress(entry: Table, result: StageResult, watermark_ms: int, version: int) -> dict[str, Any]:
    """The run in the shape of Spark's query progress, for the event log (`_meta/query_progress`):
    the batch is the table version it committed, the watermark the one it applied."""
    now = dt.datetime.now(dt.UTC)
    started = now - dt.timedelta(seconds=result.seconds)
    milliseconds = int(result.seconds * 1000)
    return {
        "id": app_id(entry),
        "name": entry.id,
        "batchId": version,
        "timestamp": started.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "numInputRows": result.rows_in,
        "processedRowsPerSecond": result.rows_in / result.seconds if result.seconds else 0.0,
        "durationMs": {"triggerExecution": milliseconds},
        "eventTime": {
            "watermark": dt.datetime.fromtimestamp(watermark_ms / 1000, dt.UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z")
        },
        "stateOperators": [],
    }


def _date_column(table_id: str) -> str:
    column = table(table_id).date_column
    assert column is not None, f"{table_id} has no date column"  # the catalog checks it
    return column


def _first_date(entry: Table, applied_ms: int) -> dt.date:
    """The first input date a window still open at `applied_ms` can hold rows of."""
    assert entry.closing.length is not None
    bound_us = applied_ms * 1000 - entry.closing.held_back_us() - micros(entry.closing.length)
    return (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=bound_us)).date()
