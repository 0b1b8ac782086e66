"""Airflow glue: what the DAG files in dags/ use to wire the lakehouse jobs.

- `tasks`: default arguments, the writers pool, `lakehouse_submit` (a
  spark-submit task running the `lakehouse` CLI) and the assets of each layer,
  from the catalog. Cheap to import: the scheduler parses DAGs every few seconds.
- `operators`: the SparkSubmitOperator subclass those tasks use.
- `deployment`: checks a docker-compose deployment runs before it starts.
"""

from include.orchestration.tasks import (
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
    lakehouse_submit,
    layer_assets,
    layer_inputs,
    layer_tables,
    refuse,
    request_commands,
    settings,
    table_asset,
)

__all__ = [
    "DEFAULT_ARGS",
    "ENTRY_POINT",
    "INCREMENTAL_DAG",
    "INCREMENTAL_PRIORITY",
    "OWNER",
    "REPO",
    "SPARK_CONN_ID",
    "TAGS",
    "WRITERS_POOL",
    "backfill_tasks",
    "described",
    "lakehouse_submit",
    "layer_assets",
    "layer_inputs",
    "layer_tables",
    "refuse",
    "request_commands",
    "settings",
    "table_asset",
]
