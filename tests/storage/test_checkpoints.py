"""What a file stream's checkpoint says it has read, and what bronze lists in a landing folder.

Spark's own logs are exercised end to end in tests/drivers/test_bronze.py;
here the edge cases of the log layout and of the listing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lakehouse.storage.checkpoints import CheckpointError, caught_up, files_read
from lakehouse.storage.landing import landing_uri, manifest_files, manifest_name, scan_landing
from lakehouse.storage.objects import write_atomically


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


def test_the_landing_scan_reads_regular_files_and_reports_everything_else(tmp_path):
    root, secret = tmp_path / "data", tmp_path / "secret.txt"
    folder, manifests = root / "landing" / "clicks", root / "checkpoints" / "manifests"
    folder.mkdir(parents=True)
    secret.write_text("password=hunter2\n")
    for name in ("a.jsonl", "b.json", "c.jsonl.gz"):
        (folder / name).write_text("{}\n")
    for name in (".a.jsonl.tmp", "_SUCCESS", "_tmp.json"):  # in flight, markers: silent
        (folder / name).write_text("")
    (folder / "notes.csv").write_text("a,b\n")
    (folder / "day=2026-11-01").mkdir()
    (folder / "day=2026-11-01" / "inside.json").write_text("{}\n")
    (folder / "secret.json").symlink_to(secret)
    (folder / "everything.json").symlink_to("/")
    (folder / "dangling.jsonl").symlink_to(tmp_path / "nowhere")
    os.mkfifo(folder / "pipe.json")

    scan = scan_landing(folder, manifests, root)
    assert scan.not_read == [
        "landing/clicks/dangling.jsonl: not read: a symbolic link (links are never followed)",
        "landing/clicks/day=2026-11-01: not read: a folder (landing folders are flat)",
        "landing/clicks/everything.json: not read: a symbolic link (links are never followed)",
        "landing/clicks/notes.csv: not read: not a supported name (expected *.json, *.jsonl, *.gz)",
        "landing/clicks/pipe.json: not read: not a regular file",
        "landing/clicks/secret.json: not read: a symbolic link (links are never followed)",
    ]
    assert scan.changed == []
    listed = sorted(json.loads(p.read_text())["path"] for p in manifest_files(manifests))
    assert listed == [str(folder / name) for name in ("a.jsonl", "b.json", "c.jsonl.gz")]
    assert {p.name for p in manifest_files(manifests)} == {
        manifest_name(n) for n in ("a.jsonl", "b.json", "c.jsonl.gz")
    }

    # Scanned again: nothing new. A file rewritten in place: reported, its manifest kept.
    before = {p.name: p.read_text() for p in manifest_files(manifests)}
    (folder / "b.json").write_text('{"rewritten": true}\n')
    again = scan_landing(folder, manifests, root)
    assert {p.name: p.read_text() for p in manifest_files(manifests)} == before
    (changed,) = again.changed
    assert changed.startswith(
        "landing/clicks/b.json: not read again: changed after it was ingested"
    )
    assert "size 3 -> 20 bytes" in changed
    assert again.notices == again.not_read + again.changed
    # A missing folder lists nothing.
    assert scan_landing(root / "landing" / "none", manifests, root).notices == []


def test_names_are_reported_with_their_control_characters_escaped(tmp_path):
    """A name cannot forge a line of the run's output or of Airflow's log, nor colour it."""
    root = tmp_path / "data"
    folder = root / "landing" / "clicks"
    folder.mkdir(parents=True)
    (folder / "x\nlakehouse run: passed\x1b[2K\u202e.csv").write_text("{}\n")
    (notice,) = scan_landing(folder, root / "manifests", root).notices
    assert notice == (
        "landing/clicks/x\\nlakehouse run: passed\\x1b[2K\\u202e.csv: not read: not a supported "
        "name (expected *.json, *.jsonl, *.gz)"
    )


def test_a_manifest_a_power_loss_left_empty_is_written_again_from_its_file(tmp_path):
    root = tmp_path / "data"
    folder, manifests = root / "landing" / "clicks", root / "checkpoints" / "manifests"
    folder.mkdir(parents=True)
    (folder / "a.jsonl").write_text("{}\n")
    scan_landing(folder, manifests, root)
    (manifest,) = manifest_files(manifests)
    written = manifest.read_text()
    for torn in ("", '{"path": "/data/landing/clicks/a.js'):
        manifest.write_text(torn)
        scan = scan_landing(folder, manifests, root)
        assert manifest.read_text() == written and scan.notices == []


def test_an_atomic_write_reaches_the_disk_before_its_rename_and_the_rename_after(
    tmp_path, monkeypatch
):
    """The order of the system calls, seen by wrapping os.fsync and Path.replace (each
    still does its work)."""
    calls: list[str] = []
    fsync, replace = os.fsync, Path.replace

    def synced(fd: int) -> None:
        calls.append(f"fsync {Path(f'/proc/self/fd/{fd}').readlink()}")
        fsync(fd)

    def renamed(self: Path, target: Path) -> Path:
        calls.append(f"rename {self} -> {target}")
        return replace(self, target)

    monkeypatch.setattr(os, "fsync", synced)
    monkeypatch.setattr(Path, "replace", renamed)
    target = tmp_path / "lakehouse.json"
    write_atomically(target, '{"read_versions": {}}')
    temporary = tmp_path / ".lakehouse.json.tmp"
    assert calls == [
        f"fsync {temporary}",
        f"rename {temporary} -> {target}",
        f"fsync {tmp_path}",
    ]
    assert target.read_text() == '{"read_versions": {}}' and not temporary.exists()
    calls.clear()
    write_atomically(target, "again", durable=False)
    assert calls == [f"rename {temporary} -> {target}"] and target.read_text() == "again"


def test_a_manifest_names_its_file_as_spark_does():
    manifest = json.dumps({"path": "/data/landing/a b%20\u00e9#1.json"})
    assert landing_uri(manifest) == "file:/data/landing/a%20b%2520\u00e9%231.json"
