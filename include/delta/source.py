"""A Delta table as a Spark streaming source (Python Data Source API).

Offsets are positions in the table's history: `{"table": t, "version": v,
"index": i}` means every data file of versions before `v`, and the first `i`
data files of version `v`, of table `t` have been read (the table is in the
offset so that a checkpoint says what its stream has read; see
`include.checkpoints`). A new query starts at version 0, so it reads the
whole table and then each appended version exactly once; with
`startingVersion` it starts there instead (a stream restarted after its
checkpoint was lost and its output rebuilt by backfill).

- `Trigger.AvailableNow`: the end is fixed at the latest version when the
  query starts.
- Admission control: at most `maxFilesPerTrigger` files per micro-batch
  (a version's files may be split across batches).
- Files are read by executors in parallel, as Arrow batches.
- Only appends are streamed. A commit that removes data (overwrite, delete,
  merge) fails the query with the version and operation, unless
  `skipChangeCommits` is set (as in Delta's own source). Commits that only
  rearrange data (`dataChange=false`, e.g. OPTIMIZE) are skipped silently.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T

FORMAT = "lakehouse_delta"
DEFAULT_MAX_FILES_PER_TRIGGER = 1000
# Files per Spark task: enough to amortise task overhead, small enough to spread.
TARGET_PARTITION_BYTES = 64 * 1024 * 1024

DataFile = tuple[str, dict[str, str | None], int]  # (relative path, partition values, size)


class DeltaChangeError(RuntimeError):
    """The source table was changed in a way a stream of appends cannot follow."""


class DeltaFilesPartition(InputPartition):
    def __init__(self, table_path: str, files: list[DataFile]) -> None:
        super().__init__(files)
        self.table_path = table_path
        self.files = files


def latest_version(table_path: str) -> int:
    """The table's current version (read from the log, without listing its files)."""
    from deltalake import DeltaTable

    return DeltaTable(table_path, without_files=True).version()


class DeltaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str], schema: T.StructType) -> None:
        # Spark passes option names lower-cased (they are case-insensitive).
        options = {key.lower(): value for key, value in options.items()}
        self.table_path = str(Path(options["path"]).resolve())
        self.max_files = int(options.get("maxfilespertrigger", DEFAULT_MAX_FILES_PER_TRIGGER))
        if self.max_files < 1:
            raise ValueError(f"maxFilesPerTrigger must be at least 1, got {self.max_files}")
        self.skip_change_commits = options.get("skipchangecommits", "false").lower() == "true"
        self.starting_version = int(options.get("startingversion", 0))
        self.schema = schema
        self.target_version: int | None = None
        self._files_by_version: dict[int, list[DataFile]] = {}

    # -- history -------------------------------------------------------------

    def _data_files(self, version: int) -> list[DataFile]:
        """The files a version appended, in commit order; raises on non-append changes."""
        if version not in self._files_by_version:
            self._files_by_version[version] = self._parse_commit(version)
        return self._files_by_version[version]

    def _parse_commit(self, version: int) -> list[DataFile]:
        commit = Path(self.table_path) / "_delta_log" / f"{version:020d}.json"
        try:
            lines = commit.read_text().splitlines()
        except FileNotFoundError:
            raise DeltaChangeError(
                f"{self.table_path}: version {version} is no longer in the Delta log (log "
                "retention removed it before this stream read it). Rebuild the downstream "
                "layer by backfill and restart its stream from a new checkpoint."
            ) from None
        actions = [json.loads(line) for line in lines if line.strip()]
        operation = next(
            (a["commitInfo"].get("operation", "?") for a in actions if "commitInfo" in a), "?"
        )
        changes = [
            a["remove"] for a in actions if "remove" in a and a["remove"].get("dataChange", True)
        ]
        # A backfill's replacement of a range that held no files removes nothing,
        # but its rows are a recomputation, not new data.
        replaced = any(
            str(a["commitInfo"].get("lakehouseOperation", "")).startswith("REPLACE")
            for a in actions
            if "commitInfo" in a
        )
        if changes or replaced:
            if self.skip_change_commits:
                return []
            raise DeltaChangeError(
                f"{self.table_path}: version {version} ({operation}) rewrote data "
                f"({len(changes)} file(s) removed); a streaming read follows appends only. "
                "Set skipChangeCommits=true to ignore such commits, or restart the stream "
                "from a new checkpoint."
            )
        for action in actions:
            metadata = action.get("metaData")
            if metadata and version > 0 and self.schema is not None:
                names = [f["name"] for f in json.loads(metadata["schemaString"])["fields"]]
                if names != self.schema.names:
                    raise DeltaChangeError(
                        f"{self.table_path}: version {version} changed the schema to {names}; "
                        f"this stream reads {self.schema.names}. Restart it from a new checkpoint."
                    )
        return [
            (unquote(add["path"]), add.get("partitionValues") or {}, int(add.get("size", 0)))
            for add in (a["add"] for a in actions if "add" in a)
            if add.get("dataChange", True)
        ]

    # -- offsets -------------------------------------------------------------

    def _offset(self, version: int, index: int) -> dict[str, Any]:
        return {"table": self.table_path, "version": version, "index": index}

    def initialOffset(self) -> dict[str, Any]:
        return self._offset(self.starting_version, 0)

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxFiles(self.max_files)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target_version = latest_version(self.table_path)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        last = (
            self.target_version
            if self.target_version is not None
            else latest_version(self.table_path)
        )
        budget = float("inf") if isinstance(limit, ReadAllAvailable) else limit_files(limit)
        version, index = start["version"], start["index"]
        while version <= last and budget > 0:
            files = self._data_files(version)
            take = int(min(len(files) - index, budget))
            index += take
            budget -= take
            if index < len(files):
                break
            version, index = version + 1, 0
        return self._offset(version, index)

    def reportLatestOffset(self) -> dict[str, Any]:
        return self._offset(latest_version(self.table_path) + 1, 0)

    def commit(self, end: dict[str, int]) -> None:
        for version in [v for v in self._files_by_version if v < end["version"]]:
            del self._files_by_version[version]

    # -- planning and reading ------------------------------------------------

    def _files_between(self, start: dict[str, int], end: dict[str, int]) -> list[DataFile]:
        files: list[DataFile] = []
        version, index = start["version"], start["index"]
        while (version, index) < (end["version"], end["index"]):
            version_files = self._data_files(version)
            stop = end["index"] if version == end["version"] else len(version_files)
            files.extend(version_files[index:stop])
            version, index = version + 1, 0
        return files

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[DeltaFilesPartition]:
        groups: list[list[DataFile]] = []
        group_bytes = TARGET_PARTITION_BYTES
        for data_file in self._files_between(start, end):
            if group_bytes + data_file[2] > TARGET_PARTITION_BYTES:
                groups.append([])
                group_bytes = 0
            groups[-1].append(data_file)
            group_bytes += data_file[2]
        return [DeltaFilesPartition(self.table_path, group) for group in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, DeltaFilesPartition)
        yield from read_data_files(partition.table_path, partition.files, self.schema)


