"""Per-key state logic as plain functions of (key, new rows, previous state, watermark).

Spark calls them through `applyInPandasWithState` in streaming and through
`applyInPandas` (no previous state, the batch watermark) in backfills; tests
call them directly, the way Spark's TestGroupState serves mapGroupsWithState.
Times are integer microseconds since the epoch (UTC); watermarks come from
Spark in milliseconds and are converted once, at the adapter.
"""

__all__ = ["sessions", "user_status"]
