"""Batch driver: recompute silver and gold for a date range from bronze.

The same transforms as the streaming queries, run over bronze snapshots, with
the closing rules applied to given watermarks:

- `backfill`: each source's watermark is the largest event time in its whole
  bronze table minus its delay (CONTRACT.md section 5), so a backfill of any
  range closes exactly what a backfill of everything closes. Each table's
  dates in the range are replaced in one atomic, conflict-checked Delta commit
  (`gold/user_status`, a current-state table, is replaced whole).
- `parity` (jobs/parity.py) uses the watermarks the streaming queries reached.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from include.delta import ensure_table, read_table, replace_dates, replace_range, replace_table
from include.settings import Settings
from jobs.contract import CLICKS, EVENT_DATE, EVENT_TIME, IMPRESSIONS, SOURCES, USER_ACTIONS
from jobs.dates import BACKFILL_LAYERS, DateRange
from jobs.late import record_backfill
from jobs.progress import StageResult, timed
from jobs.transforms.closing import ATTRIBUTION_US, close_unmatched_impressions, close_windows
from jobs.transforms.gold import actions_per_window, ad_performance_hourly
from jobs.transforms.silver import attribute_clicks, dedupe_events
from jobs.transforms.user_state import sessionize_user_actions, track_user_status

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Every silver and gold table, (layer, table), in the order the pipeline writes them.
TABLES = [
    ("silver", "impressions"),
    ("silver", "clicks"),
    ("silver", "user_actions"),
    ("silver", "ad_attribution"),
    ("silver", "user_sessions"),
    ("gold", "ad_performance_hourly"),
    ("gold", "actions_10min"),
    ("gold", "user_status"),
]


@dataclass(frozen=True)
class Watermarks:
    """Watermark (epoch ms) of each query that closes rows, None if it saw no data."""

    ad_attribution: int | None
    user_sessions: int | None
    ad_performance_hourly: int | None
    actions_10min: int | None
    user_status: int | None


# Spark's watermark before a query has seen any data.
NO_WATERMARK = 0


def bronze_watermarks(spark: SparkSession, settings: Settings) -> Watermarks:
    """Per source: largest bronze event time (ms, as Spark keeps it) minus the delay."""
    source_ms: dict[str, int | None] = {}
    for name, spec in SOURCES.items():
        largest = (
            read_table(spark, settings.table("bronze", name))
            .agg(F.max(F.unix_micros(EVENT_TIME)))
            .first()
        )
        micros = largest[0] if largest else None
        delay_ms = int(spec.watermark.total_seconds() * 1000)
        source_ms[name] = None if micros is None else micros // 1000 - delay_ms
    # A query over both sources follows the slower one (Spark's "min" policy),
    # counting only inputs that have seen data, as Spark's WatermarkTracker does.
    seen = [ms for ms in (source_ms[IMPRESSIONS.name], source_ms[CLICKS.name]) if ms is not None]
    joined = min(seen, default=None)
    actions = source_ms[USER_ACTIONS.name]
    return Watermarks(joined, actions, joined, actions, actions)


def compute_tables(
    spark: SparkSession, settings: Settings, watermarks: Watermarks
) -> dict[str, DataFrame]:
    """Every silver and gold table as the streaming queries would have finalised it."""
    silver = {
        name: read_table(spark, settings.table("bronze", name))
        .transform(dedupe_events(spec))
        .persist()
        for name, spec in SOURCES.items()
    }
    attribution_ms = _or_no_watermark(watermarks.ad_attribution)
    sessions_ms = _or_no_watermark(watermarks.user_sessions)
    hourly_ms = _or_no_watermark(watermarks.ad_performance_hourly)
    windows_ms = _or_no_watermark(watermarks.actions_10min)
    status_ms = _or_no_watermark(watermarks.user_status)

    attribution = attribute_clicks(silver[IMPRESSIONS.name], silver[CLICKS.name])
    actions = silver[USER_ACTIONS.name]
    # No need to close unmatched impressions first: every impression of a
    # window closed at `watermark - 1 h` is itself closed.
    hourly = ad_performance_hourly(attribution)
    return {
        **silver,
        "ad_attribution": attribution.transform(close_unmatched_impressions(attribution_ms)),
        "user_sessions": actions.transform(sessionize_user_actions(sessions_ms * 1000)),
        "ad_performance_hourly": hourly.transform(close_windows(hourly_ms, ATTRIBUTION_US)),
        "actions_10min": actions_per_window(actions).transform(close_windows(windows_ms)),
        "user_status": actions.transform(track_user_status(status_ms * 1000)),
    }


def _or_no_watermark(watermark_ms: int | None) -> int:
    return NO_WATERMARK if watermark_ms is None else watermark_ms


# A backfill's dates: a range, or the dates of a set (`backfill --pending`).
Dates = DateRange | Sequence[dt.date]


def in_range(frame: DataFrame, dates: Dates) -> DataFrame:
    if isinstance(dates, DateRange):
        return frame.where(F.col(EVENT_DATE).between(F.lit(dates.start), F.lit(dates.end)))
    return frame.where(F.col(EVENT_DATE).isin(sorted(dates)))


def write_range(
    tables: dict[str, DataFrame],
    settings: Settings,
    dates: Dates,
    layout: Settings | None = None,
    layers: Sequence[str] = BACKFILL_LAYERS,
) -> list[StageResult]:
    """Replace the range in every table of the layers (under `layout`'s data root if given)."""
    target = layout or settings
    results = []
    for layer, name in TABLES:
        if layer not in layers:
            continue
        result = StageResult(f"{layer}/{name}")
        with timed(result):
            path = target.table(layer, name)
            frame = tables[name]
            dated = EVENT_DATE in frame.columns
            ensure_table(frame.sparkSession, path, frame.schema, [EVENT_DATE] if dated else [])
            if not dated:
                rows = replace_table(frame, path)
            elif isinstance(dates, DateRange):
                rows = replace_range(
                    in_range(frame, dates), path, EVENT_DATE, dates.start, dates.end
                )
            else:
                rows = replace_dates(in_range(frame, dates), path, EVENT_DATE, dates)
        result.rows_out = {name: rows}
        results.append(result)
    return results


def run_backfill(
    spark: SparkSession,
    settings: Settings,
    dates: Dates,
    layers: Sequence[str] = BACKFILL_LAYERS,
) -> list[StageResult]:
    """Recompute the layers' tables for the dates; gold comes from bronze, like silver.

    The dates recomputed are recorded in `_meta/backfills` (`jobs.late`): for a
    range, the dates in it that bronze holds.
    """
    watermarks = bronze_watermarks(spark, settings)
    results = write_range(
        compute_tables(spark, settings, watermarks), settings, dates, None, layers
    )
    record_backfill(spark, settings, bronze_dates_in(spark, settings, dates), layers)
    return results


def bronze_dates_in(spark: SparkSession, settings: Settings, dates: Dates) -> list[dt.date]:
    """The event dates of `dates` that bronze holds rows for."""
    if not isinstance(dates, DateRange):
        return sorted(dates)
    found: set[dt.date] = set()
    for name in SOURCES:
        rows = (
            read_table(spark, settings.table("bronze", name))
            .select(F.to_date(EVENT_TIME).alias("day"))
            .where(F.col("day").between(F.lit(dates.start), F.lit(dates.end)))
            .distinct()
            .collect()
        )
        found |= {row["day"] for row in rows}
    return sorted(found)
