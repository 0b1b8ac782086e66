"""Streams and backfills share the silver and gold tables: keep them from double-writing.

- `streams_behind`: a backfill may only replace rows the streams have
  already written. If a silver or gold stream still has input to read (a run
  was blocked or interrupted, or the stream never ran), it would write those
  rows again after the backfill. `lakehouse backfill` refuses until a run has
  caught the streams up.
- `recover` (`lakehouse recover --layer L`): the documented way back
  from a checkpoint that `lakehouse.storage.checkpoints` refused. The layer's
  checkpoints are moved to `checkpoints/_retired/<time>/`; bronze streams
  restart reading every landing file but skip the files their tables already
  hold; silver and gold tables are rebuilt by backfill over every date in
  bronze, and so is every table computed from them (`tables_to_recover`: a
  backfill's commits say `dataChange=false`, so the streams reading a rebuilt
  table would never see the rows it gained), then their streams restart with
  new checkpoints. Such a stream's first run reads its sources whole (a
  stateful query must see the rows of the windows and sessions still open,
  and remember the ids of deduplication) and writes only rows whose keys the
  backfill did not write: nothing the backfill closed is written twice,
  nothing still open loses the rows read before the recovery. The dates of
  rows that arrived after the backfill for what it closed are recorded as
  late (`lakehouse.drivers.late`).
- `recover_kafka_topic` (`lakehouse recover --kafka-source S --from earliest|latest`):
  the choice a Kafka stream asks for when its topic is not the one it read
  before (deleted and created again). Its checkpoint is retired and a new
  one reads the topic as it is now, from its oldest message or from its end
  at the time of the command, skipping nothing by the old topic's offsets.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.catalog import (
    LAYERS,
    SOURCES,
    Layer,
    Source,
    Table,
    all_tables,
    downstream_of,
)
from lakehouse.catalog.dates import DateRange
from lakehouse.drivers.backfill import bronze_days, bronze_watermarks, run_backfill
from lakehouse.drivers.bronze import KAFKA_TOPIC, STARTING_OFFSETS, kafka_checkpoint
from lakehouse.drivers.closed import windows_to_close
from lakehouse.drivers.streaming import read_sources, unread_inputs
from lakehouse.drivers.tables import FINGERPRINT, fingerprint
from lakehouse.errors import LakehouseError, RefusedError
from lakehouse.quality.derived import reconciliation_frame
from lakehouse.quality.ledger import LEDGER_SCHEMA, ledger_path
from lakehouse.runtime.settings import Settings
from lakehouse.storage.checkpoints import (
    BACKFILL_WATERMARK,
    BACKFILLED_VERSIONS,
    REBUILT_BY_BACKFILL,
    RETIRED,
    read_position,
    read_sidecar,
    write_sidecar,
)
from lakehouse.storage.delta import append_rows, is_delta_table, read_table
from lakehouse.storage.delta.log import latest_version, streams_that_wrote
from lakehouse.storage.kafka import topic_state
from lakehouse.storage.objects import Root, move_tree, relative

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def refuse_while_streams_behind(settings: Settings, command: str, why: str) -> None:
    """Refuse `command` while the streams still have rows to write (`why` it must wait),
    naming what each stream has left."""
    behind = streams_behind(settings)
    if behind:
        raise RefusedError(
            f"refused: the streams still have rows to write; {why}. Run `lakehouse run` "
            f"(in Airflow: let lakehouse_incremental succeed) first, then the {command}."
            + "".join(f"\n  {line}" for line in behind)
        )


def streams_behind(settings: Settings) -> list[str]:
    """Silver and gold streams with input they have not written yet, and why."""
    if not any(is_delta_table(settings.table("bronze", s)) for s in SOURCES):
        return []
    behind = []
    waiting = set()
    for table in all_tables():
        if table.closed_by is not None:
            if windows_to_close(settings, table):
                behind.append(f"{table.id}: windows {table.closed_by} closed not written yet")
            continue
        checkpoint = settings.checkpoint(table.layer, table.name)
        position = read_position(checkpoint, table.id)
        sidecar = read_sidecar(checkpoint)
        if position is None and not sidecar.get("starting_versions"):
            behind.append(f"{table.id}: its stream has never run")
        elif position is not None and position.planned != position.completed:
            behind.append(f"{table.id}: micro-batch {position.planned} was started, not finished")
        elif not read_sources(settings, table):
            behind.append(f"{table.id}: its checkpoint does not say what it has read (run it once)")
        else:
            continue
        waiting.add(table.id)
    for table, source, versions in unread_inputs(settings):
        if table.id not in waiting:
            name = relative(source, settings.lakehouse)
            behind.append(f"{table.id}: {len(versions)} commit(s) of {name} not read yet")
    return behind


def bronze_dates(spark: SparkSession, settings: Settings) -> DateRange | None:
    """The range from the first to the last event date in bronze (None: bronze is empty).

    One backfill over it costs what bronze holds, however far apart its dates.
    """
    days = bronze_days(spark, settings)
    return DateRange(days[0], days[-1]) if days else None


def recover(
    spark: SparkSession,
    settings: Settings,
    layers: Sequence[Layer],
    kafka: tuple[Source, str] | None = None,
    echo: Callable[[str], None] = print,
) -> None:
    """`lakehouse recover`: restart a Kafka stream on its topic as it is now (`kafka`: the
    source and where to start), then the layers' streams, in pipeline order: bronze's
    (`recover_bronze`), and silver and gold by backfill with every table computed from
    them (`tables_to_recover`, `recover_tables`)."""
    if kafka is not None:
        source, start = kafka
        retired = recover_kafka_topic(spark, settings, source, start, echo)
        echo(f"recovered bronze/{source.name}[kafka]: old checkpoint kept in {retired}")
    if "bronze" in layers:
        retired = recover_bronze(spark, settings, echo)
        echo(f"recovered bronze: old checkpoints kept in {retired}")
    tables = tables_to_recover(layers)
    if tables:
        downstream = [t.id for t in tables if t.layer not in layers]
        if downstream:
            echo(f"also rebuilt, as they read what is rebuilt: {', '.join(downstream)}")
        retired = recover_tables(spark, settings, tables, echo=echo)
        recovered = [layer for layer in LAYERS if layer in {t.layer for t in tables}]
        echo(f"recovered {', '.join(recovered)}: old checkpoints kept in {retired}")


def recover_bronze(
    spark: SparkSession, settings: Settings, echo: Callable[[str], None] = print
) -> Root:
    """Retire bronze's checkpoints and restart its streams without loss or duplicates."""
    layer = "bronze"
    stamp = _stamp()
    retired = settings.checkpoints / RETIRED / stamp / layer
    retired_ids: dict[str, list[str]] = {}
    # The topic each Kafka stream read: its next run refuses another one (a topic created
    # again), whose offsets the messages the tables hold would not say anything about.
    topics = {
        s: read_sidecar(kafka_checkpoint(settings, SOURCES[s])).get(KAFKA_TOPIC) for s in SOURCES
    }
    for source in SOURCES:
        tables = [settings.table(layer, source), settings.table("quarantine", source)]
        retired_ids[source] = _writers(tables)
        _retire(settings.checkpoint(layer, source), retired / source, f"{layer}/{source}", echo)
        _retire(
            kafka_checkpoint(settings, SOURCES[source]),
            retired / f"{source}[kafka]",
            f"{layer}/{source}[kafka]",
            echo,
        )
    restate_ledger(spark, settings, f"recover-{stamp}", echo)
    created = _now()
    for source in SOURCES:
        checkpoint = settings.checkpoint(layer, source)
        sidecar = {
            "query": f"{layer}/{source}",
            "created": created,
            "recovered_from": str(retired / source),
            "retired_query_ids": retired_ids[source],
            "skip_files": {
                table: _files_in(spark, settings.table(table, source))
                for table in ("bronze", "quarantine")
            },
        }
        write_sidecar(checkpoint, sidecar)
        echo(f"{layer}/{source}: new checkpoint {checkpoint}")
        # The topic's stream starts again at the earliest offsets; the messages the
        # tables hold (per table, through the highest offset of each partition) are skipped.
        held = {
            table: _offsets_in(spark, settings.table(table, source))
            for table in ("bronze", "quarantine")
        }
        if any(held.values()):
            kafka = kafka_checkpoint(settings, SOURCES[source])
            write_sidecar(
                kafka,
                {
                    "query": f"{layer}/{source}[kafka]",
                    "created": created,
                    "recovered_from": str(retired / f"{source}[kafka]"),
                    "retired_query_ids": retired_ids[source],
                    "skip_offsets": held,
                    **({KAFKA_TOPIC: topics[source]} if topics[source] else {}),
                },
            )
            echo(f"{layer}/{source}[kafka]: new checkpoint {kafka}")
    return retired


