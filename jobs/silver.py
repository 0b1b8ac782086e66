"""Silver driver: bronze -> deduplicated events -> attribution and sessions.

Every query is `availableNow`, reads the previous layer's Delta table as a
stream and has its own checkpoint under `checkpoints/silver/<table>`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from include.delta import DeltaStreamSink, read_stream
from include.settings import Settings
from jobs.contract import CLICKS, EVENT_DATE, IMPRESSIONS, SOURCES, USER_ACTIONS, table_schema
from jobs.progress import StageResult
from jobs.streaming import run_available_now
from jobs.transforms.silver import attribute_clicks, dedupe_events
from jobs.transforms.user_state import sessionize_user_actions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def write_table(
    settings: Settings,
    layer: str,
    table: str,
    frame: DataFrame,
    merge_keys: list[str] | None = None,
) -> StageResult:
    """Stream `frame` into `<layer>/<table>` with one checkpoint; the common driver step.

    Tables with `event_date` are partitioned by it; `merge_keys` upserts instead
    of appending (update output mode).
    """
    schema = table_schema(layer, table)
    checkpoint = settings.checkpoint(layer, table)
    sink = DeltaStreamSink(
        settings.table(layer, table),
        schema,
        checkpoint,
        partition_by=[EVENT_DATE] if EVENT_DATE in schema.names else [],
        merge_keys=merge_keys or [],
    )
    output_mode = "update" if merge_keys else "append"
    result = run_available_now(f"{layer}/{table}", frame, checkpoint, sink, output_mode)
    result.rows_out = {table: sink.rows_written}
    return result


def read_silver(spark: SparkSession, settings: Settings, table: str) -> DataFrame:
    """A silver table as a stream.

    A backfill replaces silver partitions and recomputes what is downstream
    itself: streams of silver tables skip such commits.
    """
    return read_stream(spark, settings.table("silver", table), skip_change_commits=True)


def run_silver(spark: SparkSession, settings: Settings) -> Iterator[StageResult]:
    def bronze(source: str) -> DataFrame:
        return read_stream(spark, settings.table("bronze", source))

    def silver(table: str) -> DataFrame:
        return read_silver(spark, settings, table)

    for name, spec in SOURCES.items():
        yield write_table(settings, "silver", name, bronze(name).transform(dedupe_events(spec)))
    yield write_table(
        settings,
        "silver",
        "ad_attribution",
        attribute_clicks(silver(IMPRESSIONS.name), silver(CLICKS.name)),
    )
    yield write_table(
        settings,
        "silver",
        "user_sessions",
        silver(USER_ACTIONS.name).transform(sessionize_user_actions()),
    )
