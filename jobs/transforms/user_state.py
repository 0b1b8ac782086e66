"""Spark adapters for the per-user state functions in `jobs.state`.

applyInPandasWithState, not transformWithStateInPandas: the rules need one
state value and one event-time timeout per user, which GroupState gives with
exactly the contract's semantics (a timeout fires once the watermark passes
its timestamp), and it runs on both the RocksDB and the default state store.
Times cross into pandas as integer microseconds (`unix_micros`), so no time
zone conversion happens there; `event_time` stays in the input so Spark can
drop late rows before the state function sees them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from jobs.contract import EVENT_DATE, EVENT_TIME, USER_ACTIONS
from jobs.state.sessions import Action, Session, advance_sessions, next_timeout
from jobs.state.user_status import Status, advance_status, inactive_at
from jobs.transforms.silver import delay

SESSION_ROWS = T.StructType(
    [
        T.StructField("session_id", T.StringType()),
        T.StructField("user_id", T.StringType()),
        T.StructField("session_start_us", T.LongType()),
        T.StructField("session_end_us", T.LongType()),
        T.StructField("action_count", T.LongType()),
        T.StructField("end_reason", T.StringType()),
    ]
)
# The open actions as one JSON string: pyspark 4.2's Python worker cannot
# read an array-typed state schema (KeyError: 'elementType').
SESSION_STATE = T.StructType([T.StructField("open_actions", T.StringType())])
STATUS_ROWS = T.StructType(
    [
        T.StructField("user_id", T.StringType()),
        T.StructField("status", T.StringType()),
        T.StructField("last_action", T.StringType()),
        T.StructField("last_event_time_us", T.LongType()),
    ]
)
STATUS_STATE = T.StructType(
    [
        T.StructField("status", T.StringType()),
        T.StructField("last_action", T.StringType()),
        T.StructField("last_event_time", T.LongType()),
        T.StructField("last_event_id", T.StringType()),
    ]
)


def _by_user(actions: DataFrame) -> DataFrame:
    columns: list[Column | str] = [
        "user_id",
        "event_id",
        "action",
        F.unix_micros(EVENT_TIME).alias("event_us"),
    ]
    if actions.isStreaming:
        watermarked = actions.withWatermark(EVENT_TIME, delay(USER_ACTIONS))
        return watermarked.select(*columns, EVENT_TIME)
    return actions.select(*columns)


def _actions(frames: Iterable[pd.DataFrame]) -> list[Action]:
    return [
        Action(int(t), str(i), str(a))
        for frame in frames
        for t, i, a in zip(frame["event_us"], frame["event_id"], frame["action"], strict=True)
    ]


def _watermark_us(state: GroupState) -> int:
    return state.getCurrentWatermarkMs() * 1000


def _set_timeout(state: GroupState, close_us: int) -> None:
    # Spark fires the timeout once the watermark (ms) is past the timestamp,
    # which is exactly when `close_us < watermark_us` first holds.
    state.setTimeoutTimestamp(close_us // 1000)


def _per_user(
    actions: DataFrame,
    rows: T.StructType,
    with_state: Callable[[tuple, Iterator[pd.DataFrame], GroupState], Iterator[pd.DataFrame]],
    state: T.StructType,
    output_mode: str,
    at_once: Callable[[tuple, pd.DataFrame], pd.DataFrame],
) -> DataFrame:
    """Streaming: `with_state` per user and micro-batch; batch: `at_once` per user."""
    grouped = _by_user(actions).groupBy("user_id")
    if actions.isStreaming:
        return grouped.applyInPandasWithState(
            with_state, rows, state, output_mode, GroupStateTimeout.EventTimeTimeout
        )
    return grouped.applyInPandas(at_once, rows)


# -- sessions ----------------------------------------------------------------------------


def _sessions_frame(sessions: list[Session]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            (s.session_id, s.user_id, s.session_start, s.session_end, s.action_count, s.end_reason)
            for s in sessions
        ],
        columns=SESSION_ROWS.names,
    )


def _sessions_with_state(
    key: tuple, frames: Iterator[pd.DataFrame], state: GroupState
) -> Iterator[pd.DataFrame]:
    (user_id,) = key
    buffered = [Action(*a) for a in json.loads(state.get[0])] if state.exists else []
    closed, still_open = advance_sessions(user_id, buffered, _actions(frames), _watermark_us(state))
    timeout = next_timeout(still_open)
    if timeout is None:
        state.remove()
    else:
        state.update((json.dumps(still_open),))
        _set_timeout(state, timeout)
    yield _sessions_frame(closed)


def sessionize_user_actions(
    batch_watermark_us: int | None = None,
) -> Callable[[DataFrame], DataFrame]:
    """Closed sessions of deduplicated user actions (silver/user_sessions).

    Streaming: per-user state with an event-time timeout. Batch: each user's
    actions at once, closed against `batch_watermark_us`.
    """

    def closed_sessions(key: tuple, frame: pd.DataFrame) -> pd.DataFrame:
        closed, _ = advance_sessions(key[0], [], _actions([frame]), batch_watermark_us)
        return _sessions_frame(closed)

    def transform(actions: DataFrame) -> DataFrame:
        if not actions.isStreaming and batch_watermark_us is None:
            raise ValueError("batch sessionization needs the batch watermark")
        rows = _per_user(
            actions, SESSION_ROWS, _sessions_with_state, SESSION_STATE, "append", closed_sessions
        )
        start = F.timestamp_micros("session_start_us")
        return rows.select(
            "session_id",
            "user_id",
            start.alias("session_start"),
            F.timestamp_micros("session_end_us").alias("session_end"),
            "action_count",
            "end_reason",
            F.to_date(start).alias(EVENT_DATE),
        )

    return transform


# -- user status -------------------------------------------------------------------------


def _status_frame(user_id: str, status: Status | None) -> pd.DataFrame:
    rows = (
        []
        if status is None
        else [(user_id, status.status, status.last_action, status.last_event_time)]
    )
    return pd.DataFrame(rows, columns=STATUS_ROWS.names)


def _status_with_state(
    key: tuple, frames: Iterator[pd.DataFrame], state: GroupState
) -> Iterator[pd.DataFrame]:
    (user_id,) = key
    previous = Status(*state.get) if state.exists else None
    watermark = _watermark_us(state)
    current = advance_status(previous, _actions(frames), watermark)
    assert current is not None  # called with rows, or on a timeout of existing state
    becomes_inactive_at = inactive_at(current)
    if becomes_inactive_at is not None:
        state.update(tuple(current))
        _set_timeout(state, becomes_inactive_at)
    elif current.status == "offline" and current.last_event_time >= watermark:
        # A not-yet-late older action could still arrive; keep the logout to compare.
        state.update(tuple(current))
        _set_timeout(state, current.last_event_time)
    else:
        # Final until the next action, which is newer than anything seen: no state needed.
        state.remove()
    yield _status_frame(user_id, current if current != previous else None)


def track_user_status(batch_watermark_us: int | None = None) -> Callable[[DataFrame], DataFrame]:
    """Each user's current status (gold/user_status); streaming emits changes only."""

    def latest_status(key: tuple, frame: pd.DataFrame) -> pd.DataFrame:
        return _status_frame(key[0], advance_status(None, _actions([frame]), batch_watermark_us))

    def transform(actions: DataFrame) -> DataFrame:
        rows = _per_user(
            actions, STATUS_ROWS, _status_with_state, STATUS_STATE, "update", latest_status
        )
        return rows.select(
            "user_id",
            "status",
            "last_action",
            F.timestamp_micros("last_event_time_us").alias("last_event_time"),
        )

    return transform
