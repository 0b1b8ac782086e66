"""Event-time semantics of the streaming transforms, as Spark's own suites test them.

Each test feeds rows into Delta tables step by step; after each step an
`availableNow` run processes what arrived, with state and watermark carried
in the checkpoint between runs, as in production.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.catalog import SOURCES
from lakehouse.catalog.schemas import bronze_schema, table_schema
from lakehouse.drivers.streaming import run_available_now
from lakehouse.runtime.progress import StageResult
from lakehouse.storage.checkpoints import CheckpointError, reads_input
from lakehouse.storage.delta import append, ensure_table
from lakehouse.storage.delta.log import STREAM_KEY, open_table
from lakehouse.storage.streams import StreamSink, read_stream
from lakehouse.transforms.gold import actions_per_window
from lakehouse.transforms.silver import attribute_clicks, dedupe_events
from lakehouse.transforms.user_state import USER_BUCKETS, sessionize_user_actions, track_user_status
from tests.helpers import delta_rows

T0 = dt.datetime(2026, 11, 1, 10, 0)
_ids = itertools.count()


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


class Harness:
    """Input Delta tables -> transform -> output Delta table, one availableNow run per step."""

    def __init__(
        self,
        spark,
        root: Path,
        inputs: dict[str, T.StructType],
        build: Callable[[dict[str, DataFrame]], DataFrame],
        output_schema: T.StructType,
        merge_keys: list[str] | None = None,
        name: str = "test/harness",
        **sink: object,
    ) -> None:
        self.spark, self.root, self.inputs, self.name = spark, root, inputs, name
        self.output = root / "output"
        for name, schema in inputs.items():
            ensure_table(spark, root / name, schema)
        frames = {name: read_stream(spark, root / name) for name in inputs}
        self.frame = build(frames)
        self.sink = StreamSink(
            spark,
            self.output,
            output_schema,
            root / "checkpoint",
            merge_keys=merge_keys or [],
            **sink,
        )
        self.output_mode = "update" if merge_keys else "append"

    def add(self, name: str, rows: list[dict]) -> Harness:
        schema = self.inputs[name]
        frame = self.spark.createDataFrame(
            [tuple(row.get(field) for field in schema.names) for row in rows], schema
        )
        append(frame, self.root / name)
        return self

    def run(self) -> StageResult:
        return run_available_now(
            self.name,
            lambda: self.frame,
            self.root / "checkpoint",
            self.sink,
            [self.output],
            self.output_mode,
            sources=[self.root / name for name in self.inputs],
        )

    def batches(self) -> list[int]:
        """Every micro-batch the query planned, and whether each read input."""
        offsets = self.root / "checkpoint" / "offsets"
        return sorted(int(p.name) for p in offsets.iterdir() if p.name.isdigit())

    def batches_read_input(self) -> list[int]:
        return [b for b in self.batches() if reads_input(self.root / "checkpoint", self.name, b)]

    def committed_batches(self) -> list[int]:
        """The micro-batches the output table has a commit of."""
        found = []
        for commit in open_table(self.output).history():
            metadata = json.loads(commit.get("userMetadata") or "{}")
            if STREAM_KEY in metadata:
                found.append(int(metadata["batchId"]))
        return sorted(found)

    def rows(self, *columns: str) -> set[tuple]:
        if not (self.output / "_delta_log").exists():
            return set()
        found = delta_rows(self.output, list(columns))
        assert all(count == 1 for count in found.values()), f"duplicates in output: {found}"
        return set(found)


def with_date(row: dict, time_field: str = "event_time") -> dict:
    return {**row, "event_date": row[time_field].date()}


def impression(impression_id: str, minutes: float) -> dict:
    return with_date(
        {
            "impression_id": impression_id,
            "ad_id": "ad-1",
            "campaign_id": "c-1",
            "user_id": "u-1",
            "event_time": at(minutes),
        }
    )


def click(impression_id: str, minutes: float, click_id: str | None = None) -> dict:
    return with_date(
        {
            "click_id": click_id or f"k{next(_ids)}",
            "impression_id": impression_id,
            "ad_id": "ad-1",
            "user_id": "u-1",
            "event_time": at(minutes),
        }
    )


def user_action(minutes: float, action: str = "view", user: str = "u-1") -> dict:
    return with_date(
        {"event_id": f"e{next(_ids)}", "user_id": user, "action": action, "event_time": at(minutes)}
    )


def actions_harness(
    spark,
    root: Path,
    transform: Callable[[DataFrame], DataFrame],
    output_schema: T.StructType,
    merge_keys: list[str] | None = None,
) -> Harness:
    """A harness fed with deduplicated user actions (silver/user_actions)."""
    return Harness(
        spark,
        root,
        {"actions": table_schema("silver/user_actions")},
        lambda frames: frames["actions"].transform(transform),
        output_schema,
        merge_keys,
    )


BRONZE_IMPRESSIONS = bronze_schema(SOURCES["impressions"])


def bronze(row: dict, file: str = "f.jsonl", line: int | None = None) -> dict:
    return {**row, "_ingested_at": at(0), "_source_file": file, "_source_line": line}


# -- deduplication ------------------------------------------------------------------------


def deduplicated(spark, root: Path, name: str = "test/harness") -> Harness:
    """silver/impressions from bronze rows, written as the driver writes it."""
    return Harness(
        spark,
        root,
        {"bronze": BRONZE_IMPRESSIONS},
        lambda f: f["bronze"].transform(dedupe_events("impressions")),
        table_schema("silver/impressions"),
        name=name,
        each_batch=dedupe_events("impressions"),
        insert_new_keys=["impression_id"],
    )


def test_dedup_drops_redeliveries_and_events_later_than_the_watermark(spark, tmp_path):
    h = deduplicated(spark, tmp_path)
    lines = [impression("a", 0), impression("a", 0), impression("b", 5)]
    h.add("bronze", [bronze(row, line=n) for n, row in enumerate(lines, start=1)])
    h.run()
    assert h.rows("impression_id") == {("a",), ("b",)}

    # A redelivery of "a" within the watermark (2 h), in another file: not a second row.
    h.add("bronze", [bronze(impression("a", 0), "g.jsonl", 1), bronze(impression("c", 180))])
    h.run()
    assert h.rows("impression_id") == {("a",), ("b",), ("c",)}

    # Max event time 3:00 -> watermark 1:00; "d" at 0:30 is late: dropped, counted.
    h.add("bronze", [bronze(impression("d", 30)), bronze(impression("e", 170))])
    result = h.run()
    assert h.rows("impression_id") == {("a",), ("b",), ("c",), ("e",)}
    assert result.dropped_late == 1


def test_an_incompatible_change_to_a_stateful_query_names_the_checkpoint_and_the_recovery(
    spark, tmp_path
):
    """Deduplicating on other keys after a release: Spark refuses the old state, and
    the error says which checkpoint and which command recovers."""
    source = SOURCES["impressions"]

    def dedupe_on_two_keys(events: DataFrame) -> DataFrame:
        unique = events.withWatermark("event_time", "2 hours").dropDuplicatesWithinWatermark(
            ["impression_id", "ad_id"]
        )
        return unique.select(*source.fields, F.to_date("event_time").alias("event_date"))

    deduplicated(spark, tmp_path, "silver/impressions").add(
        "bronze", [bronze(impression("a", 0))]
    ).run()
    changed = Harness(
        spark,
        tmp_path,
        {"bronze": BRONZE_IMPRESSIONS},
        lambda f: f["bronze"].transform(dedupe_on_two_keys),
        table_schema("silver/impressions"),
        name="silver/impressions",
    ).add("bronze", [bronze(impression("b", 5))])
    with pytest.raises(CheckpointError) as refused:
        changed.run()
    message = str(refused.value)
    assert f"checkpoint {tmp_path / 'checkpoint'} of stream silver/impressions" in message
    assert "Spark cannot continue from it" in message
    assert "lakehouse recover --layer silver" in message
    assert changed.rows("impression_id") == {("a",)}, "nothing of the refused batch is written"


# -- windows ------------------------------------------------------------------------------


def test_sliding_windows_are_written_only_after_the_watermark_passes_their_end(spark, tmp_path):
    h = actions_harness(spark, tmp_path, actions_per_window(), table_schema("gold/actions_10min"))
    h.add("actions", [user_action(1), user_action(2), user_action(7)])
    h.run()
    # Watermark = 10:07 - 10 min: no window can be final yet.
    assert h.rows("window_start") == set()

    h.add("actions", [user_action(25)])
    h.run()
    # Watermark 10:15: windows ending at or before it are final.
    assert h.rows("window_start", "window_end", "action", "actions") == {
        (at(-5), at(5), "view", 2),
        (at(0), at(10), "view", 3),
        (at(5), at(15), "view", 1),
    }
    # Each run planned a batch of input, then one that only moved the watermark on
    # (a no-data batch). The first run's closed no window: no commit. The second
    # run's wrote the three windows: committed.
    assert h.batches() == [0, 1, 2, 3]
    assert h.batches_read_input() == [0, 2]
    assert h.committed_batches() == [0, 2, 3]


# -- attribution join ---------------------------------------------------------------------


def attribution_harness(spark, root: Path) -> Harness:
    return Harness(
        spark,
        root,
        {
            "impressions": table_schema("silver/impressions"),
            "clicks": table_schema("silver/clicks"),
        },
        lambda f: attribute_clicks()(f["impressions"], f["clicks"]),
        table_schema("silver/ad_attribution"),
    )


def test_click_exactly_one_hour_later_matches_one_minute_more_does_not(spark, tmp_path):
    h = attribution_harness(spark, tmp_path)
    h.add("impressions", [impression("on-time", 0), impression("too-late", 0)])
    h.add("clicks", [click("on-time", 60, "k-60"), click("too-late", 61, "k-61")])
    h.run()
    assert ("on-time", "k-60") in h.rows("impression_id", "click_id")
    assert not any(row[1] == "k-61" for row in h.rows("impression_id", "click_id"))


def test_unmatched_impressions_wait_until_no_click_can_come(spark, tmp_path):
    h = attribution_harness(spark, tmp_path)
    h.add("impressions", [impression("lonely", 0), impression("clicked", 0)])
    h.add("clicks", [click("clicked", 10, "k1")])
    h.run()
    assert h.rows("impression_id", "click_id") == {("clicked", "k1")}

    # Time moves on (impressions at 3:00, clicks at 3:00): clicks watermark 0:00,
    # still within the hour after "lonely": a click could still come.
    h.add("impressions", [impression("later", 180)]).add("clicks", [click("later", 180)])
    h.run()
    assert ("lonely", None) not in h.rows("impression_id", "click_id")

    # Both watermarks past 1:00 (clicks at 4:30 -> 1:30): no click can match any more.
    h.add("impressions", [impression("later2", 270)]).add("clicks", [click("later2", 270)])
    h.run()
    assert ("lonely", None) in h.rows("impression_id", "click_id")
    assert ("clicked", None) not in h.rows("impression_id", "click_id")


# -- sessions and status ------------------------------------------------------------------


# State is kept per bucket of users; with one bucket, every user shares one
# state and one timeout, so a user's timeout also fires while another has input.
BUCKETS = pytest.mark.parametrize("buckets", [USER_BUCKETS, 1], ids=["buckets", "one-bucket"])


@BUCKETS
def test_session_times_out_only_when_the_watermark_passes(spark, tmp_path, buckets):
    sessions = sessionize_user_actions(buckets=buckets)
    h = actions_harness(spark, tmp_path, sessions, table_schema("silver/user_sessions"))
    h.add("actions", [user_action(0, "login"), user_action(5), user_action(20, "logout", "u-2")])
    h.run()
    assert h.rows("user_id") == set()

    # Another user's action at 0:40 -> watermark 0:30: u-2's logout (0:20) is
    # final; u-1's last action + 30 min = 0:35 is not passed yet.
    h.add("actions", [user_action(40, user="u-3")])
    h.run()
    assert h.rows("user_id", "end_reason", "action_count") == {("u-2", "logout", 1)}

    h.add("actions", [user_action(46, user="u-3")])
    h.run()
    assert ("u-1", "timeout", 2) in h.rows("user_id", "end_reason", "action_count")
    assert h.rows("user_id", "session_start", "session_end") >= {("u-1", at(0), at(5))}


@BUCKETS
def test_user_status_is_upserted_and_turns_inactive_after_an_hour(spark, tmp_path, buckets):
    status = track_user_status(buckets=buckets)
    h = actions_harness(
        spark, tmp_path, status, table_schema("gold/user_status"), merge_keys=["user_id"]
    )
    h.add("actions", [user_action(0, "login"), user_action(1, "logout", "u-2")])
    h.run()
    assert h.rows("user_id", "status") == {("u-1", "active"), ("u-2", "offline")}

    h.add("actions", [user_action(75, "view", "u-3")])
    h.run()
    # Watermark 1:05 passed u-1's last action + 60 min; u-2 stays offline.
    assert h.rows("user_id", "status") == {
        ("u-1", "inactive"),
        ("u-2", "offline"),
        ("u-3", "active"),
    }


# -- runs with no new input ---------------------------------------------------------------


def test_a_stream_with_no_new_input_is_not_started_and_resumes_when_input_arrives(spark, tmp_path):
    h = actions_harness(
        spark, tmp_path, sessionize_user_actions(), table_schema("silver/user_sessions")
    )
    h.add("actions", [user_action(0, "login"), user_action(20, "logout", "u-2")])
    first = h.run()
    assert not first.caught_up and first.rows_in == 2

    # Nothing new: Spark would plan no batch, so the query is not started.
    idle = h.run()
    assert idle.caught_up and idle.progress == [] and idle.rows_in == 0
    assert h.rows("user_id") == set()

    # A planned batch without its commit (a crash mid-batch) must run again.
    commits = tmp_path / "checkpoint" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    assert not h.run().caught_up

    # New input (even one row in a new version) starts it again, with its state.
    h.add("actions", [user_action(40, user="u-3")])
    resumed = h.run()
    assert not resumed.caught_up and resumed.rows_in == 1
    assert h.rows("user_id", "end_reason", "action_count") == {("u-2", "logout", 1)}
