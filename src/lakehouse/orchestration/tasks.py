"""What the Airflow DAGs share: how a `lakehouse` command is submitted, the pool, the assets.

DAG files only wire tasks (docs/architecture.md). This module turns "run the silver layer"
into a `SparkSubmitOperator` that submits `src/lakehouse/__main__.py`, the entry point
of the `lakehouse` CLI, through the `spark_default` connection: local[*] by
default, a standalone cluster when the connection says so.

It is imported when the scheduler parses the DAGs, so it stays cheap: no
pyspark, no Great Expectations, no file access.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from lakehouse.catalog import DERIVED_LAYERS, bronze_tables, tables_in
from lakehouse.environment import environment
from lakehouse.errors import EXIT_USAGE
from lakehouse.runtime.settings import Settings
from lakehouse.runtime.spark import submit_conf
from lakehouse.storage.objects import S3Path

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow.sdk import Asset

    from lakehouse.orchestration.operators import LakehouseSubmitOperator
    from lakehouse.orchestration.requests import BackfillRequest

# The checkout (or the image's copy of it) this package is installed from in editable mode.
REPO = Path(__file__).resolve().parents[3]
# `python -m lakehouse` as a file: spark-submit runs an application by path.
ENTRY_POINT = Path(__file__).resolve().parents[1] / "__main__.py"
SPARK_CONN_ID = "spark_default"
# One slot: tasks that write contract tables (incremental stages, backfills,
# maintenance), and a backfill's checks and parity of what it wrote, never overlap,
# whichever DAG they belong to.
WRITERS_POOL = "lakehouse_writers"
INCREMENTAL_DAG = "lakehouse_incremental"
# The incremental DAG's layer tasks outrank every other task waiting for the writers
# pool: a backfill queued behind a layer takes the slot only after the run's last
# layer, when the streams have nothing left to write (weights are absolute).
INCREMENTAL_PRIORITY = 10
OWNER = "data-platform"
# Every lakehouse DAG carries it (the plugin asks who may read all of them by it).
LAKEHOUSE_TAG = "lakehouse"
TAGS = [LAKEHOUSE_TAG]

DEFAULT_ARGS: dict[str, Any] = {
    "owner": OWNER,
    # Transient failures (a lost executor, a killed JVM) heal on retry: the
    # streams resume from their checkpoints and every write is idempotent.
    # A failed blocking quality check is never retried (src/lakehouse/orchestration/operators.py).
    "retries": 2,
    "retry_delay": dt.timedelta(minutes=1),
    "retry_exponential_backoff": True,
    "max_retry_delay": dt.timedelta(minutes=10),
    # A task's own weight, not the sum of its downstream tasks' (Airflow's default), which
    # put a backfill's first task ahead of the incremental run's last layers.
    "weight_rule": "absolute",
}


def described(dag_id: str, description: str) -> dict[str, str]:
    """A DAG's id, description and display name: Airflow 3.3's DAG list shows a DAG's
    description only on hover, its display name always, so that is the id and what the
    DAG does."""
    return {
        "dag_id": dag_id,
        "description": description,
        "dag_display_name": f"{dag_id} · {description}",
    }


def nightly(cron: str, interval: dt.timedelta = dt.timedelta(0)) -> Any:
    """A nightly DAG's timetable: a run at each `cron` time (UTC), the first at the next
    one after the DAG is deployed, whatever the hour.

    Airflow's cron timetable, without a start date, runs the last cron time at once when
    the DAG arrives within a tenth of the interval after it (2.4 hours for a nightly DAG),
    unless `run_immediately` is a time span: `False`, its default, does not turn that
    off. A span of zero does."""
    from airflow.sdk import CronTriggerTimetable

    return CronTriggerTimetable(
        cron, timezone="UTC", interval=interval, run_immediately=dt.timedelta(0)
    )


def incremental_schedule() -> str | None:
    """The incremental DAG's cron schedule (`LAKEHOUSE_INCREMENTAL_SCHEDULE`); None for
    `none`: manual runs only."""
    chosen = environment().incremental_schedule.strip()
    return None if chosen.lower() == "none" else chosen


def layer_tables(layer: str) -> tuple[str, ...]:
    """The tables a layer's tasks write, from the catalog (bronze: per source, and quarantine)."""
    if layer == "bronze":
        return bronze_tables()
    return tuple(table.id for table in tables_in(layer))


