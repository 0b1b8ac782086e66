"""`make bench-overhead` (python -m benchmarks.overhead): what a small run costs.

A run's time on small data is fixed cost, not work. This measures, each
--repetitions times (medians with their spread), on fresh data roots under
--root:

1. a bare PySpark start with a trivial query (the reference);
2. `make run`'s sample: `lakehouse generate --events 20000 --seed 7 --days 2`,
   then `lakehouse run`, with Spark's event log on: wall time, time per
   stage, and Spark jobs per stage (with Delta state reconstructions);
3. an empty run (nothing new) on the last sample root;
4. a run after one new landing file (an hour of impressions of the next day).

Each figure is also given as a ratio to the bare start. Writes
<root>/reports/overhead-<time>.json and .md and prints the table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    LAKEHOUSE,
    lakehouse,
    machine,
    measure,
    repeated,
    run_figures,
    run_summary,
    write_report,
)
from benchmarks.spark_jobs import event_log_env, jobs_by_stage

SAMPLE = ["--events", "20000", "--seed", "7", "--days", "2"]  # the Makefile's `make run`
NEXT_DAY = "2026-11-03"  # the sample spans 2026-11-01 and 02
BARE_SPARK = (
    "from pyspark.sql import SparkSession\n"
    "spark = SparkSession.builder.master('local[*]').getOrCreate()\n"
    "spark.range(1000).count()\n"
    "spark.stop()\n"
)


def bare_spark(logs: Path, k: int) -> dict[str, Any]:
    return measure([sys.executable, "-c", BARE_SPARK], logs / f"bare-spark-{k}.log").figures()


def stage_seconds(root: Path, measured: Any) -> dict[str, float]:
    """Seconds of each query, and of each layer's checks, of one run."""
    summary = run_summary(root, measured)
    found = {s["stage"]: s["seconds"] for s in summary["stages"]}
    found |= {f"checks {c['layer']}": c["seconds"] for c in summary["checks"]}
    return {stage: round(seconds, 2) for stage, seconds in found.items()}


def sample_run(base: Path, logs: Path, k: int) -> dict[str, Any]:
    root = base / f"sample-{k}"
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run(
        [*LAKEHOUSE, "generate", *SAMPLE, "--data-root", str(root)],
        check=True,
        capture_output=True,
    )
    spark_logs = base / f"spark-events-{k}"
    shutil.rmtree(spark_logs, ignore_errors=True)
    log = logs / f"sample-run-{k}.log"
    measured = lakehouse(root, "run", log=log, env=event_log_env(spark_logs))
    return {
        **run_figures(root, measured),
        "root": str(root),
        "stage_seconds": stage_seconds(root, measured),
        "spark_jobs": jobs_by_stage(spark_logs),
    }


def empty_runs(root: Path, logs: Path, repetitions: int) -> list[dict[str, Any]]:
    return [
        run_figures(root, lakehouse(root, "run", log=logs / f"empty-run-{k}.log"))
        for k in range(1, repetitions + 1)
    ]


def one_file_runs(root: Path, base: Path, logs: Path, repetitions: int) -> list[dict[str, Any]]:
    scratch = base / "next-day"
    shutil.rmtree(scratch, ignore_errors=True)
    subprocess.run(
        [
            *LAKEHOUSE,
            "generate",
            "--events",
            "10000",
            "--seed",
            "77",
            "--start",
            NEXT_DAY,
            "--data-root",
            str(scratch),
        ],
        check=True,
        capture_output=True,
    )
    files = sorted((scratch / "landing" / "impressions").iterdir())[:repetitions]
    runs = []
    for k, one in enumerate(files, start=1):
        shutil.copy(one, root / "landing" / "impressions" / one.name)
        measured = lakehouse(root, "run", log=logs / f"one-file-run-{k}.log")
        runs.append({**run_figures(root, measured), "file": one.name})
    return runs


def markdown(results: dict[str, Any]) -> str:
    bare = results["bare_spark"]["seconds"]
    lines = [
        f"# Run overhead, {results['date']}, commit {results['commit']}",
        "",
        "Machine: {cores} cores, {memory_gib} GiB, {cpu}, {java}.".format(**results["machine"]),
        "",
        "| run | wall s (median) | spread | run s | x bare Spark start |",
        "|---|---|---|---|---|",
    ]
    for key, name in (
        ("bare_spark", "bare PySpark start + trivial query"),
        ("sample_run", "`make run` sample (20k events)"),
        ("one_new_file", "one new landing file"),
        ("empty_run", "empty run"),
    ):
        entry = results[key]
        spread = entry["spread"]["seconds"]
        lines.append(
            f"| {name} | {entry['seconds']:.1f} | {spread['min']:.1f}-{spread['max']:.1f} "
            f"| {entry.get('run_seconds', '')} | {entry['seconds'] / bare:.2f} |"
        )
    sample = results["sample_run"]
    jobs = sample["spark_jobs"]
    lines += [
        "",
        f"Spark jobs of the median sample run: {jobs['total']['jobs']} "
        f"({jobs['total']['job_seconds']} job-seconds), "
        f"{jobs['total']['state_reconstructions']} Delta state reconstructions.",
        "",
        "| stage | wall s | jobs | job s | state reconstructions |",
        "|---|---|---|---|---|",
    ]
    for stage, figures in sorted(jobs["stages"].items()):
        wall = sample["stage_seconds"].get(stage, "")
        lines.append(
            f"| {stage} | {wall} | {figures['jobs']} | {figures['job_seconds']} "
            f"| {figures['state_reconstructions']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.overhead", description=__doc__)
    parser.add_argument("--root", default="data-bench/overhead", help="work folder")
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args(argv)
    base = Path(args.root).resolve()
    logs = base / "logs"
    reps = args.repetitions
    started = time.perf_counter()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    results: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "commit": commit.stdout.strip(),
        "machine": machine(),
        "bare_spark": repeated([bare_spark(logs, k) for k in range(1, reps + 1)]),
    }
    samples = [sample_run(base, logs, k) for k in range(1, reps + 1)]
    results["sample_run"] = repeated(samples)
    last = Path(samples[-1]["root"])
    results["empty_run"] = repeated(empty_runs(last, logs, reps))
    results["one_new_file"] = repeated(one_file_runs(last, base, logs, reps))
    bare = results["bare_spark"]["seconds"]
    results["ratios"] = {
        key: round(results[key]["seconds"] / bare, 2)
        for key in ("sample_run", "one_new_file", "empty_run")
    }
    results["seconds"] = round(time.perf_counter() - started)
    write_report(base, "overhead", results, markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
