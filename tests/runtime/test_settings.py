"""Settings: flag, then environment, then default."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from lakehouse.environment import markdown
from lakehouse.runtime.class_archive import archive_path
from lakehouse.runtime.settings import Settings
from lakehouse.runtime.spark import LOCAL_CHECKPOINT_FILES, session_conf, submit_conf
from tests.helpers import COMPILED, INTERPRETED, REPO

CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"


def test_defaults(monkeypatch, tmp_path):
    for name in (
        "LAKEHOUSE_DATA_ROOT",
        "LAKEHOUSE_SPARK_MASTER",
        "LAKEHOUSE_MAX_FILES_PER_TRIGGER",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    settings = Settings.load()
    assert settings.data_root == tmp_path / "data"
    assert settings.spark_master == "local[*]"
    assert settings.max_files_per_trigger == 1000
    assert settings.table("bronze", "clicks") == tmp_path / "data/lakehouse/bronze/clicks"
    assert settings.checkpoint("bronze", "clicks") == tmp_path / "data/checkpoints/bronze/clicks"


def test_environment_overrides_default_and_flag_overrides_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("LAKEHOUSE_DATA_ROOT", str(tmp_path / "env"))
    monkeypatch.setenv("LAKEHOUSE_SPARK_MASTER", "spark://host:7077")
    assert Settings.load().data_root == tmp_path / "env"
    assert Settings.load().spark_master == "spark://host:7077"
    flagged = Settings.load(data_root=tmp_path / "flag", spark_master="local[2]")
    assert flagged.data_root == tmp_path / "flag"
    assert flagged.spark_master == "local[2]"


@pytest.mark.parametrize("value", ["many", "0", "-3"])
def test_bad_numbers_in_the_environment_are_refused(monkeypatch, value):
    monkeypatch.setenv("LAKEHOUSE_MAX_FILES_PER_TRIGGER", value)
    with pytest.raises(ValueError, match="LAKEHOUSE_MAX_FILES_PER_TRIGGER"):
        Settings.load(data_root=Path("/tmp/x"))


@pytest.mark.parametrize(
    ("store", "provider"), [("rocksdb", "RocksDBStateStoreProvider"), ("hdfs", "HDFSBacked")]
)
def test_the_state_store_is_chosen_by_the_environment(monkeypatch, store, provider):
    monkeypatch.setenv("LAKEHOUSE_STATE_STORE", store)
    conf = session_conf(Settings.load(data_root=Path("/tmp/x")))
    assert provider in conf["spark.sql.streaming.stateStore.providerClass"]


def test_an_unknown_state_store_is_refused(monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_STATE_STORE", "memory")
    with pytest.raises(ValueError, match="LAKEHOUSE_STATE_STORE: input should be 'rocksdb'"):
        Settings.load(data_root=Path("/tmp/x"))


def test_the_driver_heap_is_2g_unless_the_environment_says_otherwise(monkeypatch):
    monkeypatch.delenv("LAKEHOUSE_DRIVER_MEMORY", raising=False)
    assert session_conf(Settings.load(data_root=Path("/tmp/x")))["spark.driver.memory"] == "2g"
    monkeypatch.setenv("LAKEHOUSE_DRIVER_MEMORY", "1536M")
    assert submit_conf(Settings.load(data_root=Path("/tmp/x")))["spark.driver.memory"] == "1536m"


@pytest.mark.parametrize("value", ["2", "2gb", "0g", "-1g", "lots", "1k", "100m", "99999999999t"])
def test_a_driver_heap_spark_cannot_read_is_refused(monkeypatch, value):
    monkeypatch.setenv("LAKEHOUSE_DRIVER_MEMORY", value)
    with pytest.raises(ValueError, match="LAKEHOUSE_DRIVER_MEMORY: must be a size such as 2g"):
        Settings.load(data_root=Path("/tmp/x"))


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[*,3]", "yarn"])
def test_master_urls_spark_takes_are_taken(monkeypatch, master):
    monkeypatch.setenv("LAKEHOUSE_SPARK_MASTER", master)
    assert Settings.load(data_root=Path("/tmp/x")).spark_master == master
    assert Settings.load(data_root=Path("/tmp/x"), spark_master=master).spark_master == master


@pytest.mark.parametrize("master", ["bogus", "local[0]", "local[x]", "spark://host", "local[*] x"])
def test_a_master_url_spark_cannot_take_is_refused_naming_where_it_came_from(monkeypatch, master):
    monkeypatch.setenv("LAKEHOUSE_SPARK_MASTER", master)
    with pytest.raises(ValueError, match=r"^LAKEHOUSE_SPARK_MASTER: must be a master URL Spark"):
        Settings.load(data_root=Path("/tmp/x"))
    monkeypatch.delenv("LAKEHOUSE_SPARK_MASTER")
    with pytest.raises(ValueError, match=r"^--spark-master: must be a master URL Spark takes"):
        Settings.load(data_root=Path("/tmp/x"), spark_master=master)


def test_a_future_tolerance_beyond_a_hundred_years_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_FUTURE_TOLERANCE_HOURS", str(10**15))
    with pytest.raises(ValueError, match=r"^LAKEHOUSE_FUTURE_TOLERANCE_HOURS: input should be"):
        Settings.load(data_root=Path("/tmp/x"))


@pytest.mark.parametrize(
    "uri", ["file:///tmp/x/root", "file:/tmp/x/root", "file://localhost/tmp/x/root"]
)
def test_a_file_uri_data_root_is_its_local_folder(uri):
    assert Settings.load(data_root=uri).data_root == Path("/tmp/x/root")


@pytest.mark.parametrize("uri", ["file://host/x", "file:x"])
def test_a_file_uri_of_another_host_or_a_relative_path_is_refused(uri):
    with pytest.raises(ValueError, match="a file: URI must name a local absolute path"):
        Settings.load(data_root=uri)


@pytest.mark.parametrize("name", ["..", "../gold", "/etc", "a/b", "", ".", "clicks\x00", "x y"])
def test_names_that_could_leave_the_data_root_are_refused(tmp_path, name):
    settings = Settings.load(data_root=tmp_path)
    for build in (
        lambda: settings.table("bronze", name),
        lambda: settings.table(name, "clicks"),
        lambda: settings.meta(name),
        lambda: settings.checkpoint("silver", name),
    ):
        with pytest.raises(ValueError, match="not a valid layer, table or checkpoint name"):
            build()


def test_kafka_is_off_unless_brokers_are_named(monkeypatch, tmp_path):
    for name in (
        "BOOTSTRAP_SERVERS",
        "TOPIC_PREFIX",
        "MAX_OFFSETS_PER_TRIGGER",
        "FAIL_ON_DATA_LOSS",
    ):
        monkeypatch.delenv(f"LAKEHOUSE_KAFKA_{name}", raising=False)
    off = Settings.load(data_root=tmp_path)
    assert off.kafka_bootstrap_servers is None
    assert off.kafka_topic("clicks") == "clicks"
    assert (off.kafka_max_offsets_per_trigger, off.kafka_fail_on_data_loss) == (1_000_000, True)
    monkeypatch.setenv("LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS", "env:9092")
    monkeypatch.setenv("LAKEHOUSE_KAFKA_TOPIC_PREFIX", "prod.ads-")
    monkeypatch.setenv("LAKEHOUSE_KAFKA_FAIL_ON_DATA_LOSS", "False")
    on = Settings.load(data_root=tmp_path)
    assert on.kafka_bootstrap_servers == "env:9092"
    assert on.kafka_topic("clicks") == "prod.ads-clicks"
    assert on.kafka_fail_on_data_loss is False
    # The flag wins; an empty flag (an unset Airflow Variable) leaves the environment's.
    assert Settings.load(tmp_path, kafka_bootstrap_servers="flag:9092").kafka_bootstrap_servers == (
        "flag:9092"
    )
    assert Settings.load(tmp_path, kafka_bootstrap_servers="").kafka_bootstrap_servers == "env:9092"


@pytest.mark.parametrize(
    ("name", "value"),
    [("TOPIC_PREFIX", "a/b"), ("TOPIC_PREFIX", "has space"), ("FAIL_ON_DATA_LOSS", "maybe")],
)
def test_bad_kafka_settings_are_refused(monkeypatch, tmp_path, name, value):
    monkeypatch.setenv(f"LAKEHOUSE_KAFKA_{name}", value)
    with pytest.raises(ValueError, match=f"LAKEHOUSE_KAFKA_{name}"):
        Settings.load(data_root=tmp_path)


def test_only_the_tests_jvms_evaluate_plans_without_generated_code(tmp_path):
    """Commands and Airflow tasks generate code for their plans (without it a million
    events' bronze took three times as long); the JVMs the tests start, of a few hundred
    rows a run, are told otherwise through SPARK_SUBMIT_OPTS (tests.helpers.INTERPRETED).
    Every session keeps more compiled classes than Spark's default."""
    settings = Settings.load(data_root=tmp_path)
    for conf in (
        session_conf(settings),
        session_conf(settings, for_tests=True),
        submit_conf(settings),
    ):
        assert "spark.sql.codegen.factoryMode" not in conf
    assert INTERPRETED in os.environ["SPARK_SUBMIT_OPTS"].split()
    assert INTERPRETED not in COMPILED["SPARK_SUBMIT_OPTS"]
    assert session_conf(settings)["spark.sql.codegen.cache.maxEntries"] == "2000"


def test_the_tests_session_interprets_plans_and_maps_the_class_archive(spark):
    """What the tests give every JVM they start reaches it (the commands they start get
    it through the same variable), and the JVM still maps the class archive that `make
    setup` records, as a command's or an Airflow task's driver does: its class path is
    theirs (a SPARK_CONF_DIR of the tests' own changed it, and no JVM of the tests used
    the archive)."""
    assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
    archive = archive_path()
    if not archive.is_file():
        pytest.skip(f"no class archive recorded at {archive} (`make setup` records it)")
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    mapped = {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()}
    assert str(archive) in mapped


def test_local_checkpoints_are_written_without_starting_a_process_per_rename(tmp_path):
    """A local data root's checkpoints go through Hadoop's FileSystem (its FileContext
    starts `readlink` twice per rename); an object store keeps Spark's default."""
    local = session_conf(Settings.load(data_root=tmp_path))
    assert local[CHECKPOINT_FILE_MANAGER] == LOCAL_CHECKPOINT_FILES
    s3 = session_conf(Settings.load(data_root="s3a://bucket/data"))
    assert CHECKPOINT_FILE_MANAGER not in s3


def test_local_airflow_takes_the_data_root_make_run_takes(monkeypatch, tmp_path):
    """`LAKEHOUSE_DATA_ROOT=... make airflow-up` once ran on the repository's data/."""
    from dev.local_airflow import LocalAirflow, data_root
    from tests.helpers import REPO

    monkeypatch.delenv("LAKEHOUSE_DATA_ROOT", raising=False)
    assert data_root(None) == str(REPO / "data")
    monkeypatch.setenv("LAKEHOUSE_DATA_ROOT", str(tmp_path / "x" / ".." / "root"))
    assert data_root(None) == str(tmp_path / "root")
    assert data_root(str(tmp_path / "flag")) == str(tmp_path / "flag")  # the flag wins
    monkeypatch.setenv("LAKEHOUSE_DATA_ROOT", "s3a://bucket/prefix")
    assert data_root(None) == "s3a://bucket/prefix"
    # Every Airflow process, and so every task, gets it.
    airflow = LocalAirflow(tmp_path / "home", data_root=data_root(None))
    assert airflow.env()["LAKEHOUSE_DATA_ROOT"] == "s3a://bucket/prefix"
    # And no schedule for the incremental DAG unless one is asked for.
    assert airflow.env()["LAKEHOUSE_INCREMENTAL_SCHEDULE"] == "none"


def test_local_airflow_says_when_the_roots_landing_folders_hold_no_file(tmp_path):
    """A new root's run writes empty tables: `make airflow-up` names the way to samples."""
    from dev.local_airflow import empty_landing_hint

    root = tmp_path / "root"
    (root / "landing" / "clicks").mkdir(parents=True)
    hint = empty_landing_hint(root)
    assert hint is not None and "holds no file" in hint and "lakehouse generate" in hint
    (root / "landing" / "clicks" / "clicks-1.jsonl").write_text("{}\n")
    assert empty_landing_hint(root) is None
    assert empty_landing_hint("s3a://bucket/prefix") is None


def test_the_docs_list_every_variable_as_the_declaration_says():
    """docs/reference.md's list is `python -m lakehouse.environment`'s output."""
    text = (REPO / "docs" / "reference.md").read_text()
    start = text.index("<!-- generated from lakehouse/environment.py")
    block = text[text.index("\n", start) + 1 : text.index("<!-- end of the generated list -->")]
    assert block.strip() == markdown().strip(), "run python -m lakehouse.environment"


def test_only_the_declaration_reads_the_lakehouse_variables():
    for module in (REPO / "src" / "lakehouse").rglob("*.py"):
        if module.name == "environment.py":
            continue
        text = module.read_text()
        assert not re.search(r"environ(\.get)?\(?\[?[\"']LAKEHOUSE_", text), module
        assert "getenv(" not in text, module
