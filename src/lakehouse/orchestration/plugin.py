"""The lakehouse's Airflow plugin: reports behind Airflow's login, notes on DAG runs.

Registered through the `airflow.plugins` entry point of this package
(pyproject.toml), so every Airflow process of the virtual environment or
image loads it; `airflow plugins` lists it.

- `/lakehouse/reports/<path>`: the reports folder (run reports, the index,
  Data Docs), served by the api-server to logged-in users, each page to those
  Airflow's auth manager lets read the runs of the DAG that wrote it
  (`report_dag`); a page of every run's (the index, the tables' and Data Docs
  pages) or of a command run outside Airflow, to those who may read every
  lakehouse DAG's runs. A browser
  will not follow `file://` links from an `http://` page, so this is what the
  tasks' extra links ("Run report", "Data quality") and the views below open.
- Views: "Lakehouse reports" in the Browse menu (the index, with its
  charts), and a "Lakehouse reports" tab on every DAG run (the reports its
  tasks wrote).
- A listener that writes into a DAG run's note, when it ends, what its tasks
  kept for it: a backfill's range, a layer that passed with warnings, a refusal;
  and each task's lines into that task's note (`RunNotes`).

A bad backfill form is not this plugin's business: Airflow checks each field
against its Param schema before it creates a run, and the DAG's first task,
`check_request`, refuses the range as a whole in one line.
- Every page served carries a Content-Security-Policy that sandboxes it, runs
  no script and loads nothing from elsewhere (`REPORT_HEADERS`); its links
  work inside Airflow's views, with the login.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path, PurePosixPath
from typing import Any

from airflow.listeners import hookimpl
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, Response

from lakehouse.orchestration.operators import (
    NOTICE_KEY,
    OUTCOME_KEY,
    REPORTS_URL,
    QualityLink,
    RunReportLink,
)
from lakehouse.orchestration.tasks import LAKEHOUSE_TAG, settings
from lakehouse.runtime.runs import dag_run_page


def _login_required() -> Any:
    """The dependency Airflow's own UI pages use: a valid login, any role."""
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import requires_access_view

    return Depends(requires_access_view(AccessView.WEBSITE))


