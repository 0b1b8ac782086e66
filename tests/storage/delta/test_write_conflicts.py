"""Writers on different hosts: Delta's optimistic concurrency, not our lock, keeps them apart.

The writer lock (`flock`) serialises writers on one host. Two hosts sharing a
data root rely on Delta's conflict detection: a backfill that replaces a date
range while another process appends to that range must fail with Delta's
conflict error and a message saying what to do, never leave the appended rows
beside the recomputed ones. Two real processes, no lock.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest

from tests.helpers import REPO, delta_rows

pytestmark = pytest.mark.system

SETUP = """
import datetime as dt, os, sys
from pathlib import Path
from pyspark.sql import functions as F, types as T
from lakehouse.storage.delta import append, ensure_table, replace_range
from lakehouse.runtime.settings import Settings
from lakehouse.runtime.spark import get_spark

SCHEMA = T.StructType(
    [T.StructField("id", T.StringType()), T.StructField("event_date", T.DateType())]
)
DAY = dt.date(2026, 11, 2)
table, signals = Path(sys.argv[1]), Path(sys.argv[2])
spark = get_spark(Settings.load(data_root=signals), app_name="race", for_tests=True)
def rows(*ids, day=DAY):
    return spark.createDataFrame([(i, day) for i in ids], SCHEMA)
"""

BACKFILL = """
ensure_table(spark, table, SCHEMA, ["event_date"])
append(rows("old-1"), table, ["event_date"])
append(rows("other-day", day=DAY - dt.timedelta(days=1)), table, ["event_date"])

@F.udf("string")
def after_the_append(value):
    # The backfill's rows are computed while the other writer commits.
    import time
    (signals / "computing").touch()
    while not (signals / "appended").exists():
        time.sleep(0.1)
    return value

recomputed = rows("new-1", "new-2").withColumn("id", after_the_append("id")).coalesce(1)
try:
    replace_range(recomputed, table, "event_date", DAY, DAY)
except Exception as error:
    print(f"{type(error).__name__}: {error}")
    sys.exit(1)
print("replaced")
"""

APPEND = """
append(rows("streamed-1"), table, ["event_date"], app_id="stream-on-another-host", version=0)
(signals / "appended").touch()
print("appended")
"""


def python(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SETUP + script), *map(str, args)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.mark.full  # concurrent writers
def test_a_backfill_racing_an_append_to_its_range_fails_and_changes_nothing(tmp_path):
    table, signals = tmp_path / "silver_impressions", tmp_path / "signals"
    signals.mkdir()
    backfill = python(BACKFILL, table, signals)
    try:
        deadline = time.monotonic() + 300
        while not (signals / "computing").exists():
            assert backfill.poll() is None, backfill.communicate()
            assert time.monotonic() < deadline, "the backfill never started computing"
            time.sleep(0.2)
        appender = python(APPEND, table, signals)
        _, append_err = appender.communicate(timeout=300)
        assert appender.returncode == 0, append_err[-3000:]
        out, err = backfill.communicate(timeout=300)
    finally:
        backfill.kill()

    assert backfill.returncode == 1, out + err[-3000:]
    assert "ConcurrentWriteError" in out
    assert "another writer committed to event_date 2026-11-02..2026-11-02" in out
    assert "DELTA_CONCURRENT_APPEND" in out
    assert "Nothing was replaced" in out and "run the backfill again" in out
    # The streamed row stays beside the rows the backfill would have replaced, not
    # beside its recomputation: the table is as if the backfill never ran.
    assert delta_rows(table, ["id"]) == Counter([("old-1",), ("other-day",), ("streamed-1",)])
