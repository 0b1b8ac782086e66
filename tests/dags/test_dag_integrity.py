"""Every DAG imports cleanly, cheaply and without side effects, and is wired as documented."""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import json
import subprocess
import sys
import types
from pathlib import Path

import jinja2
import pytest
from airflow.dag_processing.dagbag import DagBag
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import CronTriggerTimetable
from airflow.sdk.definitions.param import ParamsDict
from airflow.sdk.exceptions import ParamValidationError

from lakehouse.catalog import LAYERS, SOURCES
from lakehouse.cli import build_parser
from lakehouse.orchestration import ENTRY_POINT, OWNER, SPARK_CONN_ID, WRITERS_POOL, layer_tables
from lakehouse.orchestration.operators import LakehouseSubmitOperator
from lakehouse.quality.derived import DERIVED_CHECKS
from lakehouse.quality.validate import LAYER_CHECKS
from lakehouse.runtime.settings import Settings, jars_folder
from lakehouse.runtime.spark import spark_jars
from tests.helpers import REPO

DAG_FILES = sorted((REPO / "dags").glob("*.py"))
DAG_IDS = [
    "lakehouse_backfill",
    "lakehouse_backfill_range",
    "lakehouse_incremental",
    "lakehouse_maintenance",
]
BACKFILL_DAGS = ["lakehouse_backfill", "lakehouse_backfill_range"]
# Modules that cost seconds to import or touch files: never at DAG parse time. The DAGs
# import the Airflow layer, which takes its task and asset lists from the catalog (plain
# Python) and the submit settings from the runtime layer, and nothing that computes.
HEAVY = (
    "pyspark",
    "great_expectations",
    "deltalake",
    "pandas",
    "pyarrow",
    "lakehouse.transforms",
    "lakehouse.quality",
    "lakehouse.reports",
    "lakehouse.drivers",
    "lakehouse.samples",
    "lakehouse.cli",
)

IMPORT_PROBE = """
import importlib.util, json, os, sys, time
import airflow.sdk  # Airflow's own import cost is not the DAG's
before = set(sys.modules)
started = time.perf_counter()
spec = importlib.util.spec_from_file_location("dag_under_test", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
print(json.dumps({
    "seconds": time.perf_counter() - started,
    "modules": sorted(set(sys.modules) - before),
}))
"""


@pytest.fixture(scope="module")
def bag(tmp_path_factory) -> DagBag:
    root = tmp_path_factory.mktemp("dag-data-root")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAKEHOUSE_DATA_ROOT", str(root))
        bag = DagBag(dag_folder=str(REPO / "dags"))
    bag.data_root = root  # type: ignore[attr-defined]
    return bag


def files_under(folder: Path) -> set[Path]:
    return set(folder.rglob("*"))


