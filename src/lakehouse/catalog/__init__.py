"""The lakehouse catalog: every source, table and business rule, declared once.

Everything else iterates over this module: the streaming drivers and the
batch backfill build each table from its entry, `parity`, `recover` and
`maintain` walk `TABLES`, the DAGs take their task and asset lists from it,
the CLI its layer names, data quality its suites (rendered with `RULES`),
the sample generator and the DuckDB reference their timings. No pyspark: the
Airflow scheduler imports it while parsing the DAGs. Tables and closing rules are
pydantic dataclasses, checked where they are declared.

To add a table: write its transform (`src/lakehouse/transforms/`, registered in its
module's `TRANSFORMS`), add one `Table` below and its suite
(`src/lakehouse/quality/suites/<layer>/<name>.json`). To change a rule, change
`RULES`; streams started with the old value then refuse to run until the lakehouse
is moved over (see docs/operations.md).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, get_args

from pydantic.dataclasses import dataclass as pydantic_dataclass

# The pipeline's layers, in order; the layers a backfill recomputes from bronze.
Layer = Literal["bronze", "silver", "gold"]
DerivedLayer = Literal["silver", "gold"]
LAYERS: tuple[Layer, ...] = get_args(Layer)
DERIVED_LAYERS: tuple[DerivedLayer, ...] = get_args(DerivedLayer)
EVENT_TIME = "event_time"
EVENT_DATE = "event_date"
ACTIONS = ("login", "view", "click", "purchase", "logout")
# gold/user_status's statuses; why silver/user_sessions' sessions ended.
STATUSES = ("active", "offline", "inactive")
END_REASONS = ("logout", "timeout")


@dataclass(frozen=True)
class Rules:
    """The business rules. Each is read where it is used, at run time, never copied."""

    # How late an event may arrive, per source (the watermark delay).
    watermark_delays: Mapping[str, dt.timedelta] = field(
        default_factory=lambda: MappingProxyType(
            {
                "impressions": dt.timedelta(hours=2),
                "clicks": dt.timedelta(hours=3),
                "user_actions": dt.timedelta(minutes=10),
            }
        )
    )
    # A click matches an impression up to this long after it (inclusive).
    attribution_window: dt.timedelta = dt.timedelta(hours=1)
    # A gap longer than this between a user's actions starts a new session.
    session_gap: dt.timedelta = dt.timedelta(minutes=30)
    # An active user with no action for longer than this is inactive.
    inactivity_timeout: dt.timedelta = dt.timedelta(minutes=60)
    # gold/ad_performance_hourly's window; gold/campaign_daily's window.
    performance_window: dt.timedelta = dt.timedelta(hours=1)
    campaign_window: dt.timedelta = dt.timedelta(days=1)
    # gold/actions_10min: window length and slide.
    actions_window: dt.timedelta = dt.timedelta(minutes=10)
    actions_slide: dt.timedelta = dt.timedelta(minutes=5)

    def value(self, name: str) -> dt.timedelta:
        """A rule by name; `<source>_delay` names a source's watermark delay."""
        if name.endswith("_delay"):
            return self.watermark_delays[name.removesuffix("_delay")]
        value = getattr(self, name, None)
        if not isinstance(value, dt.timedelta):
            raise KeyError(f"no rule {name!r}; the rules are {', '.join(self.names())}")
        return value

    def names(self) -> tuple[str, ...]:
        durations = [name for name, v in vars(self).items() if isinstance(v, dt.timedelta)]
        return (*(f"{s}_delay" for s in self.watermark_delays), *durations)


RULES = Rules()


def rules() -> Rules:
    """The rules in force: read at call time, so a test can swap `RULES`."""
    return RULES


def seconds(name: str) -> int:
    """A rule in whole seconds (Spark interval strings, SQL, the generator)."""
    return int(rules().value(name).total_seconds())


def micros(name: str) -> int:
    return int(rules().value(name).total_seconds() * 1_000_000)


