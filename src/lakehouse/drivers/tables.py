"""Streaming driver of silver and gold: one `availableNow` query per catalog table.

Each table of `lakehouse.catalog.TABLES` is built by its transform from its
inputs, each read as a stream of the input Delta table, and written by its
own query with its own checkpoint under `checkpoints/<layer>/<table>`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from lakehouse.catalog import Table, downstream_of, rules, tables_in
from lakehouse.catalog.schemas import table_schema
from lakehouse.drivers.closed import write_closed_windows
from lakehouse.drivers.late import record_late_dates
from lakehouse.drivers.streaming import run_available_now
from lakehouse.errors import LakehouseError
from lakehouse.runtime.progress import StageResult
from lakehouse.runtime.settings import Settings
from lakehouse.runtime.spark import label_jobs
from lakehouse.storage.checkpoints import (
    REBUILT_BY_BACKFILL,
    CheckpointError,
    read_position,
    read_sidecar,
    restart_version,
    write_sidecar,
)
from lakehouse.storage.delta import ensure_table
from lakehouse.storage.delta.log import appended_only
from lakehouse.storage.streams import StreamSink, read_stream
from lakehouse.transforms import gold, silver, user_state
from lakehouse.transforms.silver import state_key

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


# Each catalog table's transform factory, as the module that writes it registers it.
TRANSFORMS: dict[str, Callable[..., Callable[..., DataFrame]]] = {
    **silver.TRANSFORMS,
    **gold.TRANSFORMS,
    **user_state.TRANSFORMS,
}


def transform_of(table: Table, watermark_ms: int | None = None) -> Callable[..., DataFrame]:
    """The table's transform (`TRANSFORMS`), made with its parameters.

    A `state` table's factory also takes the batch watermark; streaming passes none.
    """
    factory = TRANSFORMS[table.id]
    if table.closing.kind == "state":
        return factory(watermark_ms=watermark_ms, **table.params)
    return factory(**table.params)


# The sidecar key of a stream's fingerprint, and the command that moves streams to new rules.
FINGERPRINT = "fingerprint"
MIGRATE_COMMAND = "lakehouse migrate"


def fingerprint(table: Table) -> dict[str, Any]:
    """What a stream's rows and state depend on: its rules' values, columns, inputs, state key.

    The state key is a deduplicated event table's (lakehouse 0.10 and older keyed it
    on the event id alone, and recorded none): Spark refuses a checkpoint's state
    under another key.
    """
    return {
        "rules": {name: str(rules().value(name)) for name in table.rules},
        "columns": [f"{name} {kind}" for name, kind in table.columns],
        "inputs": list(table.inputs),
        "state key": state_key(table.params["source"]) if table.first_write_wins else [],
    }


def fingerprint_changes(settings: Settings, table: Table) -> list[str]:
    """How the catalog differs from what the table's stream was started with ([]: it does not)."""
    recorded = read_sidecar(settings.checkpoint(table.layer, table.name)).get(FINGERPRINT)
    if recorded is None:
        return []
    now = fingerprint(table)
    changes = [
        f"{name}: {recorded['rules'].get(name, 'not used')} -> {value}"
        for name, value in now["rules"].items()
        if recorded["rules"].get(name) != value
    ]
    changes += [
        f"{name}: {value} -> not used"
        for name, value in recorded["rules"].items()
        if name not in now["rules"]
    ]
    for key in ("columns", "inputs", "state key"):
        if recorded.get(key, []) != now[key]:
            before = ", ".join(recorded.get(key, [])) or "not recorded"
            changes.append(f"{key}: {before} -> {', '.join(now[key])}")
    return changes


def changed_tables(settings: Settings) -> list[Table]:
    """Tables whose streams were started with other rules or columns than the catalog's."""
    return [table for table in tables_in("silver", "gold") if fingerprint_changes(settings, table)]


def _recorded_columns(settings: Settings, table: Table) -> dict[str, str] | None:
    """The columns, name to type, the table's stream was started with (None: not recorded)."""
    recorded = read_sidecar(settings.checkpoint(table.layer, table.name)).get(FINGERPRINT)
    if recorded is None or "columns" not in recorded:
        return None
    return dict(column.split(" ", 1) for column in recorded["columns"])


