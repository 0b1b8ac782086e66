"""What people see in Airflow: links to the reports, the reports behind the login, the
backfill form that refuses a bad range, and a triggerer. On a live local Airflow.

With --full the data root first gets a history for the charts: two days of
events ingested by two `lakehouse run`s (in this process). Then a day of
events is ingested by the incremental DAG on one Airflow (`make airflow-up`'s
code, on free ports, spark_default = local[2]), triggered through the REST
API as the UI does; then the range backfill is triggered with its form's
values. The checks read what they left behind. With Chromium and
chromedriver on the machine (`make browser`), the screenshot test drives the
real UI with Selenium and saves what a user sees to $LAKEHOUSE_SCREENSHOTS
(default build/screenshots/).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from dev.local_airflow import ADMIN, LocalAirflow
from dev.processes import wait_until
from tests.helpers import REPO, run_in_process

pytestmark = pytest.mark.slow

SCREENSHOTS = Path(os.environ.get("LAKEHOUSE_SCREENSHOTS", REPO / "build" / "screenshots"))
# The day the DAG run ingests (generate_day(root, 3)), gold only.
RANGE = {"start": "2026-11-03", "end": "2026-11-03", "layers": ["gold"]}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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
        self.request("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
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


def generate_day(root: Path, day: int) -> None:
    generated = run_in_process(
        "generate", "--events", "1500", "--seed", str(day), "--start", f"2026-11-0{day}",
        "--data-root", str(root),
    )  # fmt: skip
    assert generated.returncode == 0, generated.stderr


@pytest.fixture(scope="module")
def live(request, spark, tmp_path_factory) -> LiveAirflow:
    base = tmp_path_factory.mktemp("ui")
    root = base / "data"
    history = (1, 2) if request.config.getoption("--full") else ()
    for day in history:  # runs from the command line, for the charts
        generate_day(root, day)
        done = run_in_process("run", "--data-root", str(root))
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    generate_day(root, 3)  # for the DAG run
    airflow = LocalAirflow(base / "airflow", free_port(), "local[2]", root, schedule="none")
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


@pytest.fixture(scope="module")
def incremental(live) -> dict:
    """One run of the incremental DAG, as the Trigger button starts it."""
    run = live.trigger("lakehouse_incremental").json()
    done = live.wait_for("lakehouse_incremental", run["dag_run_id"])
    assert done["state"] == "success", done
    return done


@pytest.fixture(scope="module")
def range_backfill(request, live, incremental) -> dict:
    """The range backfill triggered with its form's values, after the incremental run.

    Waited for only with --full (test_the_range_backfill_updates_the_assets_of_what_it_
    rewrote); otherwise stopped once triggered, as a user marks a run failed in the UI,
    so that its Spark tasks do not share the machine with the tests that follow (they
    never finished before Airflow stopped). Its tasks' reports are the CLI's
    (test_late_data, test_parity); test_airflow_dags.py runs the DAG to its end with
    --full.
    """
    response = live.trigger("lakehouse_backfill_range", RANGE)
    assert response.status == 200, response.body
    run = response.json()
    if not request.config.getoption("--full"):
        path = live.run_path("lakehouse_backfill_range", run["dag_run_id"])
        stopped = live.request("PATCH", path, {"state": "failed"})
        assert stopped.status == 200, stopped.body
    return run


def test_the_home_page_shows_every_component_healthy_triggerer_included(live):
    health = live.request("GET", "/api/v2/monitor/health").json()
    for component in ("metadatabase", "scheduler", "dag_processor", "triggerer"):
        assert health[component]["status"] == "healthy", (component, health)


def test_every_layer_task_links_to_its_own_run_report_behind_the_login(live, incremental):
    run_id = incremental["dag_run_id"]
    for layer in ("bronze", "silver", "gold"):
        links = live.links("lakehouse_incremental", run_id, layer)
        assert set(links) == {"Run report", "Data quality"}, links
        report = live.request("GET", links["Run report"])
        assert report.status == 200, (links, report.body[:300])
        # The page names the DAG, the DAG run and the layer.
        assert "lakehouse_incremental" in report.body and layer in report.body
        assert run_id.replace("+", "&#43;") in report.body or run_id in report.body
        quality = live.request("GET", links["Data quality"])
        assert quality.status == 200 and "blocking" in quality.body, links
        # Without a login: refused.
        assert live.request("GET", links["Run report"], token="").status in (401, 403)


def test_the_dag_run_page_lists_its_tasks_reports_and_the_index_groups_them(live, incremental):
    run_id = incremental["dag_run_id"]
    page = live.request(
        "GET", f"/lakehouse/reports/dag-runs/lakehouse_incremental/{urllib.parse.quote(run_id)}"
    )
    assert page.status == 200, page.body[:300]
    assert page.body.count("../../runs/run-") == 3  # bronze, silver and gold
    index = live.request("GET", "/lakehouse/reports/index.html")
    assert index.status == 200
    assert "<tr class=dagrun><th colspan=7><code>lakehouse_incremental</code>" in index.body
    # Every link of the index leads to a page the api-server serves.
    links = set(re.findall(r'href="([^"#]+)"', index.body))
    assert any(link.startswith("dag-runs/") for link in links), links
    for link in links:
        served = live.request("GET", f"/lakehouse/reports/{link}")
        assert served.status == 200, (link, served.body[:200])


def reported_changes(live: LiveAirflow, dag_id: str, run_id: str, task_id: str) -> dict:
    """Per table the task's run report says changed: its checked version and rows written."""
    report = live.links(dag_id, run_id, task_id)["Run report"]
    name = report.rsplit("/", 1)[-1].removesuffix(".html")
    summary = json.loads((live.root / "reports" / "runs" / f"{name}.json").read_text())
    return {
        f"lakehouse.{table['table'].replace('/', '.')}": table
        for layer in summary["checks"]
        for table in layer["tables"]
        if table["rows_written"] is not None
    }


