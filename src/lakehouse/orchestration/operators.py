"""The Airflow operator the DAGs submit `lakehouse` commands with.

A `SparkSubmitOperator` that knows the CLI's exit codes: a failed blocking
data-quality check (exit 3), a refusal (exit 4) or a parity check that found
differences (exit 5) fails the task at once, in one line and without the
retries meant for transient failures, because bad data, a refused request or a
difference does not heal by running again. A backfill task first waits out any
run of the incremental DAG (rescheduled, not failed). It passes Delta Lake's
jars (fetched the first time they are needed) to spark-submit with `--jars`,
found when the task runs, not when the scheduler parses the DAG. Kept apart
from `tasks`, which the scheduler imports on every parse and must stay cheap;
this module is imported when a task is built.

A task running a command that writes a run report picks the run's id itself
(`LAKEHOUSE_RUN_ID`), so its extra links, "Run report" and "Data quality",
lead to the pages that job writes, served by the lakehouse plugin
(`plugin`) behind Airflow's login.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn, cast

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperatorLink
from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction, RetryRule
from airflow.sdk.exceptions import AirflowException, AirflowRescheduleException

from lakehouse.errors import EXIT_BLOCKED, EXIT_DIFFERENCES, EXIT_REFUSED
from lakehouse.runtime.runs import RUN_ID_VARIABLE, generate_run_id
from lakehouse.runtime.settings import jars_folder
from lakehouse.runtime.spark import spark_jars

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


# The XCom keys of a task's lines for its DAG run's note: its outcome (warnings, a
# refusal, what a backfill covered), and its queries' notices (drift, files not read),
# which the note lists after every outcome (its first line is what the run's header shows).
OUTCOME_KEY = "lakehouse_outcome"
NOTICE_KEY = "lakehouse_notice"
# How long a task waiting for another DAG's run gives the slot back for.
WAIT_INTERVAL = dt.timedelta(seconds=30)


class Refused(SystemExit):
    """A task that refuses to go on. Airflow's task runner logs a SystemExit as one line,
    without a traceback; `RETRY_POLICY` fails it without a retry."""


def keep_outcome(context: Any, outcome: str, named: bool = True, key: str = OUTCOME_KEY) -> None:
    """What the DAG run's note says of this task, after its id unless not `named`
    (`plugin.RunNotes`)."""
    ti = context.get("ti")
    if ti is not None:
        ti.xcom_push(key=key, value=f"{ti.task_id}: {outcome}" if named else outcome)


def listed(header: str, lines: list[str]) -> str:
    """A note's entry: a short first line (what a run's header shows whole), then one
    Markdown list item per line."""
    return header + "".join(f"\n- {line}" for line in lines)


def refuse(context: Any, reason: str, code: int, log: Any) -> NoReturn:
    """End the running task with a one-line reason: in its log, in the DAG run's note, and
    no retry (`RETRY_POLICY`; a `@task` says `retries=0`)."""
    log.error("refused: %s", reason)
    keep_outcome(context, f"refused: {reason}")
    raise Refused(code) from None


# What the JDK prints as a JVM with an incubator module starts (every Spark 4 driver).
JDK_INCUBATOR_WARNING = "WARNING: Using incubator modules:"

# The operator's retry policy (Airflow 3.3): a refusal is final, anything else retries as usual.
RETRY_POLICY = ExceptionRetryPolicy(
    rules=[
        RetryRule(
            exception=f"{Refused.__module__}.{Refused.__qualname__}",
            action=RetryAction.FAIL,
            reason="refused: the same request would be refused again",
        )
    ]
)


class LakehouseSubmitHook(SparkSubmitHook):
    """The provider's hook, keeping spark-submit's exit status (`returncode`), which the
    provider has no public accessor for, and logging every line spark-submit prints but
    the JDK's `WARNING: Using incubator modules: jdk.incubator.vector`: Spark 4's
    launcher always adds that module and the JDK has no switch for the warning, so it
    stood at the top of every task's log, saying nothing about the task
    (tests/dags/test_lakehouse_incremental.py reads a task log without the line)."""

    returncode: int | None = None

    def submit(self, application: str = "", **kwargs: Any) -> str | None:
        try:
            return super().submit(application, **kwargs)
        finally:
            process = self._submit_sp
            self.returncode = None if process is None else process.returncode

    def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
        super()._process_spark_submit_log(
            line for line in itr if JDK_INCUBATOR_WARNING not in str(line)
        )


class LakehouseSubmitOperator(SparkSubmitOperator):
    """spark-submit of the `lakehouse` CLI; a blocked data-quality gate is final."""

    operator_extra_links = (RunReportLink(), QualityLink())

    def __init__(
        self, *, object_store: bool = False, waits_for: str | None = None, **kwargs: Any
    ) -> None:
        kwargs.setdefault("retry_policy", RETRY_POLICY)
        super().__init__(**kwargs)
        # A data root on S3 also needs Spark's S3 connector (jars/s3/).
        self.object_store = object_store
        # A DAG whose runs this task waits out before it submits (a backfill: the
        # incremental DAG's), rescheduled rather than failed.
        self.waits_for = waits_for
        # Set when the task runs: its command, and the run's id if it writes a report.
        self.lakehouse_command: str | None = None
        self.lakehouse_run_id: str | None = None

    def execute(self, context: Any) -> None:
        if self.waits_for is not None:
            self.wait_for_runs_of(self.waits_for, context)
        self.jars = ",".join(str(jar) for jar in spark_jars(jars_folder(), self.object_store))
        command = self.application_args[0] if self.application_args else None
        self.lakehouse_command = command
        if command in REPORTING_COMMANDS:
            self.lakehouse_run_id = generate_run_id(command)
            self.env_vars = {**(self.env_vars or {}), RUN_ID_VARIABLE: self.lakehouse_run_id}
        try:
            super().execute(context)
        except AirflowException:
            code = self.exit_code()
            if code == EXIT_BLOCKED:
                failures = self.blocked_checks()
                for failure in failures:
                    self.log.error("blocking check failed: %s", failure)
                report_url = reports_url(f"runs/{self.lakehouse_run_id}.html")
                refuse(
                    context,
                    f"{len(failures) or 'a'} blocking data-quality check(s) failed (exit code "
                    f"{EXIT_BLOCKED}); not retrying: the same data would fail again. Fix the "
                    f"data, then clear this task. Run report: {report_url}",
                    EXIT_BLOCKED,
                    self.log,
                )
            if code == EXIT_REFUSED:
                refuse(
                    context,
                    f"`lakehouse {command}` refused to start (exit code {EXIT_REFUSED}; its "
                    "reason is the `refused:` line above); not retrying",
                    EXIT_REFUSED,
                    self.log,
                )
            if code == EXIT_DIFFERENCES:
                report_url = reports_url(f"runs/{self.lakehouse_run_id}.html")
                refuse(
                    context,
                    f"streaming and batch differ (exit code {EXIT_DIFFERENCES}); not retrying: "
                    f"the same tables give the same answer. Run report: {report_url}",
                    EXIT_DIFFERENCES,
                    self.log,
                )
            raise
        report = self.report()
        self.say_warnings(context, report)
        self.say_notices(context, report)
        self.say_what_it_covered(context, report)
        self.publish_changes(context, report)

    def _get_hook(self) -> LakehouseSubmitHook:
        """The provider's hook, as a `LakehouseSubmitHook`. The provider builds its hook
        from the operator's 33 arguments in its own `_get_hook`; rather than repeat that
        list (and drift from it with each provider release), the hook it built takes the
        subclass, which adds methods and no state."""
        hook = super()._get_hook()
        hook.__class__ = LakehouseSubmitHook
        return cast("LakehouseSubmitHook", hook)

    def exit_code(self) -> int | None:
        """spark-submit's exit status, None before it ran."""
        hook = self._hook
        return hook.returncode if isinstance(hook, LakehouseSubmitHook) else None

    def wait_for_runs_of(self, dag_id: str, context: Any) -> None:
        """Give the slot back and come again later while `dag_id` has a run queued or in
        progress: its streams would still have rows to write, and the job would refuse."""
        active = context["ti"].get_dr_count(dag_id=dag_id, states=["queued", "running"])
        if active:
            again = dt.datetime.now(dt.UTC) + WAIT_INTERVAL
            self.log.info(
                "waiting for %s: %d run(s) queued or in progress; trying again at %s UTC "
                "(not a failed try)",
                dag_id,
                active,
                again.strftime("%H:%M:%S"),
            )
            raise AirflowRescheduleException(again)

    def say_warnings(self, context: Any, report: dict[str, Any] | None) -> None:
        """A job whose checks passed with warnings says so: a line per warning in the task
        log, and for the notes a short first line (what the run's header shows) with the
        warnings listed under it."""
        warnings = [w for table in checked_tables(report) for w in table["warnings"]]
        for warning in warnings:
            self.log.warning("data-quality warning: %s", warning)
        if warnings:
            keep_outcome(context, listed(f"passed with {len(warnings)} warning(s):", warnings))

    def say_notices(self, context: Any, report: dict[str, Any] | None) -> None:
        """For the notes, what the job's queries said beyond their figures (a landing
        folder that never held a file, files not read): in the log already, easy to miss."""
        notices = [
            f"{stage['stage']}: {notice}"
            for stage in (report or {}).get("stages", [])
            for notice in stage.get("notices") or []
        ]
        if notices:
            keep_outcome(context, listed(f"{len(notices)} notice(s):", notices), key=NOTICE_KEY)

    def say_what_it_covered(self, context: Any, report: dict[str, Any] | None) -> None:
        """For the notes, the dates a backfill recomputed (`--pending` decides them as it
        runs) and what parity compared; parity of dates that hold no row anywhere says
        it compared nothing, rather than agreement."""
        if not report or not report.get("dates"):
            return
        if report.get("command") == "backfill":
            keep_outcome(context, f"recomputed {report['dates']}")
        elif report.get("command") == "parity":
            tables = report.get("parity") or []
            rows = sum(t.get("live_rows", 0) + t.get("batch_rows", 0) for t in tables)
            if rows == 0:
                said = f"{report['dates']}: no rows on these dates in any table, nothing compared"
                self.log.warning("parity %s", said)
            else:
                agree = sum(1 for t in tables if t.get("equal"))
                said = f"{report['dates']}: {agree} of {len(tables)} tables agree"
            keep_outcome(context, said)

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

    def publish_changes(self, context: Any, report: dict[str, Any] | None) -> None:
        """Keep an Asset event for each table the job changed, with its facts, and none
        for the others.

        Airflow records an event for every Asset in a task's outlets when the task
        succeeds, reading the outlets then: so the outlets are narrowed here to the
        tables whose checks saw new data, and each event's `extra` says how many rows
        were written, at which Delta version, with which data-quality outcome. The
        outlets the DAG declares stay whole, so the Assets graph keeps its lineage.

        Airflow offers no way to skip a declared outlet's event, and an Asset alias
        drops the producer from the Assets lineage graph (tests/dags/test_lakehouse_incremental.py
        checks both against a live Airflow).
        """
        if not self.outlets:
            return
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
    """The table an Asset of the lakehouse stands for (`lakehouse.orchestration.layer_assets`)."""
    return (getattr(asset, "extra", None) or {}).get("table")


