"""Every `LAKEHOUSE_*` environment variable, declared once (pydantic-settings).

Nothing else in the package reads a `LAKEHOUSE_*` variable: `runtime.settings`
builds the run's settings from this and the command line's flags, and the
`lakehouse --help` text and the docs' list of settings are generated from it
(`python -m lakehouse.environment` prints that list as Markdown). Other
systems' variables (`AIRFLOW_CTX_*`, `PYSPARK_*`, `AWS_*`) are theirs and are
read where they are used.

An empty variable counts as unset. A wrong value is refused in one line that
names the variable (`environment()`).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from typing import Any, Literal, TypeVar

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PREFIX = "LAKEHOUSE_"
# The master URLs Spark takes: local mode with N threads (and F retries), a standalone
# cluster's masters, YARN, Kubernetes. Another one ends in a JVM that exits unexplained.
SPARK_MASTER = (
    r"^(local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|spark://[^\s,/]+:\d+(,[^\s,/]+:\d+)*|yarn|k8s://\S+)$"
)


def spark_master_url(url: str) -> str:
    """`url` if Spark takes it as a master URL, else a ValueError saying which it takes."""
    if not re.fullmatch(SPARK_MASTER, url):
        raise ValueError(
            "must be a master URL Spark takes: local, local[N], local[*], "
            "spark://host:port, yarn or k8s://..."
        )
    return url


# A hundred years: beyond it, no clock is plausible (and Python's timedelta overflows).
MAX_FUTURE_TOLERANCE_HOURS = 100 * 365 * 24


class Environment(BaseSettings):
    """The variables, their defaults and what they do (the descriptions are the docs)."""

    model_config = SettingsConfigDict(
        env_prefix=PREFIX, env_ignore_empty=True, extra="ignore", frozen=True
    )

    # Where and on what.
    data_root: str = Field(
        "./data",
        description="the data root: a local path, or `s3a://bucket/prefix` (`s3://` means the same)",
    )
    spark_master: str = Field(
        "local[*]",
        description="the Spark master (`local`, `local[N]`, `local[*]`, `spark://host:port`, `yarn`, `k8s://…`); ignored under spark-submit, which sets its own",
    )
    reports_dir: str | None = Field(
        None,
        description="where run reports and Data Docs go, always on local disk (default `<data root>/reports`; `./reports` for an object-store root)",
    )
    jars_dir: str | None = Field(
        None,
        description="the folder of the JVM libraries (default `jars/` of the checkout; each fetched into it on first use)",
    )
    driver_memory: str = Field(
        "2g",
        description="the driver JVM's heap (`spark.driver.memory`), where local mode runs every task: a number and a unit, `k`, `m`, `g` or `t`, from 512m to 1t",
    )
    shuffle_partitions: int | None = Field(
        None,
        ge=1,
        description="shuffle partitions (default the number of cores); fixed into a stateful query's checkpoint at its first run",
    )
    spark_auth_secret: str | None = Field(
        None,
        repr=False,
        description="the shared secret of a Spark standalone cluster that requires authentication (`spark.authenticate`)",
    )
    state_store: Literal["rocksdb", "hdfs"] = Field(
        "rocksdb",
        description="state store of new stateful queries: `rocksdb` or `hdfs` (Spark's default, in the JVM heap); a checkpoint keeps the store it was created with",
    )
    # What a run takes in.
    max_files_per_trigger: int = Field(
        1000,
        ge=1,
        description="admission control: landing files per bronze micro-batch",
    )
    max_line_bytes: int = Field(
        1024 * 1024,
        ge=1,
        description="longer lines are quarantined (`raw` keeps the first 1,000 characters)",
    )
    future_tolerance_hours: int = Field(
        24,
        ge=1,
        le=MAX_FUTURE_TOLERANCE_HOURS,
        description="an `event_time` more than this many hours after its ingestion is quarantined (`event_time in the future`); at most 876,000 (a hundred years)",
    )
    kafka_bootstrap_servers: str | None = Field(
        None,
        description="Kafka brokers, `host:port[,…]`: bronze also reads the sources' topics; `--kafka-bootstrap-servers` wins; unset, no topic is read",
    )
    kafka_topic_prefix: str = Field(
        "",
        pattern=r"^[A-Za-z0-9._-]*$",
        description="a source's topic is `<prefix><source>`; letters, digits, `.`, `_`, `-`",
    )
    kafka_max_offsets_per_trigger: int = Field(
        1_000_000,
        ge=1,
        description="admission control: messages per micro-batch of a Kafka query, over all partitions of its topic (Spark's `maxOffsetsPerTrigger`)",
    )
    kafka_fail_on_data_loss: bool = Field(
        True,
        description="`false` goes on when Kafka deleted messages bronze had not read, skipping them uncounted (Spark's `failOnDataLoss`)",
    )
    # How a run goes.
    debug: bool = Field(
        False,
        description="a failure prints whole tracebacks, Python's and the JVM's log lines' (as `--debug`); else one line each",
    )
    lock_timeout: int = Field(
        900,
        ge=0,
        description="seconds a writer (`run`, `backfill`, `maintain`, `recover`, `migrate`) waits for another one on the same data root; 0 fails at once",
    )
    lock_lease_seconds: float = Field(
        60.0,
        gt=0,
        description="seconds the writer lock's lease on an object-store root runs unrenewed (tests shorten it)",
    )
    query_threads: int = Field(
        3,
        ge=1,
        description="a layer's queries run on up to this many threads at once, each once the tables of its layer it reads are checked; 1 runs them one after the other",
    )
    late_share_warning: float = Field(
        0.05,
        ge=0,
        le=1,
        description="a stateful query that drops more than this share of its input as late gets a warning (the `late_drops` checks); `lakehouse backfill --pending` recovers the rows",
    )
    check_arrow_max_rows: int = Field(
        100_000,
        ge=0,
        description="a check's rows up to this many are read into an Arrow copy (Great Expectations' pandas engine; Spark SQL over the copy); more are read by Spark from the table; 0 checks everything on Spark",
    )
    # Airflow.
    incremental_schedule: str = Field(
        "*/15 * * * *",
        description="the `lakehouse_incremental` DAG's schedule: a cron expression, or `none` (manual runs only)",
    )
    # Set by one process for another, not by people.
    run_id: str | None = Field(
        None,
        description="set by the Airflow operator: the run id it chose for its job, which its links name",
    )
    class_archive_recording: str | None = Field(
        None,
        description="set by `lakehouse.runtime.class_archive`: where a command's driver JVM records the class archive",
    )
    crash_at: str | None = Field(
        None,
        description="tests only: fault injection, `<point>[:n][+ms]`, which makes the process kill itself at a named point",
    )
    pause_at: str | None = Field(
        None,
        description="tests only: `<point>[:n]`, which makes the process stop itself there (SIGSTOP)",
    )

    @field_validator("spark_master")
    @classmethod
    def _master(cls, url: str) -> str:
        return spark_master_url(url)

    @field_validator("driver_memory")
    @classmethod
    def _heap_size(cls, size: str) -> str:
        size = size.strip().lower()
        if not size[:-1].isdigit() or size[0] == "0" or size[-1] not in "kmgt":
            raise ValueError("must be a size such as 2g or 1536m")
        mib = int(size[:-1]) * {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024**2}[size[-1]]
        # Spark refuses a driver below 450 MiB; the JVM does not start with a heap it
        # cannot address, and fails then without a word for whoever set the variable.
        if not 512 <= mib <= 1024**2:
            raise ValueError("must be a size such as 2g or 1536m, from 512m to 1t")
        return size


Variables = TypeVar("Variables", bound=Environment)


def environment() -> Environment:
    """The variables as they are now; a wrong one is a ValueError naming it, in one line.

    Read anew whenever a `LAKEHOUSE_*` variable changed, else the object read before:
    building one costs milliseconds, and crash points ask at every Delta write."""
    ours = ((name, value) for name, value in os.environ.items() if name.upper().startswith(PREFIX))
    return _read(tuple(sorted(ours)))


@functools.lru_cache(maxsize=8)
def _read(variables: tuple[tuple[str, str], ...]) -> Environment:
    """`Environment()` for the `LAKEHOUSE_*` variables `variables` (the cache's key)."""
    return validated(Environment)


def validated(model: type[Variables], **given: Any) -> Variables:
    """`model(**given)`, the variables filling in what is not given; a wrong value is a
    ValueError naming its variable, in one line."""
    try:
        return model(**given)
    except ValidationError as error:
        first = error.errors()[0]
        name = PREFIX + "_".join(str(part) for part in first["loc"]).upper()
        reason = first["msg"].removeprefix("Value error, ")
        raise ValueError(
            f"{name}: {reason[0].lower()}{reason[1:]}, got {first['input']!r}"
        ) from None


def _default(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def markdown() -> str:
    """The variables as a Markdown table, for docs/reference.md."""
    rows = ["| variable | default | what |", "| --- | --- | --- |"]
    for name, field in Environment.model_fields.items():
        default = "" if field.default in (None, "") else f"`{_default(field.default)}`"
        rows.append(f"| `{PREFIX}{name.upper()}` | {default} | {field.description} |")
    return "\n".join(rows)


def help_text() -> str:
    """The variables for `lakehouse --help`."""
    lines = ["environment (an empty variable counts as unset):"]
    for name, field in Environment.model_fields.items():
        default = "" if field.default in (None, "") else f" (default {_default(field.default)})"
        lines.append(f"  {PREFIX}{name.upper()}{default}: {field.description}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
    sys.exit(0)