def asset_events(live: LiveAirflow, dag_id: str, run_id: str) -> dict[str, dict]:
    query = urllib.parse.urlencode({"source_dag_id": dag_id, "source_run_id": run_id})
    events = live.request("GET", f"/api/v2/assets/events?{query}&limit=100").json()
    return {event["name"]: event for event in events["asset_events"]}


def test_assets_get_an_event_per_changed_table_with_its_facts_and_chain_the_layers(
    live, incremental
):
    run_id = incremental["dag_run_id"]
    events = asset_events(live, "lakehouse_incremental", run_id)
    changed = {}
    for layer in ("bronze", "silver", "gold"):
        changed.update(reported_changes(live, "lakehouse_incremental", run_id, layer))
    # One event per table the checks saw change, none for the others; each says what changed.
    assert set(events) == set(changed)
    assert "lakehouse.silver.ad_attribution" in events and "lakehouse.gold.user_status" in events
    for name, event in events.items():
        facts = event["extra"]
        assert facts["rows_written"] == changed[name]["rows_written"] > 0, (name, facts)
        assert facts["delta_version"] == changed[name]["version"], (name, facts)
        assert facts["quality"] == "passed" or facts["quality"].startswith("passed with"), facts
        assert facts["report"].endswith(".html"), facts
    # The Assets page's lineage graph of a gold table reaches back to bronze.
    gold = live.request("GET", "/api/v2/assets?name_pattern=gold.ad_performance_hourly").json()
    (asset,) = gold["assets"]
    graph = live.request(
        "GET", f"/ui/dependencies?node_id=asset:{asset['id']}&dependency_type=data"
    ).json()
    labels = {node["id"]: node["label"] for node in graph["nodes"]}
    edges = {(labels[e["source_id"]], labels[e["target_id"]]) for e in graph["edges"]}
    for edge in (
        ("lakehouse.bronze.impressions", "lakehouse_incremental.silver"),
        ("lakehouse_incremental.silver", "lakehouse.silver.ad_attribution"),
        ("lakehouse.silver.ad_attribution", "lakehouse_incremental.gold"),
        ("lakehouse_incremental.gold", "lakehouse.gold.ad_performance_hourly"),
    ):
        assert edge in edges, (edge, sorted(edges))


