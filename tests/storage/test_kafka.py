"""Bronze from Kafka, against a real Apache Kafka broker (KRaft) started for this module.

The broker is Apache Kafka itself, from the jars `make setup` fetched
(dev/kafka_broker.py), on free ports of 127.0.0.1. Each test publishes with
`lakehouse produce`'s code (Spark's Kafka sink) to topics of its own prefix,
and checks what bronze made of every message: each exactly once in bronze or
quarantine, traceable to its topic, partition and offset, across runs,
partitions and SIGKILLs; the same rows and reasons as the same lines read
from landing files; the ingest ledger reconciled; of differing copies of an id
(two lines of one file, two partitions, a late first copy) streaming keeps the
one batch keeps, and streaming equals batch downstream once `backfill --pending`
ran; a topic whose unread messages expired fails with the
documented message; and a topic deleted and created again is refused until
the operator says where to read it from.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
from kafka import KafkaProducer

from dev.kafka_broker import KafkaBroker, free_port
from lakehouse.catalog import DERIVED_LAYERS, SOURCES
from lakehouse.catalog.dates import DateRange
from lakehouse.drivers.backfill import run_backfill
from lakehouse.drivers.bronze import kafka_checkpoint, run_bronze
from lakehouse.drivers.late import pending_dates
from lakehouse.drivers.parity import run_parity
from lakehouse.drivers.pipeline import run_pipeline
from lakehouse.drivers.recovery import recover_bronze, recover_kafka_topic
from lakehouse.errors import LakehouseError
from lakehouse.quality.derived import reconciliation_frame
from lakehouse.samples.generate import GeneratorConfig, generate
from lakehouse.samples.produce import produce
from lakehouse.storage.checkpoints import CheckpointError
from tests.helpers import delta_rows, kill_group, run_cli, settings_for, start_cli

pytestmark = pytest.mark.system

PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> KafkaBroker:
    kafka = KafkaBroker(tmp_path_factory.mktemp("kafka"), free_port(), PARTITIONS)
    kafka.start(topics=[])
    yield kafka
    kafka.stop()


def kafka_settings(root: Path, broker: KafkaBroker, prefix: str, **overrides):
    """Settings whose topics (a prefix of their own) exist, each partition with a leader, as
    `make kafka-up` creates them: a topic the broker creates on the first send can answer
    it "not the leader", after which Kafka's idempotent producer retried out-of-order
    sequence numbers until its 120 s delivery timeout (seen once, on two busy cores)."""
    settings = settings_for(
        root,
        kafka_bootstrap_servers=broker.bootstrap_servers,
        kafka_topic_prefix=prefix,
        **overrides,
    )
    broker.create_topics(settings.kafka_topic(source) for source in SOURCES)
    return settings


def messages_in_tables(settings) -> Counter[tuple]:
    """(topic, partition, offset) of every bronze and quarantine row that came from Kafka."""
    found: Counter[tuple] = Counter()
    for layer in ("bronze", "quarantine"):
        for source in SOURCES:
            rows = delta_rows(
                settings.table(layer, source), ["_kafka_topic", "_kafka_partition", "_kafka_offset"]
            )
            found.update({row: n for row, n in rows.items() if row[0] is not None})
    return found


def every_message(broker: KafkaBroker, settings) -> Counter[tuple]:
    """Every message the topics hold, once each: each partition's earliest offset to its end."""
    found: Counter[tuple] = Counter()
    for topic in (settings.kafka_topic(source) for source in SOURCES):
        earliest = broker.end_offsets(topic, earliest=True)
        for partition, end in broker.end_offsets(topic).items():
            found.update((topic, partition, o) for o in range(earliest[partition], end))
    return found


def assert_reconciled(spark, settings) -> None:
    for row in reconciliation_frame(spark, settings).collect():
        assert row["lines_read"] == row["bronze_rows"] + row["quarantine_rows"], row


