"""Landing files: which are ingested, which are reported, and how Spark gets to read them.

`scan_landing` lists a landing folder (see there for why it, not Spark, does).

Spark's text reader cannot be trusted with every file a producer may send.
It fails the whole micro-batch, in an error that does not name the file, on
a corrupt or truncated gzip file, and its gzip codec (Hadoop's) refuses
files that gzip itself reads: zero bytes after the last member, a wrong
header checksum, reserved flag bits. Hadoop's `Path` cannot even name a file
with a `:` in its name (it takes `a:b` for a URI scheme when it builds the
file's checksum sibling or a glob match). And Hadoop's line reader holds a
line in memory whatever its length, so a small gzip file that decompresses to
gigabytes without a newline (a gzip bomb), or a plain file of gigabytes
without one, runs the JVM out of memory. `ignoreCorruptFiles` would skip the
damage silently, which the contract forbids.

So bronze prepares each micro-batch's new files here first (`prepare_files`),
reading each gzip file, each file whose name Spark cannot take, and each
plain file large enough to matter as a stream in constant memory. Python
decompresses gzip files: each is read to its end (every member's CRC-32 and
length checked; zero padding after the last member ignored, as gzip(1) does)
and its lines are written, decompressed, to a staged copy under a safe name,
which is what Spark reads; so is a plain file whose name Spark cannot take.
Spark never decompresses a landing file, so whatever Python read to its end
Spark reads too, and the lines keep their file's real name in `_source_file`.
A file that cannot be read becomes one quarantine row saying why
(`unreadable_file_reason`). None of its lines is ingested: the sender
re-delivers the file repaired under a new name, and the lines before the
damage would then arrive twice.

A plain file is vetted only if it is larger than the longest line Spark may
hold (64 MiB): a smaller one is not read twice, and the line-size rule
rejects each of its long lines on its own.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import hashlib
import json
import os
import re
import stat
import string
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import quote

from pyspark.sql import functions as F

from lakehouse.errors import LakehouseError, printable
from lakehouse.storage.objects import (
    ObjectStream,
    Root,
    S3Path,
    location,
    path_of_uri,
    relative,
    write_atomically,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LANDING_SUFFIXES = (".json", ".jsonl", ".gz")
LANDING_FILES = "*.{" + ",".join(suffix[1:] for suffix in LANDING_SUFFIXES) + "}"
GZIP_SUFFIX = ".gz"
UNREADABLE = "unreadable file"
# A line longer than this (after decompression) makes a file unreadable: Spark
# would hold the whole line in memory before the line-size rule could reject it.
MAX_READ_LINE_BYTES = 64 * 1024 * 1024
_CHUNK_BYTES = 1024 * 1024
# What java.net.URI leaves unquoted in a path: unreserved and punctuation characters.
_URI_PATH_CHARS = frozenset(string.ascii_letters + string.digits + "_-!.~'()*,;:$&+=/@")


@dataclass(frozen=True)
class LandingScan:
    """What one look at a landing folder found, beyond the files it hands to bronze."""

    # Entries that are never read (symbolic links, folders, other names), as report lines.
    not_read: list[str] = field(default_factory=list)
    # Files ingested before that have changed since (another size or modification time).
    changed: list[str] = field(default_factory=list)

    @property
    def notices(self) -> list[str]:
        return self.not_read + self.changed


def manifest_name(file_name: str) -> str:
    """The manifest of landing file `file_name`: one per name, whatever its content."""
    return hashlib.sha256(file_name.encode()).hexdigest() + ".json"


def scan_landing(folder: Root, manifests: Root, data_root: Root) -> LandingScan:
    """List `folder` without following any link; give each new file a manifest in `manifests`.

    Why not let Spark's file source list the landing folder: it follows
    symbolic links (a link to `/etc/shadow` would be ingested, a link to `/`
    listed recursively), reads the files of subfolders, and remembers only a
    path, so a file rewritten after it was ingested is skipped in silence.
    So the listing is ours: `os.scandir` with `lstat` semantics (on S3, one
    level of the prefix: objects are files, sub-prefixes folders). Every
    regular file with a supported name gets a manifest, a one-line JSON file
    (its path, size and modification time) written once, atomically, and
    named after the file's name (not synced to disk, at 2.5 ms a file: one
    that a power loss left empty is written again from its landing file by
    the next scan, before the stream reads it); bronze's stream is Spark's file source over
    the manifests, which keeps its exactly-once bookkeeping in the checkpoint
    as before. Paths in the returned lines are relative to `data_root`.
    """
    manifests.mkdir(parents=True, exist_ok=True)
    scan = LandingScan()
    for entry in sorted(_entries(folder), key=lambda e: e.name):
        if entry.name.startswith((".", "_")):
            continue  # files in flight and markers: left alone, silently
        shown = printable(relative(entry.path, data_root))
        if entry.problem:
            scan.not_read.append(f"{shown}: not read: {entry.problem}")
            continue
        manifest = manifests / manifest_name(entry.name)
        known = _read_manifest(manifest)
        if known is None:
            content = {"path": str(entry.path), "size": entry.size, "mtime_ns": entry.mtime_ns}
            write_atomically(manifest, json.dumps(content) + "\n", durable=False)
        elif (known["size"], known["mtime_ns"]) != (entry.size, entry.mtime_ns):
            scan.changed.append(
                f"{shown}: not read again: changed after it was ingested (size "
                f"{known['size']:,} -> {entry.size:,} bytes, modified "
                f"{_when(known['mtime_ns'])} -> {_when(entry.mtime_ns)}); landing files "
                "are immutable: deliver new lines in a new file"
            )
    return scan


@dataclass(frozen=True)
class _Entry:
    name: str
    path: Root
    problem: str | None
    size: int = 0
    mtime_ns: int = 0


def _entries(folder: Root) -> Iterator[_Entry]:
    """The entries of a landing folder, each with why it is not ingested (None: it is)."""
    if isinstance(folder, S3Path):
        files, prefixes = folder.listing()
        for prefix in prefixes:
            yield _Entry(prefix.name, prefix, "a folder (landing folders are flat)")
        for path, info in files:
            yield _Entry(
                path.name, path, _unsupported_name(path.name), info.st_size, info.st_mtime_ns
            )
        return
    if not folder.is_dir():
        return
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith((".", "_")):
                continue  # may be renamed away at any moment: not even looked at
            problem = _not_ingested(entry)
            if problem:
                yield _Entry(entry.name, Path(entry.path), problem)
                continue
            status = entry.stat(follow_symlinks=False)
            yield _Entry(entry.name, Path(entry.path), None, status.st_size, status.st_mtime_ns)


def _not_ingested(entry: os.DirEntry[str]) -> str | None:
    """Why a landing entry is not ingested, or None for a regular file with a supported name."""
    if entry.is_symlink():
        return "a symbolic link (links are never followed)"
    if entry.is_dir(follow_symlinks=False):
        return "a folder (landing folders are flat)"
    if not entry.is_file(follow_symlinks=False):
        return "not a regular file"
    try:
        entry.name.encode("utf-8")
    except UnicodeEncodeError:
        return "a name that is not UTF-8"
    return _unsupported_name(entry.name)


def _unsupported_name(name: str) -> str | None:
    if not name.endswith(LANDING_SUFFIXES):
        return f"not a supported name (expected {', '.join('*' + s for s in LANDING_SUFFIXES)})"
    return None


def _read_manifest(path: Root) -> dict[str, Any] | None:
    """A manifest's content; None when it is missing, or empty or torn (a power loss
    soon after it was written): then it is written again from the landing file."""
    try:
        content = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    if not isinstance(content, dict) or not {"size", "mtime_ns"} <= content.keys():
        return None
    return content


def _when(mtime_ns: int) -> str:
    moment = dt.datetime.fromtimestamp(mtime_ns / 1e9, dt.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def manifest_files(manifests: Root) -> list[Root]:
    """The manifests bronze's stream lists (hidden files in flight excluded)."""
    if not manifests.is_dir():
        return []
    return [p for p in manifests.iterdir() if not p.name.startswith(".")]


