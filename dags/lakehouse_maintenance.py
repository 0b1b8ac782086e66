"""Nightly table maintenance: compact, vacuum, expire old reports, then validate whole tables.

maintain -> validate

Both tasks run in the writers pool, so neither runs beside an incremental
run or a backfill. `maintain`: streaming micro-batches leave many small
files; compaction commits are skipped by the streams (`dataChange=false`).
Vacuum keeps 7 days of history; reports, Data Docs pages and parity scratch
folders are kept 30 days.

`validate` is `lakehouse validate` on every table, whole: the checks a run
makes see only the days its new rows went to, so an event id reused on
another day is caught here. Because it passes on the compacted versions,
the next incremental run checks only rows written after it instead of
re-checking the compacted files.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG

from lakehouse.orchestration import (
    DEFAULT_ARGS,
    TAGS,
    WRITERS_POOL,
    described,
    lakehouse_submit,
    nightly,
)

with DAG(
    **described(
        "lakehouse_maintenance",
        "compact and vacuum every Delta table, expire old reports, validate whole tables",
    ),
    schedule=nightly("0 3 * * *"),
    # Runs each night once deployed, the first at the next 03:00 (no start date); its
    # trigger dialog has no "Unpause" box, which also started the night's missed run.
    is_paused_upon_creation=False,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=[*TAGS, "maintenance"],
    doc_md=__doc__,
):
    maintain = lakehouse_submit(
        "maintain",
        ["maintain", "--retain-hours", "168", "--keep-days", "30"],
        pool=WRITERS_POOL,
        execution_timeout=dt.timedelta(hours=2),
    )
    validate = lakehouse_submit(
        "validate", ["validate"], pool=WRITERS_POOL, execution_timeout=dt.timedelta(hours=2)
    )
    maintain >> validate
