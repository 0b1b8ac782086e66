"""The nightly backfill DAG on a live Airflow: unpaused from the start, with no run until
its first midnight; its trigger dialog offers no "Unpause" box."""

from __future__ import annotations

import pytest

from tests.dags.live import all_runs, needs, trigger_dialog

pytestmark = pytest.mark.system


def test_its_trigger_dialog_has_no_unpause_box_and_it_has_no_run_yet(live, browser):
    """Unpaused from the start, so the dialog offers no "Unpause" box (ticked by default,
    it also started the night's scheduled run: one click made two runs)."""
    needs(browser)
    text = trigger_dialog(browser, live, "lakehouse_backfill")
    assert "Trigger Dag" in text and "Unpause" not in text, text
    assert all_runs(live)["lakehouse_backfill"] == []
