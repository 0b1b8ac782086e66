"""Bronze: landing JSON-lines files to one Delta table per source, plus quarantine.

One `availableNow` query per source with its own checkpoint. Before it
starts, bronze lists the landing folder itself, following no link, and
writes a manifest for each new file (`include.storage.landing.scan_landing` says why
Spark's file source does not list the landing folder); entries it never
reads and files changed after their ingestion are reported by the run. The
stream is Spark's file source over the manifests (it remembers which it has
handed out); each micro-batch vets its gzip files, reads the lines of the
readable ones and parses them (`include.storage.landing` says why files are not
read by the stream itself). Each micro-batch is committed once to each table
(Delta's idempotent writes, keyed by the query id and the batch id).
Accepted lines go to `bronze/<source>`; rejected ones, and one row per
unreadable file, to `quarantine/<source>` with the reason, in the same
micro-batch.

Each micro-batch also appends how many lines it read to the ingest ledger
(`lakehouse/_meta/bronze_ledger`), exactly once per batch like the data. The
bronze data-quality checkpoint reconciles it with the tables: for every
source, lines read = bronze rows + quarantine rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import functions as F

from include.delta import StreamSink
from include.settings import Settings
from include.storage.checkpoints import UPGRADE_COMMAND, CheckpointError, files_read, read_sidecar
from include.storage.landing import (
    UNREADABLE,
    landing_uri,
    manifest_files,
    new_landing_files,
    read_lines,
    scan_landing,
    still_a_regular_file,
    unreadable_files,
)
from jobs.catalog import SOURCES, Source
from jobs.drivers.streaming import run_available_now
from jobs.quality.ledger import record_lines_read
from jobs.reports.progress import StageResult
from jobs.schemas import QUARANTINE_SCHEMA, bronze_schema
from jobs.transforms.landing import parse_landing_lines

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

GONE = f"{UNREADABLE}: deleted, or no longer a regular file, when bronze came to read it"


def manifests_folder(settings: Settings, source: str) -> Path:
    """Where bronze keeps one manifest per landing file of `source` (`include.storage.landing`)."""
    return settings.checkpoint("landing_manifests", source)


def run_bronze_source(spark: SparkSession, settings: Settings, source: Source) -> StageResult:
    query = f"bronze/{source.name}"
    checkpoint = settings.checkpoint("bronze", source.name)
    folder = settings.landing / source.name
    folder.mkdir(parents=True, exist_ok=True)
    manifests = manifests_folder(settings, source.name)
    refuse_a_checkpoint_of_landing_paths(checkpoint, query, manifests)
    scan = scan_landing(folder, manifests, settings.data_root)
    bronze = StreamSink(
        spark,
        settings.table("bronze", source.name),
        bronze_schema(source),
        checkpoint,
        add_columns=True,
    )
    quarantine = StreamSink(
        spark, settings.table("quarantine", source.name), QUARANTINE_SCHEMA, checkpoint
    )
    # After `lakehouse recover --layer bronze` the new checkpoint reads every
    # landing file again: lines of files a table already holds are not written twice.
    already_in = read_sidecar(checkpoint).get("skip_files", {})
    lines_read = 0

    def new_lines(frame: DataFrame, table: str) -> DataFrame:
        files = already_in.get(table)
        return frame.where(~F.col("_source_file").isin(files)) if files else frame

    def write_batch(files: DataFrame, batch_id: int) -> None:
        nonlocal lines_read
        listed = files.collect()
        ingested_at_us = listed[0]["_ingested_at_us"] if listed else 0
        uris = [landing_uri(row["manifest"]) for row in listed]
        batch = parsed_lines(spark, settings, source, uris, ingested_at_us)
        # Parsed once, read three times (bronze, quarantine, count). On disk, not
        # in memory: a micro-batch can be one landing file of any size, and
        # caching it in memory ran a 1 GiB file out of a 1 GiB heap.
        batch.persist(StorageLevel.DISK_ONLY)
        try:
            accepted = new_lines(batch.where(F.col("_reject_reason").isNull()), "bronze")
            rejected = new_lines(
                batch.where(F.col("_reject_reason").isNotNull()).withColumnRenamed(
                    "_reject_reason", "reason"
                ),
                "quarantine",
            )
            if already_in:
                counts = {True: accepted.count(), False: rejected.count()}
            else:
                by_outcome = batch.groupBy(F.col("_reject_reason").isNull()).count().collect()
                counts = {True: 0, False: 0} | {row[0]: row[1] for row in by_outcome}
            # A table gets no commit for a batch without rows for it: an empty
            # commit would start the streams downstream and their checks for nothing.
            if counts[True]:
                bronze.write(accepted, batch_id)
            if counts[False]:
                quarantine.write(rejected, batch_id)
            batch_lines = counts[True] + counts[False]
            record_lines_read(spark, settings, source.name, bronze.app_id, batch_id, batch_lines)
            lines_read += batch_lines
        finally:
            batch.unpersist()

    result = run_available_now(
        query,
        lambda: new_landing_files(spark, manifests, settings.max_files_per_trigger),
        checkpoint,
        write_batch,
        [bronze.table_path, quarantine.table_path],
        files=manifest_files(manifests),
    )
    result.notices = scan.notices
    # Spark counts the files of each batch; the lines are what bronze reports.
    result.rows_in = lines_read
    result.rows_out = {"bronze": bronze.rows_written, "quarantine": quarantine.rows_written}
    return result


def refuse_a_checkpoint_of_landing_paths(checkpoint: Path, query: str, manifests: Path) -> None:
    """A bronze checkpoint of lakehouse 0.2 or older: its stream listed the landing folder.

    Spark's file source would take every manifest for a new file and ingest
    every landing file again.
    """
    read = files_read(checkpoint, query)
    if read and any(Path(path).parent != manifests for path in read):
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
) -> DataFrame:
    """Every line of a micro-batch's files parsed, plus one row per unreadable file.

    Gzip files are vetted before Spark reads anything (`include.storage.landing`): an
    unreadable one becomes a quarantine row and is not read at all, so it can
    neither fail the batch nor exhaust memory. So does a file deleted, or
    swapped for a link, after its manifest was written.
    """
    ingested_at = F.timestamp_micros(F.lit(ingested_at_us))
    unreadable = {uri: GONE for uri in uris if not still_a_regular_file(uri)}
    unreadable |= unreadable_files(
        [uri for uri in uris if uri not in unreadable], settings.max_line_bytes
    )
    readable = [uri for uri in uris if uri not in unreadable]
    parse = parse_landing_lines(source, settings.max_line_bytes, settings.future_tolerance)
    lines = (
        read_lines(spark, readable)
        if readable
        else spark.createDataFrame([], "value string, _source_file string")
    )
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


def run_bronze(spark: SparkSession, settings: Settings) -> Iterator[StageResult]:
    for source in SOURCES.values():
        yield run_bronze_source(spark, settings, source)
