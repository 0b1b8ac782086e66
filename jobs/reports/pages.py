"""The run summary: one static HTML page per run, and an index of runs, under `reports/`.

Plain HTML with inline CSS and relative links, so it opens from the file
system in any browser, no server. Each page sits next to a JSON file with the
same numbers (`reports/runs/<run_id>.json`), which the index is built from.
Data Docs pages (rendered by Great Expectations) are linked per table.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from include.settings import Settings
from jobs.reports.progress import CAUGHT_UP

if TYPE_CHECKING:
    from jobs.reports.outcome import RunOutcome

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
h1 { font-size: 1.5em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { padding: .25em .7em; border-bottom: 1px solid #eee; text-align: left; }
td { vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
.status { padding: .1em .6em; border-radius: .8em; font-size: .8em; color: #fff; }
.passed { background: #2e7d32; } .warn { background: #b26a00; } .bad { background: #c62828; }
.note { padding: .6em 1em; border-left: 4px solid #c62828; background: #fdecea; }
code, .sample { font: 12px ui-monospace, monospace; }
nav a { margin-right: 1em; }
"""
STATUS_CLASS = {
    "passed": "passed",
    "passed with warnings": "warn",
    "blocked": "bad",
    "failed checks": "bad",
    "failed": "bad",
}


def _e(value: Any) -> str:
    return html.escape(str(value))


