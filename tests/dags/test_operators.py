"""The DAGs' operator runs a real spark-submit and tells a blocked gate from a crash."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from include.errors import EXIT_BLOCKED, EXIT_FAILED
from include.orchestration.operators import LakehouseSubmitOperator

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
