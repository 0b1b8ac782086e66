"""Data-quality checkpoints on real tables: clean data passes, each defect is caught by its rule.

One clean pipeline run (module fixture); each defect test copies its tables,
injects one defect the way a bug or a bad manual write would (a Delta commit
through delta-rs), and validates the layer.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from lakehouse.catalog import LAYERS, SOURCES
from lakehouse.drivers.pipeline import run_pipeline, validate_tables
from lakehouse.errors import EXIT_BLOCKED
from lakehouse.quality.derived import DERIVED_CHECKS, RECONCILIATION
from lakehouse.quality.ledger import ledger_path
from lakehouse.quality.results import results_path
from lakehouse.quality.runner import QualityGate
from lakehouse.quality.scopes import pandas_frame
from lakehouse.quality.suite import SQL_RULE, Suite, load_suites
from lakehouse.quality.validate import LAYER_CHECKS, suite_parameters
from lakehouse.reports.outcome import RunOutcome
from lakehouse.samples.generate import GeneratorConfig, generate
from lakehouse.storage.delta import Snapshot
from tests.helpers import delta_count, delta_table, landing_lines, run_cli, settings_for

pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def clean(spark, tmp_path_factory) -> tuple[object, RunOutcome]:
    root = tmp_path_factory.mktemp("clean")
    settings = settings_for(root)
    generate(GeneratorConfig(events=2500, seed=21), settings.landing)
    outcome = run_pipeline(spark, settings, "run-clean", echo=lambda line: None)
    return settings, outcome


def test_clean_data_passes_every_expectation(clean):
    settings, outcome = clean
    assert outcome.status == "passed", [o.message() for c in outcome.checks for o in c.warnings]
    suites = load_suites(parameters=suite_parameters(settings))
    checked = {t.table: len(t.outcomes) for layer in outcome.checks for t in layer.tables}
    assert checked == {table: len(suite.expectations) for table, suite in suites.items()}
    assert [c.layer for c in outcome.checks] == list(LAYERS)


def test_every_outcome_is_kept_in_a_delta_table(clean):
    settings, outcome = clean
    rows = delta_table(results_path(settings)).to_pylist()
    assert len(rows) == sum(len(t.outcomes) for c in outcome.checks for t in c.tables)
    assert {r["run_id"] for r in rows} == {"run-clean"}
    assert all(r["success"] for r in rows)
    assert {r["scope"] for r in rows} == {"new_rows", "partitions", "table"}
    assert {r["severity"] for r in rows} == {"critical", "warning"}
    for row in rows:
        assert (settings.reports / row["docs_page"]).is_file(), row["docs_page"]
    # A first run's new rows are the whole table: counted from the Delta log's statistics.
    for row in rows:
        if row["table_name"] not in DERIVED_CHECKS:
            layer, name = row["table_name"].split("/")
            assert row["rows_checked"] == delta_count(settings.table(layer, name)), row


def test_reconciliation_counts_every_landing_line(clean):
    settings, outcome = clean
    (check,) = [t for c in outcome.checks for t in c.tables if t.table == RECONCILIATION]
    facts = {f["source"]: f for f in check.facts}
    for source in SOURCES:
        lines = len(landing_lines(settings.landing, source))
        assert facts[source]["lines_read"] == lines
        assert facts[source]["bronze_rows"] == delta_count(settings.table("bronze", source))
        assert facts[source]["bronze_rows"] + facts[source]["quarantine_rows"] == lines, source
    ledger = delta_table(ledger_path(settings)).to_pylist()
    assert len({(r["query_id"], r["batch_id"]) for r in ledger}) == len(ledger)


def test_run_summary_numbers_match_the_tables_and_links_resolve(clean):
    settings, outcome = clean
    page = outcome.report
    summary = json.loads(page.with_suffix(".json").read_text())
    assert summary["status"] == "passed"
    for stage in summary["stages"]:
        layer, name = stage["stage"].split("/")
        if name == "user_status":
            continue  # upserts: rows written are inserts plus updates
        for table, rows in stage["rows_out"].items():
            target = settings.table(table if layer == "bronze" else layer, name)
            assert rows == delta_count(target), stage
    by_reason = summary["quarantine_by_reason"]
    for source in SOURCES:
        quarantined = delta_count(settings.table("quarantine", source))
        assert sum(by_reason[source].values()) == quarantined
    assert sum(sum(reasons.values()) for reasons in by_reason.values()) > 0

    text = page.read_text()
    bronze_rows = delta_count(settings.table("bronze", "impressions"))
    assert f"{bronze_rows:,} bronze" in text
    links = re.findall(r'href="([^"]+)"', text)
    assert any("data_docs/validations/" in link for link in links)
    for link in links:
        assert (page.parent / link).resolve().is_file(), link
    index = (settings.reports / "index.html").read_text()
    assert f"runs/{outcome.run_id}.html" in index


def test_report_renders_in_a_browser(clean, tmp_path):
    """Headless Chromium opens the page from disk and renders the numbers."""
    import subprocess

    chromium = shutil.which("chromium")
    if chromium is None:
        # `make test` installs it wherever it can: as root with apt-get (CI's machines).
        if os.geteuid() == 0 and shutil.which("apt-get"):
            pytest.fail("chromium is missing although `make browser` can install it here")
        pytest.skip("Debian's chromium is not installed and cannot be installed without root")
    _, outcome = clean
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    url = outcome.report.as_uri()
    dom = subprocess.run(
        [chromium, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120
    )
    assert "Data-quality checkpoints" in dom.stdout and "passed" in dom.stdout
    shot = tmp_path / "report.png"
    subprocess.run(
        [chromium, *flags, "--window-size=1280,2000", f"--screenshot={shot}", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (1280, 2000)
    assert len(png) > 50_000  # a page of tables, not a blank or error page


# -- defects --------------------------------------------------------------------


def append_rows_like(
    path: Path,
    change: Callable[[dict], dict],
    count: int = 1,
    where: Callable[[dict], bool] = lambda row: True,
) -> list[dict]:
    """Append `count` existing rows (those `where` accepts), each changed by `change`,
    as one Delta commit."""
    table = delta_table(path)
    chosen = [row for row in table.to_pylist() if where(row)][:count]
    rows = [change(dict(row)) for row in chosen]
    write_deltalake(str(path), pa.Table.from_pylist(rows, schema=table.schema), mode="append")
    return rows


# What a defect breaks: the expectation's description, a sample value, the unexpected count.
Defect = tuple[str, str, int]


def duplicate_impression(settings) -> Defect:
    (row,) = append_rows_like(settings.table("silver", "impressions"), lambda r: r)
    return "expect_column_values_to_be_unique(impression_id)", row["impression_id"], 2


def null_click_id(settings) -> Defect:
    append_rows_like(settings.table("silver", "clicks"), lambda r: {**r, "click_id": None})
    return "expect_column_values_to_not_be_null(click_id)", "null", 1


def ctr_above_one(settings) -> Defect:
    append_rows_like(
        settings.table("gold", "ad_performance_hourly"),
        lambda r: {**r, "ad_id": "ad-defect", "impressions": 2, "clicks": 3, "ctr": 1.5},
    )
    return "ctr is between 0 and 1", "1.5", 1


def session_ends_before_start(settings) -> Defect:
    def change(row: dict) -> dict:
        end = row["session_start"] - dt.timedelta(minutes=5)
        return {**row, "session_id": "session-defect", "session_end": end}

    (row,) = append_rows_like(settings.table("silver", "user_sessions"), change)
    end = row["session_end"].astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return "expect_column_pair_values_a_to_be_greater_than_b(session_end, session_start)", end, 1


def dangling_click(settings) -> Defect:
    append_rows_like(
        settings.table("silver", "ad_attribution"),
        lambda r: {**r, "click_id": "click-nowhere"},
        where=lambda r: r["click_id"] is not None,
    )
    return (
        "every attributed click is a click in silver/clicks on this impression",
        "click-nowhere",
        1,
    )


def duplicated_bronze_lines(settings) -> Defect:
    append_rows_like(settings.table("bronze", "clicks"), lambda r: r, count=3)
    # One unexpected row: the clicks source, whose lines_read is 3 short.
    return "every line read is in bronze or in quarantine, exactly once", '"source": "clicks"', 1


DEFECTS = {
    "duplicate key in silver": ("silver", "silver/impressions", duplicate_impression),
    "null key": ("silver", "silver/clicks", null_click_id),
    "ctr out of range": ("gold", "gold/ad_performance_hourly", ctr_above_one),
    "session ends before it starts": ("silver", "silver/user_sessions", session_ends_before_start),
    "dangling click": ("silver", "silver/ad_attribution", dangling_click),
    "reconciliation mismatch": ("bronze", RECONCILIATION, duplicated_bronze_lines),
}
# Rules that a defect breaks besides its own, by construction of the defect.
ALSO_BROKEN = {
    "ctr out of range": {"expect_column_pair_values_a_to_be_greater_than_b(impressions, clicks)"},
}


def copy_tables(settings, tmp_path: Path):
    copy = settings_for(tmp_path / "data")
    shutil.copytree(settings.lakehouse, copy.lakehouse)
    return copy


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_each_defect_fails_its_blocking_expectation(spark, clean, tmp_path, defect):
    layer, table, inject = DEFECTS[defect]
    settings = copy_tables(clean[0], tmp_path)
    description, sample, unexpected = inject(settings)
    outcome = validate_tables(spark, settings, [layer], echo=lambda line: None)
    failed = {(o.table, o.description) for c in outcome.checks for o in c.failures}
    assert (table, description) in failed
    assert {d for _, d in failed} - {description} == ALSO_BROKEN.get(defect, set())
    (failure,) = [o for c in outcome.checks for o in c.failures if o.description == description]
    assert failure.blocking and failure.docs_page and failure.docs_page.is_file()
    assert any(sample in value for value in failure.sample), failure.sample
    found = failure.unexpected_count if failure.unexpected_count is not None else failure.observed
    assert str(found) == str(unexpected)
    assert outcome.status == "failed checks"


# -- the two engines: GX's pandas engine on an Arrow copy, and Spark ---------------------


def hostile(table: pa.Table) -> pa.Table:
    """The rows with the values the engines could tell apart, each column on other rows:
    nulls; NaN, infinity and a negative number; a string with a line break after it,
    markup, upper case; times at the edge of a day and before 1970; a duplicated row."""
    columns = []
    for index, field in enumerate(table.schema):
        values = table.column(index).to_pylist()
        kind, start = field.type, (3 * index) % max(1, len(values) - 4)
        if pa.types.is_floating(kind):
            edits = [None, float("nan"), float("inf"), -1.0]
        elif pa.types.is_integer(kind):
            edits = [None, 0, -1]
        elif pa.types.is_string(kind):
            text = next((v for v in values if v), "x")
            edits = [None, text + "\n", "<b>" + text + "</b>", text.upper()]
        elif pa.types.is_timestamp(kind):
            edits = [
                None,
                dt.datetime(2026, 11, 1, 23, 59, 59, 999999, tzinfo=dt.UTC),
                dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=dt.UTC),
            ]
        else:
            edits = [None]
        for offset, value in enumerate(edits):
            values[(start + offset) % len(values)] = value
        columns.append(pa.array(values, field.type))
    edited = pa.Table.from_arrays(columns, schema=table.schema)
    return pa.concat_tables([edited, edited.slice(0, 1)])


def verdicts(outcomes) -> list[tuple]:
    return sorted((o.scope, o.description, o.success, o.unexpected_count) for o in outcomes)


def test_column_rules_give_the_same_verdicts_on_pandas_and_on_spark(spark, clean, tmp_path):
    """Every suite's column rules, on each table's rows as they are and made hostile."""
    settings = clean[0]
    gate = QualityGate(tmp_path / "docs")
    day_ago = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(days=1)
    parameters = {"fresh_after": day_ago}
    failed = 0
    for table, suite in load_suites(parameters=suite_parameters(settings)).items():
        if table in DERIVED_CHECKS:
            continue
        columns = tuple(e for e in suite.expectations if e["type"] != SQL_RULE)
        rules = Suite(suite.layer, suite.name, columns)
        path = settings.table(suite.layer, suite.name)
        rows = Snapshot(path).files.arrow()
        if not rows.num_rows:
            continue  # gold/campaign_daily: no day has closed yet
        for frame in (rows, hostile(rows)):
            on_spark, on_pandas = [], []
            for scope in ("new_rows", "partitions", "table"):
                on_spark += gate.validate(rules, scope, spark.createDataFrame(frame), parameters)
                on_pandas += gate.validate(rules, scope, pandas_frame(frame), parameters)
            assert verdicts(on_pandas) == verdicts(on_spark), table
            failed += sum(not o.success for o in on_spark)
    assert failed > 20  # the hostile rows broke rules of every kind


def test_checks_on_spark_alone_find_what_the_arrow_copy_finds(spark, clean, tmp_path):
    """The same defects, checked with every row read by Spark from the tables
    (LAKEHOUSE_CHECK_ARROW_MAX_ROWS=0, as for a large increment or on S3)."""
    settings = copy_tables(clean[0], tmp_path)
    null_click_id(settings)
    ctr_above_one(settings)
    dangling_click(settings)
    layers = ["bronze", "silver", "gold"]
    on_arrow = validate_tables(spark, settings, layers, lambda line: None, False)
    spark_only = settings.model_copy(update={"check_arrow_max_rows": 0})
    on_spark = validate_tables(spark, spark_only, layers, lambda line: None, False)
    arrow, spark_read = (
        [o for c in run.checks for t in c.tables for o in t.outcomes]
        for run in (on_arrow, on_spark)
    )
    assert verdicts(arrow) == verdicts(spark_read)
    failed = {o.description for o in spark_read if not o.success}
    assert failed == {
        "expect_column_values_to_not_be_null(click_id)",
        "every attributed click is a click in silver/clicks on this impression",
        "ctr is between 0 and 1",
        "expect_column_pair_values_a_to_be_greater_than_b(impressions, clicks)",
    }


MARKUP = ("<img src=x onerror=alert(document.domain)>", "<script>alert(1)</script>")


def test_data_docs_show_landing_markup_as_text_and_load_no_script(spark, clean, tmp_path):
    """A failed check's sample values reach Data Docs (GX's table template would put
    them in as markup); every page is left without a script or a stylesheet from elsewhere."""
    settings = copy_tables(clean[0], tmp_path)
    impressions = settings.table("silver", "impressions")
    for marked in MARKUP:  # each id twice: the uniqueness check fails and samples them
        append_rows_like(impressions, lambda r, m=marked: {**r, "impression_id": m}, count=2)
    outcome = validate_tables(spark, settings, ["silver"], echo=lambda line: None)
    (failure,) = [o for c in outcome.checks for o in c.failures if o.table == "silver/impressions"]
    assert set(MARKUP) <= set(failure.sample)  # our own record keeps the values as they are
    page = failure.docs_page.read_text()
    for marked in MARKUP:
        assert html.escape(marked) in page
    pages = list((settings.reports / "data_docs").rglob("*.html"))
    assert pages
    for path in pages:
        text = path.read_text()
        assert not any(marked in text for marked in MARKUP), path
        remote = r"<script|<(link[^>]+href|img[^>]+src)=[\"']?(https?:)?//"
        assert not re.search(remote, text, re.I), path


def test_a_warning_is_reported_and_does_not_fail(spark, clean, tmp_path):
    settings = copy_tables(clean[0], tmp_path)
    quarantine = settings.table("quarantine", "impressions")
    DeltaTable(str(quarantine)).update(new_values={"reason": "a brand-new kind of problem"})
    outcome = validate_tables(spark, settings, ["bronze"], echo=lambda line: None)
    (warning,) = [o for c in outcome.checks for o in c.warnings]
    assert warning.table == "quarantine/impressions" and not warning.blocking
    assert warning.description == "every reason is one of the documented reason classes"
    assert warning.unexpected_count == delta_count(quarantine) > 0
    assert outcome.status == "passed with warnings"


@pytest.mark.full
def test_validate_command_names_the_failure_and_exits_non_zero(clean, tmp_path):
    settings = copy_tables(clean[0], tmp_path)
    null_click_id(settings)
    done = run_cli("validate", "--layer", "silver", "--data-root", str(settings.data_root))
    assert done.returncode == EXIT_BLOCKED, done.stderr
    assert "silver/clicks: expect_column_values_to_not_be_null(click_id)" in done.stderr
    assert "1 of" in done.stderr and "sample: null" in done.stderr
    assert "report:" in done.stderr
    assert "checks silver" in done.stdout and "checks gold" not in done.stdout
    passing = run_cli("validate", "--layer", "gold", "--data-root", str(settings.data_root))
    assert passing.returncode == 0, passing.stderr


def test_a_run_checks_keys_on_the_days_its_new_rows_went_to(spark, clean, tmp_path):
    """`partitions` rules see every row of the new rows' days, and only those days."""
    settings = copy_tables(clean[0], tmp_path)
    path = settings.table("silver", "impressions")
    quiet: Callable[[str], None] = lambda line: None  # noqa: E731
    week = dt.timedelta(days=7)

    def week_later(row: dict) -> dict:
        moved = {"event_time": row["event_time"] + week, "event_date": row["event_date"] + week}
        return {**row, **moved, "impression_id": f"later-{row['impression_id']}"}

    append_rows_like(path, week_later, count=10)  # another day, checked and passed
    assert validate_tables(spark, settings, ["silver"], quiet, whole_table=False).status == "passed"

    (copied,) = append_rows_like(path, lambda r: r)  # a redelivery of an old row
    outcome = validate_tables(spark, settings, ["silver"], quiet, whole_table=False)
    (failure,) = [o for c in outcome.checks for o in c.failures]
    assert failure.table == "silver/impressions" and failure.scope == "partitions"
    assert failure.unexpected_count == 2
    rows = delta_table(path).to_pylist()
    same_day = [r for r in rows if r["event_date"] == copied["event_date"]]
    assert failure.rows_checked == len(same_day) <= len(rows) - 10
    (check,) = [t for c in outcome.checks for t in c.tables if t.table == "silver/impressions"]
    assert next(o.rows_checked for o in check.outcomes if o.scope == "new_rows") == 1


