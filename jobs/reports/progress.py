"""What a stage did, as numbers, and the one-line summary printed per stage."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

CAUGHT_UP = "caught up: no new input, not started"


@dataclass
class StageResult:
    stage: str
    rows_in: int = 0
    rows_out: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    seconds: float = 0.0
    # Stateful queries: input rows dropped as later than the watermark and
    # state rows held after the run.
    dropped_late: int = 0
    state_rows: int | None = None
    # Per stateful operator after the run: name, rows held, memory used (bytes).
    state_operators: list[dict[str, Any]] = field(default_factory=list)
    # Not started: its sources had nothing it had not read (include.storage.checkpoints.caught_up).
    caught_up: bool = False
    # What the run must tell its user beyond the figures (bronze: landing entries
    # it never reads, files changed after their ingestion), one line each.
    notices: list[str] = field(default_factory=list)
    # Another query writes the same tables next in this run (bronze's landing files,
    # then its Kafka topic): their checks wait for it, and check both at once.
    checks_after_next: bool = False
    # Spark's progress of each micro-batch (JSON), for the event log.
    progress: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def summary(self) -> str:
        if self.caught_up:
            return f"{self.stage:<30} {CAUGHT_UP}"
        out = ", ".join(f"{rows:,} {table}" for table, rows in self.rows_out.items())
        rate = f", {self.rows_in / self.seconds:,.0f} rows/s" if self.seconds > 0 else ""
        line = (
            f"{self.stage:<30} in {self.rows_in:>10,}  out {out}  "
            f"({self.batches} batch{'es' if self.batches != 1 else ''}, {self.seconds:.1f} s{rate})"
        )
        if self.state_rows is not None:
            line += f"  late {self.dropped_late:,}, state {self.state_rows:,} rows"
        return line


@contextmanager
def timed(result: StageResult) -> Iterator[StageResult]:
    started = time.perf_counter()
    try:
        yield result
    finally:
        result.seconds = time.perf_counter() - started
