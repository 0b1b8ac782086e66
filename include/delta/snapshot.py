"""Read a Delta table version, or the rows added since one, as a Spark DataFrame.

delta-rs resolves the snapshot (which files, after every add and remove); Spark
reads those files with its native Parquet reader. Files live in Hive-style
folders under the table root, so `basePath` recovers partition columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from deltalake import DeltaTable

from include.delta.schema import spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T


def _read_files(
    spark: SparkSession, path: str, files: list[str], schema: T.StructType
) -> DataFrame:
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).option("basePath", path).parquet(*files).select(*schema.names)


def read_snapshot(
    spark: SparkSession, table_path: str | Path, version: int | None = None
) -> DataFrame:
    path = str(Path(table_path).resolve())
    table = DeltaTable(path, version=version)
    return _read_files(spark, path, table.file_uris(), spark_schema(path, table.version()))


def read_added_since(
    spark: SparkSession, table_path: str | Path, since: int | None, version: int | None = None
) -> DataFrame:
    """Rows of `version` (default: latest) that were not in version `since`.

    That is the data files the later snapshot holds and the earlier one does
    not: rows appended, and rows rewritten by a MERGE or a partition replace.
    `since=None` means the whole snapshot.
    """
    path = str(Path(table_path).resolve())
    table = DeltaTable(path, version=version)
    files = table.file_uris()
    if since is not None:
        before = set(DeltaTable(path, version=since).file_uris())
        files = [file for file in files if file not in before]
    return _read_files(spark, path, files, spark_schema(path, table.version()))
