"""Spark executors write Parquet data files; the driver turns them into Delta add actions.

Spark writes into a private staging folder inside the table (`_staging/<id>`,
ignored by every Delta reader), in parallel, with its normal commit protocol.
The driver then moves each finished file to its Hive-style place in the table
(`col=value/part-...parquet`; names carry Spark's job UUID, so they never
collide) and describes it as an `AddAction`. Until a Delta commit references
them, moved files are invisible: a crash leaves only unreferenced files,
which `vacuum` removes.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

import pyarrow.parquet as pq
from deltalake.transaction import AddAction

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

STAGING_DIR = "_staging"


def _partition_values(relative_dir: Path, partition_by: list[str]) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for part in relative_dir.parts:
        if "%" in part:
            # Spark escaped a character; the Delta log would need it URI-encoded twice.
            raise ValueError(f"partition value {part!r} needs escaping; partition by dates or ids")
        key, _, raw = part.partition("=")
        # Spark's spelling of a null partition value.
        values[key] = None if raw == "__HIVE_DEFAULT_PARTITION__" else unquote(raw)
    if sorted(values) != sorted(partition_by):
        raise RuntimeError(f"unexpected partition folder {relative_dir} for {partition_by}")
    return values


def _stats(num_rows: int, metadata: pq.FileMetaData) -> str:
    """Delta file statistics: row count and per-column null counts.

    No min/max: Delta truncates timestamp bounds to milliseconds, and a wrong
    bound would make readers skip data. Row counts are always exact.
    """
    null_counts: dict[str, int] = {}
    for column in range(metadata.num_columns):
        name = metadata.schema.column(column).name
        total = 0
        for group in range(metadata.num_row_groups):
            stats = metadata.row_group(group).column(column).statistics
            if stats is None or not stats.has_null_count:
                break
            total += stats.null_count
        else:
            null_counts[name] = total
    return json.dumps({"numRecords": num_rows, "nullCount": null_counts})


def write_data_files(df: DataFrame, table_path: Path, partition_by: list[str]) -> list[AddAction]:
    """Write `df` as Parquet files into the table folder; return their add actions.

    Empty files (Spark writes one for an empty DataFrame) are dropped.
    """
    staging = table_path / STAGING_DIR / uuid.uuid4().hex
    writer = df.write.mode("errorifexists")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(str(staging))

    actions: list[AddAction] = []
    for file in sorted(staging.rglob("*.parquet")):
        metadata = pq.read_metadata(file)
        if metadata.num_rows == 0:
            continue
        relative = file.relative_to(staging)
        target = table_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        file.replace(target)
        actions.append(
            AddAction(
                path=relative.as_posix(),
                size=target.stat().st_size,
                partition_values=_partition_values(relative.parent, partition_by),
                modification_time=int(target.stat().st_mtime * 1000),
                data_change=True,
                stats=_stats(metadata.num_rows, metadata),
            )
        )
    shutil.rmtree(staging, ignore_errors=True)
    return actions


def row_count(actions: list[AddAction]) -> int:
    return sum(json.loads(action.stats)["numRecords"] for action in actions)
