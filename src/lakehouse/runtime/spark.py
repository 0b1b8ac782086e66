"""The one place a SparkSession is configured.

Jobs call `get_spark(settings)`; tests call `get_spark(settings, for_tests=True)`.
Under spark-submit the master comes from spark-submit, otherwise from settings.

Delta Lake is Spark's own connector (delta-spark): its jars are fetched once
(Maven, `jars/pom.xml`) into `jars/` by `make setup` or the first session
(`runtime.jars`), and every session and spark-submit puts them on the classpath.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.errors import LakehouseError
from lakehouse.runtime import jars
from lakehouse.runtime.class_archive import archive_path, recording
from lakehouse.runtime.locks import held_object_lock

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.runtime.settings import Settings

_LOG4J = Path(__file__).with_name("log4j2.properties")

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
TRACK_ROCKSDB_ROWS = "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows"
LOCAL_CHECKPOINT_FILES = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


def spark_jars(root: Path, object_store: bool = False, fetch: bool = True) -> list[Path]:
    """The jars Spark needs beyond its own: Delta Lake's and Spark's Kafka connectors.

    With `object_store`, also Hadoop's S3A connector, the AWS SDK and our Delta log
    store (jars/s3/): only a data root on S3 needs them, and the SDK bundle alone is
    686 MB, so they are fetched the first time such a root is used (`runtime.jars`).
    With `fetch` false they are only named (a configuration built, no JVM started).
    """
    bundles = ("delta", "s3") if object_store else ("delta",)
    if fetch:
        for bundle in bundles:
            jars.ensure(bundle, root)
    return [jar for bundle in bundles for jar in jars.named(bundle, root)]


# jars/log-store/FencedS3LogStore.java, built into jars/s3/ with the S3 connector, and the
# settings it reads: the writer lock's URI and this holder's token.
FENCED_LOG_STORE = "lakehouse.delta.FencedS3LogStore"
FENCE_SETTINGS = ("lakehouse.writer.lock", "lakehouse.writer.token")


def delta_conf() -> dict[str, str]:
    """What makes a session speak Delta: the connector's SQL extension and catalog."""
    return {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # New tables are Serializable: a backfill that replaces a date range then
        # fails if a stream appended to that range meanwhile (WriteSerializable,
        # Delta's default, lets such blind appends through).
        "spark.databricks.delta.properties.defaults.isolationLevel": "Serializable",
        # Lets a stream start at the version after a table's latest (a stream
        # `lakehouse recover` restarts, whose sources have no new commit yet);
        # Delta's streaming source reads this setting for startingVersion too.
        "spark.databricks.delta.changeDataFeed.timestampOutOfRange.enabled": "true",
        # On S3 (no atomic rename): Delta's log store for one driver at a time (the
        # writer lock and the Airflow pool make it so), fenced by that lock and
        # creating each commit file with a conditional PUT (jars/log-store/).
        "spark.delta.logStore.s3a.impl": FENCED_LOG_STORE,
    }


def driver_java_options(short_lived: bool = True, traces: bool = False) -> str:
    """The driver JVM's options: UTC, our log4j configuration (quiet console: each
    message one line, unless `traces`, the JVM's stack traces too), and the parallel
    garbage collector.

    In local mode every task runs in the driver JVM, and a run is a batch job:
    throughput counts, not pause times: G1 (Java's default) paused longer and
    marked concurrently on the same cores (docs/benchmarks.md).

    A `short_lived` driver (a `lakehouse` command, an Airflow task) compiles with
    the JIT's quick tier only (C1, `TieredStopAtLevel=1`): a run is short and
    runs many different plans, each with classes Spark generates for it, and
    the optimising compiler (C2) spent more CPU compiling them than the run
    spent on its rows, on the two cores the tasks needed. Measured up to a
    million events a run (docs/benchmarks.md). A JVM that lives for many runs
    (the tests' session) keeps the JVM's tiered default, as executors on a
    cluster do: there C2's code pays back. C1 alone gets the JVM's smaller code
    cache, too small for the classes of many plans: it is given a larger one.

    With the class archive (`runtime.class_archive`), the JVM maps the classes a run
    loads instead of loading them one by one; a command that records the archive
    writes it at exit instead. A JVM that finds the archive does not match its class
    path runs without it, silently (`-Xlog:cds=off`).
    """
    options = (
        f"-Duser.timezone=UTC -Dlog4j.configurationFile={_LOG4J} "
        f"-Dlakehouse.traces={str(traces).lower()} "
        f"-Dlakehouse.task_warnings={'warn' if traces else 'error'} -XX:+UseParallelGC"
    )
    if short_lived:
        options += " -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=512m"
    archive, recording_to = archive_path(), recording()
    if recording_to:
        options += f" -XX:ArchiveClassesAtExit={recording_to} -Xlog:cds=off -Xlog:cds+dynamic=off"
    elif archive.is_file():
        options += f" -XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"
    return options


