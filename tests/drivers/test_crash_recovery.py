"""Seeded random SIGKILLs of real `lakehouse run` and `lakehouse backfill` processes.

Each data root gets a plan of kills drawn from a seeded generator: two of the
run (the second one kills the rerun), then one of a backfill. Every planned
kill must land: one the command outruns (it finishes before the crash point
or the moment) is re-planned on the same data root, restored, and a command
that hangs fails the test. A kill is one of:

- a random moment of the run (any stage: Spark start-up, bronze, silver, gold,
  the quality checks, the report);
- a named point around our writes (`src/lakehouse/faults.py`): just before or after
  the n-th Delta write (a micro-batch append, a MERGE, a backfill replacement,
  a ledger or results append), or a random few milliseconds after reaching it,
  that is while Spark writes the data files and Delta commits them;
- the moment Spark writes a checkpoint file (the n-th new `offsets/` or
  `commits/` entry, or new state store file, of one stream) or Delta writes a
  log file (the n-th new file in one table's `_delta_log/`).

After the kills the command runs once more, uninterrupted (on a local root in
this process, on the tests' warm Spark session: it finds on disk what the
killed processes left, as a new process would). Then the tables must
equal an uninterrupted run's (or backfill's) row for row (made in this process
too, on a fresh copy of the landing files), bronze and
quarantine holding every line once; one more run must succeed and change
nothing, so no orphan file or state breaks later runs; and `lakehouse maintain
--retain-hours 0` must leave the same rows and no data file that the table's
Delta log does not reference (what the killed writers left behind), and report
truly the files it left and removed.

`pytest --kills N --kill-seed S` sets the number of kills (3 per data root,
default 3) and the seed; each plan and its outcome is printed in the run's
summary. Every plan runs twice: on a local data root (in every CI run), and
on an object-store root (`s3a://` on a local S3Proxy, docs/object-storage.md;
in `make test-full`), whose tables must equal the same uninterrupted local
run's. A smaller crash test on S3 runs in every CI run (test_object_store.py).
"""

from __future__ import annotations

import random
import re
import shutil
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from dev.s3_server import S3Server
from lakehouse.catalog import SOURCES
from lakehouse.catalog.schemas import table_schema
from lakehouse.samples.generate import GeneratorConfig, generate
from lakehouse.storage.delta.log import open_table
from lakehouse.storage.objects import Root, S3Path, location, remove_tree
from tests.helpers import (
    COMPILED,
    TABLE_NAMES,
    delta_rows,
    delta_table,
    kill_group,
    landing_lines,
    run_cli,
    run_in_process,
    settings_for,
    start_cli,
)

pytestmark = pytest.mark.system

# Several micro-batches per source, so crashes fall between batches too.
SMALL_BATCHES = {"LAKEHOUSE_MAX_FILES_PER_TRIGGER": "8"}
# A command in a process of its own starts a cold JVM: it takes two to three and a half
# times what it takes in the tests' warm session (pytest's durations of the two show
# it). Kill moments are drawn from twice the session's time,
# so they land before a cold command ends; one it outruns is re-planned from its time.
COLD_PROCESS_FACTOR = 2.0
KILLS_PER_ROOT = 3
CHECKPOINT_FILES = ("offsets", "commits", "state")


def tables(root: Path) -> dict[str, Counter]:
    """Every row of every table; bronze and quarantine with the file name, not its path."""
    settings = settings_for(root)
    result = {
        f"{layer}/{name}": delta_rows(
            settings.table(layer, name), table_schema(f"{layer}/{name}").names
        )
        for layer, name in TABLE_NAMES
    }
    for source, spec in SOURCES.items():
        for layer, columns in (("bronze", list(spec.fields)), ("quarantine", ["raw", "reason"])):
            rows = delta_rows(settings.table(layer, source), [*columns, "_source_file"])
            result[f"{layer}/{source}"] = Counter(
                (*r[:-1], Path(r[-1]).name) for r in rows.elements()
            )
    return result


@dataclass(frozen=True)
class Reference:
    """What uninterrupted commands give, and the ranges kills are drawn from."""

    after_run: dict[str, Counter]
    after_backfill: dict[str, Counter]
    run_seconds: float  # about what it takes in a process of its own (COLD_PROCESS_FACTOR)
    backfill_seconds: float
    commits: int  # Delta writes of one run (each passes the crash points once)
    backfill_args: tuple[str, ...]
    batches: dict[str, int]  # micro-batches per stream, e.g. "silver/user_sessions": 2
    stateful: tuple[str, ...]


@dataclass(frozen=True)
class Kill:
    what: str  # how it is described in the plan
    crash_at: str | None = None  # LAKEHOUSE_CRASH_AT
    after_seconds: float | None = None
    watch: tuple[str, int] | None = None  # a folder under the data root, n-th new file in it


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("landing")
    generate(GeneratorConfig(events=4000, seed=5, malformed_rate=0.02, file_minutes=60), root)
    return root