def test_report_pages_and_data_docs_are_served_sandboxed_without_scripts(live, incremental):
    docs = sorted((live.root / "reports" / "data_docs" / "validations").rglob("*.html"))
    assert docs, "no Data Docs validation page"
    report = live.links("lakehouse_incremental", incremental["dag_run_id"], "silver")
    for path in (
        report["Run report"],
        report["Data quality"],
        "/lakehouse/reports/index.html",
        "/lakehouse/reports/" + docs[0].relative_to(live.root / "reports").as_posix(),
    ):
        page = live.request("GET", path)
        assert page.status == 200, (path, page.body[:200])
        headers = {name.lower(): value for name, value in page.headers.items()}
        assert headers["content-type"].startswith("text/html"), (path, headers)
        assert headers["x-content-type-options"] == "nosniff"
        policy = headers["content-security-policy"]
        assert policy.startswith("sandbox;") and "default-src 'none'" in policy, policy
        assert "<script" not in page.body.lower(), path


def test_the_reports_route_serves_nothing_outside_the_reports_folder(live, incremental):
    for path in ("%2e%2e/%2e%2e/airflow/secrets/admin-password", "..%2f..%2fairflow.cfg"):
        assert live.request("GET", f"/lakehouse/reports/{path}").status == 404


@pytest.mark.parametrize(
    ("form", "reason"),
    [
        ({"start": "2026-11-02", "end": "2026-11-01"}, "start 2026-11-02 is after end 2026-11-01"),
        ({"start": "2026-11-01"}, "give a start and an end date"),
        ({"start": "2026-11-01", "end": "2026-11-01", "layers": ["bronze"]}, "layers: choose"),
        ({"start": "2026-11-01", "end": "2026-11-01", "layers": 5}, "layers: expected a list"),
    ],
    ids=["end-before-start", "no-end", "unknown-layer", "layers-not-a-list"],
)
def test_the_range_form_is_refused_before_a_run_is_created(live, form, reason):
    runs = "/api/v2/dags/lakehouse_backfill_range/dagRuns"
    before = live.request("GET", runs).json()["total_entries"]
    refused = live.request("POST", runs, {"logical_date": None, "conf": form})
    assert refused.status == 400
    assert (
        refused.json()["detail"] == f"lakehouse_backfill_range: {reason}"
        or reason in (refused.json()["detail"])
    )
    assert live.request("GET", runs).json()["total_entries"] == before
    # Without credentials the form is not looked at: Airflow refuses, naming nothing.
    anonymous = live.request("POST", runs, {"logical_date": None, "conf": form}, token="")
    assert anonymous.status == 401, anonymous.body
    assert "lakehouse_backfill_range" not in anonymous.body and reason not in anonymous.body


def test_the_range_backfill_runs_alone_and_names_its_range(live, range_backfill):
    assert range_backfill["note"] == "backfill 2026-11-03..2026-11-03, layers gold"
    # Triggering it unpaused it, and it has no schedule: this run is its only one, and
    # the nightly backfill (paused) has none.
    for dag_id, runs in (("lakehouse_backfill_range", 1), ("lakehouse_backfill", 0)):
        listed = live.request("GET", f"/api/v2/dags/{dag_id}/dagRuns").json()
        assert listed["total_entries"] == runs, (dag_id, listed)


@pytest.mark.full  # the backfill's four tasks: about four minutes
def test_the_range_backfill_updates_the_assets_of_what_it_rewrote(live, range_backfill):
    """Its validate task checks the gold tables the backfill rewrote and updates their
    Assets; the silver ones, not recomputed, get no event."""
    run_id = range_backfill["dag_run_id"]
    done = live.wait_for("lakehouse_backfill_range", run_id)
    path = f"{live.run_path('lakehouse_backfill_range', run_id)}/taskInstances"
    tasks = live.request("GET", path).json()["task_instances"]
    assert {t["task_id"]: t["state"] for t in tasks}["validate"] == "success", (done, tasks)
    changed = reported_changes(live, "lakehouse_backfill_range", run_id, "validate")
    events = asset_events(live, "lakehouse_backfill_range", run_id)
    assert set(events) == set(changed)
    assert events and all(name.startswith("lakehouse.gold.") for name in events), events
    for name, event in events.items():
        assert event["source_task_id"] == "validate"
        assert event["extra"]["delta_version"] == changed[name]["version"], event


