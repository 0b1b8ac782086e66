"""The incremental DAG on a live Airflow: one click, one run; a layer that passed with
warnings says so in its log, its note and its Assets; each layer task links to its
reports; a blocked gate fails its task at once. In the full tier also on a Spark
standalone cluster, triggered through the REST API, and on an S3 data root."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request

import pytest
from deltalake import DeltaTable

from tests.dags.live import (
    TASKS,
    airflow_environment,
    all_runs,
    asset_events,
    dags_test,
    reported_changes,
    task_instances,
    task_log,
    task_times,
)
from tests.helpers import TABLE_NAMES, delta_count, delta_table, run_cli, settings_for

pytestmark = pytest.mark.system


def test_one_click_on_trigger_runs_the_pipeline_once(live, first_run, figures):
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
    figures.append(task_times(live, "lakehouse_incremental", run_id))


def test_a_layer_that_passed_with_warnings_says_so_in_its_log_its_run_note_and_its_assets(
    live, incremental
):
    run_id = incremental["dag_run_id"]
    note = incremental["note"] or ""
    # A first line the run's header shows whole, then the warning, read the right way.
    first, *listed = note.splitlines()
    assert first == "silver: passed with 1 warning(s):", note
    assert listed[0].startswith("- silver/late_drops: not met (table): no query drops"), note
    assert "of its input as late" in note and "bronze: passed with" not in note, note
    # Bronze's notices come after: the sample's lines of a declared field sent as a number.
    notices = note.split("\nbronze: ", 1)[1]
    assert notices.split("\n")[0].endswith(" notice(s):"), note
    assert notices.split("\n")[1].startswith("- bronze/"), note
    assert "drift: field '" in notices and "instead of a string" in notices, note
    # The silver task keeps its own lines as its note: the grid marks the task.
    silver = task_instances(live, "lakehouse_incremental", run_id)["silver"]
    assert silver["state"] == "success" and silver["note"] == note.split("\nbronze: ")[0]
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


# -- the full tier: on a Spark standalone cluster, and on an S3 data root ----

CLUSTER_SERVICES = {
    "api-server",
    "scheduler",
    "dag-processor",
    "triggerer",
    "spark-master",
    "spark-worker",
}


@pytest.mark.full
def test_incremental_dag_triggered_through_the_rest_api_runs_on_the_cluster(cluster_run):
    # Login is required: no token, a wrong password, both refused.
    assert set(cluster_run.refused) == {"/api/v2/dags", "/auth/token"}
    assert set(cluster_run.refused.values()) <= {401, 403}, cluster_run.refused
    assert cluster_run.state == "success", cluster_run.tasks
    assert cluster_run.tasks == dict.fromkeys(TASKS, "success")
    # Every task's spark-submit ran as an application of the standalone cluster.
    assert sorted(cluster_run.applications) == sorted(f"lakehouse-{task}" for task in TASKS)
    # Only this machine can reach the services, and the cluster runs no job
    # that does not know its shared secret.
    assert cluster_run.listening and cluster_run.listening <= {"127.0.0.1", "::ffff:127.0.0.1"}, (
        cluster_run.listening
    )
    assert cluster_run.wrong_secret.returncode != 0, cluster_run.wrong_secret.stdout
    assert "spark-class: No such file" not in cluster_run.wrong_secret.stderr  # it did start
    assert "wrong-secret" not in cluster_run.applications
    # Stopping Airflow and the cluster leaves nothing they started behind.
    assert set(cluster_run.stopped) == CLUSTER_SERVICES
    assert cluster_run.left_running == []


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
