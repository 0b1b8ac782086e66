"""The JVM libraries are fetched when first needed, once, and again when their pom changes."""

from __future__ import annotations

import os

import pytest

from lakehouse.errors import LakehouseError
from lakehouse.runtime import jars


def marked(folder, age: float) -> None:
    """A bundle folder with a pom, fetched `age` seconds after the pom was written."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pom.xml").write_text("<project/>")
    (folder / ".fetched").touch()
    pom = (folder / "pom.xml").stat().st_mtime
    os.utime(folder / ".fetched", (pom + age, pom + age))


def test_a_bundle_is_fetched_once_and_again_after_its_pom_changed(tmp_path):
    assert not jars.fetched("kafka-broker", tmp_path)
    marked(tmp_path / "kafka-broker", age=10)
    assert jars.fetched("kafka-broker", tmp_path)
    marked(tmp_path / "kafka-broker", age=-10)  # the pom is newer than the fetch
    assert not jars.fetched("kafka-broker", tmp_path)


def test_the_s3_bundle_is_stale_when_the_log_store_source_changed(tmp_path):
    marked(tmp_path / "s3", age=10)
    (tmp_path / "log-store").mkdir()
    java = tmp_path / "log-store" / "FencedS3LogStore.java"
    java.write_text("class X {}")
    fetched_at = (tmp_path / "s3" / ".fetched").stat().st_mtime
    os.utime(java, (fetched_at - 1, fetched_at - 1))
    assert jars.fetched("s3", tmp_path)
    os.utime(java, (fetched_at + 1, fetched_at + 1))
    assert not jars.fetched("s3", tmp_path)


def test_a_fetched_bundle_starts_no_maven(tmp_path, monkeypatch):
    marked(tmp_path / "s3proxy", age=10)
    monkeypatch.setenv("PATH", "")  # no mvn: ensure must not need it
    assert jars.ensure("s3proxy", tmp_path) == tmp_path / "s3proxy"


def test_a_jars_folder_without_poms_is_refused_in_one_line(tmp_path):
    with pytest.raises(LakehouseError, match="set LAKEHOUSE_JARS_DIR to the jars folder"):
        jars.ensure("kafka-broker", tmp_path)
