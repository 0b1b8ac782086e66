"""Test helpers that read tables the way an outside user would."""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import io
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import QueryBuilder

from lakehouse.catalog import TABLES
from lakehouse.runtime.settings import Settings
from lakehouse.storage.delta.log import open_table
from lakehouse.storage.objects import Root, S3Path

# (layer, name) of every silver and gold table, in catalog order.
TABLE_NAMES = [(table.layer, table.name) for table in TABLES]

REPO = Path(__file__).resolve().parent.parent


def gzip_variants(data: bytes) -> dict[str, bytes]:
    """`data` gzip-compressed in the ways gzip(1) and Python read to the end and
    Hadoop's gzip codec (Spark's) refuses, by name."""
    sound = gzip.compress(data, mtime=0)
    flags = sound[3]
    return {
        # Zero bytes after the last member (a writer that pads to a block size).
        "padded": sound + bytes(512),
        # Two members with zero padding between them.
        "padded-members": sound + bytes(64) + gzip.compress(b"", mtime=0),
        # FHCRC set, and a header checksum that is wrong (its CRC-16 is 0).
        "header-crc": sound[:3] + bytes([flags | 0x02]) + sound[4:10] + b"\0\0" + sound[10:],
        # The reserved flag bits set.
        "reserved-flags": sound[:3] + bytes([flags | 0xE0]) + sound[4:],
    }


def settings_for(data_root: Root, **overrides: Any) -> Settings:
    if isinstance(data_root, S3Path):  # its connection is the test's S3 server's
        overrides = {"data_root": data_root, **overrides}
        data_root = Path("unused")
    return Settings.load(data_root=data_root).model_copy(
        update={"shuffle_partitions": 2, **overrides}
    )


def delta_table(path: Root) -> pa.Table:
    """The table's current rows, read by delta-rs alone (its DataFusion engine),
    from a local folder or from s3://.

    Not `to_pyarrow_table()`: with deltalake 1.6.6 that aborts the interpreter
    at exit ("terminate called without an active exception", delta-rs #2184).
    """
    table = open_table(path)
    return pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())


def _naive_utc(value: Any) -> Any:
    """delta-rs returns aware UTC datetimes, Spark's collect() naive UTC ones."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def delta_rows(path: Root, columns: list[str] | None = None) -> Counter[tuple]:
    """The table's rows as a multiset of tuples, timestamps as naive UTC."""
    table = delta_table(path)
    names = columns or table.column_names
    return Counter(
        tuple(_naive_utc(row[n]) for n in names) for row in table.select(names).to_pylist()
    )


def delta_count(path: Root) -> int:
    return delta_table(path).num_rows