@pytest.fixture(scope="module")
def ingested_twice(spark, tmp_path_factory, broker) -> tuple[object, Counter]:
    """Two rounds of publishing, each ingested in several micro-batches; the same lines
    also arrive as landing files. The settings, and the lines published per source."""
    root = tmp_path_factory.mktemp("once") / "data"
    settings = kafka_settings(root, broker, "once-", kafka_max_offsets_per_trigger=250)
    published: Counter = Counter()
    for seed in (31, 32):
        config = GeneratorConfig(events=600, seed=seed, days=2, malformed_rate=0.02, late_rate=0)
        summary = produce(spark, settings, config)
        published.update(summary.lines)
        generate(config, settings.landing)  # the same lines, as files
        results = {r.stage: r for r in run_bronze(spark, settings)}
        assert results["bronze/impressions[kafka]"].batches > 1  # several micro-batches
    return settings, published


def test_each_message_once_across_runs_and_partitions_as_files_would(spark, broker, ingested_twice):
    """Bronze and quarantine hold every message once, and both copies of each line alike."""
    settings, published = ingested_twice
    # Nothing new: a run reads nothing.
    again = {r.stage: r for r in run_bronze(spark, settings)}
    assert all(r.rows_in == 0 for r in again.values())

    assert messages_in_tables(settings) == every_message(broker, settings)
    for source in SOURCES:
        partitions = broker.end_offsets(settings.kafka_topic(source))
        assert sum(partitions.values()) == published[source]
        assert len([p for p, end in partitions.items() if end > 0]) > 1, "several partitions"
        fields = [*SOURCES[source].fields, "_kafka_topic"]
        bronze = delta_rows(settings.table("bronze", source), fields)
        quarantine = delta_rows(
            settings.table("quarantine", source), ["raw", "reason", "_kafka_topic"]
        )
        for rows in (bronze, quarantine):
            from_kafka = Counter({r[:-1]: n for r, n in rows.items() if r[-1] is not None})
            from_files = Counter({r[:-1]: n for r, n in rows.items() if r[-1] is None})
            assert from_kafka == from_files
        assert sum(n for r, n in quarantine.items() if r[-1]) > 0, "malformed messages"
        assert all(reason for _, reason, _ in quarantine), "each with its reason"
    assert_reconciled(spark, settings)

    # A field the catalog does not declare is kept, and said, from a message as from a line.
    line = json.dumps(json.loads(impression_line("extra", "01T10:00", "c")) | {"placement": 1})
    publish_to_partitions(broker, settings.kafka_topic("impressions"), [(0, line)])
    write_landing(settings, "extra.jsonl", [line])
    said = {r.stage: r.notices for r in run_bronze(spark, settings)}
    kept = delta_rows(
        settings.table("bronze", "impressions"), ["impression_id", "_extra_fields", "_kafka_topic"]
    )
    assert {(topic is None, extra) for key, extra, topic in kept if key == "extra"} == {
        (True, '{"placement":1}'),
        (False, '{"placement":1}'),
    }
    undeclared = "drift: undeclared field 'placement' (bigint) in 1 line(s), kept in bronze's "
    assert said["bronze/impressions"] == [
        f"{undeclared}_extra_fields; first at landing/impressions/extra.jsonl:1"
    ]
    (from_kafka,) = said["bronze/impressions[kafka]"]
    topic = settings.kafka_topic("impressions")
    assert from_kafka.startswith(f"{undeclared}_extra_fields; first at kafka:{topic}/0/")


def impression_line(impression_id: str, when: str, campaign: str, user: str = "u") -> str:
    return json.dumps(
        {
            "impression_id": impression_id,
            "ad_id": "ad-copies",
            "campaign_id": campaign,
            "user_id": user,
            "event_time": f"2026-11-{when}:00Z",
        }
    )


def write_landing(settings, name: str, lines: list[str]) -> None:
    (settings.landing / "impressions" / name).write_text("\n".join(lines) + "\n")


