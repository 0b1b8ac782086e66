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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse.catalog import Table, all_tables
from lakehouse.catalog.dates import DateRange
from lakehouse.drivers.backfill import compute_tables, in_range, write_range
from lakehouse.drivers.closed import applied_watermark
from lakehouse.drivers.maintain import TABLES_AT_ONCE
from lakehouse.runtime.settings import Settings
from lakehouse.storage.delta import read_table
from lakehouse.storage.objects import Root

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


# Names of the two sides' counters while rows are compared (no table has such a column).
_LIVE, _BATCH = "__parity_live", "__parity_batch"


def compare(live: DataFrame, batch: DataFrame) -> tuple[int, int, int, int]:
    """The rows of each side and their differences as multisets, `exceptAll`'s: rows
    of `batch` missing from `live`, rows of `live` not in `batch` (duplicates counted).

    One query: each distinct row counted on either side, then summed, where
    two `count()`s and two `exceptAll(...).count()`s read both tables three times.
    """
    from pyspark.sql import functions as F

    columns = live.columns
    sides = live.select(*columns, F.lit(1).alias(_LIVE), F.lit(0).alias(_BATCH)).unionByName(
        batch.select(*columns, F.lit(0).alias(_LIVE), F.lit(1).alias(_BATCH))
    )
    per_row = sides.groupBy(*columns).agg(F.sum(_LIVE).alias(_LIVE), F.sum(_BATCH).alias(_BATCH))
    (totals,) = per_row.agg(
        F.sum(_LIVE),
        F.sum(_BATCH),
        F.sum(F.greatest(F.col(_BATCH) - F.col(_LIVE), F.lit(0))),
        F.sum(F.greatest(F.col(_LIVE) - F.col(_BATCH), F.lit(0))),
    ).collect()  # one row: sums are null when both sides are empty
    live_rows, batch_rows, missing, unexpected = (int(total or 0) for total in totals)
    return live_rows, batch_rows, missing, unexpected


def run_parity(
    spark: SparkSession, settings: Settings, dates: DateRange
) -> tuple[list[TableParity], Root]:
    # A table of closed windows: the watermark whose windows it has written.
    watermarks = {
        table.id: applied_watermark(settings, table)
        if table.closed_by
        else streaming_watermark(settings.checkpoint(table.layer, table.name))
        for table in all_tables()
    }
    # Unique per run: two parity tasks may start in the same second.
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6]
    scratch = settings.model_copy(
        update={"data_root": settings.data_root / "scratch" / f"parity-{stamp}"}
    )
    write_range(compute_tables(spark, settings, watermarks), settings, dates, layout=scratch)

    def compared(table: Table) -> TableParity:
        live, batch = (
            _rows(
                read_table(spark, layout.table(table.layer, table.name)), dates, table.date_column
            )
            for layout in (settings, scratch)
        )
        return TableParity(table.id, *compare(live, batch))

    # Two tables at a time, as `maintain` does: one's Delta log and plan on the driver
    # while the other's tasks run.
    with ThreadPoolExecutor(TABLES_AT_ONCE, thread_name_prefix="parity") as pool:
        return list(pool.map(compared, all_tables())), scratch.data_root