def may_read_runs_of(dag_id: str | None, user: Any) -> None:
    """A 403 unless Airflow's auth manager lets `user` read the runs of DAG `dag_id`, with
    its team, as Airflow's own API asks; None: of every lakehouse DAG (tagged
    `lakehouse`, not stale), whose runs a page of every run's shows. Asked here, not
    through `requires_access_dag`, which takes a `dag_id` from the query string when
    given none: `?dag_id=` would choose whose rule a page is read under."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.batch_apis import IsAuthorizedDagRequest
    from airflow.api_fastapi.auth.managers.models.resource_details import (
        DagAccessEntity,
        DagDetails,
    )
    from airflow.models.dag import DagModel, DagTag
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        ours = select(DagTag.dag_id).where(DagTag.name == LAKEHOUSE_TAG)
        every = select(DagModel.dag_id).where(~DagModel.is_stale, DagModel.dag_id.in_(ours))
        dag_ids = [dag_id] if dag_id else list(session.scalars(every))
        teams = DagModel.get_dag_id_to_team_name_mapping(dag_ids, session=session)
    dags = [DagDetails(id=dag, team_name=teams.get(dag)) for dag in dag_ids] or [DagDetails()]
    requests = [
        IsAuthorizedDagRequest(method="GET", access_entity=DagAccessEntity.RUN, details=dag)
        for dag in dags
    ]
    if not get_auth_manager().batch_is_authorized_dag(requests, user=user):
        raise HTTPException(status_code=403, detail="Forbidden")


def report_dag(reports: Path, path: str) -> str | None:
    """The DAG whose run wrote the report page `path`: a DAG run's page names it, a
    run's report and quality page say it in the run's summary (`runs/<run id>.json`,
    written by an Airflow task). None for a page of every run's or of a command run
    outside Airflow."""
    parts = PurePosixPath(path).parts
    if ".." in parts:  # names another page than it seems to: that one's rule, or none
        return None
    if len(parts) == 3 and parts[0] == "dag-runs":
        return parts[1]
    if len(parts) != 2 or parts[0] not in ("runs", "quality"):
        return None
    summary = reports / "runs" / f"{PurePosixPath(parts[1]).stem}.json"
    try:
        airflow = json.loads(summary.read_text()).get("airflow")
    except (OSError, ValueError, AttributeError):
        return None
    dag_id = airflow.get("dag_id") if isinstance(airflow, dict) else None
    return dag_id if isinstance(dag_id, str) and dag_id else None


def report_file(reports: Path, path: str) -> Path:
    """The file `path` names inside the reports folder; 404 outside it, if missing, or if
    no file could have the name (a null byte, a name too long)."""
    root = reports.resolve()
    try:
        target = (root / (path or "index.html")).resolve()
        if target.is_relative_to(root) and target.is_file():
            return target
    except (OSError, ValueError):
        pass
    raise HTTPException(status_code=404, detail=f"no report {path[:200]!r}")


# Every page served here is a sandboxed document that runs no script (the sandbox
# does not allow scripts, and the policy names no script source), submits no form
# and loads nothing from elsewhere: a value from a landing file can never act,
# even if a page failed to escape it. Inline styles and pictures stay (the
# charts). The sandbox keeps the page's own origin (`allow-same-origin`): a link
# followed inside Airflow's report views is then a same-site navigation, which
# carries the login cookie (SameSite=Lax), where an opaque origin got
# "Not authenticated". Without scripts, that origin gives a page nothing to use.
REPORT_HEADERS = {
    "Content-Security-Policy": (
        "sandbox allow-same-origin; default-src 'none'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def served(file: Path) -> FileResponse:
    """A report file, with the headers that keep it inert."""
    return FileResponse(file, headers=REPORT_HEADERS)


def no_reports_page(dag_id: str, run_id: str) -> str:
    """What a DAG run's tab shows before any of its tasks has written a report."""
    return (
        "<!doctype html><html lang=en><meta charset=utf-8>"
        f"<title>{escape(dag_id)} {escape(run_id)}: no lakehouse report</title>"
        "<body style='font-family: system-ui, sans-serif; margin: 1.5rem'>"
        f"<p>No lakehouse report for <code>{escape(dag_id)}</code> run "
        f"<code>{escape(run_id)}</code> yet. A task that runs <code>lakehouse run</code>, "
        "<code>validate</code>, <code>backfill</code> or <code>parity</code> writes one when "
        "it ends; this page then lists them. "
        "<a href='../../index.html'>All lakehouse reports</a>.</p></body></html>"
    )


def reports_app() -> FastAPI:
    from airflow.api_fastapi.core_api.security import get_user

    app = FastAPI(title="lakehouse reports", docs_url=None, redoc_url=None, openapi_url=None)
    login = [_login_required()]
    user = Depends(get_user)  # the logged-in user, for the checks of each page's DAG
    prefix = REPORTS_URL.removeprefix("/lakehouse")

    @app.get(prefix + "/dag-runs/{dag_id}/{run_id}", dependencies=login)
    def dag_run_reports(dag_id: str, run_id: str, user: Any = user) -> Response:
        """A DAG run's page: by its file name (the index's links), or by the run id
        itself (the DAG-run tab's link, `{RUN_ID}`)."""
        may_read_runs_of(dag_id, user)
        page = f"dag-runs/{dag_id}/{run_id}"
        if not run_id.endswith(".html"):
            page = dag_run_page(dag_id, run_id)
        try:
            return served(report_file(settings().reports, page))
        except HTTPException:
            if run_id.endswith(".html"):
                raise
        # The tab of a run whose tasks have written no report (yet): a page saying so.
        return HTMLResponse(no_reports_page(dag_id, run_id), headers=REPORT_HEADERS)

    @app.get(prefix + "/{path:path}", dependencies=login)
    def reports(path: str, user: Any = user) -> FileResponse:
        folder = settings().reports
        may_read_runs_of(report_dag(folder, path), user)
        return served(report_file(folder, path))

    return app


