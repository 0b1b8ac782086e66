"""The live Airflow the DAGs' system tests share (one per test session: pytest-xdist gives
this folder's modules to one worker, tests/conftest.py), the runs it makes, and the
live Airflow on a Spark cluster of the full tier.

On a data root with one day ingested by `lakehouse run` (in this process), and a second
drop half behind the streams' watermark: a click on the incremental DAG's Trigger
(through the REST API without a browser) makes its run, which ingests that drop and
whose silver warns of late rows; the range backfill, triggered with its form's values
while that run is in progress, waits for it; a bad range filled into the form meanwhile
fails at once; later a blocked run. With --full the root first gets a history for the
charts: two days ingested by two `lakehouse run`s. With Chromium and chromedriver on the
machine (`make browser`) the browser tests drive the real UI with Selenium.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from deltalake import DeltaTable

from dev.local_airflow import ADMIN, LocalAirflow
from dev.local_spark_cluster import LocalSparkCluster
from dev.processes import free_port, wait_until
from tests.dags.live import (
    BAD_RANGE,
    RANGE,
    FirstRun,
    LiveAirflow,
    airflow_environment,
    all_runs,
    click_trigger,
    fill_range_form,
    generate,
    generate_day,
    task_instances,
)
from tests.helpers import delta_table, run_cli, run_in_process, settings_for


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Whichever test of this folder first takes `first_run` pays for its runs (two DAG
    runs, seven tasks, six of them a Spark job in a process of its own), which on busy
    cores can outlast the default limit."""
    for item in items:
        if item.path.parent == Path(__file__).parent:
            item.add_marker(pytest.mark.timeout(1800))


@pytest.fixture(scope="session")
def live(request, spark, tmp_path_factory) -> LiveAirflow:
    base = tmp_path_factory.mktemp("ui")
    root = base / "data"
    history = (1, 2) if request.config.getoption("--full") else ()
    for day in history:  # runs from the command line, for the charts
        generate_day(root, day)
        done = run_in_process("run", "--data-root", str(root))
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # Day 3 ingested from the command line (in this process: cheaper than a DAG run),
    # then a second drop whose first day the streams have passed already: the DAG run
    # ingests it, and silver drops its events behind the watermark as late, with a
    # warning; the range backfill recomputes day 3 with them.
    generate_day(root, 3)
    done = run_in_process("run", "--data-root", str(root))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    generate(root, 4, "2026-11-03", days=2)
    # As `make airflow-up` starts it: lakehouse_incremental without a schedule.
    airflow = LocalAirflow(base / "airflow", free_port(), "local[2]", root)
    services = airflow.start()
    try:
        token = urllib.request.urlopen(  # noqa: S310 (local)
            urllib.request.Request(  # noqa: S310
                f"{airflow.url}/auth/token",
                data=json.dumps({"username": ADMIN, "password": airflow.password()}).encode(),
                headers={"Content-Type": "application/json"},
            ),
            timeout=30,
        )
        live = LiveAirflow(airflow, root, json.load(token)["access_token"])
        wait_until(
            lambda: len(live.request("GET", "/api/v2/dags").json().get("dags", [])) == 4,
            120,
            "the DAGs to be parsed",
            services,
        )
        yield live
    finally:
        airflow.stop()


@pytest.fixture(scope="session")
def browser(live):
    """Headless Chromium driven by Selenium, logged in as a person does it, through
    Airflow's login page (no cookie set by hand); None without chromium and
    chromedriver."""
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        yield None
        return
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,1000",
        "--lang=en-US",
    ):
        options.add_argument(flag)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.get(live.airflow.url)
        username = (By.NAME, "username")
        WebDriverWait(driver, 60).until(expected_conditions.presence_of_element_located(username))
        driver.find_element(*username).send_keys(ADMIN)
        driver.find_element(By.NAME, "password").send_keys(live.airflow.password())
        driver.find_element(By.XPATH, "//button[@type='submit']").click()
        WebDriverWait(driver, 60).until(lambda d: "/login" not in d.current_url)
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def first_run(live, browser) -> FirstRun:
    """A first-day user's click on Trigger on a freshly started Airflow (the REST API's
    trigger without a browser); then, while that run is in progress, the range backfill
    triggered with its form's values, which waits for it."""
    dialog_text = ""
    if browser is None:
        live.trigger("lakehouse_incremental")
    else:
        from selenium.webdriver.common.by import By

        click_trigger(browser, live, "lakehouse_incremental")
        dialog_text = browser.find_element(By.XPATH, "//*[@role='dialog']").text
    wait_until(lambda: all_runs(live)["lakehouse_incremental"], 60, "the run the click made")
    runs_at_click = all_runs(live)
    (run_id,) = runs_at_click["lakehouse_incremental"]
    wait_until(
        lambda: (
            task_instances(live, "lakehouse_incremental", run_id)["bronze"]["state"] == "running"
        ),
        120,
        "the run's bronze task",
    )
    response = live.trigger("lakehouse_backfill_range", RANGE)
    assert response.status == 200, response.body
    backfill_id = response.json()["dag_run_id"]
    if browser is None:
        assert live.trigger("lakehouse_backfill_range", BAD_RANGE).status == 200
    else:
        fill_range_form(browser, live, BAD_RANGE["start"], BAD_RANGE["end"])
    wait_until(lambda: len(all_runs(live)["lakehouse_backfill_range"]) == 2, 60, "the form's run")
    (refused_id,) = set(all_runs(live)["lakehouse_backfill_range"]) - {backfill_id}
    refused = live.wait_for("lakehouse_backfill_range", refused_id)
    return FirstRun(
        live.wait_for("lakehouse_incremental", run_id),
        runs_at_click,
        dialog_text,
        live.wait_for("lakehouse_backfill_range", backfill_id),
        refused,
    )


@pytest.fixture(scope="session")
def incremental(first_run) -> dict:
    """The incremental DAG's run, passed."""
    assert first_run.run["state"] == "success", first_run.run
    return first_run.run


@pytest.fixture(scope="session")
def range_backfill(first_run) -> dict:
    return first_run.backfill


@pytest.fixture(scope="session")
def blocked(live, range_backfill) -> dict:
    """A second incremental run after a duplicate key was edited into silver: its silver
    task's checks fail on their first try, and gold is never started."""
    path = settings_for(live.root).table("silver", "impressions")
    first, second = delta_table(path).slice(0, 2).to_pylist()
    DeltaTable(str(path)).update(
        predicate=f"impression_id = '{second['impression_id']}'",
        new_values={"impression_id": first["impression_id"], "ad_id": "ad-edited"},
    )
    run = live.trigger("lakehouse_incremental").json()
    return live.wait_for("lakehouse_incremental", run["dag_run_id"])


# -- the full tier: a live Airflow on a Spark standalone cluster ----

# Made at run time, so the repository holds no password-like literal.
WRONG_PASSWORD = {"username": ADMIN, "password": secrets.token_urlsafe(16)}


@pytest.fixture(scope="session")
def airflow_env(tmp_path_factory) -> dict[str, str]:
    return airflow_environment(tmp_path_factory.mktemp("airflow-home"))


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


@pytest.fixture(scope="session")
def cluster_run(tmp_path_factory) -> LiveRun:
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


@pytest.fixture(scope="session")
def ingested(cluster_run) -> Path:
    assert cluster_run.state == "success", cluster_run.tasks
    return cluster_run.root
