"""Incremental lakehouse run every 15 minutes: one task per layer, each its own quality gate.

bronze -> silver -> gold

A layer task is `lakehouse run --layer L`: its queries with
Trigger.AvailableNow, each table checked right after the query that writes it
(the layer's gate, the same checks as `lakehouse validate --layer L
--new-rows`). A failed blocking check fails the task (exit code 3, not
retried) and nothing downstream runs; the layer's Assets are updated only
when its task passed, so data-aware DAGs only ever see validated tables.
(Until 0.5 a separate validate task per layer repeated the checks: a second
spark-submit per layer, about 15 s each, for the same answer.)

Kafka: when the Airflow Variable `lakehouse_kafka_bootstrap_servers` is set
(Admin > Variables; host:port[,...]), or `LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS` in
Airflow's environment, the bronze task also ingests the topics of the sources
(docs/kafka.md). The Variable wins.

Set `LAKEHOUSE_INCREMENTAL_SCHEDULE` to another cron expression, or to `none`
for manual runs only.
"""

from __future__ import annotations

import datetime as dt
import os

from airflow.sdk import DAG, chain

from include.orchestration import (
    DEFAULT_ARGS,
    TAGS,
    WRITERS_POOL,
    lakehouse_submit,
    layer_assets,
    layer_inputs,
)
from jobs.catalog import LAYERS

SCHEDULE = os.environ.get("LAKEHOUSE_INCREMENTAL_SCHEDULE", "*/15 * * * *")
# Rendered when the task runs: the Variable, or empty (then the environment decides).
KAFKA_ARGUMENTS = [
    "--kafka-bootstrap-servers",
    "{{ var.value.get('lakehouse_kafka_bootstrap_servers', '') }}",
]

with DAG(
    dag_id="lakehouse_incremental",
    description="landing -> bronze -> silver -> gold, exactly once, with quality gates",
    schedule=None if SCHEDULE.lower() == "none" else SCHEDULE,
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
                inlets=layer_inputs(layer),
                outlets=layer_assets(layer),
                execution_timeout=dt.timedelta(minutes=60),
            )
            for layer in LAYERS
        )
    )
