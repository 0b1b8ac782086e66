"""What a Kafka topic is now: its id and each partition's earliest and next offsets;
and whether any broker answers at all (`refuse_unreachable_brokers`).

Read with Kafka's own `Admin` client (kafka-clients, on Spark's classpath as a
dependency of Spark's Kafka connector), through the Spark driver's JVM: no
second Kafka client in Python. Bronze compares it with what its Kafka
checkpoint recorded before every query (`lakehouse.drivers.bronze.refuse_another_topic`).

A topic deleted and created again under the same name gets a new id (Kafka
2.8 and later) and starts its offsets at 0 again; Spark's Kafka source only
notices when an offset it had read no longer exists, and silently skips the
new topic's first messages when the new topic has grown past them.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse.errors import LakehouseError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class TopicState:
    name: str
    id: str
    earliest: dict[int, int]  # per partition, the offset of the oldest message Kafka holds
    latest: dict[int, int]  # per partition, the offset the next message will get

    def recorded(self) -> dict[str, Any]:
        """As the checkpoint's `lakehouse.json` keeps it (JSON keys are strings)."""
        return {
            "name": self.name,
            "id": self.id,
            "earliest": {str(p): o for p, o in sorted(self.earliest.items())},
        }


def topic_state(spark: SparkSession, servers: str, topic: str) -> TopicState | None:
    """The topic as the brokers describe it now; None when it does not exist."""
    jvm: Any = spark._jvm  # py4j: PySpark's gateway to the driver's JVM
    admin_api = jvm.org.apache.kafka.clients.admin
    seconds = jvm.java.util.concurrent.TimeUnit.SECONDS
    properties = jvm.java.util.Properties()
    properties.put("bootstrap.servers", servers)
    properties.put("default.api.timeout.ms", str(TIMEOUT_SECONDS * 1000))
    admin = admin_api.Admin.create(properties)
    try:
        names = jvm.java.util.Collections.singletonList(topic)
        try:
            described = admin.describeTopics(names).allTopicNames().get(TIMEOUT_SECONDS, seconds)
        except Exception as error:
            if "UnknownTopicOrPartition" in str(error):
                return None
            raise LakehouseError(f"Kafka: cannot describe topic '{topic}': {error}") from error
        description = described.get(topic)
        partitions = [info.partition() for info in description.partitions()]

        def offsets(spec: Any) -> dict[int, int]:
            request = jvm.java.util.HashMap()
            for partition in partitions:
                request.put(jvm.org.apache.kafka.common.TopicPartition(topic, partition), spec)
            answer = admin.listOffsets(request).all().get(TIMEOUT_SECONDS, seconds)
            return {int(key.partition()): int(info.offset()) for key, info in answer.items()}

        return TopicState(
            topic,
            str(description.topicId().toString()),
            offsets(admin_api.OffsetSpec.earliest()),
            offsets(admin_api.OffsetSpec.latest()),
        )
    finally:
        admin.close()


def refuse_unreachable_brokers(servers: str, timeout: float = 5) -> None:
    """Fail at once, before any query, when no bootstrap server accepts a connection.

    Spark's Kafka source would retry for minutes before giving up.
    """
    for server in servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return
        except (OSError, ValueError):
            continue
    raise LakehouseError(
        f"Kafka: no bootstrap server of {servers!r} accepts connections; start the broker "
        "(`make kafka-up` for the local one) or unset LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS "
        "to ingest landing files only."
    )
