"""The range backfill DAG (the form with dates) on a live Airflow: triggered while an
incremental run is in progress, it waits and then runs once; it names its range and
updates the Assets of what it rewrote; a malformed field is refused before a run exists,
a bad range fails at once in one line. `airflow dags test` checks the form's fields
before Spark starts; in the full tier it recomputes a range with its parity check."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.dags.live import (
    all_runs,
    asset_events,
    dags_test,
    reported_changes,
    task_instances,
    task_log,
    task_times,
)
from tests.helpers import TABLE_NAMES, delta_count, settings_for

pytestmark = pytest.mark.system


def test_a_backfill_triggered_during_an_incremental_run_waits_for_it_then_runs_once(
    live, incremental, range_backfill, figures
):
    assert range_backfill["state"] == "success", range_backfill
    layers = task_instances(live, "lakehouse_incremental", incremental["dag_run_id"])
    tasks = task_instances(live, "lakehouse_backfill_range", range_backfill["dag_run_id"])
    # Every task on its first try, and the backfill after the run's last layer.
    assert {t: (i["state"], i["try_number"]) for t, i in tasks.items()} == dict.fromkeys(
        ("check_request", "backfill", "validate", "parity"), ("success", 1)
    )
    assert tasks["backfill"]["start_date"] >= layers["gold"]["end_date"], (tasks, layers)
    figures.append(task_times(live, "lakehouse_backfill_range", range_backfill["dag_run_id"]))


def test_the_range_backfill_runs_alone_and_names_its_range(live, first_run):
    note = first_run.backfill["note"]
    assert note.splitlines()[0] == "backfill 2026-11-03..2026-11-03, layers silver, gold"
    assert "backfill: recomputed 2026-11-03..2026-11-03" in note, note
    assert "parity: 2026-11-03..2026-11-03: " in note and " tables agree" in note, note
    # It has no schedule (and so starts unpaused): its runs are the two triggered (the
    # refused form's included); the nightly backfill, unpaused, waits for its first
    # midnight: none at deployment.
    ours = {first_run.backfill["dag_run_id"], first_run.refused["dag_run_id"]}
    assert set(all_runs(live)["lakehouse_backfill_range"]) >= ours
    assert all_runs(live)["lakehouse_backfill"] == []


def test_the_range_backfill_updates_the_assets_of_what_it_rewrote(live, range_backfill):
    """Its validate task checks the tables the backfill rewrote and updates their Assets;
    bronze, not recomputed, gets no event."""
    run_id = range_backfill["dag_run_id"]
    tasks = task_instances(live, "lakehouse_backfill_range", run_id)
    assert tasks["validate"]["state"] == "success", (range_backfill, tasks)
    changed = reported_changes(live, "lakehouse_backfill_range", run_id, "validate")
    events = asset_events(live, "lakehouse_backfill_range", run_id)
    assert set(events) == set(changed)
    assert "lakehouse.silver.user_actions" in events and "lakehouse.gold.user_status" in events
    assert not any(name.startswith("lakehouse.bronze.") for name in events), events
    for name, event in events.items():
        assert event["source_task_id"] == "validate"
        assert event["extra"]["delta_version"] == changed[name]["version"], event


@pytest.mark.parametrize(
    ("form", "field"),
    [
        ({"start": "2026-11-01"}, "end"),
        ({"start": "2026-11-01", "end": "2026-11-01", "layers": ["bronze"]}, "layers"),
        ({"start": "2026-11-01", "end": "2026-11-01", "layers": 5}, "layers"),
        ({"start": "11/01/2026", "end": "2026-11-01"}, "start"),
    ],
    ids=["no-end", "unknown-layer", "layers-not-a-list", "not-a-date"],
)
def test_airflow_refuses_a_malformed_form_field_before_a_run_is_created(live, form, field):
    """Each field against its Param schema: Airflow's own check, before any run exists."""
    runs = "/api/v2/dags/lakehouse_backfill_range/dagRuns"
    before = live.request("GET", runs).json()["total_entries"]
    refused = live.request("POST", runs, {"logical_date": None, "conf": form})
    assert refused.status == 400, refused.body
    assert field in refused.json()["detail"], refused.body
    assert live.request("GET", runs).json()["total_entries"] == before
    # A refusal changes no DAG's pause state: every lakehouse DAG here starts unpaused
    # (the incremental one because it has no schedule here) and stays so.
    paused = {
        d["dag_id"]: d["is_paused"] for d in live.request("GET", "/api/v2/dags").json()["dags"]
    }
    assert not any(paused.values()), paused
    # Without credentials Airflow refuses, naming nothing.
    anonymous = live.request("POST", runs, {"logical_date": None, "conf": form}, token="")
    assert anonymous.status == 401, anonymous.body
    assert "lakehouse_backfill_range" not in anonymous.body


