"""Delta Lake I/O, through Spark's own Delta connector (delta-spark).

- `read_table`, `read_added_since`: a table version, or the rows added since an
  earlier version, as a Spark DataFrame; `Snapshot`: a version as its log describes
  it, and the data files it gained since an earlier one (`DataFiles`: their rows,
  dates, largest values, read with pyarrow or Spark), asked by the checks and the
  run's report (`lakehouse.storage.delta.reads`).
- `append`, `merge_upsert`, `replace_range`, `replace_dates`, `replace_table`, `append_rows`:
  writes, each one atomic commit, each safe to repeat (`lakehouse.storage.delta.writes`;
  `append_rows`, bookkeeping, commits with delta-rs on a local data root).
- `lakehouse.storage.delta.log`: the log read without Spark (delta-rs), for the checks
  made before a query starts.
- `lakehouse.storage.delta.maintenance`: OPTIMIZE and VACUUM.
"""

from lakehouse.storage.delta.log import is_delta_table, latest_version
from lakehouse.storage.delta.reads import DataFiles, Snapshot, read_added_since, read_table
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
    "DataFiles",
    "Snapshot",
    "append",
    "append_rows",
    "ensure_table",
    "is_delta_table",
    "latest_version",
    "merge_upsert",
    "read_added_since",
    "read_table",
    "replace_dates",
    "replace_range",
    "replace_table",
]
