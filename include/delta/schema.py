"""Schema translation between Spark and Delta, and table creation."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
from deltalake import DeltaTable, Schema

if TYPE_CHECKING:
    from pyspark.sql import types as T


def is_delta_table(path: str | Path) -> bool:
    return (Path(path) / "_delta_log").is_dir() and DeltaTable.is_deltatable(str(path))


def arrow_schema(schema: T.StructType) -> pa.Schema:
    """Arrow schema of a Spark schema; timestamps become Delta `timestamp` (UTC).

    Every column is nullable, as in Spark's own file writes; key rules are the
    data-quality checks' job, not the storage format's.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    converted = to_arrow_schema(schema, timezone="UTC")
    return pa.schema([field.with_nullable(True) for field in converted])


def spark_schema(table_path: str | Path, version: int | None = None) -> T.StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    table = DeltaTable(str(table_path), version=version)
    return from_arrow_schema(pa.schema(table.schema().to_arrow()))


def ensure_table(
    table_path: str | Path,
    schema: T.StructType,
    partition_by: list[str] | None = None,
    name: str | None = None,
) -> None:
    """Create an empty Delta table if none exists, so readers always find one.

    An existing table must have the same columns: a mismatch is reported, not
    silently evolved.
    """
    path = Path(table_path)
    wanted = arrow_schema(schema)
    if is_delta_table(path):
        found = pa.schema(DeltaTable(str(path)).schema().to_arrow())
        if found.names != wanted.names:
            raise ValueError(
                f"Delta table {path} has columns {found.names}, the job writes {wanted.names}; "
                "migrate the table or write to a new location"
            )
        return
    path.mkdir(parents=True, exist_ok=True)
    DeltaTable.create(
        str(path),
        schema=Schema.from_arrow(wanted),
        partition_by=partition_by or None,
        mode="ignore",
        name=name or path.name,
    )
