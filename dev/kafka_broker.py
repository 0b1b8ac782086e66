"""A single-node Apache Kafka broker on this machine: `make kafka-up`, `make kafka-down`.

Apache Kafka itself (the `kafka.Kafka` server of `org.apache.kafka:kafka_2.13`),
from the jars fetched into jars/kafka-broker/ the first time it starts (its pom
pins the version), in KRaft mode: one process is both broker and controller, no
ZooKeeper. It listens on 127.0.0.1 only (clients on `port`, the controller on
`port + 1`) and keeps its data in `<state>/data` (`.kafka/` in the checkout,
git-ignored). Starting it creates one topic per source (`<prefix><source>`,
`partitions` partitions each) and waits until each partition has a leader.

Topics and offsets go through Kafka's admin API from this process
(kafka-python's `KafkaAdminClient`, a development dependency), not through
Kafka's command-line tools, each of which is a JVM of its own; only
formatting the storage before the first start runs one.

Tests start their own broker on free ports (`KafkaBroker(...).start()`) and
stop it; `delete_records` is what Kafka's retention does to old messages, on
demand.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kafka import TopicPartition
from kafka.admin import KafkaAdminClient, OffsetSpec

from dev import processes
from lakehouse.catalog import SOURCES
from lakehouse.orchestration import REPO
from lakehouse.runtime import jars
from lakehouse.runtime.settings import Settings, jars_folder

JAVA = os.environ.get("JAVA", "java")
ADMIN_TIMEOUT_MS = 30_000

LOG4J = """\
rootLogger.level = WARN
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
logger.server.name = kafka.server.KafkaServer
logger.server.level = INFO
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on, with the next one free too."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        with socket.socket() as controller:
            try:
                controller.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two consecutive free ports on 127.0.0.1")


def cluster_id() -> str:
    """A new KRaft cluster id, as Kafka's `Uuid.randomUuid` makes one: base64url of a
    random UUID, drawn again if it starts with "-" (the storage tool would take that
    for an option: one id in 64 made CI fail with "expected one argument")."""
    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not found.startswith("-"):
            return found