# What Airflow keeps of a DAG run's note (characters).
NOTE_LIMIT = 1000


def noted(note: str | None, lines: list[str]) -> str | None:
    """A DAG run's note with its tasks' lines after what it already says (the range of a
    backfill, or the user's words), cut to what Airflow keeps; None if nothing to add."""
    new = [line for line in lines if line not in (note or "")]
    if not new:
        return None
    text = "\n".join([*([note] if note else []), *new])
    return text if len(text) <= NOTE_LIMIT else text[: NOTE_LIMIT - 1] + "…"


class RunNotes:
    """An Airflow listener, called in the scheduler when a DAG run ends: the lines the
    run's tasks kept for it (a warning, a refusal, a backfill's dates:
    `operators.OUTCOME_KEY`; then their queries' notices, such as drift:
    `operators.NOTICE_KEY`) go into the run's note, and each task's own lines into
    that task instance's note.

    Airflow 3 has no "passed with warnings" state, and a state other than success would
    change what runs next, so a warned run stays a success and the notes say it: the
    run's page shows the run's note under its header, the grid marks a run and a task
    that have a note, and a task's page shows its note. The runs list shows no notes."""

    @hookimpl
    def on_dag_run_success(self, dag_run: Any, msg: str) -> None:
        self.note(dag_run)

    @hookimpl
    def on_dag_run_failed(self, dag_run: Any, msg: str) -> None:
        self.note(dag_run)

    @staticmethod
    def note(dag_run: Any) -> None:
        from airflow.models.taskinstance import TaskInstance
        from airflow.models.xcom import XComModel
        from sqlalchemy import select
        from sqlalchemy.orm import object_session

        session = object_session(dag_run)
        if session is None:
            return
        kept = session.scalars(
            select(XComModel)
            .where(
                XComModel.dag_id == dag_run.dag_id,
                XComModel.run_id == dag_run.run_id,
                XComModel.key.in_((OUTCOME_KEY, NOTICE_KEY)),
            )
            # Outcomes first, then notices, each in the order the tasks kept them.
            .order_by(XComModel.key == NOTICE_KEY, XComModel.timestamp)
        ).all()
        lines = [str(XComModel.deserialize_value(row)) for row in kept]
        note = noted(dag_run.note, lines)
        if note is not None:
            dag_run.note = note
        by_task: dict[str, list[str]] = {}
        for row, line in zip(kept, lines, strict=True):
            by_task.setdefault(row.task_id, []).append(line)
        tasks = session.scalars(
            select(TaskInstance).where(
                TaskInstance.dag_id == dag_run.dag_id,
                TaskInstance.run_id == dag_run.run_id,
                TaskInstance.task_id.in_(by_task),
            )
        ).all()
        for task in tasks:
            task_note = noted(task.note, by_task[task.task_id])
            if task_note is not None:
                task.note = task_note


class LakehousePlugin(AirflowPlugin):
    name = "lakehouse"
    fastapi_apps = [  # noqa: RUF012 (Airflow reads these class attributes)
        {"app": reports_app(), "url_prefix": "/lakehouse", "name": "lakehouse reports"}
    ]
    external_views = [  # noqa: RUF012
        {
            "name": "Lakehouse reports",
            "href": f"{REPORTS_URL}/index.html",
            "destination": "nav",
            "category": "browse",
            "url_route": "lakehouse-reports",
        },
        {
            "name": "Lakehouse reports",
            "href": f"{REPORTS_URL}/dag-runs/{{DAG_ID}}/{{RUN_ID}}",
            "destination": "dag_run",
            # Airflow's UI shows a view as a tab only with a route of its own.
            "url_route": "lakehouse-run-reports",
        },
    ]
    operator_extra_links = [RunReportLink(), QualityLink()]  # noqa: RUF012
    listeners = [RunNotes()]  # noqa: RUF012