def columns_added(settings: Settings, table: Table) -> list[str]:
    """The nullable columns the catalog added at the end of the table's when that is all
    that changed since its stream started (a promoted field): `lakehouse migrate` adds
    them, rewriting no row and keeping the stream. [] for any other change."""
    before = _recorded_columns(settings, table)
    if before is None:
        return []
    recorded = read_sidecar(settings.checkpoint(table.layer, table.name))[FINGERPRINT]
    now = fingerprint(table)
    added = [name for name, _ in table.columns[len(before) :]]
    same_otherwise = all(recorded.get(key) == now[key] for key in ("rules", "inputs", "state key"))
    kept = list(before) == list(table.column_names[: len(before)])
    if same_otherwise and kept and added and set(added) <= set(table.nullable):
        return added
    return []


def refuse_dropped_columns(settings: Settings, table: Table) -> None:
    """A column the table's stream was started with that the catalog no longer declares,
    or declares with another type: a Delta table keeps its columns, and its rows their
    values, so no migration gets there."""
    before = _recorded_columns(settings, table) or {}
    now = dict(table.columns)
    gone = [f"{name} {kind}" for name, kind in before.items() if name not in now]
    retyped = [
        f"{name} {kind} -> {now[name]}"
        for name, kind in before.items()
        if now.get(name, kind) != kind
    ]
    if gone or retyped:
        said = "; ".join(
            [*(f"no longer declared: {c}" for c in gone), *(f"retyped: {c}" for c in retyped)]
        )
        raise LakehouseError(
            f"{table.id}: {said}. A table keeps the columns it has and the values its rows "
            "hold, so this cannot be migrated: declare the column again as it was (a field "
            "nobody sends any more is null from then on); to carry another type, declare a "
            "field of a new name. See docs/operations.md, 'Promoting a field'."
        )


def tables_to_migrate(settings: Settings) -> list[Table]:
    """The changed tables and every table computed from them whose rows change too: not
    those of a table that only gained nullable columns (`columns_added`)."""
    changed = changed_tables(settings)
    recomputed = {table.id for table in changed if not columns_added(settings, table)}
    ids = {table.id for table in changed}
    return [*changed, *(t for t in downstream_of(recomputed) if t.id not in ids)]


def add_columns(spark: SparkSession, settings: Settings, table: Table) -> list[str]:
    """Give the table the columns the catalog added (`columns_added`), through Delta's
    own schema evolution (`ALTER TABLE … ADD COLUMNS`, no data file rewritten), and
    record the new columns in its stream's checkpoint, which goes on from where it was."""
    added = columns_added(settings, table)
    ensure_table(
        spark,
        settings.table(table.layer, table.name),
        table_schema(table),
        list(table.partition_by),
        add_columns=True,
    )
    checkpoint = settings.checkpoint(table.layer, table.name)
    write_sidecar(checkpoint, {**read_sidecar(checkpoint), FINGERPRINT: fingerprint(table)})
    return added


def refuse_changed_rules(settings: Settings, layers: Iterable[str]) -> None:
    """Stop before anything runs if a stream of `layers` would mix old and new rules."""
    affected = [t for t in tables_to_migrate(settings) if t.layer in set(layers)]
    if not affected:
        return
    for table in affected:
        refuse_dropped_columns(settings, table)
    first = affected[0]
    changed = {t.id: fingerprint_changes(settings, t) for t in affected}
    changes = "; ".join(f"{table}: {', '.join(c)}" for table, c in changed.items() if c)
    raise CheckpointError(
        settings.checkpoint(first.layer, first.name),
        first.id,
        f"what these streams depend on changed since they started ({changes}). Their checkpoints, "
        "state and the rows they wrote follow the old values; running on would mix old and "
        "new.",
        f"To move the lakehouse over, run `{MIGRATE_COMMAND}`: it gives "
        f"{', '.join(t.id for t in affected)} new checkpoints and recomputes them by backfill "
        "over every date in bronze. See docs/operations.md, 'Changing a rule'.",
    )


