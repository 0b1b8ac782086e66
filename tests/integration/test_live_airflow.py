"""Live Airflow on a live Spark standalone cluster: the production path, on one machine.

Starts a Spark master and worker, then Airflow's api-server, scheduler and
dag-processor (the code behind `make spark-cluster-up` and `make airflow-up`,
on free ports) with `spark_default` pointing at the cluster. Triggers the
incremental DAG through the REST API with a token, waits for it, checks the
tables and that every job ran on the cluster, and stops exactly what it started.
"""

from __future__ import annotations

import json
import secrets
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from include.local_airflow import ADMIN, LocalAirflow
from include.local_spark_cluster import LocalSparkCluster
from jobs.backfill import TABLES
from tests.helpers import delta_count, run_cli, settings_for

pytestmark = pytest.mark.slow

TASKS = {"bronze", "validate_bronze", "silver", "validate_silver", "gold", "validate_gold"}


# Made at run time, so the repository holds no password-like literal.
WRONG_PASSWORD = {"username": ADMIN, "password": secrets.token_urlsafe(16)}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def api(airflow: LocalAirflow, method: str, path: str, body: object = None, token: str = ""):
    request = urllib.request.Request(  # noqa: S310 (http to the local api-server)
        f"{airflow.url}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (local)
        return json.load(response)


def poll(what: str, timeout: float, probe):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(3)
    raise TimeoutError(what)


def master_status(cluster: LocalSparkCluster) -> dict:
    with urllib.request.urlopen(f"{cluster.ui_url}/json/", timeout=10) as response:  # noqa: S310
        return json.load(response)


def test_incremental_dag_triggered_through_the_rest_api_runs_on_the_cluster(tmp_path: Path):
    root = tmp_path / "data"
    generated = run_cli("generate", "--events", "1500", "--seed", "5", "--data-root", str(root))
    assert generated.returncode == 0, generated.stderr
    cluster = LocalSparkCluster(
        tmp_path / "spark", free_port(), free_port(), free_port(), cores=2, memory="2g"
    )
    airflow = LocalAirflow(
        tmp_path / "airflow", free_port(), cluster.master_url, root, schedule="none"
    )
    started: list[psutil.Process] = []
    try:
        for service in cluster.start():
            started.extend(service.tree())
        services = airflow.start()
        # Login is required: no token, a wrong password, both refused.
        for path, body in (("/api/v2/dags", None), ("/auth/token", WRONG_PASSWORD)):
            with pytest.raises(urllib.error.HTTPError) as refused:
                api(airflow, "POST" if body else "GET", path, body)
            assert refused.value.code in (401, 403), path
        token = api(
            airflow, "POST", "/auth/token", {"username": ADMIN, "password": airflow.password()}
        )["access_token"]
        poll("the DAG to be parsed", 120, lambda: _listed(airflow, token))
        api(airflow, "PATCH", "/api/v2/dags/lakehouse_incremental", {"is_paused": False}, token)
        run = api(
            airflow,
            "POST",
            "/api/v2/dags/lakehouse_incremental/dagRuns",
            {"logical_date": None},
            token,
        )
        run_path = f"/api/v2/dags/lakehouse_incremental/dagRuns/{run['dag_run_id']}"
        state = poll(
            "the DAG run to finish",
            900,
            lambda: (
                api(airflow, "GET", run_path, token=token)["state"] in ("success", "failed")
                and api(airflow, "GET", run_path, token=token)["state"]
            ),
        )
        memory_mib = sum(s.memory_bytes() for s in services) / 2**20
        print(f"Airflow services: {memory_mib:.0f} MiB resident after one run")
        for service in services:
            started.extend(service.tree())
        tasks = api(airflow, "GET", f"{run_path}/taskInstances", token=token)["task_instances"]
        assert state == "success", [(t["task_id"], t["state"]) for t in tasks]
        assert {t["task_id"]: t["state"] for t in tasks} == dict.fromkeys(TASKS, "success")
        # Every task's spark-submit ran as an application of the standalone cluster.
        apps = [app["name"] for app in master_status(cluster)["completedapps"]]
        assert sorted(apps) == sorted(f"lakehouse-{task}" for task in TASKS)
        settings = settings_for(root)
        for layer, name in TABLES:
            assert delta_count(settings.table(layer, name)) > 0, f"{layer}/{name}"
    finally:
        stopped = airflow.stop() + cluster.stop()
    assert set(stopped) == {
        "api-server",
        "scheduler",
        "dag-processor",
        "spark-master",
        "spark-worker",
    }
    assert [p for p in started if _alive(p)] == [], "stop leaves nothing it started behind"


def _listed(airflow: LocalAirflow, token: str) -> bool:
    dags = api(airflow, "GET", "/api/v2/dags", token=token)["dags"]
    return any(dag["dag_id"] == "lakehouse_incremental" for dag in dags)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
