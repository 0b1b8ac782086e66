"""Every transform on tiny hand-built DataFrames, boundaries first (batch; the streaming
behaviour of the same functions is in tests/transforms/test_streaming_semantics.py)."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import DataFrame
from pyspark.testing import assertDataFrameEqual

from lakehouse.catalog import SOURCES, Closing
from lakehouse.catalog.schemas import bronze_schema, table_schema
from lakehouse.transforms.closing import close
from lakehouse.transforms.gold import actions_per_window, ad_performance_hourly, campaign_daily
from lakehouse.transforms.silver import attribute_clicks, dedupe_events
from lakehouse.transforms.user_state import sessionize_user_actions, track_user_status

DAY = dt.date(2026, 11, 1)
T0 = dt.datetime(2026, 11, 1, 10, 0)
MS = dt.timedelta(milliseconds=1)
US = dt.timedelta(microseconds=1)


def at(minutes: float = 0, **delta: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes, **delta)


def epoch_ms(moment: dt.datetime) -> int:
    return int(moment.replace(tzinfo=dt.UTC).timestamp() * 1000)


def impressions(spark, *rows: tuple) -> DataFrame:
    """(impression_id, ad_id, campaign_id, event_time) rows of silver/impressions."""
    return spark.createDataFrame(
        [(i, ad, campaign, "u1", time, time.date()) for i, ad, campaign, time in rows],
        table_schema("silver/impressions"),
    )


def clicks(spark, *rows: tuple) -> DataFrame:
    """(click_id, impression_id, event_time) rows of silver/clicks."""
    return spark.createDataFrame(
        [(c, i, "ad1", "u1", time, time.date()) for c, i, time in rows],
        table_schema("silver/clicks"),
    )


def actions(spark, *rows: tuple) -> DataFrame:
    """(event_id, user_id, action, event_time) rows of silver/user_actions."""
    return spark.createDataFrame(
        [(*row, row[3].date()) for row in rows], table_schema("silver/user_actions")
    )


# -- silver ------------------------------------------------------------------------------


def test_dedupe_keeps_the_first_arrival_of_each_id_and_dates_it(spark):
    """First by ingestion time, then a message's partition and offset (as numbers), or a
    line's file and line number; the copies differ in their ad, so the row tells."""
    schema = bronze_schema(SOURCES["impressions"])

    def copy(id_: str, ad: str, ingested: float, file: str, line=None, kafka=(None, None)):
        row = {
            "impression_id": id_,
            "ad_id": ad,
            "campaign_id": "c1",
            "user_id": "u1",
            "event_time": at(-610) if id_ == "i6" else at(0),
            "_ingested_at": at(ingested),
            "_source_file": file,
            "_source_line": line,
            "_kafka_partition": kafka[0],
            "_kafka_offset": kafka[1],
        }
        return tuple(row.get(name) for name in schema.names)

    bronze = spark.createDataFrame(
        [
            copy("i1", "late", 1, "file:/a.jsonl", 1),
            copy("i1", "first", 0.5, "file:/b.jsonl", 3),  # earlier ingested
            copy("i2", "second", 1, "file:/a.jsonl", 12),
            copy("i2", "first", 1, "file:/a.jsonl", 2),  # the same file, an earlier line
            copy("i3", "second", 1, "file:/b.jsonl", 1),
            copy("i3", "first", 1, "file:/a.jsonl", 9),  # the same time, an earlier file
            copy("i4", "second", 1, "kafka:impressions/0/10", kafka=(0, 10)),
            copy("i4", "first", 1, "kafka:impressions/0/9", kafka=(0, 9)),
            copy("i5", "second", 1, "kafka:impressions/10/1", kafka=(10, 1)),
            copy("i5", "first", 1, "kafka:impressions/2/7", kafka=(2, 7)),
            copy("i6", "first", 1, "file:/a.jsonl", 4),  # the day before
        ],
        schema,
    )
    expected = [(f"i{n}", "first", "c1", "u1", at(0), DAY) for n in range(1, 6)]
    expected.append(("i6", "first", "c1", "u1", at(-610), DAY - dt.timedelta(days=1)))
    assertDataFrameEqual(bronze.transform(dedupe_events("impressions")), expected)


