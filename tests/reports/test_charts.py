"""The trends: runs grouped into pipeline runs, and the SVG that draws them."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

from lakehouse.reports.charts import LEGEND_CHAR_PX, history, line_chart


def report(run_id: str, started: str, layer: str, dag_run: str | None = None, **figures):
    stage = {
        "stage": f"{layer}/t",
        "rows_in": figures.get("rows_in", 10),
        "rows_out": {"t": figures.get("rows_out", 8)},
        "seconds": 2.0,
        "dropped_late": figures.get("late", 0),
        "caught_up": False,
    }
    return {
        "run_id": run_id,
        "command": figures.get("command", "run"),
        "started_at": started,
        "airflow": {"dag_id": "d", "run_id": dag_run, "task_id": layer} if dag_run else None,
        "stages": [stage],
        "quarantine_by_reason": {"t": {"bad json": figures.get("quarantined", 0)}},
        "checks": [
            {
                "layer": layer,
                "seconds": 1.0,
                "tables": [{"table": f"{layer}/t", "passed": 3, "expectations": 4}],
            }
        ],
        "newest_events": figures.get("newest", {}),
    }


def test_a_dag_runs_layer_tasks_make_one_point_and_a_cli_run_another():
    summaries = [
        report("r1", "2026-11-01T10:00:00+00:00", "bronze", "manual_1", quarantined=1),
        report("r2", "2026-11-01T10:02:00+00:00", "silver", "manual_1", late=5),
        report(
            "r3",
            "2026-11-01T10:04:00+00:00",
            "gold",
            "manual_1",
            newest={"gold/t": "2026-11-01T06:04:00+00:00"},
        ),
        report("r4", "2026-11-01T09:00:00+00:00", "bronze"),  # the command line, earlier
        report("v1", "2026-11-01T11:00:00+00:00", "gold", command="validate"),  # not a run
    ]
    points = history(summaries)
    assert [p.label for p in points] == ["2026-11-01 09:00", "2026-11-01 10:00"]
    dag_run = points[1]
    assert dict(dag_run.seconds) == {"bronze": 3.0, "silver": 3.0, "gold": 3.0}
    assert dag_run.dropped_late["silver"] == 5
    assert dag_run.quarantine_percent == 10.0  # 1 of the 10 lines bronze read
    assert dag_run.pass_percent == 75.0
    assert dag_run.freshness_hours == {"gold/t": 4.0}
    assert dag_run.tables["silver/t"]["rows_out"] == 8


def test_a_chart_is_valid_svg_with_a_gap_where_a_value_is_missing():
    svg = line_chart("Rows <in>", ["a", "b", "c"], {"silver": [1, None, 3], "gold": [2, 2, 2]})
    root = ET.fromstring(str(svg))  # noqa: S314 (our own output)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.find(f"{ns}text").text == "Rows <in>"  # escaped in the markup
    lines = root.findall(f"{ns}polyline")
    assert len(lines) == 1  # silver has no two consecutive points; gold one line
    assert len(root.findall(f"{ns}circle")) == 5
    tooltips = [c.find(f"{ns}title").text for c in root.findall(f"{ns}circle")]
    assert "silver, c: 3" in tooltips


def test_a_chart_without_data_says_so():
    svg = str(line_chart("Freshness", [], {}))
    assert "no data yet" in svg


def test_legend_names_never_overlap_however_long():
    """The freshness chart's gold table names once ran into each other."""
    names = ["gold/ad_performance_hourly", "gold/campaign_daily", "gold/actions_10min", "x"]
    svg = line_chart("Freshness", ["a", "b"], {name: [1, 2] for name in names}, " h")
    root = ET.fromstring(str(svg))  # noqa: S314 (our own output)
    ns = "{http://www.w3.org/2000/svg}"
    legend = [t for t in root.findall(f"{ns}text") if t.get("class") == "legend"]
    assert [t.text for t in legend] == names
    spans = sorted(
        (float(t.get("y")), float(t.get("x")), float(t.get("x")) + LEGEND_CHAR_PX * len(t.text))
        for t in legend
    )
    for (y1, _, end), (y2, start, _) in itertools.pairwise(spans):
        assert y1 != y2 or end <= start, spans  # on one line, one after the other
    width = float(root.get("width"))
    assert all(end <= width for _, _, end in spans), spans
    assert float(root.get("height")) >= max(y for y, _, _ in spans) + 4
