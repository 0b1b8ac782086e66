"""Parity: does streaming hold exactly what a batch recomputation says it should?

Recomputes silver and gold for a date range from bronze, in batch, closing
rows against the watermarks the streaming queries have reached (read from
their checkpoints), writes the result to a scratch data root, and diffs it
with the live tables row for row. Operators run it after incidents; the
tests run it too. Differences usually mean events that streaming dropped as
late (which only a backfill includes) or a streaming run that has not caught
up with bronze yet.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from include.delta import read_table
from include.settings import Settings
from include.storage.objects import Root
from jobs.catalog import TABLES
from jobs.dates import DateRange
from jobs.drivers.backfill import compute_tables, in_range, write_range
from jobs.drivers.closed import applied_watermark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def streaming_watermark(checkpoint: Root) -> int | None:
    """The watermark (epoch ms) of the last micro-batch recorded in a query's checkpoint."""
    offsets = [p for p in (checkpoint / "offsets").glob("*") if p.name.isdigit()]
    if not offsets:
        return None
    latest = max(offsets, key=lambda p: int(p.name))
    metadata = json.loads(latest.read_text().splitlines()[1])
    return int(metadata.get("batchWatermarkMs", 0))


@dataclass
class TableParity:
    table: str
    live_rows: int
    batch_rows: int
    missing_from_live: int
    unexpected_in_live: int

    @property
    def equal(self) -> bool:
        return self.missing_from_live == 0 and self.unexpected_in_live == 0

    def data(self) -> dict[str, Any]:
        """For the report: the counts, and whether they agree."""
        return {**dataclasses.asdict(self), "equal": self.equal}

    def summary(self) -> str:
        verdict = "same" if self.equal else "DIFFERENT"
        return (
            f"{self.table:<30} live {self.live_rows:>9,}  batch {self.batch_rows:>9,}  "
            f"missing {self.missing_from_live:>6,}  "
            f"unexpected {self.unexpected_in_live:>6,}  {verdict}"
        )


def _rows(frame: DataFrame, dates: DateRange, column: str | None) -> DataFrame:
    return frame if column is None else in_range(frame, dates, column)


def run_parity(
    spark: SparkSession, settings: Settings, dates: DateRange
) -> tuple[list[TableParity], Root]:
    # A table of closed windows: the watermark whose windows it has written.
    watermarks = {
        table.id: applied_watermark(settings, table)
        if table.closed_by
        else streaming_watermark(settings.checkpoint(table.layer, table.name))
        for table in TABLES
    }
    # Unique per run: two parity tasks may start in the same second.
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6]
    scratch = dataclasses.replace(
        settings, data_root=settings.data_root / "scratch" / f"parity-{stamp}"
    )
    write_range(compute_tables(spark, settings, watermarks), settings, dates, layout=scratch)

    results = []
    for table in TABLES:
        live = _rows(
            read_table(spark, settings.table(table.layer, table.name)), dates, table.date_column
        )
        batch = _rows(
            read_table(spark, scratch.table(table.layer, table.name)), dates, table.date_column
        )
        results.append(
            TableParity(
                table=table.id,
                live_rows=live.count(),
                batch_rows=batch.count(),
                missing_from_live=batch.exceptAll(live).count(),
                unexpected_in_live=live.exceptAll(batch).count(),
            )
        )
    return results, scratch.data_root
