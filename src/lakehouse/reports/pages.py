"""The run summary: one static HTML page per run, and an index of runs, under `reports/`.

Rendered from Jinja2 templates (`src/lakehouse/reports/templates/`, autoescaped), with
inline CSS and relative links, so a page opens from the file system in any
browser, no server. Each page sits next to a JSON file with the same numbers
(`reports/runs/<run_id>.json`), which the index is built from. Data Docs
pages (rendered by Great Expectations) are linked per table.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from lakehouse.catalog import LAYERS
from lakehouse.quality.derived import DERIVED_CHECKS
from lakehouse.reports.charts import Point, history, line_chart
from lakehouse.runtime.progress import CAUGHT_UP
from lakehouse.runtime.runs import dag_run_page
from lakehouse.runtime.settings import Settings

if TYPE_CHECKING:
    import jinja2

    from lakehouse.reports.outcome import RunOutcome

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATUS_CLASS = {
    "passed": "passed",
    "passed with warnings": "warn",
    "blocked": "bad",
    "failed checks": "bad",
    "failed": "bad",
    "different": "bad",
    "same": "passed",
    "blocking failed": "bad",
}


@cache
def _templates() -> jinja2.Environment:
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.globals["status_class"] = lambda status: STATUS_CLASS.get(status, "bad")
    return environment


def _href(target: Path | None, start: Path) -> str | None:
    """A relative link from the folder `start` to `target`, if there is one."""
    return None if target is None else Path(os.path.relpath(target, start)).as_posix()


def summary_data(settings: Settings, outcome: RunOutcome) -> dict[str, Any]:
    """The numbers of the page, as JSON."""
    return {
        "run_id": outcome.run_id,
        "command": outcome.command,
        # The Airflow task that ran it (dag_id, run_id, task_id, try_number), if any.
        "airflow": outcome.airflow,
        # Per gold table: the newest event time it holds after the run (freshness).
        "newest_events": outcome.newest_events,
        "layers": list(outcome.layers) or [layer.layer for layer in outcome.checks],
        "status": outcome.status,
        "started_at": outcome.started_at.isoformat(),
        "seconds": round(outcome.seconds, 1),
        "layer_seconds": {layer: round(s, 1) for layer, s in outcome.layer_seconds.items()},
        "data_root": str(settings.data_root),
        "dates": outcome.dates,
        "parity": outcome.parity,
        "blocked_at": outcome.blocked_at,
        "not_run": outcome.not_run,
        "error": outcome.error,
        "stages": [
            {
                "stage": s.stage,
                "rows_in": s.rows_in,
                "rows_out": s.rows_out,
                "batches": s.batches,
                "caught_up": s.caught_up,
                "batch": s.batch,
                "upsert": s.upsert,
                "seconds": round(s.seconds, 2),
                "dropped_late": s.dropped_late,
                "state_rows": s.state_rows,
                "state_bytes": s.state_bytes,
                "state": s.state_text,
                "state_operators": s.state_operators,
                "notices": s.notices,
            }
            for s in outcome.stages
        ],
        "quarantine_by_reason": outcome.quarantine,
        "checks": [
            {
                "layer": layer.layer,
                "seconds": round(layer.seconds, 2),
                "tables": [
                    {
                        "table": t.table,
                        "version": t.version,
                        "since_version": t.since_version,
                        "rows_written": t.rows_written,
                        "seconds": round(t.seconds, 2),
                        "passed": sum(o.success for o in t.outcomes),
                        "expectations": len(t.outcomes),
                        "facts": t.facts,
                        "failed": [o.message() for o in t.failures],
                        "warnings": [o.message() for o in t.warnings],
                    }
                    for t in layer.tables
                ],
            }
            for layer in outcome.checks
        ],
    }


def _version_text(version: int | None, since: int | None) -> str:
    if version is None:
        return ""
    if since is None:
        return f"{version} (all rows)"
    if since == version:
        return f"{version} (unchanged since it passed)"
    return f"{version} (new since {since})"


def _page_data(settings: Settings, outcome: RunOutcome, page_dir: Path) -> dict[str, Any]:
    """The summary's numbers, with what only the page shows: links and problem rows."""
    data = summary_data(settings, outcome)
    for stage in data["stages"]:
        stage["table_page"] = _href(settings.reports / table_page(stage["stage"]), page_dir)
    for layer, checked in zip(data["checks"], outcome.checks, strict=True):
        layer["summary"] = checked.summary()
        layer["problems"] = [o for t in checked.tables for o in t.failures + t.warnings]
        for table, check in zip(layer["tables"], checked.tables, strict=True):
            table["version_text"] = _version_text(check.version, check.since_version)
            derived = check.table in DERIVED_CHECKS
            page = None if derived else settings.reports / table_page(check.table)
            table["table_page"] = _href(page, page_dir)
            pages = {o.scope: o.docs_page for o in check.outcomes if o.docs_page}
            table["docs_pages"] = [
                (scope.replace("_", " "), _href(page, page_dir))
                for scope, page in sorted(pages.items())
            ]
    return data