def publish_to_partitions(broker: KafkaBroker, topic: str, messages: list[tuple[int, str]]):
    """Each (partition, line) to that partition, in order."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
    try:
        for partition, line in messages:
            producer.send(topic, value=line.encode(), partition=partition)
        producer.flush()
    finally:
        producer.close()


def silver_rows_of(settings, *ids: str) -> dict[str, list[tuple]]:
    """Per id, its silver/impressions rows: (campaign_id, event_date)."""
    rows = delta_rows(
        settings.table("silver", "impressions"), ["impression_id", "campaign_id", "event_date"]
    )
    return {i: sorted(r[1:] for r in rows.elements() if r[0] == i) for i in ids}


@pytest.fixture(scope="module")
def copies_streamed(spark, ingested_twice, broker):
    """The streams run over the two rounds; then, in one run, copies of one id that differ:
    - two in one landing file, lines 1 and 12, the second in a split of its own whose
      bronze file is the larger (a stream reads larger files first);
    - two in Kafka, partition 1 (among 30 other messages) and partition 0 (alone);
    - a first copy below every watermark (dropped by the stream, kept in bronze) and a
      second on time, two days later, in a file whose name sorts after the first's.
    The ties are of 2026-11-04, the late id's copies of -01 and -03.
    Bronze reads the landing files in splits of 1 KiB. The settings."""
    settings, _ = ingested_twice
    outcome = run_pipeline(
        spark, settings, "kafka-streams", echo=lambda _: None, layers=DERIVED_LAYERS
    )
    assert outcome.status == "passed", outcome.error
    random_text = random.Random(7).choices("abcdefghijklmnopqrstuvwxyz0123456789", k=8000)
    padding = ["".join(random_text[n * 400 : (n + 1) * 400]) for n in range(20)]
    tie = [
        impression_line("tie", "04T01:00", "first line"),
        *(impression_line(f"tie-short-{n}", "04T01:00", "c") for n in range(5)),
        *(impression_line(f"tie-long-{n}", "04T01:00", "c", padding[n]) for n in range(14)),
    ]
    tie[11] = impression_line("tie", "04T02:00", "line 12", padding[19])
    write_landing(settings, "tie.jsonl", tie)
    write_landing(settings, "a-late.jsonl", [impression_line("late", "01T00:10", "late first")])
    write_landing(settings, "b-on-time.jsonl", [impression_line("late", "03T06:00", "on time")])
    publish_to_partitions(
        broker,
        settings.kafka_topic("impressions"),
        [
            *((1, impression_line(f"p1-{n}", "04T03:00", "c")) for n in range(15)),
            (1, impression_line("two-partitions", "04T04:00", "partition 1")),
            *((1, impression_line(f"p1-{n}", "04T03:00", "c")) for n in range(15, 30)),
            (0, impression_line("two-partitions", "04T05:00", "partition 0")),
        ],
    )
    splits = {"spark.sql.files.maxPartitionBytes": "1k", "spark.sql.files.openCostInBytes": "256"}
    for key, value in splits.items():
        spark.conf.set(key, value)
    said: list[str] = []
    try:
        outcome = run_pipeline(spark, settings, "copies-bronze", said.append, ("bronze",))
    finally:
        for key in splits:
            spark.conf.unset(key)
    # (a warning of the generated rounds' quarantined share may come with it)
    assert outcome.status.startswith("passed"), "\n".join(said)
    outcome = run_pipeline(spark, settings, "copies", echo=lambda _: None, layers=DERIVED_LAYERS)
    assert outcome.status.startswith("passed"), outcome.error
    return settings


def test_two_differing_copies_in_one_file_resolve_to_the_first_line(copies_streamed):
    """The stream keeps line 1's copy, as a batch does (parity below)."""
    assert silver_rows_of(copies_streamed, "tie") == {"tie": [("first line", dt.date(2026, 11, 4))]}