def fresh_root(tmp_path: Path, landing: Path, server: S3Server | None = None) -> Root:
    """A data root holding `landing`: a local folder, or a new prefix on `server`."""
    if server is None:
        root = tmp_path / "data"
        shutil.copytree(landing, root / "landing")
        return root
    prefix = server.root(f"s3a://lakehouse/crash/{tmp_path.name}")
    for path in sorted(landing.rglob("*")):
        if path.is_file():
            (prefix / "landing" / str(path.relative_to(landing))).write_bytes(path.read_bytes())
    return prefix


def environment(root: Root) -> dict[str, str]:
    """What a command needs to reach an S3 root (nothing for a local one)."""
    return root.connection.environment() if isinstance(root, S3Path) else {}


def copy_root(source: Root, target: Root) -> None:
    """`target` becomes a copy of `source` (a snapshot, or its restore)."""
    remove_tree(target)
    if isinstance(source, S3Path) and isinstance(target, S3Path):
        for path, _ in source.objects():
            (target / path.relative_to(source)).write_bytes(path.read_bytes())
    else:
        shutil.copytree(source, target, symlinks=True)


def event_days(root: Path) -> tuple[str, str]:
    times = [delta_table(settings_for(root).table("bronze", s))["event_time"] for s in SOURCES]
    days = [pc.min_max(pc.cast(column, "date32")) for column in times]
    return (
        str(min(d["min"].as_py() for d in days)),
        str(max(d["max"].as_py() for d in days)),
    )


@pytest.fixture(scope="module")
def reference(spark, tmp_path_factory, landing) -> Reference:
    """The uninterrupted run, then backfill, in this process on the tests' warm session
    (which evaluates plans interpreted, where the killed processes generate code: their
    tables must be equal all the same)."""
    root = fresh_root(tmp_path_factory.mktemp("reference"), landing)
    started = time.monotonic()
    done = run_in_process("run", "--data-root", str(root), env=SMALL_BATCHES)
    run_seconds = COLD_PROCESS_FACTOR * (time.monotonic() - started)
    assert done.returncode == 0, done.stderr
    after_run = tables(root)
    for source in SOURCES:
        accepted = sum(after_run[f"bronze/{source}"].values())
        rejected = sum(after_run[f"quarantine/{source}"].values())
        assert accepted + rejected == len(landing_lines(landing, source))
    commits = sum(
        commit.get("operation") != "CREATE TABLE"
        for log in (root / "lakehouse").rglob("_delta_log")
        for commit in DeltaTable(str(log.parent)).history()
    )
    start, end = event_days(root)
    backfill_args = ("backfill", "--start", start, "--end", end)
    started = time.monotonic()
    done = run_in_process(*backfill_args, "--data-root", str(root))
    backfill_seconds = COLD_PROCESS_FACTOR * (time.monotonic() - started)
    assert done.returncode == 0, done.stderr
    checkpoints = settings_for(root).checkpoints
    batches = {
        str(path.parent.relative_to(checkpoints)): len(list(path.iterdir()))
        for path in sorted(checkpoints.glob("*/*/offsets"))
    }
    return Reference(
        after_run=after_run,
        after_backfill=tables(root),
        run_seconds=run_seconds,
        backfill_seconds=backfill_seconds,
        commits=commits,
        backfill_args=backfill_args,
        batches=batches,
        stateful=tuple(s for s in batches if (checkpoints / s / "state").is_dir()),
    )


def run_kill(rng: random.Random, ref: Reference) -> Kill:
    """Any kill of a run; each one is reached by an uninterrupted run."""
    kind = rng.choice(["moment", "moment", "write", "write", "write", "checkpoint", "log"])
    n = rng.randint(1, ref.commits)
    # Delays that land inside the write: Spark's job writing the files, then the
    # Delta commit (the Python driver waits on the JVM, so the timer fires).
    ms = rng.randint(0, 1500)
    if kind == "moment":
        seconds = round(rng.uniform(0.1, 0.6) * ref.run_seconds, 1)
        return Kill(f"run killed after {seconds} s", after_seconds=seconds)
    if kind == "write":
        point = rng.choice([f"before_commit:{n}", f"after_commit:{n}", f"before_commit:{n}+{ms}"])
        point = f"write.{point}"
        where = "inside" if "+" in point else "at"
        return Kill(f"run killed {where} {point}", crash_at=point)
    if kind == "log":
        stream = rng.choice(sorted(ref.batches))
        folder = f"lakehouse/{stream}/_delta_log"
        nth = rng.randint(1, 2 * ref.batches[stream])
        return Kill(f"run killed at new {folder} file #{nth}", watch=(folder, nth))
    file_kind = rng.choice(CHECKPOINT_FILES)
    stream = rng.choice(ref.stateful if file_kind == "state" else sorted(ref.batches))
    nth = rng.randint(1, 2 if file_kind == "state" else ref.batches[stream])
    folder = f"checkpoints/{stream}/{file_kind}"
    return Kill(f"run killed at new {folder} file #{nth}", watch=(folder, nth))


