"""Hostile input: damaged gzip files, events from a wrong clock, entries never to be read.

The hostile landing folder is a generated one plus, per source, one gzip file
that cannot be read (truncated, not gzip at all, a gzip bomb); four of its
files per source disguised, their lines unchanged: one renamed with a `:` and
brackets, which Hadoop cannot name, three gzip-compressed in the forms gzip
reads and Hadoop's codec refuses (`tests.helpers.gzip_variants`); and, among the
normal lines of an impressions file and of a user_actions file, one event
dated 9999-06-15; and entries bronze must never read: a symbolic link to a
secret outside the data root, a .csv file, a folder, and (before the second
run) a file rewritten after the first run ingested it. Two runs in a row
over it (the second with the later half of the files) both exit 0 and name
every entry they did not read; the bad input is in quarantine with its
reasons; every other line is in bronze exactly once, and no byte of what was
not read reaches a table; silver and gold equal one run over the same
folder without the bad input (the session's `streamed_root`).
"""

from __future__ import annotations

import gzip
import json
import shutil
import zlib
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest

from lakehouse.catalog import SOURCES
from tests.helpers import (
    TABLE_NAMES,
    delta_count,
    delta_rows,
    delta_table,
    gzip_variants,
    run_in_process,
    settings_for,
)

WRONG_CLOCK = "9999-06-15T00:00:00Z"
UNREADABLE = {
    "impressions": "truncated.jsonl.gz",
    "clicks": "not-gzip.jsonl.gz",
    "user_actions": "bomb.jsonl.gz",
}


