"""The DAGs end to end with `airflow dags test`: real task runs, real spark-submit, real tables.

One Airflow home (SQLite, migrated once) and one generated data root for the
module: the incremental DAG ingests it, then the backfill DAG and the CLI
backfill each recompute a copy of it and must agree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from jobs.backfill import TABLES
from jobs.progress import CAUGHT_UP
from jobs.validate import last_passed_versions
from tests.helpers import REPO, delta_count, delta_rows, delta_table, run_cli, settings_for

pytestmark = pytest.mark.slow

VENV_BIN = Path(sys.executable).parent
RANGE = ("2026-10-31", "2026-11-02")


def airflow_environment(home: Path) -> dict[str, str]:
    """An Airflow home on SQLite, migrated, running the repository's DAGs on local[2]."""
    env = {
        **os.environ,
        # spark-submit comes from the virtual environment, as in `make airflow-up`.
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "LAKEHOUSE_SHUFFLE_PARTITIONS": "2",
    }
    subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True
    )
    return env


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory) -> dict[str, str]:
    return airflow_environment(tmp_path_factory.mktemp("airflow-home"))


def dags_test(env: dict[str, str], data_root: Path, dag_id: str, *args: str):
    return subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "test", dag_id, *args],
        env={**env, "LAKEHOUSE_DATA_ROOT": str(data_root)},
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def ingested(airflow_env, tmp_path_factory) -> Path:
    """A data root after one run of the incremental DAG."""
    root = tmp_path_factory.mktemp("incremental")
    generated = run_cli("generate", "--events", "2000", "--seed", "21", "--data-root", str(root))
    assert generated.returncode == 0, generated.stderr
    done = dags_test(airflow_env, root, "lakehouse_incremental")
    root.joinpath("dag.log").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return root


def test_incremental_dag_writes_every_contract_table_and_passes_its_gates(ingested):
    settings = settings_for(ingested)
    log = ingested.joinpath("dag.log").read_text()
    for task in ("bronze", "validate_bronze", "silver", "validate_silver", "gold", "validate_gold"):
        assert f"task_id={task} " in log or f"lakehouse_incremental.{task} " in log, task
    assert "state=success" in log
    for layer in ("bronze", "quarantine"):
        for source in ("impressions", "clicks", "user_actions"):
            assert DeltaTable(str(settings.table(layer, source))).version() >= 0
    for layer, name in TABLES:
        assert delta_count(settings.table(layer, name)) > 0, f"{layer}/{name}"
    # Three layer tasks ran their checks and three gates re-checked: six reports, all passed.
    runs = sorted((settings.reports / "runs").glob("*.json"))
    assert [json.loads(p.read_text())["status"] for p in runs] == ["passed"] * 6
    results = delta_table(settings.meta("dq_results")).to_pylist()
    assert len(results) >= 140 and all(r["success"] for r in results if r["severity"] == "critical")


def test_backfill_dag_gives_the_tables_the_cli_backfill_gives(airflow_env, ingested, tmp_path):
    by_dag, by_cli = tmp_path / "dag", tmp_path / "cli"
    for copy in (by_dag, by_cli):
        shutil.copytree(ingested, copy)
    form = json.dumps({"start": RANGE[0], "end": RANGE[1], "layers": ["silver", "gold"]})
    done = dags_test(airflow_env, by_dag, "lakehouse_backfill", "-c", form)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    log = done.stdout + done.stderr
    assert f"parity {RANGE[0]}..{RANGE[1]}: streaming and batch agree" in log
    cli = run_cli("backfill", "--start", RANGE[0], "--end", RANGE[1], "--data-root", str(by_cli))
    assert cli.returncode == 0, cli.stderr
    for layer, name in TABLES:
        dag_rows = delta_rows(settings_for(by_dag).table(layer, name))
        assert dag_rows == delta_rows(settings_for(by_cli).table(layer, name)), f"{layer}/{name}"
        assert sum(dag_rows.values()) > 0
    # The backfill replaced the range: new table versions, and the gate checked them.
    silver = settings_for(by_dag).table("silver", "impressions")
    assert (
        DeltaTable(str(silver)).version()
        > DeltaTable(str(ingested / silver.relative_to(by_dag))).version()
    )


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"start": "2026-11-03", "end": "2026-11-01"}, "start 2026-11-03 is after end 2026-11-01"),
        ({"start": "2026-11-01"}, "give both a start and an end date, or neither"),
        ({"start": "2026-13-01", "end": "2026-11-01"}, "Invalid input for param start"),
    ],
    ids=["start-after-end", "missing-end", "not-a-date"],
)
def test_backfill_dag_rejects_a_bad_form_before_spark_starts(airflow_env, tmp_path, form, message):
    root = tmp_path / "untouched"
    done = dags_test(airflow_env, root, "lakehouse_backfill", "-c", json.dumps(form))
    log = done.stdout + done.stderr
    assert done.returncode != 0
    assert message in log
    assert "Spark-Submit cmd" not in log and "spark-submit" not in log
    assert not root.exists(), "no job ran, so nothing was written"


