"""include.delta, each part on its own, against real Delta tables on disk."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.errors import StreamingQueryException
from pyspark.sql import types as T

from include.delta import (
    DeltaStreamSink,
    merge_upsert,
    read_snapshot,
    read_stream,
    replace_partitions,
)
from include.delta.schema import arrow_schema
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


def rows(start: int, count: int, day: int = 1) -> list[tuple]:
    return [
        (f"id-{i}", BASE + dt.timedelta(minutes=i), dt.date(2026, 11, day), i)
        for i in range(start, start + count)
    ]


def fake_checkpoint(path: Path, query_id: str) -> Path:
    """What Spark writes at query start: the query id in `metadata`."""
    path.mkdir(parents=True)
    (path / "metadata").write_text(json.dumps({"id": query_id}))
    return path


# -- sink -------------------------------------------------------------------------


def test_sink_commits_a_batch_tagged_with_query_and_batch_id(spark, tmp_path):
    table = tmp_path / "t"
    sink = DeltaStreamSink(table, SCHEMA, fake_checkpoint(tmp_path / "cp", "query-1"))
    sink(spark.createDataFrame(rows(0, 10), SCHEMA), 0)
    delta = DeltaTable(str(table))
    assert delta.transaction_version("query-1") == 0
    assert delta_count(table) == 10
    assert sink.rows_written == 10


def test_replayed_batch_id_adds_no_rows(spark, tmp_path):
    table = tmp_path / "t"
    checkpoint = fake_checkpoint(tmp_path / "cp", "query-1")
    sink = DeltaStreamSink(table, SCHEMA, checkpoint)
    sink(spark.createDataFrame(rows(0, 10), SCHEMA), 0)
    version = DeltaTable(str(table)).version()

    # The same batch again, as after a crash, from a new process (a new sink).
    replay = DeltaStreamSink(table, SCHEMA, checkpoint)
    replay(spark.createDataFrame(rows(0, 10), SCHEMA), 0)
    assert DeltaTable(str(table)).version() == version
    assert replay.batches_skipped == 1
    assert delta_count(table) == 10

    replay(spark.createDataFrame(rows(10, 5), SCHEMA), 1)
    assert delta_count(table) == 15
    assert DeltaTable(str(table)).transaction_version("query-1") == 1


def test_empty_batch_commits_nothing(spark, tmp_path):
    table = tmp_path / "t"
    sink = DeltaStreamSink(table, SCHEMA, fake_checkpoint(tmp_path / "cp", "q"))
    version = DeltaTable(str(table)).version()
    sink(spark.createDataFrame([], SCHEMA), 0)
    assert DeltaTable(str(table)).version() == version
    assert not list(table.glob("*.parquet"))


def test_partitioned_sink_writes_hive_folders_and_partition_values(spark, tmp_path):
    table = tmp_path / "t"
    sink = DeltaStreamSink(
        table, SCHEMA, fake_checkpoint(tmp_path / "cp", "q"), partition_by=["day"]
    )
    sink(spark.createDataFrame(rows(0, 4, day=1) + rows(4, 3, day=2), SCHEMA), 0)
    assert sorted(p.name for p in table.glob("day=*")) == ["day=2026-11-01", "day=2026-11-02"]
    actions = delta_table(table)
    assert Counter(actions.column("day").to_pylist()) == {
        dt.date(2026, 11, 1): 4,
        dt.date(2026, 11, 2): 3,
    }
    assert not (table / "_staging").exists() or not any((table / "_staging").iterdir())


def test_written_tables_open_with_deltalake_and_plain_pyarrow(spark, tmp_path):
    table = tmp_path / "t"
    sink = DeltaStreamSink(
        table, SCHEMA, fake_checkpoint(tmp_path / "cp", "q"), partition_by=["day"]
    )
    expected = rows(0, 5)
    sink(spark.createDataFrame(expected, SCHEMA), 0)

    via_delta_rs = delta_table(table)
    assert via_delta_rs.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert sorted(via_delta_rs.column("ts").to_pylist()) == [
        r[1].replace(tzinfo=dt.UTC) for r in expected
    ]

    via_pyarrow = read_with_pyarrow_only(table)
    assert via_pyarrow.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert sorted(via_pyarrow.column("id").to_pylist()) == sorted(r[0] for r in expected)
    assert sorted(via_pyarrow.column("ts").to_pylist()) == [
        r[1].replace(tzinfo=dt.UTC) for r in expected
    ]
    assert set(via_pyarrow.column("day").to_pylist()) == {"2026-11-01"}


# -- snapshot -------------------------------------------------------------------------


def test_read_snapshot_latest_and_earlier_version(spark, tmp_path):
    table = tmp_path / "t"
    sink = DeltaStreamSink(
        table, SCHEMA, fake_checkpoint(tmp_path / "cp", "q"), partition_by=["day"]
    )
    sink(spark.createDataFrame(rows(0, 3, day=1), SCHEMA), 0)
    first = DeltaTable(str(table)).version()
    sink(spark.createDataFrame(rows(3, 2, day=2), SCHEMA), 1)

    latest = read_snapshot(spark, table)
    assert latest.columns == SCHEMA.names
    assert Counter(tuple(r) for r in latest.collect()) == Counter(rows(0, 3, 1) + rows(3, 2, 2))
    earlier = read_snapshot(spark, table, version=first)
    assert Counter(tuple(r) for r in earlier.collect()) == Counter(rows(0, 3, 1))


def test_read_snapshot_of_empty_table(spark, tmp_path):
    table = tmp_path / "t"
    DeltaStreamSink(table, SCHEMA, fake_checkpoint(tmp_path / "cp", "q"))
    frame = read_snapshot(spark, table)
    assert frame.schema.names == SCHEMA.names
    assert frame.count() == 0


# -- streaming source -------------------------------------------------------------------


def append_upstream(table: Path, data: list[tuple]) -> None:
    """An upstream writer that is not us: delta-rs's own append."""
    frame = pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in data])
    write_deltalake(str(table), frame.cast(arrow_schema(SCHEMA)), mode="append")


