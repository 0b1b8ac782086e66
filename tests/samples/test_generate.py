"""The sample generator: deterministic, counted, atomic, never overwriting."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path

import pytest

from lakehouse.catalog import SOURCES
from lakehouse.samples.generate import GeneratorConfig, generate, landing_is_empty
from tests.helpers import landing_lines


def files(landing: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(landing)): p.read_bytes()
        for p in sorted(landing.rglob("*"))
        if p.is_file()
    }


def test_same_seed_gives_identical_files(tmp_path):
    config = GeneratorConfig(events=2000, seed=3)
    generate(config, tmp_path / "a")
    generate(config, tmp_path / "b")
    assert files(tmp_path / "a") == files(tmp_path / "b")
    generate(GeneratorConfig(events=2000, seed=4), tmp_path / "c")
    assert files(tmp_path / "a") != files(tmp_path / "c")


def test_summary_counts_match_the_files(tmp_path):
    summary = generate(GeneratorConfig(events=5000, seed=1, malformed_rate=0.02), tmp_path)
    assert sum(summary.events.values()) == 5000
    for source in SOURCES:
        lines = landing_lines(tmp_path, source)
        assert len(lines) == summary.lines[source]
        assert summary.lines[source] == (
            summary.events[source] + summary.duplicates[source] + summary.malformed[source]
        )
        parsed = 0
        for line in lines:
            try:
                record = json.loads(line)
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(record, dict) and all(
                isinstance(record.get(f), str) for f in SOURCES[source].fields
            ):
                parsed += 1
        # Well-formed lines are at least the events and their redeliveries.
        assert parsed >= summary.events[source] + summary.duplicates[source]


def test_rates_are_close_to_what_was_asked(tmp_path):
    summary = generate(
        GeneratorConfig(events=40_000, seed=2, duplicate_rate=0.05, late_rate=0.01), tmp_path
    )
    events = sum(summary.events.values())
    assert sum(summary.duplicates.values()) / events == pytest.approx(0.05, abs=0.005)
    assert sum(summary.late.values()) / events == pytest.approx(0.01, abs=0.003)
    assert sum(summary.malformed.values()) / events == pytest.approx(0.005, abs=0.002)
    assert summary.events["clicks"] > 0


def test_all_event_times_carry_an_offset_and_gzip_files_are_valid(tmp_path):
    generate(GeneratorConfig(events=3000, seed=5, malformed_rate=0, gzip_rate=0.5), tmp_path)
    gz = list(tmp_path.rglob("*.gz"))
    assert gz
    for file in gz:
        gzip.decompress(file.read_bytes())
    for source in SOURCES:
        for line in landing_lines(tmp_path, source):
            stamp = json.loads(line)["event_time"]
            assert stamp.endswith("Z") or stamp.endswith("+02:00")


def test_existing_files_are_never_overwritten_and_no_temp_files_remain(tmp_path):
    first = generate(GeneratorConfig(events=1000, seed=9), tmp_path)
    before = files(tmp_path)
    again = generate(GeneratorConfig(events=1000, seed=9), tmp_path)
    assert again.files_written == 0
    assert again.files_existing == first.files_written
    assert files(tmp_path) == before
    assert not [p for p in tmp_path.rglob(".*")]


def test_landing_is_empty(tmp_path):
    assert landing_is_empty(tmp_path)
    generate(GeneratorConfig(events=10, seed=1), tmp_path)
    assert not landing_is_empty(tmp_path)


@pytest.mark.parametrize(
    "bad", [{"events": -1}, {"days": 0}, {"duplicate_rate": 1.5}, {"late_rate": -0.1}]
)
def test_invalid_configuration_is_refused(bad):
    with pytest.raises(ValueError):
        GeneratorConfig(**{"events": 10, "seed": 1, **bad})


def test_the_summary_says_which_event_times_it_wrote(tmp_path):
    """Clicks and sessions run past the days asked for: the span says where the next
    drop may start without its events falling behind the streams' watermarks."""
    summary = generate(GeneratorConfig(events=3000, seed=5, days=2), tmp_path)
    times = []
    for source in SOURCES:
        for line in landing_lines(tmp_path, source):
            try:
                moment = dt.datetime.fromisoformat(json.loads(line)["event_time"])
            except (ValueError, KeyError, TypeError):
                continue  # a malformed line
            times.append(moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%MZ"))
    # Malformed lines (0.5%) carry times from inside the span too.
    words = summary.span().split()
    assert (words[2], words[4]) == (min(times), max(times))
    assert max(times) > "2026-11-03T"  # past the two days asked for
    assert f"a later drop should start after {max(times)}" in summary.describe()