def test_copies_in_two_kafka_partitions_resolve_to_the_lower_partition(copies_streamed):
    """Read in one micro-batch (one ingestion time), partition 0 comes first."""
    found = silver_rows_of(copies_streamed, "two-partitions")
    assert found == {"two-partitions": [("partition 0", dt.date(2026, 11, 4))]}


def test_streams_of_kafka_fed_bronze_equal_a_batch_after_the_late_first_copies_are_backfilled(
    spark, copies_streamed
):
    """The stream kept the late id's second copy; `backfill --pending` moves the id to its
    first copy's date, and then every table equals a batch recomputation."""
    settings = copies_streamed
    late = {"late": [("on time", dt.date(2026, 11, 3))]}
    assert silver_rows_of(settings, "late") == late
    pending = pending_dates(spark, settings)
    assert pending == [dt.date(2026, 11, 1)]
    _, also = run_backfill(spark, settings, pending)
    assert also == [dt.date(2026, 11, 3)]
    assert silver_rows_of(settings, "late") == {"late": [("late first", dt.date(2026, 11, 1))]}
    # The backfill replaced 2026-11-01 and -03; the ties of -04 are as the stream wrote them.
    results, _ = run_parity(spark, settings, DateRange(dt.date(2026, 11, 1), dt.date(2026, 11, 4)))
    assert sum(r.live_rows for r in results) > 0
    assert [r.summary() for r in results if not r.equal] == []


@pytest.mark.full  # a crash storm; exactly-once across runs stays in CI
def test_killed_runs_lose_and_duplicate_no_message(spark, tmp_path, broker, figures):
    """`lakehouse run --layer bronze` SIGKILLed at random moments, twice, then run to the end."""
    root = tmp_path / "data"
    settings = kafka_settings(root, broker, "killed-")
    produce(spark, settings, GeneratorConfig(events=2000, seed=41, malformed_rate=0.01))
    env = {
        "LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
        "LAKEHOUSE_KAFKA_TOPIC_PREFIX": "killed-",
        "LAKEHOUSE_KAFKA_MAX_OFFSETS_PER_TRIGGER": "250",
    }
    args = ("run", "--layer", "bronze", "--data-root", str(root))
    rng = random.Random(41)
    log = tmp_path / "runs.log"
    kills = []
    for _ in range(2):
        moment = rng.uniform(6, 12)  # once Spark has started, while bronze runs
        process = start_cli(*args, env=env, output=log)
        deadline = time.monotonic() + moment
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        finished = process.poll() is not None
        kill_group(process)
        kills.append(f"{'finished before' if finished else 'killed at'} {moment:.1f} s")
    # The rerun: in this process, on the tests' session (the same code as the CLI's).
    rerun = settings.model_copy(update={"kafka_max_offsets_per_trigger": 250})
    list(run_bronze(spark, rerun))
    figures.append(f"kafka kills: {', '.join(kills)}")
    assert any(k.startswith("killed") for k in kills), kills
    assert messages_in_tables(settings) == every_message(broker, settings)
    assert_reconciled(spark, settings)


def test_expired_unread_messages_fail_the_run_with_what_to_do(spark, tmp_path, broker):
    settings = kafka_settings(tmp_path / "data", broker, "expired-")
    produce(spark, settings, GeneratorConfig(events=600, seed=61))
    list(run_bronze(spark, settings))
    produce(spark, settings, GeneratorConfig(events=600, seed=62))
    deleted = broker.delete_records(settings.kafka_topic("clicks"))  # retention, at once

    with pytest.raises(LakehouseError) as failure:
        list(run_bronze(spark, settings))
    message = str(failure.value)
    assert (
        "bronze/clicks[kafka]: messages of topic 'expired-clicks' were deleted by Kafka" in message
    )
    assert "LAKEHOUSE_KAFKA_FAIL_ON_DATA_LOSS=false" in message

    # The documented way on: accept the loss once; the messages Kafka still has are read.
    accepting = settings.model_copy(update={"kafka_fail_on_data_loss": False})
    list(run_bronze(spark, accepting))
    read = messages_in_tables(settings)
    assert sum(deleted.values()) > 0
    assert not any("clicks" in topic for topic, _, _ in every_message(broker, settings))
    assert all(read[message] == 1 for message in every_message(broker, settings))
    assert max(read.values()) == 1
    assert_reconciled(spark, settings)
    # And it stays healthy: the next run, with the default, reads on.
    list(run_bronze(spark, settings))


