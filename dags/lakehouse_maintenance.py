"""Nightly table maintenance: compact small files, vacuum, expire old reports.

One task, `lakehouse maintain`, in the writers pool so it never runs beside
an incremental run or a backfill. Streaming micro-batches leave many small
files; compaction commits are skipped by the streams (`dataChange=false`).
Vacuum keeps 7 days of history; reports, Data Docs pages and parity scratch
folders are kept 30 days.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG

from include.orchestration import DEFAULT_ARGS, TAGS, WRITERS_POOL, lakehouse_submit

with DAG(
    dag_id="lakehouse_maintenance",
    description="compact and vacuum every Delta table, expire old reports",
    schedule="0 3 * * *",
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=[*TAGS, "maintenance"],
    doc_md=__doc__,
):
    lakehouse_submit(
        "maintain",
        ["maintain", "--retain-hours", "168", "--keep-days", "30"],
        pool=WRITERS_POOL,
        execution_timeout=dt.timedelta(hours=2),
    )
