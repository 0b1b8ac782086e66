"""The lakehouse Airflow plugin: registered, serves only the reports folder to those who
may read it, writes run notes. (The live api-server is exercised in
tests/dags/test_airflow_ui.py.)"""

from __future__ import annotations

import json
from importlib.metadata import entry_points

import pytest
from fastapi import HTTPException

from lakehouse.orchestration.plugin import (
    NOTE_LIMIT,
    LakehousePlugin,
    no_reports_page,
    noted,
    report_dag,
    report_file,
    served,
)


def test_the_plugin_is_registered_for_airflow_through_the_package_entry_point():
    (entry,) = [e for e in entry_points(group="airflow.plugins") if e.name == "lakehouse"]
    assert entry.load() is LakehousePlugin
    assert {link.name for link in LakehousePlugin.operator_extra_links} == {
        "Run report",
        "Data quality",
    }


def test_a_runs_note_gets_its_tasks_lines_after_what_it_says():
    warning = "silver: passed with 1 warning(s): silver/late_drops: ..."
    assert noted(None, []) is None
    assert noted("backfill 2026-11-01..2026-11-01, layers gold", []) is None
    assert noted(None, [warning]) == warning
    said = noted("backfill 2026-11-01..2026-11-01, layers gold", [warning])
    assert said == f"backfill 2026-11-01..2026-11-01, layers gold\n{warning}"
    assert noted(said, [warning]) is None  # said once, however often the run ends
    long = noted("note", ["x" * 2000])
    assert long is not None and len(long) == NOTE_LIMIT and long.endswith("…")


def test_a_run_without_reports_gets_a_page_that_says_so_with_its_ids_escaped():
    page = no_reports_page("lakehouse_incremental", "manual__<script>alert(1)</script>")
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "No lakehouse report for <code>lakehouse_incremental</code>" in page


def test_served_pages_are_sandboxed_and_not_sniffed(tmp_path):
    page = tmp_path / "r.html"
    page.write_text("<p>x</p>")
    headers = served(page).headers
    policy = headers["content-security-policy"]
    # Sandboxed without scripts; its own origin kept, so its links carry the login.
    assert policy.startswith("sandbox allow-same-origin;") and "default-src 'none'" in policy
    assert "allow-scripts" not in policy and "allow-forms" not in policy
    assert "script-src" not in policy and "http" not in policy
    assert headers["x-content-type-options"] == "nosniff"


def test_only_files_inside_the_reports_folder_are_served(tmp_path):
    reports = tmp_path / "reports"
    (reports / "runs").mkdir(parents=True)
    (reports / "index.html").write_text("index")
    (reports / "runs" / "r.html").write_text("run")
    (tmp_path / "secret.txt").write_text("no")
    assert report_file(reports, "runs/r.html") == (reports / "runs" / "r.html").resolve()
    assert report_file(reports, "") == (reports / "index.html").resolve()
    names_no_file_has = ("runs/a\x00b.html", "x" * 5000, "runs/" + "x" * 300 + ".html")
    for outside in (
        "../secret.txt",
        "runs/../../secret.txt",
        "runs/missing.html",
        "runs",
        *names_no_file_has,
    ):
        with pytest.raises(HTTPException) as refused:
            report_file(reports, outside)
        assert refused.value.status_code == 404


def test_each_report_page_belongs_to_the_dag_whose_run_wrote_it(tmp_path):
    """Who may read a page is who may read that DAG's runs; None: every DAG's runs."""
    reports = tmp_path / "reports"
    (reports / "runs").mkdir(parents=True)
    airflow = {"dag_id": "lakehouse_incremental", "run_id": "manual__1", "task_id": "silver"}
    for run_id, context in (("run-a", airflow), ("run-b", None)):
        summary = {"run_id": run_id, "airflow": context}
        (reports / "runs" / f"{run_id}.json").write_text(json.dumps(summary))
    (reports / "runs" / "run-c.json").write_text("[not a summary")
    assert report_dag(reports, "runs/run-a.html") == "lakehouse_incremental"
    assert report_dag(reports, "runs/run-a.json") == "lakehouse_incremental"
    assert report_dag(reports, "quality/run-a.html") == "lakehouse_incremental"
    assert report_dag(reports, "dag-runs/lakehouse_backfill/manual__2.html") == (
        "lakehouse_backfill"
    )
    # Run outside Airflow, a damaged summary, no summary, pages of every run's.
    for path in (
        "runs/run-b.html",
        "runs/run-c.html",
        "runs/missing.html",
        "runs/a\x00b.html",
        "index.html",
        "tables/silver/clicks.html",
        "data_docs/validations/silver/clicks/x.html",
        "runs/../dag-runs/lakehouse_backfill/x.html",
        "dag-runs/../index.html",
    ):
        assert report_dag(reports, path) is None, path


