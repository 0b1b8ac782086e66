"""Typed run settings, built once per process from CLI flags and the environment.

Precedence for every setting: explicit flag, then environment variable, then
default. Nothing reads the environment anywhere else.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_DATA_ROOT = "./data"
DEFAULT_SPARK_MASTER = "local[*]"
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


def _env_int(name: str, default: int, minimum: int = 1) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


def _env_bool(name: str, default: bool) -> bool:
    raw = (os.environ.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw not in ("true", "false"):
        raise ValueError(f"{name} must be true or false, got {raw!r}")
    return raw == "true"


# Kafka's legal topic names: letters, digits, '.', '_' and '-'.
TOPIC_PREFIX = re.compile(r"[A-Za-z0-9._-]*")


def _topic_prefix(prefix: str) -> str:
    if not TOPIC_PREFIX.fullmatch(prefix):
        raise ValueError(
            f"LAKEHOUSE_KAFKA_TOPIC_PREFIX may hold letters, digits, '.', '_' and '-' only, "
            f"got {prefix!r}"
        )
    return prefix


STATE_STORES = ("rocksdb", "hdfs")


def _state_store(name: str) -> str:
    if name not in STATE_STORES:
        raise ValueError(
            f"LAKEHOUSE_STATE_STORE must be one of {', '.join(STATE_STORES)}, got {name!r}"
        )
    return name


@dataclass(frozen=True)
class Settings:
    data_root: Path
    spark_master: str
    shuffle_partitions: int
    # Admission control: at most this many landing files per bronze micro-batch.
    max_files_per_trigger: int
    # Lines longer than this (in bytes) are quarantined instead of parsed.
    max_line_bytes: int
    # How long a writer (run, backfill, maintain, recover, migrate) waits for another one.
    lock_timeout_seconds: int
    # An event time more than this after its line's ingestion is quarantined
    # as "in the future" (a sender's wrong clock), before it can move a watermark.
    future_tolerance: dt.timedelta = dt.timedelta(hours=24)
    # State store of new stateful queries: "rocksdb" (default) or "hdfs" (Spark's
    # default, in the JVM heap). A checkpoint keeps the store it was created with.
    state_store: str = "rocksdb"
    # Shared secret of a Spark standalone cluster that requires authentication
    # (`spark.authenticate`): LAKEHOUSE_SPARK_AUTH_SECRET. None: no authentication.
    spark_auth_secret: str | None = field(default=None, repr=False)
    # Kafka (docs/kafka.md): with bootstrap servers set, bronze also reads one topic
    # per source, `<kafka_topic_prefix><source>`, at most this many messages per
    # micro-batch. A run whose unread messages Kafka already deleted (retention)
    # fails unless `kafka_fail_on_data_loss` is off (Spark's `failOnDataLoss`).
    kafka_bootstrap_servers: str | None = None
    kafka_topic_prefix: str = ""
    kafka_max_offsets_per_trigger: int = 1_000_000
    kafka_fail_on_data_loss: bool = True

    @classmethod
    def load(
        cls,
        data_root: str | Path | None = None,
        spark_master: str | None = None,
        default_data_root: str | Path = DEFAULT_DATA_ROOT,
        kafka_bootstrap_servers: str | None = None,
    ) -> Settings:
        root = data_root or os.environ.get("LAKEHOUSE_DATA_ROOT") or default_data_root
        return cls(
            data_root=Path(root).expanduser().resolve(),
            spark_master=(
                spark_master or os.environ.get("LAKEHOUSE_SPARK_MASTER") or DEFAULT_SPARK_MASTER
            ),
            shuffle_partitions=_env_int("LAKEHOUSE_SHUFFLE_PARTITIONS", os.cpu_count() or 2),
            max_files_per_trigger=_env_int("LAKEHOUSE_MAX_FILES_PER_TRIGGER", 100),
            max_line_bytes=_env_int("LAKEHOUSE_MAX_LINE_BYTES", 1024 * 1024),
            lock_timeout_seconds=_env_int("LAKEHOUSE_LOCK_TIMEOUT", 900, minimum=0),
            future_tolerance=dt.timedelta(hours=_env_int("LAKEHOUSE_FUTURE_TOLERANCE_HOURS", 24)),
            state_store=_state_store(os.environ.get("LAKEHOUSE_STATE_STORE") or "rocksdb"),
            spark_auth_secret=os.environ.get("LAKEHOUSE_SPARK_AUTH_SECRET") or None,
            kafka_bootstrap_servers=(
                kafka_bootstrap_servers
                or os.environ.get("LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS")
                or None
            ),
            kafka_topic_prefix=_topic_prefix(os.environ.get("LAKEHOUSE_KAFKA_TOPIC_PREFIX", "")),
            kafka_max_offsets_per_trigger=_env_int(
                "LAKEHOUSE_KAFKA_MAX_OFFSETS_PER_TRIGGER", 1_000_000
            ),
            kafka_fail_on_data_loss=_env_bool("LAKEHOUSE_KAFKA_FAIL_ON_DATA_LOSS", True),
        )

    def kafka_topic(self, source: str) -> str:
        """The topic of a source's messages (docs/contract.md, section 9)."""
        return f"{self.kafka_topic_prefix}{source}"

    # Layout of the data root (docs/contract.md, section 1).
    @property
    def landing(self) -> Path:
        return self.data_root / "landing"

    @property
    def lakehouse(self) -> Path:
        return self.data_root / "lakehouse"

    @property
    def checkpoints(self) -> Path:
        return self.data_root / "checkpoints"

    @property
    def reports(self) -> Path:
        return self.data_root / "reports"

    def table(self, layer: str, name: str) -> Path:
        """Path of a contract table, e.g. table("bronze", "clicks")."""
        return self.lakehouse.joinpath(*_names(layer, name))

    def meta(self, name: str) -> Path:
        """Path of one of the pipeline's own Delta tables (event log, ledger, results)."""
        return self.lakehouse / "_meta" / _names(name)[0]

    def checkpoint(self, *parts: str) -> Path:
        """Path of a stream's checkpoint, e.g. checkpoint("silver", "sessions")."""
        return self.checkpoints.joinpath(*_names(*parts))
