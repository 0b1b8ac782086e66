"""Typed run settings, built once per process from CLI flags and the environment.

Precedence for every setting: explicit flag, then environment variable, then
default. The variables, their defaults and checks are declared once, in
`lakehouse.environment`.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from lakehouse.environment import Environment, environment, spark_master_url
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


def jars_folder(env: Environment | None = None) -> Path:
    """The JVM libraries' folder: LAKEHOUSE_JARS_DIR, else the checkout's jars/."""
    chosen = (env or environment()).jars_dir
    return Path(chosen).expanduser().resolve() if chosen else CHECKOUT_JARS


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
    # Whole tracebacks of a failure, Python's and the JVM's log lines' (`--debug`):
    # else a failure is one line, and the JVM's log lines one line each.
    debug: bool = False
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
    # The JVM libraries' folder (`runtime.jars`): LAKEHOUSE_JARS_DIR, else the checkout's.
    jars_dir: Path = CHECKOUT_JARS

    @classmethod
    def load(
        cls,
        data_root: str | Path | None = None,
        spark_master: str | None = None,
        default_data_root: str | Path | None = None,
        kafka_bootstrap_servers: str | None = None,
        debug: bool = False,
    ) -> Settings:
        """Flags first, then the environment (`lakehouse.environment`), then defaults;
        `default_data_root` replaces the environment's default data root."""
        env = environment()
        root = data_root or (
            env.data_root
            if "data_root" in env.model_fields_set or default_data_root is None
            else default_data_root
        )
        if spark_master:
            try:
                spark_master_url(spark_master)
            except ValueError as error:
                raise ValueError(f"--spark-master: {error}, got {spark_master!r}") from None
        return cls(
            data_root=_data_root(root, s3_connection()),
            reports_dir=Path(env.reports_dir).expanduser().resolve() if env.reports_dir else None,
            spark_master=spark_master or env.spark_master,
            shuffle_partitions=env.shuffle_partitions or os.cpu_count() or 2,
            max_files_per_trigger=env.max_files_per_trigger,
            max_line_bytes=env.max_line_bytes,
            lock_timeout_seconds=env.lock_timeout,
            future_tolerance=dt.timedelta(hours=env.future_tolerance_hours),
            state_store=env.state_store,
            driver_memory=env.driver_memory,
            spark_auth_secret=env.spark_auth_secret,
            kafka_bootstrap_servers=kafka_bootstrap_servers or env.kafka_bootstrap_servers,
            kafka_topic_prefix=env.kafka_topic_prefix,
            kafka_max_offsets_per_trigger=env.kafka_max_offsets_per_trigger,
            kafka_fail_on_data_loss=env.kafka_fail_on_data_loss,
            late_share_warning=env.late_share_warning,
            debug=debug or env.debug,
            query_threads=env.query_threads,
            check_arrow_max_rows=env.check_arrow_max_rows,
            jars_dir=jars_folder(env),
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