def unread_files(offset: dict[str, Any]) -> int:
    """Data files appended to `offset["table"]` after a stream's offset (rewrites not counted)."""
    reader = DeltaStreamReader({"path": offset["table"], "skipChangeCommits": "true"}, None)  # type: ignore[arg-type]
    return len(reader._files_between(offset, reader.reportLatestOffset()))


def limit_files(limit: ReadLimit) -> int:
    if isinstance(limit, ReadMaxFiles):
        return limit.max_files
    raise ValueError(f"unsupported read limit {limit!r}")


def read_data_files(
    table_path: str, files: list[DataFile], schema: T.StructType
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the files, partition columns filled from the log, cast to `schema`."""
    from include.delta.schema import arrow_schema

    target = arrow_schema(schema)
    for relative_path, partition_values, _ in files:
        parquet = pq.ParquetFile(Path(table_path) / relative_path)
        stored = set(parquet.schema_arrow.names)
        for batch in parquet.iter_batches(columns=[n for n in target.names if n in stored]):
            columns = []
            for field in target:
                if field.name in stored:
                    columns.append(batch.column(field.name).cast(field.type))
                else:
                    value = partition_values.get(field.name)
                    columns.append(pa.array([value] * batch.num_rows, pa.string()).cast(field.type))
            yield pa.RecordBatch.from_arrays(columns, schema=target)


class DeltaStreamDataSource(DataSource):
    """`spark.readStream.format("lakehouse_delta").option("path", ...)`"""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> T.StructType:
        from include.delta.schema import spark_schema

        path = self.options.get("path")
        if not path:
            raise ValueError(f"{FORMAT} needs option 'path'")
        try:
            return spark_schema(path)
        except Exception as error:
            raise ValueError(f"{FORMAT}: no readable Delta table at {path}: {error}") from error

    def streamReader(self, schema: T.StructType) -> DeltaStreamReader:
        return DeltaStreamReader(dict(self.options), schema)


def read_stream(
    spark: SparkSession,
    table_path: str | Path,
    max_files_per_trigger: int | None = None,
    skip_change_commits: bool = False,
    starting_version: int | None = None,
) -> DataFrame:
    """A streaming DataFrame of every row appended to the Delta table (from `starting_version`)."""
    if not getattr(spark, "_lakehouse_delta_registered", False):
        spark.dataSource.register(DeltaStreamDataSource)
        spark._lakehouse_delta_registered = True  # type: ignore[attr-defined]
    options: dict[str, Any] = {
        "path": str(Path(table_path).resolve()),
        "skipChangeCommits": str(skip_change_commits).lower(),
    }
    if max_files_per_trigger:
        options["maxFilesPerTrigger"] = str(max_files_per_trigger)
    if starting_version is not None:
        options["startingVersion"] = str(starting_version)
    return spark.readStream.format(FORMAT).options(**options).load()
