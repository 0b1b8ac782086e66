"""Nightly backfill: recompute every date that received late data, validate, check parity.

check_request -> backfill -> validate -> parity

Each night (UTC) it runs `lakehouse backfill --pending`: every date holding
events the streams dropped as late since its last backfill, whatever day
they belong to, and the dates holding other copies of those dates' event
ids (its log names them); then parity checks the day that just ended. A
manual trigger does the same at once.

It keeps a daily schedule for Airflow's own backfills too:
`airflow backfill create --dag-id lakehouse_backfill --from-date ...
--to-date ...` creates one run per day, each recomputing its day (Airflow
refuses to backfill a DAG without a schedule).

Its `backfill`, `validate` and `parity` tasks each wait until no run of
`lakehouse_incremental` is in progress (a backfill or parity refuses while
the streams have rows to write). It starts paused: unpausing it (the trigger dialog's box does)
also starts the run of the day that ended.

For a date range of your choice from the UI, trigger
`lakehouse_backfill_range` instead: its form takes the range and the layers,
and it has no schedule, so triggering it never starts anything else.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG, CronDataIntervalTimetable, chain, task

from lakehouse.orchestration import (
    DEFAULT_ARGS,
    TAGS,
    backfill_tasks,
    described,
    nightly_request,
    request_commands,
)

with DAG(
    **described(
        "lakehouse_backfill", "nightly: recompute the dates that received late data, validate, diff"
    ),
    # Data intervals of whole UTC days, each run after its day has ended.
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=[*TAGS, "backfill"],
    doc_md=__doc__,
):

    @task(multiple_outputs=True, retries=0)
    def check_request(dag_run: Any = None) -> dict[str, list[str]]:
        """The pending dates, or the day an `airflow backfill create` run covers."""
        interval = (
            None
            if dag_run.data_interval_start is None
            else (dag_run.data_interval_start, dag_run.data_interval_end)
        )
        return request_commands(
            lambda: nightly_request(dag_run.run_type, interval, dag_run.run_after)
        )

    request = check_request()
    chain(request, *backfill_tasks(request))
