"""Batch backfill of a date range: recompute, validate, then check parity with streaming.

check_request -> backfill -> validate -> parity

Trigger it from the UI with the form (start date, end date, layers), or let
Airflow create runs: `airflow backfill create --dag-id lakehouse_backfill
--from-date ... --to-date ...` runs it once per day of its daily schedule,
each run covering its data interval. Unpaused, it runs every night
`lakehouse backfill --pending`: every date holding events the streams
dropped as late since its last backfill, whatever day they belong to (then
parity checks yesterday).

check_request validates the form in plain Python before any Spark job starts:
dates parse, start <= end, known layers.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG, CronDataIntervalTimetable, Param, chain, task

from include.orchestration import DEFAULT_ARGS, TAGS, WRITERS_POOL, lakehouse_submit
from jobs.catalog import DERIVED_LAYERS

with DAG(
    dag_id="lakehouse_backfill",
    description="recompute silver and gold for a date range in batch, then validate and diff",
    # Data intervals of whole UTC days, each run after its day has ended.
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=[*TAGS, "backfill"],
    doc_md=__doc__,
    params={
        "start": Param(
            None,
            type=["null", "string"],
            format="date",
            title="Start date",
            description="First event date (UTC), inclusive. Empty: the run's data interval.",
        ),
        "end": Param(
            None,
            type=["null", "string"],
            format="date",
            title="End date",
            description="Last event date (UTC), inclusive.",
        ),
        "layers": Param(
            list(DERIVED_LAYERS),
            type="array",
            items={"type": "string", "enum": list(DERIVED_LAYERS)},
            minItems=1,
            uniqueItems=True,
            title="Layers",
            description="Which layers to recompute (gold is computed from bronze as well).",
        ),
    },
):

    @task(multiple_outputs=True, retries=0)
    def check_request(params: Any = None, dag_run: Any = None) -> dict[str, list[str]]:
        """The range and the commands to run; a clear error for a bad form."""
        from jobs.dates import backfill_request, covered_interval

        interval = covered_interval(
            dag_run.run_type,
            dag_run.logical_date,
            (dag_run.data_interval_start, dag_run.data_interval_end),
        )
        request = backfill_request(
            params["start"],
            params["end"],
            params["layers"],
            interval,
            scheduled=dag_run.run_type == "scheduled",
        )
        what = (
            "the pending dates"
            if request.pending
            else f"{request.dates.start}..{request.dates.end}"
        )
        print(f"backfill {what}, layers {request.layers}")
        return request.commands()

    request = check_request()
    chain(
        request,
        lakehouse_submit("backfill", request["backfill"], pool=WRITERS_POOL),
        lakehouse_submit("validate", request["validate"]),
        lakehouse_submit("parity", request["parity"]),
    )