def remember_fingerprint(settings: Settings, table: Table) -> None:
    """Record the catalog's rules and columns in a stream's checkpoint the first time."""
    checkpoint = settings.checkpoint(table.layer, table.name)
    sidecar = read_sidecar(checkpoint)
    if checkpoint.exists() and FINGERPRINT not in sidecar:
        write_sidecar(checkpoint, {**sidecar, FINGERPRINT: fingerprint(table)})


def source_stream(spark: SparkSession, settings: Settings, source: str, query: Table) -> DataFrame:
    """The appends to table `source` (`silver/clicks`) as a stream, for the query writing `query`.

    A backfill recomputes what is downstream itself, so its commits say
    `dataChange=false` and every stream skips them; streams of silver and
    gold tables also skip any other commit that rewrites rows. A new stream,
    and one `lakehouse recover` restarted, reads the table as it is now, then
    each new version (a checkpoint of lakehouse 0.2's `recover` may name
    where to start). The table as it is now is, for a table that was only
    ever appended to (a first run's), its commits from the first one: read so
    (`appended_only`), Delta skips building a snapshot's file list.
    """
    layer, name = source.split("/")
    path = settings.table(layer, name)
    checkpoint = settings.checkpoint(query.layer, query.name)
    start = restart_version(checkpoint, path)
    if start is None and read_position(checkpoint, query.id) is None and appended_only(path):
        start = 0
    return read_stream(spark, path, skip_change_commits=layer != "bronze", starting_version=start)


def write_table(spark: SparkSession, settings: Settings, table: Table) -> StageResult:
    """Stream the table's transform of its inputs into it, with one checkpoint.

    The query is built only if it has new input to read. Tables with a date
    column are partitioned by it; `upsert` tables MERGE on their keys (update
    output mode). A `first_write_wins` table (deduplicated events) gets each
    micro-batch through its transform once more, in batch (the first copy of
    each id in arrival order), and takes only rows whose keys it does not hold
    yet (a MERGE that inserts), so a copy arriving in a later micro-batch is
    not a second row. So does the first run of a stream `lakehouse recover`
    restarted: it reads its sources whole, to rebuild its state, and writes
    only rows whose keys the backfill did not write.
    """
    checkpoint = settings.checkpoint(table.layer, table.name)
    rebuilt = bool(read_sidecar(checkpoint).get(REBUILT_BY_BACKFILL))
    insert_new = (table.first_write_wins or rebuilt) and not table.upsert
    sink = StreamSink(
        spark,
        settings.table(table.layer, table.name),
        table_schema(table),
        checkpoint,
        partition_by=list(table.partition_by),
        merge_keys=list(table.keys) if table.upsert else [],
        insert_new_keys=list(table.keys) if insert_new else [],
        # A deduplicated event table's transform resolves a micro-batch's copies in batch.
        each_batch=transform_of(table) if table.first_write_wins else None,
    )
    source_paths = [settings.table(*source.split("/")) for source in table.inputs]

    def build() -> DataFrame:
        inputs = [source_stream(spark, settings, source, table) for source in table.inputs]
        return transform_of(table)(*inputs)

    result = run_available_now(
        table.id,
        build,
        checkpoint,
        sink,
        [sink.table_path],
        "update" if table.upsert else "append",
        sources=source_paths,
        after_run=lambda done: record_late_dates(spark, settings, done, checkpoint, source_paths),
    )
    result.rows_out = {table.name: sink.rows_written}
    result.upsert = table.upsert
    remember_fingerprint(settings, table)
    return result


def run_table(spark: SparkSession, settings: Settings, table: Table) -> list[StageResult]:
    """The table's stream, or the windows the query named by `closed_by` has closed."""
    label_jobs(spark, table.id)
    if table.closed_by is None:
        return [write_table(spark, settings, table)]
    result = write_closed_windows(spark, settings, table, transform_of(table))
    remember_fingerprint(settings, table)
    return [result]