def recover_kafka_topic(
    spark: SparkSession,
    settings: Settings,
    source: Source,
    start: str,
    echo: Callable[[str], None] = print,
) -> Root:
    """Restart the source's Kafka stream on its topic as it is now, from `start`:
    `earliest` (every message the topic holds) or `latest` (its end now)."""
    if not settings.kafka_bootstrap_servers:
        raise LakehouseError(
            "recover --kafka-source: no Kafka broker (set LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS "
            "or pass --kafka-bootstrap-servers)"
        )
    topic = settings.kafka_topic(source.name)
    state = topic_state(spark, settings.kafka_bootstrap_servers, topic)
    if state is None:
        raise LakehouseError(f"recover --kafka-source: topic '{topic}' does not exist")
    query = f"bronze/{source.name}[kafka]"
    writers = _writers(
        [settings.table("bronze", source.name), settings.table("quarantine", source.name)]
    )
    checkpoint = kafka_checkpoint(settings, source)
    retired = settings.checkpoints / RETIRED / _stamp() / "bronze" / f"{source.name}[kafka]"
    _retire(checkpoint, retired, query, echo)
    ends = {topic: {str(p): offset for p, offset in sorted(state.latest.items())}}
    write_sidecar(
        checkpoint,
        {
            "query": query,
            "created": _now(),
            "recovered_from": str(retired),
            "retired_query_ids": writers,
            KAFKA_TOPIC: state.recorded(),
            STARTING_OFFSETS: "earliest" if start == "earliest" else json.dumps(ends),
        },
    )
    where = "its oldest message" if start == "earliest" else f"its end now ({ends[topic]})"
    echo(f"{query}: new checkpoint {checkpoint}; the next run reads topic '{topic}' from {where}")
    return retired


