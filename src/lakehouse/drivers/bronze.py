"""Bronze: landing JSON-lines files, and Kafka topics, to one Delta table per source,
plus quarantine.

Landing files: one `availableNow` query per source with its own checkpoint.
Before it starts, bronze lists the landing folder itself, following no link,
and writes a manifest for each new file (`lakehouse.storage.landing.scan_landing`
says why Spark's file source does not list the landing folder); entries it
never reads and files changed after their ingestion are reported by the run.
The stream is Spark's file source over the manifests (it remembers which it
has handed out); each micro-batch vets its gzip files, reads the lines of the
readable ones and parses them (`lakehouse.storage.landing` says why files are
not read by the stream itself).

Kafka, when configured: a second query per source reads its topic with
Spark's Kafka source (`run_kafka_source`; `run_bronze` says why two queries).

Both hand each micro-batch to a `BronzeWriter`: it is committed once to each
table (Delta's idempotent writes, keyed by the query id and the batch id).
Accepted lines go to `bronze/<source>`; rejected ones, and one row per
unreadable file, to `quarantine/<source>` with the reason, in the same
micro-batch. Each micro-batch also appends how many lines (or messages) it
read to the ingest ledger (`lakehouse/_meta/bronze_ledger`), exactly once per
batch like the data. The bronze data-quality checkpoint reconciles it with
the tables: for every source, lines read = bronze rows + quarantine rows.
"""

from __future__ import annotations

import datetime as dt
import operator
import re
from collections.abc import Callable, Iterator
from functools import partial, reduce
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import functions as F

from lakehouse.catalog import EXTRA_FIELDS, SOURCES, Source
from lakehouse.catalog.schemas import KAFKA_COLUMNS, QUARANTINE_SCHEMA, SOURCE_LINE, bronze_schema
from lakehouse.drivers.streaming import run_available_now
from lakehouse.errors import LakehouseError, printable
from lakehouse.quality.ledger import ensure_ledger, record_lines_read
from lakehouse.runtime.progress import StageResult
from lakehouse.runtime.settings import Settings
from lakehouse.runtime.spark import label_jobs
from lakehouse.storage.checkpoints import (
    UPGRADE_COMMAND,
    CheckpointError,
    files_read,
    read_position,
    read_sidecar,
    write_sidecar,
)
from lakehouse.storage.delta.log import columns, is_delta_table
from lakehouse.storage.kafka import TopicState, refuse_unreachable_brokers, topic_state
from lakehouse.storage.landing import (
    LINE_POSITION,
    LINES_SCHEMA,
    UNREADABLE,
    landing_uri,
    line_numbers,
    manifest_files,
    new_landing_files,
    prepare_files,
    read_lines,
    scan_landing,
    still_a_regular_file,
)
from lakehouse.storage.objects import Root, location, remove_tree
from lakehouse.storage.streams import StreamSink
from lakehouse.transforms.landing import RETYPED, drift, parse_landing_lines
from lakehouse.transforms.silver import ARRIVAL_ORDER

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

GONE = f"{UNREADABLE}: deleted, or no longer a regular file, when bronze came to read it"


def manifests_folder(settings: Settings, source: str) -> Root:
    """Where bronze keeps one manifest per landing file of `source` (`storage.landing`)."""
    return settings.checkpoint("landing_manifests", source)


def staging_folder(settings: Settings, source: str) -> Root:
    """Where bronze stages, for one micro-batch at a time, the plain copies Spark reads of
    the landing files it must not read itself (`storage.landing.prepare_files`)."""
    return settings.checkpoint("landing_staging", source)


