"""Which rows a check's scope sees (`lakehouse.quality.validate`), and how they are read.

The rows of a scope, when few, are an Arrow copy of their data files
(`rows_to_check`): GX's pandas engine checks the column rules, Spark the SQL rules
over the copy; more are read by Spark from the table. A rule that asks for a
column's largest value is answered from the Delta log's statistics
(`statistics_frame`). The other tables a suite's SQL rules name are temp views
(`register_views`), limited to the days around the new rows' dates.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from lakehouse.catalog import TABLES_BY_ID
from lakehouse.quality.suite import Suite
from lakehouse.runtime.settings import Settings
from lakehouse.storage.delta import DataFiles, is_delta_table, read_table

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


# `silver_clicks` in a suite's SQL is the table silver/clicks (see register_views).
TABLE_REFERENCE = re.compile(r"\b(bronze|quarantine|silver|gold)_([a-z0-9_]+)\b")


# New rows are cached for their checks up to this many. Measured in local
# mode with a 1 GiB driver heap (2 GiB since): a million rows of the widest
# table fit in Spark's storage memory; the 10M first run's 5M-row tables did
# not, and caching them cost more than reading Parquet once per rule
# (docs/benchmarks.md).
CACHE_MAX_ROWS = 1_000_000


def date_column(table: str) -> str | None:
    """The column holding a row's date (the partition column), if the table has one."""
    entry = TABLES_BY_ID.get(table)
    return entry.date_column if entry else None


def register_views(
    spark: SparkSession,
    settings: Settings,
    suite: Suite,
    dates: list[dt.date] | None = None,
    version: int | None = None,
) -> None:
    """The tables a suite's SQL rules refer to (`silver_clicks`), as temp views.

    With `dates`, another table partitioned by date is limited to the days
    from the day before the first date to the day after the last; the suite's
    own table stays whole (an id of the new rows on any other date), at the
    `version` its rows are checked at (a writer may commit meanwhile).
    """
    queries = " ".join(
        str(e["kwargs"].get("unexpected_rows_query", "")) for e in suite.expectations
    )
    for layer, name in sorted(set(TABLE_REFERENCE.findall(queries))):
        path = settings.table(layer, name)
        if not is_delta_table(path):
            continue
        own = f"{layer}/{name}" == suite.table
        view = read_table(spark, path, version if own else None)
        column = date_column(f"{layer}/{name}")
        if dates and column is not None and not own:
            day = dt.timedelta(days=1)
            view = view.where(F.col(column).between(min(dates) - day, max(dates) + day))
        view.createOrReplaceTempView(f"{layer}_{name}")


# Expectations a frame of the log's statistics answers as the whole table would: the
# largest value of a column is the largest of its files' maximums.
STATISTICS_RULES = frozenset({"expect_column_max_to_be_between"})


def statistics_frame(
    files: DataFiles, expectations: Sequence[dict[str, Any]]
) -> pd.DataFrame | None:
    """One row holding the largest value of each column the expectations check, from
    the Delta log's file statistics, for GX's pandas engine: no Spark job. None when
    an expectation needs the rows, or a column has no statistics (an empty table).

    Delta records timestamps to the millisecond: a maximum can read up to 1 ms
    lower than the row's (a freshness limit is a day).
    """
    if not expectations or any(e["type"] not in STATISTICS_RULES for e in expectations):
        return None
    values = {}
    for expectation in expectations:
        name = expectation["kwargs"]["column"]
        value = files.largest(name)
        if value is None:
            return None
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)  # as Spark hands GX times
        values[name] = value
    import pandas as pd

    return pd.DataFrame([values])


def rows_to_check(
    spark: SparkSession, settings: Settings, files: DataFiles
) -> DataFrame | ArrowRows:
    """The rows of these data files for a scope's checks: an Arrow copy, read on first
    use, when they are few (`Settings.check_arrow_max_rows`); otherwise Spark's read
    of the same rows.

    Spark plans a read of a Delta table against the table's whole state (a
    job per table version it has not seen), and each GX rule is a Spark job:
    seconds per table for the few hundred rows of a small run. In the copy, GX's
    pandas engine checks the column rules in milliseconds, and the SQL rules
    run on Spark over the copy, with nothing to plan or read.
    """
    if files.actions is None or not fits_an_arrow_copy(settings, files.rows):
        return files.frame(spark)
    return ArrowRows(files.arrow, spark)


def fits_an_arrow_copy(settings: Settings, rows: int | None) -> bool:
    """Whether rows this many (None: not known from the log) are few enough to read
    into memory with pyarrow instead of with Spark (`Settings.check_arrow_max_rows`)."""
    return rows is not None and rows <= settings.check_arrow_max_rows


def distinct_values(frame: DataFrame | ArrowRows, column: str) -> set[Any]:
    if isinstance(frame, ArrowRows):
        return set(frame.table.column(column).to_pylist())
    return {day for (day,) in frame.select(column).distinct().collect()}


def pandas_frame(table: pa.Table) -> pd.DataFrame:
    """An Arrow table as GX's pandas engine sees the values Spark hands it: times as naive
    UTC (Spark's session zone is UTC), and a floating-point NaN a value, not a null.

    With NumPy's floats (pandas' default), a NaN would pass as missing: a null
    check would fail it and a range check skip it, where Spark fails the
    range and passes the null check. Pandas' Arrow-backed floats keep the two
    apart; the other types keep NumPy's, which GX's pandas engine expects.
    """
    import pandas as pd
    import pyarrow as pa

    for index, column in enumerate(table.schema):
        if pa.types.is_timestamp(column.type) and column.type.tz is not None:
            table = table.set_column(
                index, column.name, table.column(index).cast(pa.timestamp(column.type.unit))
            )
    return table.to_pandas(
        types_mapper=lambda kind: pd.ArrowDtype(kind) if pa.types.is_floating(kind) else None
    )


class ArrowRows:
    """Rows few enough to check in this process, in an Arrow copy read on first use: GX's
    pandas engine runs the column rules on them, Spark the SQL rules (the same rows
    as a local relation: no table to plan, no file to read)."""

    def __init__(self, read: Callable[[], pa.Table], spark: SparkSession) -> None:
        self._read, self._spark = read, spark

    @cached_property
    def table(self) -> pa.Table:
        return self._read()

    @cached_property
    def pandas(self) -> pd.DataFrame:
        return pandas_frame(self.table)

    @cached_property
    def spark_frame(self) -> DataFrame:
        return self._spark.createDataFrame(self.table)
