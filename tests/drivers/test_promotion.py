"""A field producers added, promoted by declaring it: `lakehouse migrate` adds the column
without rewriting a row, the streams carry it, a backfill fills past dates from what bronze
kept, and streaming = batch still holds. Removing or retyping it is refused."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import pytest

from lakehouse import catalog
from lakehouse.catalog.dates import DateRange
from lakehouse.drivers.parity import run_parity
from lakehouse.storage.delta import Snapshot
from tests.helpers import delta_rows, delta_table, run_in_process, settings_for


def impression(n: int, day: int, **extra: object) -> str:
    event = {
        "impression_id": f"imp-{n}",
        "ad_id": "ad-1",
        "campaign_id": "camp-1",
        "user_id": f"user-{n}",
        "event_time": f"2026-11-0{day}T10:{n:02d}:00Z",
    }
    return json.dumps(event | extra)


def click(n: int, day: int) -> str:
    """A click on impression n, 30 minutes after it: both sources have a watermark."""
    event = {
        "click_id": f"click-{n}",
        "impression_id": f"imp-{n}",
        "ad_id": "ad-1",
        "user_id": f"user-{n}",
        "event_time": f"2026-11-0{day}T10:{n + 30:02d}:00Z",
    }
    return json.dumps(event) + "\n"


def placements(silver) -> dict[str, str | None]:
    """Each silver row's placement, by id (one row per id)."""
    rows = delta_rows(silver, ["impression_id", "placement"])
    assert set(rows.values()) == {1}
    return dict(list(rows))


def declare(monkeypatch: pytest.MonkeyPatch, source: str, columns: dict[str, str]) -> None:
    """The catalog edited as a user edits it: `source` gets `columns` as its optional
    fields, and its deduplicated silver table carries them with those types."""
    promoted = dataclasses.replace(catalog.SOURCES[source], optional_fields=tuple(columns))
    monkeypatch.setitem(catalog.SOURCES, source, promoted)
    entry = catalog._deduplicated(promoted)
    entry = dataclasses.replace(
        entry, columns=tuple((name, columns.get(name, kind)) for name, kind in entry.columns)
    )
    monkeypatch.setitem(catalog.TABLES_BY_ID, entry.id, entry)
    swapped = tuple(entry if t.id == entry.id else t for t in catalog.TABLES)
    monkeypatch.setattr(catalog, "TABLES", swapped)


def test_a_declared_field_is_migrated_carried_and_backfilled_from_bronze(
    spark, tmp_path, monkeypatch
):
    settings = settings_for(tmp_path / "data")
    root = ["--data-root", str(settings.data_root)]
    landing = settings.landing / "impressions"
    landing.mkdir(parents=True)
    (landing / "day1.jsonl").write_text(
        "\n".join(
            [
                impression(1, 1, placement="feed"),
                impression(2, 1),
                impression(3, 1, placement="  "),
                impression(4, 1, placement=5),
                impression(5, 1, placement="story", slot={"row": 2}),
            ]
        )
        + "\n"
    )
    (settings.landing / "clicks").mkdir()
    (settings.landing / "clicks" / "day1.jsonl").write_text(click(1, 1))
    assert run_in_process("run", *root).returncode == 0
    silver = settings.table("silver", "impressions")
    before = Snapshot.latest(silver)

    with monkeypatch.context() as edit:
        declare(edit, "impressions", {"placement": "string"})
        refused = run_in_process("run", *root)
        assert refused.returncode != 0
        said = refused.stdout + refused.stderr
        assert "silver/impressions: columns:" in said and "lakehouse migrate" in said, said
        assert "silver/ad_attribution" not in said.split("To move the lakehouse over")[-1]

        migrated = run_in_process("migrate", *root)
        assert migrated.returncode == 0, migrated.stderr
        assert "silver/impressions: added column(s) placement; no row rewritten" in migrated.stdout
        assert (
            "lakehouse backfill --start 2026-11-01 --end 2026-11-01 --layer silver"
            in migrated.stdout
        )
        after = Snapshot.latest(silver)
        assert after.version == before.version + 1  # ALTER TABLE … ADD COLUMNS
        assert after.files.names == before.files.names  # no data file rewritten
        assert delta_table(silver).column_names[-1] == "placement"
        assert "nothing to migrate" in run_in_process("migrate", *root).stdout

        (landing / "day2.jsonl").write_text(
            "\n".join(
                [
                    impression(6, 2, placement="feed"),
                    impression(7, 2),
                    impression(8, 2, placement=5),  # a declared string field sent as a number
                    impression(9, 2, placement="video", slot=1),
                ]
            )
            + "\n"
        )
        (settings.landing / "clicks" / "day2.jsonl").write_text(click(6, 2))
        assert run_in_process("run", *root).returncode == 0
        # The stream carries the column from now on; past rows read null until a backfill.
        assert placements(silver) == {
            **{f"imp-{n}": None for n in range(1, 6)},
            "imp-6": "feed",
            "imp-7": None,
            "imp-9": "video",
        }
        (reason,) = delta_rows(settings.table("quarantine", "impressions"), ["reason"])
        assert reason == ("field 'placement' must be a string, got bigint",)

        backfill = ["--start", "2026-11-01", "--end", "2026-11-02", "--layer", "silver"]
        assert run_in_process("backfill", *backfill, *root).returncode == 0
        assert placements(silver) == {
            "imp-1": "feed",
            "imp-2": None,
            "imp-3": None,  # blank, as the parser takes it
            "imp-4": None,  # a number: kept in bronze's _extra_fields only
            "imp-5": "story",
            "imp-6": "feed",
            "imp-7": None,
            "imp-9": "video",
        }
        results, _ = run_parity(
            spark, settings, DateRange(dt.date(2026, 11, 1), dt.date(2026, 11, 2))
        )
        assert all(r.equal for r in results), [r.summary() for r in results if not r.equal]

        # Retyped: refused with what to do.
        declare(edit, "impressions", {"placement": "long"})
        retyped = run_in_process("run", *root)
        assert retyped.returncode != 0
        assert "retyped: placement string -> long" in retyped.stderr, retyped.stderr
        assert "declare a field of a new name" in retyped.stderr

    # Removed from the catalog again: refused with what to do, silver and bronze alike.
    removed = run_in_process("run", *root)
    assert removed.returncode != 0
    assert "silver/impressions: no longer declared: placement string" in removed.stderr
    assert "declare the column again as it was" in removed.stderr
    bronze = run_in_process("run", "--layer", "bronze", *root)
    assert bronze.returncode != 0
    assert "bronze/impressions has column(s) placement" in bronze.stderr, bronze.stderr