@dataclass(frozen=True)
class Source:
    """An incoming event type: its required fields, in order, the id first.

    `optional_fields` are strings that may be missing or null, carried by bronze
    and the source's deduplicated silver table as their last columns. Declaring
    one that producers already send promotes it: bronze gains the column, and
    `lakehouse migrate` adds it to the silver table without rewriting a row; a
    backfill fills past dates from what bronze kept in `_extra_fields`
    (docs/operations.md, "Promoting a field").
    """

    name: str
    string_fields: tuple[str, ...]
    enums: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    optional_fields: tuple[str, ...] = ()

    @property
    def fields(self) -> tuple[str, ...]:
        return (*self.string_fields, EVENT_TIME)

    @property
    def key(self) -> str:
        return self.string_fields[0]

    @property
    def delay_rule(self) -> str:
        return f"{self.name}_delay"

    @property
    def watermark(self) -> dt.timedelta:
        return rules().value(self.delay_rule)


SOURCES: dict[str, Source] = {
    s.name: s
    for s in (
        Source("impressions", ("impression_id", "ad_id", "campaign_id", "user_id")),
        Source("clicks", ("click_id", "impression_id", "ad_id", "user_id")),
        Source("user_actions", ("event_id", "user_id", "action"), {"action": ACTIONS}),
    )
}


@pydantic_dataclass(frozen=True)
class Closing:
    """When streaming writes a row, stated for batch, which sees everything at once.

    - `final`: a row is final when written (deduplicated events);
    - `unmatched`: a row without a click once `impression_time <= watermark - held_back`;
    - `windows`: a window once its end (`start` column + the `length` rule)
      `<= watermark - held_back`;
    - `state`: the state function decides, given the watermark (sessions, status).

    `held_back` names a rule (the attribution join holds rows back by its window).
    A pydantic dataclass: a kind not among these, or windows without their length,
    is refused where the catalog declares it.
    """

    kind: Literal["final", "unmatched", "windows", "state"]
    held_back: str | None = None
    start: str = "window_start"
    length: str | None = None

    def __post_init__(self) -> None:
        if self.kind == "windows" and self.length is None:
            raise ValueError("a windows closing rule needs the window length")

    def held_back_us(self) -> int:
        return 0 if self.held_back is None else micros(self.held_back)


# Column types by name; src/lakehouse/catalog/schemas.py maps them to Spark's.
STRING, TIMESTAMP, LONG, DOUBLE, DATE = "string", "timestamp", "long", "double", "date"
BOOLEAN, STRINGS = "boolean", "array<string>"

Columns = tuple[tuple[str, str], ...]

# Bronze's bookkeeping columns, after a source's event fields (`schemas.bronze_schema`).
BRONZE_BOOKKEEPING: Columns = (("_ingested_at", TIMESTAMP), ("_source_file", STRING))
# Bronze's column of what a line held beyond its source's fields: the JSON text of an
# object of those fields and their values (null: nothing more). A string, not a VARIANT:
# a VARIANT column raises the table's protocol to reader 3 with the `variantType`
# feature, and the `deltalake` package (1.6) reads its values as two opaque binaries
# (docs/bronze.md). After `_source_line`, where `ensure_table` adds it to older tables.
EXTRA_FIELDS = "_extra_fields"
# A quarantined line: its text, why, and where it came from. `raw_base64` holds the
# exact bytes, base64-encoded, when the line is not valid UTF-8 (`raw` then shows it
# with replacement characters); it is the one column that may be empty.
QUARANTINE_COLUMNS: Columns = (
    ("raw", STRING),
    ("reason", STRING),
    ("raw_base64", STRING),
    ("_source_file", STRING),
    ("_ingested_at", TIMESTAMP),
)
QUARANTINE_NULLABLE = ("raw_base64",)

