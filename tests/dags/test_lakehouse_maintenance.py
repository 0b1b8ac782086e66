"""The maintenance DAG: unpaused from the start on a live Airflow, with no "Unpause" box
in its trigger dialog; in the full tier it compacts and vacuums the cluster run's root
without changing a row or making the streams read again."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from lakehouse.quality.results import last_passed_versions
from lakehouse.runtime.progress import CAUGHT_UP
from tests.dags.live import all_runs, dags_test, needs, trigger_dialog
from tests.helpers import TABLE_NAMES, delta_rows, run_cli, settings_for

pytestmark = pytest.mark.system


def test_its_trigger_dialog_has_no_unpause_box_and_it_has_no_run_yet(live, browser):
    """As the nightly backfill's: unpaused from the start, no "Unpause" box."""
    needs(browser)
    text = trigger_dialog(browser, live, "lakehouse_maintenance")
    assert "Trigger Dag" in text and "Unpause" not in text, text
    assert all_runs(live)["lakehouse_maintenance"] == []


# -- the full tier ----


def live_files(path: Path) -> set[str]:
    return {Path(uri).name for uri in DeltaTable(str(path)).file_uris()}


@pytest.mark.full
def test_maintenance_compacts_and_vacuums_without_changing_rows_or_reprocessing(
    airflow_env, ingested
):
    """Last in this module: it changes the ingested root (and runs its streams again)."""
    settings = settings_for(ingested)
    tables = [settings.table(layer, name) for layer, name in TABLE_NAMES]
    rows_before = [delta_rows(path) for path in tables]
    files_before = sum(len(live_files(path)) for path in tables)

    done = dags_test(airflow_env, ingested, "lakehouse_maintenance")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert sum(len(live_files(path)) for path in tables) < files_before
    assert [delta_rows(path) for path in tables] == rows_before
    # Then the whole tables passed validation at their compacted versions, so
    # the next run's checks start after the compaction.
    passed = last_passed_versions(settings)
    for (layer, name), path in zip(TABLE_NAMES, tables, strict=True):
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
    # No stream starts: the compactions are new versions, but none a stream reads, and
    # the bronze streams have no landing file they have not read.
    assert again.stdout.count(CAUGHT_UP) == 3 + len(TABLE_NAMES), again.stdout
    assert [delta_rows(path) for path in tables] == rows_before