@pytest.mark.system
@pytest.mark.parametrize("dag_file", DAG_FILES, ids=lambda path: path.stem)
def test_dag_file_imports_fast_without_heavy_modules_or_side_effects(dag_file, tmp_path):
    cwd, data_root = tmp_path / "cwd", tmp_path / "data"
    cwd.mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "AIRFLOW_HOME": str(tmp_path / "home"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "LAKEHOUSE_DATA_ROOT": str(data_root),
    }
    subprocess.run([sys.executable, "-c", "import airflow.sdk"], env=env, cwd=cwd, check=True)
    before = files_under(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, str(dag_file)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    heavy = [m for m in probe["modules"] if any(m == h or m.startswith(f"{h}.") for h in HEAVY)]
    assert heavy == [], f"{dag_file.name} imports {heavy} at parse time"
    assert files_under(tmp_path) == before, "importing a DAG must not create files"
    assert not data_root.exists()
    # Airflow gives up on a DAG file after dagbag_import_timeout (30 s).
    assert probe["seconds"] < 30


def test_dag_folder_has_no_import_errors_and_exactly_the_documented_dags(bag):
    assert bag.import_errors == {}
    assert sorted(bag.dags) == DAG_IDS


@pytest.mark.parametrize("dag_id", DAG_IDS)
def test_dag_has_owner_tags_docs_retries_and_one_active_run(bag, dag_id):
    dag = bag.dags[dag_id]
    assert "lakehouse" in dag.tags and len(dag.tags) >= 2
    assert dag.doc_md and dag.description
    assert dag.catchup is False
    # The range backfill's runs do not queue whole behind each other, so each form is
    # checked at once (its Spark jobs take turns in the pool: see below).
    if dag_id == "lakehouse_backfill_range":
        assert dag.max_active_runs > 1
    else:
        assert dag.max_active_runs == 1
    for task in dag.tasks:
        assert task.owner == OWNER, task.task_id
        if isinstance(task, SparkSubmitOperator):
            # A Spark job may die of transient causes; its writes are idempotent.
            assert task.retries >= 1 and task.retry_exponential_backoff, task.task_id
        else:
            # Only the input check does not retry: bad input does not heal.
            assert task.task_id == "check_request" and task.retries == 0


@pytest.mark.parametrize("dag_id", DAG_IDS)
def test_spark_tasks_submit_the_cli_entry_point_through_the_spark_connection(bag, dag_id):
    spark_tasks = [t for t in bag.dags[dag_id].tasks if isinstance(t, SparkSubmitOperator)]
    assert spark_tasks
    for task in spark_tasks:
        # Knows the CLI's exit codes: a blocked quality gate is not retried.
        assert isinstance(task, LakehouseSubmitOperator), task.task_id
        assert task.application == str(ENTRY_POINT)
        assert task._conn_id == SPARK_CONN_ID
        assert task.env_vars["LAKEHOUSE_DATA_ROOT"] == str(bag.data_root)
        assert "log4j2.properties" in task.conf["spark.driver.extraJavaOptions"]
        assert task.conf["spark.driver.memory"] == "2g"
        if isinstance(task.application_args, list):
            build_parser().parse_args(task.application_args)  # a command the CLI accepts


KAFKA_VARIABLE = "{{ var.value.get('lakehouse_kafka_bootstrap_servers', '') }}"


def test_incremental_dag_runs_each_layer_with_its_gate_every_15_minutes(bag):
    dag = bag.dags["lakehouse_incremental"]
    assert dag.timetable.expression == "*/15 * * * *"
    assert set(dag.task_ids) == set(LAYERS)
    for upstream, downstream in itertools.pairwise(LAYERS):
        assert dag.get_task(upstream).downstream_task_ids == {downstream}
    for layer in LAYERS:
        stage = dag.get_task(layer)
        kafka = ["--kafka-bootstrap-servers", KAFKA_VARIABLE] if layer == "bronze" else []
        assert stage.application_args == ["run", "--layer", layer, *kafka]
        assert stage.pool == WRITERS_POOL
        # The run checks every table it writes (exit 3 on a blocking failure):
        # Assets change only when it passed, so data-aware DAGs see validated tables only.
        uris = {asset.uri for asset in stage.outlets}
        assert uris == {f"file://{bag.data_root}/lakehouse/{t}" for t in layer_tables(layer)}
    # Each layer's inlets are the tables of the layer before it that it reads, so the
    # Assets chain bronze -> silver -> gold.
    read = {layer: {a.extra["table"] for a in dag.get_task(layer).inlets} for layer in LAYERS}
    assert read == {
        "bronze": set(),
        "silver": {f"bronze/{source}" for source in SOURCES},
        "gold": {"silver/ad_attribution", "silver/user_actions"},
    }


def test_bronze_ingests_kafka_when_the_variable_names_brokers(bag, monkeypatch):
    """The bronze task's arguments, rendered by Airflow's Jinja with and without the
    Variable, are the Kafka setting the CLI reads (empty: the environment's, if any)."""
    template = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)  # noqa: S701 (arguments, not HTML)
    task = bag.dags["lakehouse_incremental"].get_task("bronze")
    for variables, expected in (
        ({}, None),
        ({"lakehouse_kafka_bootstrap_servers": "k:9092"}, "k:9092"),
    ):
        value = types.SimpleNamespace(get=lambda key, default, v=variables: v.get(key, default))
        args = [
            template.from_string(a).render(var=types.SimpleNamespace(value=value))
            for a in task.application_args
        ]
        parsed = build_parser().parse_args(args)
        monkeypatch.delenv("LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS", raising=False)
        settings = Settings.load(
            data_root=bag.data_root, kafka_bootstrap_servers=parsed.kafka_bootstrap_servers
        )
        assert settings.kafka_bootstrap_servers == expected


