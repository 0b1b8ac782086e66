"""Gold driver: silver -> windowed aggregates and current user status."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from include.settings import Settings
from jobs.contract import CLICKS, IMPRESSIONS, USER_ACTIONS
from jobs.progress import StageResult
from jobs.silver import read_silver, write_table
from jobs.transforms.gold import actions_per_window, ad_performance_hourly
from jobs.transforms.silver import attribute_clicks
from jobs.transforms.user_state import track_user_status

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def run_gold(spark: SparkSession, settings: Settings) -> Iterator[StageResult]:
    def silver(table: str) -> DataFrame:
        return read_silver(spark, settings, table)

    # The attribution join and both hourly aggregations run in one query, so
    # Spark carries the watermark from the join into the windows.
    attribution = attribute_clicks(silver(IMPRESSIONS.name), silver(CLICKS.name))
    yield write_table(settings, "gold", "ad_performance_hourly", ad_performance_hourly(attribution))
    yield write_table(
        settings, "gold", "actions_10min", actions_per_window(silver(USER_ACTIONS.name))
    )
    yield write_table(
        settings,
        "gold",
        "user_status",
        silver(USER_ACTIONS.name).transform(track_user_status()),
        merge_keys=["user_id"],
    )
