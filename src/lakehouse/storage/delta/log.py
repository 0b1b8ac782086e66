"""A Delta table's log read without Spark (delta-rs): versions, micro-batches, writers.

The checkpoint guards (`lakehouse.storage.checkpoints`) run before any streaming query
starts and decide whether to start it at all, so they must answer in
milliseconds and without a JVM: does the table exist, what is its latest
version, which micro-batch of a stream does it hold, which streams wrote it,
what was committed after a given version. Likewise `query`, for the
bookkeeping a run reads from `_meta` (each table's last passing validation,
asked before anything else, and the ingest ledger's sums): a cold Spark
session answers the first many times slower than delta-rs; and
`append_local`, for the bookkeeping a run appends on a local data root (the
ingest ledger, the event log, the data-quality results); and `read_arrow`,
the rows of a few data files for the data-quality checks of a small
increment (src/lakehouse/quality/scopes.py), which a Spark read would first plan
against the table's whole state. Everything
else that reads or writes the pipeline's data goes through Spark's Delta
connector (the rest of `lakehouse.storage.delta`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

from deltalake import DeltaTable

from lakehouse.storage.objects import Root, S3Path, location

# Commits written by our streams carry this in their `userMetadata`: which
# query and which micro-batch wrote them (`lakehouse.storage.delta.writes`).
STREAM_KEY = "streamingQueryId"


def _for_delta_rs(path: Root) -> tuple[str, dict[str, str] | None]:
    """A table's location as delta-rs takes it: a local path, or s3:// with the connection."""
    if isinstance(path, S3Path):
        return path.uri, path.connection.storage_options()
    return str(path), None


def open_table(path: Root, version: int | None = None) -> DeltaTable:
    """The table with delta-rs, which reads a local folder or s3:// itself."""
    uri, options = _for_delta_rs(path)
    return DeltaTable(uri, version=version, storage_options=options)


def query(path: Root, sql: str, name: str = "t") -> Any:
    """The result of a SQL query (DataFusion's dialect) over the table, registered as
    `name`, as a pyarrow table."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    return pa.table(QueryBuilder().register(name, open_table(path)).execute(sql).read_all())


def append_local(
    path: Root,
    rows: list[dict[str, Any]],
    schema: Any,
    app_id: str | None = None,
    version: int | None = None,
    user_metadata: str | None = None,
) -> None:
    """Append rows (a pyarrow `schema`) to a table on local disk with delta-rs: one
    commit, no Spark job. With `app_id` and `version`, at most once for that pair
    (Delta's app transactions, which Spark's idempotent writes read and write too).

    Only for bookkeeping (`lakehouse.storage.delta.append_rows`). On S3, delta-rs would commit
    without the fence of Spark's log store (jars/log-store/): Spark writes there."""
    import pyarrow as pa
    from deltalake import CommitProperties, Transaction, write_deltalake

    if isinstance(path, S3Path):
        raise ValueError(f"{path}: delta-rs appends only to tables on local disk")
    transactions = []
    if app_id is not None and version is not None:
        done = committed_batch(path, app_id) if is_delta_table(path) else None
        if done is not None and done >= version:
            return
        transactions = [Transaction(app_id=app_id, version=version)]
    properties = CommitProperties(
        app_transactions=transactions,
        custom_metadata={"userMetadata": user_metadata} if user_metadata else None,
    )
    write_deltalake(
        str(path), pa.Table.from_pylist(rows, schema), mode="append", commit_properties=properties
    )


