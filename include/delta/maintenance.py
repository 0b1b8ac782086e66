"""Table maintenance with delta-rs: compact small files, then vacuum unreferenced ones.

Every streaming micro-batch adds small files; compaction rewrites them into
fewer, larger ones in a commit with `dataChange=false`, which the streaming
source skips (include/delta/source.py), so downstream queries never see
the rows twice. Vacuum then deletes files no version newer than the
retention window still references: time travel (and a stream lagging behind)
further back than that window is no longer possible.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from deltalake import DeltaTable

# Delta's default `delta.deletedFileRetentionDuration`.
DEFAULT_RETAIN_HOURS = 7 * 24


@dataclass(frozen=True)
class TableMaintenance:
    table: str
    files_before: int
    files_after: int
    files_vacuumed: int
    version: int

    def summary(self) -> str:
        return (
            f"{self.table:30} files {self.files_before:>5} -> {self.files_after:<5} "
            f"vacuumed {self.files_vacuumed:>5}  (version {self.version})"
        )


def compact_and_vacuum(path: Path, name: str, retain_hours: int) -> TableMaintenance:
    """Compact the table's small files, then delete files older than `retain_hours`."""
    if retain_hours < 0:
        raise ValueError(f"retain_hours must not be negative, got {retain_hours}")
    table = DeltaTable(str(path))
    before = len(table.file_uris())
    table.optimize.compact()
    table = DeltaTable(str(path))
    vacuumed = table.vacuum(
        retention_hours=retain_hours,
        dry_run=False,
        # Below Delta's default window only on purpose (an explicit --retain-hours).
        enforce_retention_duration=False,
    )
    table = DeltaTable(str(path))
    return TableMaintenance(name, before, len(table.file_uris()), len(vacuumed), table.version())
