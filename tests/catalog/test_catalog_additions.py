"""Declared once: an action added to the catalog, and nothing else, flows through every
layer and every check (the checks of its columns are generated from the catalog)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.helpers import REPO, delta_table, settings_for

pytestmark = pytest.mark.system

NEW_ACTION = "share"


def test_an_action_added_to_the_catalog_passes_every_layers_checks(tmp_path):
    # A copy of the package whose catalog, and only it, knows one more action.
    package = tmp_path / "src" / "lakehouse"
    shutil.copytree(
        REPO / "src" / "lakehouse", package, ignore=shutil.ignore_patterns("__pycache__")
    )
    catalog = package / "catalog" / "__init__.py"
    text = catalog.read_text()
    edited = re.sub(r"^ACTIONS = \((.*)\)$", rf'ACTIONS = (\1, "{NEW_ACTION}")', text, flags=re.M)
    assert edited != text
    catalog.write_text(edited)

    root = tmp_path / "data"
    env = {
        **os.environ,
        "PYTHONPATH": str(package.parent),
        "LAKEHOUSE_JARS_DIR": str(REPO / "jars"),
    }

    def lakehouse(*command: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "lakehouse", "--data-root", str(root), *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done

    lakehouse("generate", "--events", "600", "--seed", "17", "--days", "2")
    # The sample's sessions use the actions it models; users who only ever share arrive
    # in a landing file of their own, on the first day.
    shares = [
        json.dumps(
            {
                "event_id": f"evt-share-{n}",
                "user_id": f"user-share-{n}",
                "action": NEW_ACTION,
                "event_time": f"2026-11-01T{10 + n}:00:00Z",
            }
        )
        for n in range(5)
    ]
    (root / "landing" / "user_actions" / "user_actions-shares.jsonl").write_text(
        "\n".join(shares) + "\n"
    )
    done = lakehouse("run")
    # Every layer's checks ran and none failed.
    assert re.findall(r"(\d+) blocking failed", done.stdout) == ["0", "0", "0"], done.stdout

    # The new action went through bronze and silver into both gold tables of actions.
    settings = settings_for(root)
    for table, column in (
        (("silver", "user_actions"), "action"),
        (("gold", "actions_10min"), "action"),
        (("gold", "user_status"), "last_action"),
    ):
        values = set(delta_table(settings.table(*table)).column(column).to_pylist())
        assert NEW_ACTION in values, (table, values)
