"""The sources and tables of the lakehouse contract (CONTRACT.md), as code.

One definition per source: its fields (in contract order), which field holds
the event time, allowed enum values and its watermark delay. Schemas of the
bronze and quarantine tables derive from it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from pyspark.sql import types as T

EVENT_TIME = "event_time"
ACTIONS = ("login", "view", "click", "purchase", "logout")


@dataclass(frozen=True)
class SourceSpec:
    name: str
    string_fields: tuple[str, ...]
    watermark: dt.timedelta
    enums: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def fields(self) -> tuple[str, ...]:
        return (*self.string_fields, EVENT_TIME)

    @property
    def event_schema(self) -> T.StructType:
        return T.StructType(
            [T.StructField(name, T.StringType()) for name in self.string_fields]
            + [T.StructField(EVENT_TIME, T.TimestampType())]
        )

    @property
    def bronze_schema(self) -> T.StructType:
        return T.StructType(
            [
                *self.event_schema.fields,
                T.StructField("_ingested_at", T.TimestampType()),
                T.StructField("_source_file", T.StringType()),
            ]
        )


IMPRESSIONS = SourceSpec(
    "impressions", ("impression_id", "ad_id", "campaign_id", "user_id"), dt.timedelta(hours=2)
)
CLICKS = SourceSpec(
    "clicks", ("click_id", "impression_id", "ad_id", "user_id"), dt.timedelta(hours=3)
)
USER_ACTIONS = SourceSpec(
    "user_actions",
    ("event_id", "user_id", "action"),
    dt.timedelta(minutes=10),
    enums={"action": ACTIONS},
)
SOURCES: dict[str, SourceSpec] = {s.name: s for s in (IMPRESSIONS, CLICKS, USER_ACTIONS)}

QUARANTINE_SCHEMA = T.StructType(
    [
        T.StructField("raw", T.StringType()),
        T.StructField("reason", T.StringType()),
        # The exact bytes, base64-encoded, when the line is not valid UTF-8
        # (`raw` then shows it with replacement characters).
        T.StructField("raw_base64", T.StringType()),
        T.StructField("_source_file", T.StringType()),
        T.StructField("_ingested_at", T.TimestampType()),
    ]
)

# -- silver and gold (CONTRACT.md section 4) -------------------------------------
# Every silver and gold table carries `event_date`, the UTC date a row belongs
# to for backfills (section 5), and is partitioned by it: a backfill replaces
# whole date partitions atomically.
EVENT_DATE = "event_date"
SESSION_GAP = dt.timedelta(minutes=30)
INACTIVITY = dt.timedelta(minutes=60)
ATTRIBUTION_WINDOW = dt.timedelta(hours=1)


def _schema(*fields: tuple[str, T.DataType]) -> T.StructType:
    return T.StructType(
        [T.StructField(name, kind) for name, kind in fields]
        + [T.StructField(EVENT_DATE, T.DateType())]
    )


S, TS, L, D = T.StringType(), T.TimestampType(), T.LongType(), T.DoubleType()

SILVER_SCHEMAS: dict[str, T.StructType] = {
    spec.name: T.StructType([*spec.event_schema.fields, T.StructField(EVENT_DATE, T.DateType())])
    for spec in SOURCES.values()
}
SILVER_SCHEMAS["ad_attribution"] = _schema(
    ("impression_id", S),
    ("ad_id", S),
    ("campaign_id", S),
    ("user_id", S),
    ("impression_time", TS),
    ("click_id", S),
    ("click_time", TS),
)
SILVER_SCHEMAS["user_sessions"] = _schema(
    ("session_id", S),
    ("user_id", S),
    ("session_start", TS),
    ("session_end", TS),
    ("action_count", L),
    ("end_reason", S),
)
GOLD_SCHEMAS: dict[str, T.StructType] = {
    "ad_performance_hourly": _schema(
        ("window_start", TS),
        ("window_end", TS),
        ("ad_id", S),
        ("campaign_id", S),
        ("impressions", L),
        ("clicks", L),
        ("ctr", D),
    ),
    "actions_10min": _schema(
        ("window_start", TS), ("window_end", TS), ("action", S), ("actions", L)
    ),
    # A current-state table: one row per user, upserted; not partitioned.
    "user_status": T.StructType(
        [
            T.StructField("user_id", S),
            T.StructField("status", S),
            T.StructField("last_action", S),
            T.StructField("last_event_time", TS),
        ]
    ),
}


# What identifies a row of each silver and gold table (section 4: one row per ...).
TABLE_KEYS: dict[tuple[str, str], list[str]] = {
    **{("silver", spec.name): [spec.string_fields[0]] for spec in SOURCES.values()},
    ("silver", "ad_attribution"): ["impression_id", "click_id"],
    ("silver", "user_sessions"): ["session_id"],
    ("gold", "ad_performance_hourly"): ["ad_id", "campaign_id", "window_start"],
    ("gold", "actions_10min"): ["window_start", "window_end", "action"],
    ("gold", "user_status"): ["user_id"],
}


def table_schema(layer: str, name: str) -> T.StructType:
    """Schema of a silver or gold table."""
    return (SILVER_SCHEMAS if layer == "silver" else GOLD_SCHEMAS)[name]
