"""Silver: deduplicated events and click attribution.

Each transform works on a streaming or a batch DataFrame. Watermarks are
declared here (no-ops in batch); what batch needs instead, the closing rule
measured against the batch watermark, is a separate, explicit step.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from jobs.contract import (
    ATTRIBUTION_WINDOW,
    CLICKS,
    EVENT_DATE,
    EVENT_TIME,
    IMPRESSIONS,
    SourceSpec,
)


def delay(source: SourceSpec) -> str:
    return f"{int(source.watermark.total_seconds())} seconds"


def dedupe_events(source: SourceSpec) -> Callable[[DataFrame], DataFrame]:
    """One row per event id, first arrival wins.

    Streaming: ids are remembered until the watermark passes the event
    (dropDuplicatesWithinWatermark); events older than the watermark are
    dropped and counted by Spark. Batch: the earliest ingested copy.
    """
    key = source.string_fields[0]

    def transform(events: DataFrame) -> DataFrame:
        if events.isStreaming:
            unique = events.withWatermark(EVENT_TIME, delay(source)).dropDuplicatesWithinWatermark(
                [key]
            )
        else:
            first = Window.partitionBy(key).orderBy("_ingested_at", "_source_file")
            unique = events.withColumn("_arrival", F.row_number().over(first)).where("_arrival = 1")
        return unique.select(*source.fields, F.to_date(EVENT_TIME).alias(EVENT_DATE))

    return transform


def attribute_clicks(impressions: DataFrame, clicks: DataFrame) -> DataFrame:
    """Left outer interval join: each impression with each click on it within an hour.

    A click matches when `impression_time <= click_time <= impression_time + 1h`.
    Streaming emits a matched pair as soon as both sides are seen, and an
    impression with null click columns once the watermark guarantees that no
    match can come any more.
    """
    shown = impressions.select(
        "impression_id",
        "ad_id",
        "campaign_id",
        "user_id",
        F.col(EVENT_TIME).alias("impression_time"),
    ).withWatermark("impression_time", delay(IMPRESSIONS))
    clicked = clicks.select(
        F.col("impression_id").alias("clicked_impression_id"),
        "click_id",
        F.col(EVENT_TIME).alias("click_time"),
    ).withWatermark("click_time", delay(CLICKS))
    window_seconds = int(ATTRIBUTION_WINDOW.total_seconds())
    joined = shown.join(
        clicked,
        on=(
            (F.col("impression_id") == F.col("clicked_impression_id"))
            & (F.col("click_time") >= F.col("impression_time"))
            & (
                F.col("click_time")
                <= F.col("impression_time") + F.expr(f"INTERVAL {window_seconds} SECONDS")
            )
        ),
        how="left_outer",
    )
    return joined.select(
        "impression_id",
        "ad_id",
        "campaign_id",
        "user_id",
        "impression_time",
        "click_id",
        "click_time",
        F.to_date("impression_time").alias(EVENT_DATE),
    )
