"""lakehouse.storage.delta against real Delta tables on disk: writes through Spark's Delta
connector, what streams see of them, and what other engines read back."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.storage.checkpoints import CheckpointError, guard, latest_versions, record_read
from lakehouse.storage.delta import (
    Snapshot,
    append,
    ensure_table,
    merge_upsert,
    read_added_since,
    read_table,
    replace_range,
)
from lakehouse.storage.delta.log import (
    committed_batch,
    rows_written,
    streams_that_wrote,
    unread_commits,
)
from lakehouse.storage.streams import StreamSink, read_stream
from tests.helpers import delta_count, delta_rows, delta_table, read_with_pyarrow_only

SCHEMA = T.StructType(
    [
        T.StructField("id", T.StringType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("day", T.DateType()),
        T.StructField("n", T.LongType()),
    ]
)
BASE = dt.datetime(2026, 11, 1, 12, 0, 0, 123456)
DAY = [None, *(dt.date(2026, 11, d) for d in range(1, 8))]


def rows(start: int, count: int, day: int = 1) -> list[tuple]:
    return [
        (f"id-{i}", BASE + dt.timedelta(days=day - 1, minutes=i), DAY[day], i)
        for i in range(start, start + count)
    ]


def fake_checkpoint(path: Path, query_id: str) -> Path:
    """What Spark writes at query start: the query id in `metadata`."""
    path.mkdir(parents=True)
    (path / "metadata").write_text(json.dumps({"id": query_id}))
    return path


def table_with_days(spark, path: Path, days: range = range(1, 4)) -> None:
    ensure_table(spark, path, SCHEMA, ["day"])
    data = [row for day in days for row in rows(day * 10, 3, day)]
    append(spark.createDataFrame(data, SCHEMA), path, ["day"])


# -- the sink: one commit per micro-batch, whatever replays -------------------------


def test_sink_commits_a_batch_once_across_processes(spark, tmp_path):
    table, checkpoint = tmp_path / "t", fake_checkpoint(tmp_path / "cp", "query-1")
    sink = StreamSink(spark, table, SCHEMA, checkpoint, partition_by=["day"])
    sink(spark.createDataFrame(rows(0, 10), SCHEMA), 0)
    assert committed_batch(table, "query-1") == 0
    assert sink.rows_written == 10
    version = DeltaTable(str(table)).version()

    # The same batch again, as after a crash, from a new process (a new sink).
    replay = StreamSink(spark, table, SCHEMA, checkpoint, partition_by=["day"])
    replay(spark.createDataFrame(rows(0, 10), SCHEMA), 0)
    assert replay.batches_skipped == 1
    assert DeltaTable(str(table)).version() == version
    replay(spark.createDataFrame(rows(10, 5), SCHEMA), 1)
    assert delta_count(table) == 15
    assert streams_that_wrote(table) == {"query-1"}
    assert sorted(p.name for p in table.glob("day=*")) == ["day=2026-11-01"]


def stream_once(spark, source: Path, target: Path, checkpoint: Path, build=None, **options):
    """One availableNow run of source -> (build) -> target through StreamSink."""
    sinks: list[StreamSink] = []

    def write(batch, batch_id):
        if not sinks:
            sinks.append(StreamSink(spark, target, SCHEMA, checkpoint))
        sinks[0](batch, batch_id)

    frame = read_stream(spark, source, **options)
    query = (
        (build(frame) if build else frame)
        .writeStream.option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .foreachBatch(write)
        .start()
    )
    query.awaitTermination()
    return [p for p in query.recentProgress if p.numInputRows > 0]


def test_a_replayed_batch_of_a_stateful_query_is_run_but_not_written_twice(spark, tmp_path):
    """Spark fails a query whose stateful operators did not commit a batch's state."""
    source, target, checkpoint = tmp_path / "src", tmp_path / "dst", tmp_path / "cp"
    table_with_days(spark, source, range(1, 2))

    def dedupe(frame):
        return frame.withWatermark("ts", "1 hour").dropDuplicatesWithinWatermark(["id"])

    stream_once(spark, source, target, checkpoint, dedupe)
    # Forget that the last batch completed (it was committed to the table): the next
    # start runs it again, as after a crash between the Delta commit and Spark's.
    last = max((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
    append(spark.createDataFrame(rows(100, 2, 2), SCHEMA), source, ["day"])
    stream_once(spark, source, target, checkpoint, dedupe)
    assert delta_rows(target, SCHEMA.names) == Counter(rows(10, 3, 1) + rows(100, 2, 2))


# -- streams and the commits of backfills and compactions ---------------------------


def test_streams_skip_backfill_and_compaction_commits_and_read_appends_once(spark, tmp_path):
    source, target, checkpoint = tmp_path / "src", tmp_path / "dst", tmp_path / "cp"
    table_with_days(spark, source)
    stream_once(spark, source, target, checkpoint, skip_change_commits=True)
    version = DeltaTable(str(source)).version()

    # A backfill of a day that held rows, and of a day that held none: neither is new data.
    replace_range(spark.createDataFrame(rows(50, 2, 2), SCHEMA), source, "day", DAY[2], DAY[2])
    replace_range(spark.createDataFrame(rows(60, 2, 5), SCHEMA), source, "day", DAY[5], DAY[5])
    spark.sql(f"OPTIMIZE delta.`{source}`")
    assert unread_commits(source, version) == []
    append(spark.createDataFrame(rows(70, 4, 4), SCHEMA), source, ["day"])
    assert len(unread_commits(source, version)) == 1

    stream_once(spark, source, target, checkpoint, skip_change_commits=True)
    expected = rows(10, 3, 1) + rows(20, 3, 2) + rows(30, 3, 3) + rows(70, 4, 4)
    assert delta_rows(target, SCHEMA.names) == Counter(expected)


def test_rows_written_counts_what_commits_changed_and_nothing_for_compactions(spark, tmp_path):
    """What a table's Asset event says: rows written since a version; None: no data changed."""
    table = tmp_path / "t"
    table_with_days(spark, table)  # 9 rows
    created = DeltaTable(str(table)).version()
    assert rows_written(table, None, created) == 9  # no version before: all its rows
    assert rows_written(table, created, created) is None
    spark.sql(f"OPTIMIZE delta.`{table}`")
    append(spark.createDataFrame([], SCHEMA), table, ["day"])  # an empty micro-batch
    assert rows_written(table, created, DeltaTable(str(table)).version()) is None
    append(spark.createDataFrame(rows(70, 4, 4), SCHEMA), table, ["day"])
    replace_range(spark.createDataFrame(rows(50, 2, 2), SCHEMA), table, "day", DAY[2], DAY[2])
    latest = DeltaTable(str(table)).version()
    assert rows_written(table, created, latest) == 4 + 2
    assert rows_written(table, created, latest - 1) == 4  # up to the version asked for
    status = tmp_path / "status"
    ensure_table(spark, status, STATUS)
    merge_upsert(spark.createDataFrame([("u1", "a"), ("u2", "a")], STATUS), status, ["user_id"])
    before = DeltaTable(str(status)).version()
    merge_upsert(spark.createDataFrame([("u2", "b"), ("u3", "a")], STATUS), status, ["user_id"])
    assert rows_written(status, before, before + 1) == 2  # one updated, one inserted


def test_a_stream_can_start_after_the_latest_version(spark, tmp_path):
    """`lakehouse recover` restarts a stream at the version after its source's latest."""
    source, target, checkpoint = tmp_path / "src", tmp_path / "dst", tmp_path / "cp"
    table_with_days(spark, source)
    start = DeltaTable(str(source)).version() + 1
    assert stream_once(spark, source, target, checkpoint, starting_version=start) == []
    append(spark.createDataFrame(rows(80, 2, 4), SCHEMA), source, ["day"])
    stream_once(spark, source, target, checkpoint, starting_version=start)
    assert delta_rows(target, SCHEMA.names) == Counter(rows(80, 2, 4))


# -- batch writes ---------------------------------------------------------------------


def test_replace_range_swaps_exactly_the_range_in_one_commit(spark, tmp_path):
    table = tmp_path / "t"
    table_with_days(spark, table)
    version = DeltaTable(str(table)).version()
    new_day_two = rows(50, 2, day=2)
    written = replace_range(
        spark.createDataFrame(new_day_two, SCHEMA), table, "day", DAY[2], DAY[3]
    )
    assert written == 2
    assert DeltaTable(str(table)).version() == version + 1
    assert delta_rows(table, SCHEMA.names) == Counter(rows(10, 3, 1) + new_day_two)


def test_replace_range_also_replaces_the_dates_given_beside_it(spark, tmp_path):
    """A backfill's range and the dates it added (other copies of its ids): one commit."""
    table = tmp_path / "t"
    table_with_days(spark, table, range(1, 6))
    version = DeltaTable(str(table)).version()
    new = rows(60, 1, day=2) + rows(70, 2, day=5)
    frame = spark.createDataFrame(new, SCHEMA)
    assert replace_range(frame, table, "day", DAY[2], DAY[3], also=[DAY[5]]) == 3
    assert DeltaTable(str(table)).version() == version + 1
    kept = rows(10, 3, 1) + rows(40, 3, 4)
    assert delta_rows(table, SCHEMA.names) == Counter(kept + new)
    with pytest.raises(Exception, match="DELTA_REPLACE_WHERE_MISMATCH"):  # day 4: not given
        replace_range(
            frame.union(spark.createDataFrame(rows(80, 1, 4), SCHEMA)),
            table,
            "day",
            DAY[2],
            DAY[3],
            also=[DAY[5]],
        )


def test_replace_range_refuses_rows_outside_the_range(spark, tmp_path):
    table = tmp_path / "t"
    table_with_days(spark, table)
    version = DeltaTable(str(table)).version()
    with pytest.raises(Exception, match="DELTA_REPLACE_WHERE_MISMATCH"):
        replace_range(spark.createDataFrame(rows(50, 2, 3), SCHEMA), table, "day", DAY[2], DAY[2])
    assert DeltaTable(str(table)).version() == version


def test_replace_range_takes_dates_and_identifiers_only(spark, tmp_path):
    table = tmp_path / "t"
    table_with_days(spark, table)
    empty = spark.createDataFrame([], SCHEMA)
    with pytest.raises(TypeError, match="dates"):
        replace_range(empty, table, "day", "2026-11-02' OR '1'='1", DAY[2])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="range column"):
        replace_range(empty, table, "day = day OR true", DAY[2], DAY[2])


STATUS = T.StructType(
    [T.StructField("user_id", T.StringType()), T.StructField("status", T.StringType())]
)


def test_merge_upsert_updates_inserts_and_is_idempotent_per_batch(spark, tmp_path):
    table = tmp_path / "status"
    ensure_table(spark, table, STATUS)
    first = spark.createDataFrame([("u1", "active"), ("u2", "active")], STATUS)
    merge_upsert(first, table, ["user_id"], app_id="q", version=0)
    later = spark.createDataFrame([("u2", "offline"), ("u3", "active")], STATUS)
    merge_upsert(later, table, ["user_id"], app_id="q", version=1)
    version = DeltaTable(str(table)).version()
    # Batch 1 again, with other rows: Delta skips it.
    merge_upsert(spark.createDataFrame([("u1", "gone")], STATUS), table, ["user_id"], "q", 1)
    assert DeltaTable(str(table)).version() == version
    assert delta_rows(table, ["user_id", "status"]) == Counter(
        [("u1", "active"), ("u2", "offline"), ("u3", "active")]
    )
    with pytest.raises(ValueError, match="merge keys"):
        merge_upsert(first, table, ["user_id = 1 OR true"])


def test_read_added_since_and_time_travel(spark, tmp_path):
    table = tmp_path / "t"
    table_with_days(spark, table, range(1, 2))
    first = DeltaTable(str(table)).version()
    append(spark.createDataFrame(rows(90, 2, 2), SCHEMA), table, ["day"])
    added = read_added_since(spark, table, first)
    assert Counter(tuple(r) for r in added.collect()) == Counter(rows(90, 2, 2))
    assert read_added_since(spark, table, DeltaTable(str(table)).version()).count() == 0
    assert read_table(spark, table, first).count() == 3
    empty = tmp_path / "empty"
    ensure_table(spark, empty, SCHEMA, ["day"])
    assert read_added_since(spark, empty, 0).count() == 0


def test_read_added_since_skips_files_that_cannot_hold_added_rows(spark, tmp_path):
    """Rows added to an old day, with a late, a null time and a null day, are all
    read; Delta reads only the added files' days, and of their other files only
    those whose times reach the earliest added one."""
    table = tmp_path / "t"
    table_with_days(spark, table, range(1, 5))  # day 2: minutes 20 to 22
    before = DeltaTable(str(table)).version()
    append(spark.createDataFrame(rows(0, 3, 2), SCHEMA), table, ["day"])  # day 2: minutes 0 to 2
    first = DeltaTable(str(table)).version()
    earlier = Snapshot(table, first).gained_since(before).names
    added_rows = [
        ("late", BASE + dt.timedelta(days=1, minutes=10), DAY[2], 1),
        ("untimed", None, DAY[2], 2),
        ("undated", BASE + dt.timedelta(days=1, minutes=15), None, 3),
    ]
    append(spark.createDataFrame(added_rows, SCHEMA), table, ["day"])
    added = read_added_since(spark, table, first)
    assert Counter(tuple(r) for r in added.collect()) == Counter(added_rows)
    read = [Path(uri) for uri in added.inputFiles()]
    assert {uri.parent.name for uri in read} == {"day=2026-11-02", "day=__HIVE_DEFAULT_PARTITION__"}
    assert not earlier & {uri.name for uri in read}


# -- other engines read what we write --------------------------------------------------


def test_tables_use_no_feature_other_readers_lack(spark, tmp_path):
    """Reader 1, writer 2, no table features: every Delta reader reads them."""
    table = tmp_path / "t"
    table_with_days(spark, table)
    status = tmp_path / "status"
    ensure_table(spark, status, STATUS)
    merge_upsert(spark.createDataFrame([("u1", "active")], STATUS), status, ["user_id"], "q", 0)
    replace_range(spark.createDataFrame(rows(50, 1, 2), SCHEMA), table, "day", DAY[2], DAY[2])
    for path in (table, status):
        protocol = DeltaTable(str(path)).protocol()
        assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)
        assert not protocol.reader_features and not protocol.writer_features
    assert DeltaTable(str(table)).metadata().configuration == {
        "delta.isolationLevel": "Serializable",
        "delta.dataSkippingStatsColumns": "ts",
    }
    assert DeltaTable(str(status)).metadata().configuration == {
        "delta.isolationLevel": "Serializable",
        "delta.dataSkippingNumIndexedCols": "0",
    }