def driver_conf(settings: Settings, short_lived: bool = True) -> dict[str, str]:
    """The driver JVM's heap and options (`driver_java_options`)."""
    return {
        "spark.driver.memory": settings.driver_memory,
        "spark.driver.extraJavaOptions": driver_java_options(short_lived, settings.debug),
    }


def submit_conf(settings: Settings) -> dict[str, str]:
    """What spark-submit must set itself: the driver JVM starts before our Python.

    Under spark-submit, `spark.driver.*` options given to the session builder
    come too late; Airflow's SparkSubmitOperator passes these as --conf.
    """
    return {**driver_conf(settings), **delta_conf()}


def session_conf(
    settings: Settings, for_tests: bool = False, streaming: bool = True
) -> dict[str, str]:
    """Spark configuration for every lakehouse job (exposed for spark-submit and tests)."""
    conf = {
        # Spark turns adaptive execution off for stateful queries anyway (with a
        # warning per query); batch backfills keep it.
        "spark.sql.adaptive.enabled": str(not streaming).lower(),
        # Event times are UTC by contract; never let the machine's zone leak in.
        "spark.sql.session.timeZone": "UTC",
        # The tests' session serves a whole test run: a long-lived JVM.
        **driver_conf(settings, short_lived=not for_tests),
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.jars": ",".join(
            str(jar)
            for jar in spark_jars(settings.jars_dir, settings.object_store is not None, fetch=False)
        ),
        **delta_conf(),
        # INT96 (Spark's default) is deprecated and misread by some Delta readers;
        # TIMESTAMP_MICROS writes isAdjustedToUTC=true, which is Delta's `timestamp`.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.parquet.compression.codec": "snappy",
        # State: RocksDB keeps state off the JVM heap. ("hdfs": Spark's default
        # store, for comparison in the benchmark.)
        "spark.sql.streaming.stateStore.providerClass": (
            ROCKSDB_PROVIDER if settings.state_store == "rocksdb" else HDFS_PROVIDER
        ),
        # Each commit uploads the RocksDB snapshot (only its new SST files), so a
        # run loads the latest state directly. With changelog checkpointing,
        # snapshots are uploaded by a background maintenance task that an
        # availableNow run seldom lives long enough to reach: every run replayed
        # every changelog since the query began, slower with each run.
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false",
        # RocksDB counts its rows only by reading each key before every put and
        # remove: off, the stateful queries run faster (docs/benchmarks.md). Progress then
        # reports 0 rows: the run shows the state's size instead, and
        # `lakehouse state` counts the rows with Spark's state data source.
        TRACK_ROCKSDB_ROWS: "false",
        # Fixed into each stateful query's checkpoint at its first run.
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        # Delta rebuilds a table's snapshot in this many tasks (its default, 50,
        # is sized for clusters: on two cores it is most of a small commit's time).
        "spark.databricks.delta.snapshotPartitions": str(settings.shuffle_partitions),
        # Delta's VACUUM lists and deletes files in this many tasks (Spark's
        # default, 10,000, made one vacuum of a small table take minutes here).
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": str(
            settings.shuffle_partitions
        ),
        # Cached DataFrames (bronze's parsed micro-batch, a table's new rows under
        # check) are read back once or twice and dropped: choosing a compression
        # per column (a dictionary of every value first) cost more than it saved.
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # Spark compiles the code it generates for a plan once and keeps the class in a
        # cache keyed by its source; 100 classes by default, fewer than one run's plans
        # generate: a warm run of 400 events compiled 416 classes again, 12 with this.
        "spark.sql.codegen.cache.maxEntries": "2000",
        # Keep every micro-batch's progress of a run for the stage summary.
        "spark.sql.streaming.numRecentProgressUpdates": "10000",
        "spark.ui.showConsoleProgress": "false",
    }
    if settings.object_store is not None:
        conf.update(settings.object_store.spark_conf())
    else:
        # Streaming checkpoints on a local disk are written through Hadoop's FileSystem,
        # not its FileContext (Spark's default). FileContext's rename on the local file
        # system asks for each path's link status, which Hadoop's local file system
        # answers by starting a `readlink` process, native library or not: two
        # processes for each checkpoint file renamed (docs/benchmarks.md). A local
        # rename is atomic either way.
        conf["spark.sql.streaming.checkpointFileManagerClass"] = LOCAL_CHECKPOINT_FILES
    if settings.spark_auth_secret:
        # A standalone cluster that requires authentication takes the secret from
        # the driver's configuration only (Spark's SecurityManager); Spark's UI
        # and logs redact it.
        conf["spark.authenticate"] = "true"
        conf["spark.authenticate.secret"] = settings.spark_auth_secret
    if for_tests:
        conf.update(
            {
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "2",
                "spark.databricks.delta.snapshotPartitions": "2",
                "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
                "spark.default.parallelism": "2",
                "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
            }
        )
    return conf


