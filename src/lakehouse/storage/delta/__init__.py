"""Delta Lake I/O, through Spark's own Delta connector (delta-spark).

- `read_table`, `read_added_since`, `read_files`: a table version, the rows added
  since an earlier version, or the rows of given data files, as a Spark DataFrame
  (`lakehouse.storage.delta.tables`).
- `read_stream`, `StreamSink`: Delta's streaming source, and a foreachBatch
  sink that commits each micro-batch once (`lakehouse.storage.delta.streams`).
- `append`, `merge_upsert`, `replace_range`, `replace_dates`, `replace_table`, `append_rows`:
  writes, each one atomic commit, each safe to repeat (`lakehouse.storage.delta.writes`;
  `append_rows`, bookkeeping, commits with delta-rs on a local data root).
- `lakehouse.storage.delta.log`: the log read without Spark (delta-rs), for the checks
  made before a query starts.
- `lakehouse.storage.delta.maintenance`: OPTIMIZE and VACUUM.
"""

from lakehouse.storage.delta.log import is_delta_table, latest_version
from lakehouse.storage.delta.streams import StreamSink, read_stream
from lakehouse.storage.delta.tables import read_added_since, read_files, read_table
from lakehouse.storage.delta.writes import (
    append,
    append_rows,
    ensure_table,
    merge_upsert,
    replace_dates,
    replace_range,
    replace_table,
)

__all__ = [
    "StreamSink",
    "append",
    "append_rows",
    "ensure_table",
    "is_delta_table",
    "latest_version",
    "merge_upsert",
    "read_added_since",
    "read_files",
    "read_stream",
    "read_table",
    "replace_dates",
    "replace_range",
    "replace_table",
]
