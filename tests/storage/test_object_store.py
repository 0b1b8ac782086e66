"""The lakehouse on an object-store data root: `s3a://` on a real S3 API server.

In every CI run: the writer lock on S3 (a conditional write, a dead writer's
lock taken over, the lease renewed, Delta commits going on while it is renewed
under them). In the full tier: a writer paused past its lease commits nothing
once another writer holds the lock (the fenced log store).

The server is S3Proxy (jars/s3proxy/), started and stopped with the README's
`make s3-up` / `make s3-down` on a free port, its credentials generated. Every
command runs as a user runs it, `LAKEHOUSE_DATA_ROOT=s3a://lakehouse/<prefix>`
and the AWS variables in its environment; nothing of the data root touches
local disk (the run reports go to LAKEHOUSE_REPORTS_DIR).

In the full tier: the root the other tests read is built
by a crash: `lakehouse generate` into the bucket, a `lakehouse run` that
SIGKILLs itself inside a seeded Delta write of silver or gold, then the
rerun. What follows checks it as the crash
suite does without a second uninterrupted run: every landing line in bronze or
quarantine exactly once, gold equal to DuckDB's computation from the same
landing objects (the held-out reference), the tables open with `deltalake`
from `s3://`, and the landing rules hold for objects (a sub-prefix, another
file type, an object that is not gzip, an object rewritten after it was
ingested). Also behind `--full`: streaming equal to batch (`lakehouse parity`),
the other commands on S3, and the crash suite at full size on S3
(test_crash_recovery.py).
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from dev.processes import free_port
from dev.s3_server import S3Server
from lakehouse.catalog import SOURCES
from lakehouse.orchestration import REPO
from lakehouse.runtime import locks
from lakehouse.runtime.locks import WriterBusyError, writer_lock
from lakehouse.storage.landing import LANDING_SUFFIXES
from lakehouse.storage.objects import S3Path
from tests.helpers import (
    TABLE_NAMES,
    assert_gold_agrees_with_duckdb,
    delta_rows,
    delta_table,
    kill_group,
    landing_lines,
    run_cli,
    settings_for,
    start_cli,
)

pytestmark = pytest.mark.system

EVENTS, SEED = 3000, 9
DAYS_ARGS = ("--start", "2026-11-01", "--days", "2")
PARITY_ARGS = ("--start", "2026-11-01", "--end", "2026-11-02")


@dataclass(frozen=True)
class ObjectStore:
    server: S3Server
    env: dict[str, str]  # what `make s3-up` wrote to lakehouse.env, and a reports folder

    def root(self, prefix: str) -> S3Path:
        return self.server.root(f"s3a://lakehouse/{prefix}")

    def env_for(self, root: S3Path, **more: str) -> dict[str, str]:
        return {**self.env, "LAKEHOUSE_DATA_ROOT": str(root), **more}


def make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def s3(tmp_path_factory) -> ObjectStore:
    state = tmp_path_factory.mktemp("s3")
    port = free_port()
    up = make("s3-up", f"S3_PORT={port}", f"S3_STATE={state}")
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"S3Proxy on http://127.0.0.1:{port}" in up.stdout
    env = dict(line.split("=", 1) for line in (state / "lakehouse.env").read_text().splitlines())
    assert env["LAKEHOUSE_DATA_ROOT"] == "s3a://lakehouse/data"
    assert (state / "credentials.json").stat().st_mode & 0o077 == 0
    env["LAKEHOUSE_REPORTS_DIR"] = str(tmp_path_factory.mktemp("reports"))
    try:
        yield ObjectStore(S3Server(state, port), env)
    finally:
        down = make("s3-down", f"S3_STATE={state}")
        assert down.returncode == 0, down.stdout + down.stderr


@dataclass(frozen=True)
class Streamed:
    root: S3Path
    kill: str
    rerun_output: str
    lines: dict[str, int]  # lines of the landing files as generated, per source
    rewritten: S3Path  # a clicks object rewritten after the first run ingested it


# Objects the landing rules never read on S3: a folder (a key prefix), another
# file type; and a clicks object that is not gzip at all. Each a valid event.
REWRITTEN = "REWRITTEN-LATER"
NOT_READ = {
    "landing/impressions/export.csv": "not a supported name",
    "landing/user_actions/2026-11-01/more.jsonl": "a folder (landing folders are flat)",
}
BROKEN = "landing/clicks/clicks-broken.jsonl.gz"


def event(marker: str) -> str:
    fields = ("click_id", "impression_id", "user_id", "ad_id")
    return json.dumps({**dict.fromkeys(fields, marker), "event_time": "2026-11-01T10:00:00Z"})


@pytest.fixture(scope="module")
def streamed(s3: ObjectStore) -> Streamed:
    root = s3.root("streamed")
    env = s3.env_for(root)
    generated = run_cli(
        "generate", "--events", str(EVENTS), "--seed", str(SEED), *DAYS_ARGS, env=env
    )
    assert generated.returncode == 0, generated.stderr
    assert "landing: s3a://lakehouse/streamed/landing" in generated.stdout
    lines = {source: len(landing_lines(root / "landing", source)) for source in SOURCES}
    for key in NOT_READ:
        (root / key).write_text(event(key) + "\n")
    (root / BROKEN).write_bytes(b"not gzip at all\n")
    (root / "landing/clicks/.in-flight.jsonl").write_text(event("IN-FLIGHT") + "\n")
    # A run of this input makes 28 Delta writes: bronze's, its ledger's and its checks'
    # first (1-9), silver's 10-19, gold's 21-26: the kill lands in silver or gold,
    # while Spark writes the files or Delta commits them.
    rng = random.Random(SEED)
    kill = f"write.before_commit:{rng.randint(10, 26)}+{rng.randint(0, 1500)}"
    killed = run_cli("run", env={**env, "LAKEHOUSE_CRASH_AT": kill})
    assert killed.returncode == -signal.SIGKILL, (kill, killed.stdout[-3000:], killed.stderr)
    # Bronze finished before the kill: one line more in an ingested object is not read.
    rewritten = sorted((root / "landing" / "clicks").glob("clicks-*.jsonl"))[0]
    rewritten.write_bytes(rewritten.read_bytes() + event(REWRITTEN).encode() + b"\n")
    done = run_cli("run", env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return Streamed(root, kill, done.stdout, lines, rewritten)


def test_a_run_on_s3_puts_every_table_there_and_deltalake_reads_them_from_s3(streamed, s3):
    settings = settings_for(streamed.root)
    assert "tables:      s3a://lakehouse/streamed/lakehouse/" in streamed.rerun_output
    assert "checkpoints: s3a://lakehouse/streamed/checkpoints" in streamed.rerun_output
    assert f"report:      {s3.env['LAKEHOUSE_REPORTS_DIR']}" in streamed.rerun_output
    for layer, name in TABLE_NAMES:
        path = settings.table(layer, name)
        assert isinstance(path, S3Path) and delta_table(path).num_rows > 0, f"{layer}/{name}"
    # Checkpoints, manifests, the pipeline's own tables: all objects in the bucket.
    for where in ("checkpoints/silver/user_sessions/commits", "lakehouse/_meta/bronze_ledger"):
        assert (streamed.root / where).is_dir(), where
    assert not (streamed.root / locks.LOCK_FILE).exists()  # released after the run


def test_after_the_crash_every_landing_line_is_in_bronze_or_quarantine_exactly_once(streamed):
    settings = settings_for(streamed.root)
    for source, spec in SOURCES.items():
        bronze = delta_rows(settings.table("bronze", source), [*spec.fields, "_source_file"])
        quarantine = delta_rows(settings.table("quarantine", source), ["raw", "_source_file"])
        unreadable = 1 if source == "clicks" else 0  # the broken object: one row, no line
        total = sum(bronze.values()) + sum(quarantine.values())
        assert total == streamed.lines[source] + unreadable, source
        assert all(n == 1 for n in quarantine.values()), source
        assert all(str(row[-1]).startswith("s3a://lakehouse/streamed/landing/") for row in bronze)


def test_the_landing_rules_hold_on_s3(streamed):
    """Prefixes and other names are named and never read, an object that is not what its
    name says is one quarantine row, a rewritten object is not read again."""
    output = streamed.rerun_output
    for key, why in NOT_READ.items():
        shown = key if "/2026-11-01/" not in key else key.rsplit("/", 1)[0]
        assert f"  {shown}: not read: {why}" in output, output
    changed = f"  {streamed.rewritten.relative_to(streamed.root)}: not read again: changed after"
    assert changed in output, output
    settings = settings_for(streamed.root)
    reasons = delta_table(settings.table("quarantine", "clicks")).to_pylist()
    broken = [r for r in reasons if r["_source_file"].endswith(BROKEN.rsplit("/", 1)[1])]
    assert len(broken) == 1 and broken[0]["reason"].startswith("unreadable file: corrupt"), broken
    for layer, name in (("bronze", s) for s in SOURCES):
        rows = delta_table(settings.table(layer, name)).to_pylist()
        markers = (*NOT_READ, REWRITTEN, "IN-FLIGHT")
        assert not [r for r in rows if any(m in json.dumps(r, default=str) for m in markers)]


def test_gold_on_s3_agrees_with_duckdb_over_the_same_landing_objects(streamed, tmp_path):
    pytest.importorskip("duckdb")
    copy = tmp_path / "copy"
    landing = streamed.root / "landing"
    for path, _ in landing.objects():
        relative = path.relative_to(landing)
        flat = relative.count("/") == 1  # <source>/<name>: not in a folder
        if not flat or path.name.startswith((".", "_")) or path.name == BROKEN.rsplit("/")[-1]:
            continue
        if not path.name.endswith(LANDING_SUFFIXES):
            continue
        content = path.read_bytes()
        if path == streamed.rewritten:  # as it was when bronze read it
            lines = content.splitlines(keepends=True)
            content = b"".join(line for line in lines if REWRITTEN.encode() not in line)
        target = copy / "landing" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    assert_gold_agrees_with_duckdb(settings_for(streamed.root), copy, tmp_path / "duckdb")


@pytest.mark.full  # parity runs in CI on local disk (tests/drivers/test_parity.py)
def test_parity_on_s3_finds_streaming_and_batch_identical(streamed, s3):
    done = run_cli("parity", *PARITY_ARGS, env=s3.env_for(streamed.root))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "streaming and batch agree" in done.stdout, done.stdout[-3000:]


def test_the_writer_lock_on_s3_is_one_object_created_by_a_conditional_write(s3):
    root = s3.root("locks")
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with writer_lock(root, "run", timeout_seconds=5):
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(30)
        with (
            pytest.raises(WriterBusyError, match=r"another writer is working on s3a://.* \(run,"),
            writer_lock(root, "backfill", timeout_seconds=1),
        ):
            pass
    finally:
        release.set()
        holder.join()
    assert not (root / locks.LOCK_FILE).exists()
    with writer_lock(root, "backfill", timeout_seconds=1):  # free again
        pass


def test_a_lock_left_by_a_dead_writer_is_taken_over(s3):
    root = s3.root("stale-locks")
    lock = root / locks.LOCK_FILE
    # A process of this host that is gone: taken over at once, lease or not.
    process = subprocess.Popen(["true"])
    process.wait()
    lock.write_text(
        json.dumps(
            {"pid": process.pid, "host": socket.gethostname(), "command": "run", "since": "x"}
            | {"lease_until": time.time() + 3600}
        )
    )
    messages: list[str] = []
    with writer_lock(root, "backfill", timeout_seconds=5, echo=messages.append):
        pass
    assert messages and messages[0].startswith("took over the writer lock"), messages
    # Another host's writer whose lease ran out.
    lock.write_text(
        '{"pid": 1, "host": "elsewhere", "command": "run", "since": "x", "lease_until": 0}'
    )
    with writer_lock(root, "backfill", timeout_seconds=5, echo=messages.append):
        pass
    # A live lease elsewhere is respected until the timeout.
    lock.write_text(
        '{"pid": 1, "host": "elsewhere", "command": "run", "since": "x", '
        f'"lease_until": {time.time() + 3600}}}'
    )
    with (
        pytest.raises(WriterBusyError, match="pid 1 on elsewhere"),
        writer_lock(root, "backfill", timeout_seconds=1),
    ):
        pass
    lock.unlink()


def test_the_lease_is_renewed_while_the_writer_works(s3, monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_LOCK_LEASE_SECONDS", "0.6")
    root = s3.root("leases")
    lock = root / locks.LOCK_FILE
    with writer_lock(root, "run", timeout_seconds=1):
        first = json.loads(lock.read_text())["lease_until"]
        time.sleep(1.0)  # longer than the lease: renewed at least twice meanwhile
        assert json.loads(lock.read_text())["lease_until"] > first + 0.4
        with pytest.raises(WriterBusyError), writer_lock(root, "backfill", timeout_seconds=0.5):
            pass


def test_commits_go_on_while_the_lease_is_renewed_under_them(s3):
    """The fenced log store reads the lock object before each commit; a renewal landing
    between S3A's HEAD and GET is answered 412, which says nothing about who holds the
    lock: it reads the lock again instead of failing the commit."""
    done = run_cli(
        "20", env=s3.env_for(s3.root("renewals")), module="tests.storage.commits_under_renewal"
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["commits"] == 20 and outcome["renewals"] > 100, outcome


def delta_commits(root: S3Path) -> set[str]:
    """Every Delta commit file of every table under the root."""
    return {
        str(path)
        for path, _ in (root / "lakehouse").objects()
        if "/_delta_log/" in str(path) and str(path).endswith(".json")
    }


def process_state(pid: int) -> str:
    """R, S, T (stopped), ... from /proc/<pid>/stat."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.mark.full  # three runs on S3, each with its own JVM
