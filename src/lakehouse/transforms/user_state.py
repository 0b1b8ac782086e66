"""Spark adapters for the per-user state functions in `lakehouse.transforms.state`.

applyInPandasWithState, not transformWithStateInPandas: the rules need a
state value and an event-time timeout, which GroupState gives with exactly
the contract's semantics (a timeout fires once the watermark passes its
timestamp), and it runs on both the RocksDB and the default state store.
Times cross into pandas as integer microseconds (`unix_micros`), so no time
zone conversion happens there; `event_time` stays in the input so Spark can
drop late rows before the state function sees them.

State is kept per bucket of users (`USER_BUCKETS`, by a hash of user_id),
not per user: pyspark's per-group overhead (an Arrow slice to pandas, a
GroupState built from JSON, a pandas frame for the state it sends back) costs
the same for a user as for a bucket of them (docs/benchmarks.md). A
bucket's state maps each of its users to what the per-user rules keep, with
the time the watermark must pass for that user; the bucket's timeout is the
earliest of them. Called with the batch watermark, the bucket advances the
users with new actions and the users whose time has passed, exactly the
calls Spark makes per user with one state and one timeout each (the unit
rules in `lakehouse.transforms.state` are the same).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import starmap
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from lakehouse.catalog import EVENT_DATE, EVENT_TIME, LONG, STRING, micros
from lakehouse.catalog.schemas import struct
from lakehouse.transforms.silver import delay
from lakehouse.transforms.state.sessions import Action, Session, advance_sessions, close_sessions
from lakehouse.transforms.state.user_status import Status, advance_status, inactive_at

SESSION_ROWS = struct(
    (
        ("session_id", STRING),
        ("user_id", STRING),
        ("session_start_us", LONG),
        ("session_end_us", LONG),
        ("action_count", LONG),
        ("end_reason", STRING),
    )
)
# Part of the queries' state: changing it needs new checkpoints.
USER_BUCKETS = 256
# A bucket's users as one JSON string, {user_id: [open actions, close time]}
# for sessions and {user_id: [Status, timeout]} for status: pyspark 4.2's
# Python worker cannot read an array- or map-typed state schema
# (KeyError: 'elementType').
SESSION_STATE = T.StructType([T.StructField("open_actions_by_user", T.StringType())])
STATUS_ROWS = T.StructType(
    [
        T.StructField("user_id", T.StringType()),
        T.StructField("status", T.StringType()),
        T.StructField("last_action", T.StringType()),
        T.StructField("last_event_time_us", T.LongType()),
    ]
)
STATUS_STATE = T.StructType([T.StructField("status_by_user", T.StringType())])
BUCKET = "user_bucket"


def _by_bucket(actions: DataFrame, buckets: int) -> DataFrame:
    columns: list[Column | str] = [
        F.pmod(F.xxhash64("user_id"), F.lit(buckets)).alias(BUCKET),
        "user_id",
        "event_id",
        "action",
        F.unix_micros(EVENT_TIME).alias("event_us"),
    ]
    if actions.isStreaming:
        watermarked = actions.withWatermark(EVENT_TIME, delay("user_actions"))
        return watermarked.select(*columns, EVENT_TIME)
    return actions.select(*columns)


def _actions_by_user(frames: Iterable[pd.DataFrame]) -> dict[str, list[Action]]:
    by_user: dict[str, list[Action]] = {}
    for frame in frames:
        columns = (frame[c].tolist() for c in ("user_id", "event_us", "event_id", "action"))
        for user, event_us, event_id, action in zip(*columns, strict=True):
            by_user.setdefault(user, []).append(Action(event_us, event_id, action))
    return by_user


def _latest_action_by_user(frames: Iterable[pd.DataFrame]) -> dict[str, list[Action]]:
    """Each user's latest action only, all that `advance_status` reads of new actions.

    The latest is the greatest (event time, event id, action), as `max` of
    Actions picks it; found in pandas, without an Action for every row.
    """
    rows = [frame for frame in frames if len(frame)]
    if not rows:
        return {}
    frame = pd.concat(rows, ignore_index=True)
    newest_time = frame.groupby("user_id", sort=False)["event_us"].transform("max")
    newest = frame[frame["event_us"] == newest_time].sort_values(["event_id", "action"])
    return _actions_by_user([newest.drop_duplicates("user_id", keep="last")])


def _watermark_us(state: GroupState) -> int:
    return state.getCurrentWatermarkMs() * 1000


def _due(users: dict[str, list], watermark_us: int) -> list[str]:
    """Users whose time the watermark has passed.

    Per user, Spark would fire the timeout `time // 1000` ms once the
    watermark (ms) is past it, which is exactly when `time < watermark_us`.
    """
    return [user for user, (_, time) in users.items() if time < watermark_us]


# One user's step: (user, what state kept for them or None, their new actions,
# watermark) -> (what to keep, the time the watermark must pass to call them
# again or None to forget them, output rows).
UserStep = Callable[[str, Any, list[Action], int], tuple[Any, int | None, list[Any]]]
# A micro-batch's new actions of a bucket, by user.
NewActions = Callable[[Iterable[pd.DataFrame]], dict[str, list[Action]]]


def _advance_bucket(
    state: GroupState, frames: Iterator[pd.DataFrame], step: UserStep, new_actions: NewActions
) -> list[Any]:
    """Run `step` for the bucket's users with new actions or whose time has passed.

    The bucket's state maps each user to [kept, time]; its timeout is the
    earliest time, and with no user left the state is removed.
    """
    users: dict[str, list] = json.loads(state.get[0]) if state.exists else {}
    watermark = _watermark_us(state)
    new = new_actions(frames)
    rows: list[Any] = []
    for user in {*new, *_due(users, watermark)}:
        kept = users.pop(user, [None, None])[0]
        kept, time, out = step(user, kept, new.get(user, []), watermark)
        if time is not None:
            users[user] = [kept, time]
        rows += out
    if users:
        state.update((json.dumps(users),))
        state.setTimeoutTimestamp(min(time for _, time in users.values()) // 1000)
    else:
        state.remove()
    return rows


def _with_state(
    step: UserStep,
    to_frame: Callable[[list[Any]], pd.DataFrame],
    new_actions: NewActions = _actions_by_user,
) -> Callable[[tuple, Iterator[pd.DataFrame], GroupState], Iterator[pd.DataFrame]]:
    """The function Spark calls per bucket and micro-batch: `step` for its users, as a frame."""

    def with_state(
        key: tuple, frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        yield to_frame(_advance_bucket(state, frames, step, new_actions))

    return with_state


def _per_bucket(
    actions: DataFrame,
    rows: T.StructType,
    with_state: Callable[[tuple, Iterator[pd.DataFrame], GroupState], Iterator[pd.DataFrame]],
    state: T.StructType,
    output_mode: str,
    at_once: Callable[[tuple, pd.DataFrame], pd.DataFrame],
    buckets: int,
) -> DataFrame:
    """Streaming: `with_state` per bucket and micro-batch; batch: `at_once` per bucket."""
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    grouped = _by_bucket(actions, buckets).groupBy(BUCKET)
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


def _session_step(
    gap_us: int, user: str, kept: list | None, new: list[Action], watermark_us: int
) -> tuple[list[Action], int | None, list[Session]]:
    buffered = list(starmap(Action, kept or []))
    closed, still_open, timeout = advance_sessions(user, buffered, new, watermark_us, gap_us)
    return still_open, timeout, closed


def _batch_us(watermark_ms: int | None) -> int | None:
    return None if watermark_ms is None else watermark_ms * 1000


def sessionize_user_actions(
    watermark_ms: int | None = None, buckets: int = USER_BUCKETS
) -> Callable[[DataFrame], DataFrame]:
    """Closed sessions of deduplicated user actions (silver/user_sessions).

    Streaming: each user's open actions in state, with an event-time timeout
    (kept per bucket of users). Batch: each user's actions at once, closed
    against the batch watermark `watermark_ms`. The session gap is read here,
    in the driver, and travels to the Python workers with the functions.
    """
    gap_us = micros("session_gap")
    batch_watermark_us = _batch_us(watermark_ms)
    with_state = _with_state(partial(_session_step, gap_us), _sessions_frame)

    def closed_sessions(key: tuple, frame: pd.DataFrame) -> pd.DataFrame:
        closed = [
            session
            for user, actions in _actions_by_user([frame]).items()
            for session in close_sessions(user, actions, batch_watermark_us, gap_us)[0]
        ]
        return _sessions_frame(closed)

    def transform(actions: DataFrame) -> DataFrame:
        if not actions.isStreaming and batch_watermark_us is None:
            raise ValueError("batch sessionization needs the batch watermark")
        rows = _per_bucket(
            actions,
            SESSION_ROWS,
            with_state,
            SESSION_STATE,
            "append",
            closed_sessions,
            buckets,
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


def _status_frame(statuses: list[tuple[str, Status]]) -> pd.DataFrame:
    return pd.DataFrame(
        [(user, s.status, s.last_action, s.last_event_time) for user, s in statuses],
        columns=STATUS_ROWS.names,
    )


def _status_timeout(current: Status, watermark_us: int, timeout_us: int) -> int | None:
    """When the user's status could still change without a new action; None: never."""
    becomes_inactive_at = inactive_at(current, timeout_us)
    if becomes_inactive_at is not None:
        return becomes_inactive_at
    if current.status == "offline" and current.last_event_time >= watermark_us:
        # A not-yet-late older action could still arrive; keep the logout to compare.
        return current.last_event_time
    # Final until the next action, which is newer than anything seen: no state needed.
    return None