def new_landing_files(
    spark: SparkSession, manifests: Root, max_files_per_trigger: int
) -> DataFrame:
    """A stream of the landing files whose manifests it has not read before, one row per file.

    Spark's file source over the manifests folder remembers every manifest it
    has handed out. Columns: `manifest` (its JSON line: the landing file's
    path, size and modification time) and `_ingested_at_us`, the
    micro-batch's timestamp (microseconds), which Spark's driver fixes when
    it plans the batch and keeps for a replay.
    """
    return (
        spark.readStream.format("text")
        .option("maxFilesPerTrigger", max_files_per_trigger)
        # The default (7 days) silently skips files older than the newest seen
        # one by more than that; a manifest written late must still be read.
        .option("maxFileAge", "36500d")
        .load(str(manifests))
        .select(
            F.col("value").alias("manifest"),
            F.unix_micros(F.current_timestamp()).alias("_ingested_at_us"),
        )
    )


def landing_uri(manifest: str) -> str:
    """The landing file of a manifest line, as the URI Spark's readers give it."""
    return file_uri(str(json.loads(manifest)["path"]))


def file_uri(path: str) -> str:
    """A file's path (as str() of a `Root` writes it) as the URI Spark's readers give it.

    Spark's `_metadata.file_path` (Hadoop's `Path.toUri`, `java.net.URI`):
    `file:` and the path, with ASCII characters a URI path may not hold
    percent-encoded and other characters left as they are, unless they are
    space separators or ISO control characters (`Character.isSpaceChar`,
    `isISOControl`; format characters such as U+200B stay as they are).
    """
    scheme = "file:"
    if path.startswith("s3a://"):  # an object: the bucket, then its key as a path
        bucket, _, key = path[len("s3a://") :].partition("/")
        scheme, path = f"s3a://{bucket}", f"/{key}"
    return scheme + "".join(
        char
        if char in _URI_PATH_CHARS or (ord(char) > 0x9F and not char.isspace())
        else quote(char, safe="")
        for char in path
    )


