"""Read a Delta table, a version of it, or the rows added since a version."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from include.delta.log import files_added
from include.storage.objects import Root

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


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
    older snapshot in Spark costs a job per table); Spark reads the rows.
    """
    table = read_table(spark, path, version)
    if since is None:
        return table
    added = files_added(path, since, version)
    if not added:
        return table.limit(0)
    # Delta names every data file uniquely (part-<n>-<uuid>...): its name identifies it.
    name = F.element_at(F.split(F.col("_metadata.file_path"), "/"), -1)
    return table.where(name.isin(sorted(added)))