def test_a_writer_paused_past_its_lease_commits_nothing_after_it(s3):
    """A `lakehouse run --layer silver` stops itself (SIGSTOP) just before its first Delta
    commit; its whole process group (the JVM too) stays stopped past the lease while
    another writer takes the lock over. Resumed, it must not commit: without the fence it
    would MERGE its micro-batch into silver while the other writer holds the lock."""
    root = s3.root("paused")
    env = s3.env_for(root, LAKEHOUSE_LOCK_LEASE_SECONDS="3")
    generated = run_cli("generate", "--events", "300", "--seed", "5", *DAYS_ARGS, env=env)
    assert generated.returncode == 0, generated.stderr
    bronze = run_cli("run", "--layer", "bronze", env=env)
    assert bronze.returncode == 0, bronze.stdout[-3000:] + bronze.stderr[-3000:]

    paused = start_cli(
        "run", "--layer", "silver", env={**env, "LAKEHOUSE_PAUSE_AT": "write.before_commit"}
    )
    try:
        deadline = time.monotonic() + 300
        while process_state(paused.pid) != "T":
            assert paused.poll() is None, paused.communicate()
            assert time.monotonic() < deadline, "the run never reached its first commit"
            time.sleep(0.2)
        os.killpg(paused.pid, signal.SIGSTOP)  # the Spark JVM too: a suspended machine
        before = delta_commits(root)
        with writer_lock(root, "another writer", timeout_seconds=60, echo=print):
            os.killpg(paused.pid, signal.SIGCONT)
            out, err = paused.communicate(timeout=300)
            assert delta_commits(root) == before  # nothing while the other writer held it
    finally:
        kill_group(paused)
    assert paused.returncode == 1, out[-3000:] + err[-3000:]
    assert "this writer lost the data root's writer lock" in err, err[-3000:]
    assert "another writer holds it now" in err

    # The tables stay consistent: the next run takes up the micro-batch and passes.
    again = run_cli("run", "--layer", "silver", env=env)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "run passed" in again.stdout


def all_rows(settings) -> dict[str, Counter]:
    return {f"{layer}/{n}": delta_rows(settings.table(layer, n)) for layer, n in TABLE_NAMES}


@pytest.mark.full
def test_validate_maintain_recover_and_its_backfill_work_on_s3(streamed, s3):
    env = s3.env_for(streamed.root)
    settings = settings_for(streamed.root)
    before = all_rows(settings)
    for args in (
        ("validate",),
        ("maintain", "--retain-hours", "0"),
        ("recover", "--layer", "gold"),
        ("run", "--layer", "gold"),
    ):
        done = run_cli(*args, env=env)
        assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])
    assert all_rows(settings) == before
    assert Path(s3.env["LAKEHOUSE_REPORTS_DIR"]).joinpath("runs").is_dir()
