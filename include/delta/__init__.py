"""Delta Lake I/O on delta-rs for Spark jobs.

Spark has no Delta jars here (no Maven), so Spark reads and writes Parquet and
delta-rs owns the transaction log:

- `DeltaStreamSink`: a `foreachBatch` sink. Executors write the batch's Parquet
  files; the driver commits them in one transaction tagged (query id, batch id).
- `read_snapshot`, `read_added_since`: a table version, or the rows added
  since an earlier version, as a Spark DataFrame.
- `read_stream`: a Delta table as a streaming source (Python Data Source API),
  offsets are table versions, works with `availableNow`.
- `replace_partitions`, `merge_upsert`: atomic range replace and keyed upsert.
"""

from include.delta.schema import ensure_table
from include.delta.sink import DeltaStreamSink
from include.delta.snapshot import read_added_since, read_snapshot
from include.delta.source import read_stream
from include.delta.writes import merge_upsert, replace_partitions

__all__ = [
    "DeltaStreamSink",
    "ensure_table",
    "merge_upsert",
    "read_added_since",
    "read_snapshot",
    "read_stream",
    "replace_partitions",
]
