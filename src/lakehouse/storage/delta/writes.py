"""Writes to Delta tables through Spark's Delta connector, each one commit, each safe to repeat.

- `append`: a micro-batch's rows. With `app_id` and `version` (the streaming
  query's id and the batch id) it is Delta's idempotent write
  (`txnAppId`/`txnVersion`): a batch Spark runs again after a crash is
  committed once.
- `merge_upsert`: keyed upsert for current-state tables (`DeltaTable.merge`),
  idempotent the same way (Delta reads the app transaction from the session).
- `replace_range`: the backfill write. New rows for a date range replace
  everything the range held (`replaceWhere`), in one atomic commit that Delta
  checks for conflicts: if another writer appended to the range meanwhile,
  it fails instead of leaving those rows beside the recomputed ones.
- `replace_table`: the same for a table without dates (`gold/user_status`).
- `append_rows`: a few rows built on the driver (the event log, the ledger,
  data-quality results); on a local data root committed by delta-rs.

Predicates are built from validated identifiers and typed dates, never from
user-supplied text.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from lakehouse.errors import LakehouseError
from lakehouse.faults import crash_point
from lakehouse.storage.delta.log import (
    BACKFILL,
    STREAM_KEY,
    append_local,
    columns,
    commit_rows,
    is_delta_table,
    latest_commit,
)
from lakehouse.storage.objects import Root, S3Path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T

log = logging.getLogger(__name__)

# Delta's idempotent-write settings for commands that take no writer options (MERGE).
_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"


def _identifiers(df_columns: Sequence[str], names: Iterable[str], what: str) -> list[str]:
    found = list(names)
    bad = [name for name in found if name not in df_columns or not name.isidentifier()]
    if bad or not found:
        raise ValueError(f"{what} {found} must be non-empty columns of {list(df_columns)}")
    return found


def _stream_metadata(app_id: str | None, version: int | None, **extra: str) -> str:
    """Commit info every writer can read back: which stream and batch, or which operation."""
    found: dict[str, Any] = dict(extra)
    if app_id is not None and version is not None:
        found |= {STREAM_KEY: app_id, "batchId": version}
    return json.dumps(found, sort_keys=True)


def ensure_table(
    spark: SparkSession,
    path: Root,
    schema: T.StructType,
    partition_by: Sequence[str] = (),
    add_columns: bool = False,
) -> None:
    """Create an empty table if none exists, so that readers always find one.

    An existing table must have the same columns: a mismatch is reported, not
    silently evolved. With `add_columns`, columns the schema has and the table
    lacks are added to it where the schema has them, as long as the table's
    columns keep their order (nullable, a commit each; older rows read null).
    """
    from delta.tables import DeltaTable

    if is_delta_table(path):
        found = columns(path)
        added = [name for name in schema.names if name not in found]
        if add_columns and added and [n for n in schema.names if n in found] == found:
            for index, field in enumerate(schema.fields):
                if field.name in added:
                    position = "FIRST" if index == 0 else f"AFTER `{schema.names[index - 1]}`"
                    spark.sql(
                        f"ALTER TABLE delta.`{path}` ADD COLUMNS "
                        f"(`{field.name}` {field.dataType.simpleString()} {position})"
                    )
            log.info("%s: added column(s) %s", path, ", ".join(added))
            return
        if found != schema.names:
            raise LakehouseError(
                f"Delta table {path} has columns {found}, the job writes {schema.names}; "
                "migrate the table or write to a new location"
            )
        return
    builder = DeltaTable.createIfNotExists(spark).location(str(path)).addColumns(schema)
    if partition_by:
        builder = builder.partitionedBy(*partition_by)
    for key, value in stats_properties(schema, partition_by).items():
        builder = builder.property(key, value)
    builder.execute()


def stats_properties(schema: T.StructType, partition_by: Sequence[str] = ()) -> dict[str, str]:
    """A new table's statistics: its row counts, and the minimum and maximum of its times.

    Delta collects column statistics of every file it writes (by default of the
    first 32 columns), for data skipping. Readers here skip by the date
    partition or by time; statistics of ids and long strings (a landing
    file's path, a quarantined line) bought nothing and cost about a third of
    a write's time (docs/benchmarks.md). Row counts are always recorded.
    """
    from pyspark.sql import types as T

    times = [
        field.name
        for field in schema.fields
        if isinstance(field.dataType, T.TimestampType | T.DateType)
        and field.name not in partition_by
    ]
    if not times:
        return {"delta.dataSkippingNumIndexedCols": "0"}
    return {"delta.dataSkippingStatsColumns": ",".join(times)}


def append(
    df: DataFrame,
    path: Root,
    partition_by: Sequence[str] = (),
    app_id: str | None = None,
    version: int | None = None,
) -> None:
    """Append `df`; with `app_id` and `version`, at most once for that pair."""
    writer = df.write.format("delta").mode("append")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    if app_id is not None and version is not None:
        writer = writer.option("txnAppId", app_id).option("txnVersion", version)
    writer = writer.option("userMetadata", _stream_metadata(app_id, version))
    crash_point("write.before_commit")
    writer.save(str(path))
    crash_point("write.after_commit")


@contextmanager
def _session_transaction(
    spark: SparkSession, app_id: str | None, version: int | None
) -> Iterator[None]:
    """Delta's idempotent write for the commands run inside (a MERGE), then unset again."""
    if app_id is None or version is None:
        yield
        return
    spark.conf.set(_TXN_APP_ID, app_id)
    spark.conf.set(_TXN_VERSION, str(version))
    spark.conf.set(
        "spark.databricks.delta.commitInfo.userMetadata", _stream_metadata(app_id, version)
    )
    try:
        yield
    finally:
        spark.conf.unset(_TXN_APP_ID)
        spark.conf.unset(_TXN_VERSION)
        spark.conf.unset("spark.databricks.delta.commitInfo.userMetadata")


def merge_upsert(
    df: DataFrame,
    path: Root,
    keys: Iterable[str],
    app_id: str | None = None,
    version: int | None = None,
    update: bool = True,
) -> None:
    """Upsert `df` into the table on `keys`: update matches, insert the rest.

    With `update=False`, matches are left as they are: only rows whose keys
    the table does not hold are inserted. Keys match null to null.
    """
    from delta.tables import DeltaTable

    key_columns = _identifiers(df.columns, keys, "merge keys")
    if len(set(key_columns)) != len(key_columns):
        raise ValueError(f"duplicate merge keys {key_columns}")
    condition = " AND ".join(f"target.`{key}` <=> source.`{key}`" for key in key_columns)
    spark = df.sparkSession
    crash_point("write.before_commit")
    with _session_transaction(spark, app_id, version):
        merge = (
            DeltaTable.forPath(spark, str(path))
            .alias("target")
            .merge(df.alias("source"), condition)
        )
        if update:
            merge = merge.whenMatchedUpdateAll()
        merge.whenNotMatchedInsertAll().execute()
    crash_point("write.after_commit")


class ConcurrentWriteError(LakehouseError):
    """Another writer changed what a backfill replaces, while it ran: nothing was written."""


def _explain_conflict(error: Exception, path: Root, what: str) -> Exception:
    name = type(error).__name__
    if not name.startswith("Concurrent") and "DELTA_CONCURRENT" not in str(error):
        return error
    first = next((line for line in str(error).splitlines() if line.strip()), name)
    return ConcurrentWriteError(
        f"{path}: another writer committed to {what} while this backfill computed it "
        f"(Delta: {first.strip()[:300]}). Nothing was replaced. Let the other writer finish "
        "(`lakehouse run`, or the lakehouse_incremental DAG), then run the backfill again; "
        "writers on one data root must not overlap (the writer lock on one host, the "
        "Airflow pool lakehouse_writers across hosts)."
    )


def _replace(
    df: DataFrame,
    path: Root,
    predicate: str | None,
    what: str,
    overwrite_schema: bool = False,
) -> int:
    """Overwrite (all of the table, or the rows matching `predicate`) in one commit.

    The commit says `dataChange=false`: the streams that read this table skip it,
    as Delta's compactions are skipped, because a backfill writes the tables
    downstream itself (streaming them again would count the rows twice). It
    also carries an app transaction, which keeps Delta from relaxing its
    conflict check for `dataChange=false` commits (to snapshot isolation): the
    table's Serializable level applies, so a concurrent append to the range is
    a conflict, not a row beside the recomputed ones.
    """
    writer = (
        df.write.format("delta")
        .mode("overwrite")
        # Delta refuses a schema change in a commit without data change; a table
        # whose schema changes gets new streams downstream anyway (`lakehouse migrate`).
        .option("dataChange", str(overwrite_schema).lower())
        # A new app id each time: never taken for a replay of an earlier commit.
        .option("txnAppId", f"lakehouse-{BACKFILL}-{uuid.uuid4()}")
        .option("txnVersion", 0)
        .option("userMetadata", _stream_metadata(None, None, lakehouseOperation=BACKFILL))
    )
    if predicate is not None:
        writer = writer.option("replaceWhere", predicate)
    if overwrite_schema:
        writer = writer.option("overwriteSchema", "true")
    crash_point("write.before_commit")
    try:
        writer.save(str(path))
    except Exception as error:
        explained = _explain_conflict(error, path, what)
        if explained is error:
            raise
        raise explained from error
    crash_point("write.after_commit")
    return rows_committed(path)


def replace_range(
    df: DataFrame,
    path: Root,
    column: str,
    start: dt.date,
    end: dt.date,
    also: Iterable[dt.date] = (),
) -> int:
    """Atomically replace the rows whose `column` is in [start, end], or one of the dates
    `also`, with `df`.

    Every row of `df` must fall in those dates (Delta checks it); dates for which
    `df` has no rows end up empty. Returns the rows written.
    """
    (name,) = _identifiers(df.columns, [column], "range column")
    extra = sorted(set(also))
    if not all(_a_date(d) for d in (start, end, *extra)):
        raise TypeError("a range is given by dates")
    if start > end:
        raise ValueError(f"empty range {start}..{end}")
    predicate = f"`{name}` >= '{start.isoformat()}' AND `{name}` <= '{end.isoformat()}'"
    what = f"{name} {start}..{end}"
    if extra:
        predicate = f"({predicate}) OR `{name}` IN ({_date_list(extra)})"
        what += f" and {', '.join(map(str, extra))}"
    return _replace(df, path, predicate, what)


def _a_date(value: object) -> bool:
    return isinstance(value, dt.date) and not isinstance(value, dt.datetime)


def _date_list(dates: Iterable[dt.date]) -> str:
    return ", ".join(f"DATE'{day.isoformat()}'" for day in dates)


def replace_dates(df: DataFrame, path: Root, column: str, dates: Iterable[dt.date]) -> int:
    """Atomically replace the rows whose `column` is one of `dates` with `df` (one commit)."""
    (name,) = _identifiers(df.columns, [column], "date column")
    chosen = sorted(set(dates))
    if not chosen or not all(_a_date(d) for d in chosen):
        raise ValueError("give one date or more")
    listed = _date_list(chosen)
    return _replace(df, path, f"`{name}` IN ({listed})", f"{name} {', '.join(map(str, chosen))}")


def replace_table(df: DataFrame, path: Root, overwrite_schema: bool = False) -> int:
    """Atomically replace every row of the table with `df` (one commit); with
    `overwrite_schema`, its schema too (columns added, removed or retyped).

    The new columns stay nullable, as `ensure_table` creates them: a stream
    appends nullable columns, and Delta refuses those into NOT NULL ones.
    """
    rows = _replace(df, path, None, "the table", overwrite_schema)
    if overwrite_schema:
        for column in df.schema.fields:
            if not column.nullable:
                df.sparkSession.sql(
                    f"ALTER TABLE delta.`{path}` ALTER COLUMN `{column.name}` DROP NOT NULL"
                )
    return rows


def rows_committed(path: Root) -> int:
    """Rows the table's latest commit inserted or updated (Delta's operation metrics,
    read from the log: a Spark job per commit cost more than the commit of a small batch)."""
    return commit_rows(latest_commit(path))


def append_rows(
    spark: SparkSession | None,
    path: Root,
    rows: list[dict[str, Any]],
    schema: T.StructType,
    app_id: str | None = None,
    version: int | None = None,
) -> None:
    """Append a few rows built on the driver (logs and metadata, not data); with `app_id`
    and `version`, at most once for that pair.

    On a local data root delta-rs commits them (`lakehouse.storage.delta.log.append_local`):
    no Spark job, and none of the table state a Spark write rebuilds first
    (docs/delta-lake.md). On S3, Spark does, whose commits go through the
    fenced log store.
    """
    if isinstance(path, S3Path):
        if spark is None:
            raise ValueError(f"{path}: appending to a table on S3 takes a Spark session")
        append(spark.createDataFrame(rows, schema), path, app_id=app_id, version=version)
        return
    from pyspark.sql.pandas.types import to_arrow_schema

    crash_point("write.before_commit")
    append_local(
        path,
        rows,
        to_arrow_schema(schema, timezone="UTC"),
        app_id,
        version,
        _stream_metadata(app_id, version),
    )
    crash_point("write.after_commit")