def tables_to_recover(layers: Sequence[str]) -> list[Table]:
    """The layers' silver and gold tables, and every table computed from them.

    A rebuilt table's commits say `dataChange=false`, and the streams reading
    it skip them: left alone, a table downstream would miss every row the
    rebuilt table gained since its stream last read it.
    """
    chosen = [table for table in all_tables() if table.layer in layers and table.layer != "bronze"]
    return [*chosen, *downstream_of({table.id for table in chosen})]


def recover_tables(
    spark: SparkSession,
    settings: Settings,
    tables: Sequence[Table],
    echo: Callable[[str], None] = print,
) -> Root:
    """Retire the tables' checkpoints, rebuild the tables by backfill from bronze, restart them.

    `recover --layer` does it for a layer's tables, `migrate` for the tables
    whose rules changed and those computed from them. The new checkpoints
    record the catalog's rules and columns.
    """
    retired = settings.checkpoints / RETIRED / _stamp()
    retired_ids: dict[str, list[str]] = {}
    for table in tables:
        path = settings.table(table.layer, table.name)
        retired_ids[table.id] = sorted(streams_that_wrote(path))
        target = retired / table.layer / table.name
        _retire(settings.checkpoint(table.layer, table.name), target, table.id, echo)
    dates = bronze_dates(spark, settings)
    if dates is not None:
        results, _ = run_backfill(spark, settings, dates, tables=tables, new_schema=True)
        for result in results:
            echo(f"rebuilt by backfill {dates.start}..{dates.end}: {result.summary()}")
    watermarks = bronze_watermarks(spark, settings) if dates is not None else {}
    created = _now()
    for table in tables:
        checkpoint = settings.checkpoint(table.layer, table.name)
        sidecar = {
            "query": table.id,
            "created": created,
            "recovered_from": str(retired / table.layer / table.name),
            "retired_query_ids": retired_ids[table.id],
            REBUILT_BY_BACKFILL: True,
            FINGERPRINT: fingerprint(table),
        }
        if table.closed_by is None:  # a stream: what is late to the backfill
            inputs = [settings.table(*source.split("/")) for source in table.inputs]
            sidecar[BACKFILL_WATERMARK] = watermarks.get(table.id)
            sidecar[BACKFILLED_VERSIONS] = {
                str(path.resolve()): latest_version(path) for path in inputs if is_delta_table(path)
            }
        write_sidecar(checkpoint, sidecar)
        echo(f"{table.id}: new checkpoint {checkpoint}")
    return retired


def _writers(tables: Sequence[Root]) -> list[str]:
    """The query ids of the streams that committed to any of the tables."""
    return sorted(set().union(*(streams_that_wrote(t) for t in tables)))


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _retire(checkpoint: Root, target: Root, query: str, echo: Callable[[str], None]) -> None:
    if checkpoint.exists():
        move_tree(checkpoint, target)
        echo(f"{query}: checkpoint moved to {target}")


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


def _offsets_in(spark: SparkSession, table: Root) -> dict[str, dict[str, int]]:
    """Per topic and partition, the highest offset of a message the table holds."""
    if not is_delta_table(table):
        return {}
    rows = read_table(spark, table)
    if "_kafka_topic" not in rows.columns:
        return {}
    highest = (
        rows.where(F.col("_kafka_topic").isNotNull())
        .groupBy("_kafka_topic", "_kafka_partition")
        .agg(F.max("_kafka_offset"))
        .collect()
    )
    offsets: dict[str, dict[str, int]] = {}
    for topic, partition, offset in highest:
        offsets.setdefault(topic, {})[str(partition)] = int(offset)
    return offsets


def _files_in(spark: SparkSession, table: Root) -> list[str]:
    if not is_delta_table(table):
        return []
    lines = read_table(spark, table)
    if "_kafka_topic" in lines.columns:  # Kafka messages: their own stream, not recovered here
        lines = lines.where(F.col("_kafka_topic").isNull())
    rows = lines.select("_source_file").distinct().collect()
    return sorted(row[0] for row in rows)