def _n(value: int | float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"


def _table(headers: list[str], rows: list[list[str]], numeric: set[int]) -> str:
    head = "".join(
        f"<th{' class=n' if i in numeric else ''}>{_e(h)}</th>" for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=n' if i in numeric else ''}>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _link(target: Path | None, start: Path, text: str) -> str:
    if target is None:
        return ""
    return f'<a href="{_e(Path(os.path.relpath(target, start)).as_posix())}">{_e(text)}</a>'


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


def _stages_section(outcome: RunOutcome) -> str:
    if not outcome.stages:
        return ""
    rows = [
        [
            f"<code>{_e(s.stage)}</code>",
            _n(s.rows_in),
            CAUGHT_UP
            if s.caught_up
            else _e(", ".join(f"{rows:,} {table}" for table, rows in s.rows_out.items())),
            _n(s.batches),
            f"{s.seconds:.1f}",
            _n(s.dropped_late) if s.state_rows is not None else "",
            _n(s.state_rows),
        ]
        for s in outcome.stages
    ]
    headers = ["stage", "rows in", "rows out", "batches", "seconds", "dropped late", "state rows"]
    return "<h2>Stages</h2>" + _table(headers, rows, {1, 3, 4, 5, 6})


def _notices_section(outcome: RunOutcome) -> str:
    """What the stages reported beyond their figures: landing files not read, and why."""
    items = [
        f"<li><code>{_e(s.stage)}</code>: {_e(notice)}</li>"
        for s in outcome.stages
        for notice in s.notices
    ]
    return f"<h2>Not read</h2><ul class=notices>{''.join(items)}</ul>" if items else ""


def _quarantine_section(outcome: RunOutcome) -> str:
    title = f"<h2>Quarantine by reason ({'this run' if outcome.command == 'run' else 'all'})</h2>"
    counts = outcome.quarantine
    sources = list(counts)
    reasons = sorted({reason for by_reason in counts.values() for reason in by_reason})
    if not reasons:
        return title + "<p>No line was quarantined.</p>"
    rows = [[_e(reason)] + [_n(counts[s].get(reason)) for s in sources] for reason in reasons]
    totals = [_n(sum(counts[s].values())) for s in sources]
    rows.append(["<b>total</b>"] + [f"<b>{total}</b>" for total in totals])
    numeric = set(range(1, len(sources) + 1))
    return title + _table(["reason", *sources], rows, numeric)


def _reconciliation(facts: list[dict[str, Any]]) -> str:
    rows = [
        [
            _e(f["source"]),
            _n(f["lines_read"]),
            _n(f["bronze_rows"]),
            _n(f["quarantine_rows"]),
            _n(f["lines_read"] - f["bronze_rows"] - f["quarantine_rows"]),
        ]
        for f in facts
    ]
    headers = ["source", "lines read", "bronze rows", "quarantine rows", "difference"]
    return "<h4>Reconciliation (whole tables)</h4>" + _table(headers, rows, {1, 2, 3, 4})


def _checks_section(outcome: RunOutcome, page_dir: Path) -> str:
    parts = ["<h2>Data-quality checkpoints</h2>"]
    if outcome.not_run:
        parts.append(f"<p>Not run (blocked): {_e(', '.join(outcome.not_run))}.</p>")
    for layer in outcome.checks:
        parts.append(f"<h3>{_e(layer.layer)}: {_e(layer.summary())}</h3>")
        rows = []
        for t in layer.tables:
            pages = {o.scope: o.docs_page for o in t.outcomes if o.docs_page}
            if t.version is None:
                version = ""
            elif t.since_version is None:
                version = f"{t.version} (all rows)"
            elif t.since_version == t.version:
                version = f"{t.version} (unchanged since it passed)"
            else:
                version = f"{t.version} (new since {t.since_version})"
            rows.append(
                [
                    f"<code>{_e(t.table)}</code>",
                    _e(version),
                    f"{sum(o.success for o in t.outcomes)}/{len(t.outcomes)}",
                    _n(len(t.failures)),
                    _n(len(t.warnings)),
                    " ".join(
                        _link(page, page_dir, scope.replace("_", " "))
                        for scope, page in sorted(pages.items())
                    ),
                ]
            )
        parts.append(
            _table(
                ["table", "version", "passed", "blocking failed", "warnings", "Data Docs"],
                rows,
                {2, 3, 4},
            )
        )
        parts.extend(_reconciliation(t.facts) for t in layer.tables if t.facts)
        problems = [o for t in layer.tables for o in t.failures + t.warnings]
        if problems:
            parts.append(
                _table(
                    ["severity", "table", "expectation", "rows checked", "unexpected", "sample"],
                    [
                        [
                            "blocking" if o.blocking else "warning",
                            f"<code>{_e(o.table)}</code> ({_e(o.scope.replace('_', ' '))})",
                            _e(o.description),
                            _n(o.rows_checked) if o.rows_checked else "",
                            _n(o.unexpected_count)
                            if o.unexpected_count is not None
                            else _e(o.observed or ""),
                            f"<span class=sample>{_e(', '.join(o.sample))}</span>",
                        ]
                        for o in problems
                    ],
                    {3, 4},
                )
            )
    return "".join(parts)


def _page(title: str, body: str) -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>{body}</body></html>\n"
    )


def write_run_report(settings: Settings, outcome: RunOutcome) -> Path:
    """Write `reports/runs/<run_id>.html` and `.json`, and refresh `reports/index.html`."""
    runs = settings.reports / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    data = summary_data(settings, outcome)
    (runs / f"{outcome.run_id}.json").write_text(json.dumps(data, indent=2) + "\n")

    status = outcome.status
    note = ""
    if outcome.error:
        note = f"<p class=note>The run failed: <code>{_e(outcome.error)}</code></p>"
    elif outcome.blocked_at:
        note = (
            f"<p class=note>Blocking checks failed in <b>{_e(outcome.blocked_at)}</b>; "
            f"not run: {_e(', '.join(outcome.not_run) or 'nothing')}. Fix the data (see the "
            "failures below), then run again: a failed table is checked again from its last "
            "passing version.</p>"
        )
    docs_index = settings.reports / "data_docs" / "index.html"
    body = (
        f"<nav>{_link(settings.reports / 'index.html', runs, 'All runs')}"
        f"{_link(docs_index, runs, 'Data Docs') if docs_index.exists() else ''}</nav>"
        f"<h1>lakehouse {_e(outcome.command)} <code>{_e(outcome.run_id)}</code> "
        f"<span class='status {STATUS_CLASS[status]}'>{_e(status)}</span></h1>{note}"
        + _table(
            ["started (UTC)", "duration", "data root"],
            [
                [
                    _e(outcome.started_at.strftime("%Y-%m-%d %H:%M:%S")),
                    f"{outcome.seconds:.1f} s",
                    f"<code>{_e(settings.data_root)}</code>",
                ]
            ],
            set(),
        )
        + _stages_section(outcome)
        + _notices_section(outcome)
        + (_quarantine_section(outcome) if outcome.quarantine else "")
        + _checks_section(outcome, runs)
    )
    page = runs / f"{outcome.run_id}.html"
    page.write_text(_page(f"lakehouse {outcome.command} {outcome.run_id}", body))
    write_index(settings)
    return page


def write_index(settings: Settings) -> Path:
    """`reports/index.html`: every run and validation, newest first."""
    runs = settings.reports / "runs"
    summaries = []
    for path in runs.glob("*.json"):
        try:
            summaries.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # a page being written by a concurrent run
    summaries.sort(key=lambda s: s["started_at"], reverse=True)
    rows = [
        [
            _link(runs / f"{s['run_id']}.html", settings.reports, s["run_id"]),
            _e(s["command"]),
            f"<span class='status {STATUS_CLASS.get(s['status'], 'bad')}'>{_e(s['status'])}</span>",
            _e(s["started_at"][:19].replace("T", " ")),
            f"{s['seconds']:.1f}",
        ]
        for s in summaries
    ]
    docs_index = settings.reports / "data_docs" / "index.html"
    body = (
        "<h1>lakehouse reports</h1>"
        + (
            f"<nav>{_link(docs_index, settings.reports, 'Data Docs')}</nav>"
            if docs_index.exists()
            else ""
        )
        + _table(["run", "command", "status", "started (UTC)", "seconds"], rows, {4})
    )
    index = settings.reports / "index.html"
    index.write_text(_page("lakehouse reports", body))
    return index