def test_files_record_row_counts_and_the_range_of_times_only(spark, tmp_path):
    table = tmp_path / "t"
    table_with_days(spark, table)
    files = pa.table(DeltaTable(str(table)).get_add_actions(flatten=True)).to_pylist()
    assert sum(f["num_records"] for f in files) == 9
    assert all(f["min.ts"] is not None and f["max.ts"] is not None for f in files)
    assert not any(key.startswith(("min.id", "min.n", "max.id", "max.n")) for key in files[0])

    # A table made before statistics were chosen keeps its own; it is not altered.
    older = tmp_path / "older"
    spark.createDataFrame(rows(0, 2), SCHEMA).write.format("delta").save(str(older))
    ensure_table(spark, older, SCHEMA)
    append(spark.createDataFrame(rows(2, 2), SCHEMA), older)
    assert "delta.dataSkippingStatsColumns" not in DeltaTable(str(older)).metadata().configuration
    assert delta_count(older) == 4


def test_other_engines_read_the_same_rows(spark, tmp_path):
    table = tmp_path / "t"
    table_with_days(spark, table)
    replace_range(spark.createDataFrame(rows(50, 2, 2), SCHEMA), table, "day", DAY[2], DAY[2])
    spark_rows = sorted((r.id, r.ts, r.day, r.n) for r in read_table(spark, table).collect())
    via_delta_rs = delta_table(table)
    assert via_delta_rs.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    # DuckDB on deltalake's Arrow output (its delta extension cannot be downloaded here).
    arrow = via_delta_rs  # noqa: F841 (DuckDB finds the local variable by name)
    from_duckdb = duckdb.sql(
        "SELECT id, timezone('UTC', ts) AS ts, day, n FROM arrow ORDER BY id"
    ).fetchall()
    assert sorted(from_duckdb) == spark_rows
    by_hand = read_with_pyarrow_only(table)
    assert sorted(by_hand.column("id").to_pylist()) == [r[0] for r in spark_rows]
    assert sorted(r.replace(tzinfo=None) for r in by_hand.column("ts").to_pylist()) == sorted(
        r[1] for r in spark_rows
    )
    total = read_table(spark, table).agg(F.sum("n")).collect()[0][0]
    assert total == sum(r[3] for r in spark_rows)


