"""Publish generated events to Kafka: `lakehouse produce --events N --seed S`.

The same events `lakehouse generate` writes (duplicates, out-of-order, late
and malformed lines included, from the same arguments), one message per line
on the source's topic (`<prefix><source>`). The lines go through a scratch
folder and Spark's own Kafka sink (`spark-sql-kafka-0-10`, the connector
bronze reads with); the line's exact bytes are the message's value. The key
is the event's `user_id` (as a producer keeping each user's events in order
would do), so the messages spread over the topic's partitions; a line
without one has no key. Bronze ignores keys.
A topic the broker does not have is created with its default partition count
when the broker allows it; create the topics first (`make kafka-up` does, with 3
partitions): a topic created by a send can answer it "not the leader", after
which the idempotent producer retries until its delivery timeout (seen under load).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.catalog import SOURCES
from lakehouse.errors import LakehouseError
from lakehouse.runtime.settings import Settings
from lakehouse.samples.generate import GeneratedSummary, GeneratorConfig, generate
from lakehouse.storage.kafka import refuse_unreachable_brokers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def produce(spark: SparkSession, settings: Settings, config: GeneratorConfig) -> GeneratedSummary:
    """Generate `config`'s events and publish every line; the generator's summary."""
    if not settings.kafka_bootstrap_servers:
        raise LakehouseError(
            "no Kafka broker: set LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS or pass "
            "--kafka-bootstrap-servers (`make kafka-up` starts one on 127.0.0.1:9092)"
        )
    refuse_unreachable_brokers(settings.kafka_bootstrap_servers)
    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-produce-"))
    try:
        # Plain files: Spark's text reader then hands over each line's bytes as they are.
        plain = GeneratorConfig(**{**config.__dict__, "gzip_rate": 0.0})
        summary = generate(plain, scratch)
        for source in SOURCES:
            folder = scratch / source
            if not any(folder.glob("*.jsonl")):
                continue
            lines = spark.read.format("text").load(str(folder))
            (
                lines.select(
                    F.lit(settings.kafka_topic(source)).alias("topic"),
                    F.get_json_object("value", "$.user_id").alias("key"),
                    F.col("value").cast("binary").alias("value"),
                )
                .write.format("kafka")
                .option("kafka.bootstrap.servers", settings.kafka_bootstrap_servers)
                # Every message once, in order per partition, even when a send is retried.
                .option("kafka.enable.idempotence", "true")
                .option("kafka.acks", "all")
                .save()
            )
        return summary
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
