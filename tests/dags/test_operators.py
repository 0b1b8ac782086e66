"""The DAGs' operator runs a real spark-submit, tells a blocked gate from a crash, and
updates the Assets of the tables its job changed."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from airflow.sdk.execution_time.context import OutletEventAccessors

from include.errors import EXIT_BLOCKED, EXIT_FAILED
from include.orchestration import layer_assets
from include.orchestration.operators import LakehouseSubmitOperator, asset_table
from include.settings import Settings
from jobs.quality.gate import Outcome
from jobs.quality.validate import LayerCheck, TableCheck
from jobs.reports.outcome import RunOutcome
from jobs.reports.pages import write_run_report

VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def exiting_app(tmp_path, monkeypatch):
    """A PySpark application that exits with the code it is given, and a local spark_default."""
    app = tmp_path / "exit_with.py"
    app.write_text("import sys\nsys.exit(int(sys.argv[1]))\n")
    connection = json.dumps({"conn_type": "spark", "host": "local[1]"})
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", connection)
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}")
    return app


def submit(app: Path, code: int) -> None:
    operator = LakehouseSubmitOperator(
        task_id="gate", application=str(app), application_args=[str(code)], conn_id="spark_default"
    )
    operator.execute(context={})


def test_a_blocked_quality_gate_fails_without_retry(exiting_app):
    with pytest.raises(AirflowFailException, match=r"blocking data-quality check\(s\) failed"):
        submit(exiting_app, EXIT_BLOCKED)


def test_any_other_failure_stays_retryable(exiting_app):
    with pytest.raises(AirflowException, match="Error code is: 1") as raised:
        submit(exiting_app, EXIT_FAILED)
    assert not isinstance(raised.value, AirflowFailException)


def test_success_is_success(exiting_app):
    submit(exiting_app, 0)


def outcome(table: str, success: bool = True, blocking: bool = True) -> Outcome:
    return Outcome(table, "table", "expect_x", "x", blocking, success, 10, 0, None)


def test_asset_events_only_for_the_tables_that_changed_with_their_facts(tmp_path):
    """After the job, the task keeps an event for each table its report says changed."""
    settings = Settings.load(data_root=tmp_path / "data")
    run = RunOutcome("run-silver-1", "run", dt.datetime.now(dt.UTC), layers=("silver",))
    run.checks = [
        LayerCheck(
            "silver",
            [
                TableCheck(
                    "silver/impressions", 4, 2, [outcome("silver/impressions")], rows_written=120
                ),
                TableCheck(
                    "silver/clicks",
                    3,
                    1,
                    [outcome("silver/clicks"), outcome("silver/clicks", False, blocking=False)],
                    rows_written=7,
                ),
                TableCheck("silver/user_actions", 5, 5, [outcome("silver/user_actions")]),
                TableCheck("silver/late_drops", None, None),
            ],
        )
    ]
    write_run_report(settings, run)
    operator = LakehouseSubmitOperator(
        task_id="silver",
        application="unused.py",
        outlets=layer_assets("silver"),
        env_vars={"LAKEHOUSE_REPORTS_DIR": str(settings.reports)},
    )
    operator.lakehouse_run_id = run.run_id
    events = OutletEventAccessors()
    operator.publish_changes({"outlet_events": events})

    assert [asset_table(a) for a in operator.outlets] == ["silver/impressions", "silver/clicks"]
    impressions, clicks = operator.outlets
    assert events[impressions].extra == {
        "rows_written": 120,
        "delta_version": 4,
        "quality": "passed",
        "checks": "1 of 1 expectations met",
        "run_id": "run-silver-1",
        "report": "/lakehouse/reports/runs/run-silver-1.html",
    }
    assert events[clicks].extra["quality"] == "passed with 1 warning(s)"
    assert events[clicks].extra["rows_written"] == 7


def test_without_a_report_every_declared_asset_keeps_its_event(tmp_path):
    operator = LakehouseSubmitOperator(
        task_id="gold",
        application="unused.py",
        outlets=layer_assets("gold"),
        env_vars={"LAKEHOUSE_REPORTS_DIR": str(tmp_path)},
    )
    operator.lakehouse_run_id = "run-that-wrote-nothing"
    operator.publish_changes({"outlet_events": OutletEventAccessors()})
    assert operator.outlets == layer_assets("gold")
