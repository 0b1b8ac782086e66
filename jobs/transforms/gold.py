"""Gold: event-time window aggregates.

`ad_performance_hourly` chains two window aggregations after the attribution
join in one streaming query: first one row per impression and hour (did any
click match?), then per ad, campaign and hour. Spark propagates the
watermark through each stateful operator, so an hour is written once no
attribution row for it can come any more (append mode).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.contract import EVENT_DATE, EVENT_TIME, USER_ACTIONS
from jobs.transforms.silver import delay

HOUR = "1 hour"


def _window_columns(window: str = "window") -> list:
    return [
        F.col(f"{window}.start").alias("window_start"),
        F.col(f"{window}.end").alias("window_end"),
    ]


def ad_performance_hourly(attribution: DataFrame) -> DataFrame:
    per_impression = attribution.groupBy(
        F.window("impression_time", HOUR), "impression_id", "ad_id", "campaign_id"
    ).agg((F.count("click_id") > 0).alias("clicked"))
    per_ad = per_impression.groupBy(
        F.window(F.window_time("window"), HOUR).alias("window"), "ad_id", "campaign_id"
    ).agg(
        F.count(F.lit(1)).alias("impressions"),
        F.sum(F.col("clicked").cast("long")).alias("clicks"),
    )
    return per_ad.select(
        *_window_columns(),
        "ad_id",
        "campaign_id",
        "impressions",
        "clicks",
        (F.col("clicks") / F.col("impressions")).alias("ctr"),
        F.to_date("window.start").alias(EVENT_DATE),
    )


def actions_per_window(actions: DataFrame) -> DataFrame:
    """Actions per 10-minute window sliding every 5 minutes, per action."""
    counted = (
        actions.withWatermark(EVENT_TIME, delay(USER_ACTIONS))
        .groupBy(F.window(EVENT_TIME, "10 minutes", "5 minutes"), "action")
        .agg(F.count(F.lit(1)).alias("actions"))
    )
    return counted.select(
        *_window_columns(), "action", "actions", F.to_date("window.start").alias(EVENT_DATE)
    )
