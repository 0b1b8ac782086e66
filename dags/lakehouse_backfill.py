"""Nightly backfill: recompute every date that received late data, validate, check parity.

check_request -> backfill -> validate -> parity

At each UTC midnight it runs `lakehouse backfill --pending`: every date
holding events the streams dropped as late since its last backfill, whatever
day they belong to, and the dates holding other copies of those dates' event
ids (its log names them); then parity checks the day that just ended. The
run's note names the dates it recomputed and what parity compared (a day
with no rows in any table is said to be one, not to agree). A manual trigger
does the same at once, and only that: the DAG is unpaused from the start, so
the trigger dialog has no "Unpause" box, and it has no start date, so its
first scheduled run is the first midnight after it was deployed, not one at
deployment.

Airflow's own backfills work on it: `airflow backfill create --dag-id
lakehouse_backfill --from-date 2026-11-02 --to-date 2026-11-04` creates one
run per midnight in that span, and each recomputes the day that ended then,
as the nightly run does: here 2026-11-01, 11-02 and 11-03 (Airflow refuses
to backfill a DAG without a schedule).

Its `backfill`, `validate` and `parity` tasks each wait until no run of
`lakehouse_incremental` is in progress (a backfill or parity refuses while
the streams have rows to write), then take turns in the writers pool.

For a date range of your choice from the UI, trigger
`lakehouse_backfill_range` instead: its form takes the range and the layers,
and it has no schedule, so triggering it never starts anything else.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG, chain, task

from lakehouse.orchestration import (
    DEFAULT_ARGS,
    TAGS,
    backfill_tasks,
    described,
    nightly,
    nightly_request,
    request_commands,
)

with DAG(
    **described(
        "lakehouse_backfill", "nightly: recompute the dates that received late data, validate, diff"
    ),
    # A run at each UTC midnight, its data interval the day that ended. Without a start
    # date, the first is the next midnight (`nightly`: whatever the hour it is deployed).
    schedule=nightly("0 0 * * *", interval=dt.timedelta(days=1)),
    # A nightly job runs nightly once deployed, and its trigger dialog has no "Unpause"
    # box (ticked by default, it also started the scheduled run of the day that ended).
    is_paused_upon_creation=False,
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