def test_a_bad_range_in_the_form_fails_at_once_in_one_line_while_another_backfill_waits(
    live, first_run
):
    """End before start, submitted through the form while a sound backfill waited for the
    incremental run: its check ran at once (it did not queue behind that run) and failed
    in one line, in the run's note, while the incremental run was still in progress."""
    refused, waiting = first_run.refused, first_run.backfill
    assert refused["state"] == "failed"
    reason = "check_request: refused: start 2026-11-05 is after end 2026-11-03"
    assert refused["note"] == reason, refused["note"]
    # Once, it waited for that backfill run to end, which waited for the incremental one.
    assert refused["end_date"] < first_run.run["end_date"], (refused, first_run.run)
    assert refused["end_date"] < waiting["end_date"], (refused, waiting)


@pytest.mark.parametrize(
    ("how", "form", "reason"),
    [
        (
            "cli",
            {"start": "2026-11-03", "end": "2026-11-01"},
            "start 2026-11-03 is after end 2026-11-01",
        ),
        (
            "form",
            {"start": "1900-01-01", "end": "2999-12-31"},
            "1900-01-01..2999-12-31 is 401,767 days, more than 366: check the dates",
        ),
    ],
    ids=["cli-end-before-start", "form-longer-than-366-days"],
)
def test_a_refused_request_is_one_line_in_the_log_and_the_run_note(
    live, range_backfill, how, form, reason
):
    """A range that each field of the form allows but not as a whole: the run is created
    (by `airflow dags trigger`, or the form through the REST API) and `check_request`
    refuses it, in one line, into the run's note too; no retry, no Spark job."""
    before = set(all_runs(live)["lakehouse_backfill_range"])
    if how == "cli":
        created = subprocess.run(
            [str(Path(sys.executable).with_name("airflow")), "dags", "trigger",
             "lakehouse_backfill_range", "-c", json.dumps(form)],
            env=live.airflow.env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr[-2000:]
    else:
        runs = "/api/v2/dags/lakehouse_backfill_range/dagRuns"
        created_run = live.request("POST", runs, {"logical_date": None, "conf": form})
        assert created_run.status == 200, created_run.body
    (run_id,) = set(all_runs(live)["lakehouse_backfill_range"]) - before
    done = live.wait_for("lakehouse_backfill_range", run_id)
    assert done["state"] == "failed"
    assert done["note"].startswith(f"check_request: refused: {reason}"), done["note"]
    tasks = task_instances(live, "lakehouse_backfill_range", run_id)
    assert (tasks["check_request"]["state"], tasks["check_request"]["try_number"]) == ("failed", 1)
    assert tasks["backfill"]["state"] in ("upstream_failed", None), tasks
    log = task_log(live, "lakehouse_backfill_range", run_id, "check_request", 1)
    assert reason in log and "Traceback" not in log, log[-2000:]
    paused = {
        d["dag_id"]: d["is_paused"] for d in live.request("GET", "/api/v2/dags").json()["dags"]
    }
    assert not any(paused.values()), paused


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"start": "2026-11-01"}, "Invalid input for param end"),
        ({"start": "2026-13-01", "end": "2026-11-01"}, "Invalid input for param start"),
    ],
    ids=["missing-end", "not-a-date"],
)
def test_range_backfill_rejects_a_bad_form_before_spark_starts(
    airflow_env, tmp_path, form, message
):
    """`airflow dags test -c` creates the run without the api-server: Airflow checks each
    field before any task runs. (`check_request`'s one-line refusal of a bad range: the
    tests above.)"""
    root = tmp_path / "untouched"
    done = dags_test(airflow_env, root, "lakehouse_backfill_range", "-c", json.dumps(form))
    log = done.stdout + done.stderr
    assert done.returncode != 0
    assert message in log, log[-3000:]
    assert "Spark-Submit cmd" not in log and "spark-submit" not in log
    assert not root.exists(), "no job ran, so nothing was written"


# -- the full tier ----

ON_THE_CLUSTER = ("2026-10-31", "2026-11-02")


@pytest.mark.full
def test_backfill_dag_recomputes_the_range_and_its_parity_check_agrees(
    airflow_env, ingested, tmp_path
):
    """The form's range and layers reach `lakehouse backfill` (the CLI's backfill is
    compared with streaming in test_parity.py; here the DAG's own parity task does it)."""
    by_dag = tmp_path / "dag"
    shutil.copytree(ingested, by_dag)
    form = json.dumps(
        {
            "start": ON_THE_CLUSTER[0],
            "end": ON_THE_CLUSTER[1],
            "layers": ["silver", "gold"],
        }
    )
    done = dags_test(airflow_env, by_dag, "lakehouse_backfill_range", "-c", form)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    log = done.stdout + done.stderr
    assert f"parity {ON_THE_CLUSTER[0]}..{ON_THE_CLUSTER[1]}: streaming and batch agree" in log
    before, after = settings_for(ingested), settings_for(by_dag)
    for layer, name in TABLE_NAMES:
        assert delta_count(after.table(layer, name)) > 0, f"{layer}/{name}"
    # The backfill replaced the range: new table versions, and the gate checked them.
    impressions = ("silver", "impressions")
    assert (
        DeltaTable(str(after.table(*impressions))).version()
        > DeltaTable(str(before.table(*impressions))).version()
    )
    # Bronze was not among the form's layers: untouched.
    for source in ("impressions", "clicks", "user_actions"):
        assert (
            DeltaTable(str(after.table("bronze", source))).version()
            == DeltaTable(str(before.table("bronze", source))).version()
        )