class BronzeWriter:
    """Commits parsed micro-batches of one input of a source to bronze and quarantine.

    Accepted lines (or messages) go to `bronze/<source>`, rejected ones to
    `quarantine/<source>`, each micro-batch once per table (the query's id and
    the batch id), and the ledger gets how many it read. `skip_files` and
    `skip_offsets`: per table, the landing files and the Kafka messages (the
    highest offset per topic and partition) it already holds, after
    `lakehouse recover`.
    """

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        source: Source,
        checkpoint: Root,
        skip_files: dict[str, list[str]] | None = None,
        skip_offsets: dict[str, dict[str, dict[str, int]]] | None = None,
    ) -> None:
        self.spark, self.settings, self.source = spark, settings, source
        refuse_dropped_fields(settings, source)
        self.bronze = StreamSink(
            spark,
            settings.table("bronze", source.name),
            bronze_schema(source),
            checkpoint,
            add_columns=True,
        )
        self.quarantine = StreamSink(
            spark,
            settings.table("quarantine", source.name),
            QUARANTINE_SCHEMA,
            checkpoint,
            add_columns=True,
        )
        self.skip_files = skip_files or {}
        self.skip_offsets = skip_offsets or {}
        self.lines_read = 0
        self.drift = Drift()

    @property
    def tables(self) -> list[Root]:
        return [self.bronze.table_path, self.quarantine.table_path]

    @property
    def skips(self) -> bool:
        return bool(self.skip_files or self.skip_offsets)

    def _new_lines(self, frame: DataFrame, table: str) -> DataFrame:
        """The rows `table` does not hold yet, after `lakehouse recover`: lines of
        other files, messages past the highest offset it holds of their partition."""
        files = self.skip_files.get(table)
        if files:
            frame = frame.where(~F.col("_source_file").isin(files))
        held = [
            (F.col("_kafka_topic") == topic)
            & (F.col("_kafka_partition") == int(partition))
            & (F.col("_kafka_offset") <= offset)
            for topic, partitions in self.skip_offsets.get(table, {}).items()
            for partition, offset in partitions.items()
        ]
        if held:
            frame = frame.where(~F.coalesce(reduce(operator.or_, held), F.lit(False)))
        return frame

    def write(self, batch: DataFrame, batch_id: int) -> None:
        """`batch`: the parser's output (`lakehouse.transforms.landing`) for one micro-batch."""
        for column in KAFKA_COLUMNS:
            if column.name not in batch.columns:
                batch = batch.withColumn(column.name, F.lit(None).cast(column.dataType))
        # Parsed once, read three times (bronze, quarantine, count). On disk, not
        # in memory: a micro-batch can be one landing file of any size, and
        # caching it in memory ran a 1 GiB file out of a 1 GiB heap.
        batch.persist(StorageLevel.DISK_ONLY)
        try:
            numbered, by_outcome, drifted = _numbered(batch)
            if drifted:
                self.drift.add(numbered)
            accepted = self._new_lines(numbered.where(F.col("_reject_reason").isNull()), "bronze")
            rejected = self._new_lines(
                numbered.where(F.col("_reject_reason").isNotNull()).withColumnRenamed(
                    "_reject_reason", "reason"
                ),
                "quarantine",
            )
            # After a recovery, lines the tables already hold are not counted again.
            counts = by_outcome
            if self.skips:
                counts = {True: accepted.count(), False: rejected.count()}
            # A table gets no commit for a batch without rows for it: an empty
            # commit would start the streams downstream and their checks for nothing.
            if counts[True]:
                self.bronze.write(accepted, batch_id)
            if counts[False]:
                self.quarantine.write(rejected, batch_id)
            batch_lines = counts[True] + counts[False]
            record_lines_read(
                self.spark,
                self.settings,
                self.source.name,
                self.bronze.app_id,
                batch_id,
                batch_lines,
            )
            self.lines_read += batch_lines
        finally:
            batch.unpersist()

    def finish(self, result: StageResult) -> StageResult:
        # Spark counts the files (or messages) of each batch; the lines are what bronze reports.
        result.rows_in = self.lines_read
        result.notices += self.drift.notices(self.settings)
        result.rows_out = {
            "bronze": self.bronze.rows_written,
            "quarantine": self.quarantine.rows_written,
        }
        return result


def refuse_dropped_fields(settings: Settings, source: Source) -> None:
    """Stop when bronze holds a column of a field the catalog no longer declares: a
    Delta table keeps its columns, and its rows their values."""
    path = settings.table("bronze", source.name)
    if not is_delta_table(path):
        return
    declared = bronze_schema(source).names
    gone = [name for name in columns(path) if name not in declared]
    if gone:
        raise LakehouseError(
            f"bronze/{source.name} has column(s) {', '.join(gone)}, which the catalog no "
            f"longer declares for {source.name}. A table keeps its columns and the values "
            "its rows hold: declare them again among the source's optional_fields (nobody "
            "needs to send them). See docs/operations.md, 'Promoting a field'."
        )