def read_with_pyarrow_only(table_path: Path) -> pa.Table:
    """Replay the Delta log by hand (JSON commits) and read the live files with pyarrow.

    Independent of both our code and delta-rs: proves the table is plain Delta.
    """
    live: dict[str, dict[str, str]] = {}
    for commit in sorted((table_path / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[action["add"]["path"]] = action["add"]["partitionValues"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    pieces = []
    for path, partition_values in sorted(live.items()):
        piece = pq.read_table(table_path / path)
        for name, value in partition_values.items():
            piece = piece.append_column(name, pa.array([value] * piece.num_rows, pa.string()))
        pieces.append(piece)
    return pa.concat_tables(pieces) if pieces else pa.table({})


def landing_lines(landing: Root, source: str) -> list[bytes]:
    """Every line of every landing file of a source, as Spark's text reader splits them."""
    lines: list[bytes] = []
    for file in sorted((landing / source).iterdir()):
        if file.name.startswith((".", "_")):
            continue
        data = file.read_bytes()
        if file.name.endswith(".gz"):
            data = gzip.decompress(data)
        lines.extend(data.splitlines())
    return lines


# What every JVM the tests start is given (tests/conftest.py adds it to SPARK_SUBMIT_OPTS,
# which Spark's launcher passes to the JVM of every spark-submit, pyspark's own
# included): plans evaluated interpreted, with an internal setting Spark made for its own
# test suites. On the tests' few hundred rows, generating and compiling code for every
# plan was about a sixth of a cold run's CPU. Not through a spark-defaults.conf in a
# SPARK_CONF_DIR of the tests: the launcher puts that folder on the JVM's class path,
# whose start then no longer matches the class archive's, and every JVM of the tests ran
# without it (docs/benchmarks.md).
INTERPRETED = "-Dspark.sql.codegen.factoryMode=NO_CODEGEN"
SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"
# SPARK_SUBMIT_OPTS without INTERPRETED, for a command that compiles its plans as every
# run outside the tests does.
COMPILED = {SUBMIT_OPTS: os.environ.get(SUBMIT_OPTS, "").replace(INTERPRETED, "").strip()}


def start_cli(
    *args: str,
    env: dict[str, str] | None = None,
    output: Path | None = None,
    module: str = "lakehouse",
) -> subprocess.Popen:
    """Start `python -m lakehouse ...` in its own process group, as a user or Airflow would
    (its plans interpreted, as every JVM of the tests, unless `env` says `COMPILED`).

    Its stdout and stderr are pipes, or, with `output`, appended to that file
    (for a process nobody reads while it runs). `module`: another `python -m` program
    of the tests' that starts a Spark JVM of its own.
    """
    sink = open(output, "a") if output else subprocess.PIPE  # noqa: SIM115 (the child keeps it)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=REPO,
            env={**os.environ, "LAKEHOUSE_SHUFFLE_PARTITIONS": "2", **(env or {})},
            stdout=sink,
            stderr=subprocess.STDOUT if output else subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    finally:
        if output:
            sink.close()


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the process and everything it started (the Spark JVM), like a node loss."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: int = 600, module: str = "lakehouse"
) -> subprocess.CompletedProcess:
    """Run `python -m lakehouse ...` (or `module`) to completion; nothing it started
    outlives it."""
    process = start_cli(*args, env=env, module=module)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        kill_group(process)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def run_in_process(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m lakehouse ...` in this process, on the tests' Spark session (the `spark`
    fixture must have started it): the same command as run_cli's, without a JVM's
    start-up and warm-up per command. `env` is set for the command's time. Its output
    is captured, its exit code returned."""
    from lakehouse.cli import main

    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.dict(os.environ, env or {}),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = main(list(args))
    return subprocess.CompletedProcess(["lakehouse", *args], code, out.getvalue(), err.getvalue())


# The columns that identify a gold row and its figures (ctr and event_date follow from them).
GOLD_COLUMNS = {
    "ad_performance_hourly": "window_start, window_end, ad_id, campaign_id, impressions, clicks",
    "actions_10min": "window_start, window_end, action, actions",
    "campaign_daily": "campaign_id, day, impressions, clicks",
    "user_status": "user_id, status, last_action, last_event_time",
}


def assert_gold_agrees_with_duckdb(settings: Settings, landing_root: Path, scratch: Path) -> None:
    """An independent implementation (the benchmark's DuckDB reference) of the same rules.

    DuckDB computes every window of `landing_root/landing` in one batch; the
    streams have written the windows the watermark closed. Each of those must
    be in DuckDB's result, identical; user_status (one row per user) must
    match whole.
    """
    import duckdb

    from benchmarks.references import duckdb_tables

    computed = duckdb_tables(landing_root, scratch)
    db = duckdb.connect()
    for name, columns in GOLD_COLUMNS.items():
        ours = delta_table(settings.table("gold", name))
        db.register("ours", ours)
        missing = db.sql(
            f"SELECT {columns} FROM ours "  # noqa: S608 (table names and paths of the test)
            f"EXCEPT SELECT {columns} FROM read_parquet('{scratch / name}.parquet')"
        ).fetchall()
        # A short input may close no whole day yet: campaign_daily may be empty.
        assert ours.num_rows > 0 or name == "campaign_daily", name
        assert not missing, (name, missing[:5])
        if name == "user_status":
            assert computed["rows"][name] == ours.num_rows
