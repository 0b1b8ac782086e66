"""Backfill of a date range, from the trigger form: recompute, validate, check parity.

check_request -> backfill -> validate -> parity

Trigger it from the UI (the Trigger button opens the form): a start and an
end date (UTC, both inclusive) and the layers to recompute. It has no
schedule, and so starts unpaused: triggering it starts this one run and
nothing else. When you press Trigger, Airflow checks each field (a date,
required, known layers) and creates no run for a form that fails: the form
shows the reason under the field. The range as a whole is checked by the
run's first task, `check_request`, within seconds of the click, even while
another backfill runs: an end before the start, or a range of more than 366
days without the "Yes, the whole range" box, fails it with a one-line reason
in its log and in the run's note (reload the run's page to see the note),
before any Spark job; the run shows as failed. A sound range becomes the
run's note. A run created some other way (`airflow dags trigger -c
'{...}'`) is checked the same way.

Its `backfill`, `validate` and `parity` tasks each wait until no run of
`lakehouse_incremental` is in progress, then for the writers pool, where
Spark jobs that write or compare tables take turns: two backfills triggered
together run one after the other. The backfill also recomputes the dates
outside the range that hold other copies of its dates' event ids, so that
each id stays on one date (its log names them).

For the dates that received late data, the nightly `lakehouse_backfill`
does it on its own; `airflow backfill create` works on that one too.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG, Param, chain, task

from lakehouse.orchestration import (
    DEFAULT_ARGS,
    DERIVED_LAYERS,
    FORM_MAX_DAYS,
    TAGS,
    backfill_request,
    backfill_tasks,
    described,
    request_commands,
)

with DAG(
    **described(
        "lakehouse_backfill_range",
        "recompute silver and gold for a date range in batch, then validate and diff",
    ),
    schedule=None,
    # Nothing to schedule, so nothing to pause: the trigger dialog has no "Unpause"
    # box, and a refused form changes nothing.
    is_paused_upon_creation=False,
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    # Runs do not wait for each other whole, so a form is checked the moment it is
    # triggered; their Spark jobs take turns in the writers pool.
    default_args=DEFAULT_ARGS,
    tags=[*TAGS, "backfill"],
    doc_md=__doc__,
    params={
        "start": Param(
            type="string",
            format="date",
            title="Start date",
            description="First event date (UTC), inclusive. Airflow's Logical Date above "
            "only labels the run: these dates decide what is recomputed.",
        ),
        "end": Param(
            type="string",
            format="date",
            title="End date",
            description="Last event date (UTC), inclusive; not before the start.",
        ),
        "layers": Param(
            list(DERIVED_LAYERS),
            type="array",
            items={"type": "string", "enum": list(DERIVED_LAYERS)},
            # A list of examples makes the form a multiple choice, not free text.
            examples=list(DERIVED_LAYERS),
            minItems=1,
            uniqueItems=True,
            title="Layers",
            description="Which layers to recompute (gold is computed from bronze as well).",
        ),
        "whole_range": Param(
            False,
            type="boolean",
            title="Yes, the whole range",
            description=f"Needed for a range longer than {FORM_MAX_DAYS} days, which is "
            "refused without it (most often a mistyped year).",
        ),
    },
):

    @task(multiple_outputs=True, retries=0)
    def check_request(params: Any = None) -> dict[str, list[str]]:
        """The range and the commands to run; a one-line reason for a bad form."""
        return request_commands(
            lambda: backfill_request(
                params["start"], params["end"], params["layers"], params.get("whole_range")
            )
        )

    request = check_request()
    chain(request, *backfill_tasks(request))
