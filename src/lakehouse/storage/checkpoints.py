"""Streaming checkpoints: check them before a query starts, say what they have read.

A checkpoint (`checkpoints/<layer>/<table>`) is Spark's memory of a stream:
its query id (`metadata`), the source offsets of every planned micro-batch
(`offsets/<n>`), the batches that completed (`commits/<n>`) and the state
store. Next to Spark's files we keep `lakehouse.json`: which query the
checkpoint belongs to, the version of each source table the stream had read
and its latest completed micro-batch at its last successful run and, after a
recovery, where its stream restarts. What a stream read is known from that,
not from Spark's or Delta's offset formats, which belong to them: source
offsets are only compared, never read. From an offsets file we take only the
watermark the batch ran with (Spark's `batchWatermarkMs`).

`guard` runs before each query starts and turns a damaged checkpoint into an
error that names it and says how to recover, instead of a JVM stack trace or,
worse, a silent replay:

- missing (deleted) while the query's tables hold batches committed by a
  stream: starting over would read every input again and duplicate it;
- truncated or unreadable `metadata`, `offsets` or `commits` files;
- older than the tables it writes (restored from a backup): the sink would
  skip the replayed batches as already committed and lose their data;
- belonging to another query;
- written by the Delta source of lakehouse 0.1 (delta-rs, before Spark's own
  Delta connector), which Spark's Delta source cannot continue from.

Failures that only Spark sees (an incompatible change to a stateful query,
damaged state-store files) are wrapped by `explain_failure` with the same
recovery advice.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lakehouse.errors import LakehouseError
from lakehouse.storage.delta.log import (
    committed_batch,
    is_delta_table,
    latest_version,
    restores_after,
    streams_that_wrote,
    unread_commits,
)
from lakehouse.storage.objects import Root, location, path_of_uri, write_atomically

SIDECAR = "lakehouse.json"
# In `lakehouse.json` of a stream `lakehouse recover` restarted over tables its
# backfill rebuilt, until its first successful run (`lakehouse.drivers.tables.write_table`).
REBUILT_BY_BACKFILL = "rebuilt_by_backfill"
# Beside it: the watermark that backfill applied to the table (ms), and its inputs'
# versions right after it. Rows its inputs gained since, at or below that watermark, are
# late to the backfill (`lakehouse.drivers.late.record_late_dates`).
BACKFILL_WATERMARK = "backfill_watermark_ms"
BACKFILLED_VERSIONS = "backfilled_versions"
# Brings a data root of an older version to this one (docs/operations.md, 'Upgrading').
UPGRADE_COMMAND = "lakehouse recover --layer bronze --layer silver --layer gold"
RETIRED = "_retired"
# In `lakehouse.json`: the stream's latest completed micro-batch at its last successful run.
COMPLETED_BATCH = "completed_batch"


def recovery_advice(query: str) -> str:
    layer = query.split("/")[0]
    rebuild = (
        "restarts the bronze streams so that they skip the landing files and Kafka "
        "messages already in bronze and quarantine"
        if layer == "bronze"
        else f"rebuilds the {layer} tables by backfill from bronze and restarts the {layer} "
        "streams, which rebuild their state without writing a row twice"
    )
    return (
        f"To recover, run `lakehouse recover --layer {layer}`: it moves the {layer} "
        f"checkpoints aside (kept under checkpoints/{RETIRED}/) and {rebuild}. "
        "See docs/operations.md, 'Recovering a stream'."
    )


class CheckpointError(LakehouseError):
    """A checkpoint that cannot be used as it is."""

    def __init__(
        self, checkpoint: Root, query: str, problem: str, advice: str | None = None
    ) -> None:
        self.checkpoint = checkpoint
        self.query = query
        super().__init__(
            f"checkpoint {checkpoint} of stream {query}: {problem} "
            f"{advice or recovery_advice(query)}"
        )


@dataclass(frozen=True)
class Position:
    """What a checkpoint says its stream has done."""

    query_id: str
    planned: int | None  # latest micro-batch with offsets
    completed: int | None  # latest micro-batch with a commit
    offsets: list[dict[str, Any]] = field(default_factory=list)  # of the latest planned batch


def read_sidecar(checkpoint: Root) -> dict[str, Any]:
    path = checkpoint / SIDECAR
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text()))


def write_sidecar(checkpoint: Root, content: dict[str, Any]) -> None:
    checkpoint.mkdir(parents=True, exist_ok=True)
    write_atomically(checkpoint / SIDECAR, json.dumps(content, indent=2, sort_keys=True))


def restart_version(checkpoint: Root, table: Root) -> int | None:
    """Where a recovered stream starts reading `table`; None: from its first version."""
    versions = read_sidecar(checkpoint).get("starting_versions", {})
    version = versions.get(str(table.resolve()))
    return None if version is None else int(version)


def latest_versions(tables: Sequence[Root]) -> dict[str, int]:
    """Each existing table's latest version, keyed as `lakehouse.json` keys them."""
    return {str(t.resolve()): latest_version(t) for t in tables if is_delta_table(t)}


