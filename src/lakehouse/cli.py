"""The `lakehouse` command (also `python -m lakehouse`): the one way jobs are run.

The Airflow DAGs submit this same entry point with spark-submit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

from lakehouse import __version__
from lakehouse.catalog import DERIVED_LAYERS, LAYERS, SOURCES
from lakehouse.environment import help_text as environment_help
from lakehouse.errors import (
    EXIT_BLOCKED,
    EXIT_DIFFERENCES,
    EXIT_FAILED,
    EXIT_REFUSED,
    EXIT_USAGE,
    LakehouseError,
    RefusedError,
    explain,
    printable,
)
from lakehouse.runtime.locks import writer_lock
from lakehouse.runtime.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.reports.outcome import RunOutcome
    from lakehouse.samples.generate import GeneratorConfig

EPILOG = f"""\
{environment_help()}
s3: a data root s3a://bucket/prefix takes AWS_ENDPOINT_URL (unset: Amazon S3),
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION (default us-east-1)
"""


def _date(text: str) -> dt.datetime:
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def _day(text: str) -> dt.date:
    return _date(text).date()


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1: {text}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value


KAFKA_HELP = "Kafka brokers, host:port[,...] (default $LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS)"


# The options several commands share, each declared once.


def _common(parser: argparse.ArgumentParser) -> None:
    """The options every command takes, before or after the command's name (left out of
    the arguments when not given, so that a value given before the command stands)."""
    parser.add_argument(
        "--data-root",
        default=argparse.SUPPRESS,
        help="root folder (or s3a://bucket/prefix) of landing/, lakehouse/, checkpoints/ "
        "(default $LAKEHOUSE_DATA_ROOT, else ./data)",
    )
    parser.add_argument(
        "--spark-master",
        default=argparse.SUPPRESS,
        help="Spark master URL (default $LAKEHOUSE_SPARK_MASTER, else local[*])",
    )


def _layers(choices: Sequence[str], help_text: str) -> Options:
    def add(command: argparse.ArgumentParser) -> None:
        command.add_argument("--layer", action="append", choices=choices, help=help_text)

    return add


def _kafka(help_text: str = KAFKA_HELP) -> Options:
    def add(command: argparse.ArgumentParser) -> None:
        command.add_argument("--kafka-bootstrap-servers", help=help_text)

    return add


def _switch(name: str, help_text: str) -> Options:
    def add(command: argparse.ArgumentParser) -> None:
        command.add_argument(name, action="store_true", help=help_text)

    return add


def _date_range(required: bool) -> Options:
    def add(command: argparse.ArgumentParser) -> None:
        command.add_argument("--start", type=_day, required=required, help="first date, YYYY-MM-DD")
        command.add_argument("--end", type=_day, required=required, help="last date, YYYY-MM-DD")

    return add


def _events(command: argparse.ArgumentParser) -> None:
    """What `generate` and `produce` make: the same events from the same arguments."""
    command.add_argument(
        "--events", type=_positive, required=True, help="number of distinct events"
    )
    command.add_argument(
        "--seed", type=int, required=True, help="random seed (same seed, same lines)"
    )
    command.add_argument(
        "--start", type=_date, default=_date("2026-11-01"), help="first day (UTC), YYYY-MM-DD"
    )
    command.add_argument("--days", type=int, default=1, help="days the events span (default 1)")
    command.add_argument("--out-of-order-rate", type=_rate, default=0.10, help="default 0.10")
    command.add_argument("--late-rate", type=_rate, default=0.005, help="default 0.005")
    command.add_argument("--duplicate-rate", type=_rate, default=0.02, help="default 0.02")
    command.add_argument("--malformed-rate", type=_rate, default=0.005, help="default 0.005")
    command.add_argument(
        "--file-minutes", type=int, default=60, help="arrival minutes per file (default 60)"
    )


# The options of one command alone.


def _generate_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--gzip-rate", type=_rate, default=0.10, help="share of files gzipped, default 0.10"
    )
    command.add_argument(
        "--if-empty", action="store_true", help="do nothing if landing/ already has files"
    )


def _maintain_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--retain-hours",
        type=_positive,
        default=168,
        help="vacuum files unreferenced for longer than this (default 168, Delta's default; "
        "time travel and lagging streams cannot go further back)",
    )
    command.add_argument(
        "--keep-days",
        type=_positive,
        default=30,
        help="keep reports, Data Docs pages and parity scratch this many days (default 30)",
    )


def _recover_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--kafka-source",
        choices=list(SOURCES),
        help="restart this source's Kafka stream on its topic as it is now",
    )
    command.add_argument(
        "--from",
        dest="start",
        choices=("earliest", "latest"),
        help="with --kafka-source: read the topic from its oldest message, or from its end",
    )


Options = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    """One `lakehouse` command: what `--help` says of it, its options, what runs it."""

    run: Callable[[argparse.Namespace, Settings], int]
    help: str
    description: str
    options: tuple[Options, ...] = ()
    # It writes tables or checkpoints: one at a time per data root (the writer lock).
    writes: bool = False


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakehouse",
        description="Incremental lakehouse on Spark and Delta Lake: "
        "landing -> bronze -> silver -> gold.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on a failure, print whole tracebacks, Python's and the JVM's (LAKEHOUSE_DEBUG)",
    )
    _common(parser)
    # Also accepted after the command (`lakehouse run --data-root D`), as the contract has it.
    common = argparse.ArgumentParser(add_help=False)
    _common(common)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub = commands.add_parser(
            name, parents=[common], help=command.help, description=command.description
        )
        for add in command.options:
            add(sub)
    return parser


# A layer type: every layer (`Layer`), or those a backfill recomputes (`DerivedLayer`).
LayerT = TypeVar("LayerT", bound=str)


def in_order(chosen: Sequence[str] | None, names: Sequence[LayerT]) -> list[LayerT]:
    """The chosen layers (all when none) in pipeline order, each once."""
    return [name for name in names if not chosen or name in chosen]


def _generator_config(args: argparse.Namespace, gzip_rate: float = 0.0) -> GeneratorConfig:
    from lakehouse.samples.generate import GeneratorConfig

    return GeneratorConfig(
        events=args.events,
        seed=args.seed,
        start=args.start,
        days=args.days,
        out_of_order_rate=args.out_of_order_rate,
        late_rate=args.late_rate,
        duplicate_rate=args.duplicate_rate,
        malformed_rate=args.malformed_rate,
        gzip_rate=gzip_rate,
        file_minutes=args.file_minutes,
    )


def cmd_generate(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.samples.generate import generate, landing_is_empty

    if args.if_empty and not landing_is_empty(settings.landing):
        print(f"landing: {settings.landing} already has files; not generating")
        return 0
    started = time.perf_counter()
    summary = generate(_generator_config(args, args.gzip_rate), settings.landing)
    print(summary.describe())
    print(f"landing: {settings.landing} ({time.perf_counter() - started:.1f} s)")
    return 0


def cmd_produce(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.runtime.spark import get_spark
    from lakehouse.samples.produce import produce

    started = time.perf_counter()
    spark = get_spark(settings, app_name="lakehouse-produce", streaming=False)
    summary = produce(spark, settings, _generator_config(args))
    print(summary.describe().rsplit("\n", 1)[0])
    topics = ", ".join(settings.kafka_topic(source) for source in summary.lines)
    print(
        f"published {sum(summary.lines.values()):,} messages to {topics} on "
        f"{settings.kafka_bootstrap_servers} ({time.perf_counter() - started:.1f} s)"
    )
    return 0


def _echo(line: str) -> None:
    print(line, flush=True)


def _blocked(outcome: RunOutcome) -> int:
    """Exit status of a run or validation; a blocked one says so on stderr, once (the
    failures themselves are among the check lines printed above)."""
    failures = [o for check in outcome.checks for o in check.failures]
    if not failures:
        return 0
    where = f"{len(failures)} blocking check(s) failed (the BLOCKING lines above)"
    if outcome.not_run:
        where += f"; not run: {', '.join(outcome.not_run)}"
    print(f"lakehouse {outcome.command}: {where}; report: {outcome.report}", file=sys.stderr)
    return EXIT_BLOCKED


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.drivers.pipeline import run_pipeline
    from lakehouse.quality import runner
    from lakehouse.quality.results import results_path
    from lakehouse.runtime.monitoring import event_log_path
    from lakehouse.runtime.runs import new_run_id
    from lakehouse.runtime.spark import LazySpark, get_spark

    startup: list[float] = []

    def start_spark() -> SparkSession:
        """Spark starts when the first query or check needs it: a run with nothing
        new reads only logs, checkpoints and landing folders, and starts none."""
        started = time.perf_counter()
        spark = get_spark(settings, app_name="lakehouse-run")
        startup.append(time.perf_counter() - started)
        _echo(f"spark {spark.version} master={spark.sparkContext.master} ({startup[0]:.1f} s)")
        return spark

    runner.preload()
    spark = cast("SparkSession", LazySpark(start_spark))
    layers = in_order(args.layer, LAYERS)
    outcome = run_pipeline(spark, settings, new_run_id(), echo=_echo, layers=layers)
    # The report's time, Spark's start-up included.
    started = f"{startup[0]:.1f} s of it Spark's start-up" if startup else "Spark not started"
    print(f"run {outcome.status} in {outcome.seconds:.1f} s ({started})")
    print(f"data root:   {settings.data_root}")
    print(f"tables:      {settings.lakehouse}/{{bronze,quarantine,silver,gold}}/<table>")
    print(f"event log:   {event_log_path(settings)} (run_id {outcome.run_id})")
    print(f"dq results:  {results_path(settings)}")
    print(f"checkpoints: {settings.checkpoints}")
    print(f"report:      {outcome.report}")
    return _blocked(outcome)


def cmd_validate(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.drivers.pipeline import validate_tables
    from lakehouse.quality import runner
    from lakehouse.runtime.spark import get_spark

    runner.preload()
    spark = get_spark(settings, app_name="lakehouse-validate", streaming=False)
    layers = in_order(args.layer, LAYERS)
    outcome = validate_tables(spark, settings, layers, echo=_echo, whole_table=not args.new_rows)
    print(f"validate {outcome.status} in {outcome.seconds:.1f} s")
    print(f"report:      {outcome.report}")
    return _blocked(outcome)


def cmd_backfill(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.catalog.dates import DateRange
    from lakehouse.drivers.backfill import backfill
    from lakehouse.drivers.recovery import refuse_while_streams_behind
    from lakehouse.runtime.spark import get_spark

    given = (args.start, args.end)
    if (args.pending and given != (None, None)) or (not args.pending and None in given):
        print("lakehouse backfill: give --start and --end, or --pending", file=sys.stderr)
        return EXIT_USAGE
    chosen = None if args.pending else DateRange(args.start, args.end)  # a bad range: refused
    why = "after a backfill they would write them again (duplicates)"
    refuse_while_streams_behind(settings, "backfill", why)
    spark = get_spark(settings, app_name="lakehouse-backfill", streaming=False)
    outcome = backfill(spark, settings, chosen, in_order(args.layer, DERIVED_LAYERS), _echo)
    print(f"report:      {outcome.report}")
    return 0


def cmd_parity(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.catalog.dates import DateRange
    from lakehouse.drivers.parity import run_parity
    from lakehouse.drivers.pipeline import reported
    from lakehouse.drivers.recovery import refuse_while_streams_behind
    from lakehouse.reports.outcome import RunOutcome
    from lakehouse.runtime.runs import new_run_id
    from lakehouse.runtime.spark import get_spark

    dates = DateRange(args.start, args.end)
    why = "streaming would differ from batch by the rows not yet written"
    refuse_while_streams_behind(settings, "parity", why)
    spark = get_spark(settings, app_name="lakehouse-parity", streaming=False)
    span = f"{dates.start}..{dates.end}"
    run = RunOutcome(new_run_id("parity"), "parity", dt.datetime.now(dt.UTC), dates=span)
    with reported(settings, run) as outcome:
        results, scratch = run_parity(spark, settings, dates)
        outcome.parity = [result.data() for result in results]
    for result in results:
        print(result.summary())
    different = [r.table for r in results if not r.equal]
    print(f"batch recomputation kept in {scratch}")
    print(f"report:      {outcome.report}")
    if different:
        print(f"parity {span}: differences in {', '.join(different)}")
        return EXIT_DIFFERENCES
    print(f"parity {span}: streaming and batch agree")
    return 0


def cmd_state(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.runtime.monitoring import describe_state
    from lakehouse.runtime.spark import get_spark

    spark = get_spark(settings, app_name="lakehouse-state", streaming=False)
    operators = describe_state(spark, settings)
    for operator in operators:
        print(operator.summary())
    if not operators:
        print(f"no stateful query has run yet under {settings.checkpoints}")
    return 0


def cmd_recover(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.drivers.recovery import recover
    from lakehouse.runtime.spark import get_spark

    if not (args.layer or args.kafka_source) or bool(args.kafka_source) != bool(args.start):
        print("lakehouse recover: give --layer, or --kafka-source with --from", file=sys.stderr)
        return EXIT_USAGE
    spark = get_spark(settings, app_name="lakehouse-recover", streaming=False)
    kafka = (SOURCES[args.kafka_source], args.start) if args.kafka_source else None
    recover(spark, settings, in_order(args.layer or [], LAYERS), kafka, _echo)
    print("next: `lakehouse run` restarts the streams from the new checkpoints")
    return 0


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.drivers.tables import (
        columns_added,
        fingerprint_changes,
        refuse_dropped_columns,
        tables_to_migrate,
    )

    tables = tables_to_migrate(settings)
    for table in tables:
        refuse_dropped_columns(settings, table)
    if not tables:
        print("nothing to migrate: every stream runs with the catalog's rules and columns")
        return 0
    for table in tables:
        changes = fingerprint_changes(settings, table) or ["computed from a changed table"]
        print(f"{table.id}: {'; '.join(changes)}")
    widened = [table for table in tables if columns_added(settings, table)]
    recomputed = [table for table in tables if table not in widened]
    from lakehouse.drivers.recovery import bronze_dates, recover_tables
    from lakehouse.drivers.tables import add_columns
    from lakehouse.runtime.spark import get_spark

    spark = get_spark(settings, app_name="lakehouse-migrate", streaming=False)
    for table in widened:
        added = add_columns(spark, settings, table)
        print(f"{table.id}: added column(s) {', '.join(added)}; no row rewritten")
    if widened:
        dates = bronze_dates(spark, settings)
        span = f" --start {dates.start} --end {dates.end}" if dates else ""
        layers = " ".join(dict.fromkeys(f"--layer {t.layer}" for t in widened))
        print(
            "next: `lakehouse run` goes on with the new column(s); past rows read null "
            f"until `lakehouse backfill{span} {layers}` fills them from bronze"
        )
    if recomputed:
        retired = recover_tables(spark, settings, recomputed, echo=_echo)
        print(f"migrated {len(recomputed)} table(s): old checkpoints kept in {retired}")
        print("next: `lakehouse run` restarts their streams with the new rules")
    return 0


def cmd_maintain(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.drivers.maintain import expire_reports, maintain_tables
    from lakehouse.runtime.spark import get_spark

    started = time.perf_counter()
    spark = get_spark(settings, app_name="lakehouse-maintain", streaming=False)
    for result in maintain_tables(spark, settings, args.retain_hours):
        print(result.summary(), flush=True)
    print(expire_reports(settings, args.keep_days).summary())
    print(f"maintain finished in {time.perf_counter() - started:.1f} s")
    return 0


COMMANDS = {
    "generate": Command(
        cmd_generate,
        "write realistic sample events into landing/",
        "Write sample events for all sources into landing/ (deterministic by --seed). Rates "
        "are fractions of events; see src/lakehouse/samples/generate.py for what each means.",
        (_events, _generate_options),
    ),
    "produce": Command(
        cmd_produce,
        "publish the same sample events to the Kafka topics",
        "Publish what `generate` would write (same arguments, same lines: duplicates, "
        "out-of-order, late and malformed included) as messages, one per line, to the topic "
        "of each source (docs/kafka.md).",
        (_events, _kafka()),
    ),
    "run": Command(
        cmd_run,
        "one incremental run of every stage (Trigger.AvailableNow), then exit",
        "Process everything that arrived since the last run, exactly once, then stop.",
        (
            _layers(
                LAYERS,
                "only this layer's queries and checks (repeatable; default: all, in order). "
                "Airflow runs one layer per task.",
            ),
            _kafka(KAFKA_HELP + "; when set, bronze also ingests the sources' topics"),
        ),
        writes=True,
    ),
    "validate": Command(
        cmd_validate,
        "run the data-quality checkpoints on the current tables and write the report",
        "Run every expectation of the chosen layer(s) on the whole current tables, render "
        "Data Docs and a summary page under reports/, record the results in "
        "lakehouse/_meta/dq_results. Exit 3 if a blocking expectation fails.",
        (
            _layers(LAYERS, "only this layer (repeatable; default: all, in order)"),
            _switch(
                "--new-rows",
                "check only rows written since each table last passed, as `run` does "
                "(an unchanged table runs only its time-dependent rules); default: whole tables",
            ),
        ),
    ),
    "state": Command(
        cmd_state,
        "show the open state of every stateful query",
        "Read each streaming checkpoint with Spark's state data source and print the rows "
        "each stateful operator holds.",
    ),
    "backfill": Command(
        cmd_backfill,
        "recompute silver and gold for a date range from bronze, in batch",
        "Recompute silver and gold for event dates START..END (inclusive, UTC) from bronze "
        "and replace exactly those dates, atomically per table. Re-running gives the same "
        "tables. gold/user_status is recomputed whole.",
        (
            _date_range(required=False),  # or --pending
            _switch(
                "--pending",
                "instead of --start/--end: every date holding rows the streams dropped as late "
                "since its last backfill (prints them; does nothing when there are none)",
            ),
            _layers(
                DERIVED_LAYERS, "only this layer's tables (repeatable; default: silver and gold)"
            ),
        ),
        writes=True,
    ),
    "parity": Command(
        cmd_parity,
        "check streaming tables against a batch recomputation of a date range",
        "Recompute START..END in batch (closing rows at the watermarks the streaming queries "
        "reached) into a scratch data root and diff it with the live tables; exit 5 on any "
        "difference (1: it could not finish).",
        (_date_range(required=True),),
    ),
    "maintain": Command(
        cmd_maintain,
        "compact and vacuum every table, expire old reports",
        "Compact the small files of every Delta table under lakehouse/ (Delta's OPTIMIZE: a "
        "commit streams skip), vacuum files unreferenced for longer than --retain-hours "
        "(Delta's VACUUM), and delete run reports, Data Docs pages and parity scratch folders "
        "older than --keep-days. Never run it beside a writer (Airflow: the lakehouse_writers "
        "pool).",
        (_maintain_options,),
        writes=True,
    ),
    "recover": Command(
        cmd_recover,
        "restart a layer's streams after their checkpoints were lost or damaged",
        "The recovery a checkpoint error asks for. Moves the layer's checkpoints to "
        "checkpoints/_retired/<time>/. bronze: the next run reads every landing file again and "
        "skips the files bronze and quarantine already hold, and reads each Kafka topic again "
        "from its earliest offsets, skipping the messages the tables hold. silver, gold: "
        "rebuilds the layer's tables, and every table computed from them, by backfill over "
        "every date in bronze; the streams' next run reads their sources whole to rebuild "
        "state and writes only rows the backfill did not. --kafka-source S --from "
        "earliest|latest: restarts the source's Kafka stream on its topic as it is now (the "
        "choice asked for when the topic was deleted and created again). See "
        "docs/operations.md, 'Recovering a stream'.",
        (_layers(LAYERS, "the layer to recover (repeatable)"), _recover_options, _kafka()),
        writes=True,
    ),
    "migrate": Command(
        cmd_migrate,
        "move the lakehouse over to changed rules or columns in the catalog",
        "After a rule or a table's columns changed in the catalog, `run` refuses the streams "
        "started with the old values. This gives those tables, and every table computed from "
        "them, new checkpoints and recomputes them by backfill over every date in bronze; the "
        "next `run` goes on from there. A table that only gained nullable columns (a promoted "
        "field) gets them through Delta's schema evolution instead, keeping its rows and its "
        "stream; a backfill then fills them for past dates. A column removed or retyped is "
        "refused. Does nothing when nothing changed. See docs/operations.md, 'Changing a "
        "rule' and 'Promoting a field'.",
        writes=True,
    ),
}


# Commands that may start on a data root that does not exist: `generate` creates it with
# its landing files, `produce` needs none, and a first `run` creates it (and says so: a
# root fed only by Kafka holds no landing file to create it). Every other command
# refuses one: on a share that is not mounted, it would report on empty tables.
NEW_ROOT_COMMANDS = frozenset({"generate", "produce", "run"})


def refuse_a_missing_root(command: str, settings: Settings) -> None:
    """Stop a command that needs an existing data root when there is none; a `run`
    says it creates one."""
    if settings.data_root.exists():
        return
    if command not in NEW_ROOT_COMMANDS:
        raise LakehouseError(
            f"data root {printable(str(settings.data_root))} does not exist (a typo, or a "
            "share not mounted?): give the root that `lakehouse run` writes "
            "(--data-root or LAKEHOUSE_DATA_ROOT)"
        )
    if command == "run":
        _echo(
            f"data root {printable(str(settings.data_root))} does not exist: this first run "
            "creates it (if it should exist, check the path or the mount); it ingests what "
            "landing/<source>/ holds, or Kafka: `lakehouse generate` writes sample files"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    debug = args.debug
    # Whatever the caller's umask, nothing we create is writable by group or others.
    os.umask(os.umask(0o022) | 0o022)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings.load(
            data_root=getattr(args, "data_root", None),
            spark_master=getattr(args, "spark_master", None),
            kafka_bootstrap_servers=getattr(args, "kafka_bootstrap_servers", None),
            debug=debug,
        )
        debug = settings.debug
        refuse_a_missing_root(args.command, settings)
        command = COMMANDS[args.command]
        if not command.writes:
            return command.run(args, settings)
        with writer_lock(
            settings.data_root, f"lakehouse {args.command}", settings.lock_timeout, _echo
        ):
            return command.run(args, settings)
    except RefusedError as error:
        print(f"lakehouse {args.command}: {error}", file=sys.stderr)
        return EXIT_REFUSED
    except (ValueError, OSError, LakehouseError) as error:
        if debug:
            traceback.print_exc()
        print(f"lakehouse {args.command}: error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as error:
        if debug:
            traceback.print_exc()
        print(f"lakehouse {args.command}: failed: {explain(error)}", file=sys.stderr)
        return EXIT_FAILED
