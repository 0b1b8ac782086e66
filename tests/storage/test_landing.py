"""Vetting landing files before Spark reads them: damaged gzip, gzip bombs, overlong lines;
and the plain copies Spark reads of gzip files and of names Hadoop cannot take."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from pathlib import Path

import pytest

from lakehouse.storage.landing import (
    MAX_READ_LINE_BYTES,
    StagingError,
    spark_reads_directly,
    unreadable_file_reason,
)
from tests.helpers import gzip_variants

LINES = b"".join(b'{"n":%d}\n' % i for i in range(20_000))
MAX_LINE = 1024 * 1024


def test_plain_and_sound_gzip_files_are_readable(tmp_path):
    plain = tmp_path / "a.jsonl"
    plain.write_bytes(b"not even json\n")
    sound = tmp_path / "b.jsonl.gz"
    # Two gzip members one after the other are one valid file (as `cat a.gz b.gz`).
    sound.write_bytes(gzip.compress(LINES) + gzip.compress(b"\r\n".join([b"x"] * 10)))
    assert unreadable_file_reason(plain, MAX_LINE) is None
    assert unreadable_file_reason(sound, MAX_LINE) is None


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (gzip.compress(LINES)[:-100], "end-of-stream marker"),
        (b"plain text in a file named .gz\n", "Not a gzipped file"),
        (gzip.compress(LINES)[:-8] + b"\0" * 8, "CRC check failed"),
        (b"", None),
    ],
    ids=["truncated", "not-gzip", "bad-checksum", "empty"],
)
def test_damaged_gzip_says_why(tmp_path, content, problem):
    path = tmp_path / "x.jsonl.gz"
    path.write_bytes(content)
    reason = unreadable_file_reason(path, MAX_LINE)
    if problem is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith(
            "unreadable file: corrupt or truncated gzip"
        )
        assert problem in reason


def _bomb(decompressed_bytes: int, piece: bytes) -> bytes:
    """A gzip stream of `piece` repeated, written piece by piece (it is never whole in memory)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = piece * (1024 * 1024 // len(piece))
    chunks = [compressor.compress(block) for _ in range(decompressed_bytes // len(block))]
    return b"".join([*chunks, compressor.flush()])


def reason_and_peak_memory(path):
    """The file's vetting verdict and the most memory Python held while reaching it."""
    tracemalloc.start()
    try:
        reason = unreadable_file_reason(path, MAX_LINE)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return reason, peak


def test_a_gzip_bomb_is_refused_in_constant_memory(tmp_path):
    path = tmp_path / "bomb.jsonl.gz"
    path.write_bytes(_bomb(MAX_READ_LINE_BYTES * 4, b"\0"))
    assert path.stat().st_size < 1024 * 1024
    reason, peak = reason_and_peak_memory(path)
    assert reason is not None and "a line too long, over 67,108,864 bytes" in reason
    assert peak < 8 * 1024 * 1024


def test_many_short_lines_are_not_a_bomb(tmp_path):
    path = tmp_path / "big.jsonl.gz"
    path.write_bytes(_bomb(MAX_READ_LINE_BYTES + 2 * 1024 * 1024, b"{}\n"))
    assert unreadable_file_reason(path, MAX_LINE) is None


def test_the_line_limit_follows_a_larger_configured_line_size(tmp_path):
    path = tmp_path / "long.jsonl.gz"
    path.write_bytes(_bomb(MAX_READ_LINE_BYTES + 2 * 1024 * 1024, b"x"))
    assert unreadable_file_reason(path, MAX_LINE) is not None
    assert unreadable_file_reason(path, MAX_READ_LINE_BYTES * 2) is None


def test_a_plain_file_with_a_line_over_the_limit_is_refused_in_constant_memory(tmp_path):
    path = tmp_path / "one-line.jsonl"
    with path.open("wb") as file:  # sparse: 2.3 GB of zero bytes, no newline
        file.truncate(2_300_000_000)
    reason, peak = reason_and_peak_memory(path)
    assert reason == "unreadable file: a line too long, over 67,108,864 bytes"
    assert peak < 8 * 1024 * 1024


def test_a_large_plain_file_of_short_lines_is_readable(tmp_path):
    path = tmp_path / "large.jsonl"
    path.write_bytes(LINES * (MAX_READ_LINE_BYTES // len(LINES) + 2))
    assert path.stat().st_size > MAX_READ_LINE_BYTES
    assert unreadable_file_reason(path, MAX_LINE) is None


@pytest.mark.parametrize("variant", list(gzip_variants(b"")))
def test_gzip_that_gzip_reads_is_copied_whole_for_spark(tmp_path, variant):
    """Hadoop's codec refuses these; Spark reads Python's plain copy instead."""
    path = tmp_path / f"{variant}.jsonl.gz"
    path.write_bytes(gzip_variants(LINES)[variant])
    copy = tmp_path / "copy.jsonl"
    assert unreadable_file_reason(path, MAX_LINE, copy_to=copy) is None
    assert copy.read_bytes() == LINES


def test_a_plain_file_is_copied_as_it_is(tmp_path):
    path = tmp_path / "clicks-2026-11-01T13:00:00Z.jsonl"
    path.write_bytes(b"a\r\nb\rc")
    copy = tmp_path / "copy.jsonl"
    assert unreadable_file_reason(path, MAX_LINE, copy_to=copy) is None
    assert copy.read_bytes() == b"a\r\nb\rc"


@pytest.mark.parametrize(
    ("name", "directly"),
    [
        ("clicks-1.jsonl", True),
        ("a b%20[x]{y}*?.json", True),
        ("clicks-2026-11-01T13:00:00Z.jsonl", False),
        ("[x]:1.jsonl", False),
        ("clicks.jsonl.gz", False),
    ],
)
def test_spark_reads_plain_files_whose_names_hadoop_takes(name, directly):
    assert spark_reads_directly(name) is directly


def test_a_copy_that_cannot_be_written_fails_the_batch_instead_of_blaming_the_file(tmp_path):
    path = tmp_path / "a.jsonl.gz"
    path.write_bytes(gzip.compress(LINES))
    with pytest.raises(StagingError, match="cannot stage a landing file at /dev/full"):
        unreadable_file_reason(path, MAX_LINE, copy_to=Path("/dev/full"))