@pytest.mark.parametrize(
    ("click_after", "matches"),
    [
        (dt.timedelta(0), True),
        (dt.timedelta(hours=1), True),  # exactly the window: matches
        (dt.timedelta(hours=1) + MS, False),
        (-MS, False),  # before the impression
    ],
    ids=["same instant", "exactly 1 h", "1 h + 1 ms", "1 ms before"],
)
def test_a_click_matches_within_the_attribution_window_bounds_included(spark, click_after, matches):
    shown = impressions(spark, ("i1", "ad1", "c1", at(0)))
    clicked = clicks(spark, ("k1", "i1", at(0) + click_after))
    attributed = attribute_clicks()(shown, clicked)
    click = ("k1", at(0) + click_after) if matches else (None, None)
    assertDataFrameEqual(
        attributed, [("i1", "ad1", "c1", "u1", at(0), *click, DAY)], checkRowOrder=False
    )


def test_an_impression_with_two_clicks_has_two_rows_and_a_click_on_another_none(spark):
    shown = impressions(spark, ("i1", "ad1", "c1", at(0)), ("i2", "ad1", "c1", at(0)))
    clicked = clicks(spark, ("k1", "i1", at(5)), ("k2", "i1", at(10)), ("k3", "i9", at(5)))
    attributed = attribute_clicks()(shown, clicked).select("impression_id", "click_id")
    assertDataFrameEqual(attributed, [("i1", "k1"), ("i1", "k2"), ("i2", None)])


# -- gold windows ------------------------------------------------------------------------


def test_hourly_windows_start_inclusive_end_exclusive_and_count_clicked_impressions(spark):
    shown = impressions(
        spark,
        ("i1", "ad1", "c1", at(0)),  # 10:00:00 opens the 10:00 window
        ("i2", "ad1", "c1", at(60) - MS),  # 10:59:59.999 still in it
        ("i3", "ad1", "c1", at(60)),  # 11:00 is the next window
    )
    clicked = clicks(spark, ("k1", "i1", at(1)), ("k2", "i1", at(2)), ("k3", "i3", at(61)))
    hourly = ad_performance_hourly()(attribute_clicks()(shown, clicked))
    assertDataFrameEqual(
        hourly,
        [
            (at(0), at(60), "ad1", "c1", 2, 1, 0.5, DAY),
            (at(60), at(120), "ad1", "c1", 1, 1, 1.0, DAY),
        ],
    )


def test_campaign_daily_sums_the_hours_of_each_utc_day_across_ads(spark):
    midnight = dt.datetime(2026, 11, 2)
    shown = impressions(
        spark,
        ("i1", "ad1", "c1", at(0)),
        ("i2", "ad2", "c1", midnight - MS),  # the last millisecond of 1 November
        ("i3", "ad1", "c1", midnight),  # 2 November
        ("i4", "ad1", "c2", at(0)),
    )
    clicked = clicks(spark, ("k1", "i2", midnight + dt.timedelta(minutes=5)))
    daily = campaign_daily()(ad_performance_hourly()(attribute_clicks()(shown, clicked)))
    assertDataFrameEqual(
        daily,
        [
            ("c1", DAY, 2, 1, 0.5),
            ("c1", midnight.date(), 1, 0, 0.0),
            ("c2", DAY, 1, 0, 0.0),
        ],
    )


def test_an_action_counts_in_both_sliding_windows_that_contain_it(spark):
    counted = actions_per_window()(
        actions(spark, ("e1", "u1", "view", at(7)), ("e2", "u1", "view", at(10)))
    )
    assertDataFrameEqual(
        counted,
        [
            (at(0), at(10), "view", 1, DAY),  # 10:10 is not in [10:00, 10:10)
            (at(5), at(15), "view", 2, DAY),
            (at(10), at(20), "view", 1, DAY),
        ],
    )


# -- closing rules -----------------------------------------------------------------------


def test_windows_close_when_their_end_reaches_the_watermark_minus_what_is_held_back(spark):
    windows = spark.createDataFrame(
        [(at(0), at(60)), (at(60), at(120))], "window_start timestamp, window_end timestamp"
    )
    rule = Closing("windows", "attribution_window", length="performance_window")
    # 11:00 + 1 h held back: the first window closes at a watermark of exactly 12:00.
    assert windows.transform(close(rule, epoch_ms(at(120)))).count() == 1
    assert windows.transform(close(rule, epoch_ms(at(120)) - 1)).count() == 0


