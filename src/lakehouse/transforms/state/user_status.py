"""User status: active after any action, offline after logout, inactive after a quiet spell.

The latest action in event time decides (ties broken by event id), so an
out-of-order older action never overrides a newer one. An active user becomes
inactive once the watermark has passed `last_event_time + timeout_us` (the
inactivity timeout, 60 minutes in the catalog).
"""

from __future__ import annotations

from typing import NamedTuple

from lakehouse.transforms.state.sessions import Action


class Status(NamedTuple):
    status: str
    last_action: str
    last_event_time: int  # microseconds
    last_event_id: str


def advance_status(
    previous: Status | None, new: list[Action], watermark_us: int | None, timeout_us: int
) -> Status | None:
    """The user's status after new actions and the watermark; None if there is none yet."""
    latest = max(new, default=None)
    current = previous
    if latest is not None and (
        current is None
        or (latest.event_time, latest.event_id) > (current.last_event_time, current.last_event_id)
    ):
        current = Status(
            status="offline" if latest.action == "logout" else "active",
            last_action=latest.action,
            last_event_time=latest.event_time,
            last_event_id=latest.event_id,
        )
    if (
        current is not None
        and current.status == "active"
        and watermark_us is not None
        and current.last_event_time + timeout_us < watermark_us
    ):
        current = current._replace(status="inactive")
    return current


def inactive_at(status: Status, timeout_us: int) -> int | None:
    """When the watermark must pass for an active user to turn inactive (microseconds)."""
    return status.last_event_time + timeout_us if status.status == "active" else None