def record_read(
    checkpoint: Root,
    versions: dict[str, int],
    written: dict[str, int] | None = None,
    batch: int | None = None,
) -> None:
    """After a successful run: the stream has read every version up to these.

    Taken before the query started (an `availableNow` query reads at least up
    to the versions current at its start), so they never claim too much.
    `written`: the versions of the tables it writes after the run; `batch`: its
    latest completed micro-batch then.
    """
    sidecar = read_sidecar(checkpoint)
    sidecar["read_versions"] = {**sidecar.get("read_versions", {}), **versions}
    if written:
        sidecar["written_versions"] = {**sidecar.get("written_versions", {}), **written}
    if batch is not None:
        sidecar[COMPLETED_BATCH] = batch
    # A recovered stream's first run is done; its offsets and state say the rest.
    sidecar.pop("starting_versions", None)
    for key in (REBUILT_BY_BACKFILL, BACKFILL_WATERMARK, BACKFILLED_VERSIONS):
        sidecar.pop(key, None)
    write_sidecar(checkpoint, sidecar)


def unread_versions(checkpoint: Root, query: str, sources: Sequence[Root]) -> dict[Root, list[int]]:
    """Per source table, the versions the stream may not have read yet.

    From `lakehouse.json`: the versions read at the last successful run, or,
    for a stream `lakehouse recover` restarted and that has not run since,
    the versions it starts at. A source the sidecar says nothing about (a
    stream that never ran) counts as wholly unread.
    """
    sidecar = read_sidecar(checkpoint)
    position = read_position(checkpoint, query)
    if position is None:
        read = {t: v - 1 for t, v in sidecar.get("starting_versions", {}).items()}
    else:
        read = sidecar.get("read_versions", {}) if position.planned == position.completed else {}
    unread: dict[Root, list[int]] = {}
    for table in sources:
        if not is_delta_table(table):
            continue
        version = read.get(str(table.resolve()))
        versions = (
            list(range(latest_version(table) + 1))
            if version is None
            else unread_commits(table, int(version))
        )
        if versions:
            unread[table] = versions
    return unread


def _log_entries(checkpoint: Root, path: Root, query: str) -> list[Any]:
    """A Spark metadata-log file: a version line (`v1`), then one JSON value per line."""
    text = path.read_text(errors="replace")
    lines = text.split("\n")
    try:
        if not re.fullmatch(r"v\d+", lines[0]) or len(lines) < 2:
            raise ValueError("no version line")
        return [None if line == "-" else json.loads(line) for line in lines[1:] if line]
    except ValueError:
        raise CheckpointError(
            checkpoint,
            query,
            f"{path} is truncated or not a Spark log file ({len(text)} bytes).",
        ) from None


def _latest(folder: Root) -> Root | None:
    numbered = [p for p in folder.glob("*") if p.name.isdigit()] if folder.is_dir() else []
    return max(numbered, key=lambda p: int(p.name), default=None)


