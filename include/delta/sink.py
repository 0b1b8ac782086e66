"""A `foreachBatch` sink that commits each micro-batch to Delta exactly once.

Spark may run a micro-batch again after a crash (the batch was planned but its
completion was not yet recorded in the checkpoint). Each commit therefore
carries a Delta app transaction `(app_id, batch_id)` where `app_id` is the
streaming query's id (stable across restarts from the same checkpoint); a
batch whose id the table has already recorded is skipped.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.transaction import AddAction, RemoveAction

from include.delta.files import row_count, write_data_files
from include.delta.schema import arrow_schema, ensure_table
from include.delta.writes import merge_upsert
from include.faults import crash_point

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql import types as T

log = logging.getLogger(__name__)


def streaming_query_id(checkpoint_dir: Path) -> str:
    """The query id Spark stores in the checkpoint (`StreamingQuery.id`)."""
    metadata = checkpoint_dir / "metadata"
    try:
        return str(json.loads(metadata.read_text())["id"])
    except FileNotFoundError:
        raise RuntimeError(f"no streaming checkpoint metadata at {metadata}") from None


@dataclass
class DeltaStreamSink:
    """Commit micro-batches of a streaming query to one Delta table.

    Use as `query.foreachBatch(sink)`, or call `sink.write(df, batch_id)` from a
    foreachBatch function that writes several tables. With `merge_keys`, each
    batch is upserted (MERGE) on those keys instead of appended, for
    current-state tables. `rows_written` and `batches_skipped` count what this
    process did, for progress reports.
    """

    table_path: Path
    schema: T.StructType
    checkpoint_dir: Path
    partition_by: list[str] = field(default_factory=list)
    merge_keys: list[str] = field(default_factory=list)
    rows_written: int = 0
    batches_committed: int = 0
    batches_skipped: int = 0
    _app_id: str | None = None

    def __post_init__(self) -> None:
        self.table_path = Path(self.table_path)
        self.checkpoint_dir = Path(self.checkpoint_dir)
        ensure_table(self.table_path, self.schema, self.partition_by)

    @property
    def app_id(self) -> str:
        if self._app_id is None:
            self._app_id = streaming_query_id(self.checkpoint_dir)
        return self._app_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.write(batch, batch_id)

    def write(self, batch: DataFrame, batch_id: int) -> None:
        if self.merge_keys:
            self._merge(batch, batch_id)
            return
        table = DeltaTable(str(self.table_path))
        committed = table.transaction_version(self.app_id)
        if committed is not None and committed >= batch_id:
            self._skip(batch, batch_id)
            return
        actions = write_data_files(
            batch.select(*self.schema.names), self.table_path, self.partition_by
        )
        if not actions:
            return
        crash_point("sink.before_commit")
        commit: list[AddAction | RemoveAction] = list(actions)
        table.create_write_transaction(
            commit,
            mode="append",
            schema=arrow_schema(self.schema),
            partition_by=self.partition_by or None,
            commit_properties=CommitProperties(
                app_transactions=[Transaction(app_id=self.app_id, version=batch_id)],
                custom_metadata={"streamingQueryId": self.app_id, "batchId": batch_id},
            ),
        )
        crash_point("sink.after_commit")
        self.rows_written += row_count(actions)
        self.batches_committed += 1

    def _skip(self, batch: DataFrame, batch_id: int) -> None:
        """A replayed batch this table already holds: run it, write nothing.

        Stateful operators upstream must still execute the batch so their state
        stores commit its version (Spark checks that every store committed).
        """
        log.info("%s: batch %d already committed, skipping", self.table_path, batch_id)
        batch.write.format("noop").mode("overwrite").save()
        self.batches_skipped += 1

    def _merge(self, batch: DataFrame, batch_id: int) -> None:
        metrics = merge_upsert(
            batch.select(*self.schema.names),
            self.table_path,
            self.merge_keys,
            app_id=self.app_id,
            version=batch_id,
        )
        if metrics.get("skipped"):
            self._skip(batch, batch_id)
            return
        self.rows_written += metrics.get("num_target_rows_inserted", 0) + metrics.get(
            "num_target_rows_updated", 0
        )
        self.batches_committed += 1