# The bronze suites' one rule that depends on the time.
FRESHNESS = "freshness: something was ingested in the last 24 hours"
FRESHNESS_RULE = "expect_column_max_to_be_between"


def test_a_run_with_nothing_new_for_silver_and_gold_starts_no_spark_job(spark, clean):
    """Every silver and gold table is unchanged since it passed and none of their
    rules depends on the time: the run finds that out from the Delta logs alone
    (the last passing versions read with delta-rs) and checks nothing again."""
    settings, _ = clean
    tracker = spark.sparkContext.statusTracker()
    jobs_before = set(tracker.getJobIdsForGroup(None))
    outcome = run_pipeline(
        spark, settings, "run-nothing-new", echo=lambda line: None, layers=["silver", "gold"]
    )
    assert outcome.status == "passed"
    assert outcome.stages and all(stage.caught_up for stage in outcome.stages)
    checked = {
        t.table: (t.since_version, t.version, t.outcomes) for c in outcome.checks for t in c.tables
    }
    assert set(checked) == set(LAYER_CHECKS["silver"] + LAYER_CHECKS["gold"])
    for table, (since, version, outcomes) in checked.items():
        assert since == version and outcomes == [], table
    assert set(tracker.getJobIdsForGroup(None)) <= jobs_before

    # Bronze's freshness rules depend on the time: they run again, and pass, on the
    # newest ingestion time in the Delta log's statistics (GX's pandas engine): no
    # Spark job either. The reconciliation passed last time and no bronze query read
    # anything since: not run again.
    outcome = run_pipeline(spark, settings, "run-nothing-new-bronze", lambda line: None, ["bronze"])
    assert outcome.status == "passed"
    for check in outcome.checks[0].tables:
        if check.table == RECONCILIATION:
            assert check.outcomes == []
        elif check.table.startswith("bronze/"):
            assert check.since_version == check.version, check.table
            assert [o.description for o in check.outcomes if o.success] == [FRESHNESS], check.table
    assert set(tracker.getJobIdsForGroup(None)) <= jobs_before

    # So the command, with nothing new, does not start Spark at all.
    idle = run_cli("run", "--data-root", str(settings.data_root))
    assert idle.returncode == 0, idle.stdout[-3000:] + idle.stderr[-3000:]
    assert "(Spark not started)" in idle.stdout, idle.stdout
    assert "checks bronze                  3/3 passed" in idle.stdout, idle.stdout
    recorded = delta_table(results_path(settings)).to_pylist()
    assert [r["success"] for r in recorded if r["expectation"] == FRESHNESS_RULE][-3:] == [True] * 3