def backfill_kill(rng: random.Random, ref: Reference) -> Kill:
    n = rng.randint(1, len(TABLE_NAMES))
    kind = rng.choice(["moment", "write.before_commit", "write.after_commit", "inside"])
    if kind == "moment":
        seconds = round(rng.uniform(0.1, 0.6) * ref.backfill_seconds, 1)
        return Kill(f"backfill killed after {seconds} s", after_seconds=seconds)
    if kind == "inside":
        point = f"write.before_commit:{n}+{rng.randint(0, 1500)}"
        return Kill(f"backfill killed inside {point}", crash_at=point)
    return Kill(f"backfill killed at {kind}:{n}", crash_at=f"{kind}:{n}")


def files(directory: Root) -> int:
    if isinstance(directory, S3Path):
        return sum(1 for _ in directory.objects())
    return sum(1 for p in directory.rglob("*") if p.is_file()) if directory.exists() else 0


KILLED, FINISHED = "killed", "finished first"
# A command that neither ends nor reaches its kill in this time has hung.
HANG_SECONDS = 600
RE_PLANS = 3


def attempt(root: Root, args: tuple[str, ...], kill: Kill, log: Path) -> tuple[str, float]:
    """Run the command until it ends or the kill fires: (KILLED or FINISHED, seconds).

    KILLED only when the planned kill itself fired: the moment came, the
    watched checkpoint file appeared, or the crash point killed the process.
    A command that reaches none of them nor ends fails the test as hung.
    """
    env = {
        **SMALL_BATCHES,
        **environment(root),
        **COMPILED,  # as every run outside the tests
        **({"LAKEHOUSE_CRASH_AT": kill.crash_at} if kill.crash_at else {}),
    }
    with log.open("a") as out:
        out.write(f"--- {' '.join(args)}: {kill.what}\n")
    started = time.monotonic()
    process = start_cli(*args, "--data-root", str(root), env=env, output=log)
    fired = False
    try:
        hang_at = started + HANG_SECONDS
        watched = before = None
        if kill.watch:
            watched = root / kill.watch[0]
            before = files(watched)
        while process.poll() is None:
            now = time.monotonic()
            moment_came = kill.after_seconds is not None and now >= started + kill.after_seconds
            file_written = (
                watched is not None and kill.watch and files(watched) >= before + kill.watch[1]
            )
            if moment_came or file_written:
                fired = True
                break
            if now >= hang_at:
                pytest.fail(f"{' '.join(args)} hung ({kill.what}):\n{log.read_text()[-4000:]}")
            time.sleep(0.005 if watched is not None else 0.05)
    finally:
        kill_group(process)
    seconds = time.monotonic() - started
    # Killed by its own crash point, or by us when the kill fired; else it must have passed.
    if kill.crash_at and process.returncode == -signal.SIGKILL:
        fired = True
    assert fired or process.returncode == 0, log.read_text()[-4000:]
    return (KILLED if fired else FINISHED), seconds


# Three kills, three reruns and a vacuum of every table: longer than the default limit.
@pytest.mark.timeout(2400)
@pytest.mark.usefixtures("spark")  # the uninterrupted commands on a local root run in-process
def test_killed_again_and_again_then_rerun_equals_uninterrupted(
    tmp_path, landing, reference, kill_plan, storage, request, figures
):
    sequence, seed = kill_plan
    rng = random.Random(f"{seed}-{sequence}")
    server = request.getfixturevalue("s3_server") if storage == "s3" else None
    root = fresh_root(tmp_path, landing, server)
    log = tmp_path / "commands.log"
    outcomes = []

    def kill(args: tuple[str, ...], planned: Kill) -> None:
        """Every planned kill lands: one that the command outran is re-planned, from the same
        data root (restored), as a kill at a random moment of the time the command took."""
        snapshot = root.parent / f"{root.name}-before-kill"
        copy_root(root, snapshot)
        for _ in range(RE_PLANS + 1):
            outcome, seconds = attempt(root, args, planned, log)
            outcomes.append(f"{planned.what}: {outcome}")
            if outcome == KILLED:
                return
            copy_root(snapshot, root)
            moment = round(rng.uniform(0.2, 0.8) * seconds, 1)
            planned = Kill(f"re-planned: killed after {moment} s", after_seconds=moment)
        pytest.fail(f"no kill of {' '.join(args)} landed in {RE_PLANS + 1} tries: {outcomes}")

    kill(("run",), run_kill(rng, reference))
    kill(("run",), run_kill(rng, reference))  # the rerun, killed too
    finish_and_compare(root, ("run",), reference.after_run)
    kill(reference.backfill_args, backfill_kill(rng, reference))
    finish_and_compare(root, reference.backfill_args, reference.after_backfill)
    # No orphan file or state trips a later run, and nothing is read twice.
    finish_and_compare(root, ("run",), reference.after_backfill)
    # Vacuum removes what the killed writers left; the rows stay; its figures are true.
    stored = data_files(root)
    maintained = finish_and_compare(
        root, ("maintain", "--retain-hours", "0"), reference.after_backfill
    )
    assert unreferenced_data_files(root) == []
    figures_agree_with_tables(root, maintained, vacuumed=len(stored - data_files(root)))
    kills = sum(o.endswith(KILLED) for o in outcomes)
    figures.append(f"crash suite {storage} root {sequence} (seed {seed}): {kills} kills survived")
    figures.extend(f"  {o}" for o in outcomes)