def stream_once(spark, source: Path, target: Path, checkpoint: Path, **options) -> list:
    """One availableNow run of source -> target; returns the progress of its batches."""
    sink = DeltaStreamSink.__new__(DeltaStreamSink)  # built after start: needs the query id
    query = (
        read_stream(spark, source, **options)
        .writeStream.option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .foreachBatch(lambda batch, batch_id: sink(batch, batch_id))
    )
    sink.__init__(target, SCHEMA, checkpoint)
    running = query.start()
    running.awaitTermination()
    return [p for p in running.recentProgress if p.numInputRows > 0]


def test_stream_delivers_each_appended_row_exactly_once_across_runs(spark, tmp_path):
    source, target, checkpoint = tmp_path / "src", tmp_path / "dst", tmp_path / "cp"
    appended: list[tuple] = []
    for round_number in range(6):
        # Rounds 0-4 append 1-3 commits each; round 5 appends nothing.
        for commit in range(0 if round_number == 5 else 1 + round_number % 3):
            new = rows(len(appended), 7, day=1 + commit)
            append_upstream(source, new)
            appended += new
        before = DeltaTable(str(target)).version() if target.exists() else None
        stream_once(spark, source, target, checkpoint)
        assert delta_rows(target, SCHEMA.names) == Counter(appended), f"round {round_number}"
        if round_number == 5:
            assert DeltaTable(str(target)).version() == before


def test_admission_control_limits_files_per_batch(spark, tmp_path):
    source, target, checkpoint = tmp_path / "src", tmp_path / "dst", tmp_path / "cp"
    for commit in range(5):
        append_upstream(source, rows(commit * 10, 10))
    batches = stream_once(spark, source, target, checkpoint, max_files_per_trigger=2)
    assert [p.numInputRows for p in batches] == [20, 20, 10]
    assert delta_count(target) == 50


def test_non_append_change_fails_clearly_unless_skipped(spark, tmp_path):
    source, target, checkpoint = tmp_path / "src", tmp_path / "dst", tmp_path / "cp"
    append_upstream(source, rows(0, 5))
    stream_once(spark, source, target, checkpoint)
    frame = pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows(100, 2)])
    write_deltalake(str(source), frame.cast(arrow_schema(SCHEMA)), mode="overwrite")

    # delta-rs's first append created the table: version 0; the overwrite is version 1.
    with pytest.raises(StreamingQueryException, match=r"version 1 \(WRITE\) rewrote data"):
        stream_once(spark, source, target, checkpoint)

    append_upstream(source, rows(200, 3))
    stream_once(spark, source, target, checkpoint, skip_change_commits=True)
    assert delta_rows(target, SCHEMA.names) == Counter(rows(0, 5) + rows(200, 3))


def test_compaction_is_not_streamed_again(spark, tmp_path):
    source, target, checkpoint = tmp_path / "src", tmp_path / "dst", tmp_path / "cp"
    for commit in range(4):
        append_upstream(source, rows(commit * 3, 3))
    stream_once(spark, source, target, checkpoint)
    DeltaTable(str(source)).optimize.compact()
    append_upstream(source, rows(100, 2))
    stream_once(spark, source, target, checkpoint)
    assert delta_rows(target, SCHEMA.names) == Counter(rows(0, 12) + rows(100, 2))