@pytest.fixture
def teams_airflow(tmp_path, monkeypatch):
    """Airflow's own API app with its metadata database and its simple auth manager in
    multi-team mode: the lakehouse's DAGs (bundle `dags-folder`, tagged `lakehouse`)
    belong to team `lakehouse`, another team's DAG to team `others`; `insider` is a
    viewer in the first team, `outsider` in the other. A report page written by a
    `lakehouse_incremental` run, and the index, in the data root."""
    from airflow.api_fastapi.app import create_app, purge_cached_app
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.models.dag import DagModel, DagTag
    from airflow.models.team import Team
    from airflow.utils.db import initdb
    from airflow.utils.session import create_session

    local = "airflow.dag_processing.bundles.local.LocalDagBundle"
    bundles = [
        {"name": name, "classpath": local, "kwargs": {}, "team_name": team}
        for name, team in (("dags-folder", "lakehouse"), ("their-dags", "others"))
    ]
    for key, value in {
        "AIRFLOW__CORE__MULTI_TEAM": "True",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": (
            "insider:viewer:lakehouse,outsider:viewer:others"
        ),
        "AIRFLOW__API_AUTH__JWT_SECRET": "k" * 64,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp_path / "passwords.json"),
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles),
        "LAKEHOUSE_DATA_ROOT": str(tmp_path),
    }.items():
        monkeypatch.setenv(key, value)
    runs = tmp_path / "reports" / "runs"
    runs.mkdir(parents=True)
    (runs.parent / "index.html").write_text("every run")
    (runs / "run-a.html").write_text("run a")
    (runs / "run-a.json").write_text(json.dumps({"airflow": {"dag_id": "lakehouse_incremental"}}))
    initdb()
    with create_session() as session:
        session.add_all([Team(name="lakehouse"), Team(name="others")])
    DagBundlesManager().sync_bundles_to_db()
    with create_session() as session:
        for dag_id, bundle in (
            ("lakehouse_incremental", "dags-folder"),
            ("lakehouse_backfill", "dags-folder"),
            ("their_dag", "their-dags"),
        ):
            session.merge(DagModel(dag_id=dag_id, bundle_name=bundle, is_stale=False))
    with create_session() as session:
        for dag_id in ("lakehouse_incremental", "lakehouse_backfill"):
            session.merge(DagTag(name="lakehouse", dag_id=dag_id))
    purge_cached_app()
    yield create_app("core")
    purge_cached_app()


def test_a_report_page_is_served_to_whoever_may_read_the_runs_of_its_dag(teams_airflow):
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    client = TestClient(teams_airflow)

    def status(user: str, team: str, page: str) -> int:
        viewer = SimpleAuthManagerUser(username=user, role="viewer", teams=[team])
        token = get_auth_manager().generate_jwt(viewer)
        client.cookies.set("_token", token)
        return client.get(f"/lakehouse/reports/{page}").status_code

    assert status("insider", "lakehouse", "runs/run-a.html") == 200
    # Every lakehouse DAG's runs, not another team's DAG's.
    assert status("insider", "lakehouse", "index.html") == 200
    assert status("outsider", "others", "runs/run-a.html") == 403
    # A page of every run's needs every DAG's runs; a query string cannot name another DAG.
    assert status("outsider", "others", "index.html") == 403
    assert status("outsider", "others", "index.html?dag_id=lakehouse_incremental") == 403
    assert status("outsider", "others", "runs/run-a.html?dag_id=x") == 403
    assert status("outsider", "others", "dag-runs/lakehouse_incremental/r.html") == 403
    client.cookies.clear()
    assert client.get("/lakehouse/reports/index.html").status_code == 401