def finish_and_compare(root: Root, args: tuple[str, ...], expected: dict[str, Counter]) -> str:
    """`args` uninterrupted, then every table equals `expected`; the command's output.

    On a local root the command runs in this process, on the tests' warm Spark
    session (it reads what the killed processes left on disk, as a new process
    would); an S3 root needs a session configured for it, a process of its own.
    """
    if isinstance(root, S3Path):
        env = {**SMALL_BATCHES, **environment(root), **COMPILED}
        done = run_cli(*args, "--data-root", str(root), env=env)
    else:
        done = run_in_process(*args, "--data-root", str(root), env=SMALL_BATCHES)
    assert done.returncode == 0, done.stderr[-4000:]
    assert tables(root) == expected, f"after {' '.join(args)}"
    return done.stdout


def data_files(root: Root) -> set[str]:
    """Every Parquet data file under the root's tables, referenced or not (their logs'
    checkpoints left out)."""
    if isinstance(root, S3Path):
        paths = [str(p) for p, _ in (root / "lakehouse").objects() if p.name.endswith(".parquet")]
    else:
        paths = [str(p) for p in (root / "lakehouse").rglob("*.parquet")]
    return {path for path in paths if "/_delta_log/" not in path}


def live_files(root: Root) -> dict[str, set[str]]:
    """Per table folder, the data files its Delta log references (read by delta-rs)."""
    if isinstance(root, S3Path):
        tables = {p.rsplit("/_delta_log/", 1)[0] for p, _ in _logs(root)}
    else:
        tables = {str(log.parent) for log in (root / "lakehouse").rglob("_delta_log")}
    return {
        table: {
            unquote(uri.removeprefix("file://").replace("s3://", "s3a://", 1))
            for uri in open_table(location(table, root)).file_uris()
        }
        for table in tables
    }


def unreferenced_data_files(root: Root) -> list[str]:
    """Parquet files under a table that its Delta log does not reference."""
    live = live_files(root)
    referenced = set().union(*live.values())
    return sorted(
        path
        for path in data_files(root) - referenced
        if any(path.startswith(table + "/") for table in live)
    )


MAINTAINED = re.compile(r"^(\S+)\s+files\s+(\d+) -> (\d+)\s+vacuumed\s+(\d+)", re.M)


def figures_agree_with_tables(root: Root, output: str, vacuumed: int) -> None:
    """`lakehouse maintain`'s line per table: its files after compaction are those its log
    references now, and the files it says it vacuumed are those gone from the folders."""
    lines = {m[1]: (int(m[3]), int(m[4])) for m in MAINTAINED.finditer(output)}
    live = {location(table, root): files for table, files in live_files(root).items()}
    assert len(lines) == len(live), output
    for name, (files_after, _) in lines.items():
        assert files_after == len(live[root / "lakehouse" / name]), (name, output)
    assert sum(gone for _, gone in lines.values()) == vacuumed, output


def _logs(root: S3Path) -> list[tuple[str, object]]:
    return [(str(p), s) for p, s in (root / "lakehouse").objects() if "/_delta_log/" in p.key]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kill_plan" in metafunc.fixturenames:
        kills = metafunc.config.getoption("--kills")
        seed = metafunc.config.getoption("--kill-seed")
        roots = max(1, -(-kills // KILLS_PER_ROOT))
        metafunc.parametrize(
            "kill_plan", [(n, seed) for n in range(roots)], ids=[f"root{n}" for n in range(roots)]
        )
    if "storage" in metafunc.fixturenames:
        # The S3 root's plan repeats the local one's kills through S3A: `make test-full`.
        metafunc.parametrize("storage", ["local", pytest.param("s3", marks=pytest.mark.full)])
