"""Bronze: landing JSON-lines files to one Delta table per source, plus quarantine.

One `availableNow` query per source with its own checkpoint. The file source
remembers which files it has read; the Delta sink commits each micro-batch
once. Accepted lines go to `bronze/<source>`, rejected ones to
`quarantine/<source>` with the reason, in the same micro-batch.

Each micro-batch also appends how many lines it read to the ingest ledger
(`lakehouse/_meta/bronze_ledger`), exactly once per batch like the data. The
bronze data-quality checkpoint reconciles it with the tables: for every
source, lines read = bronze rows + quarantine rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import functions as F

from include.checkpoints import read_sidecar
from include.delta import DeltaStreamSink
from include.delta.writes import append_rows
from include.settings import Settings
from jobs.contract import QUARANTINE_SCHEMA, SOURCES, SourceSpec
from jobs.progress import StageResult
from jobs.streaming import run_available_now
from jobs.transforms.landing import parse_landing_lines

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LANDING_SUFFIXES = (".json", ".jsonl", ".gz")
LANDING_FILES = "*.{" + ",".join(suffix[1:] for suffix in LANDING_SUFFIXES) + "}"


def landing_files(folder: Path) -> list[Path] | None:
    """The files the landing stream of `folder` lists, as Spark's file source does.

    Spark skips names starting with `.` or `_` (unless they hold `=`). None
    when in doubt (a subfolder, which Spark may read as a partition): the
    stream is then started and Spark decides.
    """
    if not folder.is_dir():
        return []
    files = []
    for entry in folder.iterdir():
        name = entry.name
        if name.startswith(".") or (name.startswith("_") and "=" not in name):
            continue
        if not entry.is_file():
            return None
        if name.endswith(LANDING_SUFFIXES):
            files.append(entry)
    return files


def read_landing(spark: SparkSession, settings: Settings, source: SourceSpec) -> DataFrame:
    folder = settings.landing / source.name
    folder.mkdir(parents=True, exist_ok=True)
    return (
        spark.readStream.format("text")
        .option("pathGlobFilter", LANDING_FILES)
        .option("maxFilesPerTrigger", settings.max_files_per_trigger)
        # The default (7 days) silently skips files older than the newest seen
        # one by more than that; a late-arriving old file must still be read.
        .option("maxFileAge", "36500d")
        .load(str(folder))
        .select("value", F.col("_metadata.file_path").alias("_source_file"))
    )


LEDGER_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("query_id", pa.string()),
        ("batch_id", pa.int64()),
        ("lines_read", pa.int64()),
        ("recorded_at", pa.timestamp("us", tz="UTC")),
    ]
)


def ledger_path(settings: Settings) -> Path:
    return settings.meta("bronze_ledger")


def record_lines_read(
    settings: Settings, source: SourceSpec, query_id: str, batch_id: int, lines_read: int
) -> None:
    """One ledger row per micro-batch, committed once even when the batch is replayed."""
    row = {
        "source": source.name,
        "query_id": query_id,
        "batch_id": batch_id,
        "lines_read": lines_read,
        "recorded_at": dt.datetime.now(dt.UTC),
    }
    append_rows(
        ledger_path(settings),
        pa.Table.from_pylist([row], schema=LEDGER_SCHEMA),
        app_id=query_id,
        version=batch_id,
    )


def run_bronze_source(spark: SparkSession, settings: Settings, source: SourceSpec) -> StageResult:
    checkpoint = settings.checkpoint("bronze", source.name)
    bronze = DeltaStreamSink(
        settings.table("bronze", source.name), source.bronze_schema, checkpoint
    )
    quarantine = DeltaStreamSink(
        settings.table("quarantine", source.name), QUARANTINE_SCHEMA, checkpoint
    )

    def parsed() -> DataFrame:
        return (
            read_landing(spark, settings, source)
            .transform(parse_landing_lines(source, settings.max_line_bytes))
            .withColumn("_ingested_at", F.current_timestamp())
        )

    # After `lakehouse recover --layer bronze` the new checkpoint reads every
    # landing file again: lines of files a table already holds are not written twice.
    already_in = read_sidecar(checkpoint).get("skip_files", {})

    def new_lines(frame: DataFrame, table: str) -> DataFrame:
        files = already_in.get(table)
        return frame.where(~F.col("_source_file").isin(files)) if files else frame

    def write_batch(batch: DataFrame, batch_id: int) -> None:
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
            lines_read = accepted.count() + rejected.count() if already_in else batch.count()
            bronze.write(accepted, batch_id)
            quarantine.write(rejected, batch_id)
            record_lines_read(settings, source, bronze.app_id, batch_id, lines_read)
        finally:
            batch.unpersist()

    result = run_available_now(
        f"bronze/{source.name}",
        parsed,
        checkpoint,
        write_batch,
        [bronze.table_path, quarantine.table_path],
        files=landing_files(settings.landing / source.name),
    )
    result.rows_out = {"bronze": bronze.rows_written, "quarantine": quarantine.rows_written}
    return result


def run_bronze(spark: SparkSession, settings: Settings) -> Iterator[StageResult]:
    for source in SOURCES.values():
        yield run_bronze_source(spark, settings, source)
