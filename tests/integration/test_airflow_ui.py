"""What people see in Airflow, on a live local Airflow as `make airflow-up` starts it:
one click, one run; a backfill that waits for it; warnings and refusals in the log, the
run note and the Asset events; links to the reports behind the login, none dead; the
backfill form that refuses a bad range; a triggerer.

With --full the data root first gets a history for the charts: two days of
events ingested by two `lakehouse run`s (in this process). Then a day of events
is ingested the same way, and a second drop, half behind the streams' watermark, by
the incremental DAG on one Airflow (`make airflow-up`'s code, on free ports,
spark_default = local[2]), triggered by a click in the UI (through the REST API
without a browser); the range backfill is triggered with its form's values
while that run is in progress; later a blocked run. The checks read what they
left behind. With Chromium and chromedriver on the machine (`make browser`),
the screenshot test drives the real UI with Selenium and saves what a user sees
to $LAKEHOUSE_SCREENSHOTS (default build/screenshots/).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from deltalake import DeltaTable

from dev import processes
from dev.local_airflow import ADMIN, SERVICES, LocalAirflow
from dev.processes import wait_until
from tests.helpers import REPO, delta_table, run_in_process, settings_for

pytestmark = pytest.mark.slow

SCREENSHOTS = Path(os.environ.get("LAKEHOUSE_SCREENSHOTS", REPO / "build" / "screenshots"))
# The day the command-line run ingests (generate_day(root, 3)), which the DAG run's
# late events belong to too: the backfill recomputes it, silver and gold.
RANGE = {"start": "2026-11-03", "end": "2026-11-03", "layers": ["silver", "gold"]}


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


@pytest.fixture(scope="module")
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


@pytest.fixture(scope="module")
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


# A range each field allows but not as a whole, submitted while the backfill waits.
BAD_RANGE = {"start": "2026-11-05", "end": "2026-11-03"}


@dataclass
class FirstRun:
    run: dict  # the incremental DAG's run, ended: silver passed with warnings
    runs_at_click: dict[str, list[str]]  # every DAG's runs once the click had made one
    dialog_text: str  # what the trigger dialog said
    backfill: dict  # the range backfill triggered while the run was in progress, ended
    refused: dict  # a bad range in the form, submitted while that backfill waited, ended


@pytest.fixture(scope="module")
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


@pytest.fixture(scope="module")
def incremental(first_run) -> dict:
    """The incremental DAG's run, passed."""
    assert first_run.run["state"] == "success", first_run.run
    return first_run.run


@pytest.fixture(scope="module")
def range_backfill(first_run) -> dict:
    return first_run.backfill


def task_instances(live: LiveAirflow, dag_id: str, run_id: str) -> dict[str, dict]:
    path = f"{live.run_path(dag_id, run_id)}/taskInstances"
    return {t["task_id"]: t for t in live.request("GET", path).json()["task_instances"]}


