"""The sources and tables of ../shared/CONTRACT.md, as code.

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
