"""Table maintenance with Delta's own commands: OPTIMIZE (compaction), then VACUUM.

Every streaming micro-batch adds small files; OPTIMIZE rewrites them into
fewer, larger ones in a commit with `dataChange=false`, which Delta's
streaming source skips, so downstream queries never see the rows twice.
VACUUM then deletes every file in the table's folder that no version within
the retention window references: files of compacted-away versions, and files
written by a writer that died before its commit. Time travel further back
than that window is no longer possible; a stream that has not read the
table to its end is never left without its files (`lakehouse.drivers.maintain` skips the
vacuum of such a table and says which stream is behind).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.storage.objects import Root, S3Path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Delta's default `delta.deletedFileRetentionDuration`.
DEFAULT_RETAIN_HOURS = 7 * 24
# Delta refuses a shorter VACUUM retention unless this check is off.
_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


@dataclass(frozen=True)
class TableMaintenance:
    table: str
    files_before: int
    files_after: int
    files_vacuumed: int
    version: int
    # Why VACUUM did not run (a stream has not read all of the table yet), if it did not.
    vacuum_skipped: str | None = None

    def summary(self) -> str:
        vacuumed = (
            f"vacuum skipped: {self.vacuum_skipped}"
            if self.vacuum_skipped
            else f"vacuumed {self.files_vacuumed:>5}"
        )
        return (
            f"{self.table:30} files {self.files_before:>5} -> {self.files_after:<5} "
            f"{vacuumed}  (version {self.version})"
        )


@contextlib.contextmanager
def vacuum_retention(spark: SparkSession, retain_hours: int) -> Iterator[None]:
    """VACUUMs of the session may keep fewer than Delta's default hours only on purpose (an
    explicit --retain-hours): Delta refuses a shorter window unless its check is off."""
    if retain_hours < 0:
        raise ValueError(f"retain_hours must not be negative, got {retain_hours}")
    spark.conf.set(_RETENTION_CHECK, str(retain_hours >= DEFAULT_RETAIN_HOURS).lower())
    try:
        yield
    finally:
        spark.conf.unset(_RETENTION_CHECK)


def compact_and_vacuum(
    spark: SparkSession,
    path: Root,
    name: str,
    retain_hours: int,
    skip_vacuum: str | None = None,
) -> TableMaintenance:
    """Compact the table's small files, then delete unreferenced files older than `retain_hours`
    (inside `vacuum_retention`).

    With `skip_vacuum` (the reason), only compact: a stream that has not read
    every commit of the table still needs the files those commits added, and
    compaction marks them removed without deleting them.
    """
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, str(path))
    # OPTIMIZE's own metrics give the files before and after (no snapshot scan of ours).
    compacted = table.optimize().executeCompaction().collect()[0]["metrics"]
    before = compacted["totalConsideredFiles"]
    after = before - compacted["numFilesRemoved"] + compacted["numFilesAdded"]
    if skip_vacuum:
        version = table.history(1).collect()[0]["version"]
        return TableMaintenance(name, before, after, 0, version, skip_vacuum)
    # What VACUUM deleted is what is gone from the folder: counted by listing it, as a
    # second VACUUM in DRY RUN mode would cost as much as the real one.
    stored = _stored_files(path)
    table.vacuum(float(retain_hours))
    vacuumed = stored - _stored_files(path)
    version = table.history(1).collect()[0]["version"]
    return TableMaintenance(name, before, after, vacuumed, version)


def _stored_files(table: Root) -> int:
    """Data files in the table's folder outside its Delta log: those of every version still
    kept, and any a writer left without committing them (hidden files, such as Hadoop's
    local `.crc` checksums, left out, as Delta leaves them out)."""
    if isinstance(table, S3Path):
        keys = [path.relative_to(table) for path, _ in table.objects()]
    else:
        keys = [str(path.relative_to(table)) for path in table.rglob("*") if path.is_file()]
    return sum(
        not key.startswith("_delta_log/") and not key.rsplit("/", 1)[-1].startswith((".", "_"))
        for key in keys
    )
