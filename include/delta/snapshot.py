"""Read a Delta table version as a Spark DataFrame.

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


def read_snapshot(
    spark: SparkSession, table_path: str | Path, version: int | None = None
) -> DataFrame:
    path = str(Path(table_path).resolve())
    table = DeltaTable(path, version=version)
    schema = spark_schema(path, table.version())
    files = table.file_uris()
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).option("basePath", path).parquet(*files).select(*schema.names)