# The lakehouse's own tables, under lakehouse/_meta/<name>: what it did, for people
# and for its next runs.
META_TABLES: Mapping[str, Columns] = MappingProxyType(
    {
        # Every data-quality outcome (lakehouse.quality.validate).
        "dq_results": (
            ("run_id", STRING),
            ("validated_at", TIMESTAMP),
            ("layer", STRING),
            ("table_name", STRING),
            ("table_version", LONG),
            ("scope", STRING),
            ("expectation", STRING),
            ("description", STRING),
            ("severity", STRING),
            ("success", BOOLEAN),
            ("rows_checked", LONG),
            ("unexpected_count", LONG),
            ("observed", STRING),
            ("sample", STRING),
            ("docs_page", STRING),
        ),
        # Lines read per bronze micro-batch, which reconciliation holds against bronze
        # and quarantine (lakehouse.quality.ledger).
        "bronze_ledger": (
            ("source", STRING),
            ("query_id", STRING),
            ("batch_id", LONG),
            ("lines_read", LONG),
            ("recorded_at", TIMESTAMP),
        ),
        # Every micro-batch's progress: the event log (lakehouse.runtime.monitoring).
        "query_progress": (
            ("run_id", STRING),
            ("query", STRING),
            ("query_id", STRING),
            ("batch_id", LONG),
            ("started_at", TIMESTAMP),
            ("num_input_rows", LONG),
            ("processed_rows_per_second", DOUBLE),
            ("duration_ms", LONG),
            ("watermark", TIMESTAMP),
            ("state_rows", LONG),
            ("state_memory_bytes", LONG),
            ("rows_dropped_by_watermark", LONG),
            ("progress_json", STRING),
        ),
        # Dates of rows a stream dropped as late, and the dates backfills recomputed
        # (lakehouse.drivers.late).
        "late_dates": (
            (EVENT_DATE, DATE),
            ("query", STRING),
            ("rows_below_watermark", LONG),
            ("watermark", TIMESTAMP),
            ("detected_at", TIMESTAMP),
        ),
        "backfills": ((EVENT_DATE, DATE), ("layers", STRINGS), ("completed_at", TIMESTAMP)),
    }
)
# What two checks run on, computed for each run: lines read against rows written per
# source, and rows each query dropped as late (lakehouse.quality.validate).
RECONCILIATION_COLUMNS: Columns = (
    ("source", STRING),
    ("lines_read", LONG),
    ("bronze_rows", LONG),
    ("quarantine_rows", LONG),
    ("quarantine_share", DOUBLE),
)
LATE_DROPS_COLUMNS: Columns = (
    ("query", STRING),
    ("rows_in", LONG),
    ("dropped_late", LONG),
    ("late_share", DOUBLE),
)


@pydantic_dataclass(frozen=True)
class Table:
    """A Delta table of silver or gold, and how it is computed.

    Its transform is registered where it is written, in `lakehouse.transforms`
    (each module's `TRANSFORMS`): `factory(**params)` returns a function of the
    input DataFrames, in `inputs` order, that works on streaming and batch
    DataFrames alike; a `state` table's factory also takes the batch
    `watermark_ms`. `date_column` holds each row's UTC date for backfills
    and partitions the table (None: a current-state table, replaced whole).
    `rules` are the rules its rows depend on: a stream records their values
    and refuses to run on others. `closed_by` names the streaming query whose
    watermark closes the table's windows: such a table is not a stream of its
    own but written in batch, from that query's table (or from a table that
    query closes too), as the watermark closes its windows (`lakehouse.drivers.closed`).
    `first_write_wins`: a row whose keys the table already holds is never
    written again, however long after the first (the stream's own
    deduplication forgets a key once the watermark has passed it).

    The data-quality checks a table gets from this alone (`quality.implied`): every
    column not `nullable` is never null, each column of `enums` holds only its
    values, and `keys` identify a row (within an `event_date` partition, or in the
    whole table when it has no date column); a `first_write_wins` table's new keys
    are on no other date.

    A pydantic dataclass: each field's type is checked, and the columns a table names
    (its date column, keys, nullable and enum columns) must be its own, where it is
    declared; `_check` relates the tables to each other.
    """

    layer: DerivedLayer
    name: str
    description: str
    columns: tuple[tuple[str, str], ...]
    inputs: tuple[str, ...]
    keys: tuple[str, ...]
    closing: Closing
    watermark_sources: tuple[str, ...]
    rules: tuple[str, ...]
    date_column: str | None = EVENT_DATE
    params: Mapping[str, str] = field(default_factory=dict)
    upsert: bool = False
    closed_by: str | None = None
    first_write_wins: bool = False
    nullable: tuple[str, ...] = ()
    enums: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.layer}/{self.name}"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    @property
    def partition_by(self) -> tuple[str, ...]:
        return () if self.date_column is None else (self.date_column,)

    def __post_init__(self) -> None:
        if self.date_column is not None and self.date_column not in self.column_names:
            raise ValueError(f"{self.id}: date column {self.date_column} is not a column")
        for column in (*self.keys, *self.nullable, *self.enums):
            if column not in self.column_names:
                raise ValueError(f"{self.id}: {column} (a key, nullable or enum) is not a column")