def test_a_lost_kafka_checkpoint_is_refused_then_recovered_without_duplicates(
    spark, tmp_path, broker
):
    settings = kafka_settings(tmp_path / "data", broker, "lost-")
    produce(spark, settings, GeneratorConfig(events=600, seed=81, malformed_rate=0.05))
    list(run_bronze(spark, settings))
    produce(spark, settings, GeneratorConfig(events=600, seed=82, malformed_rate=0.05))
    for source in SOURCES.values():
        shutil.rmtree(kafka_checkpoint(settings, source))

    with pytest.raises(CheckpointError, match="already hold micro-batches"):
        list(run_bronze(spark, settings))
    recover_bronze(spark, settings, echo=lambda line: None)
    results = {r.stage: r for r in run_bronze(spark, settings)}
    # Only the messages published after the loss are new; each is read once.
    assert results["bronze/clicks[kafka]"].rows_in > 0
    assert messages_in_tables(settings) == every_message(broker, settings)
    assert_reconciled(spark, settings)


def test_a_topic_created_again_is_refused_then_read_from_where_the_operator_chose(
    spark, tmp_path, broker
):
    """The new topics have more messages than the old ones had: Spark alone would read
    only those past the old offsets, and say nothing."""
    settings = kafka_settings(tmp_path / "data", broker, "recreated-")
    produce(spark, settings, GeneratorConfig(events=300, seed=91))
    list(run_bronze(spark, settings))
    before = messages_in_tables(settings)
    impressions, clicks = (settings.kafka_topic(s) for s in ("impressions", "clicks"))
    for topic in (impressions, clicks):
        broker.recreate_topic(topic)
    produce(spark, settings, GeneratorConfig(events=900, seed=92))

    with pytest.raises(LakehouseError) as refused:
        list(run_bronze(spark, settings))
    message = str(refused.value)
    assert message.startswith(
        f"bronze/impressions[kafka]: topic '{impressions}' is not the topic this stream read "
        "before: its id is "
    ), message
    for choice in ("earliest", "latest"):
        assert f"`lakehouse recover --kafka-source impressions --from {choice}`" in message
    assert messages_in_tables(settings) == before  # refused before reading anything

    recover_kafka_topic(spark, settings, SOURCES["impressions"], "earliest", echo=print)
    with pytest.raises(LakehouseError, match=rf"bronze/clicks\[kafka\]: topic '{clicks}' is not"):
        list(run_bronze(spark, settings))
    recover_kafka_topic(spark, settings, SOURCES["clicks"], "latest", echo=print)
    clicks_end = broker.end_offsets(clicks)
    produce(spark, settings, GeneratorConfig(events=300, seed=93))
    list(run_bronze(spark, settings))

    new = messages_in_tables(settings) - before
    assert max(new.values()) == 1
    for topic, expected in (
        (impressions, every_message(broker, settings)),  # the whole new topic
        (settings.kafka_topic("user_actions"), every_message(broker, settings) - before),
    ):
        assert {m for m in new if m[0] == topic} == {m for m in expected if m[0] == topic}
    # clicks: only what was published after the operator chose its end.
    later = {
        m for m in every_message(broker, settings) if m[0] == clicks and m[2] >= clicks_end[m[1]]
    }
    assert later and {m for m in new if m[0] == clicks} == later
    assert_reconciled(spark, settings)


