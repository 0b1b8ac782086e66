"""What a blocked run reports as not run, for the whole pipeline and for one layer (Airflow)."""

from __future__ import annotations

import datetime as dt

from jobs.catalog import LAYERS
from jobs.reports.outcome import RunOutcome
from jobs.reports.progress import StageResult

NOW = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)


def blocked_after_silver_impressions(layers: tuple[str, ...]) -> RunOutcome:
    outcome = RunOutcome("run-1", "run", NOW, layers=layers, blocked_at="silver")
    outcome.stages.append(StageResult("silver/impressions"))
    return outcome


def test_a_whole_run_blocked_in_silver_did_not_run_the_rest_of_silver_nor_gold():
    assert blocked_after_silver_impressions(LAYERS).not_run == [
        "silver/clicks",
        "silver/user_actions",
        "silver/ad_attribution",
        "silver/user_sessions",
        "gold",
    ]


def test_a_silver_task_blocked_names_only_its_own_layer():
    assert blocked_after_silver_impressions(("silver",)).not_run[-1] == "silver/user_sessions"


def test_a_passing_run_or_a_validation_has_nothing_not_run():
    assert RunOutcome("run-2", "run", NOW, layers=LAYERS).not_run == []
    validation = RunOutcome("v-1", "validate", NOW, blocked_at="silver")
    assert validation.not_run == []