def _event_columns(source: Source) -> tuple[tuple[str, str], ...]:
    """A deduplicated event table's columns: the source's fields, the date, then its
    optional fields, last, where declaring one adds it to the table."""
    return (
        *((name, STRING) for name in source.string_fields),
        (EVENT_TIME, TIMESTAMP),
        (EVENT_DATE, DATE),
        *((name, STRING) for name in source.optional_fields),
    )


def _deduplicated(source: Source) -> Table:
    return Table(
        "silver",
        source.name,
        f"{source.name}, one row per {source.key}: the first arrival wins",
        _event_columns(source),
        inputs=(f"bronze/{source.name}",),
        params={"source": source.name},
        keys=(source.key,),
        closing=Closing("final"),
        watermark_sources=(source.name,),
        rules=(source.delay_rule,),
        first_write_wins=True,
        nullable=source.optional_fields,
        enums=source.enums,
    )


_ATTRIBUTION_RULES = ("impressions_delay", "clicks_delay", "attribution_window")
_ATTRIBUTION = "silver/ad_attribution"

TABLES: tuple[Table, ...] = (
    *(_deduplicated(source) for source in SOURCES.values()),
    Table(
        "silver",
        "ad_attribution",
        "impressions left-outer-joined with the clicks on them within the attribution window",
        (
            ("impression_id", STRING),
            ("ad_id", STRING),
            ("campaign_id", STRING),
            ("user_id", STRING),
            ("impression_time", TIMESTAMP),
            ("click_id", STRING),
            ("click_time", TIMESTAMP),
            (EVENT_DATE, DATE),
        ),
        inputs=("silver/impressions", "silver/clicks"),
        keys=("impression_id", "click_id"),
        closing=Closing("unmatched", held_back="attribution_window"),
        watermark_sources=("impressions", "clicks"),
        rules=_ATTRIBUTION_RULES,
        # An impression without a click in the window: one row, its click empty.
        nullable=("click_id", "click_time"),
    ),
    Table(
        "silver",
        "user_sessions",
        "closed sessions of each user's actions, split by logout and by gaps",
        (
            ("session_id", STRING),
            ("user_id", STRING),
            ("session_start", TIMESTAMP),
            ("session_end", TIMESTAMP),
            ("action_count", LONG),
            ("end_reason", STRING),
            (EVENT_DATE, DATE),
        ),
        inputs=("silver/user_actions",),
        keys=("session_id",),
        closing=Closing("state"),
        watermark_sources=("user_actions",),
        rules=("user_actions_delay", "session_gap"),
        enums={"end_reason": END_REASONS},
    ),
    Table(
        "gold",
        "ad_performance_hourly",
        "impressions, clicks and CTR per ad, campaign and hour",
        (
            ("window_start", TIMESTAMP),
            ("window_end", TIMESTAMP),
            ("ad_id", STRING),
            ("campaign_id", STRING),
            ("impressions", LONG),
            ("clicks", LONG),
            ("ctr", DOUBLE),
            (EVENT_DATE, DATE),
        ),
        inputs=(_ATTRIBUTION,),
        keys=("ad_id", "campaign_id", "window_start"),
        closing=Closing("windows", "attribution_window", length="performance_window"),
        watermark_sources=("impressions", "clicks"),
        rules=(*_ATTRIBUTION_RULES, "performance_window"),
        closed_by=_ATTRIBUTION,
    ),
    Table(
        "gold",
        "campaign_daily",
        "impressions, clicks and CTR per campaign and UTC day",
        (
            ("campaign_id", STRING),
            ("day", DATE),
            ("impressions", LONG),
            ("clicks", LONG),
            ("ctr", DOUBLE),
        ),
        inputs=("gold/ad_performance_hourly",),
        keys=("campaign_id", "day"),
        closing=Closing("windows", "attribution_window", start="day", length="campaign_window"),
        watermark_sources=("impressions", "clicks"),
        rules=(*_ATTRIBUTION_RULES, "performance_window", "campaign_window"),
        date_column="day",
        closed_by=_ATTRIBUTION,
    ),
    Table(
        "gold",
        "actions_10min",
        "user actions per action and 10-minute window, sliding every 5 minutes",
        (
            ("window_start", TIMESTAMP),
            ("window_end", TIMESTAMP),
            ("action", STRING),
            ("actions", LONG),
            (EVENT_DATE, DATE),
        ),
        inputs=("silver/user_actions",),
        keys=("window_start", "window_end", "action"),
        closing=Closing("windows", length="actions_window"),
        watermark_sources=("user_actions",),
        rules=("user_actions_delay", "actions_window", "actions_slide"),
        enums={"action": ACTIONS},
    ),
    Table(
        "gold",
        "user_status",
        "each user's current status: active, offline or inactive",
        (
            ("user_id", STRING),
            ("status", STRING),
            ("last_action", STRING),
            ("last_event_time", TIMESTAMP),
        ),
        inputs=("silver/user_actions",),
        keys=("user_id",),
        closing=Closing("state"),
        watermark_sources=("user_actions",),
        rules=("user_actions_delay", "inactivity_timeout"),
        date_column=None,
        upsert=True,
        enums={"status": STATUSES, "last_action": ACTIONS},
    ),
)
TABLES_BY_ID: dict[str, Table] = {table.id: table for table in TABLES}