def checked_tables(report: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every table a run report's checks cover, with its version and outcome."""
    return [table for layer in (report or {}).get("checks", []) for table in layer["tables"]]


def table_warnings(report: dict[str, Any] | None) -> dict[str, list[str]]:
    """Per table, the warnings its checks raised, and a late-drop warning of the layer
    (on its `late_drops` check) under the query that dropped the rows."""
    found: dict[str, list[str]] = {}
    for table in checked_tables(report):
        name = table["table"]
        found.setdefault(name, []).extend(w.removeprefix(f"{name}: ") for w in table["warnings"])
        if name.endswith("/late_drops"):
            for fact in table["facts"]:
                if any(f"{fact['query']} dropped " in w for w in table["warnings"]):
                    found.setdefault(fact["query"], []).append(
                        f"dropped {fact['late_share']:.1%} of its input as late "
                        f"({fact['dropped_late']:,} of {fact['rows_in']:,} rows; "
                        "`lakehouse backfill --pending` recovers them)"
                    )
    return found


def table_changes(report: dict[str, Any], report_url: str) -> dict[str, dict[str, Any]]:
    """Per table whose data the checks found changed: an Asset event's `extra`."""
    changes = {}
    warnings = table_warnings(report)
    for table in checked_tables(report):
        # A micro-batch whose rows were all dropped (late, duplicates) still commits a
        # version: no rows written, no event, so no data-aware DAG runs for nothing.
        if not table.get("rows_written") or table.get("version") is None:
            continue
        named = warnings.get(table["table"], [])
        changes[table["table"]] = {
            "rows_written": table["rows_written"],
            "delta_version": table["version"],
            "quality": f"passed with warnings: {'; '.join(named)}" if named else "passed",
            "checks": f"{table['passed']} of {table['expectations']} expectations met",
            "run_id": report["run_id"],
            "report": report_url,
        }
    return changes