def test_screenshots_of_what_a_user_sees(live, incremental, range_backfill):
    """Saved for people to look at (the issue asks for them); the assertions check each
    page shows what the picture is for."""
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.skip("chromium and chromedriver are not installed (`make browser`)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

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
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser = webdriver.Chrome(service=Service(driver_path), options=options)
    wait = WebDriverWait(browser, 60)
    url = live.airflow.url
    try:
        # Logged in as the UI does it: Airflow's session cookie holds the token.
        browser.get(f"{url}/api/v2/monitor/health")
        browser.add_cookie({"name": "_token", "value": live.token, "path": "/"})

        # The extra links are on the task instance's Details tab.
        run_id = incremental["dag_run_id"]
        browser.get(f"{url}/dags/lakehouse_incremental/runs/{run_id}/tasks/silver/details")
        link = wait.until(
            expected_conditions.element_to_be_clickable((By.PARTIAL_LINK_TEXT, "Run report"))
        )
        browser.save_screenshot(str(SCREENSHOTS / "1-task-extra-links.png"))
        quality_url = browser.find_element(By.PARTIAL_LINK_TEXT, "Data quality").get_attribute(
            "href"
        )
        browser.get(link.get_attribute("href"))
        assert "lakehouse run silver" in browser.title
        browser.save_screenshot(str(SCREENSHOTS / "2-run-report.png"))

        # Our own data-quality page: every expectation with its severity, no script.
        browser.get(quality_url)
        assert "data quality" in browser.title
        severities = {e.text for e in browser.find_elements(By.CSS_SELECTOR, "td.severity")}
        assert severities == {"blocking", "warning"}, severities
        assert not browser.find_elements(By.TAG_NAME, "script")
        browser.save_screenshot(str(SCREENSHOTS / "3-data-quality.png"))

        browser.get(f"{url}/lakehouse/reports/index.html")
        assert "lakehouse_incremental" in browser.page_source
        assert len(browser.find_elements(By.CSS_SELECTOR, "svg.chart")) == 7  # the trends
        browser.save_screenshot(str(SCREENSHOTS / "4-reports-index.png"))

        # A gold table's Asset: its lineage graph back to bronze, its latest event's facts.
        gold = live.request("GET", "/api/v2/assets?name_pattern=gold.ad_performance_hourly")
        browser.get(f"{url}/assets/{gold.json()['assets'][0]['id']}")
        lineage = (By.XPATH, "//button[normalize-space()='Task Dependencies']")
        wait.until(expected_conditions.element_to_be_clickable(lineage)).click()
        for label in ("lakehouse.bronze.impressions", "lakehouse.silver.ad_attribution"):
            shown = (By.XPATH, f"//*[contains(text(), '{label}')]")
            wait.until(expected_conditions.visibility_of_element_located(shown))
        # The whole chain in the picture: React Flow's "fit view" control.
        browser.find_element(By.CSS_SELECTOR, ".react-flow__controls-fitview").click()
        browser.save_screenshot(str(SCREENSHOTS / "6-asset-lineage.png"))

        # The range form refuses an end before its start, in the form itself.
        browser.get(f"{url}/dags/lakehouse_backfill_range")
        trigger = (By.XPATH, "//button[normalize-space()='Trigger']")
        wait.until(expected_conditions.element_to_be_clickable(trigger)).click()
        wait.until(expected_conditions.presence_of_element_located((By.ID, "element_start")))
        browser.find_element(By.ID, "element_start").send_keys("11032026")
        browser.find_element(By.ID, "element_end").send_keys("11012026")
        browser.find_elements(*trigger)[-1].click()  # the form's own button
        refusal = (By.XPATH, "//*[contains(text(), 'start 2026-11-03 is after end 2026-11-01')]")
        wait.until(expected_conditions.visibility_of_element_located(refusal))
        browser.save_screenshot(str(SCREENSHOTS / "5-backfill-form-refuses.png"))
    finally:
        browser.quit()