@dataclass(frozen=True)
class KafkaBroker:
    state: Path
    port: int = 9092
    partitions: int = 3
    heap: str = "512m"

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def classpath(self) -> str:
        return str(jars.ensure("kafka-broker", jars_folder()) / "*")

    def _config(self) -> Path:
        """The broker's server.properties (and its log4j configuration), written once."""
        config = self.state / "server.properties"
        data = self.state / "data"
        client, controller = f"127.0.0.1:{self.port}", f"127.0.0.1:{self.port + 1}"
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{controller}",
            "listeners": f"PLAINTEXT://{client},CONTROLLER://{controller}",
            "advertised.listeners": f"PLAINTEXT://{client}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(data),
            "num.partitions": str(self.partitions),
            # One node: every internal topic has one replica.
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        self.state.mkdir(parents=True, exist_ok=True)
        config.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        (self.state / "log4j2.properties").write_text(LOG4J)
        if not (data / "meta.properties").exists():
            self._tool("kafka.tools.StorageTool", "format", "-t", cluster_id(), "-c", str(config))
        return config

    def _java(self, main: str, *args: str, heap: str = "256m") -> list[str]:
        log4j = self.state / "log4j2.properties"
        return [
            JAVA,
            f"-Xmx{heap}",
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            self.classpath,
            main,
            *args,
        ]

    def _tool(self, main: str, *args: str) -> str:
        """Run one of Kafka's command-line tools (a JVM); its output, or an error with it."""
        done = subprocess.run(
            self._java(main, *args), capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{main} {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def start(self, topics: Iterable[str] | None = None, timeout: float = 60) -> float:
        """Start the broker and create the topics; the seconds it took until they existed."""
        if processes.running(self.state):
            raise RuntimeError(f"the broker in {self.state} is already running; stop it first")
        started = time.monotonic()
        config = self._config()
        env = dict(os.environ)
        broker = processes.start(
            self.state,
            "kafka",
            self._java("kafka.Kafka", str(config), heap=self.heap),
            env,
        )
        processes.wait_until(self.listening, timeout, "the broker to listen", [broker])
        self.create_topics(topic_names() if topics is None else topics)
        return time.monotonic() - started

    def listening(self) -> bool:
        return processes.listening(self.port)

    @contextmanager
    def admin(self) -> Iterator[KafkaAdminClient]:
        """Kafka's admin API from this process (kafka-python): each call a request to the
        broker, where each of Kafka's own command-line tools is a JVM of its own (1.7 s)."""
        client = KafkaAdminClient(
            bootstrap_servers=self.bootstrap_servers,
            client_id="lakehouse-dev-broker",
            request_timeout_ms=ADMIN_TIMEOUT_MS,
        )
        try:
            yield client
        finally:
            client.close()

    def create_topics(self, topics: Iterable[str]) -> None:
        """Create the topics that do not exist yet; return once every partition has a leader."""
        wanted = list(topics)
        if not wanted:
            return
        with self.admin() as admin:
            missing = [topic for topic in wanted if topic not in admin.list_topics()]
            if missing:
                spec = {"num_partitions": self.partitions, "replication_factor": 1}
                admin.create_topics({topic: spec for topic in missing})
            admin.wait_for_topics(wanted, timeout_ms=ADMIN_TIMEOUT_MS)

    def recreate_topic(self, topic: str, timeout: float = 60) -> None:
        """Delete the topic and create it again under the same name (a new id, offsets
        from 0), as an operator fixing its settings might."""
        with self.admin() as admin:
            admin.delete_topics([topic], timeout_ms=int(timeout * 1000))
            processes.wait_until(
                lambda: topic not in admin.list_topics(), timeout, f"topic {topic} to go", []
            )
        self.create_topics([topic])

    @staticmethod
    def _offsets(admin: KafkaAdminClient, topic: str, earliest: bool) -> dict[int, int]:
        (described,) = admin.describe_topics([topic])
        if described["error_code"]:
            raise RuntimeError(f"Kafka cannot describe topic {topic}: {described}")
        partitions = [TopicPartition(topic, p["partition_index"]) for p in described["partitions"]]
        spec = OffsetSpec.EARLIEST if earliest else OffsetSpec.LATEST
        found = admin.list_partition_offsets(dict.fromkeys(partitions, spec))
        return {tp.partition: answer.offset for tp, answer in sorted(found.items())}

    def end_offsets(self, topic: str, earliest: bool = False) -> dict[int, int]:
        """Per partition, the offset the next message will get; with `earliest`, the
        offset of the oldest message Kafka still has."""
        with self.admin() as admin:
            return self._offsets(admin, topic, earliest)

    def delete_records(self, topic: str) -> dict[int, int]:
        """Delete every message of `topic` now, as retention would: the offsets it deleted up to."""
        with self.admin() as admin:
            ends = self._offsets(admin, topic, earliest=False)
            admin.delete_records({TopicPartition(topic, p): end for p, end in ends.items()})
        return ends

    def stop(self) -> list[str]:
        return processes.stop(self.state)


def topic_names(settings: Settings | None = None) -> list[str]:
    """One topic per source, with the configured prefix (docs/kafka.md)."""
    prefix = (settings or Settings.load()).kafka_topic_prefix
    return [f"{prefix}{source}" for source in SOURCES]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dev.kafka_broker", description=__doc__)
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("--state", type=Path, default=REPO / ".kafka")
    parser.add_argument("--port", type=int, default=9092, help="client port (default 9092)")
    parser.add_argument(
        "--partitions", type=int, default=3, help="partitions per topic (default 3)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    broker = KafkaBroker(args.state.resolve(), args.port, args.partitions)

    def ready(seconds: float) -> list[str]:
        return [
            f"Apache Kafka broker (KRaft) on {broker.bootstrap_servers}, ready in {seconds:.1f} s",
            f"  topics: {', '.join(topic_names())} ({broker.partitions} partitions each)",
            f"  data: {broker.state / 'data'}; logs: {broker.state / 'logs'}",
            f"  use it: export LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS={broker.bootstrap_servers}",
        ]

    return processes.server_command(args.action, broker, "broker", broker.bootstrap_servers, ready)


if __name__ == "__main__":
    sys.exit(main())