def test_freshness_warns_about_a_source_silent_for_a_day_changed_or_not(spark, clean, tmp_path):
    """The rule warns when the table changed and on each later run where it did not
    (then only the rules that depend on the time run)."""
    settings = copy_tables(clean[0], tmp_path)
    path = settings.table("bronze", "clicks")
    table = delta_table(path)
    ingested = table.schema.get_field_index("_ingested_at")
    two_days_earlier = pc.subtract(table.column(ingested), pa.scalar(dt.timedelta(days=2)))
    write_deltalake(
        str(path),
        table.set_column(ingested, table.schema.field(ingested), two_days_earlier),
        mode="overwrite",
        partition_by=DeltaTable(str(path)).metadata().partition_columns,
    )
    checks = []
    for _ in range(2):
        outcome = validate_tables(spark, settings, ["bronze"], lambda line: None, False)
        assert outcome.status == "passed with warnings"
        (check,) = [t for c in outcome.checks for t in c.tables if t.table == "bronze/clicks"]
        assert FRESHNESS in {o.description for o in check.warnings}
        checks.append(check)
    changed, unchanged = checks
    assert changed.since_version < changed.version == unchanged.since_version == unchanged.version


# -- gating: a blocking failure stops what comes after it --------------------------


def versions(settings, tables: list[str]) -> dict[str, int]:
    return {t: DeltaTable(str(settings.table(*t.split("/")))).version() for t in tables}