def read_arrow(path: Root, actions: Any, columns: Sequence[str] | None = None) -> Any:
    """The rows of these data files (add actions, as `add_actions` gives them),
    read with pyarrow (each file into memory: for a few files), as a pyarrow table in
    the table's schema (or these of its `columns`): partition columns from the log, a
    column a file predates null.

    Every row of a file in the log is live: the lakehouse's tables have no
    deletion vectors (docs/contract.md).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(open_table(path).schema().to_arrow())
    if columns is not None:
        schema = pa.schema([schema.field(name) for name in columns])
    files = []
    for index, uri in enumerate(actions.column("path").to_pylist()):
        # The log's paths are URIs, %-escaped: relative to the table, or absolute.
        if uri.startswith("file:"):  # file:/x or file:///x
            file = location(unquote(uri.removeprefix("file:").removeprefix("//")), path)
        elif "://" in uri:
            file = location(uri.replace("s3://", "s3a://", 1), path)
        else:
            file = path / unquote(uri)
        parquet = pq.ParquetFile(pa.BufferReader(file.read_bytes()))
        data = parquet.read([n for n in schema.names if n in parquet.schema_arrow.names])
        columns = []
        for field in schema:
            if f"partition.{field.name}" in actions.column_names:
                value = actions.column(f"partition.{field.name}")[index].as_py()
                columns.append(pa.array([value] * data.num_rows, field.type))
            elif field.name in data.column_names:
                columns.append(data.column(field.name).cast(field.type))
            else:
                columns.append(pa.nulls(data.num_rows, field.type))
        files.append(pa.Table.from_arrays(columns, schema=schema))
    return pa.concat_tables(files) if files else schema.empty_table()


def is_delta_table(path: Root) -> bool:
    uri, options = _for_delta_rs(path)
    return (path / "_delta_log").is_dir() and DeltaTable.is_deltatable(uri, storage_options=options)


def latest_version(path: Root) -> int:
    """The table's current version (from the log; no data file is listed)."""
    return open_table(path).version()


def columns(path: Root) -> list[str]:
    return [field.name for field in open_table(path).schema().fields]


def file_name(uri: str) -> str:
    """A data file's name, which identifies it: Delta names every file uniquely
    (part-<n>-<uuid>...), whatever folder (partition) it is in."""
    return uri.rsplit("/", 1)[-1]


def add_actions(path: Root, version: int | None = None) -> Any:
    """The data files of a version (default: latest) with their statistics and partition
    values, one row each (`partition.<column>`, `num_records`), as a pyarrow table."""
    import pyarrow as pa

    return pa.table(open_table(path, version=version).get_add_actions(flatten=True))


def rows_from(path: Root, column: str, first: Any | None = None) -> int:
    """Rows of the table (from its log's file statistics) in partitions `column >= first`
    (every partition when `first` is None)."""
    actions = add_actions(path)
    records = actions.column("num_records").to_pylist()
    if first is None:
        return sum(n or 0 for n in records)
    values = actions.column(f"partition.{column}").to_pylist()
    return sum(n or 0 for n, v in zip(records, values, strict=True) if v is not None and v >= first)


def latest_commit(path: Root) -> dict[str, Any]:
    """The commit info of the table's latest version (operation, metrics, user metadata)."""
    (commit,) = open_table(path).history(limit=1)
    return dict(commit)


# A new stream reads a table from its first commit only if its log is this short.
FROM_FIRST_COMMIT_MAX_VERSIONS = 200


def appended_only(path: Root) -> bool:
    """Whether every commit of the table, from its first, is still in its log and only
    added files as new data (no remove, no add with `dataChange=false`).

    Then a new stream that reads the commits from version 0 reads exactly the
    rows of the latest snapshot, without Delta building that snapshot's file
    list first (a Spark job per new stream; docs/benchmarks.md has the figures).
    Read from the log's JSON files; a
    longer log than `FROM_FIRST_COMMIT_MAX_VERSIONS` says False.
    """
    if not is_delta_table(path):
        return False
    latest = latest_version(path)
    if latest >= FROM_FIRST_COMMIT_MAX_VERSIONS:
        return False
    for version in range(latest + 1):
        commit = path / "_delta_log" / f"{version:020d}.json"
        try:
            lines = commit.read_text().splitlines()
        except FileNotFoundError:
            return False  # cleaned up: the table's first rows are in a checkpoint only
        for line in lines:
            action = json.loads(line) if line.strip() else {}
            if "remove" in action or action.get("add", {}).get("dataChange") is False:
                return False
    return True


