"""The DAGs end to end: a live Airflow on a live Spark cluster, then `airflow dags test`.

The module's data root is ingested the production way, on one machine: a
Spark standalone master and worker, then Airflow's api-server, scheduler and
dag-processor and triggerer (the code behind `make spark-cluster-up` and `make airflow-up`,
on free ports) with `spark_default` pointing at the cluster; the incremental
DAG is triggered through the REST API with a token, and every process started
is stopped. The other DAGs then run on that root (or copies of it) with
`airflow dags test` in one Airflow home on SQLite, migrated once: real task
runs, real spark-submit, real tables.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from deltalake import DeltaTable

from dev.local_airflow import ADMIN, LocalAirflow
from dev.local_spark_cluster import LocalSparkCluster
from dev.processes import wait_until
from lakehouse.quality.validate import last_passed_versions
from lakehouse.runtime.progress import CAUGHT_UP
from tests.helpers import (
    REPO,
    TABLE_NAMES,
    delta_count,
    delta_rows,
    delta_table,
    run_cli,
    settings_for,
)

pytestmark = pytest.mark.slow

VENV_BIN = Path(sys.executable).parent
RANGE = ("2026-10-31", "2026-11-02")
TASKS = {"bronze", "silver", "gold"}
SERVICES = {
    "api-server",
    "scheduler",
    "dag-processor",
    "triggerer",
    "spark-master",
    "spark-worker",
}
# Made at run time, so the repository holds no password-like literal.
WRONG_PASSWORD = {"username": ADMIN, "password": secrets.token_urlsafe(16)}


def airflow_environment(home: Path) -> dict[str, str]:
    """An Airflow home on SQLite, migrated, running the repository's DAGs on local[2]."""
    env = {
        **os.environ,
        # spark-submit comes from the virtual environment, as in `make airflow-up`.
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "LAKEHOUSE_SHUFFLE_PARTITIONS": "2",
    }
    subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True
    )
    return env


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory) -> dict[str, str]:
    return airflow_environment(tmp_path_factory.mktemp("airflow-home"))


def dags_test(env: dict[str, str], data_root: Path, dag_id: str, *args: str):
    return subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "test", dag_id, *args],
        env={**env, "LAKEHOUSE_DATA_ROOT": str(data_root)},
        capture_output=True,
        text=True,
        timeout=900,
    )


# -- the live run: Airflow's REST API, scheduler and a Spark standalone cluster ----


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


def master_status(cluster: LocalSparkCluster) -> dict:
    with urllib.request.urlopen(f"{cluster.ui_url}/json/", timeout=10) as response:  # noqa: S310
        return json.load(response)


@dataclass(frozen=True)
class LiveRun:
    root: Path
    refused: dict[str, int]  # request -> HTTP status, without a valid login
    state: str
    tasks: dict[str, str]  # task id -> state
    applications: list[str]  # the cluster's completed applications
    stopped: list[str]
    left_running: list[psutil.Process]
    listening: set[str]  # addresses the cluster's and Airflow's processes listen on
    wrong_secret: subprocess.CompletedProcess  # a job that did not know the cluster's secret


def _listed(airflow: LocalAirflow, token: str) -> bool:
    dags = api(airflow, "GET", "/api/v2/dags", token=token)["dags"]
    return any(dag["dag_id"] == "lakehouse_incremental" for dag in dags)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> LiveRun:
    """A data root after one run of the incremental DAG, triggered through the REST API."""
    base = tmp_path_factory.mktemp("live")
    root = base / "data"
    # Two days: the streams' watermark passes the first, so its daily rows are final.
    generated = run_cli(
        "generate", "--events", "2000", "--seed", "21", "--days", "2", "--data-root", str(root)
    )  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    cluster = LocalSparkCluster(
        base / "spark", free_port(), free_port(), free_port(), cores=2, memory="2g"
    )
    airflow = LocalAirflow(
        base / "airflow",
        free_port(),
        cluster.master_url,
        root,
        schedule="none",
        spark_secret_file=cluster.secret_file,
    )
    started: list[psutil.Process] = []
    refused: dict[str, int] = {}
    try:
        for service in cluster.start():
            started.extend(service.tree())
        services = airflow.start()
        for path, body in (("/api/v2/dags", None), ("/auth/token", WRONG_PASSWORD)):
            try:
                api(airflow, "POST" if body else "GET", path, body)
            except urllib.error.HTTPError as error:
                refused[path] = error.code
        token = api(
            airflow, "POST", "/auth/token", {"username": ADMIN, "password": airflow.password()}
        )["access_token"]
        wait_until(lambda: _listed(airflow, token), 120, "the DAG to be parsed", services)
        api(airflow, "PATCH", "/api/v2/dags/lakehouse_incremental", {"is_paused": False}, token)
        run = api(
            airflow,
            "POST",
            "/api/v2/dags/lakehouse_incremental/dagRuns",
            {"logical_date": None},
            token,
        )
        run_path = f"/api/v2/dags/lakehouse_incremental/dagRuns/{run['dag_run_id']}"

        def state() -> str:
            return api(airflow, "GET", run_path, token=token)["state"]

        wait_until(lambda: state() in ("success", "failed"), 900, "the DAG run", services)
        memory_mib = sum(s.memory_bytes() for s in services) / 2**20
        print(f"Airflow services: {memory_mib:.0f} MiB resident after one run")
        for service in services:
            started.extend(service.tree())
        final_state = state()
        tasks = api(airflow, "GET", f"{run_path}/taskInstances", token=token)["task_instances"]
        listening = {
            f"{c.laddr.ip}"
            for process in started
            if _alive(process)
            for c in process.net_connections("inet")
            if c.status == psutil.CONN_LISTEN
        }
        wrong_secret = submit_with_secret(cluster, "not-the-secret", base)
        applications = [app["name"] for app in master_status(cluster)["completedapps"]]
    finally:
        stopped = airflow.stop() + cluster.stop()
    return LiveRun(
        root=root,
        refused=refused,
        state=final_state,
        tasks={t["task_id"]: t["state"] for t in tasks},
        applications=applications,
        stopped=stopped,
        left_running=[p for p in started if _alive(p)],
        listening=listening,
        wrong_secret=wrong_secret,
    )


