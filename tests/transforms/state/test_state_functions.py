"""Session and status state logic, tested without any streaming query."""

from __future__ import annotations

from lakehouse.transforms.state.sessions import (
    Action,
    advance_sessions,
    session_id,
    split_sessions,
)
from lakehouse.transforms.state.user_status import Status, advance_status, inactive_at

MIN = 60 * 1_000_000  # one minute in microseconds
T0 = 1_793_000_000 * 1_000_000
GAP = 30 * MIN  # the session gap
TIMEOUT = 60 * MIN  # the inactivity timeout


def act(minute: float, action: str = "view", event_id: str | None = None) -> Action:
    return Action(T0 + int(minute * MIN), event_id or f"e{minute}", action)


# -- sessions --------------------------------------------------------------------------


def test_a_gap_of_exactly_30_minutes_continues_and_more_splits():
    assert [len(s) for s in split_sessions([act(0), act(30), act(60.0001)], GAP)] == [2, 1]


def test_logout_ends_the_session_even_when_the_next_action_is_close():
    sessions = split_sessions([act(0, "login"), act(1, "logout"), act(2, "view")], GAP)
    assert [[a.action for a in s] for s in sessions] == [["login", "logout"], ["view"]]


def test_out_of_order_arrival_gives_the_same_sessions():
    actions = [act(0), act(10), act(35), act(50, "logout"), act(200)]
    assert split_sessions(actions, GAP) == split_sessions(list(reversed(actions)), GAP)


def test_nothing_closes_before_the_watermark_passes():
    closed, still_open, _ = advance_sessions(
        "u", [], [act(0), act(5)], watermark_us=T0 + 35 * MIN, gap_us=GAP
    )
    assert closed == [] and len(still_open) == 2
    # last action + 30 min = minute 35: the watermark must pass it, not reach it
    closed, _, _ = advance_sessions("u", still_open, [], watermark_us=T0 + 35 * MIN + 1, gap_us=GAP)
    assert [(s.action_count, s.end_reason) for s in closed] == [(2, "timeout")]


def test_logout_session_closes_once_the_watermark_passes_the_logout():
    closed, still_open, _ = advance_sessions(
        "u", [], [act(0, "login"), act(3, "logout")], watermark_us=T0 + 3 * MIN, gap_us=GAP
    )
    assert closed == []
    closed, still_open, _ = advance_sessions(
        "u", still_open, [], watermark_us=T0 + 3 * MIN + 1, gap_us=GAP
    )
    (session,) = closed
    assert session.end_reason == "logout"
    assert (session.session_start, session.session_end) == (T0, T0 + 3 * MIN)
    assert session.session_id == session_id("u", T0)
    assert still_open == []


def test_a_late_filling_action_merges_two_open_sessions():
    _, still_open, _ = advance_sessions(
        "u", [], [act(0), act(40)], watermark_us=T0 + 10 * MIN, gap_us=GAP
    )
    assert len(split_sessions(still_open, GAP)) == 2
    closed, still_open, _ = advance_sessions(
        "u", still_open, [act(20)], watermark_us=T0 + 15 * MIN, gap_us=GAP
    )
    assert closed == [] and len(split_sessions(still_open, GAP)) == 1


def test_sessions_close_in_order_and_the_rest_stays_open():
    actions = [act(0), act(10, "logout"), act(100), act(110)]
    closed, still_open, timeout = advance_sessions(
        "u", [], actions, watermark_us=T0 + 120 * MIN, gap_us=GAP
    )
    assert [(s.action_count, s.end_reason) for s in closed] == [(2, "logout")]
    assert still_open == [act(100), act(110)]
    assert timeout == T0 + 140 * MIN  # the open session's last action + the gap
    assert advance_sessions("u", [], [], watermark_us=T0, gap_us=GAP) == ([], [], None)


def test_batch_call_without_watermark_closes_nothing():
    closed, still_open, _ = advance_sessions(
        "u", [], [act(0, "logout")], watermark_us=None, gap_us=GAP
    )
    assert closed == [] and still_open == [act(0, "logout")]


def test_session_id_is_deterministic_and_distinct():
    assert session_id("u1", T0) == session_id("u1", T0)
    assert len({session_id("u1", T0), session_id("u2", T0), session_id("u1", T0 + 1)}) == 3


# -- user status ------------------------------------------------------------------------


def test_status_follows_the_latest_action():
    status = advance_status(
        None, [act(0, "login"), act(5, "view")], watermark_us=T0, timeout_us=TIMEOUT
    )
    assert status == Status("active", "view", T0 + 5 * MIN, "e5")
    status = advance_status(status, [act(6, "logout")], watermark_us=T0, timeout_us=TIMEOUT)
    assert status is not None and status.status == "offline"


def test_an_older_action_arriving_late_does_not_override():
    status = advance_status(None, [act(10, "logout")], watermark_us=None, timeout_us=TIMEOUT)
    assert advance_status(status, [act(5, "view")], watermark_us=None, timeout_us=TIMEOUT) == status


def test_inactive_only_once_the_watermark_passes_60_minutes():
    status = advance_status(None, [act(0, "view")], watermark_us=None, timeout_us=TIMEOUT)
    assert status is not None and inactive_at(status, TIMEOUT) == T0 + 60 * MIN
    assert (
        advance_status(status, [], watermark_us=T0 + 60 * MIN, timeout_us=TIMEOUT).status
        == "active"
    )
    assert (
        advance_status(status, [], watermark_us=T0 + 60 * MIN + 1, timeout_us=TIMEOUT).status
        == "inactive"
    )


def test_offline_users_never_turn_inactive():
    status = advance_status(
        None, [act(0, "logout")], watermark_us=T0 + 600 * MIN, timeout_us=TIMEOUT
    )
    assert (
        status is not None and status.status == "offline" and inactive_at(status, TIMEOUT) is None
    )


def test_a_new_action_reactivates_an_inactive_user():
    status = advance_status(None, [act(0)], watermark_us=T0 + 61 * MIN, timeout_us=TIMEOUT)
    assert status is not None and status.status == "inactive"
    assert advance_status(status, [act(62, "click")], T0 + 61 * MIN, TIMEOUT).status == "active"
