"""Streams and backfills share the silver and gold tables: keep them from double-writing.

- `streams_behind`: a backfill may only replace rows the streams have
  already written. If a silver or gold stream still has input to read (a run
  was blocked or interrupted, or the stream never ran), it would write those
  rows again after the backfill. `lakehouse backfill` refuses until a run has
  caught the streams up.
- `recover_layer` (`lakehouse recover --layer L`): the documented way back
  from a checkpoint that `include.checkpoints` refused. The layer's
  checkpoints are moved to `checkpoints/_retired/<time>/`; bronze streams
  restart reading every landing file but skip the files their tables already
  hold; silver and gold tables are rebuilt by backfill over every date in
  bronze, then their streams restart with new checkpoints. Such a stream's
  first run reads its sources whole (a stateful query must see the rows of
  the windows and sessions still open, and remember the ids of deduplication)
  and writes only rows whose keys the backfill did not write: nothing the
  backfill closed is written twice, nothing still open loses the rows read
  before the recovery.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from include.checkpoints import (
    REBUILT_BY_BACKFILL,
    RETIRED,
    read_position,
    read_sidecar,
    unread_versions,
    write_sidecar,
)
from include.delta import append_rows, is_delta_table, read_table
from include.delta.log import streams_that_wrote
from include.settings import Settings
from jobs.backfill import TABLES, run_backfill
from jobs.bronze import LEDGER_SCHEMA, ledger_path
from jobs.contract import EVENT_TIME, SOURCES
from jobs.dates import DateRange
from jobs.validate import reconciliation_frame

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def streams_behind(settings: Settings) -> list[str]:
    """Silver and gold streams with input they have not written yet, and why."""
    if not any(is_delta_table(settings.table("bronze", s)) for s in SOURCES):
        return []
    behind = []
    for layer, table in TABLES:
        query = f"{layer}/{table}"
        checkpoint = settings.checkpoint(layer, table)
        position = read_position(checkpoint, query)
        sidecar = read_sidecar(checkpoint)
        if position is None and not sidecar.get("starting_versions"):
            behind.append(f"{query}: its stream has never run")
            continue
        if position is not None and position.planned != position.completed:
            behind.append(f"{query}: micro-batch {position.planned} was started, not finished")
            continue
        read = sidecar.get("read_versions") or sidecar.get("starting_versions") or {}
        sources = [Path(table) for table in read]
        if not sources:
            behind.append(f"{query}: its checkpoint does not say what it has read (run it once)")
        for source, versions in unread_versions(checkpoint, query, sources).items():
            name = source.relative_to(settings.lakehouse)
            behind.append(f"{query}: {len(versions)} commit(s) of {name} not read yet")
    return behind


def bronze_dates(spark: SparkSession, settings: Settings) -> DateRange | None:
    """The range from the first to the last event date in bronze (None: bronze is empty).

    One backfill over it costs what bronze holds, however far apart its dates.
    """
    bounds = [
        read_table(spark, path)
        .select(F.to_date(EVENT_TIME).alias("day"))  # UTC: the session's time zone
        .agg(F.min("day"), F.max("day"))
        .first()
        for path in (settings.table("bronze", s) for s in SOURCES)
        if is_delta_table(path)
    ]
    days = [day for row in bounds if row and row[0] for day in (row[0], row[1])]
    return DateRange(min(days), max(days)) if days else None


def layer_queries(layer: str) -> list[str]:
    if layer == "bronze":
        return list(SOURCES)
    return [table for table_layer, table in TABLES if table_layer == layer]


def recover_layer(
    spark: SparkSession, settings: Settings, layer: str, echo: Callable[[str], None] = print
) -> Path:
    """Retire the layer's checkpoints and restart its streams without loss or duplicates."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    retired = settings.checkpoints / RETIRED / stamp / layer
    retired_ids: dict[str, list[str]] = {}
    for query in layer_queries(layer):
        checkpoint = settings.checkpoint(layer, query)
        tables = [settings.table(layer, query)]
        if layer == "bronze":
            tables.append(settings.table("quarantine", query))
        retired_ids[query] = sorted(set().union(*(streams_that_wrote(t) for t in tables)))
        if checkpoint.exists():
            retired.mkdir(parents=True, exist_ok=True)
            shutil.move(checkpoint, retired / query)
            echo(f"{layer}/{query}: checkpoint moved to {retired / query}")

    if layer == "bronze":
        restate_ledger(spark, settings, f"recover-{stamp}", echo)
    dates = bronze_dates(spark, settings) if layer != "bronze" else None
    if dates is not None:
        for result in run_backfill(spark, settings, dates, [layer]):
            echo(f"rebuilt by backfill {dates.start}..{dates.end}: {result.summary()}")

    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    for query in layer_queries(layer):
        sidecar: dict[str, object] = {
            "query": f"{layer}/{query}",
            "created": created,
            "recovered_from": str(retired / query),
            "retired_query_ids": retired_ids[query],
        }
        if layer == "bronze":
            sidecar["skip_files"] = {
                table: _files_in(spark, settings.table(table, query))
                for table in ("bronze", "quarantine")
            }
        else:
            sidecar[REBUILT_BY_BACKFILL] = True
        write_sidecar(settings.checkpoint(layer, query), sidecar)
        echo(f"{layer}/{query}: new checkpoint {settings.checkpoint(layer, query)}")
    return retired


def restate_ledger(
    spark: SparkSession, settings: Settings, entry: str, echo: Callable[[str], None]
) -> None:
    """Make the ingest ledger agree with what bronze and quarantine hold now.

    After a bronze table was restored to an older version, the ledger counts
    lines the table no longer holds; the restarted stream reads their files
    again and counts them again. One correcting row per source (query id
    `entry`, the lines the tables lost, negative) keeps lines read = bronze
    rows + quarantine rows true, and says in the ledger itself what happened.
    """
    if not is_delta_table(ledger_path(settings)):
        return
    frame = reconciliation_frame(spark, settings)
    corrections = [
        {
            "source": row["source"],
            "query_id": entry,
            "batch_id": 0,
            "lines_read": row["bronze_rows"] + row["quarantine_rows"] - row["lines_read"],
            "recorded_at": dt.datetime.now(dt.UTC),
        }
        for row in frame.collect()
        if row["bronze_rows"] + row["quarantine_rows"] != row["lines_read"]
    ]
    if corrections:
        append_rows(spark, ledger_path(settings), corrections, LEDGER_SCHEMA)
        for row in corrections:
            echo(
                f"bronze/{row['source']}: the ingest ledger counted {-row['lines_read']:,} "
                "line(s) the tables no longer hold (restored?): restated; their files are read "
                "again"
            )


def _files_in(spark: SparkSession, table: Path) -> list[str]:
    if not is_delta_table(table):
        return []
    rows = read_table(spark, table).select("_source_file").distinct().collect()
    return sorted(row[0] for row in rows)
