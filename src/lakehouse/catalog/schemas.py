"""Spark schemas of every table, derived from the catalog (src/lakehouse/catalog/__init__.py).

Explicit `StructType`s, never inferred: a source's event fields (strings and
`event_time`), bronze (those plus `_ingested_at`, `_source_file`, the
Kafka columns, `_source_line` and `_extra_fields`), quarantine, and each silver
and gold table's columns.
"""

from __future__ import annotations

from pyspark.sql import types as T

from lakehouse.catalog import (
    BRONZE_BOOKKEEPING,
    EVENT_TIME,
    EXTRA_FIELDS,
    META_TABLES,
    QUARANTINE_COLUMNS,
    Columns,
    Source,
    Table,
    table,
)

SPARK_TYPES: dict[str, T.DataType] = {
    "string": T.StringType(),
    "timestamp": T.TimestampType(),
    "long": T.LongType(),
    "double": T.DoubleType(),
    "date": T.DateType(),
    "boolean": T.BooleanType(),
    "array<string>": T.ArrayType(T.StringType()),
}

# Where a row came from when it was a Kafka message (null for a landing line);
# `_source_file` then reads `kafka:<topic>/<partition>/<offset>`. After the other
# bookkeeping columns: added at the end of tables written before Kafka ingestion.
KAFKA_COLUMNS = (
    T.StructField("_kafka_topic", T.StringType()),
    T.StructField("_kafka_partition", T.IntegerType()),
    T.StructField("_kafka_offset", T.LongType()),
)


# A landing line's number in its file, from 1: with `_ingested_at` and `_source_file`,
# the order in which copies of an event arrived (a Kafka message's is its partition and
# offset). Null for a message and for an unreadable file's row. After Kafka's columns,
# where `ensure_table` adds it to tables written before it.
SOURCE_LINE = T.StructField("_source_line", T.LongType())


def struct(columns: Columns) -> T.StructType:
    """The Spark schema of columns the catalog declares as (name, type) pairs."""
    return T.StructType([T.StructField(name, SPARK_TYPES[kind]) for name, kind in columns])


QUARANTINE_SCHEMA = T.StructType([*struct(QUARANTINE_COLUMNS).fields, *KAFKA_COLUMNS, SOURCE_LINE])


def event_schema(source: Source) -> T.StructType:
    return T.StructType(
        [T.StructField(name, T.StringType()) for name in source.string_fields]
        + [T.StructField(EVENT_TIME, T.TimestampType())]
    )


def bronze_schema(source: Source) -> T.StructType:
    """The event fields, the bookkeeping columns (Kafka's last), then the optional
    fields: whatever is added later is a column added at the end of existing tables."""
    return T.StructType(
        [
            *event_schema(source).fields,
            *struct(BRONZE_BOOKKEEPING).fields,
            *KAFKA_COLUMNS,
            SOURCE_LINE,
            T.StructField(EXTRA_FIELDS, T.StringType()),
            *(T.StructField(name, T.StringType()) for name in source.optional_fields),
        ]
    )


def table_schema(entry: Table | str) -> T.StructType:
    """Schema of a silver or gold table (a catalog entry, or its id `silver/clicks`)."""
    found = table(entry) if isinstance(entry, str) else entry
    return struct(found.columns)


def meta_schema(name: str) -> T.StructType:
    """Schema of one of the lakehouse's own tables (`dq_results`, `query_progress`, ...)."""
    return struct(META_TABLES[name])
