"""Reference points on the same landing files as the lakehouse.

- The practical ceiling: a Spark batch job that only reads the landing
  lines (every line, blank ones too: the lines bronze counts), parses them
  with the sources' schemas and writes Parquet. Run as its own process:
  `python -m benchmarks.references ceiling <data-root> <out-dir>`; it prints
  its figures as one JSON line.
- The same work on a single machine: DuckDB computing every silver and gold
  table from the landing files in one batch (same rules, from the catalog:
  valid rows only, first copy of each event id, the attribution window,
  sessions split by gaps and logouts, hourly, daily and sliding windows,
  user status at the final watermark), each written as Parquet.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from lakehouse.catalog import ACTIONS, SOURCES
from lakehouse.catalog import seconds as rule_seconds
from lakehouse.transforms.landing import EARLIEST_EVENT_TIME, ISO_TIMESTAMP

PARQUET = "(FORMAT parquet, COMPRESSION snappy)"


def spark_ceiling(root: Path, out: Path) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from lakehouse.catalog.schemas import event_schema
    from lakehouse.runtime.settings import Settings
    from lakehouse.runtime.spark import get_spark
    from lakehouse.storage.landing import LANDING_FILES

    settings = Settings.load(data_root=root)
    started = time.perf_counter()
    spark = get_spark(settings, app_name="bench-ceiling", streaming=False)
    startup = time.perf_counter() - started
    shutil.rmtree(out, ignore_errors=True)
    began = time.perf_counter()
    for source in SOURCES.values():
        lines = spark.read.option("pathGlobFilter", LANDING_FILES).text(
            str(settings.landing / source.name)
        )
        parsed = lines.select(F.from_json("value", event_schema(source)).alias("event"))
        parsed.select("event.*").write.parquet(str(out / source.name))
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
        SELECT {values}, {time} AS event_time, {time}::DATE AS event_date
        FROM read_json('{landing / source}/*', format = 'newline_delimited',
                       columns = {{{columns}}}, ignore_errors = true, filename = true)
        WHERE {strings} AND regexp_matches(event_time ->> '$', '{ISO_TIMESTAMP}')
          AND {time} >= TIMESTAMPTZ '{EARLIEST_EVENT_TIME.isoformat()}'
        QUALIFY row_number() OVER (PARTITION BY {key} ORDER BY filename) = 1
    """