def _status_step(
    timeout_us: int, user: str, kept: list | None, new: list[Action], watermark_us: int
) -> tuple[Status, int | None, list[tuple[str, Status]]]:
    previous = Status(*kept) if kept else None
    current = advance_status(previous, new, watermark_us, timeout_us)
    assert current is not None  # called with actions, or for a user with state
    changed = [(user, current)] if current != previous else []
    return current, _status_timeout(current, watermark_us, timeout_us), changed


def track_user_status(
    watermark_ms: int | None = None, buckets: int = USER_BUCKETS
) -> Callable[[DataFrame], DataFrame]:
    """Each user's current status (gold/user_status); streaming emits changes only."""
    timeout_us = micros("inactivity_timeout")
    batch_watermark_us = _batch_us(watermark_ms)
    with_state = _with_state(
        partial(_status_step, timeout_us), _status_frame, _latest_action_by_user
    )

    def latest_status(key: tuple, frame: pd.DataFrame) -> pd.DataFrame:
        statuses = [
            (user, advance_status(None, actions, batch_watermark_us, timeout_us))
            for user, actions in _latest_action_by_user([frame]).items()
        ]
        return _status_frame([(user, s) for user, s in statuses if s is not None])

    def transform(actions: DataFrame) -> DataFrame:
        rows = _per_bucket(
            actions, STATUS_ROWS, with_state, STATUS_STATE, "update", latest_status, buckets
        )
        return rows.select(
            "user_id",
            "status",
            "last_action",
            F.timestamp_micros("last_event_time_us").alias("last_event_time"),
        )

    return transform


# The catalog tables each transform computes (looked up by `lakehouse.drivers.tables`).
TRANSFORMS: dict[str, Callable[..., Callable[..., DataFrame]]] = {
    "silver/user_sessions": sessionize_user_actions,
    "gold/user_status": track_user_status,
}
