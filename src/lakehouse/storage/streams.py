"""Streams of Delta tables: Delta's own streaming source, and a foreachBatch sink.

- `read_stream`: `readStream.format("delta")`. Offsets are the table's versions
  (Delta's format, in the checkpoint); a new query reads the whole table, then
  each new version once. A stream restarted by `lakehouse recover` starts at
  the version its new checkpoint's `lakehouse.json` names.
- `StreamSink`: commits each micro-batch of a query to one table exactly once,
  with Delta's idempotent writes: the app id is the streaming query's id (kept
  in its checkpoint across restarts), the version is the batch id.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakehouse.storage.checkpoints import reads_input
from lakehouse.storage.delta.log import committed_batch
from lakehouse.storage.delta.writes import append, ensure_table, merge_upsert, rows_committed
from lakehouse.storage.objects import Root

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T

log = logging.getLogger(__name__)


def read_stream(
    spark: SparkSession,
    path: Root,
    skip_change_commits: bool = False,
    starting_version: int | None = None,
) -> DataFrame:
    """Every row appended to the table, as a stream (from `starting_version` if given).

    With `skip_change_commits`, commits that rewrite rows (a MERGE, an overwrite
    that removes files) are skipped instead of failing the query. Commits with
    `dataChange=false` (compaction, our backfills) are always skipped.
    """
    reader = spark.readStream.format("delta")
    if skip_change_commits:
        reader = reader.option("skipChangeCommits", "true")
    if starting_version is not None:
        reader = reader.option("startingVersion", starting_version)
    return reader.load(str(path))


def streaming_query_id(checkpoint: Root) -> str:
    """The query id Spark keeps in the checkpoint (`StreamingQuery.id`)."""
    metadata = checkpoint / "metadata"
    try:
        return str(json.loads(metadata.read_text())["id"])
    except FileNotFoundError:
        raise RuntimeError(f"no streaming checkpoint metadata at {metadata}") from None


@dataclass
class StreamSink:
    """Commit each micro-batch of a streaming query to one Delta table, once.

    Use as `foreachBatch(sink)`, or call `sink.write(df, batch_id)` from a
    foreachBatch function that writes several tables. With `merge_keys` each
    batch is upserted (MERGE) on those keys, for current-state tables. With
    `insert_new_keys`, rows whose keys the table holds are left out (a stream
    `lakehouse recover` restarted over a table its backfill rebuilt).
    `each_batch`, if given, turns each micro-batch into the rows to write.
    A micro-batch that only moved the watermark on and wrote no rows commits
    nothing. `rows_written`, `batches_committed`, `batches_skipped` and
    `batches_empty` count what this process did, for progress reports.
    """

    spark: SparkSession
    table_path: Root
    schema: T.StructType
    checkpoint: Root
    partition_by: list[str] = field(default_factory=list)
    merge_keys: list[str] = field(default_factory=list)
    # Insert only rows whose keys the table does not hold yet (see `write`).
    insert_new_keys: list[str] = field(default_factory=list)
    each_batch: Callable[[DataFrame], DataFrame] | None = None
    # New columns at the end of `schema` are added to the table (bronze's optional fields).
    add_columns: bool = False
    rows_written: int = 0
    batches_committed: int = 0
    batches_skipped: int = 0
    batches_empty: int = 0
    _app_id: str | None = None

    def __post_init__(self) -> None:
        ensure_table(self.spark, self.table_path, self.schema, self.partition_by, self.add_columns)

    @property
    def app_id(self) -> str:
        if self._app_id is None:
            self._app_id = streaming_query_id(self.checkpoint)
        return self._app_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.write(batch, batch_id)

    def write(self, batch: DataFrame, batch_id: int) -> None:
        committed = committed_batch(self.table_path, self.app_id)
        if committed is not None and committed >= batch_id:
            self._skip(batch, batch_id)
            return
        rows = (batch if self.each_batch is None else self.each_batch(batch)).select(
            *self.schema.names
        )
        query = f"{self.checkpoint.parent.name}/{self.checkpoint.name}"
        if reads_input(self.checkpoint, query, batch_id):
            self._commit(rows, batch_id)
            return
        # A batch that only moves the watermark on (a no-data batch): it emits the
        # windows and sessions the watermark closed, often none. Run once, kept;
        # committed only with rows: an empty commit costs a Delta commit here and
        # starts the streams downstream and their checks for nothing.
        rows.persist()
        try:
            if rows.count() == 0:
                log.info("%s: batch %d wrote no rows, nothing committed", self.table_path, batch_id)
                self.batches_empty += 1
                return
            self._commit(rows, batch_id)
        finally:
            rows.unpersist()

    def _commit(self, rows: DataFrame, batch_id: int) -> None:
        if self.merge_keys:
            merge_upsert(rows, self.table_path, self.merge_keys, self.app_id, batch_id)
        elif self.insert_new_keys:
            merge_upsert(
                rows, self.table_path, self.insert_new_keys, self.app_id, batch_id, update=False
            )
        else:
            append(rows, self.table_path, self.partition_by, self.app_id, batch_id)
        self.rows_written += rows_committed(self.table_path)
        self.batches_committed += 1

    def _skip(self, batch: DataFrame, batch_id: int) -> None:
        """A replayed batch the table already holds: run it, write nothing.

        Delta would skip the write by itself (same app id and version), but then
        nothing runs the batch, and Spark fails a query whose stateful operators
        did not commit their state for it (STATE_STORE_COMMIT_VALIDATION_FAILED).
        """
        log.info("%s: batch %d already committed, skipping", self.table_path, batch_id)
        batch.write.format("noop").mode("overwrite").save()
        self.batches_skipped += 1
