"""Shared fixtures: one Spark session for the whole run, per-test data roots, the data
roots and servers several modules read; and the tiers (`spark`, `system`).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from lakehouse.runtime.settings import Settings
from tests.helpers import COMPILED, INTERPRETED, SUBMIT_OPTS, run_in_process, settings_for

# Every JVM the tests start evaluates plans interpreted (tests.helpers.INTERPRETED; a
# pytest-xdist worker inherits the setting from the process that started it).
os.environ[SUBMIT_OPTS] = f"{COMPILED[SUBMIT_OPTS]} {INTERPRETED}".strip()
# Tests that import Airflow get a throwaway home before anything imports it.
os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="lakehouse-airflow-home-")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"

# Figures a test measured (kills survived, files ingested, peak memory), printed
# at the end of the run so that CI logs show them.
FIGURE_LINES: list[str] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lakehouse")
    group.addoption(
        "--kills",
        type=int,
        default=3,
        help="SIGKILLs in the seeded crash suite, 3 per data root (default 3; "
        "the long run in the README uses 60)",
    )
    group.addoption(
        "--kill-seed", type=int, default=20261122, help="seed of the crash suite's kill plan"
    )
    group.addoption(
        "--ingest-files",
        type=int,
        default=2000,
        help="small landing files in the admission control test (default 2000; full: 10000)",
    )
    group.addoption(
        "--full",
        action="store_true",
        default=os.environ.get("LAKEHOUSE_FULL_TESTS") == "1",
        help="also run the long variants marked `full` (`make test-full`; "
        "LAKEHOUSE_FULL_TESTS=1 does the same)",
    )
    group.addoption(
        "--ingest-mib",
        type=int,
        default=32,
        help="size of the large landing file in MiB (default 32; full: 1024)",
    )


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """pytest-xdist's `--dist loadfile` (a module's tests on one worker, so its module
    fixtures start once), except that tests/dags/ is one unit: its modules share one live
    Airflow (tests/dags/conftest.py)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class DagsTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return "tests/dags/" if module.startswith("tests/dags/") else module

    return DagsTogether(config, log)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Gathers the figures of each test's report: from a worker's too, under xdist."""
    if report.when == "teardown":
        FIGURE_LINES.extend(value for name, value in report.user_properties if name == "figure")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that takes the shared Spark session is in the `spark` tier (unless it is a
    `system` test); long variants run with --full only, and show as skipped otherwise.

    Then the modules, most costly tier first (the live Airflow's folder, then modules
    with system tests, then with Spark tests, then the check tier), each in its own order:
    pytest-xdist hands them out in this order, so the two workers end close together
    instead of one waiting for a long module handed out last."""
    full = config.getoption("--full")
    skip = pytest.mark.skip(reason="long variant: run with `make test-full` (pytest --full)")
    cost: dict[Path, int] = {}
    for item in items:
        if "spark" in item.fixturenames and not item.get_closest_marker("system"):
            item.add_marker(pytest.mark.spark)
        if item.get_closest_marker("full") and not full:
            item.add_marker(skip)
            continue
        tier = 2 if item.get_closest_marker("spark") else 3
        if item.get_closest_marker("system"):
            tier = 0 if item.path.parent.name == "dags" else 1
        cost[item.path] = min(cost.get(item.path, 3), tier)
    first_seen = {path: index for index, path in reversed(list(enumerate(i.path for i in items)))}
    items.sort(key=lambda i: (cost.get(i.path, 3), first_seen[i.path]))


@pytest.fixture(autouse=True)
def _check_tier_starts_no_process(request: pytest.FixtureRequest, monkeypatch) -> None:
    """A test of the check tier (neither `spark` nor `system`) starts no process, a JVM
    included: one that does fails here, naming the tier it belongs to."""
    if request.node.get_closest_marker("spark") or request.node.get_closest_marker("system"):
        return

    def refuse(self, args, *rest, **options):
        raise RuntimeError(
            f"{request.node.nodeid} starts a process ({args!r}): a test that needs the "
            "Spark session takes the `spark` fixture; one that starts processes is "
            "marked `system`"
        )

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    if FIGURE_LINES:
        terminalreporter.section("figures")
        for line in FIGURE_LINES:
            terminalreporter.write_line(line)


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """Append a line to print it in the run's summary (it travels in the test's report)."""
    lines: list[str] = []
    yield lines
    request.node.user_properties.extend(("figure", line) for line in lines)


# Property-based tests: a short run by default, a long one on request.
hypothesis_settings.register_profile("default", max_examples=25)
hypothesis_settings.register_profile("long", max_examples=500)
hypothesis_settings.load_profile("default")

# pyspark converts collected timestamps with the process's local zone.
os.environ["TZ"] = "UTC"
time.tzset()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    from lakehouse.runtime.spark import get_spark

    settings = settings_for(tmp_path_factory.mktemp("spark-session"))
    session = get_spark(settings, app_name="lakehouse-tests", for_tests=True)
    yield session
    session.stop()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return settings_for(tmp_path / "data")


@pytest.fixture(scope="session")
def streamed_root(spark, tmp_path_factory, worker_id) -> Path:
    """Generated events (3,000, one day, no late ones) after one `lakehouse run`, in this
    process on the tests' Spark session (`run_in_process`: a cold process would take
    twice as long; `lakehouse run` as a process of its own runs to its end on an S3 root
    in tests/storage/test_object_store.py and as Airflow's tasks in tests/dags/).

    Read only: a test that writes to it copies it first (a backfill may), or
    copies its landing folder to a root of its own (a run must: the file
    streams' checkpoints hold the landing files' absolute paths).

    Built once for all of pytest-xdist's workers, the way xdist's documentation shares a
    session fixture: in the directory above each worker's own temporary one, under a
    lock, by the first worker that needs it; the others wait for it and read it.
    """
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent
    root, done = shared / "streamed", shared / "streamed" / "run.out"
    with (shared / "streamed.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return root
        if root.exists():
            pytest.fail(f"another worker's build of {root} failed: see its error")
        generated = run_in_process(
            "generate",
            "--events",
            "3000",
            "--seed",
            "9",
            "--late-rate",
            "0",
            "--data-root",
            str(root),
        )
        assert generated.returncode == 0, generated.stderr
        ran = run_in_process("run", "--data-root", str(root))
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
        done.write_text(ran.stdout)
    return root


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A local S3 API server (S3Proxy, as `make s3-up` starts it) on a free port, for
    tests that put a data root on object storage; stopped at the end of the session."""
    from dev.processes import free_port
    from dev.s3_server import S3Server

    server = S3Server(tmp_path_factory.mktemp("s3-server"), free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()