def landing_file(uri: str, root: Root) -> Root:
    """The landing file a URI Spark gave names, as a path under `root`'s storage."""
    return location(path_of_uri(uri), root)


def still_a_regular_file(uri: str, root: Root) -> bool:
    """Not deleted, and not swapped for a link or a folder, since its manifest was written."""
    path = landing_file(uri, root)
    if isinstance(path, S3Path):
        return path.is_file()
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def spark_reads_directly(name: str) -> bool:
    """Whether Spark reads a landing file itself: not a gzip file (Python decompresses
    those) and a name Hadoop's `Path` can take (no `:`; the module docstring says why)."""
    return not name.endswith(GZIP_SUFFIX) and ":" not in name


@dataclass(frozen=True)
class PreparedFiles:
    """A micro-batch's landing files, ready for Spark: by landing URI, the file Spark
    reads for it (the landing file itself, or its staged copy) or why it cannot be read."""

    read: dict[str, Root]
    unreadable: dict[str, str]


def prepare_files(uris: list[str], staging: Root, max_line_bytes: int, root: Root) -> PreparedFiles:
    """Vet the files of `uris`, and stage a plain copy of those Spark must not read
    itself (`spark_reads_directly`) in the folder `staging`, which the caller removes
    once the micro-batch is written. Files are read in parallel: zlib decompresses
    outside the GIL."""

    paths = [landing_file(uri, root) for uri in uris]
    copied = {index for index, path in enumerate(paths) if not spark_reads_directly(path.name)}
    if copied:
        staging.mkdir(parents=True, exist_ok=True)

    def prepare(index: int, path: Root) -> tuple[Root, str | None]:
        if index not in copied:
            return path, unreadable_file_reason(path, max_line_bytes)
        copy = staging / f"{index}.jsonl"
        return copy, unreadable_file_reason(path, max_line_bytes, copy_to=copy)

    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        outcomes = list(pool.map(prepare, range(len(paths)), paths))
    prepared = PreparedFiles({}, {})
    for uri, (path, reason) in zip(uris, outcomes, strict=True):
        if reason:
            prepared.unreadable[uri] = reason
        else:
            prepared.read[uri] = path
    return prepared


# Where Spark read a line (`read_lines`): the start of the file's split (a file larger
# than a split is read in several), and an id that grows line by line within a split.
LINE_POSITION = ("_split_start", "_split_row")
LINES_SCHEMA = "value string, _source_file string, _split_start long, _split_row long"


def read_lines(spark: SparkSession, files: dict[str, Root]) -> DataFrame:
    """The lines of landing files (`PreparedFiles.read`): `value`, `_source_file`, the
    landing file's URI, whichever file Spark read for it, and where in it the line
    was (`LINE_POSITION`, from which `line_numbers` numbers the lines)."""
    lines = (
        spark.read.format("text")
        .load([_glob_escaped(str(path)) for path in files.values()])
        .select(
            "value",
            F.col("_metadata.file_path").alias("_read_from"),
            F.col("_metadata.file_block_start").alias("_split_start"),
            F.monotonically_increasing_id().alias("_split_row"),
        )
    )
    copies = [(read, uri) for uri, path in files.items() if (read := file_uri(str(path))) != uri]
    if not copies:
        return lines.withColumnRenamed("_read_from", "_source_file")
    names = spark.createDataFrame(copies, "_read_from string, _landing_file string")
    return lines.join(F.broadcast(names), on="_read_from", how="left").select(
        "value",
        F.coalesce("_landing_file", "_read_from").alias("_source_file"),
        *LINE_POSITION,
    )


