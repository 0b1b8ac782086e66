"""Read a Delta table, a version of it, or the rows added since a version."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from lakehouse.storage.delta.log import added_file_actions, file_names
from lakehouse.storage.objects import Root

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


def read_table(spark: SparkSession, path: Root, version: int | None = None) -> DataFrame:
    """The table (at `version`, with Delta's time travel, if given)."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(str(path))


def read_added_since(
    spark: SparkSession, path: Root, since: int | None, version: int | None = None
) -> DataFrame:
    """Rows of `version` (default: latest) that were not in version `since`.

    That is the rows of the data files the later snapshot holds and the earlier
    one does not: rows appended, and rows rewritten by a MERGE, a backfill or a
    compaction. `since=None` means the whole snapshot.

    The two file lists come from the log (delta-rs: milliseconds; rebuilding an
    older snapshot in Spark costs a job per table); Spark reads the rows. Delta
    cannot select files by name, so the read also carries a condition every row
    of the added files meets (`_rows_of`), which Delta checks against each
    file's partition values and statistics: it reads the added files and the
    few others that may hold such rows, not the table's whole history.
    """
    if since is None:
        return read_table(spark, path, version)
    return read_files(spark, path, added_file_actions(path, since, version), version)


def read_files(
    spark: SparkSession, path: Root, added: Any, version: int | None = None
) -> DataFrame:
    """Rows of `version` (default: latest) in the data files of these add actions
    (`added_file_actions`): `read_added_since` for a caller that has them already."""
    table = read_table(spark, path, version)
    if not added.num_rows:
        return table.limit(0)
    names = sorted(file_names(added))
    name = F.element_at(F.split(F.col("_metadata.file_path"), "/"), -1)
    return table.where(_rows_of(added, table.columns) & name.isin(names))


def _rows_of(actions: Any, columns: list[str]) -> Column:
    """A condition every row of these data files meets, from their add actions: its
    partition value is one of theirs, and each time column is null or at least the
    smallest minimum they record (Delta writes minimums rounded down to the
    millisecond, so the bound holds)."""
    condition = F.lit(True)
    for field in actions.schema:
        kind, _, column = field.name.partition(".")
        if column not in columns:
            continue
        values = actions.column(field.name).to_pylist()
        if kind == "partition":
            found = F.col(column).isin(sorted(v for v in values if v is not None))
            condition &= found | F.col(column).isNull() if None in values else found
        elif kind == "min" and all(isinstance(v, dt.date | type(None)) for v in values):
            nulls = actions.column(f"null_count.{column}").to_pylist()
            rows = actions.column("num_records").to_pylist()
            # A file without a minimum holds only nulls there, or recorded no statistics.
            files = zip(values, nulls, rows, strict=True)
            if any(v is None and (n is None or n != r) for v, n, r in files):
                continue
            known = [v for v in values if v is not None]
            at_least = F.col(column) >= F.lit(min(known)) if known else F.lit(False)
            condition &= F.col(column).isNull() | at_least
    return condition
