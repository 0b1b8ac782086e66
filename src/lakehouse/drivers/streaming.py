"""Run one `Trigger.AvailableNow` query to completion and report what it did."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from lakehouse.catalog import Table, all_tables
from lakehouse.faults import crash_point
from lakehouse.runtime.monitoring import operator_state, rocksdb_counts_rows
from lakehouse.runtime.progress import StageResult, timed
from lakehouse.runtime.settings import Settings
from lakehouse.storage.checkpoints import (
    caught_up,
    explain_failure,
    guard,
    latest_versions,
    read_position,
    read_sidecar,
    record_read,
    unread_versions,
)
from lakehouse.storage.objects import Root, location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

BatchWriter = Callable[["DataFrame", int], None]


def run_available_now(
    name: str,
    build: Callable[[], DataFrame],
    checkpoint: Root,
    write_batch: BatchWriter,
    tables: Sequence[Root],
    output_mode: str = "append",
    files: Sequence[Root] | None = None,
    sources: Sequence[Root] = (),
    after_run: Callable[[StageResult], object] | None = None,
    other_writers: Sequence[Root] = (),
) -> StageResult:
    """Process everything available now, in micro-batches, then stop.

    `build` makes the streaming DataFrame. `tables` are the Delta tables
    `write_batch` commits to; the checkpoint is checked against them before the
    query starts. `sources` are the Delta tables the stream reads; `files`, for
    a stream of landing files, what its source would list now. A stream that
    has read all its input is not started at all: it would plan no batch, and
    starting it costs a second or more. `after_run` sees the result of a run
    that completed, before its sidecar records what it read and its latest
    micro-batch (a crash in between runs it again, with the batches since). `other_writers`:
    checkpoints of the other streams that commit to the same tables (bronze's
    landing-file and Kafka streams).
    """
    guard(checkpoint, name, list(tables), other_writers)
    result = StageResult(name)
    if caught_up(checkpoint, name, files, sources):
        result.caught_up = True
        return result
    versions = latest_versions(sources)
    with timed(result):
        try:
            stream = build()
            query = (
                stream.writeStream.queryName(name.replace("/", "_"))
                .option("checkpointLocation", str(checkpoint))
                .outputMode(output_mode)
                .trigger(availableNow=True)
                .foreachBatch(write_batch)
                .start()
            )
            query.awaitTermination()
        except Exception as error:
            explained = explain_failure(error, checkpoint, name)
            if explained is error:
                raise
            raise explained from error
    progress = query.recentProgress
    result.progress = [json.loads(p.json) for p in progress]
    result.rows_in = sum(p.numInputRows for p in progress)
    result.batches = sum(1 for p in progress if p.numInputRows > 0)
    operators = [op for p in progress for op in p.stateOperators]
    result.dropped_late = sum(op.numRowsDroppedByWatermark for op in operators)
    if result.progress and result.progress[-1].get("stateOperators"):
        counts = rocksdb_counts_rows(stream.sparkSession)
        result.state_operators = [
            operator_state(op, counts) for op in result.progress[-1]["stateOperators"]
        ]
    crash_point("stream.after_query")
    if after_run is not None:
        after_run(result)
    crash_point("stream.before_sidecar")
    position = read_position(checkpoint, name)
    completed = None if position is None else position.completed
    record_read(checkpoint, versions, latest_versions(tables), completed)
    return result


def read_sources(settings: Settings, table: Table) -> list[Root]:
    """The Delta tables the table's stream has recorded reading (its sidecar)."""
    sidecar = read_sidecar(settings.checkpoint(table.layer, table.name))
    read = sidecar.get("read_versions") or sidecar.get("starting_versions") or {}
    return [location(path, settings.data_root) for path in read]


def unread_inputs(settings: Settings) -> Iterator[tuple[Table, Root, list[int]]]:
    """Per silver and gold stream: each input table with commits it has not read yet."""
    for table in all_tables():
        checkpoint = settings.checkpoint(table.layer, table.name)
        sources = read_sources(settings, table)
        for source, versions in unread_versions(checkpoint, table.id, sources).items():
            yield table, source, versions
