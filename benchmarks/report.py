"""The benchmark's results as Markdown tables (printed, and written beside the JSON)."""

from __future__ import annotations

from typing import Any

MEMORY_PARTS = ("driver_python", "jvm", "python_workers", "total")


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:,.1f}"
        if isinstance(value, int):
            return f"{value:,}"
        return "" if value is None else str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return [*lines, ""]


def label(n: int) -> str:
    """1000000 -> 1M, 20000 -> 20k: sizes as the benchmark names them."""
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1_000}k"


def _memory(peak_mib: dict[str, int]) -> str:
    return " / ".join(str(peak_mib.get(part, 0)) for part in MEMORY_PARTS)


def _run_row(name: str, run: dict[str, Any]) -> list[Any]:
    return [
        name,
        run["lines"],
        run["seconds"],
        run["run_seconds"],
        run["startup_seconds"],
        run["events_per_second"],
        run["events_per_second_without_startup"],
        *(run["stages"][s] for s in ("bronze", "silver", "gold")),
        run["other_seconds"],
        " / ".join(f"{run['query_seconds'][s]:g}" for s in ("bronze", "silver", "gold")),
        run["validation_seconds"],
        run["dropped_late"],
        _memory(run["peak_mib"]),
    ]


def _state_rows(results: dict[str, Any]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for store, figures in results.get("state", {}).items():
        increments = figures["increments"]
        if not increments:
            continue
        marks = sorted({0, len(increments) // 2, len(increments) - 1})
        for query in increments[-1]["operators"]:
            for index, operator in enumerate(increments[-1]["operators"][query]):
                history = [
                    ops[index]["rows"] if index < len(ops) else 0
                    for ops in (i["operators"].get(query, []) for i in increments)
                ]
                rows.append(
                    [
                        store,
                        f"{query} {operator['operator']}",
                        *(history[i] for i in marks),
                        max(history),
                        None
                        if operator.get("memory_bytes") is None
                        else round(operator["memory_bytes"] / 2**20, 1),
                    ]
                )
    return rows


def _increment_seconds(increments: list[dict[str, Any]]) -> str:
    """Mean seconds of these increments, in all and per layer (where recorded)."""
    if not increments:
        return ""

    def mean(values: list[float]) -> float:
        return round(sum(values) / len(values), 1)

    total = mean([i["seconds"] for i in increments])
    if not all("layers" in i for i in increments):
        return f"{total}"
    layers = " / ".join(
        str(mean([i["layers"][name] for i in increments])) for name in ("bronze", "silver", "gold")
    )
    return f"{total} ({layers})"


def _spread(run: dict[str, Any]) -> str:
    """`median [min-max]` of a repeated run's wall seconds; a single run's seconds."""
    if "spread" not in run:
        return f"{run['seconds']:.1f} (1 run)"
    wall = run["spread"]["seconds"]
    return f"{wall['median']:.1f} [{wall['min']:.1f}-{wall['max']:.1f}]"


def _validation_share(run: dict[str, Any]) -> float:
    return run["validation_seconds"] / run["run_seconds"] if run["run_seconds"] else 0.0


def _targets(results: dict[str, Any]) -> list[list[Any]]:
    """Issue 23's targets, each with what this benchmark measured."""
    largest = results["history"][-1]
    size = label(largest["events"])
    run, added = largest["run"], largest["increment"]
    ratios = results["ratios"][size]
    increment = label(results["config"]["increment"])
    speed = run["events_per_second_without_startup"] or 0
    rows = [
        [
            f"+{increment} over {size} history <= 30 s wall (median)",
            f"{_spread(added)} s",
            added["seconds"] <= 30,
        ],
        [
            "one new landing file <= 15 s wall (median)",
            f"{_spread(results['one_new_file'])} s",
            results["one_new_file"]["seconds"] <= 15,
        ],
        [
            "empty run <= 10 s wall, start-up included (median)",
            f"{_spread(results['empty_run'])} s",
            results["empty_run"]["seconds"] <= 10,
        ],
        [
            f"first run over {size} >= 75,000 events/s without start-up (floor 35,000)",
            f"{speed:,} events/s (1 run)",
            speed >= 75_000,
        ],
        [
            f"+{increment} increment <= 1.5x DuckDB over the same new data",
            f"{ratios['increment_over_duckdb']}x ({added['duckdb_seconds']:.1f} s)",
            ratios["increment_over_duckdb"] <= 1.5,
        ],
        [
            f"validation <= 15% of a run (+{increment} over {size}, median run)",
            f"{_validation_share(added):.0%}",
            _validation_share(added) <= 0.15,
        ],
    ]
    growth = results["ratios"].get("increment_largest_over_smallest_history")
    if growth is not None:
        rows.append(
            [
                f"+{increment} over the largest history <= 1.1x over the smallest",
                f"{growth}x",
                growth <= 1.1,
            ]
        )
    for store, figures in results.get("state", {}).items():
        totals = [
            sum(op["rows"] for ops in i["operators"].values() for op in ops)
            for i in figures["increments"]
        ]
        if len(totals) >= 4:
            half = totals[len(totals) // 2 :]
            flat = max(half) <= 1.2 * max(totals[: len(totals) // 2])
            rows.append(
                [
                    f"state flat over {len(totals)} increments ({store})",
                    f"max {max(totals):,} rows; 2nd half max {max(half):,}",
                    flat,
                ]
            )
    return [[target, measured, "yes" if met else "NO"] for target, measured, met in rows]


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        f"# Lakehouse benchmark, {results['date']} (commit {results['commit']})",
        "",
        f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, {m['os']}, "
        f"Python {m['python']}, {m['java']}. Spark master {results['config']['spark_master']}. "
        f"Whole benchmark: {results['seconds']:,} s.",
        "",
    ]
    if "history" in results:
        lines += _history(results)
    if "backfill" in results:
        b = results["backfill"]
        lines += [
            "## Backfill (`lakehouse backfill`, every date of the largest root)",
            "",
            *_table(
                ["bronze rows", "wall s", "rows/s", "peak MiB"],
                [
                    [
                        b["bronze_rows"],
                        b["seconds"],
                        b["rows_per_second"],
                        _memory(b["peak_mib"]),
                    ]
                ],
            ),
        ]
    if "kafka_ingest" in results:
        k = results["kafka_ingest"]
        lines += [
            f"## Ingest into bronze: Kafka topics and landing files, {k['events']:,} events each",
            "",
            f"Local Apache Kafka broker (KRaft) ready in {k['broker_start_seconds']} s; "
            f"`lakehouse produce` published in {k['produce_seconds']} s.",
            "",
            *_table(
                ["input", "lines", "bronze queries s", "lines/s", "run wall s", "peak MiB"],
                [
                    [
                        name,
                        k[name]["lines"],
                        k[name]["query_seconds"],
                        k[name]["lines_per_second"],
                        k[name]["wall_seconds"],
                        _memory(k[name]["peak_mib"]),
                    ]
                    for name in ("kafka", "files")
                ],
            ),
        ]
    if "state" in results:
        n = results["config"]["state_increments"]
        marks = sorted({1, n // 2 + 1, n})
        lines += [
            f"## State over {n} increments of {results['config']['state_events']:,} events "
            "(one day each)",
            "",
            *_table(
                [
                    "store",
                    "query / operator",
                    *(f"rows after #{i}" for i in marks),
                    "max rows",
                    "memory MiB (last)",
                ],
                _state_rows(results),
            ),
        ]
        lines += _table(
            [
                "store",
                "mean s per increment",
                "first 5 after #1: s (bronze / silver / gold)",
                "last 5: s (bronze / silver / gold)",
                "peak MiB",
            ],
            [
                [
                    store,
                    round(sum(i["seconds"] for i in f["increments"]) / len(f["increments"]), 1),
                    _increment_seconds(f["increments"][1:6]),
                    _increment_seconds(f["increments"][-5:]),
                    _memory(f["peak_mib"]),
                ]
                for store, f in results["state"].items()
                if f["increments"]
            ],
        )
    if "object_store" in results:
        o = results["object_store"]
        lines += [
            f"## An S3 data root beside local disk ({label(o['events'])} history, "
            f"+{label(o['increment'])})",
            "",
            "The same landing files; S3Proxy on this machine (make s3-up) as the object store, "
            "so the figures show the S3A connector's and Delta's cost on S3, not a network's.",
            "",
            *_table(
                ["run", "local wall s", "S3 wall s", "local run s", "S3 run s", "S3 / local"],
                [
                    [
                        name,
                        o["local"][part]["seconds"],
                        o["s3"][part]["seconds"],
                        o["local"][part]["run_seconds"],
                        o["s3"][part]["run_seconds"],
                        f"{o['s3_over_local'][part]}x",
                    ]
                    for part, name in (("run", "first run"), ("increment", "increment"))
                ],
            ),
        ]
    return "\n".join(lines)


def _headline(results: dict[str, Any]) -> list[str]:
    """What users feel: a scheduled increment on the largest history, and the first run."""
    largest = results["history"][-1]
    size = label(largest["events"])
    increment = label(results["config"]["increment"])
    reps = results["config"].get("repetitions", 1)
    rows = [
        [f"+{increment} events over {size} history", largest["increment"]],
        ["one new landing file", results["one_new_file"]],
        ["empty run (nothing new)", results["empty_run"]],
        [f"first run over {size} events", largest["run"]],
    ]
    return [
        f"## Headline: a scheduled increment on {size} events of history",
        "",
        f"Wall seconds, start-up included: median [min-max] of {reps} repetitions "
        "(the first run: one).",
        "",
        *_table(
            ["run", "events", "wall s", "run s (w/o start-up)", "events/s w/o start-up"],
            [
                [
                    name,
                    run["lines"],
                    _spread(run),
                    run["run_seconds"],
                    run["events_per_second_without_startup"],
                ]
                for name, run in rows
            ],
        ),
    ]


def _history(results: dict[str, Any]) -> list[str]:
    """Headline, targets, every run and the reference points (the history sizes)."""
    lines = [
        *_headline(results),
        "## Targets",
        "",
        *_table(["target", "measured", "met"], _targets(results)),
        "## Runs (`lakehouse run`)",
        "",
        "Seconds; events are landing lines read. Repeated runs: the median run's figures "
        "(median by wall time) and the spread of its wall time. Bronze, silver and gold: "
        "each layer's wall span (its queries and checks; Spark's start-up in the first), "
        "so that they and `other` add up to the run. Query time: the sum of each layer's "
        "query times (bronze / silver / gold), more than the span when queries run side by "
        "side. Validation: the checks' time, inside the spans. Peak memory MiB: "
        "driver Python / JVM / Python workers / whole tree.",
        "",
    ]
    runs = []
    for entry in results["history"]:
        size = label(entry["events"])
        runs.append(_run_row(f"{size} history, first run", entry["run"]))
        runs.append(
            _run_row(
                f"+{label(results['config']['increment'])} over {size} history",
                entry["increment"],
            )
        )
    largest = results["history"][-1]
    runs.append(_run_row("run after a backfill (checks its output)", largest["after_backfill"]))
    runs.append(_run_row("empty run (nothing new, checks up to date)", results["empty_run"]))
    runs.append(_run_row("one new file", results["one_new_file"]))
    if "late_increment" in results:
        late = results["late_increment"]
        runs.append(
            _run_row(f"late: +{label(late['events'])}, from 12 h before the last event", late)
        )
    lines += _table(
        [
            "run",
            "events",
            "wall s",
            "run s",
            "start-up s",
            "events/s wall",
            "events/s w/o start-up",
            "bronze s",
            "silver s",
            "gold s",
            "other s",
            "query time s",
            "validation s",
            "dropped late",
            "peak MiB",
        ],
        runs,
    )
    lines += [
        "## Reference points (same landing files)",
        "",
        "First runs: our run without start-up against Spark reading the same lines and "
        "writing Parquet (the ceiling), and DuckDB computing every silver and gold table "
        "from the landing files. Increments: our median wall time against DuckDB over the "
        "increment's files alone and against our own batch backfill of the increment's dates "
        "(median of as many runs).",
        "",
    ]
    refs = []
    for entry in results["history"]:
        size = label(entry["events"])
        ceiling = entry["references"]["spark_json_to_parquet"]
        duck = entry["references"]["duckdb"]
        added = entry["increment"]
        ratio = results["ratios"][size]
        refs.append(
            [
                size,
                entry["run"]["run_seconds"],
                ceiling["seconds"],
                duck["seconds"],
                f"{ratio['run_over_spark_ceiling']}x",
                f"{ratio['run_over_duckdb']}x",
                added["seconds"],
                added["duckdb_seconds"],
                added["backfill_of_its_dates"]["seconds"],
                f"{ratio['increment_over_duckdb']}x",
                f"{ratio['increment_over_backfill_of_its_dates']}x",
            ]
        )
    lines += _table(
        [
            "history",
            "first run s",
            "Spark JSON->Parquet s",
            "DuckDB all tables s",
            "run / ceiling",
            "run / DuckDB",
            "increment wall s",
            "DuckDB increment s",
            "backfill of its dates s",
            "increment / DuckDB",
            "increment / backfill",
        ],
        refs,
    )
    folders = ("bronze", "quarantine", "silver", "gold", "_meta")
    lines += [
        "## Tables on disk after the first run",
        "",
        "MiB under each folder of the root's tables: data files and Delta logs.",
        "",
        *_table(
            ["history", *folders],
            [
                [
                    label(entry["events"]),
                    *(round(entry["run"]["table_bytes"].get(f, 0) / 2**20, 1) for f in folders),
                ]
                for entry in results["history"]
            ],
        ),
    ]
    return lines