class Drift:
    """The fields of a source's lines the catalog does not expect, over a run's batches:
    per field, the lines that held it undeclared (kept in bronze's `_extra_fields`) or as
    another JSON type than the declared string (quarantined), their JSON types, and
    the first such line's location."""

    def __init__(self) -> None:
        # (kind, field) -> lines, JSON types, first location
        self.fields: dict[tuple[str, str], tuple[int, set[str], str]] = {}

    def add(self, numbered: DataFrame) -> None:
        """Count a micro-batch's drift (one job, on lines that hold some)."""
        location = F.concat_ws(":", "_source_file", F.col(SOURCE_LINE.name).cast("string"))
        items = numbered.select(
            F.explode(drift(F.col(EXTRA_FIELDS), F.col("_reject_reason"))).alias("item"),
            F.struct(*ARRIVAL_ORDER, location.alias("at")).alias("arrival"),
        )
        found = (
            items.groupBy("item.kind", "item.field")
            .agg(
                F.count(F.lit(1)).alias("lines"),
                F.collect_set("item.type").alias("types"),
                F.min("arrival").alias("earliest"),
            )
            .collect()
        )
        for row in found:
            lines, types, first = self.fields.get((row["kind"], row["field"]), (0, set(), ""))
            self.fields[(row["kind"], row["field"])] = (
                lines + row["lines"],
                types | set(row["types"]),
                first or row["earliest"]["at"],
            )

    def notices(self, settings: Settings) -> list[str]:
        """One line per field, for the run's output, report and Airflow note."""
        root = str(settings.data_root).rstrip("/") + "/"
        said = []
        for (kind, name), (lines, found, first) in sorted(self.fields.items()):
            at = first.split(root, 1)[-1]
            types = sorted("null" if json == "void" else json for json in found)
            what = (
                f"undeclared field '{name}' ({', '.join(types)})"
                f" in {lines:,} line(s), kept in bronze's {EXTRA_FIELDS}"
                if kind == "undeclared"
                else f"field '{name}' sent as {', '.join(types)} instead of a string"
                f" in {lines:,} line(s), quarantined"
            )
            said.append(f"drift: {what}; first at {printable(at)}")
        return said


def _numbered(batch: DataFrame) -> tuple[DataFrame, dict[bool, int], int]:
    """The persisted parser's output with `_source_line` (a landing line's number in its
    file; null for a Kafka message), its lines accepted (True) and rejected (False), and
    how many hold drift (`Drift`): one job, which for landing lines counts each file
    split's lines and finds its first row (`line_numbers`)."""
    counted = [
        F.count(F.lit(1)).alias("lines"),
        F.count_if(F.col("_reject_reason").isNull()).alias("accepted"),
        F.count_if(F.col(EXTRA_FIELDS).isNotNull() | F.col("_reject_reason").rlike(RETYPED)).alias(
            "drifted"
        ),
    ]
    start, row = LINE_POSITION
    if start not in batch.columns:  # Kafka messages
        groups = batch.agg(*counted).collect()
        numbered = batch.withColumn(SOURCE_LINE.name, F.lit(None).cast(SOURCE_LINE.dataType))
    else:
        groups = (
            batch.groupBy("_source_file", start).agg(*counted, F.min(row).alias("first")).collect()
        )
        splits = [
            (group["_source_file"], group[start], group["lines"], group["first"])
            for group in groups
            if group[start] is not None  # not an unreadable file's row
        ]
        numbered = line_numbers(batch, splits)
    accepted = sum(group["accepted"] for group in groups)
    lines = sum(group["lines"] for group in groups)
    return numbered, {True: accepted, False: lines - accepted}, sum(g["drifted"] for g in groups)


