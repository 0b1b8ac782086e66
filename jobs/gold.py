"""Gold driver: silver -> windowed aggregates and current user status."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from include.settings import Settings
from jobs.contract import CLICKS, IMPRESSIONS, USER_ACTIONS
from jobs.progress import StageResult
from jobs.silver import source_stream, write_table
from jobs.transforms.gold import actions_per_window, ad_performance_hourly
from jobs.transforms.silver import attribute_clicks
from jobs.transforms.user_state import track_user_status

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def run_gold(spark: SparkSession, settings: Settings) -> Iterator[StageResult]:
    def silver(table: str, query: str) -> DataFrame:
        return source_stream(spark, settings, ("silver", table), ("gold", query))

    # The attribution join and both hourly aggregations run in one query, so
    # Spark carries the watermark from the join into the windows.
    hourly = "ad_performance_hourly"
    yield write_table(
        spark,
        settings,
        "gold",
        hourly,
        lambda: ad_performance_hourly(
            attribute_clicks(silver(IMPRESSIONS.name, hourly), silver(CLICKS.name, hourly))
        ),
        [("silver", IMPRESSIONS.name), ("silver", CLICKS.name)],
    )
    windows = "actions_10min"
    yield write_table(
        spark,
        settings,
        "gold",
        windows,
        lambda: actions_per_window(silver(USER_ACTIONS.name, windows)),
        [("silver", USER_ACTIONS.name)],
    )
    status = "user_status"
    yield write_table(
        spark,
        settings,
        "gold",
        status,
        lambda: silver(USER_ACTIONS.name, status).transform(track_user_status()),
        [("silver", USER_ACTIONS.name)],
        merge_keys=["user_id"],
    )
