"""What Airflow shows beside the DAGs, on the live Airflow the DAGs' tests share: every
component healthy, `make airflow-up` run again, the reports behind the login (embedded,
sandboxed, their links alive), and screenshots of what a user sees, saved to
$LAKEHOUSE_SCREENSHOTS (default build/screenshots/)."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import pytest

from dev import processes
from dev.local_airflow import SERVICES
from tests.dags.live import SCREENSHOTS, click_a_link_inside, links_of, needs
from tests.helpers import REPO

pytestmark = pytest.mark.system


def test_the_home_page_shows_every_component_healthy_triggerer_included(live):
    health = live.request("GET", "/api/v2/monitor/health").json()
    for component in ("metadatabase", "scheduler", "dag_processor", "triggerer"):
        assert health[component]["status"] == "healthy", (component, health)


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