def task_log(live: LiveAirflow, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
    path = f"{live.run_path(dag_id, run_id)}/taskInstances/{task_id}/logs/{try_number}"
    found = live.request("GET", f"{path}?full_content=true")
    assert found.status == 200, found.body[:300]
    return json.dumps(found.json())


# It pays for `first_run`: two DAG runs, seven tasks, six of them a Spark job in a process
# of its own, which on busy cores can outlast the default limit.
@pytest.mark.timeout(1800)
def test_one_click_on_trigger_runs_the_pipeline_once(live, first_run):
    """No schedule under `make airflow-up`, and unpaused from the start: the dialog has
    no "Unpause" box that would start a scheduled run beside the manual one."""
    assert {dag: len(runs) for dag, runs in first_run.runs_at_click.items()} == {
        "lakehouse_incremental": 1,
        "lakehouse_backfill": 0,
        "lakehouse_backfill_range": 0,
        "lakehouse_maintenance": 0,
    }
    (run_id,) = first_run.runs_at_click["lakehouse_incremental"]
    assert run_id.startswith("manual__"), run_id
    assert "Unpause" not in first_run.dialog_text, first_run.dialog_text
    # Once it has ended, still that one run, and no scheduled run of any DAG.
    assert first_run.run["dag_run_id"] == run_id
    later = all_runs(live)
    assert later["lakehouse_incremental"][:1] == [run_id]  # later ones are this module's
    assert later["lakehouse_backfill"] == later["lakehouse_maintenance"] == []


def test_a_backfill_triggered_during_an_incremental_run_waits_for_it_then_runs_once(
    live, incremental, range_backfill
):
    assert range_backfill["state"] == "success", range_backfill
    layers = task_instances(live, "lakehouse_incremental", incremental["dag_run_id"])
    tasks = task_instances(live, "lakehouse_backfill_range", range_backfill["dag_run_id"])
    # Every task on its first try, and the backfill after the run's last layer.
    assert {t: (i["state"], i["try_number"]) for t, i in tasks.items()} == dict.fromkeys(
        ("check_request", "backfill", "validate", "parity"), ("success", 1)
    )
    assert tasks["backfill"]["start_date"] >= layers["gold"]["end_date"], (tasks, layers)


def test_a_layer_that_passed_with_warnings_says_so_in_its_log_its_run_note_and_its_assets(
    live, incremental
):
    run_id = incremental["dag_run_id"]
    note = incremental["note"] or ""
    # A first line the run's header shows whole, then the warning, read the right way.
    first, *listed = note.splitlines()
    assert first == "silver: passed with 1 warning(s):", note
    assert listed[0].startswith("- silver/late_drops: not met (table): no query drops"), note
    assert "of its input as late" in note and "bronze" not in note, note
    # The silver task keeps its own lines as its note: the grid marks the task.
    silver = task_instances(live, "lakehouse_incremental", run_id)["silver"]
    assert silver["state"] == "success" and silver["note"] == note, silver
    log = task_log(live, "lakehouse_incremental", run_id, "silver", 1)
    assert "data-quality warning: silver/late_drops: " in log, log[-2000:]
    # Without the JDK's line on the incubator module every Spark 4 driver loads.
    assert "Using incubator modules" not in log and "checks silver" in log, log[:2000]
    events = asset_events(live, "lakehouse_incremental", run_id)
    quality = {name: event["extra"]["quality"] for name, event in events.items()}
    warned = {name for name, said in quality.items() if said.startswith("passed with warnings")}
    assert "lakehouse.silver.user_actions" in warned, quality
    assert not any(name.startswith("lakehouse.bronze.") for name in warned), quality
    assert "of its input as late" in quality["lakehouse.silver.user_actions"]


def test_airflow_up_run_again_keeps_the_running_airflow(live):
    """`make airflow-up` a second time says Airflow runs and stops nothing."""
    home, port = live.airflow.home, str(live.airflow.port)
    start = ["start", "--home", str(home), "--port", port, "--data-root", str(live.root)]
    again = subprocess.run(
        [sys.executable, "-m", "dev.local_airflow", *start],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"Airflow is already running from {home}" in again.stdout
    assert f"Airflow is up: {live.airflow.url}" in again.stdout
    assert {s.name for s in processes.running(live.airflow.state)} == set(SERVICES)
    assert processes.http_ok(f"{live.airflow.url}/api/v2/monitor/health")


@pytest.mark.parametrize("dag_id", ["lakehouse_backfill", "lakehouse_maintenance"])
def test_a_nightly_dags_trigger_dialog_has_no_unpause_box(live, browser, dag_id):
    """Unpaused from the start, so the dialog offers no "Unpause" box (ticked by default,
    it also started the night's scheduled run: one click made two runs); closed here
    without a click on its Trigger."""
    needs(browser)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{live.airflow.url}/dags/{dag_id}")
    trigger = (By.XPATH, "//button[normalize-space()='Trigger']")
    WebDriverWait(browser, 60).until(expected_conditions.element_to_be_clickable(trigger)).click()
    dialog = (By.XPATH, "//*[@role='dialog'][.//button[normalize-space()='Trigger']]")
    visible = expected_conditions.visibility_of_element_located(dialog)
    shown = WebDriverWait(browser, 60).until(visible)
    text = shown.text
    shown.send_keys(Keys.ESCAPE)
    assert "Trigger Dag" in text and "Unpause" not in text, text
    assert all_runs(live)[dag_id] == []


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


def test_links_clicked_inside_the_embedded_reports_open_with_the_login(live, browser, incremental):
    """Browse > Lakehouse reports and a DAG run's Lakehouse reports tab embed the pages;
    a click on a link inside them opens the page with the login the browser holds
    (as a person clicks: no cookie or token added by hand). A sandboxed page with an
    opaque origin answered every such click with "Not authenticated"."""
    needs(browser)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    wait = WebDriverWait(browser, 60)
    frame = (By.TAG_NAME, "iframe")

    browser.get(f"{live.airflow.url}/plugin/lakehouse-reports")
    embedded = wait.until(expected_conditions.presence_of_element_located(frame))
    title, text = click_a_link_inside(browser, embedded, "silver/user_actions")
    assert "Not authenticated" not in text, text[:300]
    assert "silver/user_actions" in text and "Rows in and out" in text, text[:300]
    browser.save_screenshot(str(SCREENSHOTS / "11-browse-reports-link-followed.png"))

    run_id = incremental["dag_run_id"]
    browser.get(f"{live.airflow.url}/dags/lakehouse_incremental/runs/{urllib.parse.quote(run_id)}")
    tab = (By.XPATH, "//a[normalize-space()='Lakehouse reports']")
    wait.until(expected_conditions.element_to_be_clickable(tab)).click()
    embedded = wait.until(expected_conditions.presence_of_element_located(frame))
    wait.until(lambda _: "dag-runs" in embedded.get_attribute("src"))
    title, text = click_a_link_inside(browser, embedded, "run-")
    assert "Not authenticated" not in text, text[:300]
    assert title.startswith("lakehouse run "), title
    browser.save_screenshot(str(SCREENSHOTS / "12-run-tab-link-followed.png"))


def test_a_served_page_runs_no_script_in_the_browser(live, browser):
    """The sandbox keeps Airflow's origin for the links' sake, and still runs nothing: a
    page in the reports folder with an inline script and an event handler, as a value
    that escaped every escaping would be, changes nothing when Chromium opens it."""
    needs(browser)
    probe = live.root / "reports" / "probe-script.html"
    probe.write_text(
        "<!doctype html><title>inert</title><script>document.title='ran'</script>"
        "<img src=missing.png onerror=\"document.title='ran'\"><p>probe</p>"
    )
    try:
        browser.get(f"{live.airflow.url}/lakehouse/reports/probe-script.html")
        assert "probe" in browser.page_source
        assert browser.title == "inert"
    finally:
        probe.unlink()


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
        if table["rows_written"]
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
        assert policy.startswith("sandbox allow-same-origin;"), policy
        assert "allow-scripts" not in policy and "default-src 'none'" in policy, policy
        assert "<script" not in page.body.lower(), path


def test_the_reports_route_serves_nothing_outside_the_reports_folder(live, incremental):
    for path in ("%2e%2e/%2e%2e/airflow/secrets/admin-password", "..%2f..%2fairflow.cfg"):
        assert live.request("GET", f"/lakehouse/reports/{path}").status == 404


@pytest.mark.parametrize(
    ("form", "field"),
    [
        ({"start": "2026-11-01"}, "end"),
        ({"start": "2026-11-01", "end": "2026-11-01", "layers": ["bronze"]}, "layers"),
        ({"start": "2026-11-01", "end": "2026-11-01", "layers": 5}, "layers"),
        ({"start": "11/01/2026", "end": "2026-11-01"}, "start"),
    ],
    ids=["no-end", "unknown-layer", "layers-not-a-list", "not-a-date"],
)
def test_airflow_refuses_a_malformed_form_field_before_a_run_is_created(live, form, field):
    """Each field against its Param schema: Airflow's own check, before any run exists."""
    runs = "/api/v2/dags/lakehouse_backfill_range/dagRuns"
    before = live.request("GET", runs).json()["total_entries"]
    refused = live.request("POST", runs, {"logical_date": None, "conf": form})
    assert refused.status == 400, refused.body
    assert field in refused.json()["detail"], refused.body
    assert live.request("GET", runs).json()["total_entries"] == before
    # A refusal changes no DAG's pause state: every lakehouse DAG here starts unpaused
    # (the incremental one because it has no schedule here) and stays so.
    paused = {
        d["dag_id"]: d["is_paused"] for d in live.request("GET", "/api/v2/dags").json()["dags"]
    }
    assert not any(paused.values()), paused
    # Without credentials Airflow refuses, naming nothing.
    anonymous = live.request("POST", runs, {"logical_date": None, "conf": form}, token="")
    assert anonymous.status == 401, anonymous.body
    assert "lakehouse_backfill_range" not in anonymous.body


def test_the_range_backfill_runs_alone_and_names_its_range(live, first_run):
    note = first_run.backfill["note"]
    assert note.splitlines()[0] == "backfill 2026-11-03..2026-11-03, layers silver, gold"
    assert "backfill: recomputed 2026-11-03..2026-11-03" in note, note
    assert "parity: 2026-11-03..2026-11-03: " in note and " tables agree" in note, note
    # It has no schedule (and so starts unpaused): its runs are the two triggered (the
    # refused form's included); the nightly backfill, unpaused, waits for its first
    # midnight: none at deployment.
    ours = {first_run.backfill["dag_run_id"], first_run.refused["dag_run_id"]}
    assert set(all_runs(live)["lakehouse_backfill_range"]) >= ours
    assert all_runs(live)["lakehouse_backfill"] == []


def test_a_bad_range_in_the_form_fails_at_once_in_one_line_while_another_backfill_waits(
    live, first_run
):
    """End before start, submitted through the form while a sound backfill waited for the
    incremental run: its check ran at once (it did not queue behind that run) and failed
    in one line, in the run's note, while the incremental run was still in progress."""
    refused, waiting = first_run.refused, first_run.backfill
    assert refused["state"] == "failed"
    reason = "check_request: refused: start 2026-11-05 is after end 2026-11-03"
    assert refused["note"] == reason, refused["note"]
    # Once, it waited for that backfill run to end, which waited for the incremental one.
    assert refused["end_date"] < first_run.run["end_date"], (refused, first_run.run)
    assert refused["end_date"] < waiting["end_date"], (refused, waiting)


@pytest.mark.parametrize(
    ("how", "form", "reason"),
    [
        (
            "cli",
            {"start": "2026-11-03", "end": "2026-11-01"},
            "start 2026-11-03 is after end 2026-11-01",
        ),
        (
            "form",
            {"start": "1900-01-01", "end": "2999-12-31"},
            "1900-01-01..2999-12-31 is 401,767 days, more than 366: check the dates",
        ),
    ],
    ids=["cli-end-before-start", "form-longer-than-366-days"],
)
def test_a_refused_request_is_one_line_in_the_log_and_the_run_note(
    live, range_backfill, how, form, reason
):
    """A range that each field of the form allows but not as a whole: the run is created
    (by `airflow dags trigger`, or the form through the REST API) and `check_request`
    refuses it, in one line, into the run's note too; no retry, no Spark job."""
    before = set(all_runs(live)["lakehouse_backfill_range"])
    if how == "cli":
        created = subprocess.run(
            [str(Path(sys.executable).with_name("airflow")), "dags", "trigger",
             "lakehouse_backfill_range", "-c", json.dumps(form)],
            env=live.airflow.env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr[-2000:]
    else:
        runs = "/api/v2/dags/lakehouse_backfill_range/dagRuns"
        created_run = live.request("POST", runs, {"logical_date": None, "conf": form})
        assert created_run.status == 200, created_run.body
    (run_id,) = set(all_runs(live)["lakehouse_backfill_range"]) - before
    done = live.wait_for("lakehouse_backfill_range", run_id)
    assert done["state"] == "failed"
    assert done["note"].startswith(f"check_request: refused: {reason}"), done["note"]
    tasks = task_instances(live, "lakehouse_backfill_range", run_id)
    assert (tasks["check_request"]["state"], tasks["check_request"]["try_number"]) == ("failed", 1)
    assert tasks["backfill"]["state"] in ("upstream_failed", None), tasks
    log = task_log(live, "lakehouse_backfill_range", run_id, "check_request", 1)
    assert reason in log and "Traceback" not in log, log[-2000:]
    paused = {
        d["dag_id"]: d["is_paused"] for d in live.request("GET", "/api/v2/dags").json()["dags"]
    }
    assert not any(paused.values()), paused


def test_the_range_backfill_updates_the_assets_of_what_it_rewrote(live, range_backfill):
    """Its validate task checks the tables the backfill rewrote and updates their Assets;
    bronze, not recomputed, gets no event."""
    run_id = range_backfill["dag_run_id"]
    tasks = task_instances(live, "lakehouse_backfill_range", run_id)
    assert tasks["validate"]["state"] == "success", (range_backfill, tasks)
    changed = reported_changes(live, "lakehouse_backfill_range", run_id, "validate")
    events = asset_events(live, "lakehouse_backfill_range", run_id)
    assert set(events) == set(changed)
    assert "lakehouse.silver.user_actions" in events and "lakehouse.gold.user_status" in events
    assert not any(name.startswith("lakehouse.bronze.") for name in events), events
    for name, event in events.items():
        assert event["source_task_id"] == "validate"
        assert event["extra"]["delta_version"] == changed[name]["version"], event


@pytest.fixture(scope="module")
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


def test_a_blocked_gate_fails_its_task_at_once_in_one_line_and_gold_never_runs(live, blocked):
    run_id = blocked["dag_run_id"]
    assert blocked["state"] == "failed", blocked
    tasks = task_instances(live, "lakehouse_incremental", run_id)
    assert {t: (i["state"], i["try_number"]) for t, i in tasks.items()} == {
        "bronze": ("success", 1),
        "silver": ("failed", 1),  # no retry
        "gold": ("upstream_failed", 0),
    }
    log = task_log(live, "lakehouse_incremental", run_id, "silver", 1)
    reason = "refused: 1 blocking data-quality check(s) failed (exit code 3); not retrying"
    assert log.count(reason) == 1, log[-4000:]
    # The failure once, at ERROR; no traceback, no spark-submit command line repeated.
    explained = [e for e in json.loads(log)["content"] if "blocking check failed" in str(e)]
    assert len(explained) == 1, explained
    assert "expect_column_values_to_be_unique(impression_id)" in str(explained[0])
    assert "Traceback" not in log and "Cannot execute" not in log, log[-4000:]
    assert log.count("Spark-Submit cmd") == 1
    assert blocked["note"].startswith("silver: refused: 1 blocking data-quality check(s)")


def links_of(page_url: str, body: str) -> set[str]:
    """The pages a served page links to (anchors within a page left out), as URLs."""
    return {
        urllib.parse.urljoin(page_url, link) for link in re.findall(r'(?:href|src)="([^"#]+)', body)
    }


def test_every_link_two_levels_below_the_reports_index_answers(live, blocked):
    """After a command-line run, a DAG run, a range backfill (its validate and parity),
    a refused backfill and a blocked DAG run: the index, every page it links and every
    page those link, Data Docs and the Airflow pages a report links back to included,
    answer 200 behind the login. (Each Data Docs build deleted the earlier runs' pages.)"""
    index = f"{live.airflow.url}/lakehouse/reports/index.html"
    seen, level = {index: 200}, {index}
    for _ in range(2):
        found = set()
        for url in level:
            page = live.request("GET", url)
            seen[url] = page.status
            if page.status == 200 and url.startswith(f"{live.airflow.url}/lakehouse/"):
                found |= links_of(url, page.body)
        level = found - set(seen)
        for url in level:
            assert url.startswith(live.airflow.url), url  # nothing from elsewhere
    for url in level:  # the second level's pages themselves
        seen[url] = live.request("GET", url).status
    dead = sorted(url for url, status in seen.items() if status != 200)
    assert dead == [], dead
    assert sum("/data_docs/validations/" in url for url in seen) > 20, len(seen)
    assert any("/dags/lakehouse_incremental/runs/" in url for url in seen)


def test_screenshots_of_what_a_user_sees(live, browser, first_run, incremental, range_backfill):
    """Saved for people to look at (the issues ask for them); the assertions check each
    page shows what the picture is for."""
    needs(browser)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    wait = WebDriverWait(browser, 60)
    url = live.airflow.url

    def shown(text: str) -> None:
        """Until an element showing `text` is visible (the first match may be hidden)."""
        matches = (By.XPATH, f"//*[contains(text(), '{text}')]")
        wait.until(lambda _: any(e.is_displayed() for e in browser.find_elements(*matches)))

    # The DAG list: each DAG says what it does.
    browser.get(f"{url}/dags")
    shown("landing -> bronze -> silver -> gold")
    browser.save_screenshot(str(SCREENSHOTS / "0-dag-list.png"))

    # The extra links are on the task instance's Details tab.
    run_id = incremental["dag_run_id"]
    browser.get(f"{url}/dags/lakehouse_incremental/runs/{run_id}/tasks/silver/details")
    link = wait.until(
        expected_conditions.element_to_be_clickable((By.PARTIAL_LINK_TEXT, "Run report"))
    )
    browser.save_screenshot(str(SCREENSHOTS / "1-task-extra-links.png"))
    quality_url = browser.find_element(By.PARTIAL_LINK_TEXT, "Data quality").get_attribute("href")
    browser.get(link.get_attribute("href"))
    assert "lakehouse run silver" in browser.title
    assert browser.find_element(By.PARTIAL_LINK_TEXT, "This task in Airflow")
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

    # The DAG run's own tab: the reports its tasks wrote.
    browser.get(f"{url}/dags/lakehouse_incremental/runs/{urllib.parse.quote(run_id)}")
    tab = (By.XPATH, "//a[normalize-space()='Lakehouse reports']")
    wait.until(expected_conditions.element_to_be_clickable(tab)).click()
    frame = wait.until(expected_conditions.presence_of_element_located((By.TAG_NAME, "iframe")))
    assert "/lakehouse/reports/dag-runs/lakehouse_incremental/" in frame.get_attribute("src")
    browser.switch_to.frame(frame)
    assert len(browser.find_elements(By.PARTIAL_LINK_TEXT, "run-")) == 3  # its three layers
    browser.switch_to.default_content()
    browser.save_screenshot(str(SCREENSHOTS / "7-dag-run-reports-tab.png"))

    # Silver passed with warnings, as the run's note says.
    warned = incremental["dag_run_id"]
    browser.get(f"{url}/dags/lakehouse_incremental/runs/{urllib.parse.quote(warned)}")
    shown("silver: passed with 1 warning(s)")
    browser.save_screenshot(str(SCREENSHOTS / "8-run-passed-with-warnings.png"))
    # The same run in the grid (a success; the note marks its bar and the silver task)
    # and in the runs list (states only: Airflow's list shows no note).
    browser.get(f"{url}/dags/lakehouse_incremental")
    shown("gold")
    browser.save_screenshot(str(SCREENSHOTS / "13-warned-run-in-the-grid.png"))
    browser.get(f"{url}/dags/lakehouse_incremental/runs")
    shown(warned[:20])
    browser.save_screenshot(str(SCREENSHOTS / "14-warned-run-in-the-runs-list.png"))
    # ... and as the silver table's asset event says (Airflow folds the facts: unfolded).
    asset = live.request("GET", "/api/v2/assets?name_pattern=silver.user_actions").json()
    browser.get(f"{url}/assets/{asset['assets'][0]['id']}")
    fold = (By.CSS_SELECTOR, ".codicon-folding-collapsed")  # an event's ▸
    wait.until(expected_conditions.element_to_be_clickable(fold))
    (source,) = [
        link
        for link in browser.find_elements(By.XPATH, "//a[contains(@href, '/tasks/')]")
        if warned in urllib.parse.unquote(link.get_attribute("href"))
    ]
    # The event is the nearest block around its source link that holds a ▸.
    event = source.find_element(
        By.XPATH, "./ancestor::*[.//*[contains(@class, 'codicon-folding-collapsed')]][1]"
    )
    event.find_element(*fold).click()
    wait.until(
        lambda _: (
            "passed with warnings: dropped"
            in " ".join(event.find_element(By.CSS_SELECTOR, ".view-lines").text.split())
        )
    )
    browser.save_screenshot(str(SCREENSHOTS / "9-asset-event-with-warnings.png"))

    # The backfill that waited behind that run, every task on its first try.
    backfill = range_backfill["dag_run_id"]
    browser.get(f"{url}/dags/lakehouse_backfill_range/runs/{urllib.parse.quote(backfill)}")
    shown("backfill 2026-11-03..2026-11-03, layers silver, gold")
    browser.save_screenshot(str(SCREENSHOTS / "10-backfill-waited-then-succeeded.png"))

    # A gold table's Asset: its lineage graph back to bronze.
    gold = live.request("GET", "/api/v2/assets?name_pattern=gold.ad_performance_hourly")
    browser.get(f"{url}/assets/{gold.json()['assets'][0]['id']}")
    lineage = (By.XPATH, "//button[normalize-space()='Task Dependencies']")
    wait.until(expected_conditions.element_to_be_clickable(lineage)).click()
    for label in ("lakehouse.bronze.impressions", "lakehouse.silver.ad_attribution"):
        shown(label)
    # The whole chain in the picture: React Flow's "fit view" control.
    browser.find_element(By.CSS_SELECTOR, ".react-flow__controls-fitview").click()
    browser.save_screenshot(str(SCREENSHOTS / "6-asset-lineage.png"))

    # The range form refuses a malformed field itself (Airflow's Param schema): a layer
    # that is not one of the choices cannot be picked; an empty end date blocks Trigger.
    browser.get(f"{url}/dags/lakehouse_backfill_range")
    trigger = (By.XPATH, "//button[normalize-space()='Trigger']")
    wait.until(expected_conditions.element_to_be_clickable(trigger)).click()
    wait.until(expected_conditions.presence_of_element_located((By.ID, "element_start")))
    dialog = browser.find_element(By.XPATH, "//*[@role='dialog']")
    assert "Unpause" not in dialog.text
    browser.find_element(By.ID, "element_start").send_keys("11032026")
    assert not browser.find_elements(*trigger)[-1].is_enabled()  # the end is required
    browser.save_screenshot(str(SCREENSHOTS / "5-backfill-form-refuses.png"))

    # An end before the start, which the fields allow: the run the form made failed
    # within seconds, its reason the run's note.
    refused = first_run.refused["dag_run_id"]
    browser.get(f"{url}/dags/lakehouse_backfill_range/runs/{urllib.parse.quote(refused)}")
    shown("check_request: refused: start 2026-11-05 is after end 2026-11-03")
    browser.save_screenshot(str(SCREENSHOTS / "15-form-range-refused-in-the-run-note.png"))
