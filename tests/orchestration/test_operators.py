"""The DAGs' operator runs a real spark-submit, tells a blocked gate from a crash, and
updates the Assets of the tables its job changed."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
from pathlib import Path

import pytest
from airflow.sdk.definitions.retry_policy import RetryAction
from airflow.sdk.exceptions import AirflowException, AirflowRescheduleException
from airflow.sdk.execution_time.context import OutletEventAccessors

from lakehouse.errors import EXIT_BLOCKED, EXIT_DIFFERENCES, EXIT_FAILED, EXIT_REFUSED
from lakehouse.orchestration import layer_assets
from lakehouse.orchestration.operators import (
    RETRY_POLICY,
    LakehouseSubmitOperator,
    Refused,
    asset_table,
)
from lakehouse.quality.results import LayerCheck, TableCheck
from lakehouse.quality.runner import Outcome
from lakehouse.reports.outcome import RunOutcome
from lakehouse.reports.pages import write_run_report
from lakehouse.runtime.settings import Settings

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


@pytest.mark.system
@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (EXIT_BLOCKED, r"blocking data-quality check\(s\) failed \(exit code 3\); not retrying"),
        (EXIT_REFUSED, r"refused to start \(exit code 4; its reason is the `refused:` line above"),
        (EXIT_DIFFERENCES, r"streaming and batch differ \(exit code 5\); not retrying"),
    ],
    ids=["blocked-gate", "refused", "parity-differences"],
)
def test_a_blocked_gate_or_a_refusal_ends_the_task_in_one_line_without_retry(
    exiting_app, capfd, code, reason
):
    with pytest.raises(Refused) as raised:
        submit(exiting_app, code)
    # A SystemExit: Airflow's task runner logs it as one line, no traceback; the
    # operators' retry policy fails it for good.
    assert raised.value.code == code
    decision = RETRY_POLICY.evaluate(raised.value, try_number=1, max_tries=3)
    assert decision.action is RetryAction.FAIL
    out, err = capfd.readouterr()
    refusals = [line for line in (out + err).splitlines() if " refused: " in line]
    assert len(refusals) == 1 and re.search(reason, refusals[0]), out + err
    assert "spark-submit" not in refusals[0]


@pytest.mark.system
def test_any_other_failure_stays_retryable(exiting_app):
    with pytest.raises(AirflowException, match="Error code is: 1") as raised:
        submit(exiting_app, EXIT_FAILED)
    decision = RETRY_POLICY.evaluate(raised.value, try_number=1, max_tries=3)
    assert decision.action is RetryAction.DEFAULT


@pytest.mark.system
def test_success_is_success(exiting_app):
    submit(exiting_app, 0)


def outcome(table: str, success: bool = True, blocking: bool = True) -> Outcome:
    return Outcome(table, "table", "expect_x", "x", blocking, success, 10, 0, None)


def published(
    settings: Settings, run: RunOutcome
) -> tuple[LakehouseSubmitOperator, OutletEventAccessors]:
    """The silver task's operator after its job wrote `run`'s report: its outlets narrowed
    to the changed tables, and their events."""
    write_run_report(settings, run)
    operator = LakehouseSubmitOperator(
        task_id="silver",
        application="unused.py",
        outlets=layer_assets("silver"),
        env_vars={"LAKEHOUSE_REPORTS_DIR": str(settings.reports)},
    )
    operator.lakehouse_run_id = run.run_id
    events = OutletEventAccessors()
    operator.publish_changes({"outlet_events": events}, operator.report())
    return operator, events


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
                # A new version without a row (its input all dropped): no event either.
                TableCheck("silver/ad_attribution", 6, 5, [], rows_written=0),
                TableCheck("silver/late_drops", None, None),
            ],
        )
    ]
    operator, events = published(settings, run)

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
    # A warning is named, without its table (the Asset names it).
    assert (
        events[clicks].extra["quality"]
        == "passed with warnings: not met (table): x: 0 of 10 rows unexpected"
    )
    assert events[clicks].extra["rows_written"] == 7


def late_fact(query: str, rows_in: int, dropped: int) -> dict:
    return {
        "query": query,
        "rows_in": rows_in,
        "dropped_late": dropped,
        "late_share": dropped / rows_in,
    }


def test_a_late_drop_warning_is_named_on_the_asset_of_the_query_that_dropped_rows(tmp_path):
    settings = Settings.load(data_root=tmp_path / "data")
    run = RunOutcome("run-silver-2", "run", dt.datetime.now(dt.UTC), layers=("silver",))
    late = Outcome(
        "silver/late_drops", "table", "expect_query_to_return_no_rows",
        "no query drops more than 5% of its input as late", False, False, 2, 1, None,
        sample=("silver/user_actions dropped 8.9% of its input as late (244 of 2755 rows)",),
    )  # fmt: skip
    run.checks = [
        LayerCheck(
            "silver",
            [
                TableCheck(
                    "silver/user_actions", 2, 1, [outcome("silver/user_actions")], rows_written=9
                ),
                TableCheck(
                    "silver/impressions", 2, 1, [outcome("silver/impressions")], rows_written=5
                ),
                TableCheck(
                    "silver/late_drops",
                    None,
                    None,
                    [late],
                    facts=[
                        late_fact("silver/user_actions", 2755, 244),
                        late_fact("silver/impressions", 10, 0),
                    ],
                ),
            ],
        )
    ]
    operator, events = published(settings, run)
    quality = {asset_table(a): events[a].extra["quality"] for a in operator.outlets}
    assert quality == {
        "silver/user_actions": "passed with warnings: dropped 8.9% of its input as late "
        "(244 of 2,755 rows; `lakehouse backfill --pending` recovers them)",
        "silver/impressions": "passed",
    }


def test_without_a_report_every_declared_asset_keeps_its_event(tmp_path):
    operator = LakehouseSubmitOperator(
        task_id="gold",
        application="unused.py",
        outlets=layer_assets("gold"),
        env_vars={"LAKEHOUSE_REPORTS_DIR": str(tmp_path)},
    )
    operator.lakehouse_run_id = "run-that-wrote-nothing"
    operator.publish_changes({"outlet_events": OutletEventAccessors()}, operator.report())
    assert operator.outlets == layer_assets("gold")


class RunsOf:
    """What a task instance answers about another DAG's runs (Airflow's
    `RuntimeTaskInstance.get_dr_count`), with a given count."""

    def __init__(self, active: int) -> None:
        self.active = active
        self.asked: list[tuple[str, list[str] | None]] = []

    def get_dr_count(self, dag_id: str, states: list[str] | None = None, **_: object) -> int:
        self.asked.append((dag_id, states))
        return self.active


@pytest.mark.system
def test_a_backfill_gives_the_slot_back_while_the_incremental_dag_has_a_run(exiting_app):
    """Rescheduled (`up_for_reschedule`: not a failed try), before spark-submit starts."""
    operator = LakehouseSubmitOperator(
        task_id="backfill",
        application=str(exiting_app),
        application_args=["1"],  # would fail, were it submitted
        conn_id="spark_default",
        waits_for="lakehouse_incremental",
    )
    ti = RunsOf(active=1)
    with pytest.raises(AirflowRescheduleException) as raised:
        operator.execute(context={"ti": ti})
    assert ti.asked == [("lakehouse_incremental", ["queued", "running"])]
    wait = raised.value.reschedule_date - dt.datetime.now(dt.UTC)
    assert dt.timedelta(seconds=20) < wait <= dt.timedelta(seconds=30)
    # No run in progress: it submits (and this application's exit code 0 passes).
    operator.application_args = ["0"]
    operator.execute(context={"ti": RunsOf(active=0)})


class KeptLines:
    """A task instance that keeps what the task pushes for the notes (`xcom_push`)."""

    def __init__(self, task_id: str = "parity") -> None:
        self.task_id = task_id
        self.kept: list[str] = []

    def xcom_push(self, key: str, value: str) -> None:
        self.kept.append(value)


def parity_of(live_rows: int, batch_rows: int, equal: bool = True) -> dict:
    return {"table": "silver/clicks", "live_rows": live_rows, "batch_rows": batch_rows,
            "missing_from_live": 0, "unexpected_in_live": 0, "equal": equal}  # fmt: skip


@pytest.mark.parametrize(
    ("report", "said"),
    [
        (
            {"command": "backfill", "dates": "pending: 2026-11-01, 2026-11-03"},
            "parity: recomputed pending: 2026-11-01, 2026-11-03",
        ),
        (
            {"command": "parity", "dates": "2026-12-05..2026-12-05",
             "parity": [parity_of(0, 0), parity_of(0, 0)]},
            "parity: 2026-12-05..2026-12-05: no rows on these dates in any table, nothing compared",
        ),
        (
            {"command": "parity", "dates": "2026-11-03..2026-11-03",
             "parity": [parity_of(12, 12), parity_of(0, 0)]},
            "parity: 2026-11-03..2026-11-03: 2 of 2 tables agree",
        ),
    ],
    ids=["backfill-names-its-dates", "parity-of-an-empty-day", "parity-that-agrees"],
)  # fmt: skip
def test_a_backfill_names_its_dates_and_parity_what_it_compared_for_the_notes(report, said):
    ti = KeptLines()
    operator = LakehouseSubmitOperator(task_id="parity", application="unused.py")
    operator.say_what_it_covered({"ti": ti}, report)
    assert ti.kept == [said]


def test_what_the_queries_noticed_goes_to_the_notes():
    notice = "landing/clicks/ has never held a landing file: nothing to ingest (...)"
    report = {"stages": [{"stage": "bronze/clicks", "notices": [notice]},
                         {"stage": "bronze/impressions", "notices": []}]}  # fmt: skip
    ti = KeptLines("bronze")
    LakehouseSubmitOperator(task_id="bronze", application="unused.py").say_notices(
        {"ti": ti}, report
    )
    assert ti.kept == [f"bronze: 1 notice(s):\n- bronze/clicks: {notice}"]
