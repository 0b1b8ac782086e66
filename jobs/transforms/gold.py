"""Gold: event-time window aggregates.

`ad_performance_hourly` chains two window aggregations after the attribution
join in one streaming query: first one row per impression and hour (did any
click match?), then per ad, campaign and hour. `campaign_daily` adds a third,
per campaign and day. Spark propagates the watermark through each stateful
operator, so a window is written once no attribution row for it can come any
more (append mode): `window_end <= watermark - attribution_window`.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.catalog import EVENT_DATE, EVENT_TIME, seconds
from jobs.transforms.silver import attribute_clicks, delay


def _interval(rule: str) -> str:
    return f"{seconds(rule)} seconds"


def _window_columns(window: str = "window") -> list:
    return [
        F.col(f"{window}.start").alias("window_start"),
        F.col(f"{window}.end").alias("window_end"),
    ]


def _per_ad_and_hour(impressions: DataFrame, clicks: DataFrame) -> DataFrame:
    """Impressions and clicked impressions per ad, campaign and performance window."""
    hour = _interval("performance_window")
    attribution = attribute_clicks()(impressions, clicks)
    per_impression = attribution.groupBy(
        F.window("impression_time", hour), "impression_id", "ad_id", "campaign_id"
    ).agg((F.count("click_id") > 0).alias("clicked"))
    return per_impression.groupBy(
        F.window(F.window_time("window"), hour).alias("window"), "ad_id", "campaign_id"
    ).agg(
        F.count(F.lit(1)).alias("impressions"),
        F.sum(F.col("clicked").cast("long")).alias("clicks"),
    )


def _ctr() -> F.Column:
    return (F.col("clicks") / F.col("impressions")).alias("ctr")


def ad_performance_hourly() -> Callable[[DataFrame, DataFrame], DataFrame]:
    def transform(impressions: DataFrame, clicks: DataFrame) -> DataFrame:
        per_ad = _per_ad_and_hour(impressions, clicks)
        return per_ad.select(
            *_window_columns(),
            "ad_id",
            "campaign_id",
            "impressions",
            "clicks",
            _ctr(),
            F.to_date("window.start").alias(EVENT_DATE),
        )

    return transform


def campaign_daily() -> Callable[[DataFrame, DataFrame], DataFrame]:
    """Per campaign and UTC day: the day's hourly rows of the campaign summed."""

    def transform(impressions: DataFrame, clicks: DataFrame) -> DataFrame:
        per_ad = _per_ad_and_hour(impressions, clicks)
        per_day = per_ad.groupBy(
            F.window(F.window_time("window"), _interval("campaign_window")).alias("day"),
            "campaign_id",
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