def submit_with_secret(
    cluster: LocalSparkCluster, secret: str, base: Path
) -> subprocess.CompletedProcess:
    """spark-submit of a one-row job to the cluster, authenticating with `secret`."""
    job = base / "count_one_row.py"
    job.write_text(
        "from pyspark.sql import SparkSession\n"
        "print(SparkSession.builder.getOrCreate().range(1).count())\n"
    )
    return subprocess.run(
        [
            str(Path(sys.executable).with_name("spark-submit")),
            "--master",
            cluster.master_url,
            "--name",
            "wrong-secret",
            "--conf",
            "spark.authenticate=true",
            "--conf",
            f"spark.authenticate.secret={secret}",
            str(job),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "SPARK_LOCAL_IP": "127.0.0.1",
        },
    )


@pytest.fixture(scope="module")
def ingested(live) -> Path:
    assert live.state == "success", live.tasks
    return live.root


@pytest.mark.full
def test_incremental_dag_triggered_through_the_rest_api_runs_on_the_cluster(live):
    # Login is required: no token, a wrong password, both refused.
    assert set(live.refused) == {"/api/v2/dags", "/auth/token"}
    assert set(live.refused.values()) <= {401, 403}, live.refused
    assert live.state == "success", live.tasks
    assert live.tasks == dict.fromkeys(TASKS, "success")
    # Every task's spark-submit ran as an application of the standalone cluster.
    assert sorted(live.applications) == sorted(f"lakehouse-{task}" for task in TASKS)
    # Only this machine can reach the services, and the cluster runs no job
    # that does not know its shared secret.
    assert live.listening and live.listening <= {"127.0.0.1", "::ffff:127.0.0.1"}, live.listening
    assert live.wrong_secret.returncode != 0, live.wrong_secret.stdout
    assert "spark-class: No such file" not in live.wrong_secret.stderr  # it did start
    assert "wrong-secret" not in live.applications
    # Stopping Airflow and the cluster leaves nothing they started behind.
    assert set(live.stopped) == SERVICES
    assert live.left_running == []


@pytest.mark.full
def test_incremental_dag_writes_every_contract_table_and_passes_its_gates(ingested):
    settings = settings_for(ingested)
    for layer in ("bronze", "quarantine"):
        for source in ("impressions", "clicks", "user_actions"):
            assert DeltaTable(str(settings.table(layer, source))).version() >= 0
    for layer, name in TABLE_NAMES:
        assert delta_count(settings.table(layer, name)) > 0, f"{layer}/{name}"
    # Three layer tasks ran, each with its checks: three reports, all passed.
    runs = sorted((settings.reports / "runs").glob("*.json"))
    assert [json.loads(p.read_text())["status"] for p in runs] == ["passed"] * 3
    results = delta_table(settings.meta("dq_results")).to_pylist()
    assert len(results) >= 140 and all(r["success"] for r in results if r["severity"] == "critical")


