"""Business logic: pure DataFrame -> DataFrame transforms and per-key state functions.

The same function serves the streaming query and the batch backfill; none
reads or writes. Each module registers the transforms it writes under the catalog
tables they compute (its `TRANSFORMS`), where `lakehouse.drivers.tables` finds them.

- `landing`: landing lines -> typed events or quarantine rows with a reason;
- `silver`: deduplication and the impressions x clicks interval join;
- `gold`: the event-time window aggregates;
- `user_state`: sessions and user status, per bucket of users with state;
- `state`: the per-user rules themselves, plain Python;
- `closing`: which batch rows streaming would have written by a watermark.
"""

__all__ = ["closing", "gold", "landing", "silver", "state", "user_state"]