def settings() -> Settings:
    """The data root the DAGs work on: $LAKEHOUSE_DATA_ROOT, else the repository's data/."""
    return Settings.load(default_data_root=REPO / "data")


def table_asset(table: str) -> Asset:
    """The Airflow Asset of a table, named `lakehouse.<layer>.<table>`.

    The URI is the table's folder (`file://` or `s3://`), so lineage tools see the
    Delta table itself.
    """
    from airflow.sdk import Asset

    root = settings().lakehouse
    return Asset(
        name=f"lakehouse.{table.replace('/', '.')}",
        uri=(root / table).uri if isinstance(root, S3Path) else f"file://{root / table}",
        group="lakehouse",
        extra={"format": "delta", "layer": table.split("/")[0], "table": table},
    )


def layer_assets(*layers: str) -> list[Asset]:
    """The Assets of the tables the layers' tasks write: their outlets."""
    return [table_asset(table) for layer in layers for table in layer_tables(layer)]


def layer_inputs(layer: str) -> list[Asset]:
    """The Assets of the tables of other layers that the layer's queries read: its
    tasks' inlets, which chain the layers' Assets into bronze -> silver -> gold."""
    read = {source for table in tables_in(layer) for source in table.inputs}
    return [table_asset(table) for table in sorted(read) if table.split("/")[0] != layer]


def lakehouse_submit(task_id: str, arguments: Any, **kwargs: Any) -> LakehouseSubmitOperator:
    """A task that runs `lakehouse <arguments>` with spark-submit.

    `arguments` is a list, or an XCom reference to one (the backfill DAG's
    checked request). The data root and the Python interpreter are passed
    in the environment, so driver, executors and the DAG's assets agree.
    """
    from lakehouse.orchestration.operators import LakehouseSubmitOperator

    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    config = settings()
    return LakehouseSubmitOperator(
        task_id=task_id,
        application=str(ENTRY_POINT),
        application_args=arguments,
        conn_id=SPARK_CONN_ID,
        name=f"lakehouse-{task_id}",
        conf=submit_conf(config),
        object_store=config.object_store is not None,
        env_vars={
            "LAKEHOUSE_DATA_ROOT": str(config.data_root),
            "LAKEHOUSE_REPORTS_DIR": str(config.reports),
            "PYSPARK_PYTHON": python,
            "PYSPARK_DRIVER_PYTHON": python,
        },
        **kwargs,
    )


def backfill_tasks(commands: Any) -> list[LakehouseSubmitOperator]:
    """backfill -> validate -> parity of a backfill DAG, from its checked request's commands.

    The backfill recomputes silver and gold from the bronze tables (its inlets); validate
    checks what it rewrote and, when that passes, updates those tables' Assets. Each
    waits out the incremental DAG's runs: a backfill or parity while the streams have
    rows to write refuses (exit 4), and validate would check tables mid-write. Each
    takes the writers pool's slot, so no other job writes while one checks or compares,
    whichever backfill run they belong to (the range DAG runs several at once).
    """
    return [
        lakehouse_submit(
            "backfill",
            commands["backfill"],
            pool=WRITERS_POOL,
            inlets=layer_inputs("silver"),
            # Its streams must have written everything first, or the job refuses.
            waits_for=INCREMENTAL_DAG,
        ),
        lakehouse_submit(
            "validate",
            commands["validate"],
            pool=WRITERS_POOL,
            outlets=layer_assets(*DERIVED_LAYERS),
            waits_for=INCREMENTAL_DAG,
        ),
        lakehouse_submit(
            "parity", commands["parity"], pool=WRITERS_POOL, waits_for=INCREMENTAL_DAG
        ),
    ]


def request_commands(make: Callable[[], BackfillRequest]) -> dict[str, list[str]]:
    """What a backfill DAG's `check_request` returns: the commands of the request `make`
    builds, which is logged and named in the run's note; a request it refuses fails the
    task in one line."""
    from airflow.sdk import get_current_context

    from lakehouse.orchestration.operators import keep_outcome

    try:
        request = make()
    except ValueError as error:
        refuse(str(error))
    print(request.describe())
    keep_outcome(get_current_context(), request.describe(), named=False)  # the run's note
    return request.commands()


def refuse(reason: str) -> NoReturn:
    """Fail the running `@task` with a one-line reason (`operators.refuse`)."""
    from airflow.sdk import get_current_context

    from lakehouse.orchestration.operators import refuse

    refuse(get_current_context(), reason, EXIT_USAGE, logging.getLogger("airflow.task"))
