"""Shared fixtures: one Spark session for the whole run, per-test data roots."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from lakehouse.runtime.settings import Settings
from tests.helpers import settings_for

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


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Gathers the figures of each test's report: from a worker's too, under xdist."""
    if report.when == "teardown":
        FIGURE_LINES.extend(value for name, value in report.user_properties if name == "figure")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long variants run with --full only; each shows as skipped, with why, otherwise."""
    if config.getoption("--full"):
        return
    skip = pytest.mark.skip(reason="long variant: run with `make test-full` (pytest --full)")
    for item in items:
        if item.get_closest_marker("full"):
            item.add_marker(skip)


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
