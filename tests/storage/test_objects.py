"""Paths on an S3 root name the same things a local root's paths do, and a store that fails
is not a damaged file (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse.runtime.settings import Settings
from lakehouse.storage.landing import landing_uri
from lakehouse.storage.objects import (
    ObjectStoreError,
    ObjectStream,
    S3Connection,
    S3Path,
    location,
    path_of_uri,
    relative,
)

CONNECTION = S3Connection(
    endpoint_url="http://127.0.0.1:9000",
    access_key_id="k",
    secret_access_key="s",  # noqa: S106 (no server behind it)
)


def test_an_s3_path_joins_and_names_like_pathlib():
    root = S3Path.from_uri("s3a://bucket/some/prefix/", CONNECTION)
    table = root / "lakehouse" / "bronze/clicks"
    assert str(table) == "s3a://bucket/some/prefix/lakehouse/bronze/clicks"
    assert table.uri == "s3://bucket/some/prefix/lakehouse/bronze/clicks"
    assert table.name == "clicks" and table.parent == root / "lakehouse" / "bronze"
    assert table.relative_to(root) == "lakehouse/bronze/clicks"
    assert relative(table, root) == "lakehouse/bronze/clicks"
    assert table.with_name("impressions") == root / "lakehouse/bronze/impressions"
    with pytest.raises(ValueError, match="is not under"):
        (root.parent / "other").relative_to(root)
    assert S3Path.from_uri("s3://bucket", CONNECTION).key == ""


def test_settings_take_an_s3_uri_as_data_root_and_keep_reports_local(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("LAKEHOUSE_REPORTS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    settings = Settings.load(data_root="s3a://bucket/data")
    assert str(settings.table("silver", "clicks")) == "s3a://bucket/data/lakehouse/silver/clicks"
    assert (
        str(settings.checkpoint("bronze", "clicks"))
        == "s3a://bucket/data/checkpoints/bronze/clicks"
    )
    assert settings.object_store == S3Connection(endpoint_url="http://127.0.0.1:9000")
    assert settings.reports == tmp_path / "reports"
    conf = settings.object_store.spark_conf()
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert Settings.load(data_root=str(tmp_path)).object_store is None
    with pytest.raises(ValueError, match="unsupported data root"):
        Settings.load(data_root="gs://bucket/data")


def test_uris_spark_writes_map_back_to_the_paths_they_name():
    # Hadoop's Path.toUri quotes a key as it quotes a local path.
    manifest = '{"path": "s3a://bucket/data/landing/clicks/a b%.jsonl", "size": 1, "mtime_ns": 1}'
    uri = landing_uri(manifest)
    assert uri == "s3a://bucket/data/landing/clicks/a%20b%25.jsonl"
    assert path_of_uri(uri) == "s3a://bucket/data/landing/clicks/a b%.jsonl"
    assert location(path_of_uri(uri), S3Path("bucket", "data", CONNECTION)) == S3Path(
        "bucket", "data/landing/clicks/a b%.jsonl", CONNECTION
    )
    assert path_of_uri("file:/tmp/a%20b.jsonl") == "/tmp/a b.jsonl"
    assert location("/tmp/x", Path("/tmp")) == Path("/tmp/x")


class FailingStream:
    """What pyarrow's input stream does when the store drops the connection mid-read."""

    def read(self, size: int = -1) -> bytes:
        raise OSError("AWS Error NETWORK_CONNECTION during GetObject operation")

    def close(self) -> None:
        pass


def test_a_store_that_fails_a_read_is_not_taken_for_a_damaged_landing_file():
    """pyarrow raises OSError for a failing store as for a damaged file. Bronze quarantines a
    landing file whose read raises OSError (unreadable_file_reason), and a file quarantined
    because the store was unreachable would be lost from bronze for good: the read fails
    with ObjectStoreError instead, and the micro-batch with it."""
    path = S3Path("lakehouse", "landing/clicks/clicks.jsonl.gz", CONNECTION)
    with (
        ObjectStream(path, FailingStream()) as stream,
        pytest.raises(ObjectStoreError, match="reading s3a://lakehouse/landing/clicks") as failed,
    ):
        stream.read(1024)
    assert not isinstance(failed.value, OSError)