def test_a_day_closes_when_its_last_hour_does(spark):
    days = spark.createDataFrame([(DAY,)], "day date")
    rule = Closing("windows", "attribution_window", start="day", length="campaign_window")
    closes_at = dt.datetime(2026, 11, 2, 1, 0)  # day + 1 day <= watermark - 1 h
    assert days.transform(close(rule, epoch_ms(closes_at))).count() == 1
    assert days.transform(close(rule, epoch_ms(closes_at) - 1)).count() == 0


def test_an_unmatched_impression_closes_once_no_click_can_match_it(spark):
    rows = attribute_clicks()(
        impressions(spark, ("i1", "ad1", "c1", at(0))), clicks(spark, ("k1", "i9", at(1)))
    )
    rule = Closing("unmatched", "attribution_window")
    assert rows.transform(close(rule, epoch_ms(at(60)))).count() == 1
    assert rows.transform(close(rule, epoch_ms(at(60)) - 1)).count() == 0


# -- sessions and status (batch, closed at the watermark) --------------------------------


def test_a_gap_of_exactly_the_session_gap_continues_and_one_microsecond_more_splits(spark):
    user = actions(
        spark,
        ("e1", "u1", "login", at(0)),
        ("e2", "u1", "view", at(30)),  # exactly 30 minutes: same session
        ("e3", "u1", "view", at(60) + US),  # 30 minutes and 1 us: a new one
    )
    sessions = sessionize_user_actions(watermark_ms=epoch_ms(at(600)))(user)
    assertDataFrameEqual(
        sessions.select("session_start", "session_end", "action_count", "end_reason"),
        [(at(0), at(30), 2, "timeout"), (at(60) + US, at(60) + US, 1, "timeout")],
    )


def test_a_session_closes_only_when_the_watermark_passes_its_last_action_plus_the_gap(spark):
    user = actions(spark, ("e1", "u1", "login", at(0)), ("e2", "u1", "view", at(5)))
    at_close = epoch_ms(at(35))
    assert sessionize_user_actions(watermark_ms=at_close)(user).count() == 0
    assert sessionize_user_actions(watermark_ms=at_close + 1)(user).count() == 1


def test_a_logout_ends_its_session_and_the_next_action_starts_another(spark):
    user = actions(
        spark,
        ("e1", "u1", "login", at(0)),
        ("e2", "u1", "logout", at(1)),
        ("e3", "u1", "view", at(2)),
    )
    sessions = sessionize_user_actions(watermark_ms=epoch_ms(at(600)))(user)
    assertDataFrameEqual(
        sessions.select("session_start", "action_count", "end_reason"),
        [(at(0), 2, "logout"), (at(2), 1, "timeout")],
    )


def test_batch_sessions_need_the_watermark(spark):
    with pytest.raises(ValueError, match="watermark"):
        sessionize_user_actions()(actions(spark, ("e1", "u1", "login", at(0))))


def test_status_is_the_latest_action_and_turns_inactive_after_the_timeout(spark):
    rows = actions(
        spark,
        ("e1", "u1", "login", at(0)),
        ("e2", "u1", "view", at(5)),
        ("e3", "u2", "logout", at(0)),
        ("e4", "u3", "view", at(50)),
    )
    # u1's last action + 60 minutes is 11:05: the watermark passes it by 1 ms.
    status = track_user_status(watermark_ms=epoch_ms(at(65)) + 1)(rows)
    assertDataFrameEqual(
        status,
        [
            ("u1", "inactive", "view", at(5)),
            ("u2", "offline", "logout", at(0)),
            ("u3", "active", "view", at(50)),
        ],
    )


def test_a_tie_in_event_time_goes_to_the_greater_event_id(spark):
    rows = actions(
        spark,
        ("e1", "u1", "view", at(5)),
        ("e2", "u1", "logout", at(5)),
        ("e9", "u1", "login", at(1)),  # the greatest id, but older
        ("e4", "u2", "view", at(5)),
        ("e3", "u2", "logout", at(5)),
    )
    status = track_user_status(watermark_ms=epoch_ms(at(6)))(rows)
    assertDataFrameEqual(
        status, [("u1", "offline", "logout", at(5)), ("u2", "active", "view", at(5))]
    )
