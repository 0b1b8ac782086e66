"""Deleted, truncated, stale and damaged checkpoints: a clear error, then the documented recovery.

In every CI run: a run on a copy of the CLI-streamed root refuses a deleted
checkpoint before it writes anything. In `make test-full`, one data root goes
through the cases in order (a data root cannot be copied and streamed again:
Spark's file-source checkpoints hold absolute paths). Each case damages a
checkpoint, shows that `lakehouse run` refuses with the checkpoint's path and
the recovery command and changes no table, then runs `lakehouse recover` and
shows the next runs pass every check with nothing lost or duplicated.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from jobs.backfill import TABLES
from jobs.contract import SOURCES
from jobs.generate import GeneratorConfig, generate
from tests.helpers import delta_rows, landing_lines, run_cli, settings_for

pytestmark = pytest.mark.slow

NO_LATE = {"late_rate": 0.0, "days": 2, "file_minutes": 180}


def snapshot(root: Path) -> dict[str, Counter]:
    settings = settings_for(root)
    tables = {f"{layer}/{name}": settings.table(layer, name) for layer, name in TABLES}
    for source in SOURCES:
        for layer in ("bronze", "quarantine"):
            tables[f"{layer}/{source}"] = settings.table(layer, source)
    return {name: delta_rows(path) for name, path in tables.items()}


def assert_bronze_holds_every_line_once(root: Path) -> None:
    settings = settings_for(root)
    for source in SOURCES:
        lines = len(landing_lines(root / "landing", source))
        bronze = delta_rows(settings.table("bronze", source), ["_source_file"]).total()
        quarantine = delta_rows(settings.table("quarantine", source), ["_source_file"]).total()
        assert bronze + quarantine == lines, source


def refused(root: Path, damaged: Path, problem: str, layer: str) -> None:
    before = snapshot(root)
    done = run_cli("run", "--data-root", str(root))
    assert done.returncode == 1, done.stdout
    assert f"checkpoint {damaged}" in done.stderr, done.stderr
    assert problem in done.stderr
    assert f"lakehouse recover --layer {layer}" in done.stderr
    assert "Traceback" not in done.stderr
    assert snapshot(root) == before, "a refused run changed a table"


def recover(root: Path, layer: str) -> None:
    done = run_cli("recover", "--layer", layer, "--data-root", str(root))
    assert done.returncode == 0, done.stderr
    assert f"recovered {layer}" in done.stdout


def passes(root: Path) -> str:
    done = run_cli("run", "--data-root", str(root))
    assert done.returncode == 0, done.stderr
    assert "run passed" in done.stdout
    return done.stdout


def test_a_deleted_checkpoint_is_refused_before_anything_is_written(streamed_root, tmp_path):
    """The first stream's checkpoint, so the refusal comes before any stream could
    start (a copied root must not stream: its checkpoints name the original files)."""
    root = tmp_path / "data"
    shutil.copytree(streamed_root, root)
    checkpoint = settings_for(root).checkpoint("bronze", "impressions")
    shutil.rmtree(checkpoint)
    refused(root, checkpoint, "it is missing", "bronze")


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("recovery") / "data"
    generate(GeneratorConfig(events=1500, seed=21, **NO_LATE), root / "landing")
    passes(root)
    return root


@pytest.mark.full
def test_damaged_checkpoints_are_refused_then_rebuilt_layer_by_layer(root):
    """A truncated gold offsets file, then a deleted silver checkpoint: each run refuses at
    the first damaged one; one `recover` rebuilds both layers by backfill. Then a deleted
    bronze checkpoint: recovered without reading a landing file twice."""
    settings = settings_for(root)
    streamed = snapshot(root)
    gold = settings.checkpoint("gold", "actions_10min")
    latest = max((gold / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    latest.write_bytes(latest.read_bytes()[:30])
    refused(root, gold, "is truncated or not a Spark log file", "gold")
    silver = settings.checkpoint("silver", "impressions")
    shutil.rmtree(silver)
    refused(root, silver, "it is missing", "silver")

    done = run_cli("recover", "--layer", "silver", "--layer", "gold", "--data-root", str(root))
    assert done.returncode == 0, done.stderr
    assert "recovered silver" in done.stdout and "recovered gold" in done.stdout
    assert any((root / "checkpoints" / "_retired").glob("*/silver/clicks/metadata"))
    assert any((root / "checkpoints" / "_retired").glob("*/gold/actions_10min/metadata"))
    passes(root)
    # Without late events the backfill's silver equals the streamed one, row for row.
    assert {k: v for k, v in snapshot(root).items() if k.startswith("silver/")} == {
        k: v for k, v in streamed.items() if k.startswith("silver/")
    }

    bronze = settings.checkpoint("bronze", "clicks")
    shutil.rmtree(bronze)
    refused(root, bronze, "it is missing", "bronze")
    recover(root, "bronze")
    generate(GeneratorConfig(events=600, seed=22, **NO_LATE), root / "landing")
    # Includes the ledger reconciliation (lines read = bronze + quarantine) and the
    # uniqueness checks of silver: no id written twice.
    passes(root)
    assert_bronze_holds_every_line_once(root)


@pytest.mark.full
def test_a_checkpoint_restored_from_an_old_backup_is_refused(root, tmp_path):
    checkpoint = settings_for(root).checkpoint("bronze", "user_actions")
    backup = tmp_path / "backup"
    shutil.copytree(checkpoint, backup)
    generate(GeneratorConfig(events=300, seed=24, **NO_LATE), root / "landing")
    passes(root)
    shutil.rmtree(checkpoint)
    shutil.copytree(backup, checkpoint)
    refused(root, checkpoint, "it is older than", "bronze")

    recover(root, "bronze")
    passes(root)
    assert_bronze_holds_every_line_once(root)
