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

from lakehouse.storage.objects import Root, S3Connection, S3Path, is_object_store_uri

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


def _env_share(name: str, default: float) -> float:
    raw = (os.environ.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number between 0 and 1, got {raw!r}") from None
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must be between 0 and 1, got {value}")
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


def _driver_memory(size: str) -> str:
    """A JVM heap size as Spark takes it: a number and a unit, e.g. 2g or 1536m."""
    if not re.fullmatch(r"[1-9][0-9]*[kmgt]", size.strip().lower()):
        raise ValueError(
            f"LAKEHOUSE_DRIVER_MEMORY must be a size such as 2g or 1536m, got {size!r}"
        )
    return size.strip().lower()


def _state_store(name: str) -> str:
    if name not in STATE_STORES:
        raise ValueError(
            f"LAKEHOUSE_STATE_STORE must be one of {', '.join(STATE_STORES)}, got {name!r}"
        )
    return name


def _data_root(root: str | Path, connection: S3Connection) -> Root:
    if isinstance(root, str) and is_object_store_uri(root):
        if not root.startswith(("s3a://", "s3://")):
            raise ValueError(
                f"unsupported data root {root!r}: a local folder or s3a://bucket/prefix"
            )
        return S3Path.from_uri(root, connection)
    return Path(root).expanduser().resolve()


def s3_connection() -> S3Connection:
    """The S3 API's endpoint and credentials, from the standard AWS variables."""
    return S3Connection(
        endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
        region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        access_key_id=os.environ.get("AWS_ACCESS_KEY_ID") or None,
        secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY") or None,
    )


@dataclass(frozen=True)
class Settings:
    data_root: Root
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
    # The driver JVM's heap (`spark.driver.memory`). In local mode every task
    # runs in it: Spark's default, 1g, kept a 10M-event first run collecting
    # garbage (docs/benchmarks.md).
    driver_memory: str = "2g"
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
    # A stateful query that drops more than this share of its input as later than
    # its watermark gets a warning (the late_drops checks): recover the rows with
    # `lakehouse backfill --pending`.
    late_share_warning: float = 0.05
    # A layer's queries run at the same time on up to this many threads, each once
    # the tables of its layer it reads have been checked: LAKEHOUSE_QUERY_THREADS
    # (bronze has three sources). 1: one after the other.
    query_threads: int = 3
    # A check's rows (a table's new rows, the partitions they went to, a whole
    # table) up to this many are read into an Arrow copy: GX's pandas engine checks
    # the column rules, Spark the SQL rules over a local relation
    # (src/lakehouse/quality/validate.py). More: Spark reads them from the table.
    # LAKEHOUSE_CHECK_ARROW_MAX_ROWS; 0: always Spark.
    check_arrow_max_rows: int = 100_000
    # Run reports and Data Docs: LAKEHOUSE_REPORTS_DIR, else `<data root>/reports`
    # for a local root, else ./reports (reports stay on local disk, beside Airflow).
    reports_dir: Path | None = None

    @classmethod
    def load(
        cls,
        data_root: str | Path | None = None,
        spark_master: str | None = None,
        default_data_root: str | Path = DEFAULT_DATA_ROOT,
        kafka_bootstrap_servers: str | None = None,
    ) -> Settings:
        root = data_root or os.environ.get("LAKEHOUSE_DATA_ROOT") or default_data_root
        reports = os.environ.get("LAKEHOUSE_REPORTS_DIR")
        return cls(
            data_root=_data_root(root, s3_connection()),
            reports_dir=Path(reports).expanduser().resolve() if reports else None,
            spark_master=(
                spark_master or os.environ.get("LAKEHOUSE_SPARK_MASTER") or DEFAULT_SPARK_MASTER
            ),
            shuffle_partitions=_env_int("LAKEHOUSE_SHUFFLE_PARTITIONS", os.cpu_count() or 2),
            max_files_per_trigger=_env_int("LAKEHOUSE_MAX_FILES_PER_TRIGGER", 1000),
            max_line_bytes=_env_int("LAKEHOUSE_MAX_LINE_BYTES", 1024 * 1024),
            lock_timeout_seconds=_env_int("LAKEHOUSE_LOCK_TIMEOUT", 900, minimum=0),
            future_tolerance=dt.timedelta(hours=_env_int("LAKEHOUSE_FUTURE_TOLERANCE_HOURS", 24)),
            state_store=_state_store(os.environ.get("LAKEHOUSE_STATE_STORE") or "rocksdb"),
            driver_memory=_driver_memory(os.environ.get("LAKEHOUSE_DRIVER_MEMORY") or "2g"),
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
            late_share_warning=_env_share("LAKEHOUSE_LATE_SHARE_WARNING", 0.05),
            query_threads=_env_int("LAKEHOUSE_QUERY_THREADS", 3, minimum=1),
            check_arrow_max_rows=_env_int("LAKEHOUSE_CHECK_ARROW_MAX_ROWS", 100_000, minimum=0),
        )

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