def test_asset_tables_are_the_tables_the_checks_know():
    for layer in LAYERS:
        assert set(layer_tables(layer)) == set(LAYER_CHECKS[layer]) - DERIVED_CHECKS


@pytest.mark.parametrize("dag_id", BACKFILL_DAGS)
def test_backfill_dags_check_the_request_before_the_spark_jobs(bag, dag_id):
    dag = bag.dags[dag_id]
    # Every Spark job reads its arguments from the checked request, so runs after it.
    assert dag.get_task("check_request").downstream_task_ids == {"backfill", "validate", "parity"}
    assert dag.get_task("backfill").downstream_task_ids == {"validate"}
    assert dag.get_task("validate").downstream_task_ids == {"parity"}
    for task in ("backfill", "validate", "parity"):
        assert dag.get_task(task).pool == WRITERS_POOL, task
    # Each waits out the incremental run: backfill and parity refuse (exit 4) while the
    # streams have rows to write, and validate would check tables mid-write.
    for task_id in ("backfill", "validate", "parity"):
        assert dag.get_task(task_id).waits_for == "lakehouse_incremental", task_id
    # The backfill reads bronze; its validate task updates the Assets of what it rewrote.
    assert {a.extra["table"] for a in dag.get_task("backfill").inlets} == {
        f"bronze/{source}" for source in SOURCES
    }
    assert dag.get_task("backfill").outlets == []
    assert {a.extra["table"] for a in dag.get_task("validate").outlets} == {
        *layer_tables("silver"),
        *layer_tables("gold"),
    }


@pytest.mark.parametrize("dag_id", ["lakehouse_backfill", "lakehouse_maintenance"])
def test_a_nightly_dag_runs_once_deployed_from_its_next_night_and_has_no_unpause_box(bag, dag_id):
    dag = bag.dags[dag_id]
    # Unpaused: the trigger dialog shows no "Unpause" box, whose ticking also started
    # the night's scheduled run besides the click's.
    assert dag.is_paused_upon_creation is False
    # No start date: the first scheduled run is the next night (below).
    assert dag.start_date is None
    assert isinstance(dag.timetable, CronTriggerTimetable)


@pytest.mark.parametrize("dag_id", ["lakehouse_backfill", "lakehouse_maintenance"])
@pytest.mark.parametrize("hours_after", [0.02, 0.3, 2.3, 12.0, 23.9])
def test_a_nightly_dag_deployed_at_any_hour_first_runs_the_next_night(
    bag, dag_id, hours_after, monkeypatch
):
    """The scheduler's own timetable (serialized and read back, as the scheduler reads it), asked
    for the first run of a DAG deployed `hours_after` its last scheduled time.

    Airflow's cron timetable runs that last time at once when the DAG arrives within a
    tenth of the interval after it (2.4 hours for a nightly DAG) unless `run_immediately`
    is a time span; `False` does not turn it off. A live Airflow started at 00:19 UTC
    ran the nightly backfill at deployment."""
    from airflow.serialization.decoders import decode_timetable
    from airflow.serialization.encoders import encode_timetable
    from airflow.timetables import trigger
    from airflow.timetables.base import TimeRestriction

    timetable = decode_timetable(encode_timetable(bag.dags[dag_id].timetable))
    hour = int(bag.dags[dag_id].timetable.expression.split()[1])
    night = dt.datetime(2026, 12, 7, hour, tzinfo=dt.UTC)
    deployed = night + dt.timedelta(hours=hours_after)
    monkeypatch.setattr(trigger, "utcnow", lambda: deployed)
    first = timetable.next_dagrun_info(
        last_automated_data_interval=None,
        restriction=TimeRestriction(earliest=None, latest=None, catchup=False),
    )
    assert first is not None and first.run_after == night + dt.timedelta(days=1), first


