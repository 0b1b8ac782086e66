"""Shared fixtures: one Spark session for the whole run, per-test data roots."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from include.settings import Settings
from tests.helpers import settings_for

# pyspark converts collected timestamps with the process's local zone.
os.environ["TZ"] = "UTC"
time.tzset()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    from include.spark import get_spark

    settings = settings_for(tmp_path_factory.mktemp("spark-session"))
    session = get_spark(settings, app_name="lakehouse-tests", for_tests=True)
    yield session
    session.stop()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return settings_for(tmp_path / "data")
