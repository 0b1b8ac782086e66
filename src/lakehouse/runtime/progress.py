"""What a stage did, as numbers, and the one-line summary printed per stage."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from lakehouse.runtime.monitoring import total

CAUGHT_UP = "caught up: no new input, not started"


@dataclass
class StageResult:
    stage: str
    rows_in: int = 0
    rows_out: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    seconds: float = 0.0
    # Stateful queries: input rows dropped as later than the watermark.
    dropped_late: int = 0
    # Per stateful operator after the run (`lakehouse.runtime.monitoring.operator_state`):
    # name, rows held (None when the store does not count them), state size on
    # disk and memory used (bytes).
    state_operators: list[dict[str, Any]] = field(default_factory=list)
    # Not started: its sources had nothing it had not read (storage.checkpoints.caught_up).
    caught_up: bool = False
    # What the run must tell its user beyond the figures (bronze: landing entries
    # it never reads, files changed after their ingestion), one line each.
    notices: list[str] = field(default_factory=list)
    # Written in batch (a backfill's table): rows written, no input count or batches.
    batch: bool = False
    # MERGE on keys (an upsert table): rows_out counts rows merged (inserted or
    # updated), which may exceed the rows the table holds.
    upsert: bool = False
    # Spark's progress of each micro-batch (JSON), for the event log.
    progress: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def state_rows(self) -> int | None:
        """Rows the query's state holds; None if stateless or not counted (RocksDB)."""
        return total(self.state_operators, "rows") if self.state_operators else None

    @property
    def state_bytes(self) -> int | None:
        return total(self.state_operators, "state_bytes") if self.state_operators else None

    def summary(self) -> str:
        if self.caught_up:
            return f"{self.stage:<30} {CAUGHT_UP}"
        out = ", ".join(
            f"{rows:,} {'rows merged into ' if self.upsert else ''}{table}"
            for table, rows in self.rows_out.items()
        )
        if self.batch:
            return f"{self.stage:<30} wrote {out}  ({self.seconds:.1f} s)"
        rate = f", {self.rows_in / self.seconds:,.0f} rows/s" if self.seconds > 0 else ""
        line = (
            f"{self.stage:<30} in {self.rows_in:>10,}  out {out}  "
            f"({self.batches} batch{'es' if self.batches != 1 else ''}, {self.seconds:.1f} s{rate})"
        )
        if self.state_operators:
            line += f"  late {self.dropped_late:,}, state {self.state_text}"
        return line

    @property
    def state_text(self) -> str | None:
        """`1,234 rows`, or the state's size on disk when its rows are not counted."""
        if not self.state_operators:
            return None
        if self.state_rows is not None:
            return f"{self.state_rows:,} rows"
        return f"{size_text(self.state_bytes)} on disk"


def size_text(size: int | None) -> str:
    """`812 bytes`, `12.3 KiB`, `4.5 MiB`, `1.2 GiB`."""
    if size is None:
        return "size unknown"
    if size < 1024:
        return f"{size:,} bytes"
    scaled = float(size)
    for unit in ("KiB", "MiB", "GiB"):
        scaled /= 1024
        if scaled < 1024 or unit == "GiB":
            break
    return f"{scaled:,.1f} {unit}"


@contextmanager
def timed(result: StageResult) -> Iterator[StageResult]:
    started = time.perf_counter()
    try:
        yield result
    finally:
        result.seconds = time.perf_counter() - started