def run_bronze_source(spark: SparkSession, settings: Settings, source: Source) -> StageResult:
    query = f"bronze/{source.name}"
    checkpoint = settings.checkpoint("bronze", source.name)
    folder = settings.landing / source.name
    folder.mkdir(parents=True, exist_ok=True)
    manifests = manifests_folder(settings, source.name)
    refuse_a_checkpoint_of_landing_paths(checkpoint, query, manifests)
    scan = scan_landing(folder, manifests, settings.data_root)
    # After `lakehouse recover --layer bronze` the new checkpoint reads every
    # landing file again: lines of files a table already holds are not written twice.
    writer = BronzeWriter(
        spark, settings, source, checkpoint, read_sidecar(checkpoint).get("skip_files", {})
    )

    # After a recovery: files a table holds lines of were read before. One that is gone
    # now (deleted since: landing folders are cleaned) is not an unreadable file.
    held = {file for files in writer.skip_files.values() for file in files}

    staging = staging_folder(settings, source.name)
    remove_tree(staging)  # what a killed run left

    def write_batch(files: DataFrame, batch_id: int) -> None:
        listed = files.collect()
        ingested_at_us = listed[0]["_ingested_at_us"] if listed else 0
        uris = [landing_uri(row["manifest"]) for row in listed]
        uris = [u for u in uris if u not in held or still_a_regular_file(u, settings.data_root)]
        try:
            lines = parsed_lines(spark, settings, source, uris, ingested_at_us, staging)
            writer.write(lines, batch_id)
        finally:
            remove_tree(staging)

    result = run_available_now(
        query,
        lambda: new_landing_files(spark, manifests, settings.max_files_per_trigger),
        checkpoint,
        write_batch,
        writer.tables,
        files=manifest_files(manifests),
        other_writers=[kafka_checkpoint(settings, source)],
    )
    result.notices = scan.notices
    if not settings.kafka_bootstrap_servers and not manifest_files(manifests):
        result.notices.append(
            f"landing/{source.name}/ has never held a landing file: nothing to ingest "
            "(`lakehouse generate --events 20000 --seed 42` writes sample events)"
        )
    return writer.finish(result)


def refuse_a_checkpoint_of_landing_paths(checkpoint: Root, query: str, manifests: Root) -> None:
    """A bronze checkpoint of lakehouse 0.2 or older: its stream listed the landing folder.

    Spark's file source would take every manifest for a new file and ingest
    every landing file again.
    """
    read = files_read(checkpoint, query)
    if read and any(location(path, manifests).parent != manifests for path in read):
        raise CheckpointError(
            checkpoint,
            query,
            "it was written by lakehouse 0.2 or older, whose bronze streams listed the "
            "landing folders themselves; bronze now reads a manifest per landing file.",
            f"To upgrade, run `{UPGRADE_COMMAND}` once (see docs/operations.md, 'Upgrading').",
        )


def parsed_lines(
    spark: SparkSession,
    settings: Settings,
    source: Source,
    uris: list[str],
    ingested_at_us: int,
    staging: Root,
) -> DataFrame:
    """Every line of a micro-batch's files parsed, plus one row per unreadable file.

    Files are prepared before Spark reads anything (`lakehouse.storage.landing`): an
    unreadable one becomes a quarantine row and is not read at all, so it can
    neither fail the batch nor exhaust memory. So does a file deleted, or
    swapped for a link, after its manifest was written. Spark reads the staged
    copies (in `staging`) of the files it must not read itself.
    """
    ingested_at = F.timestamp_micros(F.lit(ingested_at_us))
    root = settings.data_root
    gone = {uri: GONE for uri in uris if not still_a_regular_file(uri, root)}
    files = prepare_files(
        [uri for uri in uris if uri not in gone], staging, settings.max_line_bytes, root
    )
    unreadable = gone | files.unreadable
    parse = parse_landing_lines(source, settings.max_line_bytes, settings.future_tolerance)
    lines = read_lines(spark, files.read) if files.read else spark.createDataFrame([], LINES_SCHEMA)
    parsed = lines.withColumn("_ingested_at", ingested_at).transform(parse)
    if not unreadable:
        return parsed
    damaged = spark.createDataFrame(
        list(unreadable.items()), "_source_file string, _reject_reason string"
    )
    return parsed.unionByName(
        damaged.withColumn("raw", F.lit("")).withColumn("_ingested_at", ingested_at),
        allowMissingColumns=True,
    )


def kafka_checkpoint(settings: Settings, source: Source) -> Root:
    return settings.checkpoint("bronze_kafka", source.name)