def test_the_nightly_backfill_has_whole_day_intervals_and_no_form(bag):
    dag = bag.dags["lakehouse_backfill"]
    # Each run at midnight covers the day that ended: what `airflow backfill create`
    # hands each run as its data interval.
    assert dag.timetable.expression == "0 0 * * *" and dag.timetable.timezone == "UTC"
    assert dag.timetable.interval == dt.timedelta(days=1)
    assert dict(dag.params) == {}


def test_the_range_backfill_is_never_scheduled(bag):
    """Triggering it (which unpauses it) starts that one run and nothing else."""
    dag = bag.dags["lakehouse_backfill_range"]
    assert type(dag.timetable).__name__ == "NullTimetable"
    assert not dag.timetable.can_be_scheduled


def params_with(dag_params: ParamsDict, **values: object) -> None:
    params = copy.deepcopy(dag_params)
    for name, value in values.items():
        params[name] = value
    params.validate()


def test_range_form_accepts_dates_and_rejects_what_the_ui_would(bag):
    form = bag.dags["lakehouse_backfill_range"].params
    params_with(form, start="2026-11-01", end="2026-11-02", layers=["gold"])
    params_with(form, start="2026-11-01", end="2026-11-02")  # layers: both by default
    for bad in (
        {},  # no dates: both are required
        {"start": "2026-11-01"},
        {"start": "2026-13-01", "end": "2026-11-02"},
        {"start": "2026-11-01", "end": "1 Nov 2026"},
        {"start": "2026-11-01", "end": "2026-11-02", "layers": ["bronze"]},
        {"start": "2026-11-01", "end": "2026-11-02", "layers": []},
        {"start": "2026-11-01", "end": "2026-11-02", "layers": ["gold", "gold"]},
    ):
        with pytest.raises(ParamValidationError):
            params_with(form, **bad)
    # The layers are a choice of values (a multi-select in the form), not free text.
    layers = form.get_param("layers").schema
    assert layers["examples"] == layers["items"]["enum"] == ["silver", "gold"]


def test_maintenance_dag_runs_nightly_in_the_writers_pool_then_validates_whole_tables(bag):
    dag = bag.dags["lakehouse_maintenance"]
    assert dag.timetable.expression == "0 3 * * *"
    maintain, validate = dag.get_task("maintain"), dag.get_task("validate")
    assert len(dag.tasks) == 2
    assert maintain.application_args[0] == "maintain"
    # No --new-rows and no --layer: every table of every layer, whole.
    assert validate.application_args == ["validate"]
    assert maintain.pool == validate.pool == WRITERS_POOL
    assert validate.upstream_task_ids == {"maintain"}


def test_on_an_s3_root_the_tasks_carry_the_s3_connector_and_keep_reports_local(monkeypatch):
    """The same DAGs parsed with LAKEHOUSE_DATA_ROOT=s3a://...: assets are s3:// URIs,
    spark-submit gets Spark's S3 connector, reports go to the local reports folder."""
    monkeypatch.setenv("LAKEHOUSE_DATA_ROOT", "s3a://lakehouse/data")
    monkeypatch.delenv("LAKEHOUSE_REPORTS_DIR", raising=False)
    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert not bag.import_errors
    dag = bag.dags["lakehouse_incremental"]
    gate = dag.get_task("gold")
    assert {asset.uri for asset in gate.outlets} == {
        f"s3://lakehouse/data/lakehouse/{t}" for t in layer_tables("gold")
    }
    task = dag.get_task("gold")
    assert task.env_vars["LAKEHOUSE_DATA_ROOT"] == "s3a://lakehouse/data"
    assert task.env_vars["LAKEHOUSE_REPORTS_DIR"] == str(Path("reports").resolve())
    assert task.object_store
    jars = spark_jars(jars_folder(), object_store=task.object_store, fetch=False)
    assert any(jar.name.startswith("hadoop-aws-") for jar in jars)