def test_stream_of_a_missing_table_fails_clearly(spark, tmp_path):
    with pytest.raises(Exception, match="no readable Delta table"):
        stream_once(spark, tmp_path / "nothing", tmp_path / "dst", tmp_path / "cp")


# -- replace and merge ---------------------------------------------------------------


def partitioned_table(spark, path: Path) -> None:
    sink = DeltaStreamSink(
        path, SCHEMA, fake_checkpoint(path.parent / "cp", "q"), partition_by=["day"]
    )
    sink(spark.createDataFrame(rows(0, 3, 1) + rows(3, 3, 2) + rows(6, 3, 3), SCHEMA), 0)


def test_replace_partitions_swaps_exactly_the_range_in_one_commit(spark, tmp_path):
    table = tmp_path / "t"
    partitioned_table(spark, table)
    version = DeltaTable(str(table)).version()
    new_day_two = rows(50, 2, day=2)
    written = replace_partitions(
        spark.createDataFrame(new_day_two, SCHEMA), table, "day", [dt.date(2026, 11, 2)]
    )
    assert written == 2
    assert DeltaTable(str(table)).version() == version + 1
    assert delta_rows(table, SCHEMA.names) == Counter(rows(0, 3, 1) + new_day_two + rows(6, 3, 3))
    assert Counter(tuple(r) for r in read_snapshot(spark, table).collect()) == Counter(
        rows(0, 3, 1) + new_day_two + rows(6, 3, 3)
    )


def test_replace_partitions_with_no_rows_empties_the_range(spark, tmp_path):
    table = tmp_path / "t"
    partitioned_table(spark, table)
    replace_partitions(
        spark.createDataFrame([], SCHEMA),
        table,
        "day",
        [dt.date(2026, 11, 2), dt.date(2026, 11, 3)],
    )
    assert delta_rows(table, SCHEMA.names) == Counter(rows(0, 3, 1))


def test_replace_partitions_refuses_rows_outside_the_range(spark, tmp_path):
    table = tmp_path / "t"
    partitioned_table(spark, table)
    version = DeltaTable(str(table)).version()
    with pytest.raises(ValueError, match="outside the partitions being replaced"):
        replace_partitions(
            spark.createDataFrame(rows(50, 2, day=3), SCHEMA), table, "day", [dt.date(2026, 11, 2)]
        )
    assert DeltaTable(str(table)).version() == version


def test_replace_partitions_rejects_untyped_values(spark, tmp_path):
    table = tmp_path / "t"
    partitioned_table(spark, table)
    with pytest.raises(ValueError, match="unsupported partition value"):
        replace_partitions(
            spark.createDataFrame([], SCHEMA), table, "day", ["2026-11-02' OR '1'='1"]
        )


STATUS = T.StructType(
    [T.StructField("user_id", T.StringType()), T.StructField("status", T.StringType())]
)


def test_merge_upsert_updates_matches_and_inserts_the_rest(spark, tmp_path):
    table = tmp_path / "status"
    merge_upsert(
        spark.createDataFrame([("u1", "active"), ("u2", "active")], STATUS), table, ["user_id"]
    )
    merge_upsert(
        spark.createDataFrame([("u2", "offline"), ("u3", "active")], STATUS), table, ["user_id"]
    )
    assert delta_rows(table, ["user_id", "status"]) == Counter(
        [("u1", "active"), ("u2", "offline"), ("u3", "active")]
    )


def test_merge_upsert_with_app_transaction_is_idempotent(spark, tmp_path):
    table = tmp_path / "status"
    batch = spark.createDataFrame([("u1", "active")], STATUS)
    merge_upsert(batch, table, ["user_id"], app_id="q", version=0)
    version = DeltaTable(str(table)).version()
    later = spark.createDataFrame([("u1", "offline")], STATUS)
    assert merge_upsert(later, table, ["user_id"], app_id="q", version=0)["skipped"] == 1
    assert DeltaTable(str(table)).version() == version
    merge_upsert(later, table, ["user_id"], app_id="q", version=1)
    assert delta_rows(table, ["user_id", "status"]) == Counter([("u1", "offline")])


def test_merge_upsert_rejects_bad_keys(spark, tmp_path):
    batch = spark.createDataFrame([("u1", "active")], STATUS)
    with pytest.raises(ValueError, match="merge keys"):
        merge_upsert(batch, tmp_path / "status", ["user_id = 1 OR true"])
