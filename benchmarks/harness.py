"""Run one `lakehouse` command (or any command) and measure it from the outside.

Wall-clock time includes process and Spark start-up. While it runs, the
memory of its process tree is sampled every second and split into
the driver's Python process (the command itself), the JVM (driver and, in
local mode, the executors) and Spark's Python workers (every other Python
process under the JVM). Memory is PSS (proportional set size): pages that
forked Python workers share are counted once in all, not once per process.
Reading a process's PSS walks its page tables (about 8 ms for a small JVM,
more as it grows), on the cores the run needs: sampled every 200 ms, the
10M first run took 322.8 s; every second, 298.2 s; alone, 269.4 s.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from dev.processes import process_tree
from lakehouse.catalog import LAYERS
from lakehouse.storage.objects import Root

SAMPLE_SECONDS = 1.0
RUN_ID = re.compile(r"\(run_id (\S+)\)")
LAKEHOUSE = [sys.executable, "-m", "lakehouse"]


def seconds_by_layer(stages: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Seconds of (stage, seconds) pairs summed per layer ("silver/clicks" is silver)."""
    totals = dict.fromkeys(LAYERS, 0.0)
    for stage, seconds in stages:
        layer = stage.split("/")[0]
        if layer in totals:
            totals[layer] += seconds
    return {layer: round(total, 2) for layer, total in totals.items()}


@dataclass
class Measured:
    argv: list[str]
    seconds: float
    # Peak PSS bytes per part of the process tree, and of the whole tree.
    peak_bytes: dict[str, int] = field(default_factory=dict)
    output: str = ""

    @property
    def run_id(self) -> str | None:
        found = RUN_ID.search(self.output)
        return found.group(1) if found else None

    def figures(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 2), "peak_mib": mib(self.peak_bytes)}


def mib(peaks: dict[str, int]) -> dict[str, int]:
    return {part: round(value / 2**20) for part, value in peaks.items()}


def _part(process: psutil.Process, root_pid: int) -> str | None:
    if process.pid == root_pid:
        return "driver_python"
    name = process.name()
    if name == "java":
        return "jvm"
    if name.startswith("python"):
        return "python_workers"
    # A child the JVM is forking (it still carries a JVM thread's name and the
    # JVM's pages until it execs), or a shell: not counted.
    return None


def _sample(root: psutil.Process) -> dict[str, int]:
    parts: dict[str, int] = {}
    for member in process_tree(root):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            part = _part(member, root.pid)
            if part is not None:
                parts[part] = parts.get(part, 0) + member.memory_full_info().pss
    parts["total"] = sum(parts.values())
    return parts


def measure(argv: list[str], log: Path, env: dict[str, str] | None = None) -> Measured:
    """Run argv to completion; fail with its output if it exits non-zero.

    The writes of earlier commands are flushed to disk first, so that their
    write-back is not charged to this one.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    os.sync()
    started = time.perf_counter()
    with log.open("w") as out:
        process = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        peaks: dict[str, int] = {}
        tree = psutil.Process(process.pid)
        while process.poll() is None:
            for part, value in _sample(tree).items():
                peaks[part] = max(peaks.get(part, 0), value)
            time.sleep(SAMPLE_SECONDS)
    seconds = time.perf_counter() - started
    output = log.read_text()
    if process.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} exited {process.returncode}; last output:\n{output[-3000:]}"
        )
    return Measured(argv, seconds, peaks, output)


def lakehouse(root: Root, *args: str, log: Path, env: dict[str, str] | None = None) -> Measured:
    return measure([*LAKEHOUSE, *args, "--data-root", str(root)], log, env)


def run_summary(root: Path, measured: Measured, reports: Path | None = None) -> dict[str, Any]:
    """The JSON summary `lakehouse run` wrote for this run (reports/runs/<run_id>.json),
    in `reports` when the run was told LAKEHOUSE_REPORTS_DIR (an object-store root's)."""
    if measured.run_id is None:
        raise RuntimeError(f"no run_id in the output of {' '.join(measured.argv)}")
    folder = reports or root / "reports"
    summary: dict[str, Any] = json.loads((folder / "runs" / f"{measured.run_id}.json").read_text())
    return summary


def run_figures(root: Path, measured: Measured, reports: Path | None = None) -> dict[str, Any]:
    """A `lakehouse run`: times per layer, rows, throughput with and without start-up.

    `stages`: each layer's wall span (its queries and its checks; Spark's start-up
    in the first), as the run measured it, so the spans and `other_seconds` add up to
    the run. `query_seconds`: the sum of each layer's query times, which exceeds the
    span when queries run side by side. `validation_seconds`: the checks' time, inside
    the spans."""
    summary = run_summary(root, measured, reports)
    stages = summary["stages"]
    lines = sum(s["rows_in"] for s in stages if s["stage"].startswith("bronze/"))
    spans = summary.get("layer_seconds") or {}
    per_layer = {layer: round(spans.get(layer, 0.0), 2) for layer in LAYERS}
    run_seconds = summary["seconds"]
    return {
        **measured.figures(),
        "run_seconds": run_seconds,
        "startup_seconds": round(measured.seconds - run_seconds, 2),
        "lines": lines,
        "bronze_rows": sum(s["rows_out"].get("bronze", 0) for s in stages),
        "events_per_second": round(lines / measured.seconds),
        "events_per_second_without_startup": round(lines / run_seconds) if run_seconds else None,
        "stages": per_layer,
        "other_seconds": round(run_seconds - sum(per_layer.values()), 2),
        "query_seconds": seconds_by_layer((s["stage"], s["seconds"]) for s in stages),
        "validation_seconds": round(sum(c["seconds"] for c in summary["checks"]), 2),
        "dropped_late": sum(s.get("dropped_late", 0) for s in stages),
        "queries": {s["stage"]: s["seconds"] for s in stages},
        "state": {s["stage"]: s["state_operators"] for s in stages if s.get("state_operators")},
        "status": summary["status"],
    }


def table_bytes(root: Path) -> dict[str, int]:
    """Bytes on disk under each folder of the root's tables (bronze, silver, gold,
    quarantine, _meta): data files and Delta logs, every version kept."""
    tables = root / "lakehouse"
    return {
        folder.name: sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        for folder in sorted(tables.iterdir())
        if folder.is_dir()
    }


def repeated(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Repetitions of one kind of run: every one's figures, and the median run's beside
    the spread of the wall and run times (the median run is the one with median wall time)."""
    ordered = sorted(runs, key=lambda r: r["seconds"])
    median = ordered[(len(ordered) - 1) // 2]

    def spread(key: str) -> dict[str, float]:
        values = sorted(r[key] for r in runs)
        return {"median": median[key], "min": values[0], "max": values[-1]}

    return {
        **median,
        "repetitions": len(runs),
        "spread": {key: spread(key) for key in ("seconds", "run_seconds") if key in median},
        "each": runs,
    }


def machine() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "cpu": cpu,
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": java.splitlines()[0] if java else None,
    }


def write_report(base: Path, name: str, results: dict[str, Any], table: str) -> None:
    """`<base>/reports/<name>-<time>.json` and `.md`, and the table printed."""
    reports = base / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    (reports / f"{name}-{stamp}.json").write_text(json.dumps(results, indent=2) + "\n")
    (reports / f"{name}-{stamp}.md").write_text(table)
    print(table)
    print(f"written: {reports / f'{name}-{stamp}.json'} and .md")