def test_a_blocked_gate_fails_its_task_at_once_and_the_next_layer_never_runs(ingested, tmp_path):
    """A duplicate key edited into silver: validate_silver fails on its first try (no
    retry), gold is not submitted. The edit is undone afterwards; streams skip both
    edits (they rewrite files), so the root stays as the incremental DAG left it.

    In an Airflow database of its own: the tests before registered the same asset
    names with another data root's URIs, and Airflow refuses to run a task whose
    outlets are not the active assets of those names.
    """
    airflow_env = airflow_environment(tmp_path / "airflow-home")
    path = settings_for(ingested).table("silver", "impressions")
    impressions = DeltaTable(str(path))
    first, second = delta_table(path).slice(0, 2).to_pylist()
    impressions.update(
        predicate=f"impression_id = '{second['impression_id']}'",
        new_values={"impression_id": first["impression_id"], "ad_id": "ad-edited"},
    )
    try:
        # Only the gate runs; the layer tasks before it are marked done.
        skip = "^(bronze|validate_bronze|silver)$"
        done = dags_test(
            airflow_env, ingested, "lakehouse_incremental", "--mark-success-pattern", skip
        )
        log = done.stdout + done.stderr
        assert done.returncode != 0
        assert "blocking data-quality check failed (exit code 3); not retrying" in log, log[-4000:]
        assert "expect_column_values_to_be_unique(impression_id)" in log
        assert log.count("Spark-Submit cmd") == 1, "one attempt of validate_silver, nothing more"
        assert "up_for_retry" not in log.lower()
    finally:
        impressions.update(
            predicate="ad_id = 'ad-edited'",
            new_values={"impression_id": second["impression_id"], "ad_id": second["ad_id"]},
        )


def live_files(path: Path) -> set[str]:
    return {Path(uri).name for uri in DeltaTable(str(path)).file_uris()}


def test_maintenance_compacts_and_vacuums_without_changing_rows_or_reprocessing(
    airflow_env, ingested
):
    """Last in this module: it changes the ingested root (and runs its streams again)."""
    settings = settings_for(ingested)
    tables = [settings.table(layer, name) for layer, name in TABLES]
    rows_before = [delta_rows(path) for path in tables]
    files_before = sum(len(live_files(path)) for path in tables)

    done = dags_test(airflow_env, ingested, "lakehouse_maintenance")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert sum(len(live_files(path)) for path in tables) < files_before
    assert [delta_rows(path) for path in tables] == rows_before
    # Then the whole tables passed validation at their compacted versions, so
    # the next run's checks start after the compaction.
    passed = last_passed_versions(settings)
    for (layer, name), path in zip(TABLES, tables, strict=True):
        assert passed[f"{layer}/{name}"] == DeltaTable(str(path)).version(), name

    # Vacuum everything no longer referenced, and expire every report.
    vacuum = run_cli(
        "maintain", "--retain-hours", "0", "--keep-days", "0", "--data-root", str(ingested)
    )
    assert vacuum.returncode == 0, vacuum.stderr
    for path in tables:
        on_disk = {p.name for p in path.rglob("*.parquet")}
        assert on_disk == live_files(path), path
    assert [p.name for p in (settings.reports / "runs").iterdir()] == []

    # The streams skip the compaction commits: the next run reads nothing, changes nothing.
    again = run_cli("run", "--data-root", str(ingested))
    assert again.returncode == 0, again.stderr
    # Every silver and gold query starts (the compactions are new versions) and reads
    # nothing; the bronze streams, with no landing file they have not read, do not start.
    assert again.stdout.count(" in          0 ") == len(TABLES)
    assert again.stdout.count(CAUGHT_UP) == 3
    assert [delta_rows(path) for path in tables] == rows_before
