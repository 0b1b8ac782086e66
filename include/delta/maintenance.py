"""Table maintenance with Delta's own commands: OPTIMIZE (compaction), then VACUUM.

Every streaming micro-batch adds small files; OPTIMIZE rewrites them into
fewer, larger ones in a commit with `dataChange=false`, which Delta's
streaming source skips, so downstream queries never see the rows twice.
VACUUM then deletes every file in the table's folder that no version within
the retention window references: files of compacted-away versions, and files
written by a writer that died before its commit. Time travel further back
than that window is no longer possible; a stream that has not read the
table to its end is never left without its files (`jobs.drivers.maintain` skips the
vacuum of such a table and says which stream is behind).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from include.storage.objects import Root

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


def compact_and_vacuum(
    spark: SparkSession,
    path: Root,
    name: str,
    retain_hours: int,
    skip_vacuum: str | None = None,
) -> TableMaintenance:
    """Compact the table's small files, then delete unreferenced files older than `retain_hours`.

    With `skip_vacuum` (the reason), only compact: a stream that has not read
    every commit of the table still needs the files those commits added, and
    compaction marks them removed without deleting them.
    """
    from delta.tables import DeltaTable

    if retain_hours < 0:
        raise ValueError(f"retain_hours must not be negative, got {retain_hours}")
    table = DeltaTable.forPath(spark, str(path))
    before = table.detail().collect()[0]["numFiles"]
    table.optimize().executeCompaction()
    if skip_vacuum:
        version = table.history(1).collect()[0]["version"]
        files = table.detail().collect()[0]["numFiles"]
        return TableMaintenance(name, before, files, 0, version, skip_vacuum)
    # Below Delta's default window only on purpose (an explicit --retain-hours).
    spark.conf.set(_RETENTION_CHECK, str(retain_hours >= DEFAULT_RETAIN_HOURS).lower())
    try:
        location = str(path).replace("`", "``")
        doomed = spark.sql(
            f"VACUUM delta.`{location}` RETAIN {int(retain_hours)} HOURS DRY RUN"
        ).count()
        table.vacuum(float(retain_hours))
    finally:
        spark.conf.unset(_RETENTION_CHECK)
    detail = table.detail().collect()[0]
    version = table.history(1).collect()[0]["version"]
    return TableMaintenance(name, before, detail["numFiles"], doomed, version)