def test_a_table_restored_below_what_its_stream_recorded_is_refused(spark, tmp_path):
    """Delta RESTORE or a copied backup takes rows away from under a stream: refused."""
    source, sink = tmp_path / "bronze" / "clicks", tmp_path / "silver" / "clicks"
    for table in (source, sink):
        ensure_table(spark, table, SCHEMA, ["day"])
        for day in (1, 2, 3):  # versions 1, 2, 3
            append(spark.createDataFrame(rows(0, 2, day), SCHEMA), table, ["day"])
    backup = tmp_path / "backup"
    shutil.copytree(sink, backup)
    append(spark.createDataFrame(rows(0, 2, 4), SCHEMA), sink, ["day"])  # version 4
    checkpoint = tmp_path / "checkpoint"
    record_read(checkpoint, latest_versions([source]), latest_versions([sink]))
    guard(checkpoint, "silver/clicks", [sink])  # in step: no complaint

    spark.sql(f"RESTORE TABLE delta.`{source}` TO VERSION AS OF 1")
    with pytest.raises(CheckpointError) as refused:
        guard(checkpoint, "silver/clicks", [sink])
    message = str(refused.value)
    assert f"{source} was restored to version 1 (Delta RESTORE, committed as version 4)" in message
    assert "older than version 3 that the stream had read" in message
    assert "lakehouse recover --layer silver" in message

    record_read(checkpoint, latest_versions([source]))  # the stream read past the restore
    guard(checkpoint, "silver/clicks", [sink])
    shutil.rmtree(sink)
    shutil.copytree(backup, sink)
    with pytest.raises(
        CheckpointError,
        match=r"is at version 3, older than version 4 that the "
        r"stream had written at its last run \(a backup copied over it\?\)",
    ):
        guard(checkpoint, "silver/clicks", [sink])
