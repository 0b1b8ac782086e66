"""What one run or validation did: the stages, the checks, and the status people read."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakehouse.quality.derived import DERIVED_CHECKS
from lakehouse.quality.results import LayerCheck
from lakehouse.quality.validate import LAYER_CHECKS
from lakehouse.runtime.progress import StageResult
from lakehouse.runtime.runs import airflow_context


@dataclass
class RunOutcome:
    """Everything the run summary shows."""

    run_id: str
    command: str
    started_at: dt.datetime
    seconds: float = 0.0
    stages: list[StageResult] = field(default_factory=list)
    checks: list[LayerCheck] = field(default_factory=list)
    # Quarantined lines of this run (whole tables for `validate`) by source and reason class.
    quarantine: dict[str, dict[str, int]] = field(default_factory=dict)
    # The layers this run was asked to run (`lakehouse run --layer`), in order.
    layers: tuple[str, ...] = ()
    blocked_at: str | None = None
    error: str | None = None
    report: Path | None = None
    # What a backfill or parity check covered: `2026-11-01..2026-11-03`, `pending: ...`.
    dates: str | None = None
    # Parity: per table, live and batch rows and the differences (TableParity.data()).
    parity: list[dict[str, Any]] = field(default_factory=list)
    # Per gold table the run wrote: the newest event time it holds (ISO), for freshness.
    newest_events: dict[str, str | None] = field(default_factory=dict)
    # A run's wall time per layer: its queries and checks, Spark's start-up in the first.
    layer_seconds: dict[str, float] = field(default_factory=dict)
    # The Airflow task running it (dag_id, run_id, task_id, try_number), if any.
    airflow: dict[str, str] | None = field(default_factory=airflow_context)

    @property
    def not_run(self) -> list[str]:
        """Queries a blocking failure kept from running: the rest of its layer, later layers."""
        if self.blocked_at is None or self.command != "run":
            return []
        ran = {stage.stage for stage in self.stages}
        later = list(self.layers[self.layers.index(self.blocked_at) + 1 :])
        rest = [
            table
            for table in LAYER_CHECKS[self.blocked_at]
            if table not in ran
            and table.split("/")[0] == self.blocked_at
            and table not in DERIVED_CHECKS
        ]
        return rest + later

    @property
    def status(self) -> str:
        if self.error:
            return "failed"
        if any(not table["equal"] for table in self.parity):
            return "different"
        if any(check.failures for check in self.checks):
            return "blocked" if self.command == "run" else "failed checks"
        if any(check.warnings for check in self.checks):
            return "passed with warnings"
        return "passed"
