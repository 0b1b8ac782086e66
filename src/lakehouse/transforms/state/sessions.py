"""User sessions: a user's actions in event-time order, split by logout and gaps.

Rules (contract sections 4-5): a `logout` ends the session it belongs to;
an action more than the session gap (`gap_us`, 30 minutes in the catalog)
after the previous one starts a new session (exactly the gap continues it).
Sessions are written once final:

- a session ended by logout, once the watermark has passed the logout: no
  earlier action can arrive any more;
- a session without logout, `end_reason = timeout`, once the watermark has
  passed its last action + the gap: nothing can extend it any more.

Until then its actions stay in state, because an out-of-order action can
still change it (fill a gap and merge two sessions, or raise its count).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import NamedTuple


class Action(NamedTuple):
    event_time: int  # microseconds since the epoch, UTC
    event_id: str
    action: str


@dataclass(frozen=True)
class Session:
    session_id: str
    user_id: str
    session_start: int
    session_end: int
    action_count: int
    end_reason: str


def session_id(user_id: str, session_start: int) -> str:
    """Deterministic from user and start, the same in streaming and batch."""
    return hashlib.sha256(f"{user_id}|{session_start}".encode()).hexdigest()[:32]


def split_sessions(actions: list[Action], gap_us: int) -> list[list[Action]]:
    """Sessions of one user's actions (any order in, event-time order out)."""
    sessions: list[list[Action]] = []
    for action in sorted(set(actions)):
        current = sessions[-1] if sessions else None
        if (
            current is None
            or current[-1].action == "logout"
            or action.event_time - current[-1].event_time > gap_us
        ):
            sessions.append([action])
        else:
            current.append(action)
    return sessions


def close_time(session: list[Action], gap_us: int) -> int:
    """When the watermark must pass for the session to be final."""
    last = session[-1]
    return last.event_time if last.action == "logout" else last.event_time + gap_us


def close_sessions(
    user_id: str, actions: list[Action], watermark_us: int | None, gap_us: int
) -> tuple[list[Session], list[list[Action]]]:
    """A user's open actions split into (sessions now final, sessions still open).

    With a watermark, actions older than it are late: streaming has already
    dropped them (Spark filters late rows before the state function).
    """
    closed: list[Session] = []
    still_open: list[list[Action]] = []
    for session in split_sessions(actions, gap_us):
        if watermark_us is not None and close_time(session, gap_us) < watermark_us:
            ended_by_logout = session[-1].action == "logout"
            closed.append(
                Session(
                    session_id=session_id(user_id, session[0].event_time),
                    user_id=user_id,
                    session_start=session[0].event_time,
                    session_end=session[-1].event_time,
                    action_count=len(session),
                    end_reason="logout" if ended_by_logout else "timeout",
                )
            )
        else:
            still_open.append(session)
    return closed, still_open


def advance_sessions(
    user_id: str,
    buffered: list[Action],
    new: list[Action],
    watermark_us: int | None,
    gap_us: int,
) -> tuple[list[Session], list[Action], int | None]:
    """Add new actions to a user's open actions.

    Returns the sessions now final, the actions still open, and the close
    time of the earliest open session (microseconds; None when none is open).
    """
    closed, still_open = close_sessions(user_id, [*buffered, *new], watermark_us, gap_us)
    open_actions = [action for session in still_open for action in session]
    return closed, open_actions, min((close_time(s, gap_us) for s in still_open), default=None)