def get_spark(
    settings: Settings,
    app_name: str = "lakehouse",
    for_tests: bool = False,
    streaming: bool = True,
) -> SparkSession:
    # Python workers must use this interpreter (the venv), not the system python.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    # Under spark-submit the JVM is already running (it started this Python and
    # told it the gateway port): spark-submit's --master and --name apply.
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(settings.spark_master).appName(app_name)
    spark_jars(settings.jars_dir, settings.object_store is not None)  # fetched if missing
    for key, value in session_conf(settings, for_tests, streaming).items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except PySparkRuntimeError as error:
        if error.getCondition() != "JAVA_GATEWAY_EXITED":
            raise
        raise LakehouseError(
            f"Spark's JVM exited as it started (master {settings.spark_master!r}, from "
            f"--spark-master or LAKEHOUSE_SPARK_MASTER; driver heap {settings.driver_memory!r}, "
            "from LAKEHOUSE_DRIVER_MEMORY): its own words are in the lines above"
        ) from error
    spark.sparkContext.setLogLevel("WARN")
    fence_commits(spark)
    return spark


# A local property naming the pipeline stage whose Spark jobs follow (`bronze/clicks`,
# `checks silver`): the event log and Spark's UI then tell each stage's jobs apart
# (benchmarks/spark_jobs.py counts them). A query's jobs inherit the label of the
# thread that started it.
STAGE_PROPERTY = "lakehouse.stage"


def label_jobs(spark: SparkSession, stage: str | None) -> None:
    """Label the Spark jobs this thread starts from now on with `stage` (None: unlabelled)."""
    if isinstance(spark, LazySpark):
        spark.label(stage)
    else:
        spark.sparkContext.setLocalProperty(STAGE_PROPERTY, stage)  # type: ignore[arg-type]


class LazySpark:
    """A SparkSession that starts when something first uses it.

    `lakehouse run` hands one to the pipeline: a run that finds nothing new
    reads only Delta logs, checkpoints and landing folders (in Python) and
    never starts a JVM. Every attribute is the session's, started by `start`
    on first access. Labels given before the start (`label_jobs`) apply to
    each thread's jobs once that thread uses the session.
    """

    def __init__(self, start: Callable[[], SparkSession]) -> None:
        self._start = start
        self._session: SparkSession | None = None
        self._lock = threading.Lock()
        self._pending: dict[int, str | None] = {}

    @property
    def started(self) -> bool:
        return self._session is not None

    def label(self, stage: str | None) -> None:
        if self._session is None:
            self._pending[threading.get_ident()] = stage
        else:
            self._session.sparkContext.setLocalProperty(STAGE_PROPERTY, stage)  # type: ignore[arg-type]

    def session(self) -> SparkSession:
        with self._lock:
            if self._session is None:
                self._session = self._start()
        thread = threading.get_ident()
        if thread in self._pending:
            self.label(self._pending.pop(thread))
        return self._session

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session(), name)


def fence_commits(spark: SparkSession) -> None:
    """Tell the S3 log store which writer lock this command holds (none: unfenced).

    Runtime settings, not the session's: a session outlives commands in tests
    and notebooks. Spark copies them into the Hadoop configuration Delta hands
    its log store at each commit.
    """
    held = held_object_lock()
    for key, value in zip(FENCE_SETTINGS, held or (None, None), strict=True):
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)
