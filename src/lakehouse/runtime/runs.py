"""Run ids, and which Airflow task (if any) a run belongs to.

Plain Python, cheap to import: the Airflow operator picks a run's id before
it submits the job (`LAKEHOUSE_RUN_ID`), so its extra links know the report
page the job will write; the job reads the id, and the Airflow context the
task runner exports (`AIRFLOW_CTX_*`), from its environment.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Mapping
from urllib.parse import quote

from lakehouse.environment import environment

RUN_ID_VARIABLE = "LAKEHOUSE_RUN_ID"
# What Airflow's task runner puts in the environment of a task (and so of its spark-submit).
AIRFLOW_CONTEXT = {
    "dag_id": "AIRFLOW_CTX_DAG_ID",
    "run_id": "AIRFLOW_CTX_DAG_RUN_ID",
    "task_id": "AIRFLOW_CTX_TASK_ID",
    "try_number": "AIRFLOW_CTX_TRY_NUMBER",
}


def generate_run_id(kind: str) -> str:
    """`<kind>-<UTC time>-<6 hex>`: sorts by time, unique per run."""
    return dt.datetime.now(dt.UTC).strftime(f"{kind}-%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6]


def new_run_id(kind: str = "run") -> str:
    """The id the Airflow task chose for this run (`LAKEHOUSE_RUN_ID`), else a new one."""
    return environment().run_id or generate_run_id(kind)


def airflow_context(environ: Mapping[str, str] = os.environ) -> dict[str, str] | None:
    """DAG id, DAG run id, task id and try of the Airflow task running this job, if any,
    and the Airflow UI's pages of its DAG run (`run_url`) and task (`task_url`): under
    the api-server's base URL when Airflow's environment gives it, else from its root."""
    context = {key: environ.get(variable, "") for key, variable in AIRFLOW_CONTEXT.items()}
    if not (context["dag_id"] and context["run_id"]):
        return None
    base = environ.get("AIRFLOW__API__BASE_URL", "").rstrip("/")
    dag_id, run_id, task_id = (
        quote(context[key], safe="") for key in ("dag_id", "run_id", "task_id")
    )
    run = f"{base}/dags/{dag_id}/runs/{run_id}"
    task = f"{run}/tasks/{task_id}" if task_id else run
    return {**context, "run_url": run, "task_url": task}


def dag_run_page(dag_id: str, run_id: str) -> str:
    """Where, under the reports folder, the page of one DAG run's reports is."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
    return f"dag-runs/{dag_id}/{safe}.html"
