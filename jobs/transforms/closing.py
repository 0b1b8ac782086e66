"""Closing rules: which batch rows streaming would have finalised at a watermark.

Streaming writes a row once its query's watermark guarantees it can no longer
change. A batch computation sees everything at once, so it applies the same
rule explicitly, to the watermark it is given (milliseconds, as Spark keeps
it). The rules, matching Spark's operators:

- an unmatched impression: `impression_time <= watermark - 1 hour` (any click
  that could still match must be later than the watermark);
- a window after the attribution join: `window_end <= watermark - 1 hour`
  (the join holds impressions back by that much before they reach the window);
- a window of user actions: `window_end <= watermark`;
- sessions and user status: in `jobs.state`, with the watermark passed in.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.contract import ATTRIBUTION_WINDOW

ATTRIBUTION_US = int(ATTRIBUTION_WINDOW.total_seconds() * 1_000_000)


def _micros(watermark_ms: int, minus_us: int = 0) -> F.Column:
    return F.timestamp_micros(F.lit(watermark_ms * 1000 - minus_us))


def close_unmatched_impressions(watermark_ms: int) -> Callable[[DataFrame], DataFrame]:
    def transform(attribution: DataFrame) -> DataFrame:
        final = F.col("click_id").isNotNull() | (
            F.col("impression_time") <= _micros(watermark_ms, ATTRIBUTION_US)
        )
        return attribution.where(final)

    return transform


def close_windows(watermark_ms: int, held_back_us: int = 0) -> Callable[[DataFrame], DataFrame]:
    def transform(windows: DataFrame) -> DataFrame:
        return windows.where(F.col("window_end") <= _micros(watermark_ms, held_back_us))

    return transform