def write_run_report(settings: Settings, outcome: RunOutcome) -> Path:
    """Write `reports/runs/<run_id>.html` and `.json`, and refresh the index pages."""
    runs = settings.reports / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    (runs / f"{outcome.run_id}.json").write_text(
        json.dumps(summary_data(settings, outcome), indent=2) + "\n"
    )
    quarantine = outcome.quarantine
    page = runs / f"{outcome.run_id}.html"
    airflow = outcome.airflow
    dag_run = settings.reports / dag_run_page(*_dag_run(airflow)) if airflow else None
    page.write_text(
        _templates()
        .get_template("run.html.j2")
        .render(
            run=_page_data(settings, outcome, runs),
            links={
                "index": _href(settings.reports / "index.html", runs),
                "dag_run": _href(dag_run, runs),
                "quality": _href(settings.reports / "quality" / f"{outcome.run_id}.html", runs)
                if outcome.checks
                else None,
            },
            caught_up=CAUGHT_UP,
            late_share_warning=settings.late_share_warning,
            quarantine_reasons=sorted({r for by_reason in quarantine.values() for r in by_reason}),
        )
    )
    if outcome.checks:
        write_quality_page(settings, outcome)
    write_index(settings, dag_run=airflow)
    return page


# How a failed expectation reads by severity, and in which order outcomes are listed.
RESULT = {(False, True): "blocking failed", (False, False): "warning", (True, True): "passed"}


def write_quality_page(settings: Settings, outcome: RunOutcome) -> Path:
    """`reports/quality/<run_id>.html`: every expectation the run checked, failures
    first, with its severity, table, rows and sample. HTML and CSS only, so it works
    where Great Expectations' Data Docs (whose index needs scripts from public CDNs)
    do not: offline."""
    folder = settings.reports / "quality"
    folder.mkdir(parents=True, exist_ok=True)
    outcomes: list[dict[str, Any]] = []
    for layer in outcome.checks:
        for check in layer.tables:
            derived = check.table in DERIVED_CHECKS
            page = None if derived else settings.reports / table_page(check.table)
            for o in check.outcomes:
                outcomes.append(
                    {
                        "result": RESULT.get((o.success, o.blocking), "passed"),
                        "severity": "blocking" if o.blocking else "warning",
                        "table": o.table,
                        "table_page": _href(page, folder),
                        "scope": o.scope.replace("_", " "),
                        "description": o.description,
                        "rows_checked": o.rows_checked,
                        "unexpected_count": o.unexpected_count,
                        "observed": o.observed,
                        "sample": o.sample,
                        "docs_page": _href(o.docs_page, folder),
                    }
                )
    order = {"blocking failed": 0, "warning": 1, "passed": 2}
    outcomes.sort(key=lambda o: (order[o["result"]], o["table"]))
    counts = {
        "blocking": sum(o["result"] == "blocking failed" for o in outcomes),
        "warning": sum(o["result"] == "warning" for o in outcomes),
        "passed": sum(o["result"] == "passed" for o in outcomes),
        "total": len(outcomes),
    }
    page = folder / f"{outcome.run_id}.html"
    page.write_text(
        _templates()
        .get_template("quality.html.j2")
        .render(
            run=summary_data(settings, outcome),
            outcomes=outcomes,
            counts=counts,
            links={
                "run": _href(settings.reports / "runs" / f"{outcome.run_id}.html", folder),
                "index": _href(settings.reports / "index.html", folder),
            },
        )
    )
    return page


def _summaries(settings: Settings) -> list[dict[str, Any]]:
    """Every run's JSON summary, newest first."""
    summaries = []
    for path in (settings.reports / "runs").glob("*.json"):
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a page being written by a concurrent run
        # Reports written before 0.6 name neither the Airflow task nor the layers.
        summaries.append({"airflow": None, "layers": [], **summary})
    summaries.sort(key=lambda s: s["started_at"], reverse=True)
    return summaries


def _dag_run(airflow: dict[str, str]) -> tuple[str, str]:
    return airflow["dag_id"], airflow["run_id"]


