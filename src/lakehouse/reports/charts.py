"""Trends over runs, drawn as inline SVG: no script, nothing fetched, opens from a file.

`history` turns the runs' JSON summaries (reports/runs/*.json) into one point
per pipeline run: an Airflow DAG run (its layer tasks write one report each)
or a `lakehouse run` from the command line. `line_chart` draws series of
such points; the reports index shows the pipeline's, each table's page its own.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from markupsafe import Markup

# Distinguishable on white and for the common colour blindnesses (Okabe-Ito).
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")
# The newest runs a chart shows.
MAX_POINTS = 60


@dataclass
class Point:
    """One pipeline run: what its reports say, summed per layer and per table."""

    label: str  # when it started (UTC), `2026-11-27 03:15`
    started_at: dt.datetime
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    rows_in: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    rows_out: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    dropped_late: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    lines_read: int = 0
    quarantined: int = 0
    expectations: int = 0
    passed: int = 0
    # Per table: its query's figures, and its checks' (`passed`, `expectations`).
    tables: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    # Per gold table: hours between the newest event it holds and the run.
    freshness_hours: dict[str, float] = field(default_factory=dict)

    @property
    def quarantine_percent(self) -> float | None:
        return 100 * self.quarantined / self.lines_read if self.lines_read else None

    @property
    def pass_percent(self) -> float | None:
        return 100 * self.passed / self.expectations if self.expectations else None


def _layer(name: str) -> str:
    return name.split("/")[0]


def _add_seconds(point: Point, summary: Mapping[str, Any]) -> None:
    """A run's time per layer, as its report says it: a run of one layer (an Airflow
    layer task) its whole duration, a run of several each layer's wall time. (Reports
    before 0.9 only have their stages' and checks' times, summed.)"""
    per_layer = summary.get("layer_seconds")
    if per_layer is None:
        for part in [*summary.get("stages", []), *summary.get("checks", [])]:
            point.seconds[_layer(part.get("stage") or part["layer"])] += part["seconds"]
    elif len(per_layer) == 1:
        point.seconds[next(iter(per_layer))] += summary["seconds"]
    else:
        for layer, seconds in per_layer.items():
            point.seconds[layer] += seconds


def _add(point: Point, summary: Mapping[str, Any]) -> None:
    _add_seconds(point, summary)
    for stage in summary.get("stages", []):
        layer, table = _layer(stage["stage"]), stage["stage"].split("[")[0]
        if stage.get("caught_up"):
            continue
        out = sum(stage["rows_out"].values())
        point.rows_in[layer] += stage["rows_in"]
        point.rows_out[layer] += out
        point.dropped_late[layer] += stage["dropped_late"]
        figures = point.tables[table]
        for key, value in (
            ("rows_in", stage["rows_in"]),
            ("rows_out", out),
            ("seconds", stage["seconds"]),
            ("dropped_late", stage["dropped_late"]),
        ):
            figures[key] = figures.get(key, 0) + value
        if layer == "bronze":
            point.lines_read += stage["rows_in"]
    quarantine = summary.get("quarantine_by_reason") or {}
    point.quarantined += sum(sum(by_reason.values()) for by_reason in quarantine.values())
    for checked in summary.get("checks", []):
        for table in checked["tables"]:
            point.expectations += table["expectations"]
            point.passed += table["passed"]
            figures = point.tables[table["table"]]
            figures["passed"] = figures.get("passed", 0) + table["passed"]
            figures["expectations"] = figures.get("expectations", 0) + table["expectations"]
    started = dt.datetime.fromisoformat(summary["started_at"])
    for table, newest in (summary.get("newest_events") or {}).items():
        if newest is not None:
            age = started - dt.datetime.fromisoformat(newest)
            point.freshness_hours[table] = age.total_seconds() / 3600


def history(summaries: Iterable[Mapping[str, Any]]) -> list[Point]:
    """One point per pipeline run (`lakehouse run` reports only), oldest first."""
    runs: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for summary in summaries:
        if summary["command"] != "run":
            continue
        airflow = summary.get("airflow")
        key = (airflow["dag_id"], airflow["run_id"]) if airflow else ("", summary["run_id"])
        runs.setdefault(key, []).append(summary)
    points = []
    for reports in runs.values():
        first = min(dt.datetime.fromisoformat(r["started_at"]) for r in reports)
        point = Point(first.strftime("%Y-%m-%d %H:%M"), first)
        for report in sorted(reports, key=lambda r: r["started_at"]):
            _add(point, report)
        points.append(point)
    points.sort(key=lambda p: p.started_at)
    return points[-MAX_POINTS:]


def _number(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:,.0f}k"
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


# The legend's font (svg.chart, 11px system-ui): a generous width per character, so that
# names laid out one after another never overlap.
LEGEND_CHAR_PX = 6.6


def _legend_places(
    names: list[str], start: float, end: float, baseline: float
) -> list[tuple[float, float]]:
    """Where each legend entry (a swatch and its name) goes: one after another, a new line
    when the next would pass the right edge."""
    places, x, y = [], start, baseline - 2
    for name in names:
        width = 14 + LEGEND_CHAR_PX * len(name) + 12
        if x > start and x + width > end:
            x, y = start, y + 16
        places.append((x, y))
        x += width
    return places


def line_chart(
    title: str,
    labels: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    unit: str = "",
    width: int = 420,
    height: int = 150,
) -> Markup:
    """An SVG line chart: one line per series over the points `labels` name.

    A missing value (None) leaves a gap. Each point's exact value is in its
    tooltip (an SVG <title>); the axes show zero, the largest value, and the
    first and last labels.
    """
    left, right, top, bottom = 46, 8, 22, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    legend = _legend_places(list(series), left, width - right, height)
    values = [v for line in series.values() for v in line if v is not None]
    top_value = max(values, default=0) or 1
    step = plot_w / max(len(labels) - 1, 1)

    def x(i: int) -> float:
        return left + (i * step if len(labels) > 1 else plot_w / 2)

    def y(v: float) -> float:
        return top + plot_h - plot_h * v / top_value

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
        f'height="{max((y for _, y in legend), default=height - 18) + 18}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="{left}" y="14" class="title">{escape(title)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'class="axis" />',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" class="axis" />',
        f'<text x="{left - 4}" y="{top + 4}" class="tick" text-anchor="end">'
        f"{escape(_number(top_value))}{escape(unit)}</text>",
        f'<text x="{left - 4}" y="{top + plot_h + 4}" class="tick" text-anchor="end">0</text>',
    ]
    if not values:
        parts.append(
            f'<text x="{left + plot_w / 2}" y="{top + plot_h / 2}" class="tick" '
            'text-anchor="middle">no data yet</text>'
        )
    if labels:
        parts.append(
            f'<text x="{left}" y="{top + plot_h + 14}" class="tick">{escape(labels[0])}</text>'
        )
    if len(labels) > 1:
        parts.append(
            f'<text x="{left + plot_w}" y="{top + plot_h + 14}" class="tick" '
            f'text-anchor="end">{escape(labels[-1])}</text>'
        )
    for n, (name, line) in enumerate(series.items()):
        colour = COLOURS[n % len(COLOURS)]
        segments: list[list[str]] = [[]]
        for i, value in enumerate(line):
            if value is None:
                segments.append([])
                continue
            segments[-1].append(f"{x(i):.1f},{y(value):.1f}")
            parts.append(
                f'<circle cx="{x(i):.1f}" cy="{y(value):.1f}" r="2.5" fill="{colour}">'
                f"<title>{escape(name)}, {escape(labels[i])}: "
                f"{escape(_number(value))}{escape(unit)}</title></circle>"
            )
        parts += [
            f'<polyline points="{" ".join(s)}" fill="none" stroke="{colour}" stroke-width="1.5" />'
            for s in segments
            if len(s) > 1
        ]
        legend_x, legend_y = legend[n]
        parts.append(
            f'<rect x="{legend_x:.1f}" y="{legend_y - 8}" width="10" height="10" '
            f'fill="{colour}" /><text x="{legend_x + 14:.1f}" y="{legend_y + 1}" '
            f'class="legend">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 (every text in it is escaped above)
