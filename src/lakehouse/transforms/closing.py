"""Closing rules: which batch rows streaming would have finalised at a watermark.

Streaming writes a row once its query's watermark guarantees it can no longer
change. A batch computation sees everything at once, so it applies the same
rule explicitly, to the watermark it is given (milliseconds, as Spark keeps
it). Each table names its rule in the catalog (`Table.closing`); matching
Spark's operators:

- `final`: deduplicated events are final when written;
- `unmatched`: an impression without a click once `impression_time <=
  watermark - attribution window` (any click that could still match must be
  later than the watermark);
- `windows`: a window once its end `<= watermark - held back` (the
  attribution join holds impressions back by its window before they reach
  the windows after it);
- `state`: sessions and user status close inside their state functions
  (`lakehouse.transforms.state`), which are given the watermark.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.catalog import Closing, seconds


def _micros(watermark_ms: int, minus_us: int = 0) -> F.Column:
    return F.timestamp_micros(F.lit(watermark_ms * 1000 - minus_us))


def _closed(closing: Closing, watermark_ms: int) -> F.Column | None:
    """Which rows are final at the watermark (None: all of them)."""
    bound = _micros(watermark_ms, closing.held_back_us())
    if closing.kind == "unmatched":
        return F.col("click_id").isNotNull() | (F.col("impression_time") <= bound)
    if closing.kind == "windows":
        assert closing.length is not None
        # A date column (a day window) starts at its midnight (the session time zone is UTC).
        start = F.col(closing.start).cast("timestamp")
        return start + F.expr(f"INTERVAL {seconds(closing.length)} SECONDS") <= bound
    return None


def close(closing: Closing, watermark_ms: int) -> Callable[[DataFrame], DataFrame]:
    """The rows of a batch-computed table that streaming would have written by `watermark_ms`."""
    closed = _closed(closing, watermark_ms)

    def transform(rows: DataFrame) -> DataFrame:
        return rows if closed is None else rows.where(closed)

    return transform


def closed_before(closing: Closing, watermark_ms: int) -> F.Column:
    """Windows already closed at an earlier watermark (`lakehouse.drivers.closed`)."""
    closed = _closed(closing, watermark_ms)
    if closing.kind != "windows" or closed is None:
        raise ValueError(f"a {closing.kind} closing rule has no windows")
    return closed
