"""The Airflow operator the DAGs submit `lakehouse` commands with.

A `SparkSubmitOperator` that knows the CLI's exit codes: a failed blocking
data-quality check (exit 3) fails the task at once, without the retries meant
for transient failures, because bad data does not heal by running again. It
passes Delta Lake's jars (`make setup` fetched them) to spark-submit with
`--jars`, found when the task runs, not when the scheduler parses the DAG.
Kept apart from `include/orchestration/tasks.py`, which the scheduler imports on
every parse and must stay cheap; this module is imported when a task is built.

A task running a command that writes a run report picks the run's id itself
(`LAKEHOUSE_RUN_ID`), so its extra links, "Run report" and "Data quality",
lead to the pages that job writes, served by the lakehouse plugin
(include/orchestration/plugin.py) behind Airflow's login.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperatorLink
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from include.errors import EXIT_BLOCKED
from include.runs import RUN_ID_VARIABLE, generate_run_id
from include.spark import spark_jars

# Where the plugin serves the reports folder, under the api-server's base URL.
REPORTS_URL = "/lakehouse/reports"
# The `lakehouse` commands that write a run report (reports/runs/<run id>.html),
# and those whose report holds data-quality checks.
REPORTING_COMMANDS = frozenset({"run", "validate", "backfill", "parity"})
CHECKING_COMMANDS = frozenset({"run", "validate"})


def reports_url(path: str) -> str:
    """The URL of a file in the reports folder, as the plugin serves it."""
    base = os.environ.get("AIRFLOW__API__BASE_URL", "").rstrip("/")
    return f"{base}{REPORTS_URL}/{path}"


class RunReportLink(BaseOperatorLink):
    """The run report the task's job wrote: its stages, checks and quarantine."""

    name = "Run report"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        run_id = getattr(operator, "lakehouse_run_id", None)
        return reports_url(f"runs/{run_id}.html") if run_id else ""


class QualityLink(BaseOperatorLink):
    """The data-quality page of the checks the task's job made: every expectation, with
    its severity, table and result."""

    name = "Data quality"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        run_id = getattr(operator, "lakehouse_run_id", None)
        checks = getattr(operator, "lakehouse_command", None) in CHECKING_COMMANDS
        return reports_url(f"quality/{run_id}.html") if run_id and checks else ""


# How the Spark provider reports a non-zero spark-submit exit code.
_EXIT_CODE = re.compile(r"Error code is: (\d+)\.")


class LakehouseSubmitOperator(SparkSubmitOperator):
    """spark-submit of the `lakehouse` CLI; a blocked data-quality gate is final."""

    operator_extra_links = (RunReportLink(), QualityLink())

    def __init__(self, *, object_store: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # A data root on S3 also needs Spark's S3 connector (jars/s3/).
        self.object_store = object_store
        # Set when the task runs: its command, and the run's id if it writes a report.
        self.lakehouse_command: str | None = None
        self.lakehouse_run_id: str | None = None

    def execute(self, context: Any) -> None:
        self.jars = ",".join(str(jar) for jar in spark_jars(self.object_store))
        command = self.application_args[0] if self.application_args else None
        self.lakehouse_command = command
        if command in REPORTING_COMMANDS:
            self.lakehouse_run_id = generate_run_id(command)
            self.env_vars = {**(self.env_vars or {}), RUN_ID_VARIABLE: self.lakehouse_run_id}
        try:
            super().execute(context)
        except AirflowException as error:
            code = _EXIT_CODE.search(str(error))
            if code and int(code.group(1)) == EXIT_BLOCKED:
                # Said once, at ERROR, without the spark-submit failure chained to it.
                failures = self.blocked_checks()
                for failure in failures:
                    self.log.error("blocking check failed: %s", failure)
                report = reports_url(f"runs/{self.lakehouse_run_id}.html")
                raise AirflowFailException(
                    f"{len(failures) or 'a'} blocking data-quality check(s) failed (exit code "
                    f"{EXIT_BLOCKED}); not retrying: the same data would fail again. Fix the "
                    f"data, then clear this task. Run report: {report}"
                ) from None
            raise
        self.publish_changes(context)

    def report(self) -> dict[str, Any] | None:
        """The summary (JSON) of the run report the job wrote, if it wrote one."""
        reports = (self.env_vars or {}).get("LAKEHOUSE_REPORTS_DIR")
        if not reports or not self.lakehouse_run_id:
            return None
        try:
            found = json.loads(
                (Path(reports) / "runs" / f"{self.lakehouse_run_id}.json").read_text()
            )
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    def blocked_checks(self) -> list[str]:
        """The failed blocking checks the job's report names (empty if it wrote none)."""
        return [failure for table in checked_tables(self.report()) for failure in table["failed"]]

    def publish_changes(self, context: Any) -> None:
        """Keep an Asset event for each table the job changed, with its facts, and none
        for the others.

        Airflow records an event for every Asset in a task's outlets when the task
        succeeds, reading the outlets then: so the outlets are narrowed here to the
        tables whose checks saw new data, and each event's `extra` says how many rows
        were written, at which Delta version, with which data-quality outcome. The
        outlets the DAG declares stay whole, so the Assets graph keeps its lineage.
        """
        if not self.outlets:
            return
        report = self.report()
        if report is None:
            self.log.warning("no run report to tell which tables changed: an event for each")
            return
        changes = table_changes(report, reports_url(f"runs/{self.lakehouse_run_id}.html"))
        changed = {
            asset: changes[table]
            for asset in self.outlets
            if (table := asset_table(asset)) is not None and table in changes
        }
        for asset, facts in changed.items():
            context["outlet_events"][asset].extra = facts
        self.log.info(
            "Asset events for the tables that changed: %s; none for the others: %s",
            ", ".join(f"{a.name} ({f['rows_written']:,} rows)" for a, f in changed.items())
            or "none",
            ", ".join(a.name for a in self.outlets if a not in changed) or "none",
        )
        self.outlets = list(changed)


def asset_table(asset: Any) -> str | None:
    """The table an Asset of the lakehouse stands for (`include.orchestration.layer_assets`)."""
    return (getattr(asset, "extra", None) or {}).get("table")


def checked_tables(report: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every table a run report's checks cover, with its version and outcome."""
    return [table for layer in (report or {}).get("checks", []) for table in layer["tables"]]


def table_changes(report: dict[str, Any], report_url: str) -> dict[str, dict[str, Any]]:
    """Per table whose data the checks found changed: an Asset event's `extra`."""
    changes = {}
    for table in checked_tables(report):
        if table.get("rows_written") is None or table.get("version") is None:
            continue
        warnings = len(table["warnings"])
        changes[table["table"]] = {
            "rows_written": table["rows_written"],
            "delta_version": table["version"],
            "quality": f"passed with {warnings} warning(s)" if warnings else "passed",
            "checks": f"{table['passed']} of {table['expectations']} expectations met",
            "run_id": report["run_id"],
            "report": report_url,
        }
    return changes
