"""Reference points on the same landing files as the lakehouse.

- The practical ceiling: a Spark batch job that only reads the landing JSON
  (with the sources' schemas) and writes Parquet. Run as its own process:
  `python -m benchmarks.references ceiling <data-root> <out-dir>`; it prints
  its figures as one JSON line.
- What a single-machine user might run instead: DuckDB computing the gold
  tables from the landing files in one batch (same rules, from the catalog:
  valid rows only, first copy of each event id, the attribution window,
  sliding windows, user status at the final watermark).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from jobs.catalog import ACTIONS, SOURCES
from jobs.catalog import seconds as rule_seconds
from jobs.transforms.landing import EARLIEST_EVENT_TIME, ISO_TIMESTAMP

PARQUET = "(FORMAT parquet, COMPRESSION snappy)"


def spark_ceiling(root: Path, out: Path) -> dict[str, Any]:
    from include.settings import Settings
    from include.spark import get_spark
    from include.storage.landing import LANDING_FILES
    from jobs.schemas import event_schema

    settings = Settings.load(data_root=root)
    started = time.perf_counter()
    spark = get_spark(settings, app_name="bench-ceiling", streaming=False)
    startup = time.perf_counter() - started
    shutil.rmtree(out, ignore_errors=True)
    began = time.perf_counter()
    for source in SOURCES.values():
        (
            spark.read.schema(event_schema(source))
            .option("pathGlobFilter", LANDING_FILES)
            .json(str(settings.landing / source.name))
            .write.parquet(str(out / source.name))
        )
    seconds = time.perf_counter() - began
    rows = sum(spark.read.parquet(str(out / s)).count() for s in SOURCES)
    return {"seconds": round(seconds, 2), "startup_seconds": round(startup, 2), "rows": rows}


def _landing(landing: Path, source: str) -> str:
    """A source's accepted events, first copy of each id: the bronze rules, then silver's dedup."""
    spec = SOURCES[source]
    columns = ", ".join(f"{name}: 'JSON'" for name in spec.fields)
    strings = " AND ".join(f"json_type({name}) = 'VARCHAR'" for name in spec.fields)
    values = ", ".join(f"{name} ->> '$' AS {name}" for name in spec.string_fields)
    key = spec.string_fields[0]
    time = "try_cast(event_time ->> '$' AS TIMESTAMPTZ)"
    return f"""
        SELECT {values}, {time} AS event_time
        FROM read_json('{landing / source}/*', format = 'newline_delimited',
                       columns = {{{columns}}}, ignore_errors = true, filename = true)
        WHERE {strings} AND regexp_matches(event_time ->> '$', '{ISO_TIMESTAMP}')
          AND {time} >= TIMESTAMPTZ '{EARLIEST_EVENT_TIME.isoformat()}'
        QUALIFY row_number() OVER (PARTITION BY {key} ORDER BY filename) = 1
    """


def duckdb_gold(root: Path, out: Path) -> dict[str, Any]:
    """The gold tables from landing/ with DuckDB, written as Parquet; seconds and row counts."""
    import duckdb

    landing = root / "landing"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    actions = ", ".join(f"'{a}'" for a in ACTIONS)
    delay = rule_seconds("user_actions_delay")
    attribution, hour = rule_seconds("attribution_window"), rule_seconds("performance_window")
    length, slide = rule_seconds("actions_window"), rule_seconds("actions_slide")
    inactivity = rule_seconds("inactivity_timeout")
    started = time.perf_counter()
    db = duckdb.connect()
    db.execute("SET TimeZone = 'UTC'")
    db.execute(f"CREATE TEMP TABLE impressions AS {_landing(landing, 'impressions')}")
    db.execute(f"CREATE TEMP TABLE clicks AS {_landing(landing, 'clicks')}")
    db.execute(
        f"CREATE TEMP TABLE actions AS SELECT * FROM ({_landing(landing, 'user_actions')}) "
        f"WHERE action IN ({actions})"
    )
    gold = {
        "ad_performance_hourly": f"""
            WITH per_impression AS (
                SELECT time_bucket(INTERVAL {hour} second, i.event_time) AS window_start,
                       i.impression_id, i.ad_id, i.campaign_id,
                       count(c.click_id) > 0 AS clicked
                FROM impressions i LEFT JOIN clicks c
                  ON c.impression_id = i.impression_id
                 AND c.event_time BETWEEN i.event_time
                                      AND i.event_time + INTERVAL {attribution} second
                GROUP BY ALL)
            SELECT window_start, window_start + INTERVAL {hour} second AS window_end, ad_id,
                   campaign_id, count(*) AS impressions, sum(clicked::BIGINT) AS clicks,
                   sum(clicked::BIGINT) / count(*) AS ctr, window_start::DATE AS event_date
            FROM per_impression GROUP BY window_start, ad_id, campaign_id""",
        "actions_10min": f"""
            WITH starts AS (
                SELECT time_bucket(INTERVAL {slide} second, event_time) AS last_start, action
                FROM actions),
            windows AS (
                SELECT last_start - INTERVAL ({slide} * k) second AS window_start, action
                FROM starts, range({length} // {slide}) AS offsets(k))
            SELECT window_start, window_start + INTERVAL {length} second AS window_end, action,
                   count(*) AS actions, window_start::DATE AS event_date
            FROM windows GROUP BY window_start, action""",
        "user_status": f"""
            WITH latest AS (
                SELECT user_id, action, event_time FROM actions
                QUALIFY row_number() OVER (
                    PARTITION BY user_id ORDER BY event_time DESC, event_id DESC) = 1),
            mark AS (SELECT max(event_time) - INTERVAL {delay} second AS watermark FROM actions)
            SELECT user_id,
                   CASE WHEN action = 'logout' THEN 'offline'
                        WHEN event_time + INTERVAL {inactivity} second < watermark THEN 'inactive'
                        ELSE 'active' END AS status,
                   action AS last_action, event_time AS last_event_time
            FROM latest, mark""",
    }
    for name, query in gold.items():
        db.execute(f"COPY ({query}) TO '{out / name}.parquet' {PARQUET}")
    seconds = time.perf_counter() - started
    rows = {
        name: db.execute(f"SELECT count(*) FROM '{out / name}.parquet'").fetchone()[0]  # type: ignore[index]
        for name in gold
    }
    return {"seconds": round(seconds, 2), "rows": rows}


if __name__ == "__main__":
    command, root, out = sys.argv[1:4]
    if command != "ceiling":
        raise SystemExit("usage: python -m benchmarks.references ceiling <data-root> <out-dir>")
    print(json.dumps(spark_ceiling(Path(root), Path(out))))
