"""Gold: event-time window aggregates.

`ad_performance_hourly` aggregates `silver/ad_attribution` in batch: first one
row per impression and hour (did any click match?), then per ad, campaign and
hour; `campaign_daily` sums its rows per campaign and day. Streaming runs
them over the windows the attribution query's watermark has closed
(`lakehouse.drivers.closed`), a backfill over its own attribution rows, each
closing windows by the same rule: `window_end <= watermark - attribution_window`.
`actions_per_window` is a streaming window aggregation with its own
watermark (append mode): a window is written once the watermark passes its end.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.catalog import EVENT_DATE, EVENT_TIME, seconds
from lakehouse.transforms.silver import delay


def _interval(rule: str) -> str:
    return f"{seconds(rule)} seconds"


def _window_columns(window: str = "window") -> list:
    return [
        F.col(f"{window}.start").alias("window_start"),
        F.col(f"{window}.end").alias("window_end"),
    ]


def _per_ad_and_hour(attribution: DataFrame) -> DataFrame:
    """Impressions and clicked impressions per ad, campaign and performance window."""
    per_impression = attribution.groupBy(
        F.window("impression_time", _interval("performance_window")),
        "impression_id",
        "ad_id",
        "campaign_id",
    ).agg((F.count("click_id") > 0).alias("clicked"))
    return per_impression.groupBy("window", "ad_id", "campaign_id").agg(
        F.count(F.lit(1)).alias("impressions"),
        F.sum(F.col("clicked").cast("long")).alias("clicks"),
    )


def _ctr() -> F.Column:
    return (F.col("clicks") / F.col("impressions")).alias("ctr")


def ad_performance_hourly() -> Callable[[DataFrame], DataFrame]:
    def transform(attribution: DataFrame) -> DataFrame:
        return _per_ad_and_hour(attribution).select(
            *_window_columns(),
            "ad_id",
            "campaign_id",
            "impressions",
            "clicks",
            _ctr(),
            F.to_date("window.start").alias(EVENT_DATE),
        )

    return transform


def campaign_daily() -> Callable[[DataFrame], DataFrame]:
    """Per campaign and UTC day: the day's `ad_performance_hourly` rows of the campaign summed."""

    def transform(hourly: DataFrame) -> DataFrame:
        per_day = hourly.groupBy(
            F.window("window_start", _interval("campaign_window")).alias("day"), "campaign_id"
        ).agg(F.sum("impressions").alias("impressions"), F.sum("clicks").alias("clicks"))
        return per_day.select(
            "campaign_id",
            F.to_date("day.start").alias("day"),
            "impressions",
            "clicks",
            _ctr(),
        )

    return transform


def actions_per_window() -> Callable[[DataFrame], DataFrame]:
    """Actions per window (10 minutes, sliding every 5), per action."""
    length, slide = _interval("actions_window"), _interval("actions_slide")
    watermark_delay = delay("user_actions")

    def transform(actions: DataFrame) -> DataFrame:
        counted = (
            actions.withWatermark(EVENT_TIME, watermark_delay)
            .groupBy(F.window(EVENT_TIME, length, slide), "action")
            .agg(F.count(F.lit(1)).alias("actions"))
        )
        return counted.select(
            *_window_columns(), "action", "actions", F.to_date("window.start").alias(EVENT_DATE)
        )

    return transform


# The catalog tables each transform computes (looked up by `lakehouse.drivers.tables`).
TRANSFORMS: dict[str, Callable[..., Callable[..., DataFrame]]] = {
    "gold/ad_performance_hourly": ad_performance_hourly,
    "gold/campaign_daily": campaign_daily,
    "gold/actions_10min": actions_per_window,
}