def publish_in_transaction(spark, servers: str, topic: str, values: list[str], commit: bool):
    """One transaction of a transactional producer (kafka-clients, in the driver's JVM)."""
    jvm = spark._jvm
    properties = jvm.java.util.Properties()
    serializer = "org.apache.kafka.common.serialization.StringSerializer"
    for key, value in {
        "bootstrap.servers": servers,
        "transactional.id": f"test-{topic}-{commit}",
        "key.serializer": serializer,
        "value.serializer": serializer,
    }.items():
        properties.put(key, value)
    producer = jvm.org.apache.kafka.clients.producer.KafkaProducer(properties)
    try:
        producer.initTransactions()
        producer.beginTransaction()
        for value in values:
            producer.send(jvm.org.apache.kafka.clients.producer.ProducerRecord(topic, value))
        producer.flush()
        if commit:
            producer.commitTransaction()
        else:
            producer.abortTransaction()
    finally:
        producer.close()


def test_messages_of_an_aborted_transaction_are_never_ingested(spark, tmp_path, broker):
    settings = kafka_settings(tmp_path / "data", broker, "transactions-")
    topic = settings.kafka_topic("user_actions")

    def lines(tag: str) -> list[str]:
        return [
            json.dumps(
                {
                    "event_id": f"{tag}-{n}",
                    "user_id": f"u{n}",
                    "action": "view",
                    "event_time": f"2026-11-01T10:{n:02d}:00Z",
                }
            )
            for n in range(20)
        ]

    publish_in_transaction(spark, broker.bootstrap_servers, topic, lines("kept"), commit=True)
    publish_in_transaction(spark, broker.bootstrap_servers, topic, lines("aborted"), commit=False)
    publish_in_transaction(spark, broker.bootstrap_servers, topic, lines("after"), commit=True)
    results = {r.stage: r for r in run_bronze(spark, settings)}

    ids = delta_rows(settings.table("bronze", "user_actions"), ["event_id"])
    committed = {f"{tag}-{n}" for tag in ("kept", "after") for n in range(20)}
    assert {i for (i,) in ids} == committed
    assert max(ids.values()) == 1
    assert results["bronze/user_actions[kafka]"].rows_in == 40
    assert delta_rows(settings.table("quarantine", "user_actions")).total() == 0
    assert_reconciled(spark, settings)


def test_unreachable_brokers_fail_the_run_before_anything_is_read(spark, tmp_path):
    settings = settings_for(tmp_path / "data", kafka_bootstrap_servers=f"127.0.0.1:{free_port()}")
    generate(GeneratorConfig(events=100, seed=71), settings.landing)
    with pytest.raises(LakehouseError, match=r"no bootstrap server .* accepts connections"):
        next(run_bronze(spark, settings))
    assert not settings.table("bronze", "impressions").exists()


@pytest.mark.full
def test_messages_reach_bronze_on_an_s3_root_once_each(broker, s3_server, tmp_path):
    """`produce`, then two `run --layer bronze` on an s3a:// root: each message once, its
    offsets in a checkpoint in the bucket."""
    root = s3_server.root("s3a://lakehouse/kafka")
    settings = kafka_settings(root, broker, "s3-")
    env = {
        **s3_server.connection().environment(),
        "LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
        "LAKEHOUSE_KAFKA_TOPIC_PREFIX": "s3-",
        "LAKEHOUSE_REPORTS_DIR": str(tmp_path / "reports"),
    }
    args = ("--data-root", str(root))
    produced = run_cli("produce", "--events", "600", "--seed", "33", "--days", "1", *args, env=env)
    assert produced.returncode == 0, produced.stderr[-3000:]
    for _ in range(2):  # the second run has nothing new to read
        done = run_cli("run", "--layer", "bronze", *args, env=env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "bronze/impressions[kafka]      in          0" in done.stdout, done.stdout
    assert messages_in_tables(settings) == every_message(broker, settings)
    assert (root / "checkpoints" / "bronze_kafka" / "impressions" / "offsets").is_dir()