def run_kafka_source(spark: SparkSession, settings: Settings, source: Source) -> StageResult:
    """The messages of the source's topic since the last run into bronze and quarantine.

    Spark's Kafka source keeps the offsets in the checkpoint; the first run
    starts at the earliest offsets. A message's ingestion time is the micro-
    batch's timestamp, which Spark keeps in its offset log: a replayed batch
    parses (and so accepts or rejects) every message exactly as the first try did.
    """
    topic = settings.kafka_topic(source.name)
    query = f"bronze/{source.name}[kafka]"
    checkpoint = kafka_checkpoint(settings, source)
    state = topic_state(spark, settings.kafka_bootstrap_servers or "", topic)
    if state is None:
        # Spark's Kafka source would fail with a stack trace (the brokers here do not
        # create topics on demand): nothing to read yet.
        absent = StageResult(query, caught_up=True)
        absent.notices = [f"topic '{topic}' does not exist (yet): nothing read"]
        return absent
    sidecar = read_sidecar(checkpoint)
    refuse_another_topic(checkpoint, query, source, state, sidecar)
    sidecar = remember_topic(checkpoint, query, state, sidecar)
    # After `lakehouse recover --layer bronze` the new checkpoint reads the topic from
    # its earliest offsets: messages a table already holds are not written twice.
    skip = sidecar.get("skip_offsets", {})
    writer = BronzeWriter(spark, settings, source, checkpoint, skip_offsets=skip)
    parse = parse_landing_lines(source, settings.max_line_bytes, settings.future_tolerance)

    def messages() -> DataFrame:
        stream = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", settings.kafka_bootstrap_servers)
            .option("subscribe", topic)
            # Messages of a producer's aborted transaction are never ingested.
            .option("kafka.isolation.level", "read_committed")
            # A new checkpoint's start; `recover --kafka-source S --from latest` sets the end.
            .option("startingOffsets", sidecar.get(STARTING_OFFSETS, "earliest"))
            .option("failOnDataLoss", str(settings.kafka_fail_on_data_loss).lower())
            .option("maxOffsetsPerTrigger", settings.kafka_max_offsets_per_trigger)
            .load()
        )
        return stream.select(
            # A message without a value (a tombstone) is an empty line.
            F.coalesce(F.col("value").cast("string"), F.lit("")).alias("value"),
            F.format_string("kafka:%s/%d/%d", "topic", "partition", "offset").alias("_source_file"),
            F.current_timestamp().alias("_ingested_at"),
            F.col("topic").alias("_kafka_topic"),
            F.col("partition").alias("_kafka_partition"),
            F.col("offset").alias("_kafka_offset"),
        )

    try:
        result = run_available_now(
            query,
            messages,
            checkpoint,
            lambda batch, batch_id: writer.write(batch.transform(parse), batch_id),
            writer.tables,
            other_writers=[settings.checkpoint("bronze", source.name)],
        )
    except Exception as error:
        if not KAFKA_DATA_LOSS.search(str(error)):
            raise
        raise LakehouseError(data_loss_message(query, topic, str(error))) from error
    return writer.finish(result)


# In a Kafka checkpoint's `lakehouse.json`: the topic it reads (`storage.kafka.TopicState`),
# and, after `lakehouse recover --kafka-source`, where a new checkpoint starts.
KAFKA_TOPIC = "kafka_topic"
STARTING_OFFSETS = "starting_offsets"


def topic_change(
    checkpoint: Root, query: str, now: TopicState, sidecar: dict[str, Any]
) -> str | None:
    """Why the topic `now` is not the one the checkpoint read before; None when it is.

    Another id (a topic deleted and created again), a partition gone, or
    offsets behind what the checkpoint recorded: the oldest message Kafka
    holds (that only moves on), or the end of the latest micro-batch Spark
    planned (its Kafka offsets, `{"topic": {"partition": offset}}`).
    """
    seen = sidecar.get(KAFKA_TOPIC) or {}
    if seen.get("id") and seen["id"] != now.id:
        return f"its id is {now.id}, the topic read before had id {seen['id']}"
    position = read_position(checkpoint, query)
    read = (position.offsets[0] if position and position.offsets else {}).get(now.name, {})
    marks = [
        ("the oldest message was at", seen.get("earliest", {}), now.earliest),
        ("the stream had read up to", read, now.latest),
    ]
    for what, before, after in marks:
        for partition, offset in sorted(before.items()):
            current = after.get(int(partition))
            if current is None:
                return f"its partition {partition} is gone"
            if current < int(offset):
                return (
                    f"its partition {partition} is at offset {current}, but {what} offset "
                    f"{offset} (its offsets moved backwards)"
                )
    return None


