"""Typed run settings, built once per process from CLI flags and the environment.

Precedence for every setting: explicit flag, then environment variable, then
default. The variables, their defaults and checks are declared once, in
`lakehouse.environment`.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from pydantic import field_validator
from pydantic_settings import SettingsConfigDict

from lakehouse.environment import Environment, environment, spark_master_url, validated
from lakehouse.runtime.jars import CHECKOUT_JARS
from lakehouse.storage.objects import Root, S3Connection, S3Path, is_object_store_uri

# Layer, table and checkpoint names: one plain path segment each, so no name can
# reach outside the data root (no "..", no "/", no absolute path).
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _names(*parts: str) -> tuple[str, ...]:
    for part in parts:
        if not isinstance(part, str) or not NAME.fullmatch(part):
            raise ValueError(
                f"not a valid layer, table or checkpoint name: {part!r} "
                "(letters, digits and _ only)"
            )
    return parts


def _data_root(root: str | Path, connection: S3Connection) -> Root:
    if isinstance(root, str) and root.startswith("file:"):
        # A file URI names a local folder (`file:///data`, `file:/data`), never a host's.
        parsed = urlparse(root)
        if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
            raise ValueError(
                f"unsupported data root {root!r}: a file: URI must name a local absolute "
                "path (file:///data)"
            )
        return Path(unquote(parsed.path)).resolve()
    if isinstance(root, str) and is_object_store_uri(root):
        if not root.startswith(("s3a://", "s3://")):
            raise ValueError(
                f"unsupported data root {root!r}: a local folder or s3a://bucket/prefix"
            )
        return S3Path.from_uri(root, connection)
    return Path(root).expanduser().resolve()


def jars_folder() -> Path:
    """The JVM libraries' folder: LAKEHOUSE_JARS_DIR, else the checkout's jars/."""
    return _local_folder(environment().jars_dir) or CHECKOUT_JARS


def _local_folder(chosen: str | Path | None) -> Path | None:
    """A folder given by a variable, absolute; None when it is not given."""
    return Path(chosen).expanduser().resolve() if chosen else None


def s3_connection() -> S3Connection:
    """The S3 API's endpoint and credentials, from the standard AWS variables."""
    return S3Connection(
        endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
        region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        access_key_id=os.environ.get("AWS_ACCESS_KEY_ID") or None,
        secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY") or None,
    )


def _declared(name: str) -> Any:
    """The default `lakehouse.environment` declares for a variable (declared there only)."""
    return Environment.model_fields[name].default


class Settings(Environment):
    """A run's settings: every `LAKEHOUSE_*` variable, as `lakehouse.environment` declares
    it (its default, its check, what it does), the command line's flags over them
    (`load`), and in the types a run uses: the data root a local folder or an S3 path,
    the shuffle partitions a number (the machine's cores unless set), the reports' and
    jars' folders paths."""

    model_config = SettingsConfigDict(arbitrary_types_allowed=True, validate_default=True)

    # The variables' text, validated into the types a run uses (narrower than the
    # variables' own: what mypy's override check flags).
    data_root: Root = _declared("data_root")  # type: ignore[assignment]
    shuffle_partitions: int = _declared("shuffle_partitions")
    reports_dir: Path | None = _declared("reports_dir")  # type: ignore[assignment]
    jars_dir: Path = _declared("jars_dir")  # type: ignore[assignment]

    @field_validator("data_root", mode="before")
    @classmethod
    def _root(cls, root: str | Root) -> Root:
        return root if isinstance(root, S3Path) else _data_root(root, s3_connection())

    @field_validator("shuffle_partitions", mode="before")
    @classmethod
    def _cores(cls, partitions: int | None) -> int:
        return partitions or os.cpu_count() or 2

    @field_validator("reports_dir", mode="before")
    @classmethod
    def _reports(cls, folder: str | Path | None) -> Path | None:
        return _local_folder(folder)

    @field_validator("jars_dir", mode="before")
    @classmethod
    def _jars(cls, folder: str | Path | None) -> Path:
        return _local_folder(folder) or CHECKOUT_JARS

    @classmethod
    def load(
        cls,
        data_root: str | Path | None = None,
        spark_master: str | None = None,
        default_data_root: str | Path | None = None,
        kafka_bootstrap_servers: str | None = None,
        debug: bool = False,
    ) -> Settings:
        """Flags first, then the environment, then the declared defaults;
        `default_data_root` replaces the declared default data root."""
        if spark_master:
            try:
                spark_master_url(spark_master)
            except ValueError as error:
                raise ValueError(f"--spark-master: {error}, got {spark_master!r}") from None
        if not data_root and "data_root" not in environment().model_fields_set:
            data_root = default_data_root
        flags = {
            # A flag's root is checked here, so that its error names no variable.
            "data_root": data_root and _data_root(data_root, s3_connection()),
            "spark_master": spark_master,
            "kafka_bootstrap_servers": kafka_bootstrap_servers,
            "debug": debug,
        }
        return validated(cls, **{name: value for name, value in flags.items() if value})

    @property
    def future_tolerance(self) -> dt.timedelta:
        """An event time more than this after its line's ingestion is quarantined."""
        return dt.timedelta(hours=self.future_tolerance_hours)

    def kafka_topic(self, source: str) -> str:
        """The topic of a source's messages (docs/contract.md, section 9)."""
        return f"{self.kafka_topic_prefix}{source}"

    @property
    def object_store(self) -> S3Connection | None:
        """The S3 connection when the data root is on object storage, else None."""
        return self.data_root.connection if isinstance(self.data_root, S3Path) else None

    # Layout of the data root (docs/contract.md, section 1).
    @property
    def landing(self) -> Root:
        return self.data_root / "landing"

    @property
    def lakehouse(self) -> Root:
        return self.data_root / "lakehouse"

    @property
    def checkpoints(self) -> Root:
        return self.data_root / "checkpoints"

    @property
    def reports(self) -> Path:
        """Always on local disk (docs/object-storage.md: where reports go)."""
        if self.reports_dir is not None:
            return self.reports_dir
        if isinstance(self.data_root, S3Path):
            return Path("reports").resolve()
        return self.data_root / "reports"

    def table(self, layer: str, name: str) -> Root:
        """Path of a contract table, e.g. table("bronze", "clicks")."""
        return self.lakehouse.joinpath(*_names(layer, name))

    def meta(self, name: str) -> Root:
        """Path of one of the pipeline's own Delta tables (event log, ledger, results)."""
        return self.lakehouse / "_meta" / _names(name)[0]

    def checkpoint(self, *parts: str) -> Root:
        """Path of a stream's checkpoint, e.g. checkpoint("silver", "sessions")."""
        return self.checkpoints.joinpath(*_names(*parts))
