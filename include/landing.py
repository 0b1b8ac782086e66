"""Landing files: which names are ingested, and whether a file can be read to its end.

Spark's text reader fails the whole micro-batch on a corrupt or truncated
gzip file, with no error of its own that names the file; and Hadoop's line
reader holds a line in memory whatever its length, so a small gzip file that
decompresses to gigabytes without a newline (a gzip bomb) runs the JVM out of
memory. `ignoreCorruptFiles` would skip the damage silently, which the
contract forbids. So bronze lists each micro-batch's new files first and
vets every gzip file here, decompressing it as a stream in constant memory:
only files that pass are handed to Spark, and a file that does not becomes one
quarantine row saying why (`unreadable_file_reason`). None of its lines is
ingested: the sender re-delivers the file repaired under a new name, and the
lines before the damage would then arrive twice.

Plain files are not read twice: their bytes are what Spark reads, and the
line-size rule applies to them as to every line.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LANDING_SUFFIXES = (".json", ".jsonl", ".gz")
LANDING_FILES = "*.{" + ",".join(suffix[1:] for suffix in LANDING_SUFFIXES) + "}"
GZIP_SUFFIX = ".gz"
# Spark's binaryFile schema, which a stream must state; `content` is never selected.
BINARY_FILE_SCHEMA = "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"
UNREADABLE = "unreadable file"
# A decompressed line longer than this makes a gzip file unreadable: Spark
# would hold the whole line in memory before the line-size rule could reject it.
MAX_DECOMPRESSED_LINE_BYTES = 64 * 1024 * 1024
_CHUNK_BYTES = 1024 * 1024


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


def new_landing_files(spark: SparkSession, folder: Path, max_files_per_trigger: int) -> DataFrame:
    """A stream of the landing files of `folder` not listed before, one row per file.

    Spark's file source lists the folder and remembers every file it has
    handed out; `binaryFile` without its `content` column reads no byte of
    them. Columns: `_source_file` (the file's URI, as `_metadata.file_path`
    gives it when its lines are read) and `_ingested_at_us`, the micro-batch's
    timestamp (microseconds), which Spark's driver fixes when it plans the
    batch and keeps for a replay.
    """
    return (
        spark.readStream.format("binaryFile")
        .schema(BINARY_FILE_SCHEMA)
        .option("pathGlobFilter", LANDING_FILES)
        .option("maxFilesPerTrigger", max_files_per_trigger)
        # The default (7 days) silently skips files older than the newest seen
        # one by more than that; a late-arriving old file must still be read.
        .option("maxFileAge", "36500d")
        .load(str(folder))
        .select(
            F.col("_metadata.file_path").alias("_source_file"),
            F.unix_micros(F.current_timestamp()).alias("_ingested_at_us"),
        )
    )


def read_lines(spark: SparkSession, files: list[str]) -> DataFrame:
    """The lines of landing files (URIs from `new_landing_files`): `value`, `_source_file`."""
    paths = [_glob_escaped(str(local_path(uri))) for uri in files]
    return (
        spark.read.format("text")
        .load(paths)
        .select("value", F.col("_metadata.file_path").alias("_source_file"))
    )


def _glob_escaped(path: str) -> str:
    """`path` with Hadoop's glob characters escaped: Spark globs every path it loads."""
    return re.sub(r"([\\\[\]{}*?])", r"\\\1", path)


def local_path(uri: str) -> Path:
    """The local path of a `file:` URI as Spark writes it (`_metadata.file_path`, file logs)."""
    return Path(unquote(urlparse(uri).path))


def unreadable_files(uris: list[str], max_line_bytes: int) -> dict[str, str]:
    """The files of `uris` that Spark must not read, with the reason why.

    Files are vetted in parallel: zlib decompresses outside the GIL.
    """
    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        reasons = pool.map(
            lambda uri: unreadable_file_reason(local_path(uri), max_line_bytes), uris
        )
        return {uri: reason for uri, reason in zip(uris, reasons, strict=True) if reason}


def unreadable_file_reason(path: Path, max_line_bytes: int) -> str | None:
    """Why Spark must not read `path`, as a quarantine reason, or None when it may.

    Only gzip files are checked: decompressed chunk by chunk to the end (so a
    truncated stream, a bad checksum or bytes that are not gzip at all are
    found), keeping no more than the length of the current line.
    """
    if not path.name.endswith(GZIP_SUFFIX):
        return None
    line_limit = max(MAX_DECOMPRESSED_LINE_BYTES, max_line_bytes)
    try:
        with gzip.open(path, "rb") as stream:
            too_long = _has_line_longer_than(stream, line_limit)
    except (OSError, EOFError, zlib.error) as error:
        return f"{UNREADABLE}: corrupt or truncated gzip ({error})"
    if too_long:
        return (
            f"{UNREADABLE}: a line longer than {line_limit:,} bytes after decompression "
            "(a gzip bomb?)"
        )
    return None


def _has_line_longer_than(stream: gzip.GzipFile, limit: int) -> bool:
    """Read `stream` to its end (or to the first line over `limit`), a chunk at a time.

    Only the length of the line still open at the end of a chunk is kept: a
    line that ends within the chunk it started in is shorter than a chunk.
    """
    open_line = 0
    while chunk := stream.read(_CHUNK_BYTES):
        # Spark's text reader ends a line at \n, \r or \r\n.
        first_end = _find_line_end(chunk)
        if first_end < 0:
            open_line += len(chunk)
        elif open_line + first_end > limit:
            return True
        else:
            open_line = len(chunk) - _rfind_line_end(chunk) - 1
        if open_line > limit:
            return True
    return False


def _find_line_end(chunk: bytes) -> int:
    ends = [i for i in (chunk.find(b"\n"), chunk.find(b"\r")) if i >= 0]
    return min(ends, default=-1)


def _rfind_line_end(chunk: bytes) -> int:
    return max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
