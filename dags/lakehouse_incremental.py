"""Incremental lakehouse run every 15 minutes: one task per layer, each its own quality gate.

bronze -> silver -> gold

A layer task is `lakehouse run --layer L`: its queries with
Trigger.AvailableNow, each table checked right after the query that writes it
(the layer's gate, the same checks as `lakehouse validate --layer L
--new-rows`). A failed blocking check fails the task (exit code 3, not
retried) and nothing downstream runs; the layer's Assets are updated only
when its task passed, so data-aware DAGs only ever see validated tables.
Each layer task's Asset Events tab lists the tables it changed; the run's
own Asset Events tab lists only events that triggered a run (none for a run
started by hand or by the schedule). A layer that passed with warnings stays
green: the run's note and the task's note say so (the grid marks both).

Kafka: when the Airflow Variable `lakehouse_kafka_bootstrap_servers` is set
(Admin > Variables; host:port[,...]), or `LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS` in
Airflow's environment, the bronze task also ingests the topics of the sources
(docs/kafka.md). The Variable wins.

Set `LAKEHOUSE_INCREMENTAL_SCHEDULE` to another cron expression, or to `none`
for manual runs only (`make airflow-up`'s default: there each click on
Trigger runs it once, now). Without a schedule it starts unpaused, so the
trigger dialog has no "Unpause" box to start anything else; with one it
starts paused, as every scheduled DAG. Airflow's `backfill create` refuses a
DAG without a schedule, and means nothing for this one anyway: a run
processes what has arrived, not a date (recompute dates with the backfill
DAGs).

Its layer tasks go first in the writers pool (`priority_weight`): a backfill
triggered while a run is in progress waits for that run's last layer, not
only for the layer that holds the slot.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, chain

from lakehouse.orchestration import (
    DEFAULT_ARGS,
    INCREMENTAL_DAG,
    INCREMENTAL_PRIORITY,
    LAYERS,
    TAGS,
    WRITERS_POOL,
    described,
    incremental_schedule,
    lakehouse_submit,
    layer_assets,
    layer_inputs,
)

SCHEDULE = incremental_schedule()
# Rendered when the task runs: the Variable, or empty (then the environment decides).
KAFKA_ARGUMENTS = [
    "--kafka-bootstrap-servers",
    "{{ var.value.get('lakehouse_kafka_bootstrap_servers', '') }}",
]

with DAG(
    **described(
        INCREMENTAL_DAG, "landing -> bronze -> silver -> gold, exactly once, with quality gates"
    ),
    schedule=SCHEDULE,
    # Paused until someone unpauses it only when it has a schedule to start.
    is_paused_upon_creation=None if SCHEDULE else False,
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    dagrun_timeout=dt.timedelta(hours=2),
    tags=[*TAGS, "streaming"],
    doc_md=__doc__,
):
    chain(
        *(
            lakehouse_submit(
                layer,
                ["run", "--layer", layer, *(KAFKA_ARGUMENTS if layer == "bronze" else [])],
                pool=WRITERS_POOL,
                priority_weight=INCREMENTAL_PRIORITY,
                inlets=layer_inputs(layer),
                outlets=layer_assets(layer),
                execution_timeout=dt.timedelta(minutes=60),
            )
            for layer in LAYERS
        )
    )
