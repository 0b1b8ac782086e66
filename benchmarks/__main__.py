"""`make bench` (python -m benchmarks): the lakehouse's speed, cost and state, in one run.

Every figure comes from real `lakehouse` processes on generated data, each
on its own data root under --root (deleted first). Every increment figure is
the median of --repetitions runs (default 3) with its spread; a first run
over a history is one run.

1. throughput: `lakehouse run` over N events of history (one day per
   --increment events), wall clock and without start-up, per stage, and the
   tables' bytes on disk after it (bronze, quarantine, silver, gold, _meta);
2. the scheduled increment against history: --repetitions more days of
   --increment events each, each followed by `lakehouse run`; beside them
   DuckDB computing every silver and gold table from each increment's files
   alone, and our own `lakehouse backfill` of the last increment's dates, then
   the run after that backfill, which checks the backfill's output (its own row).
   An increment arrives on time: its events start at the first whole hour after
   the root's last event, so the watermarks drop only what the generator makes
   late on purpose;
3. empty runs (nothing new, every check up to date) and runs after one new
   landing file (an hour of impressions, on time);
4. `lakehouse backfill` over every date of the largest root, then late data as
   its own, labelled case: --increment events starting 12 hours before the
   root's last event, run once, with the rows the watermarks dropped;
5. state over --state-increments increments, RocksDB and the default store;
6. peak memory (PSS) of the driver's Python, the JVM and the Python workers;
7. references on each history's landing files: Spark reading the same
   lines and writing Parquet (the ceiling), and DuckDB computing every
   silver and gold table; our time divided by each;
8. Kafka ingest beside file ingest: --kafka-events events published to a
   local Apache Kafka broker (`lakehouse produce`), then `lakehouse run
   --layer bronze` reading the topics; the same events as landing files
   into another root; messages (lines) per second into bronze, each.
9. an S3 data root beside local disk (S3Proxy on this machine).

Writes <root>/reports/bench-<time>.json and .md and prints the table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    LAKEHOUSE,
    lakehouse,
    machine,
    measure,
    mib,
    repeated,
    run_figures,
    run_summary,
    table_bytes,
    write_report,
)
from benchmarks.references import duckdb_tables
from benchmarks.report import label, markdown
from lakehouse.environment import environment
from lakehouse.samples.generate import GeneratorConfig, generate
from lakehouse.storage.objects import Root

START = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
INCREMENT_SEED = 900
QUICK = {
    "events": "20k,200k",
    "increment": "20k",
    "state_increments": 3,
    "state_events": 2000,
    "kafka_events": "20k",
}


def count(text: str) -> int:
    """1M, 200k or 5000."""
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


@dataclass
class Landed:
    """What `land` wrote: lines, and the time of the last event."""

    lines: int = 0
    last_event_ms: int = 0

    @property
    def last_event(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.last_event_ms / 1000, dt.UTC)

    @property
    def next_start(self) -> dt.datetime:
        """When the next events arrive on time: the first whole hour after the last event
        written (clicks and sessions run past the days asked for)."""
        hour = self.last_event + dt.timedelta(hours=1)
        return hour.replace(minute=0, second=0, microsecond=0)


def land(root: Root, events: int, per_day: int, seed: int, start: dt.datetime) -> Landed:
    """Generate `events` events from `start`, one day (and one seed) per `per_day`."""
    landed = Landed()
    for day in range(math.ceil(events / per_day)):
        size = min(per_day, events - day * per_day)
        config = GeneratorConfig(events=size, seed=seed + day, start=start + dt.timedelta(days=day))
        summary = generate(config, root / "landing")
        landed.lines += sum(summary.lines.values())
        landed.last_event_ms = max(landed.last_event_ms, summary.last_event_ms or 0)
    return landed


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def references(root: Path, work: Path, logs: Path) -> dict[str, Any]:
    ceiling_run = measure(
        [
            sys.executable,
            "-m",
            "benchmarks.references",
            "ceiling",
            str(root),
            str(work / "ceiling"),
        ],
        logs / "ceiling.log",
    )
    ceiling = json.loads(ceiling_run.output.strip().splitlines()[-1])
    ceiling.update(wall_seconds=round(ceiling_run.seconds, 2), peak_mib=mib(ceiling_run.peak_bytes))
    return {"spark_json_to_parquet": ceiling, "duckdb": duckdb_tables(root, work / "duckdb")}


def backfill_dates(root: Path, first: dt.date, last: dt.date, log: Path) -> dict[str, Any]:
    """`lakehouse backfill` of silver and gold over the dates first..last."""
    measured = lakehouse(
        root, "backfill", "--start", first.isoformat(), "--end", last.isoformat(), log=log
    )
    return measured.figures()


def increments(
    base: Path, root: Path, landed: Landed, increment: int, repetitions: int, logs: Path
) -> tuple[dict[str, Any], Landed]:
    """`repetitions` scheduled increments, one more day of `increment` events each, each
    on time (from `landed.next_start`, then from the last increment's); returns their
    figures and what the last one landed.

    Each increment is generated apart first, so that DuckDB computes every
    silver and gold table from its files alone (the same new data), then its
    files are copied into the root's landing folder and `lakehouse run` runs.
    Last, our own batch backfill recomputes the last increment's dates, as
    often: the same new data through our batch code.
    """
    runs = []
    for k in range(repetitions):
        scratch = base / f"{root.name}-increment-{k + 1}"
        shutil.rmtree(scratch, ignore_errors=True)
        start = landed.next_start
        landed = land(scratch, increment, increment, seed=INCREMENT_SEED + k, start=start)
        duck = duckdb_tables(scratch, scratch / "duckdb")
        shutil.copytree(scratch / "landing", root / "landing", dirs_exist_ok=True)
        log = logs / f"{root.name}-increment-{k + 1}.log"
        figures = run_figures(root, lakehouse(root, "run", log=log))
        figures["duckdb_seconds"] = duck["seconds"]
        runs.append(figures)
        print(f"[{root.name}] +{label(increment)} #{k + 1}: {figures['seconds']} s wall")
    first, last = start.date(), landed.last_event.date()
    batch = [
        backfill_dates(root, first, last, logs / f"{root.name}-backfill-{first}-{k + 1}.log")
        for k in range(repetitions)
    ]
    return {
        **repeated(runs),
        "duckdb_seconds": median([r["duckdb_seconds"] for r in runs]),
        "backfill_of_its_dates": {
            "dates": f"{first}..{last}",
            "seconds": median([b["seconds"] for b in batch]),
            "each": batch,
        },
    }, landed


def history(base: Path, size: int, increment: int, repetitions: int, logs: Path) -> dict[str, Any]:
    root = base / f"history-{label(size)}"
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    landed = land(root, size, increment, seed=1, start=START)
    took = time.perf_counter() - started
    print(f"[{label(size)}] generated {landed.lines:,} lines in {took:.0f} s")
    first = run_figures(root, lakehouse(root, "run", log=logs / f"{root.name}-run.log"))
    first["table_bytes"] = table_bytes(root)
    print(f"[{label(size)}] run: {first['seconds']} s, {first['events_per_second']:,} events/s")
    refs = references(root, base / f"{root.name}-references", logs / root.name)
    print(f"[{label(size)}] references: {json.dumps(refs)}")
    added, landed = increments(base, root, landed, increment, repetitions, logs)
    # The backfill's output is checked by the next run: a run of its own, not an empty one.
    after = run_figures(root, lakehouse(root, "run", log=logs / f"{root.name}-after-backfill.log"))
    return {
        "events": size,
        "root": str(root),
        "last_event_ms": landed.last_event_ms,
        "run": first,
        "references": refs,
        "increment": added,
        "after_backfill": after,
    }


def small_runs(
    root: Path, landed: Landed, increment: int, repetitions: int, logs: Path
) -> dict[str, Any]:
    """Empty runs (nothing new, every check up to date), then runs after one new landing
    file each: the next hours of impressions after the root's last event, at
    --increment events a day."""
    empty = [
        run_figures(root, lakehouse(root, "run", log=logs / f"empty-run-{k + 1}.log"))
        for k in range(repetitions)
    ]
    scratch = root.parent / "one-file"
    shutil.rmtree(scratch, ignore_errors=True)
    generate(GeneratorConfig(events=increment, seed=77, start=landed.next_start), scratch)
    files = sorted((scratch / "impressions").iterdir())[:repetitions]
    one_file = []
    for k, one in enumerate(files):
        shutil.copy(one, root / "landing" / "impressions" / one.name)
        figures = run_figures(root, lakehouse(root, "run", log=logs / f"one-file-run-{k + 1}.log"))
        one_file.append({**figures, "file": one.name})
    return {"empty_run": repeated(empty), "one_new_file": repeated(one_file)}


def backfill(root: Path, last: dt.date, rows: int, logs: Path) -> dict[str, Any]:
    """Silver and gold recomputed in batch from `rows` bronze rows, every date to `last`."""
    figures = backfill_dates(root, START.date(), last, logs / "backfill.log")
    return {**figures, "bronze_rows": rows, "rows_per_second": round(rows / figures["seconds"])}


def late_increment(root: Path, landed: Landed, events: int, logs: Path) -> dict[str, Any]:
    """Late data, labelled: `events` events starting 12 hours before the root's last
    event, and the run that reads them (the watermarks drop what is behind them)."""
    start = landed.next_start - dt.timedelta(hours=12)
    land(root, events, events, seed=INCREMENT_SEED - 1, start=start)
    figures = run_figures(root, lakehouse(root, "run", log=logs / "late-increment.log"))
    print(f"[late] +{label(events)}: {figures['dropped_late']:,} rows dropped as late")
    return {**figures, "events": events, "start": start.isoformat()}


def state(
    base: Path, increments: int, events: int, logs: Path, stores: list[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for store in stores:
        root = base / f"state-{store}"
        shutil.rmtree(root, ignore_errors=True)
        measured = measure(
            [sys.executable, "-m", "benchmarks.state", str(root), str(increments), str(events)],
            logs / f"state-{store}.log",
            env={"LAKEHOUSE_STATE_STORE": store},
        )
        rows = [json.loads(line) for line in measured.output.splitlines() if line.startswith("{")]
        out[store] = {**measured.figures(), "increments": rows}
        print(f"[state {store}] {increments} increments in {measured.seconds:.0f} s")
    return out


def kafka_ingest(base: Path, events: int, logs: Path) -> dict[str, Any]:
    """Bronze from Kafka topics and from landing files, the same `events` events each."""
    from dev.kafka_broker import KafkaBroker, free_port

    broker = KafkaBroker(base / "kafka-broker", free_port())
    shutil.rmtree(broker.state, ignore_errors=True)
    started_in = broker.start()
    try:
        env = {"LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers}
        out: dict[str, Any] = {"events": events, "broker_start_seconds": round(started_in, 1)}
        for name in ("kafka", "files"):
            root = base / f"ingest-{name}"
            shutil.rmtree(root, ignore_errors=True)
            if name == "kafka":
                generated = ["produce", "--events", str(events), "--seed", "5"]
                published = lakehouse(root, *generated, log=logs / "kafka-produce.log", env=env)
                out["produce_seconds"] = round(published.seconds, 1)
            else:
                land(root, events, events, seed=5, start=START)
            # The files' root reads no topic: Kafka is configured for its own run only.
            run = lakehouse(
                root,
                "run",
                "--layer",
                "bronze",
                log=logs / f"ingest-{name}.log",
                env=env if name == "kafka" else {"LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS": ""},
            )
            summary = run_summary(root, run)
            stages = [
                s
                for s in summary["stages"]
                if s["stage"].startswith("bronze/")
                and s["stage"].endswith("[kafka]") == (name == "kafka")
            ]
            lines = sum(s["rows_in"] for s in stages)
            seconds = sum(s["seconds"] for s in stages)
            out[name] = {
                "lines": lines,
                "query_seconds": round(seconds, 1),
                "lines_per_second": round(lines / seconds) if seconds else None,
                "wall_seconds": round(run.seconds, 1),
                "peak_mib": mib(run.peak_bytes),
            }
            print(f"[ingest {name}] {lines:,} lines into bronze in {seconds:.1f} s")
        return out
    finally:
        broker.stop()


def object_store(base: Path, events: int, increment: int, logs: Path) -> dict[str, Any]:
    """The same history and increment on local disk and on an S3 root (S3Proxy on this
    machine): what the object store costs. Reports stay local in both."""
    from dev.processes import free_port
    from dev.s3_server import S3Server

    server = S3Server(base / "s3-server", free_port())
    shutil.rmtree(server.state, ignore_errors=True)
    server.start()
    try:
        out: dict[str, Any] = {"events": events, "increment": increment}
        local = base / "object-store-local"
        shutil.rmtree(local, ignore_errors=True)
        for name in ("local", "s3"):
            reports = base / f"object-store-{name}-reports"
            shutil.rmtree(reports, ignore_errors=True)
            env = {"LAKEHOUSE_REPORTS_DIR": str(reports)}
            root: Root = local
            if name == "s3":
                root = server.root("s3a://lakehouse/bench")
                env.update(server.connection().environment())
            landed = land(root, events, increment, seed=1, start=START)
            first = run_figures(
                reports.parent,
                lakehouse(root, "run", log=logs / f"object-store-{name}.log", env=env),
                reports,
            )
            land(root, increment, increment, seed=INCREMENT_SEED, start=landed.next_start)
            added = run_figures(
                reports.parent,
                lakehouse(root, "run", log=logs / f"object-store-{name}-increment.log", env=env),
                reports,
            )
            out[name] = {"run": first, "increment": added}
            print(f"[{name}] run {first['seconds']} s, +{label(increment)} {added['seconds']} s")
        out["s3_over_local"] = {
            part: round(out["s3"][part]["seconds"] / out["local"][part]["seconds"], 2)
            for part in ("run", "increment")
        }
        return out
    finally:
        server.stop()


def ratios(results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for entry in results["history"]:
        run, refs, added = entry["run"], entry["references"], entry["increment"]
        out[label(entry["events"])] = {
            "run_over_spark_ceiling": round(
                run["run_seconds"] / refs["spark_json_to_parquet"]["seconds"], 1
            ),
            "run_over_duckdb": round(run["run_seconds"] / refs["duckdb"]["seconds"], 1),
            "wall_over_spark_ceiling_wall": round(
                run["seconds"] / refs["spark_json_to_parquet"]["wall_seconds"], 1
            ),
            "increment_over_duckdb": round(added["seconds"] / added["duckdb_seconds"], 1),
            "increment_over_backfill_of_its_dates": round(
                added["seconds"] / added["backfill_of_its_dates"]["seconds"], 2
            ),
        }
    if "backfill" in results:
        largest = results["history"][-1]
        out[label(largest["events"])]["run_over_backfill"] = round(
            largest["run"]["seconds"] / results["backfill"]["seconds"], 2
        )
    added = [e["increment"]["seconds"] for e in results["history"]]
    if len(added) > 1:
        out["increment_largest_over_smallest_history"] = round(added[-1] / added[0], 2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--root", default="data-bench", help="work folder (default data-bench/)")
    parser.add_argument("--events", default="1M,10M", help="history sizes (default 1M,10M)")
    parser.add_argument("--increment", default="1M", help="events added per increment and per day")
    parser.add_argument("--state-increments", type=int, default=50)
    parser.add_argument("--state-events", type=int, default=20_000, help="events per increment")
    parser.add_argument(
        "--state-stores",
        default="rocksdb,hdfs",
        help="state stores the state figures compare (default rocksdb,hdfs)",
    )
    parser.add_argument(
        "--kafka-events", default="1M", help="events for the Kafka ingest figures (default 1M)"
    )
    parser.add_argument(
        "--object-store-events",
        default="1M",
        help="history for the S3-root figures (default 1M; the increment is --increment)",
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=["history", "state", "backfill", "kafka", "object-store"],
    )
    parser.add_argument(
        "--repetitions",
        type=int,
        default=3,
        help="runs of each increment kind (+N events, one file, empty); medians are reported",
    )
    parser.add_argument("--quick", action="store_true", help=f"small sizes: {QUICK}")
    args = parser.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    stores = str(args.state_stores).split(",")
    if not set(stores) <= {"rocksdb", "hdfs"}:
        parser.error(f"--state-stores: rocksdb and/or hdfs, got {args.state_stores}")
    base = Path(args.root).resolve()
    logs = base / "logs"
    sizes = sorted(count(s) for s in str(args.events).split(","))
    increment = count(str(args.increment))
    started = time.perf_counter()
    results: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "machine": machine(),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "config": {
            "events": sizes,
            "increment": increment,
            "repetitions": args.repetitions,
            "state_increments": args.state_increments,
            "state_events": args.state_events,
            "spark_master": environment().spark_master,
            "command": " ".join([*LAKEHOUSE, "..."]),
        },
    }
    if "history" not in args.skip:
        reps = args.repetitions
        results["history"] = [history(base, size, increment, reps, logs) for size in sizes]
        largest = results["history"][-1]
        root, landed = Path(largest["root"]), Landed(last_event_ms=largest["last_event_ms"])
        results.update(small_runs(root, landed, increment, reps, logs))
        if "backfill" not in args.skip:
            added = [*largest["increment"]["each"], *results["one_new_file"]["each"]]
            rows = largest["run"]["bronze_rows"] + sum(r["bronze_rows"] for r in added)
            last = landed.next_start.date()  # the one-file runs' date
            results["backfill"] = backfill(root, last, rows, logs)
        results["late_increment"] = late_increment(root, landed, increment, logs)
    if "state" not in args.skip:
        results["state"] = state(base, args.state_increments, args.state_events, logs, stores)
    if "kafka" not in args.skip:
        results["kafka_ingest"] = kafka_ingest(base, count(str(args.kafka_events)), logs)
    if "object-store" not in args.skip:
        events = count(str(args.object_store_events))
        results["object_store"] = object_store(base, events, increment, logs)
    results["ratios"] = ratios(results) if "history" in results else {}
    results["seconds"] = round(time.perf_counter() - started)
    write_report(base, "bench", results, markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
