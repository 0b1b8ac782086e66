"""Airflow as the system tests drive it: a live local Airflow (`make airflow-up`'s code)
over its REST API and in a browser, and `airflow dags test` in an Airflow home of its own.
The fixtures that start them are in conftest.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from dev.local_airflow import LocalAirflow
from dev.processes import wait_until
from tests.helpers import REPO, run_in_process

SCREENSHOTS = Path(os.environ.get("LAKEHOUSE_SCREENSHOTS", REPO / "build" / "screenshots"))

# The day the command-line run ingests (generate_day(root, 3)), which the DAG run's
# late events belong to too: the backfill recomputes it, silver and gold.
RANGE = {"start": "2026-11-03", "end": "2026-11-03", "layers": ["silver", "gold"]}

# A range each field allows but not as a whole, submitted while the backfill waits.
BAD_RANGE = {"start": "2026-11-05", "end": "2026-11-03"}


@dataclass
class Response:
    status: int
    body: str
    headers: dict[str, str]

    def json(self) -> dict:
        return json.loads(self.body)


@dataclass
class LiveAirflow:
    airflow: LocalAirflow
    root: Path
    token: str

    def request(
        self, method: str, path: str, body: object = None, token: str | None = None
    ) -> Response:
        """An HTTP request to the api-server, with the admin's token unless told otherwise
        (`token=""`: no credentials at all)."""
        token = self.token if token is None else token
        request = urllib.request.Request(  # noqa: S310 (http to the local api-server)
            path if path.startswith("http") else f"{self.airflow.url}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"}
            | ({"Authorization": f"Bearer {token}"} if token else {}),
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (local)
                return Response(response.status, response.read().decode(), dict(response.headers))
        except urllib.error.HTTPError as error:
            return Response(error.code, error.read().decode(), dict(error.headers))

    def trigger(self, dag_id: str, conf: dict | None = None) -> Response:
        """What the Trigger dialog sends (the DAGs triggered here start unpaused)."""
        return self.request(
            "POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf or {}}
        )

    @staticmethod
    def run_path(dag_id: str, run_id: str) -> str:
        """The REST API's path of one DAG run."""
        return f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}"

    def wait_for(self, dag_id: str, run_id: str) -> dict:
        path = self.run_path(dag_id, run_id)
        wait_until(
            lambda: self.request("GET", path).json()["state"] in ("success", "failed"),
            900,
            f"{dag_id} run {run_id}",
        )
        return self.request("GET", path).json()

    def links(self, dag_id: str, run_id: str, task_id: str) -> dict[str, str]:
        path = f"{self.run_path(dag_id, run_id)}/taskInstances/{task_id}/links"
        return self.request("GET", path).json()["extra_links"]


def generate(root: Path, seed: int, start: str, days: int = 1) -> None:
    generated = run_in_process(
        "generate", "--events", "1500", "--seed", str(seed), "--start", start,
        "--days", str(days), "--data-root", str(root),
    )  # fmt: skip
    assert generated.returncode == 0, generated.stderr


def generate_day(root: Path, day: int) -> None:
    generate(root, day, f"2026-11-0{day}")


def needs(browser) -> None:
    if browser is None:
        pytest.skip("chromium and chromedriver are not installed (`make browser`)")


def all_runs(live: LiveAirflow) -> dict[str, list[str]]:
    """Every DAG's runs, by run id."""
    return {
        dag["dag_id"]: [
            run["dag_run_id"]
            for run in live.request("GET", f"/api/v2/dags/{dag['dag_id']}/dagRuns").json()[
                "dag_runs"
            ]
        ]
        for dag in live.request("GET", "/api/v2/dags").json()["dags"]
    }


def click_trigger(browser, live: LiveAirflow, dag_id: str) -> None:
    """The Trigger button on the DAG's page, then the dialog's own, as a user does."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{live.airflow.url}/dags/{dag_id}")
    trigger = (By.XPATH, "//button[normalize-space()='Trigger']")
    WebDriverWait(browser, 60).until(expected_conditions.element_to_be_clickable(trigger)).click()
    dialog = (By.XPATH, "//*[@role='dialog']//button[normalize-space()='Trigger']")
    WebDriverWait(browser, 60).until(expected_conditions.element_to_be_clickable(dialog)).click()


def fill_range_form(browser, live: LiveAirflow, start: str, end: str) -> None:
    """The range backfill's form as a user fills it: Trigger, the two dates (typed as
    the date fields take them, month first), then the dialog's Trigger."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{live.airflow.url}/dags/lakehouse_backfill_range")
    trigger = (By.XPATH, "//button[normalize-space()='Trigger']")
    WebDriverWait(browser, 60).until(expected_conditions.element_to_be_clickable(trigger)).click()
    for field, date in (("element_start", start), ("element_end", end)):
        typed = WebDriverWait(browser, 60).until(
            expected_conditions.presence_of_element_located((By.ID, field))
        )
        year, month, day = date.split("-")
        typed.send_keys(f"{month}{day}{year}")
    dialog = (By.XPATH, "//*[@role='dialog']//button[normalize-space()='Trigger']")
    WebDriverWait(browser, 60).until(expected_conditions.element_to_be_clickable(dialog)).click()


