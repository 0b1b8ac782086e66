"""Silver: deduplicated events and click attribution.

Each transform works on a streaming or a batch DataFrame. Watermarks are
declared here (no-ops in batch); what batch needs instead, the closing rule
measured against the batch watermark, is a separate, explicit step.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakehouse.catalog import EVENT_DATE, EVENT_TIME, EXTRA_FIELDS, SOURCES, seconds
from lakehouse.transforms.landing import BLANK


def delay(source: str) -> str:
    """A source's watermark delay, as `withWatermark` takes it."""
    return f"{seconds(SOURCES[source].delay_rule)} seconds"


# The order in which copies of an event arrived (docs/contract.md, section 2): the
# ingestion time, then a Kafka message's partition and offset, or a landing line's file
# and line number (bronze's bookkeeping columns; nulls, first, in rows of older versions).
ARRIVAL_ORDER = (
    "_ingested_at",
    "_kafka_partition",
    "_kafka_offset",
    "_source_file",
    "_source_line",
)


# One delivery of an event: a landing line (its file and line number) or a Kafka message
# (`kafka:<topic>/<partition>/<offset>` in `_source_file`, no line), as a 64-bit hash:
# the state then keeps 8 bytes beside each id, not the file's URI (two copies of one id
# whose deliveries share a hash, about 1 in 2^64, would be one row of the state).
DELIVERY = "_delivery"


def state_key(source: str) -> list[str]:
    """The columns a silver event stream's deduplication state is keyed on."""
    return [SOURCES[source].key, DELIVERY]


def dedupe_events(source: str) -> Callable[[DataFrame], DataFrame]:
    """One row per event id, first arrival wins.

    Batch: the first copy in `ARRIVAL_ORDER`. Streaming: Spark keeps each
    delivery of an event (`state_key`) until the watermark passes the event
    (dropDuplicatesWithinWatermark), so a delivery read twice is one row, and
    events older than the watermark are dropped and counted by Spark. The
    driver then applies this transform once more to each micro-batch, in
    batch, so the copies a micro-batch holds resolve as a batch resolves them,
    and writes only ids the table does not hold (the catalog's
    `first_write_wins`): a copy in a later micro-batch, however late, is not a
    second row.
    """
    spec = SOURCES[source]
    key = spec.key
    watermark_delay = delay(source)

    def transform(events: DataFrame) -> DataFrame:
        if events.isStreaming:
            return (
                events.withColumn(DELIVERY, F.xxhash64("_source_file", "_source_line"))
                .withWatermark(EVENT_TIME, watermark_delay)
                .dropDuplicatesWithinWatermark(state_key(source))
            )
        # A bronze table of an older version gains `_source_line` with its next
        # write; its rows hold null there anyway.
        order = [column for column in ARRIVAL_ORDER if column in events.columns]
        first = Window.partitionBy(key).orderBy(*order)
        unique = events.withColumn("_arrival", F.row_number().over(first)).where("_arrival = 1")
        return unique.select(
            *spec.fields,
            F.to_date(EVENT_TIME).alias(EVENT_DATE),
            *(promoted(events, name).alias(name) for name in spec.optional_fields),
        )

    return transform


def promoted(events: DataFrame, name: str) -> Column:
    """An optional field of bronze rows: its column, or, in a row written before the
    catalog declared it, the value bronze kept in `_extra_fields`, taken as the parser
    takes a declared field: a string that is not blank, else null (a value of another
    JSON type stays in `_extra_fields` only; the parser now quarantines such a line)."""
    declared = F.col(name) if name in events.columns else F.lit(None).cast("string")
    if EXTRA_FIELDS not in events.columns:
        return declared
    # `name` comes from the catalog.
    kept = F.expr(f"try_variant_get(try_parse_json({EXTRA_FIELDS}), '$.{name}')")
    text = F.try_variant_get(kept, "$", "string")
    sent = F.when((F.schema_of_variant(kept) == "STRING") & ~text.rlike(BLANK), text)
    return F.coalesce(declared, sent)


def attribute_clicks() -> Callable[[DataFrame, DataFrame], DataFrame]:
    """Left outer interval join: each impression with each click on it within the window.

    A click matches when `impression_time <= click_time <= impression_time +
    attribution_window`. Streaming emits a matched pair as soon as both sides
    are seen, and an impression with null click columns once the watermark
    guarantees that no match can come any more.
    """
    window = F.expr(f"INTERVAL {seconds('attribution_window')} SECONDS")
    impressions_delay, clicks_delay = delay("impressions"), delay("clicks")

    def transform(impressions: DataFrame, clicks: DataFrame) -> DataFrame:
        shown = impressions.select(
            "impression_id",
            "ad_id",
            "campaign_id",
            "user_id",
            F.col(EVENT_TIME).alias("impression_time"),
        ).withWatermark("impression_time", impressions_delay)
        clicked = clicks.select(
            F.col("impression_id").alias("clicked_impression_id"),
            "click_id",
            F.col(EVENT_TIME).alias("click_time"),
        ).withWatermark("click_time", clicks_delay)
        joined = shown.join(
            clicked,
            on=(
                (F.col("impression_id") == F.col("clicked_impression_id"))
                & (F.col("click_time") >= F.col("impression_time"))
                & (F.col("click_time") <= F.col("impression_time") + window)
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

    return transform


# The catalog tables each transform computes (looked up by `lakehouse.drivers.tables`).
TRANSFORMS: dict[str, Callable[..., Callable[..., DataFrame]]] = {
    "silver/impressions": dedupe_events,
    "silver/clicks": dedupe_events,
    "silver/user_actions": dedupe_events,
    "silver/ad_attribution": attribute_clicks,
}