@pytest.mark.full
def test_backfill_dag_recomputes_the_range_and_its_parity_check_agrees(
    airflow_env, ingested, tmp_path
):
    """The form's range and layers reach `lakehouse backfill` (the CLI's backfill is
    compared with streaming in test_parity.py; here the DAG's own parity task does it)."""
    by_dag = tmp_path / "dag"
    shutil.copytree(ingested, by_dag)
    form = json.dumps({"start": RANGE[0], "end": RANGE[1], "layers": ["silver", "gold"]})
    done = dags_test(airflow_env, by_dag, "lakehouse_backfill_range", "-c", form)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    log = done.stdout + done.stderr
    assert f"parity {RANGE[0]}..{RANGE[1]}: streaming and batch agree" in log
    before, after = settings_for(ingested), settings_for(by_dag)
    for layer, name in TABLE_NAMES:
        assert delta_count(after.table(layer, name)) > 0, f"{layer}/{name}"
    # The backfill replaced the range: new table versions, and the gate checked them.
    impressions = ("silver", "impressions")
    assert (
        DeltaTable(str(after.table(*impressions))).version()
        > DeltaTable(str(before.table(*impressions))).version()
    )
    # Bronze was not among the form's layers: untouched.
    for source in ("impressions", "clicks", "user_actions"):
        assert (
            DeltaTable(str(after.table("bronze", source))).version()
            == DeltaTable(str(before.table("bronze", source))).version()
        )


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"start": "2026-11-01"}, "Invalid input for param end"),
        ({"start": "2026-13-01", "end": "2026-11-01"}, "Invalid input for param start"),
    ],
    ids=["missing-end", "not-a-date"],
)
def test_range_backfill_rejects_a_bad_form_before_spark_starts(
    airflow_env, tmp_path, form, message
):
    """`airflow dags test -c` creates the run without the api-server (and so without the
    plugin's check of the form): Airflow checks each field before any task runs.
    (`check_request`'s one-line refusal of a bad range: test_airflow_ui.py.)"""
    root = tmp_path / "untouched"
    done = dags_test(airflow_env, root, "lakehouse_backfill_range", "-c", json.dumps(form))
    log = done.stdout + done.stderr
    assert done.returncode != 0
    assert message in log, log[-3000:]
    assert "Spark-Submit cmd" not in log and "spark-submit" not in log
    assert not root.exists(), "no job ran, so nothing was written"


def live_files(path: Path) -> set[str]:
    return {Path(uri).name for uri in DeltaTable(str(path)).file_uris()}


@pytest.mark.full
def test_maintenance_compacts_and_vacuums_without_changing_rows_or_reprocessing(
    airflow_env, ingested
):
    """Last in this module: it changes the ingested root (and runs its streams again)."""
    settings = settings_for(ingested)
    tables = [settings.table(layer, name) for layer, name in TABLE_NAMES]
    rows_before = [delta_rows(path) for path in tables]
    files_before = sum(len(live_files(path)) for path in tables)

    done = dags_test(airflow_env, ingested, "lakehouse_maintenance")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert sum(len(live_files(path)) for path in tables) < files_before
    assert [delta_rows(path) for path in tables] == rows_before
    # Then the whole tables passed validation at their compacted versions, so
    # the next run's checks start after the compaction.
    passed = last_passed_versions(settings)
    for (layer, name), path in zip(TABLE_NAMES, tables, strict=True):
        assert passed[f"{layer}/{name}"] == DeltaTable(str(path)).version(), name

    # Vacuum everything no longer referenced, and expire every report.
    vacuum = run_cli(
        "maintain", "--retain-hours", "0", "--keep-days", "0", "--data-root", str(ingested)
    )
    assert vacuum.returncode == 0, vacuum.stderr
    for path in tables:
        on_disk = {p.name for p in path.rglob("*.parquet")}
        assert on_disk == live_files(path), path
    assert [p.name for p in (settings.reports / "runs").iterdir()] == []

    # The streams skip the compaction commits: the next run reads nothing, changes nothing.
    again = run_cli("run", "--data-root", str(ingested))
    assert again.returncode == 0, again.stderr
    # No stream starts: the compactions are new versions, but none a stream reads, and
    # the bronze streams have no landing file they have not read.
    assert again.stdout.count(CAUGHT_UP) == 3 + len(TABLE_NAMES), again.stdout
    assert [delta_rows(path) for path in tables] == rows_before


@pytest.mark.full
def test_the_incremental_dag_runs_on_an_s3_data_root(s3_server, tmp_path):
    """`airflow dags test` of the incremental DAG with LAKEHOUSE_DATA_ROOT=s3a://...: every
    task's spark-submit carries Spark's S3 connector, every table lands in the bucket, the
    reports stay in the local folder the DAG passes on."""
    root = s3_server.root("s3a://lakehouse/airflow")
    aws = s3_server.connection().environment()
    generated = run_cli(
        "generate",
        "--events",
        "2000",
        "--seed",
        "3",
        "--days",
        "2",
        "--data-root",
        str(root),
        env=aws,
    )
    assert generated.returncode == 0, generated.stderr
    reports = tmp_path / "reports"
    env = {
        **airflow_environment(tmp_path / "airflow-home"),
        **aws,
        "LAKEHOUSE_REPORTS_DIR": str(reports),
    }
    done = dags_test(env, root, "lakehouse_incremental")
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    assert log.count("Spark-Submit cmd") == len(TASKS), log[-4000:]
    assert "jars/s3/hadoop-aws-" in log
    settings = settings_for(root)
    for layer, name in TABLE_NAMES:
        assert delta_table(settings.table(layer, name)).num_rows > 0, f"{layer}/{name}"
    assert list((reports / "runs").glob("*.html"))
