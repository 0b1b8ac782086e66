"""Read a Delta table: a version of it, what it gained since an earlier version.

`Snapshot` is a version of a table as its log describes it (delta-rs: milliseconds,
no Spark job), and answers what the checks and a run's report ask of a table in
one place: its data files (`files`), the files it gained since version v
(`gained_since`) or holds on some dates (`on_dates`), as `DataFiles`: their rows
and dates from the log's statistics, the largest value of a column, and their
rows, read with pyarrow when they are few (`DataFiles.arrow`) or with Spark
(`DataFiles.frame`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from lakehouse.storage.delta.log import (
    add_actions,
    file_name,
    is_delta_table,
    latest_version,
    open_table,
    read_arrow,
    rows_written,
)
from lakehouse.storage.objects import Root

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession


@dataclass(frozen=True)
class DataFiles:
    """Some data files of a version of a Delta table, by their add actions in its log
    (`path`, `num_records`, `partition.<column>`, `min.<column>`, `max.<column>`,
    `null_count.<column>`): every file of the version, the files it gained after
    version `since`, or the files of some `dates`.

    `actions` is None when the log cannot tell which files they are (the files of
    some dates, in a table not partitioned by that column): only Spark reads them.
    Every row of a file in the log is live: the lakehouse's tables have no deletion
    vectors (docs/contract.md).
    """

    path: Root
    version: int
    actions: pa.Table | None
    since: int | None = None
    dates: tuple[str, tuple[dt.date, ...]] | None = None

    @property
    def rows(self) -> int | None:
        """Their rows, from the log's statistics; None when not known (a writer recorded
        no count, or `actions` is None)."""
        if self.actions is None:
            return None
        counts = self.actions.column("num_records").to_pylist()
        return None if None in counts else sum(counts)

    @property
    def names(self) -> set[str]:
        """The data files' names (Delta names every file uniquely, in any partition)."""
        return set() if self.actions is None else {file_name(p) for p in self._column("path")}

    def partition_values(self, column: str) -> set[Any] | None:
        """The values of partition column `column` among them (None in the set: a file of
        null values); None when the table is not partitioned by `column`."""
        if self.actions is None or f"partition.{column}" not in self.actions.column_names:
            return None
        return set(self._column(f"partition.{column}"))

    def largest(self, column: str) -> Any | None:
        """The largest value of `column` among them, from the files' statistics or the
        partition values of a partition column; None if neither is recorded."""
        for name in (f"max.{column}", f"partition.{column}"):
            if self.actions is not None and name in self.actions.column_names:
                return max((v for v in self._column(name) if v is not None), default=None)
        return None

    def arrow(self, columns: Iterable[str] | None = None) -> pa.Table:
        """Their rows, read with pyarrow (each file into memory: for a few files), in the
        table's schema (or these of its `columns`)."""
        return read_arrow(self.path, self.actions, None if columns is None else list(columns))

    def frame(self, spark: SparkSession) -> DataFrame:
        """Their rows, read by Spark from the table at their version."""
        table = read_table(spark, self.path, self.version)
        if self.dates is not None:
            column, days = self.dates
            return table.where(F.col(column).isin(list(days)))
        if self.since is None:
            return table
        return _read_files(spark, self)

    def _column(self, name: str) -> list[Any]:
        assert self.actions is not None
        return self.actions.column(name).to_pylist()


class Snapshot:
    """A version of a Delta table (default: the latest), as its log describes it."""

    def __init__(self, path: Root, version: int | None = None) -> None:
        self.path = path
        self.version = latest_version(path) if version is None else version

    @classmethod
    def latest(cls, path: Root) -> Snapshot | None:
        """The table's latest version; None when `path` holds no Delta table."""
        return cls(path) if is_delta_table(path) else None

    @cached_property
    def files(self) -> DataFiles:
        """Every data file of the version."""
        return DataFiles(self.path, self.version, add_actions(self.path, self.version))

    def gained_since(self, since: int | None) -> DataFiles:
        """The data files this version holds and version `since` did not: rows appended,
        and rows rewritten by a MERGE, a backfill or a compaction. Every file when
        `since` is None or later than this version (a table rebuilt since)."""
        if since is None or since > self.version:
            return self.files
        import pyarrow as pa

        before = {file_name(uri) for uri in open_table(self.path, version=since).file_uris()}
        actions = self.files.actions
        assert actions is not None
        names = (file_name(p) for p in actions.column("path").to_pylist())
        kept = pa.array([name not in before for name in names], pa.bool_())
        return DataFiles(self.path, self.version, actions.filter(kept), since=since)

    def on_dates(self, column: str, days: Iterable[dt.date]) -> DataFiles:
        """The data files of the version holding rows of these dates of partition column
        `column` (`actions` None when the table is not partitioned by it)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        days = tuple(sorted(days))
        actions = self.files.actions
        assert actions is not None
        partition = f"partition.{column}"
        if partition in actions.column_names:
            actions = actions.filter(
                pc.is_in(actions.column(partition), pa.array(days, pa.date32()))
            )
        else:
            actions = None
        return DataFiles(self.path, self.version, actions, dates=(column, days))

    def rows_written_since(self, since: int | None) -> int | None:
        """Rows the commits after version `since` inserted or updated, from their metrics
        (`lakehouse.storage.delta.log.rows_written`); None when they wrote none."""
        return None if since == self.version else rows_written(self.path, since, self.version)


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
    return Snapshot(path, version).gained_since(since).frame(spark)


def _read_files(spark: SparkSession, files: DataFiles) -> DataFrame:
    """The rows of these data files, read by Spark from their version of the table."""
    table = read_table(spark, files.path, files.version)
    if files.actions is None or not files.actions.num_rows:
        return table.limit(0)
    name = F.element_at(F.split(F.col("_metadata.file_path"), "/"), -1)
    return table.where(_rows_of(files.actions, table.columns) & name.isin(sorted(files.names)))


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
