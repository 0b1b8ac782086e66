"""The run summary: one static HTML page per run, and an index of runs, under `reports/`.

Rendered from Jinja2 templates (`jobs/reports/templates/`, autoescaped), with
inline CSS and relative links, so a page opens from the file system in any
browser, no server. Each page sits next to a JSON file with the same numbers
(`reports/runs/<run_id>.json`), which the index is built from. Data Docs
pages (rendered by Great Expectations) are linked per table.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from include.settings import Settings
from jobs.reports.progress import CAUGHT_UP

if TYPE_CHECKING:
    import jinja2

    from jobs.reports.outcome import RunOutcome

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATUS_CLASS = {
    "passed": "passed",
    "passed with warnings": "warn",
    "blocked": "bad",
    "failed checks": "bad",
    "failed": "bad",
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
        "status": outcome.status,
        "started_at": outcome.started_at.isoformat(),
        "seconds": round(outcome.seconds, 1),
        "data_root": str(settings.data_root),
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
    for layer, checked in zip(data["checks"], outcome.checks, strict=True):
        layer["summary"] = checked.summary()
        layer["problems"] = [o for t in checked.tables for o in t.failures + t.warnings]
        for table, check in zip(layer["tables"], checked.tables, strict=True):
            table["version_text"] = _version_text(check.version, check.since_version)
            pages = {o.scope: o.docs_page for o in check.outcomes if o.docs_page}
            table["docs_pages"] = [
                (scope.replace("_", " "), _href(page, page_dir))
                for scope, page in sorted(pages.items())
            ]
    return data


def write_run_report(settings: Settings, outcome: RunOutcome) -> Path:
    """Write `reports/runs/<run_id>.html` and `.json`, and refresh `reports/index.html`."""
    runs = settings.reports / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    (runs / f"{outcome.run_id}.json").write_text(
        json.dumps(summary_data(settings, outcome), indent=2) + "\n"
    )
    docs_index = settings.reports / "data_docs" / "index.html"
    quarantine = outcome.quarantine
    page = runs / f"{outcome.run_id}.html"
    page.write_text(
        _templates()
        .get_template("run.html.j2")
        .render(
            run=_page_data(settings, outcome, runs),
            links={
                "index": _href(settings.reports / "index.html", runs),
                "data_docs": _href(docs_index, runs) if docs_index.exists() else None,
            },
            caught_up=CAUGHT_UP,
            quarantine_reasons=sorted({r for by_reason in quarantine.values() for r in by_reason}),
        )
    )
    write_index(settings)
    return page


def write_index(settings: Settings) -> Path:
    """`reports/index.html`: every run and validation, newest first."""
    runs = settings.reports / "runs"
    summaries = []
    for path in runs.glob("*.json"):
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a page being written by a concurrent run
        summary["href"] = _href(runs / f"{summary['run_id']}.html", settings.reports)
        summaries.append(summary)
    summaries.sort(key=lambda s: s["started_at"], reverse=True)
    docs_index = settings.reports / "data_docs" / "index.html"
    index = settings.reports / "index.html"
    index.write_text(
        _templates()
        .get_template("index.html.j2")
        .render(
            runs=summaries,
            data_docs=_href(docs_index, settings.reports) if docs_index.exists() else None,
        )
    )
    return index