def _by_dag_run(summaries: list[dict[str, Any]], page_dir: Path, settings: Settings) -> list[dict]:
    """The runs grouped by the Airflow DAG run they belong to (newest first); a run
    from the command line is a group of its own."""
    runs = settings.reports / "runs"
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for summary in summaries:
        airflow = summary.get("airflow")
        key = _dag_run(airflow) if airflow else ("", summary["run_id"])
        group = groups.setdefault(
            key,
            {
                "dag_id": key[0],
                "dag_run_id": key[1] if airflow else None,
                "href": _href(settings.reports / dag_run_page(*key), page_dir) if airflow else None,
                "runs": [],
            },
        )
        page = runs / f"{summary['run_id']}.html"
        group["runs"].append({**summary, "href": _href(page, page_dir)})
    return list(groups.values())


def _charts(points: list[Point]) -> list[Markup]:
    """The pipeline's trends: one chart per figure, a line per layer or gold table."""
    labels = [p.label for p in points]
    layers = [layer for layer in LAYERS if any(layer in p.seconds for p in points)]
    gold = sorted({table for p in points for table in p.freshness_hours})

    def per(figure: str, names: Sequence[str]) -> dict[str, list[float | None]]:
        return {name: [getattr(p, figure).get(name) for p in points] for name in names}

    def one(name: str, values: list[float | None]) -> dict[str, list[float | None]]:
        return {name: values}

    stateful = [layer for layer in layers if layer != "bronze"]
    quarantined = [p.quarantine_percent for p in points]
    passed = [p.pass_percent for p in points]
    return [
        line_chart("Run time per layer", labels, per("seconds", layers), " s"),
        line_chart("Rows in per layer", labels, per("rows_in", layers)),
        line_chart("Rows out per layer", labels, per("rows_out", layers)),
        line_chart("Rows dropped as late", labels, per("dropped_late", stateful)),
        line_chart("Quarantine rate", labels, one("quarantined", quarantined), "%"),
        line_chart("Data-quality pass rate", labels, one("passed", passed), "%"),
        line_chart(
            "Freshness: newest event's age at run start", labels, per("freshness_hours", gold), " h"
        ),
    ]


def _table_charts(points: list[Point], table: str) -> list[Markup]:
    """One table's trends, from the points its query or its checks appear in."""
    labels = [p.label for p in points]

    def figure(name: str) -> list[float | None]:
        return [p.tables.get(table, {}).get(name) for p in points]

    passed, expected = figure("passed"), figure("expectations")
    pass_rate = [
        100 * a / b if a is not None and b else None for a, b in zip(passed, expected, strict=True)
    ]
    charts = [
        line_chart("Rows in and out", labels, {"in": figure("rows_in"), "out": figure("rows_out")}),
        line_chart("Query time", labels, {"seconds": figure("seconds")}, " s"),
        line_chart("Rows dropped as late", labels, {"dropped": figure("dropped_late")}),
        line_chart("Data-quality pass rate", labels, {"passed": pass_rate}, "%"),
    ]
    if any(table in p.freshness_hours for p in points):
        ages = [p.freshness_hours.get(table) for p in points]
        charts.append(line_chart("Age of the newest event", labels, {"age": ages}, " h"))
    return charts


def table_page(table: str) -> str:
    """Where, under the reports folder, a table's page is (`tables/silver/clicks.html`)."""
    return f"tables/{table.split('[')[0]}.html"


def write_index(settings: Settings, dag_run: dict[str, str] | None = None) -> Path:
    """`reports/index.html`: the trends as charts, each table's page, and every run and
    validation, newest first, grouped by DAG run; with `dag_run`, that DAG run's own
    page (`reports/dag-runs/<dag id>/<run id>.html`) too."""
    summaries = _summaries(settings)
    index = settings.reports / "index.html"
    points = history(summaries)
    tables = sorted({t for p in points for t in p.tables} - DERIVED_CHECKS)
    for table in tables:
        page = settings.reports / table_page(table)
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(
            _templates()
            .get_template("table.html.j2")
            .render(
                table=table,
                charts=_table_charts(points, table),
                index=_href(index, page.parent),
                runs=len(points),
            )
        )
    index.write_text(
        _templates()
        .get_template("index.html.j2")
        .render(
            groups=_by_dag_run(summaries, settings.reports, settings),
            charts=_charts(points),
            runs=len(points),
            tables=[(table, table_page(table)) for table in tables],
        )
    )
    if dag_run is not None:
        page = settings.reports / dag_run_page(*_dag_run(dag_run))
        page.parent.mkdir(parents=True, exist_ok=True)
        key = _dag_run(dag_run)
        own = [s for s in summaries if s.get("airflow") and _dag_run(s["airflow"]) == key]
        page.write_text(
            _templates()
            .get_template("dag_run.html.j2")
            .render(
                dag_run=dag_run,
                groups=_by_dag_run(own, page.parent, settings),
                index=_href(index, page.parent),
            )
        )
    return index
