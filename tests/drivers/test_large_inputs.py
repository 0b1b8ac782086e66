"""Many small files and one large file through bronze, within memory bounds.

Admission control (`LAKEHOUSE_MAX_FILES_PER_TRIGGER`, default 1000) splits
thousands of small files into micro-batches; one large file is split by Spark
into partitions of `spark.sql.files.maxPartitionBytes` and streamed through,
so memory does not grow with the input. Each test runs a real `lakehouse run
--layer bronze`, samples the resident memory of its whole process tree (Python
driver, Spark JVM, Python workers) and checks that every line is accounted
for: bronze rows + quarantine rows = lines written = lines in the ledger.

CI sizes are `--ingest-files 2000 --ingest-mib 64`; the issue's sizes are
`pytest tests/drivers/test_large_inputs.py --ingest-files 10000
--ingest-mib 1024` (README, Tests). Figures are printed in the run's summary.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import psutil
import pytest
from deltalake import DeltaTable

from dev.processes import tree_memory_bytes
from lakehouse.quality.ledger import ledger_path
from tests.helpers import COMPILED, delta_count, delta_table, kill_group, settings_for, start_cli

pytestmark = pytest.mark.system

MALFORMED_EVERY = 997  # one line in 997 is broken JSON: it must land in quarantine
# The tree's peak resident memory must stay under this, whatever the input size:
# the driver JVM's 2 GiB heap (LAKEHOUSE_DRIVER_MEMORY) with its off-heap memory,
# the Python driver and workers.
MEMORY_BOUND_BYTES = 5 * 1024**3


def impression_line(n: int) -> bytes:
    if n % MALFORMED_EVERY == MALFORMED_EVERY - 1:
        return b'{"impression_id": "imp-%d", "ad_id": ' % n
    event = {
        "impression_id": f"imp-{n:012d}",
        "ad_id": f"ad-{n % 50}",
        "campaign_id": f"c-{n % 7}",
        "user_id": f"u-{n % 5000}",
        "event_time": f"2026-11-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
    }
    return json.dumps(event).encode()


def run_bronze(root: Path, log: Path) -> tuple[float, int]:
    """`lakehouse run --layer bronze`: its seconds and the peak RSS of its process tree."""
    started = time.monotonic()
    # Compiled, as outside the tests: on large inputs interpreted plans are much slower.
    args = ("run", "--layer", "bronze", "--data-root", str(root))
    process = start_cli(*args, env=COMPILED, output=log)
    peak = 0
    try:
        tree = psutil.Process(process.pid)
        while process.poll() is None:
            peak = max(peak, tree_memory_bytes(tree))
            time.sleep(0.2)
    finally:
        kill_group(process)
    assert process.returncode == 0, log.read_text()[-4000:]
    return time.monotonic() - started, peak


def assert_every_line_accounted_for(root: Path, lines: int) -> tuple[int, int]:
    settings = settings_for(root)
    accepted = delta_count(settings.table("bronze", "impressions"))
    rejected = delta_count(settings.table("quarantine", "impressions"))
    ledger = delta_table(ledger_path(settings)).to_pylist()
    read = sum(row["lines_read"] for row in ledger if row["source"] == "impressions")
    assert (accepted + rejected, read) == (lines, lines)
    assert rejected == lines // MALFORMED_EVERY
    return accepted, len([r for r in ledger if r["source"] == "impressions"])


@pytest.mark.full
def test_thousands_of_small_files_are_admitted_a_thousand_per_micro_batch(
    tmp_path, request, figures
):
    files = request.config.getoption("--ingest-files")
    root = tmp_path / "data"
    folder = root / "landing" / "impressions"
    folder.mkdir(parents=True)
    per_file = 3
    for f in range(files):
        lines = (impression_line(f * per_file + i) for i in range(per_file))
        (folder / f"small-{f:06d}.jsonl").write_bytes(b"\n".join(lines) + b"\n")

    seconds, peak = run_bronze(root, tmp_path / "run.log")
    accepted, batches = assert_every_line_accounted_for(root, files * per_file)
    assert batches == math.ceil(files / 1000), "admission control: 1000 files per micro-batch"
    files_in_bronze = {
        Path(p).name
        for p in delta_table(settings_for(root).table("bronze", "impressions"))["_source_file"]
        .unique()
        .to_pylist()
    }
    assert len(files_in_bronze) == files
    assert peak < MEMORY_BOUND_BYTES
    figures.append(
        f"small files: {files:,} files ({files * per_file:,} lines, {accepted:,} accepted) in "
        f"{batches} micro-batches, {seconds:.0f} s, peak RSS {peak / 2**20:,.0f} MiB"
    )


@pytest.mark.full  # a large input
def test_one_large_file_streams_through_in_bounded_memory(tmp_path, request, figures):
    size = request.config.getoption("--ingest-mib") * 2**20
    root = tmp_path / "data"
    folder = root / "landing" / "impressions"
    folder.mkdir(parents=True)
    lines = written = 0
    with open(folder / "large.jsonl", "wb") as out:
        while written < size:
            chunk = b"".join(impression_line(n) + b"\n" for n in range(lines, lines + 10_000))
            out.write(chunk)
            written += len(chunk)
            lines += 10_000

    seconds, peak = run_bronze(root, tmp_path / "run.log")
    accepted, batches = assert_every_line_accounted_for(root, lines)
    assert batches == 1
    files = DeltaTable(str(settings_for(root).table("bronze", "impressions"))).file_uris()
    assert len(files) > 1, "the file was split into partitions, not read by one task"
    assert peak < MEMORY_BOUND_BYTES
    figures.append(
        f"large file: {written / 2**20:,.0f} MiB, {lines:,} lines ({accepted:,} accepted), "
        f"{seconds:.0f} s ({lines / seconds:,.0f} lines/s), peak RSS {peak / 2**20:,.0f} MiB"
    )
