"""Late data is reprocessed, not forgotten (docs/contract.md, section 8).

Two days of events stream in; then events of the first day's first hour
arrive, far below every watermark: the streams drop them. `lakehouse
backfill --pending` names that date and recomputes it, leaving its rows equal
to a backfill of everything; run again, it finds nothing and commits nothing.
The same holds when the run that dropped them is killed at any point of its
commits.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import signal
from pathlib import Path

import pytest

from lakehouse.catalog import EVENT_DATE, SOURCES
from lakehouse.samples.generate import GeneratorConfig, generate
from lakehouse.storage.delta.log import latest_version
from tests.helpers import TABLE_NAMES, delta_table, run_cli, run_in_process, settings_for

pytestmark = pytest.mark.system

LATE_DAY = dt.date(2026, 11, 1)


def late_lines(tag: str = "late") -> dict[str, str]:
    """New events of 2026-11-01 00:05-00:35 (UTC) per source, as landing lines; their
    ids start with `tag`."""
    lines: dict[str, list[str]] = {"impressions": [], "clicks": [], "user_actions": []}
    for n in range(30):
        moment = dt.datetime(2026, 11, 1, 0, 5 + n, tzinfo=dt.UTC).isoformat()
        impression = {
            "impression_id": f"{tag}-i{n}",
            "ad_id": f"ad-{tag}{n % 3}",
            "campaign_id": f"camp-{tag}",
            "user_id": f"{tag}-u{n}",
            "event_time": moment,
        }
        lines["impressions"].append(json.dumps(impression))
        if n % 3 == 0:
            click = {
                "click_id": f"{tag}-c{n}",
                "impression_id": f"{tag}-i{n}",
                "ad_id": impression["ad_id"],
                "user_id": f"{tag}-u{n}",
                "event_time": moment,
            }
            lines["clicks"].append(json.dumps(click))
        action = {
            "event_id": f"{tag}-e{n}",
            "user_id": f"{tag}-u{n}",
            "action": "view",
            "event_time": moment,
        }
        lines["user_actions"].append(json.dumps(action))
    return {source: "\n".join(rows) + "\n" for source, rows in lines.items()}


def write_late_arrivals(root: Path, tag: str = "late", sources: tuple[str, ...] = ()) -> None:
    """Late events of every source (or of `sources`) in new landing files."""
    for source, text in late_lines(tag).items():
        if not sources or source in sources:
            (root / "landing" / source / f"{tag}-arrivals.jsonl").write_text(text)


def assert_late_day_as_everything(
    ours: Path, scratch: Path, days: tuple[dt.date, ...] = (LATE_DAY,)
) -> None:
    """Every table's rows of the late day (or of `days`) equal those of a backfill of
    everything (on a copy of the data root in `scratch`)."""
    everything = scratch / "everything"
    shutil.copytree(ours, everything)
    full = run_in_process(
        "backfill", "--start", "2026-11-01", "--end", "2026-11-03", "--data-root", str(everything)
    )
    assert full.returncode == 0, full.stderr
    mine, reference = settings_for(ours), settings_for(everything)
    for layer, name in TABLE_NAMES:
        for day in days:
            assert rows_of_day(mine.table(layer, name), day) == rows_of_day(
                reference.table(layer, name), day
            ), f"{layer}/{name} {day}"


def latest_report(root: Path) -> Path:
    """The JSON summary of the newest run report."""
    return max((root / "reports" / "runs").glob("*.json"), key=lambda p: p.stat().st_mtime)


def versions(root: Path) -> dict[str, int]:
    tables = sorted(p.parent for p in (root / "lakehouse").glob("*/*/_delta_log"))
    return {str(t.relative_to(root)): latest_version(t) for t in tables}


def rows_of_day(path: Path, day: dt.date) -> list[str]:
    rows = delta_table(path).to_pylist()
    if rows and EVENT_DATE in rows[0]:
        rows = [row for row in rows if row[EVENT_DATE] == day]
    return sorted(json.dumps(row, default=str, sort_keys=True) for row in rows)


# The on-time second copies of late ids: after every generated event, two days after the
# late day (beyond the neighbouring days a check of other tables sees).
SECOND_DAY = dt.date(2026, 11, 3)
COPIED = {"impressions": "late-i0", "clicks": "late-c0", "user_actions": "late-e0"}


def write_second_copies(root: Path) -> None:
    """A later copy of one late id per source, with another event time (on the third
    day, after every generated event: not late)."""
    for source, text in late_lines().items():
        first = json.loads(text.splitlines()[0])
        first["event_time"] = "2026-11-03T06:00:00+00:00"
        assert COPIED[source] in first.values()
        (root / "landing" / source / "second-copies.jsonl").write_text(json.dumps(first) + "\n")


def dates_of(root: Path, source: str) -> list[dt.date]:
    """The dates silver holds the copied id of `source` on."""
    rows = delta_table(settings_for(root).table("silver", source)).to_pylist()
    key = SOURCES[source].key
    return sorted(row[EVENT_DATE] for row in rows if row[key] == COPIED[source])


def assert_a_second_date_of_an_id_fails_the_check(spark, root: Path, copy: Path) -> None:
    """On a copy of `root`: the first copy of `late-i0` written on its own date beside
    the second (what `--pending` did before it widened its dates) fails silver's checks
    of the new rows, though each date alone holds the id once."""
    from pyspark.sql import functions as F

    from lakehouse.storage.delta import read_table

    shutil.copytree(root, copy)
    settings = settings_for(copy)
    table = settings.table("silver", "impressions")
    columns = read_table(spark, table).columns
    first = (
        read_table(spark, settings.table("bronze", "impressions"))
        .where(F.col("impression_id") == COPIED["impressions"])
        .withColumn(EVENT_DATE, F.to_date("event_time"))
        .where(F.col(EVENT_DATE) == LATE_DAY)
        .select(*columns)
    )
    first.write.format("delta").mode("append").save(str(table))
    checked = run_in_process(
        "validate", "--layer", "silver", "--new-rows", "--data-root", str(copy)
    )
    assert checked.returncode == 3, checked.stdout + checked.stderr
    failed = [line for line in checked.stdout.splitlines() if "BLOCKING" in line]
    assert len(failed) == 1, checked.stdout
    assert "no impression_id of the new rows is also on another date" in failed[0]


def test_backfill_pending_recomputes_the_dates_of_late_rows_once(spark, tmp_path):
    """The commands run in this process (`run_in_process`), on the tests' Spark session.

    The late ids get second copies, on time, on the second day: the first copy of an
    id arrived after the watermark (dropped, kept in bronze), the second is kept by
    the stream. Whichever backfill touches either date, `--pending` or either date
    alone, recomputes both: afterwards the id is once in silver, on its first copy's
    date."""
    root = tmp_path / "data"
    generate(GeneratorConfig(events=2000, seed=31, days=2, late_rate=0.0), root / "landing")
    first = run_in_process("run", "--data-root", str(root))
    assert first.returncode == 0, first.stderr
    settled = run_in_process("backfill", "--pending", "--data-root", str(root))  # whatever was late
    assert settled.returncode == 0, settled.stderr

    write_late_arrivals(root)
    late_run = run_in_process("run", "--data-root", str(root))
    assert late_run.returncode == 0, late_run.stderr
    assert "late 30," in late_run.stdout  # silver/impressions dropped every one
    # A warning, not a failure: it names the query, the share and the way back.
    warning = (
        "warning  silver/late_drops: not met (table): no query drops more than 5% of its "
        "input as late "
        "(recover the rows: lakehouse backfill --pending)"
    )
    assert warning in late_run.stdout, late_run.stdout
    assert "silver/impressions dropped 100.0% of its input as late (30 of 30 rows)" in (
        late_run.stdout
    )
    report = json.loads(latest_report(root).read_text())
    assert report["status"] == "passed with warnings"
    (late_drops,) = [
        t for c in report["checks"] for t in c["tables"] if t["table"] == "silver/late_drops"
    ]
    assert {f["query"]: f["dropped_late"] for f in late_drops["facts"]}["silver/impressions"] == 30
    page = latest_report(root).with_suffix(".html").read_text()
    assert "silver/impressions dropped 100.0% of its input as late" in page

    write_second_copies(root)
    copies_run = run_in_process("run", "--data-root", str(root))
    assert copies_run.returncode == 0, copies_run.stdout + copies_run.stderr
    for source in COPIED:
        assert dates_of(root, source) == [SECOND_DAY], source
    alone = {day: tmp_path / f"alone-{day}" for day in (LATE_DAY, SECOND_DAY)}
    for day, copy in alone.items():
        shutil.copytree(root, copy)
        done = run_in_process(
            "backfill", "--start", str(day), "--end", str(day), "--data-root", str(copy)
        )
        assert done.returncode == 0, done.stderr
        other = SECOND_DAY if day == LATE_DAY else LATE_DAY
        assert f"also 1 date(s) holding other copies of their event ids: {other}" in done.stdout

    assert_a_second_date_of_an_id_fails_the_check(spark, root, tmp_path / "two-dates")

    pending = run_in_process("backfill", "--pending", "--data-root", str(root))
    assert pending.returncode == 0, pending.stderr
    assert f"date(s): {LATE_DAY}" in pending.stdout, pending.stdout
    assert "2026-11-02" not in pending.stdout.splitlines()[0]
    assert f"event ids: {SECOND_DAY}" in pending.stdout, pending.stdout
    # The backfill's report names the dates and what it wrote to each table.
    backfill = json.loads(latest_report(root).read_text())
    assert (backfill["command"], backfill["dates"]) == (
        "backfill",
        f"pending: {LATE_DAY}, and {SECOND_DAY}",
    )
    written = {s["stage"]: sum(s["rows_out"].values()) for s in backfill["stages"]}
    assert written["silver/impressions"] > 30 and all(s["batch"] for s in backfill["stages"])
    assert "wrote " in pending.stdout and " in 0 " not in pending.stdout
    for data_root in (root, *alone.values()):
        for source in COPIED:
            assert dates_of(data_root, source) == [LATE_DAY], (data_root, source)

    # Both dates now hold what a backfill of everything gives them.
    assert_late_day_as_everything(root, tmp_path, days=(LATE_DAY, SECOND_DAY))
    impressions = rows_of_day(settings_for(root).table("silver", "impressions"), LATE_DAY)
    assert sum('"late-i' in row for row in impressions) == 30

    # Nothing is pending any more: nothing recomputed, no table committed to.
    before = versions(root)
    again = run_in_process("backfill", "--pending", "--data-root", str(root))
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stdout
    assert versions(root) == before


# Where a silver run that drops late rows is killed (src/lakehouse/faults.py): the first
# stream (silver/impressions) after its first micro-batch's write is committed and
# before Spark's commit file; after its last batch, before the late dates are
# recorded; after they are recorded, before the checkpoint's sidecar moves on.
KILL_POINTS = ("write.after_commit", "stream.after_query", "stream.before_sidecar")


@pytest.mark.full  # a whole run per kill point
def test_a_run_killed_anywhere_in_its_commits_leaves_the_late_date_pending(spark, tmp_path):
    """Per kill point, new late impressions; the run that drops them is a real `lakehouse
    run --layer silver` process SIGKILLed there. The other commands run in this process."""
    root = tmp_path / "data"
    generate(GeneratorConfig(events=600, seed=37, days=2, late_rate=0.0), root / "landing")
    for command in (("run",), ("backfill", "--pending")):
        done = run_in_process(*command, "--data-root", str(root))
        assert done.returncode == 0, done.stderr

    for n, point in enumerate(KILL_POINTS):
        tag = f"killed{n}"
        write_late_arrivals(root, tag, ("impressions",))  # the date is late for no other stream
        bronze = run_in_process("run", "--layer", "bronze", "--data-root", str(root))
        assert bronze.returncode == 0, bronze.stderr
        killed = run_cli(
            "run", "--layer", "silver", "--data-root", str(root), env={"LAKEHOUSE_CRASH_AT": point}
        )
        assert killed.returncode == -signal.SIGKILL, (point, killed.stdout, killed.stderr)
        rerun = run_in_process("run", "--data-root", str(root))
        assert rerun.returncode == 0, (point, rerun.stdout, rerun.stderr)
        pending = run_in_process("backfill", "--pending", "--data-root", str(root))
        assert pending.returncode == 0, (point, pending.stderr)
        assert f"date(s): {LATE_DAY}" in pending.stdout.splitlines()[0], (point, pending.stdout)
        impressions = rows_of_day(settings_for(root).table("silver", "impressions"), LATE_DAY)
        assert sum(f'"{tag}-i' in row for row in impressions) == 30, point

    assert_late_day_as_everything(root, tmp_path)


@pytest.mark.full
def test_dates_years_apart_cost_what_they_hold(tmp_path):
    """Bronze holds 2016-03-01 and 2026-11-01: a backfill, `recover` and `parity` over the
    decade between process those two dates, in one pass each."""
    root = tmp_path / "data"
    for start in (dt.datetime(2016, 3, 1, tzinfo=dt.UTC), dt.datetime(2026, 11, 1, tzinfo=dt.UTC)):
        generate(
            GeneratorConfig(events=300, seed=start.year, start=start, late_rate=0.0),
            root / "landing",
        )
    assert run_cli("run", "--data-root", str(root)).returncode == 0
    span = ["--start", "2016-01-01", "--end", "2026-12-31", "--data-root", str(root)]

    backfill = run_cli("backfill", *span)
    assert backfill.returncode == 0, backfill.stderr
    recover = run_cli("recover", "--layer", "gold", "--data-root", str(root))
    assert recover.returncode == 0, recover.stderr
    rebuilt = [line for line in recover.stdout.splitlines() if "rebuilt by backfill" in line]
    assert len(rebuilt) == 3 and all("2016-03-01..2026-11-01" in line for line in rebuilt)
    assert run_cli("run", "--data-root", str(root)).returncode == 0
    parity = run_cli("parity", *span)
    assert parity.returncode == 0, parity.stdout
    dates = {
        row["event_date"]
        for row in delta_table(settings_for(root).table("silver", "impressions")).to_pylist()
    }
    assert {d.year for d in dates} == {2016, 2026}
