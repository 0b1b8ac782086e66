"""The driver JVM's options: the class-data-sharing archive (lakehouse.runtime.class_archive) is
optional (named only when it exists, and a JVM that cannot use it starts as without it);
short-lived drivers compile with the JIT's quick tier."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pyspark
import pytest

import lakehouse.runtime.spark
from lakehouse.runtime.class_archive import RECORDING
from lakehouse.runtime.spark import driver_java_options
from tests.helpers import settings_for

pytestmark = pytest.mark.system

LAUNCHER = "org.apache.spark.launcher.Main"


def test_driver_options_name_the_archive_only_when_it_exists(tmp_path, monkeypatch):
    archive = tmp_path / "lakehouse-classes.jsa"
    monkeypatch.setattr(lakehouse.runtime.spark, "archive_path", lambda: archive)
    assert "SharedArchiveFile" not in driver_java_options()
    archive.write_bytes(b"recorded")
    assert f"-XX:SharedArchiveFile={archive}" in driver_java_options()


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JVM")
def test_a_jvm_starts_quietly_with_an_archive_it_cannot_use(tmp_path, monkeypatch):
    """An archive recorded with another class path (as after the jars change)."""
    archive = tmp_path / "lakehouse-classes.jsa"
    # Spark's launcher loads classes from its jar (and exits 1: no arguments).
    (launcher,) = (Path(pyspark.__file__).parent / "jars").glob("spark-launcher_*.jar")
    subprocess.run(
        ["java", f"-XX:ArchiveClassesAtExit={archive}", "-cp", str(launcher), LAUNCHER],
        capture_output=True,
    )
    assert archive.is_file()
    monkeypatch.setattr(lakehouse.runtime.spark, "archive_path", lambda: archive)
    done = subprocess.run(
        ["java", *shlex.split(driver_java_options()), "-cp", str(tmp_path), "-version"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # the JVM logs to stdout: nothing about the archive
    assert " version " in done.stderr
    assert "warning" not in done.stderr.lower() and "error" not in done.stderr.lower()


def test_short_lived_drivers_compile_with_the_quick_tier_and_the_tests_session_does_not(tmp_path):
    settings = settings_for(tmp_path)
    quick = "-XX:TieredStopAtLevel=1"
    assert quick in lakehouse.runtime.spark.submit_conf(settings)["spark.driver.extraJavaOptions"]
    assert quick in lakehouse.runtime.spark.session_conf(settings)["spark.driver.extraJavaOptions"]
    tests = lakehouse.runtime.spark.session_conf(settings, for_tests=True)
    assert quick not in tests["spark.driver.extraJavaOptions"]


def test_a_recording_command_writes_the_archive_instead_of_reading_it(tmp_path, monkeypatch):
    archive, partial = tmp_path / "lakehouse-classes.jsa", tmp_path / "recording.partial"
    archive.write_bytes(b"recorded")
    monkeypatch.setattr(lakehouse.runtime.spark, "archive_path", lambda: archive)
    monkeypatch.setenv(RECORDING, str(partial))
    options = driver_java_options()
    assert f"-XX:ArchiveClassesAtExit={partial}" in options
    assert "SharedArchiveFile" not in options  # a recording JVM must not load the old one
