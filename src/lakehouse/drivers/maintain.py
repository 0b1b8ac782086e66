"""`lakehouse maintain`: compaction and vacuum of every table, and retention of reports.

Run it on a slower schedule than the pipeline (the `lakehouse_maintenance`
DAG: nightly) and never at the same time as a writer (the DAG's task is in
the writers pool). Delta's OPTIMIZE and VACUUM do the work.

A table a stream has not read to its end (a run was blocked, or Airflow ran
only the bronze task for a while) is compacted but not vacuumed: the files
of the commits the stream has yet to read are kept until it has read them,
whatever `--retain-hours` says. Each such table's line names the streams.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.drivers.streaming import unread_inputs
from lakehouse.runtime.settings import Settings
from lakehouse.storage.delta import is_delta_table
from lakehouse.storage.delta.maintenance import (
    TableMaintenance,
    compact_and_vacuum,
    vacuum_retention,
)
from lakehouse.storage.objects import Root, newest_change, remove_tree

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Expired:
    """Report files, Data Docs pages and parity scratch folders removed by retention."""

    run_pages: int
    data_docs_pages: int
    scratch_folders: int

    def summary(self) -> str:
        return (
            f"expired: {self.run_pages} run report files, {self.data_docs_pages} Data Docs "
            f"pages, {self.scratch_folders} parity scratch folders"
        )


def delta_tables(settings: Settings) -> Iterator[tuple[str, Root]]:
    """Every Delta table under lakehouse/ (contract tables and _meta), as (name, path)."""
    if not settings.lakehouse.exists():
        return
    for layer in sorted(p for p in settings.lakehouse.iterdir() if p.is_dir()):
        for table in sorted(p for p in layer.iterdir() if is_delta_table(p)):
            yield f"{layer.name}/{table.name}", table


def streams_behind_on(settings: Settings) -> dict[Root, list[str]]:
    """Per table: the streams that still have commits of it to read, as `query (n commits)`."""
    behind: dict[Root, list[str]] = {}
    for query, source, versions in unread_inputs(settings):
        behind.setdefault(source.resolve(), []).append(
            f"{query.id} ({len(versions)} commit(s) unread)"
        )
    return behind


# Tables are independent: two at a time, one table's Spark jobs run while the other's
# driver plans and commits; three were no faster than two (docs/benchmarks.md).
# Results keep the tables' order.
TABLES_AT_ONCE = 2


def maintain_tables(
    spark: SparkSession, settings: Settings, retain_hours: int
) -> Iterator[TableMaintenance]:
    behind = streams_behind_on(settings)

    def maintain(table: tuple[str, Root]) -> TableMaintenance:
        name, path = table
        readers = behind.get(path.resolve())
        reason = (
            f"{', '.join(readers)} behind; `lakehouse run`, then maintain again"
            if readers
            else None
        )
        return compact_and_vacuum(spark, path, name, retain_hours, reason)

    with (
        vacuum_retention(spark, retain_hours),
        ThreadPoolExecutor(TABLES_AT_ONCE, thread_name_prefix="maintain") as pool,
    ):
        yield from pool.map(maintain, delta_tables(settings))


def _older_than(path: Root, cutoff: float) -> bool:
    return newest_change(path) < cutoff


def expire_reports(settings: Settings, keep_days: int, now: float | None = None) -> Expired:
    """Delete run pages (with their data-quality and DAG-run pages), Data Docs validation
    pages and parity scratch older than keep_days."""
    if keep_days < 0:
        raise ValueError(f"keep_days must not be negative, got {keep_days}")
    cutoff = (now if now is not None else time.time()) - dt.timedelta(
        days=keep_days
    ).total_seconds()
    reports = settings.reports
    run_files = [
        p
        for p in [*(reports / "runs").glob("*"), *(reports / "quality").glob("*"),
                  *(reports / "dag-runs").glob("*/*")]
        if p.is_file() and _older_than(p, cutoff)
    ]  # fmt: skip
    validations = settings.reports / "data_docs" / "validations"
    pages = [p for p in validations.rglob("*") if p.is_file() and _older_than(p, cutoff)]
    scratch = settings.data_root / "scratch"
    folders = [p for p in scratch.glob("parity-*") if p.is_dir() and _older_than(p, cutoff)]
    for path in [*run_files, *pages]:
        path.unlink()
    for folder in folders:
        remove_tree(folder)
    # Folders of the Data Docs tree left empty, deepest first.
    for folder in sorted((p for p in validations.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    if run_files:
        from lakehouse.reports.pages import write_index

        write_index(settings)
    return Expired(len(run_files), len(pages), len(folders))