def table(table_id: str) -> Table:
    try:
        return TABLES_BY_ID[table_id]
    except KeyError:
        raise KeyError(f"no table {table_id!r} in the catalog") from None


def all_tables() -> tuple[Table, ...]:
    """The silver and gold tables in pipeline order: read at call time, as `rules()`, so
    a test can swap `TABLES` (and an entry of `TABLES_BY_ID`) for a changed catalog."""
    return TABLES


def tables_in(*layers: str) -> tuple[Table, ...]:
    return tuple(t for t in TABLES if t.layer in layers)


def bronze_tables() -> tuple[str, ...]:
    """The bronze and quarantine tables, one pair per source."""
    return (
        *(f"bronze/{s}" for s in SOURCES),
        *(f"quarantine/{s}" for s in SOURCES),
    )


def downstream_of(table_ids: set[str]) -> tuple[Table, ...]:
    """The tables computed, directly or not, from any of `table_ids`, in pipeline order."""
    found = set(table_ids)
    for entry in TABLES:
        if any(source in found for source in entry.inputs):
            found.add(entry.id)
    return tuple(t for t in TABLES if t.id in found and t.id not in table_ids)


def sql_parameters() -> dict[str, str]:
    """Rules as Spark SQL intervals, for expectation suites (`${attribution_window}`)."""
    current = rules()
    return {name: f"INTERVAL {seconds(name)} SECONDS" for name in current.names()} | {
        f"{name}_us": str(micros(name)) for name in current.names()
    }


def _check() -> None:
    for entry in TABLES:
        for name in entry.rules:
            RULES.value(name)
        one_input = TABLES_BY_ID.get(entry.inputs[0]) if len(entry.inputs) == 1 else None
        if entry.closed_by is not None and (
            entry.closing.kind != "windows"
            or one_input is None
            or entry.closed_by not in (one_input.id, one_input.closed_by)
            or one_input.date_column is None
        ):
            raise ValueError(
                f"{entry.id}: a table closed by {entry.closed_by} has windows and one input "
                "with a date column: that query's table, or a table it closes too"
            )
    order = [t.id for t in TABLES]
    for position, entry in enumerate(TABLES):
        for source in entry.inputs:
            if not source.startswith("bronze/") and source not in order[:position]:
                raise ValueError(f"{entry.id}: input {source} must come earlier in TABLES")


_check()
