"""Airflow glue: what the DAG files in dags/ use to wire the lakehouse jobs.

- `tasks`: default arguments, the writers pool, `lakehouse_submit` (a
  spark-submit task running the `lakehouse` CLI) and the assets of each layer,
  from the catalog. Cheap to import: the scheduler parses DAGs every few seconds.
- `requests`: what a run of a backfill DAG recomputes (the form's request, or the
  nightly run's) and the commands its tasks submit.
- `operators`: the SparkSubmitOperator subclass those tasks use.
- `deployment`: checks a docker-compose deployment runs before it starts.

The DAG files import this package only: what they need of the catalog is here too.
"""

from lakehouse.catalog import DERIVED_LAYERS, LAYERS
from lakehouse.orchestration.requests import FORM_MAX_DAYS, backfill_request, nightly_request
from lakehouse.orchestration.tasks import (
    DEFAULT_ARGS,
    ENTRY_POINT,
    INCREMENTAL_DAG,
    INCREMENTAL_PRIORITY,
    OWNER,
    REPO,
    SPARK_CONN_ID,
    TAGS,
    WRITERS_POOL,
    backfill_tasks,
    described,
    incremental_schedule,
    lakehouse_submit,
    layer_assets,
    layer_inputs,
    layer_tables,
    nightly,
    refuse,
    request_commands,
    settings,
    table_asset,
)

__all__ = [
    "DEFAULT_ARGS",
    "DERIVED_LAYERS",
    "ENTRY_POINT",
    "FORM_MAX_DAYS",
    "INCREMENTAL_DAG",
    "INCREMENTAL_PRIORITY",
    "LAYERS",
    "OWNER",
    "REPO",
    "SPARK_CONN_ID",
    "TAGS",
    "WRITERS_POOL",
    "backfill_request",
    "backfill_tasks",
    "described",
    "incremental_schedule",
    "lakehouse_submit",
    "layer_assets",
    "layer_inputs",
    "layer_tables",
    "nightly",
    "nightly_request",
    "refuse",
    "request_commands",
    "settings",
    "table_asset",
]
