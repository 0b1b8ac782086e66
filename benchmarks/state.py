"""State over a long run: many increments through every query, in one process.

`python -m benchmarks.state <data-root> <increments> <events-per-increment>`
(state store from LAKEHOUSE_STATE_STORE). Each increment lands one more day
of events, then every bronze, silver and gold query runs once
(Trigger.AvailableNow, no quality checks: they hold no state). After each
increment it prints one JSON line: seconds (in all and per layer), and rows
and memory of every stateful operator. The rows are counted with Spark's
state data source (`lakehouse state`), after the timed part: the RocksDB
store does not count its rows as it writes (`trackTotalNumberOfRows` off,
src/lakehouse/runtime/spark.py), so the queries' progress does not report them.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from pathlib import Path

from benchmarks.harness import seconds_by_layer
from lakehouse.catalog import LAYERS
from lakehouse.drivers.pipeline import run_layer
from lakehouse.runtime.monitoring import describe_state
from lakehouse.runtime.settings import Settings
from lakehouse.runtime.spark import get_spark
from lakehouse.samples.generate import GeneratorConfig, generate

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def main(root: Path, increments: int, events: int) -> None:
    settings = Settings.load(data_root=root)
    spark = get_spark(settings, app_name="bench-state")
    for increment in range(increments):
        day = START + dt.timedelta(days=increment)
        generate(GeneratorConfig(events=events, seed=5000 + increment, start=day), settings.landing)
        started = time.perf_counter()
        results = [result for layer in LAYERS for result in run_layer(spark, settings, layer)]
        seconds = round(time.perf_counter() - started, 2)
        # Memory from the last progress of each query that ran; rows from the state itself.
        memory = {r.stage: [op["memory_bytes"] for op in r.state_operators] for r in results}
        operators: dict[str, list[dict[str, object]]] = {}
        for state in describe_state(spark, settings):
            found = operators.setdefault(state.query, [])
            used = memory.get(state.query, [])
            found.append(
                {
                    "operator": state.operator,
                    "rows": state.state_rows,
                    "memory_bytes": used[len(found)] if len(found) < len(used) else None,
                }
            )
        line = {
            "increment": increment + 1,
            "seconds": seconds,
            "rows_in": sum(r.rows_in for r in results if r.stage.startswith("bronze/")),
            "layers": seconds_by_layer((r.stage, r.seconds) for r in results),
            "operators": operators,
        }
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