def committed_batch(path: Root, app_id: str) -> int | None:
    """The newest micro-batch (Delta app transaction version) `app_id` committed to the table."""
    return open_table(path).transaction_version(app_id)


def _user_metadata(commit: dict[str, Any]) -> dict[str, Any]:
    text = commit.get("userMetadata")
    try:
        found = json.loads(text) if text else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def streams_that_wrote(path: Root) -> set[str]:
    """Query ids of the streams whose micro-batches the table holds."""
    if not is_delta_table(path):
        return set()
    found = set()
    for commit in open_table(path).history():
        query_id = _user_metadata(commit).get(STREAM_KEY) or commit.get(STREAM_KEY)
        if query_id:  # the second spelling: commits of the delta-rs sink before 0.2
            found.add(str(query_id))
    return found


def restores_after(path: Root, version: int) -> list[tuple[int, int]]:
    """RESTORE commits after `version`: (the commit's version, the version it restored)."""
    table = open_table(path)
    latest = table.version()
    if latest <= version:
        return []
    found = []
    for commit in table.history(limit=latest - version):
        if int(commit["version"]) > version and commit.get("operation") == "RESTORE":
            parameters = commit.get("operationParameters") or {}
            restored = parameters.get("version")
            found.append((int(commit["version"]), -1 if restored is None else int(restored)))
    return sorted(found)


# Commits a stream of the table has nothing to read in: compaction and vacuum
# (`dataChange=false`), and our backfills (`lakehouse.storage.delta.writes.replace_range`).
_NO_NEW_DATA = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END"})
BACKFILL = "backfill"


def unread_commits(path: Root, version: int) -> list[int]:
    """Versions after `version` that may hold rows a stream of the table has not read.

    Judged from each commit's operation (Delta's commit info), so it errs on the
    safe side: any commit but a compaction, a vacuum, one of our backfills or an
    append that wrote no file counts.
    """
    table = open_table(path)
    latest = table.version()
    if latest <= version:
        return []
    return sorted(
        int(commit["version"])
        for commit in table.history(limit=latest - version)
        if int(commit["version"]) > version
        and commit.get("operation") not in _NO_NEW_DATA
        and _user_metadata(commit).get("lakehouseOperation") != BACKFILL
        and not _wrote_no_file(commit)
    )


def commit_rows(commit: dict[str, Any]) -> int:
    """Rows a commit inserted or updated, from Delta's operation metrics: a MERGE's rows
    inserted and updated (its `numOutputRows` also counts the unchanged rows it copied
    into the files it rewrote), an append's `numOutputRows`."""
    metrics = commit.get("operationMetrics") or {}
    if "numTargetRowsInserted" in metrics:
        return int(metrics["numTargetRowsInserted"]) + int(metrics.get("numTargetRowsUpdated", 0))
    return int(metrics.get("numOutputRows", 0))


def rows_written(path: Root, since: int | None, version: int) -> int | None:
    """Rows the commits after version `since` up to `version` inserted or updated, or
    the table's rows at `version` when `since` is None (all of them new); None when
    those commits changed no data (there are none, or only compactions, vacuums and
    empty micro-batches) or the table is empty."""
    if since is None:
        rows = add_actions(path, version).column("num_records").to_pylist()
        return sum(n or 0 for n in rows) or None
    table = open_table(path)
    changes = [
        commit
        for commit in table.history(limit=max(table.version() - since, 0))
        if since < int(commit["version"]) <= version
        and commit.get("operation") not in _NO_NEW_DATA
        and not _wrote_no_file(commit)
    ]
    return sum(commit_rows(commit) for commit in changes) if changes else None


def _wrote_no_file(commit: dict[str, Any]) -> bool:
    """An append of an empty micro-batch (Delta commits it, to record the batch)."""
    metrics = commit.get("operationMetrics") or {}
    return (
        commit.get("operation") in ("WRITE", "STREAMING UPDATE")
        and str(metrics.get("numFiles", "")) == "0"
    )
