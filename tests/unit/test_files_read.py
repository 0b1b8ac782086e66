"""What a file stream's checkpoint says it has read, and what its landing folder lists.

Spark's own logs are exercised end to end in tests/integration/test_bronze.py;
here the edge cases of the log layout and of the listing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from include.checkpoints import CheckpointError, caught_up, files_read
from include.landing import landing_files


def write_log(path: Path, files: list[str]) -> None:
    entries = [json.dumps({"path": f, "timestamp": 0, "batchId": 0}) for f in files]
    path.write_text("\n".join(["v1", *entries]))


def checkpoint_at(tmp_path: Path, batches: int) -> Path:
    """A checkpoint whose file stream planned and committed batches 0..batches-1."""
    checkpoint = tmp_path / "checkpoint"
    for folder in ("offsets", "commits", "sources/0"):
        (checkpoint / folder).mkdir(parents=True)
    (checkpoint / "metadata").write_text(json.dumps({"id": "q-1"}))
    for batch in range(batches):
        (checkpoint / "offsets" / str(batch)).write_text(f'v1\n{{}}\n{{"logOffset":{batch}}}')
        (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return checkpoint


def test_the_latest_compaction_and_the_batches_after_it_hold_every_file(tmp_path):
    checkpoint = checkpoint_at(tmp_path, 12)
    log = checkpoint / "sources" / "0"
    # Batches 0-8 were deleted once 9.compact held them; 10 and 11 came after.
    write_log(log / "9.compact", ["file:///land/a.jsonl", "file:///land/b%20c.jsonl"])
    write_log(log / "10", ["file:///land/d.jsonl"])
    write_log(log / "11", ["file:/land/e.jsonl"])  # Hadoop's short form
    (log / ".11.crc").write_bytes(b"\x00")
    assert files_read(checkpoint, "bronze/x") == {
        "/land/a.jsonl",
        "/land/b c.jsonl",
        "/land/d.jsonl",
        "/land/e.jsonl",
    }


def test_a_stream_of_files_is_caught_up_only_when_every_listed_file_was_read(tmp_path):
    checkpoint = checkpoint_at(tmp_path, 1)
    write_log(checkpoint / "sources" / "0" / "0", ["file:///land/a.jsonl"])
    assert caught_up(checkpoint, "bronze/x", [Path("/land/a.jsonl")])
    assert caught_up(checkpoint, "bronze/x", [])
    assert not caught_up(checkpoint, "bronze/x", [Path("/land/a.jsonl"), Path("/land/b.jsonl")])
    assert not caught_up(checkpoint, "bronze/x")  # no listing: Spark decides

    # A planned batch without its commit runs again, whatever the log says.
    (checkpoint / "offsets" / "1").write_text('v1\n{}\n{"logOffset":1}')
    assert not caught_up(checkpoint, "bronze/x", [Path("/land/a.jsonl")])


def test_a_damaged_log_file_is_an_error_that_names_it(tmp_path):
    checkpoint = checkpoint_at(tmp_path, 1)
    (checkpoint / "sources" / "0" / "0").write_text('{"path": "file:///land/a.js')
    with pytest.raises(CheckpointError, match="sources/0/0 is truncated"):
        files_read(checkpoint, "bronze/x")


def test_the_landing_listing_skips_what_spark_skips(tmp_path):
    for name in ("a.jsonl", "b.json", "c.jsonl.gz", "_x=1.json"):
        (tmp_path / name).write_text("{}\n")
    for name in (".a.jsonl.tmp.json", "_SUCCESS", "_tmp.json", "notes.txt"):
        (tmp_path / name).write_text("")
    assert sorted(p.name for p in landing_files(tmp_path) or []) == [
        "_x=1.json",
        "a.jsonl",
        "b.json",
        "c.jsonl.gz",
    ]
    assert landing_files(tmp_path / "missing") == []
    (tmp_path / "day=2026-11-01").mkdir()  # Spark may read it as a partition
    assert landing_files(tmp_path) is None