def line_numbers(lines: DataFrame, splits: Iterable[tuple[str, int, int, int]]) -> DataFrame:
    """`lines` (from `read_lines`, parsed or not) with `_source_line`, each line's number
    in its file from 1, given each split's (`_source_file`, `_split_start`, lines, least
    `_split_row`). Spark reads a split's lines in order, into one partition, and
    `monotonically_increasing_id` grows by one per row of a partition; a file's splits
    follow each other by their start. A row read from no file (an unreadable file's)
    gets null."""
    before: dict[str, int] = {}
    offsets = []
    for file, split, count, first in sorted(splits):
        offsets.append((file, split, first, before.get(file, 0)))
        before[file] = before.get(file, 0) + count
    table = lines.sparkSession.createDataFrame(
        offsets, "_source_file string, _split_start long, _first_row long, _lines_before long"
    )
    start, row = LINE_POSITION
    return (
        lines.join(F.broadcast(table), on=["_source_file", start], how="left")
        .withColumn("_source_line", F.col("_lines_before") + F.col(row) - F.col("_first_row") + 1)
        .drop(start, row, "_first_row", "_lines_before")
    )


def _glob_escaped(path: str) -> str:
    """`path` with Hadoop's glob characters escaped: Spark globs every path it loads."""
    return re.sub(r"([\\\[\]{}*?])", r"\\\1", path)


def unreadable_file_reason(
    path: Root, max_line_bytes: int, copy_to: Root | None = None
) -> str | None:
    """Why Spark must not read `path`, as a quarantine reason, or None when it may.

    A gzip file is decompressed chunk by chunk to the end (so a truncated
    stream, a bad checksum or bytes that are not gzip at all are found),
    keeping no more than the length of the current line. A plain file is read
    the same way if it is large enough to hold a line over the limit; a
    smaller one cannot, and costs nothing. With `copy_to`, every file is read,
    and its lines, decompressed, are written there as they are read: Spark
    reads that copy instead. A failure to write the copy is not the file's
    fault: it is raised, and fails the micro-batch.
    """
    line_limit = max(MAX_READ_LINE_BYTES, max_line_bytes)
    compressed = path.name.endswith(GZIP_SUFFIX)
    with _copy_writer(copy_to) as copy:
        try:
            if copy is None and not compressed and path.stat().st_size <= line_limit:
                return None
            with path.open_binary() if isinstance(path, S3Path) else open(path, "rb") as raw:
                stream = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw
                too_long = _has_line_longer_than(stream, line_limit, copy)
        except (OSError, EOFError, zlib.error) as error:
            what = "corrupt or truncated gzip" if compressed else "read error"
            return f"{UNREADABLE}: {what} ({error})"
    if too_long:
        after = " after decompression (a gzip bomb?)" if compressed else ""
        return f"{UNREADABLE}: a line too long, over {line_limit:,} bytes{after}"
    return None


class StagingError(LakehouseError):
    """A staged copy of a landing file could not be written (a full disk, say)."""


@contextlib.contextmanager
def _copy_writer(path: Root | None) -> Iterator[Callable[[bytes], object] | None]:
    """A function that appends to the file `path` (None: no copy is written). Its
    failures are `StagingError`s, not the `OSError`s that make a landing file unreadable."""
    if path is None:
        yield None
        return
    with path.open_write() if isinstance(path, S3Path) else open(path, "wb") as file:

        def write(chunk: bytes) -> object:
            try:
                return file.write(chunk)
            except OSError as error:
                raise StagingError(f"cannot stage a landing file at {path}: {error}") from error

        yield write


def _has_line_longer_than(
    stream: IO[bytes] | ObjectStream | gzip.GzipFile,
    limit: int,
    copy: Callable[[bytes], object] | None = None,
) -> bool:
    """Read `stream` to its end (or to the first line over `limit`), a chunk at a time,
    handing each chunk to `copy` when given.

    Only the length of the line still open at the end of a chunk is kept: a
    line that ends within the chunk it started in is shorter than a chunk.
    """
    open_line = 0
    while chunk := stream.read(_CHUNK_BYTES):
        if copy:
            copy(chunk)
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