def _gzip_bomb(decompressed_mib: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\0" * (1024 * 1024)
    return b"".join(
        [*(compressor.compress(zeros) for _ in range(decompressed_mib)), compressor.flush()]
    )


def _add_unreadable_files(landing: Path) -> None:
    good = (
        b'{"impression_id":"i-lost","ad_id":"a","campaign_id":"c","user_id":"u",'
        b'"event_time":"2026-11-01T10:00:00Z"}\n'
    )
    content = {
        "impressions": gzip.compress(good * 1000)[:-200],
        "clicks": good,
        "user_actions": _gzip_bomb(160),
    }
    for source, name in UNREADABLE.items():
        (landing / source / name).write_bytes(content[source])


# A disguised file's name: its plain file's name plus one of these.
COLON_NAME = ".at-13:00:00Z[1].jsonl"
DISGUISES = [COLON_NAME, *(f".{variant}.gz" for variant in gzip_variants(b""))]


def _disguise_files(landing: Path) -> None:
    """Per source, the last plain files renamed with a `:`, or gzip-compressed in the
    forms Hadoop's codec refuses (the first ones get a wrong clock, or are rewritten)."""
    for source in SOURCES:
        plain = sorted(p for p in (landing / source).iterdir() if p.suffix == ".jsonl")
        for file, disguise in zip(plain[-len(DISGUISES) :], DISGUISES, strict=True):
            if disguise == COLON_NAME:
                file.rename(file.with_name(file.name + disguise))
                continue
            variant = disguise.removeprefix(".").removesuffix(".gz")
            file.with_name(file.name + disguise).write_bytes(
                gzip_variants(file.read_bytes())[variant]
            )
            file.unlink()


def _undisguised(name: str) -> str:
    for disguise in DISGUISES:
        name = name.removesuffix(disguise)
    return name


def _insert_wrong_clock_event(file: Path, source: str) -> None:
    """One event dated in year 9999 in the middle of a file of normal ones."""
    lines = file.read_text().splitlines(keepends=True)
    event = json.loads(next(line for line in lines if '"event_time"' in line))
    event[SOURCES[source].string_fields[0]] = "wrong-clock"
    event["event_time"] = WRONG_CLOCK
    lines.insert(len(lines) // 2, json.dumps(event) + "\n")
    file.write_text("".join(lines))


def _later_half(landing: Path) -> dict[str, list[Path]]:
    """The later half of each source's files, moved out of `landing` (to add back later)."""
    held = {}
    for source in SOURCES:
        files = sorted((landing / source).iterdir())
        held[source] = files[len(files) // 2 :]
    return held


@pytest.fixture(scope="module")
def roots(spark, streamed_root, tmp_path_factory):
    """(the clean root, run once; the hostile root; its two runs).

    The two runs are `lakehouse run` in this process, on the tests' Spark session
    (`run_in_process`), as the clean root's was.
    """
    hostile = tmp_path_factory.mktemp("hostile")
    held_back = hostile / "held-back"
    shutil.copytree(streamed_root / "landing", hostile / "landing")
    for source, files in _later_half(hostile / "landing").items():
        (held_back / source).mkdir(parents=True)
        for file in files:
            file.rename(held_back / source / file.name)
    _add_unreadable_files(hostile / "landing")
    _disguise_files(hostile / "landing")
    for source in ("impressions", "user_actions"):
        plain = next(
            p for p in sorted((hostile / "landing" / source).iterdir()) if p.suffix == ".jsonl"
        )
        _insert_wrong_clock_event(plain, source)

    _add_entries_never_read(hostile)

    runs = [run_in_process("run", "--data-root", str(hostile))]
    for source in SOURCES:
        for file in (held_back / source).iterdir():
            file.rename(hostile / "landing" / source / file.name)
    _rewrite_an_ingested_file(hostile / "landing")
    runs.append(run_in_process("run", "--data-root", str(hostile)))
    return streamed_root, hostile, runs


# Each a valid event, were it ever read; none may reach a table.
MARKERS = ("SECRET-TARGET", "CSV-FILE", "IN-A-FOLDER", "REWRITTEN-LATER")
NOT_READ = {
    "landing/clicks/secret.json": "a symbolic link (links are never followed)",
    "landing/impressions/export.csv": "not a supported name",
    "landing/user_actions/2026-11-01": "a folder (landing folders are flat)",
}


def _event(source: str, marker: str) -> str:
    fields = dict.fromkeys(SOURCES[source].string_fields, marker)
    if source == "user_actions":
        fields["action"] = "view"
    return json.dumps({**fields, "event_time": "2026-11-01T10:00:00Z"}) + "\n"


def _add_entries_never_read(root: Path) -> None:
    """A link to a secret outside the data root, a .csv file and a folder, all of events."""
    secret = root.parent / "secret.txt"
    secret.write_text(_event("clicks", "SECRET-TARGET"))
    (root / "landing" / "clicks" / "secret.json").symlink_to(secret)
    (root / "landing" / "impressions" / "export.csv").write_text(_event("impressions", "CSV-FILE"))
    folder = root / "landing" / "user_actions" / "2026-11-01"
    folder.mkdir()
    (folder / "more.jsonl").write_text(_event("user_actions", "IN-A-FOLDER"))


def _rewrite_an_ingested_file(landing: Path) -> Path:
    """One more line appended to the first clicks file, which the first run ingested."""
    first = sorted(p for p in (landing / "clicks").iterdir() if p.suffix == ".jsonl")[0]
    with first.open("a") as file:
        file.write(_event("clicks", "REWRITTEN-LATER"))
    return first


def test_two_runs_in_a_row_pass(roots):
    _, _, runs = roots
    for run in runs:
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "run passed" in run.stdout


def _quarantine(root: Path, source: str) -> Counter[tuple]:
    """(raw, reason, file name) of every quarantine row (the roots' paths differ; a
    disguised file by its plain file's name)."""
    rows = delta_rows(
        settings_for(root).table("quarantine", source), ["raw", "reason", "_source_file"]
    )
    return Counter(
        {
            (raw, reason, _undisguised(unquote(file.rsplit("/", 1)[1]))): n
            for (raw, reason, file), n in rows.items()
        }
    )


@pytest.mark.parametrize("source", list(SOURCES))
def test_the_bad_input_is_quarantined_with_its_reason(roots, source):
    clean, hostile, _ = roots
    extra = _quarantine(hostile, source) - _quarantine(clean, source)
    reasons = sorted(reason for _, reason, _ in extra)
    unreadable = [row for row in extra if row[1].startswith("unreadable file: ")]
    assert len(unreadable) == 1
    assert unreadable[0][2] == UNREADABLE[source]
    if source == "clicks":
        assert reasons == [unreadable[0][1]]
        return
    (future,) = [row for row in extra if row not in unreadable]
    assert future[1].startswith(f"event_time in the future: '{WRONG_CLOCK}'"), future
    assert "wrong-clock" in future[0]


@pytest.mark.parametrize("source", list(SOURCES))
def test_every_other_line_is_in_bronze_exactly_once(roots, source):
    clean, hostile, _ = roots
    fields = list(SOURCES[source].fields)
    ours = delta_rows(settings_for(hostile).table("bronze", source), fields)
    reference = delta_rows(settings_for(clean).table("bronze", source), fields)
    assert sum(ours.values()) > 50
    assert ours == reference


@pytest.mark.parametrize(("layer", "name"), TABLE_NAMES)
def test_silver_and_gold_are_what_they_would_be_without_the_bad_input(roots, layer, name):
    clean, hostile, _ = roots
    ours = delta_rows(settings_for(hostile).table(layer, name))
    reference = delta_rows(settings_for(clean).table(layer, name))
    assert ours == reference
    # One day of input closes no day of a daily table: both are empty then.
    assert sum(ours.values()) > 0 or name == "campaign_daily"


def test_every_entry_never_read_is_named_by_each_run_and_its_report(roots):
    _, hostile, runs = roots
    first_clicks = sorted(p.name for p in (hostile / "landing" / "clicks").glob("*.jsonl"))[0]
    rewritten = f"landing/clicks/{first_clicks}: not read again: changed after it was ingested"
    for number, run in enumerate(runs):
        for path, why in NOT_READ.items():
            assert f"  {path}: not read: {why}" in run.stdout, run.stdout
        assert (rewritten in run.stdout) == (number == 1), run.stdout
    reports = sorted((hostile / "reports" / "runs").glob("run-*.json"))
    notices = [n for s in json.loads(reports[-1].read_text())["stages"] for n in s["notices"]]
    assert len(notices) == 4 and any(rewritten in n for n in notices)
    page = reports[-1].with_suffix(".html").read_text()
    assert all(path in page for path in NOT_READ) and first_clicks in page


def test_no_byte_of_what_was_not_read_reaches_a_table(roots):
    _, hostile, _ = roots
    tables = [p.parent for p in (hostile / "lakehouse").glob("*/*/_delta_log")]
    assert len(tables) >= 17  # bronze, quarantine, silver, gold and _meta
    for table in tables:
        text = json.dumps(delta_table(table).to_pylist(), default=str)
        assert not [marker for marker in MARKERS if marker in text], table


@pytest.mark.parametrize("source", list(SOURCES))
def test_disguised_files_are_read_whole_under_their_own_names(roots, source):
    _, hostile, _ = roots
    settings = settings_for(hostile)
    files = delta_rows(settings.table("bronze", source), ["_source_file"])
    names = {unquote(file.rsplit("/", 1)[1]) for (file,) in files}
    assert {d for d in DISGUISES if any(name.endswith(d) for name in names)} == set(DISGUISES)
    ledger = delta_rows(settings.meta("bronze_ledger"), ["source", "lines_read"])
    lines_read = sum(lines * n for (of, lines), n in ledger.items() if of == source)
    rows = sum(files.values()) + delta_count(settings.table("quarantine", source))
    assert lines_read == rows
