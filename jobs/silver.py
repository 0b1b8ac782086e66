"""Silver driver: bronze -> deduplicated events -> attribution and sessions.

Every query is `availableNow`, reads the previous layer's Delta table as a
stream and has its own checkpoint under `checkpoints/silver/<table>`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING

from include.checkpoints import REBUILT_BY_BACKFILL, read_sidecar, restart_version
from include.delta import StreamSink, read_stream
from include.settings import Settings
from jobs.contract import (
    CLICKS,
    EVENT_DATE,
    IMPRESSIONS,
    SOURCES,
    TABLE_KEYS,
    USER_ACTIONS,
    SourceSpec,
    table_schema,
)
from jobs.late import record_late_dates
from jobs.progress import StageResult
from jobs.streaming import run_available_now
from jobs.transforms.silver import attribute_clicks, dedupe_events
from jobs.transforms.user_state import sessionize_user_actions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def write_table(
    spark: SparkSession,
    settings: Settings,
    layer: str,
    table: str,
    build: Callable[[], DataFrame],
    sources: Sequence[tuple[str, str]],
    merge_keys: list[str] | None = None,
) -> StageResult:
    """Stream the DataFrame `build` makes into `<layer>/<table>` with one checkpoint;
    the common driver step. It is built only if the query has new input to read
    in `sources`, the (layer, table) pairs it streams.

    Tables with `event_date` are partitioned by it; `merge_keys` upserts instead
    of appending (update output mode). The first run of a stream `lakehouse
    recover` restarted reads its sources whole, to rebuild its state, and
    writes only rows whose keys the backfill did not write.
    """
    schema = table_schema(layer, table)
    checkpoint = settings.checkpoint(layer, table)
    rebuilt = bool(read_sidecar(checkpoint).get(REBUILT_BY_BACKFILL))
    sink = StreamSink(
        spark,
        settings.table(layer, table),
        schema,
        checkpoint,
        partition_by=[EVENT_DATE] if EVENT_DATE in schema.names else [],
        merge_keys=merge_keys or [],
        insert_new_keys=TABLE_KEYS[(layer, table)] if rebuilt and not merge_keys else [],
    )
    output_mode = "update" if merge_keys else "append"
    source_paths = [settings.table(*source) for source in sources]
    read_before = read_sidecar(checkpoint).get("read_versions", {})
    result = run_available_now(
        f"{layer}/{table}",
        build,
        checkpoint,
        sink,
        [sink.table_path],
        output_mode,
        sources=source_paths,
        after_run=lambda done: record_late_dates(spark, settings, done, source_paths, read_before),
    )
    result.rows_out = {table: sink.rows_written}
    return result


def source_stream(
    spark: SparkSession, settings: Settings, source: tuple[str, str], query: tuple[str, str]
) -> DataFrame:
    """The appends to table `source` (layer, name) as a stream, for the query writing `query`.

    A backfill recomputes what is downstream itself, so its commits say
    `dataChange=false` and every stream skips them; streams of silver tables
    also skip any other commit that rewrites rows. A new stream, and one
    `lakehouse recover` restarted, reads the table as it is now, then each
    new version (a checkpoint of lakehouse 0.2's `recover` may name where to start).
    """
    path = settings.table(*source)
    return read_stream(
        spark,
        path,
        skip_change_commits=source[0] == "silver",
        starting_version=restart_version(settings.checkpoint(*query), path),
    )


def run_silver(spark: SparkSession, settings: Settings) -> Iterator[StageResult]:
    def read(layer: str, table: str, query: str) -> DataFrame:
        return source_stream(spark, settings, (layer, table), ("silver", query))

    def deduplicated(spec: SourceSpec) -> DataFrame:
        return read("bronze", spec.name, spec.name).transform(dedupe_events(spec))

    for name, spec in SOURCES.items():
        yield write_table(
            spark, settings, "silver", name, partial(deduplicated, spec), [("bronze", name)]
        )
    attribution = "ad_attribution"
    yield write_table(
        spark,
        settings,
        "silver",
        attribution,
        lambda: attribute_clicks(
            read("silver", IMPRESSIONS.name, attribution), read("silver", CLICKS.name, attribution)
        ),
        [("silver", IMPRESSIONS.name), ("silver", CLICKS.name)],
    )
    sessions = "user_sessions"
    yield write_table(
        spark,
        settings,
        "silver",
        sessions,
        lambda: read("silver", USER_ACTIONS.name, sessions).transform(sessionize_user_actions()),
        [("silver", USER_ACTIONS.name)],
    )