def test_blocking_failure_stops_later_queries_until_the_data_is_fixed(spark, clean):
    """Last in this module: it goes on streaming into the clean root."""
    settings, streamed = clean
    assert streamed.status == "passed"
    quiet: Callable[[str], None] = lambda line: None  # noqa: E731

    # A bad manual edit of silver (a duplicate key: blocking) and odd quarantine
    # reasons (a warning), then a new day of events arrives.
    impressions = DeltaTable(str(settings.table("silver", "impressions")))
    first, second = delta_table(settings.table("silver", "impressions")).slice(0, 2).to_pylist()
    impressions.update(
        predicate=f"impression_id = '{second['impression_id']}'",
        new_values={"impression_id": first["impression_id"], "ad_id": "ad-edited"},
    )
    DeltaTable(str(settings.table("quarantine", "impressions"))).update(
        new_values={"reason": "a brand-new kind of problem"}
    )
    start = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
    generate(GeneratorConfig(events=1500, seed=32, start=start), settings.landing)
    downstream = [
        "silver/clicks",
        "silver/user_actions",
        "silver/ad_attribution",
        "silver/user_sessions",
        *(table for table in LAYER_CHECKS["gold"] if table not in DERIVED_CHECKS),
    ]
    before = versions(settings, downstream)
    bronze_before = delta_count(settings.table("bronze", "impressions"))

    blocked = run_pipeline(spark, settings, "run-2", echo=quiet)
    assert blocked.status == "blocked" and blocked.blocked_at == "silver"
    # What reads silver/impressions did not run; silver's other queries did (they read
    # nothing of it), no later layer did.
    assert [s.stage for s in blocked.stages] == [
        "bronze/impressions",
        "bronze/clicks",
        "bronze/user_actions",
        "silver/impressions",
        "silver/clicks",
        "silver/user_actions",
        "silver/user_sessions",
    ]
    assert blocked.not_run == ["silver/ad_attribution", "gold"]
    sessions = "silver/user_sessions"
    assert versions(settings, [sessions])[sessions] > before[sessions]  # the new day's sessions
    downstream = [t for t in downstream[2:] if t != sessions]
    before = {t: before[t] for t in downstream}
    assert versions(settings, downstream) == before
    assert delta_count(settings.table("bronze", "impressions")) > bronze_before
    (warning,) = blocked.checks[0].warnings  # reported, and bronze went on
    assert warning.table == "quarantine/impressions"
    (failure,) = blocked.checks[1].failures
    assert failure.description == "expect_column_values_to_be_unique(impression_id)"
    summary = json.loads(blocked.report.with_suffix(".json").read_text())
    assert summary["status"] == "blocked" and "gold" in summary["not_run"]
    assert "not run: silver/ad_attribution" in blocked.report.read_text()

    # Not fixed: the next run is blocked again at the same place.
    again = run_pipeline(spark, settings, "run-3", echo=quiet)
    assert again.blocked_at == "silver" and versions(settings, downstream) == before

    # Fixed (the edit undone): the run passes and the later queries catch up.
    # Streams skip such non-append commits, so downstream never saw the edit.
    DeltaTable(str(settings.table("silver", "impressions"))).update(
        predicate="ad_id = 'ad-edited'",
        new_values={"impression_id": second["impression_id"], "ad_id": second["ad_id"]},
    )
    fixed = run_pipeline(spark, settings, "run-4", echo=quiet)
    # The odd reasons were reported for the rows that had them; they are not new rows now.
    assert fixed.status == "passed", fixed.status
    after = versions(settings, downstream)
    assert all(after[t] > before[t] for t in downstream), after
    gold = delta_table(settings.table("gold", "actions_10min")).to_pylist()
    assert "2026-11-02" in Counter(str(row["event_date"]) for row in gold)
