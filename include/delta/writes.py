"""Batch writes that replace or upsert rows atomically.

- `replace_partitions`: the backfill write. New files for a set of partition
  values (dates) replace everything those partitions held, in one commit:
  readers see the old range or the new range, never a mix.
- `merge_upsert`: keyed upsert for current-state tables (one row per key).

Predicates are built from validated identifiers and typed values, never from
user-supplied text.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.transaction import AddAction, RemoveAction

from include.delta.files import row_count, write_data_files
from include.delta.schema import arrow_schema, ensure_table
from include.faults import crash_point

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def _check_columns(df: DataFrame, columns: Iterable[str], what: str) -> list[str]:
    names = list(columns)
    missing = [name for name in names if name not in df.columns or not name.isidentifier()]
    if missing or not names:
        raise ValueError(f"{what} {names} must be non-empty columns of {df.columns}")
    return names


def _partition_literal(value: dt.date | str | int) -> str:
    """Delta's string form of a partition value; only typed values are accepted."""
    if isinstance(value, dt.datetime):
        raise TypeError("partition by dates, not timestamps")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.replace("-", "").replace("_", "").isalnum():
        return value
    raise ValueError(f"unsupported partition value {value!r}")


def _commit_properties(app_id: str | None, version: int | None, operation: str) -> CommitProperties:
    metadata: dict[str, str] = {"lakehouseOperation": operation}
    transactions = None
    if app_id and version is not None:
        transactions = [Transaction(app_id=app_id, version=version)]
        # Like the streaming sink's commits: the table remembers which stream wrote it.
        metadata |= {"streamingQueryId": app_id, "batchId": str(version)}
    return CommitProperties(app_transactions=transactions, custom_metadata=metadata)


def replace_partitions(
    df: DataFrame,
    table_path: str | Path,
    partition_column: str,
    values: Iterable[dt.date | str | int],
) -> int:
    """Atomically replace the partitions `values` of `partition_column` with `df`.

    Every row of `df` must fall in those partitions; partitions of the range
    for which `df` has no rows end up empty. Returns the rows written.
    """
    path = Path(table_path)
    (column,) = _check_columns(df, [partition_column], "partition column")
    literals = sorted({_partition_literal(value) for value in values})
    if not literals:
        raise ValueError("no partitions to replace")
    ensure_table(path, df.schema, [column])
    table = DeltaTable(str(path))
    if table.metadata().partition_columns != [column]:
        raise ValueError(
            f"{path} is partitioned by {table.metadata().partition_columns}, not [{column}]"
        )

    actions = write_data_files(df, path, [column])
    outside = sorted({a.partition_values[column] or "null" for a in actions} - set(literals))
    if outside:
        raise ValueError(
            f"rows for {column} in {outside} fall outside the partitions being replaced"
        )
    commit: list[AddAction | RemoveAction] = list(actions)
    crash_point("write.before_commit")
    table.create_write_transaction(
        commit,
        mode="overwrite",
        schema=arrow_schema(df.schema),
        partition_by=[column],
        partition_filters=[(column, "in", literals)],
        commit_properties=_commit_properties(None, None, "REPLACE PARTITIONS"),
    )
    crash_point("write.after_commit")
    return row_count(actions)


def replace_table(df: DataFrame, table_path: str | Path) -> int:
    """Atomically replace an unpartitioned table's rows with `df` (one commit)."""
    path = Path(table_path)
    ensure_table(path, df.schema)
    table = DeltaTable(str(path))
    if table.metadata().partition_columns:
        raise ValueError(f"{path} is partitioned: replace its partitions instead")
    actions = write_data_files(df, path, [])
    commit: list[AddAction | RemoveAction] = list(actions)
    crash_point("write.before_commit")
    table.create_write_transaction(
        commit,
        mode="overwrite",
        schema=arrow_schema(df.schema),
        commit_properties=_commit_properties(None, None, "REPLACE TABLE"),
    )
    crash_point("write.after_commit")
    return row_count(actions)


def append_rows(
    table_path: str | Path,
    rows: pa.Table,
    app_id: str | None = None,
    version: int | None = None,
) -> bool:
    """Append a small Arrow table from the driver (logs and metadata, not data).

    With `app_id` and `version` the append happens once: a repeated call for a
    version the table has recorded for `app_id` writes nothing (returns False).
    """
    path = str(table_path)
    if app_id is not None and version is not None and DeltaTable.is_deltatable(path):
        committed = DeltaTable(path).transaction_version(app_id)
        if committed is not None and committed >= version:
            return False
    crash_point("write.before_commit")
    write_deltalake(
        path,
        rows,
        mode="append",
        commit_properties=_commit_properties(app_id, version, "APPEND"),
    )
    crash_point("write.after_commit")
    return True


def merge_upsert(
    df: DataFrame,
    table_path: str | Path,
    keys: Iterable[str],
    app_id: str | None = None,
    version: int | None = None,
) -> dict[str, int]:
    """Upsert `df` into the table on `keys`: update matches, insert the rest.

    `df` is the set of changed keys (small: one micro-batch's changes), so it
    is collected to the driver as Arrow for delta-rs's MERGE. With `app_id`
    and `version` the commit is idempotent like the streaming sink's.
    """
    path = Path(table_path)
    key_columns = _check_columns(df, keys, "merge keys")
    ensure_table(path, df.schema)
    table = DeltaTable(str(path))
    if app_id is not None and version is not None:
        committed = table.transaction_version(app_id)
        if committed is not None and committed >= version:
            return {"num_target_rows_updated": 0, "num_target_rows_inserted": 0, "skipped": 1}
    if len(set(key_columns)) != len(key_columns):
        raise ValueError(f"duplicate merge keys {key_columns}")
    source = df.toArrow().cast(arrow_schema(df.schema))
    if source.num_rows == 0:
        return {"num_target_rows_updated": 0, "num_target_rows_inserted": 0}
    predicate = " AND ".join(f"target.`{key}` = source.`{key}`" for key in key_columns)
    crash_point("write.before_commit")
    metrics = (
        table.merge(
            source=source,
            predicate=predicate,
            source_alias="source",
            target_alias="target",
            commit_properties=_commit_properties(app_id, version, "MERGE UPSERT"),
        )
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    crash_point("write.after_commit")
    return {k: int(v) for k, v in metrics.items() if isinstance(v, int)}