def refuse_another_topic(
    checkpoint: Root, query: str, source: Source, now: TopicState, sidecar: dict[str, Any]
) -> None:
    """Stop before reading a topic that is not the one the checkpoint (its `sidecar`) read."""
    why = topic_change(checkpoint, query, now, sidecar)
    if why is None:
        return
    command = f"lakehouse recover --kafka-source {source.name} --from"
    raise LakehouseError(
        f"{query}: topic '{now.name}' is not the topic this stream read before: {why} "
        "(deleted and created again?). Reading on would skip messages it holds. Choose "
        f"where to start: `{command} earliest` reads every message it holds now; "
        f"`{command} latest` reads only messages published after that command. "
        "See docs/kafka.md, 'A topic created again'."
    )


def remember_topic(
    checkpoint: Root, query: str, now: TopicState, sidecar: dict[str, Any]
) -> dict[str, Any]:
    """Record the topic the checkpoint reads (its id, its oldest offsets), when it changed;
    the sidecar as it is now."""
    if sidecar.get(KAFKA_TOPIC) == now.recorded():
        return sidecar
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    recorded = {"query": query, "created": created, **sidecar, KAFKA_TOPIC: now.recorded()}
    write_sidecar(checkpoint, recorded)
    return recorded


# Spark's errors for offsets a checkpoint holds that Kafka no longer has (KAFKA_DATA_LOSS.*).
KAFKA_DATA_LOSS = re.compile(r"KAFKA_DATA_LOSS|Some data may have been lost")


def data_loss_message(query: str, topic: str, spark_error: str) -> str:
    found = KAFKA_DATA_LOSS.search(spark_error)
    detail = " ".join(spark_error[found.start() :].split()) if found else ""
    return (
        f"{query}: messages of topic '{topic}' were deleted by Kafka (its retention) before "
        "bronze read them; the run stopped at the gap (messages before it are in bronze, "
        "none after it). To go on without them, run "
        "once with LAKEHOUSE_KAFKA_FAIL_ON_DATA_LOSS=false (bronze then continues from the "
        "oldest message Kafka still has); to avoid it, run more often than the topic's "
        f"retention.ms or raise it (docs/kafka.md). Spark said: {detail[:300]}"
    )


def bronze_queries(
    spark: SparkSession, settings: Settings
) -> list[Callable[[], list[StageResult]]]:
    """Per source, one unit of work: its landing files, then its Kafka topic when one
    is configured. The sources' units share no table but the ledger (blind appends,
    which Delta commits side by side): they can run at the same time.

    Two queries per source, not one reading both inputs: each input keeps its own
    checkpoint, so turning Kafka on (or off) leaves the landing stream's
    checkpoint valid (Spark refuses a checkpoint whose query gained or lost a
    source), an expired topic stops only its own query, and the file stream
    keeps the manifests and file vetting it needs while Kafka's source keeps
    its offsets. Both commit to the same bronze and quarantine tables (each
    micro-batch once, keyed by its own query id), one after the other; the
    tables' checks run after both.
    """
    if settings.kafka_bootstrap_servers:
        refuse_unreachable_brokers(settings.kafka_bootstrap_servers)  # before anything is read
    ensure_ledger(spark, settings)  # written by every source's queries
    return [partial(run_source, spark, settings, source) for source in SOURCES.values()]


def run_source(spark: SparkSession, settings: Settings, source: Source) -> list[StageResult]:
    """The source's landing files, then its Kafka topic when one is configured."""
    label_jobs(spark, f"bronze/{source.name}")
    results = [run_bronze_source(spark, settings, source)]
    if settings.kafka_bootstrap_servers:
        label_jobs(spark, f"bronze/{source.name}[kafka]")
        results.append(run_kafka_source(spark, settings, source))
    return results


def run_bronze(spark: SparkSession, settings: Settings) -> Iterator[StageResult]:
    """Every bronze query, one source after the other (`bronze_queries`)."""
    for query in bronze_queries(spark, settings):
        yield from query()