@dataclass
class FirstRun:
    run: dict  # the incremental DAG's run, ended: silver passed with warnings
    runs_at_click: dict[str, list[str]]  # every DAG's runs once the click had made one
    dialog_text: str  # what the trigger dialog said
    backfill: dict  # the range backfill triggered while the run was in progress, ended
    refused: dict  # a bad range in the form, submitted while that backfill waited, ended


def task_instances(live: LiveAirflow, dag_id: str, run_id: str) -> dict[str, dict]:
    path = f"{live.run_path(dag_id, run_id)}/taskInstances"
    return {t["task_id"]: t for t in live.request("GET", path).json()["task_instances"]}


def task_times(live: LiveAirflow, dag_id: str, run_id: str) -> str:
    """A run's tasks and how long each ran, as Airflow recorded it: a figure for the
    test run's summary (where the live tests' time goes)."""
    tasks = task_instances(live, dag_id, run_id)
    return f"{dag_id}: " + ", ".join(
        f"{task} {info['duration']:.0f} s" for task, info in tasks.items() if info["duration"]
    )


def task_log(live: LiveAirflow, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
    path = f"{live.run_path(dag_id, run_id)}/taskInstances/{task_id}/logs/{try_number}"
    found = live.request("GET", f"{path}?full_content=true")
    assert found.status == 200, found.body[:300]
    return json.dumps(found.json())


def reported_changes(live: LiveAirflow, dag_id: str, run_id: str, task_id: str) -> dict:
    """Per table the task's run report says changed: its checked version and rows written."""
    report = live.links(dag_id, run_id, task_id)["Run report"]
    name = report.rsplit("/", 1)[-1].removesuffix(".html")
    summary = json.loads((live.root / "reports" / "runs" / f"{name}.json").read_text())
    return {
        f"lakehouse.{table['table'].replace('/', '.')}": table
        for layer in summary["checks"]
        for table in layer["tables"]
        if table["rows_written"]
    }


def asset_events(live: LiveAirflow, dag_id: str, run_id: str) -> dict[str, dict]:
    query = urllib.parse.urlencode({"source_dag_id": dag_id, "source_run_id": run_id})
    events = live.request("GET", f"/api/v2/assets/events?{query}&limit=100").json()
    return {event["name"]: event for event in events["asset_events"]}


def click_a_link_inside(browser, frame, link_text: str) -> tuple[str, str]:
    """In the embedded report view `frame`, a click on the first link whose text holds
    `link_text`; the page it opened in the frame: (its title, its text)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.switch_to.frame(frame)
    try:
        link = browser.find_element(By.PARTIAL_LINK_TEXT, link_text)
        before = browser.execute_script("return document.URL")
        link.click()
        WebDriverWait(browser, 60).until(
            lambda b: b.execute_script("return document.URL") != before
        )
        WebDriverWait(browser, 60).until(
            lambda b: b.execute_script("return document.readyState") == "complete"
        )
        # (WebDriver's own `title` is the top page's: Airflow's.)
        title = browser.find_element(By.TAG_NAME, "title").get_attribute("textContent")
        return title, browser.find_element(By.TAG_NAME, "body").text
    finally:
        browser.switch_to.default_content()


def links_of(page_url: str, body: str) -> set[str]:
    """The pages a served page links to (anchors within a page left out), as URLs."""
    return {
        urllib.parse.urljoin(page_url, link) for link in re.findall(r'(?:href|src)="([^"#]+)', body)
    }


VENV_BIN = Path(sys.executable).parent

TASKS = {"bronze", "silver", "gold"}


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


def dags_test(env: dict[str, str], data_root: Path, dag_id: str, *args: str):
    return subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "test", dag_id, *args],
        env={**env, "LAKEHOUSE_DATA_ROOT": str(data_root)},
        capture_output=True,
        text=True,
        timeout=900,
    )


def trigger_dialog(browser, live: LiveAirflow, dag_id: str) -> str:
    """The text of a DAG's trigger dialog, closed again without a click on its Trigger."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{live.airflow.url}/dags/{dag_id}")
    trigger = (By.XPATH, "//button[normalize-space()='Trigger']")
    WebDriverWait(browser, 60).until(expected_conditions.element_to_be_clickable(trigger)).click()
    dialog = (By.XPATH, "//*[@role='dialog'][.//button[normalize-space()='Trigger']]")
    shown = WebDriverWait(browser, 60).until(
        expected_conditions.visibility_of_element_located(dialog)
    )
    text = shown.text
    shown.send_keys(Keys.ESCAPE)
    return text