def _queries() -> dict[str, str]:
    """Every silver and gold table after the three deduplicated sources, in catalog order."""
    delay = rule_seconds("user_actions_delay")
    attribution, hour = rule_seconds("attribution_window"), rule_seconds("performance_window")
    length, slide = rule_seconds("actions_window"), rule_seconds("actions_slide")
    gap, inactivity = rule_seconds("session_gap"), rule_seconds("inactivity_timeout")
    return {
        "ad_attribution": f"""
            SELECT i.impression_id, i.ad_id, i.campaign_id, i.user_id,
                   i.event_time AS impression_time, c.click_id, c.event_time AS click_time,
                   i.event_date
            FROM impressions i LEFT JOIN clicks c
              ON c.impression_id = i.impression_id
             AND c.event_time BETWEEN i.event_time
                                  AND i.event_time + INTERVAL {attribution} second""",
        "user_sessions": f"""
            WITH ordered AS (
                SELECT user_id, event_id, action, event_time,
                       lag(event_time) OVER w AS previous_time,
                       lag(action) OVER w AS previous_action
                FROM user_actions WINDOW w AS (PARTITION BY user_id ORDER BY event_time, event_id)),
            numbered AS (
                SELECT *, sum(CASE WHEN previous_time IS NULL
                                     OR previous_action = 'logout'
                                     OR event_time > previous_time + INTERVAL {gap} second
                                   THEN 1 ELSE 0 END)
                          OVER (PARTITION BY user_id ORDER BY event_time, event_id
                                ROWS UNBOUNDED PRECEDING) AS session
                FROM ordered)
            SELECT md5(user_id || min(event_time)::VARCHAR) AS session_id, user_id,
                   min(event_time) AS session_start, max(event_time) AS session_end,
                   count(*) AS action_count,
                   CASE WHEN arg_max(action, event_time) = 'logout' THEN 'logout'
                        ELSE 'timeout' END AS end_reason,
                   min(event_time)::DATE AS event_date
            FROM numbered GROUP BY user_id, session""",
        "ad_performance_hourly": f"""
            WITH per_impression AS (
                SELECT time_bucket(INTERVAL {hour} second, impression_time) AS window_start,
                       impression_id, ad_id, campaign_id, count(click_id) > 0 AS clicked
                FROM ad_attribution GROUP BY ALL)
            SELECT window_start, window_start + INTERVAL {hour} second AS window_end, ad_id,
                   campaign_id, count(*) AS impressions, sum(clicked::BIGINT) AS clicks,
                   sum(clicked::BIGINT) / count(*) AS ctr, window_start::DATE AS event_date
            FROM per_impression GROUP BY window_start, ad_id, campaign_id""",
        "campaign_daily": """
            SELECT campaign_id, window_start::DATE AS day, sum(impressions) AS impressions,
                   sum(clicks) AS clicks, sum(clicks) / sum(impressions) AS ctr
            FROM ad_performance_hourly GROUP BY campaign_id, window_start::DATE""",
        "actions_10min": f"""
            WITH starts AS (
                SELECT time_bucket(INTERVAL {slide} second, event_time) AS last_start, action
                FROM user_actions),
            windows AS (
                SELECT last_start - INTERVAL ({slide} * k) second AS window_start, action
                FROM starts, range({length} // {slide}) AS offsets(k))
            SELECT window_start, window_start + INTERVAL {length} second AS window_end, action,
                   count(*) AS actions, window_start::DATE AS event_date
            FROM windows GROUP BY window_start, action""",
        "user_status": f"""
            WITH latest AS (
                SELECT user_id, action, event_time FROM user_actions
                QUALIFY row_number() OVER (
                    PARTITION BY user_id ORDER BY event_time DESC, event_id DESC) = 1),
            mark AS (
                SELECT max(event_time) - INTERVAL {delay} second AS watermark FROM user_actions)
            SELECT user_id,
                   CASE WHEN action = 'logout' THEN 'offline'
                        WHEN event_time + INTERVAL {inactivity} second < watermark THEN 'inactive'
                        ELSE 'active' END AS status,
                   action AS last_action, event_time AS last_event_time
            FROM latest, mark""",
    }


def duckdb_tables(root: Path, out: Path) -> dict[str, Any]:
    """Every silver and gold table from `root`/landing with DuckDB, each written as Parquet
    to `out`/<table>.parquet; seconds (reading, computing and writing) and row counts."""
    import duckdb

    landing = root / "landing"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    actions = ", ".join(f"'{a}'" for a in ACTIONS)
    started = time.perf_counter()
    db = duckdb.connect()
    db.execute("SET TimeZone = 'UTC'")
    tables = {
        "impressions": _landing(landing, "impressions"),
        "clicks": _landing(landing, "clicks"),
        "user_actions": f"SELECT * FROM ({_landing(landing, 'user_actions')}) "
        f"WHERE action IN ({actions})",
        **_queries(),
    }
    for name, query in tables.items():
        # Each table once, in memory, as later ones read it, and as a Parquet file.
        db.execute(f"CREATE TEMP TABLE {name} AS {query}")
        db.execute(f"COPY {name} TO '{out / name}.parquet' {PARQUET}")
    seconds = time.perf_counter() - started
    rows = {
        name: db.execute(f"SELECT count(*) FROM {name}").fetchone()[0]  # type: ignore[index]
        for name in tables
    }
    return {"seconds": round(seconds, 2), "rows": rows}


if __name__ == "__main__":
    command, root, out = sys.argv[1:4]
    if command != "ceiling":
        raise SystemExit("usage: python -m benchmarks.references ceiling <data-root> <out-dir>")
    print(json.dumps(spark_ceiling(Path(root), Path(out))))