def _query_id(checkpoint: Root) -> str | None:
    """The query id of a checkpoint, None if it has none (yet) or it is unreadable."""
    try:
        return str(json.loads((checkpoint / "metadata").read_text())["id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_position(checkpoint: Root, query: str) -> Position | None:
    """None for a checkpoint Spark has not started yet; raises if it is damaged."""
    metadata = checkpoint / "metadata"
    planned = _latest(checkpoint / "offsets")
    if not metadata.exists():
        if planned is not None:
            raise CheckpointError(checkpoint, query, "its metadata file (the query id) is missing.")
        return None
    try:
        query_id = str(json.loads(metadata.read_text())["id"])
    except (ValueError, KeyError, TypeError):
        raise CheckpointError(checkpoint, query, f"{metadata} is damaged.") from None
    completed = _latest(checkpoint / "commits")
    offsets: list[dict[str, Any]] = []
    if planned is not None:
        offsets = [o for o in _log_entries(checkpoint, planned, query)[1:] if isinstance(o, dict)]
    if completed is not None:
        _log_entries(checkpoint, completed, query)
    return Position(
        query_id,
        int(planned.name) if planned else None,
        int(completed.name) if completed else None,
        offsets,
    )


def batches_with_input(checkpoint: Root, query: str, after: int | None) -> dict[int, int]:
    """Each completed micro-batch after batch `after` that read input: its watermark (ms).

    A batch read input when its source offsets differ from the batch
    before's (Spark also plans batches that only move the watermark on).
    The watermark is the one the batch ran with (`batchWatermarkMs` of its
    offsets file): its stateful operators dropped rows at or below it.
    """
    position = read_position(checkpoint, query)
    if position is None or position.completed is None:
        return {}
    offsets = checkpoint / "offsets"
    first = -1 if after is None else after
    found: dict[int, int] = {}
    for batch in range(first + 1, position.completed + 1):
        if not (offsets / str(batch)).exists():
            continue  # purged by Spark (it keeps the latest hundred)
        if reads_input(checkpoint, query, batch):
            metadata = _log_entries(checkpoint, offsets / str(batch), query)[0]
            found[batch] = int((metadata or {}).get("batchWatermarkMs", 0))
    return found


def reads_input(checkpoint: Root, query: str, batch: int) -> bool:
    """Whether micro-batch `batch` read input: its source offsets differ from the batch
    before's. Spark also plans batches that only move the watermark on (no-data
    batches); they emit what the new watermark closes, often nothing.

    Spark writes a batch's offsets before it runs the batch. A batch whose own or
    previous offsets are gone (Spark keeps the latest hundred) counts as reading.
    """
    offsets = checkpoint / "offsets"
    current, before = offsets / str(batch), offsets / str(batch - 1)
    if batch == 0 or not current.exists() or not before.exists():
        return True
    return (
        _log_entries(checkpoint, current, query)[1:] != _log_entries(checkpoint, before, query)[1:]
    )


def files_read(checkpoint: Root, query: str) -> set[str]:
    """The absolute paths of every file a file-source stream has read.

    Spark logs the files of each micro-batch in `sources/0/<batch>` and, every
    tenth batch, writes all entries so far to `sources/0/<batch>.compact`
    (older log files may then be deleted). The latest compaction and the
    batches after it hold every file read.
    """
    folder = checkpoint / "sources" / "0"
    logs: dict[Root, tuple[int, bool]] = {}
    for path in folder.iterdir() if folder.is_dir() else []:
        batch, _, suffix = path.name.partition(".")
        if batch.isdigit() and suffix in ("", "compact"):
            logs[path] = (int(batch), suffix == "compact")
    compacted = max((batch for batch, compact in logs.values() if compact), default=-1)
    return {
        path_of_uri(str(entry["path"]))
        for path, (batch, compact) in logs.items()
        if batch > compacted or (compact and batch == compacted)
        for entry in _log_entries(checkpoint, path, query)
        if isinstance(entry, dict) and "path" in entry
    }


def caught_up(
    checkpoint: Root,
    query: str,
    files: Sequence[Root] | None = None,
    sources: Sequence[Root] = (),
) -> bool:
    """True when starting the stream would plan no micro-batch: it has read all its input.

    - a stream of landing files: every one of `files` (what its source would
      list now) is in its log of files read, and its last batch is committed.
      Spark's file source never reads a path twice, so nothing else could make
      a batch.
    - a stream of Delta tables (`sources`): no source has a version the
      stream may not have read (`unread_versions`).
    A new checkpoint is never caught up, unless `recover` made it and none of
    its sources has a version to start at yet.
    """
    position = read_position(checkpoint, query)
    if files is not None:
        if position is None or position.planned is None or position.planned != position.completed:
            return False
        read = files_read(checkpoint, query)
        return all(str(path.absolute()) in read for path in files)
    if position is None and not read_sidecar(checkpoint).get("starting_versions"):
        return False
    return bool(sources) and not unread_versions(checkpoint, query, sources)


def guard(
    checkpoint: Root, query: str, tables: list[Root], other_writers: Sequence[Root] = ()
) -> None:
    """Refuse to start `query` from a checkpoint that would lose or duplicate data.

    `tables` are the Delta tables the query's sink commits to; `other_writers`
    the checkpoints of other streams that commit to them too.
    """
    sidecar = read_sidecar(checkpoint)
    if sidecar.get("query", query) != query:
        raise CheckpointError(
            checkpoint, query, f"it belongs to stream {sidecar['query']}, not to {query}."
        )
    position = read_position(checkpoint, query)
    if position is None:
        writers = set().union(*(streams_that_wrote(t) for t in tables)) if tables else set()
        known = set(sidecar.get("retired_query_ids", []))
        known |= {_query_id(other) for other in other_writers} - {None}
        if writers - known:
            raise CheckpointError(
                checkpoint,
                query,
                f"it is missing, but {', '.join(str(t) for t in tables)} already hold micro-"
                f"batches of stream(s) {', '.join(sorted(writers - known))}. Starting a new "
                "checkpoint would read all of its input again and write it twice.",
            )
    else:
        if any({"table", "version", "index"} <= offset.keys() for offset in position.offsets):
            raise CheckpointError(
                checkpoint,
                query,
                "it was written by the Delta source of lakehouse 0.1 (Delta through delta-rs), "
                "which Spark's own Delta source cannot continue from.",
                f"To upgrade, run `{UPGRADE_COMMAND}` once: it restarts the bronze streams "
                "(skipping the landing files bronze holds), rebuilds the silver and gold tables "
                "by backfill from bronze and restarts their streams with new checkpoints (the "
                f"old ones are kept under checkpoints/{RETIRED}/). "
                "See docs/operations.md, 'Upgrading'.",
            )
        for table in tables:
            if not is_delta_table(table):
                continue
            committed = committed_batch(table, position.query_id)
            planned = -1 if position.planned is None else position.planned
            if committed is not None and committed > planned:
                raise CheckpointError(
                    checkpoint,
                    query,
                    f"it is older than {table}, which holds micro-batch {committed} of this "
                    f"stream while the checkpoint knows batches up to {position.planned} "
                    "(restored from a backup?). Replayed batches would be skipped as "
                    "already written and their data lost.",
                )
    _refuse_restored_tables(checkpoint, query, sidecar)
    if not sidecar:
        created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        write_sidecar(checkpoint, {"query": query, "created": created})


def _refuse_restored_tables(checkpoint: Root, query: str, sidecar: dict[str, Any]) -> None:
    """Refuse when a table the stream read or wrote is older than the stream recorded."""
    recorded = [
        (what, location(table, checkpoint), int(version))
        for what, key in (("read", "read_versions"), ("written", "written_versions"))
        for table, version in sidecar.get(key, {}).items()
    ]
    for what, table, version in recorded:
        if not is_delta_table(table):
            if what == "written":
                raise CheckpointError(
                    checkpoint,
                    query,
                    f"{table} is gone, but the stream had written it up to version {version}.",
                )
            continue  # a source that is not there yet, or deleted: Spark says so itself
        latest = latest_version(table)
        if latest < version:
            problem = (
                f"{table} is at version {latest}, older than version {version} that the "
                f"stream had {what} at its last run (a backup copied over it?)."
            )
        else:
            restores = [(at, to) for at, to in restores_after(table, version) if to < version]
            if not restores:
                continue
            at, to = restores[0]
            problem = (
                f"{table} was restored to version {to} (Delta RESTORE, committed as version "
                f"{at}), older than version {version} that the stream had {what} at its last "
                "run."
            )
        raise CheckpointError(
            checkpoint,
            query,
            f"{problem} Going on would leave this stream's tables out of step with it.",
        )


_STATE_ERROR = re.compile(
    r"STATE_STORE|StateSchema|state schema|CANNOT_LOAD_STATE_STORE|"
    r"STREAMING_STATEFUL_OPERATOR|Incomplete log file|RocksDB|changelog",
    re.IGNORECASE,
)


def explain_failure(error: Exception, checkpoint: Root, query: str) -> Exception:
    """A query failure caused by its checkpoint or state, as a CheckpointError; else unchanged."""
    text = str(error)
    if isinstance(error, LakehouseError) or not _STATE_ERROR.search(text):
        return error
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return CheckpointError(
        checkpoint,
        query,
        f"Spark cannot continue from it: {first[:400]} (an incompatible change to the query, "
        "or damaged state files).",
    )
