"""Bronze ingestion in-process: every line lands once, in bronze or quarantine."""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections import Counter
from pathlib import Path

from deltalake import DeltaTable

from lakehouse import catalog
from lakehouse.catalog import SOURCES
from lakehouse.drivers.bronze import run_bronze
from lakehouse.drivers.recovery import recover_bronze
from lakehouse.samples.generate import GeneratorConfig, generate
from lakehouse.storage.landing import file_uri
from tests.helpers import delta_count, delta_rows, delta_table, landing_lines, run_in_process

# Where a row came from.
WHERE = ["_source_file", "_source_line"]


def bronze_identity(settings, source: str) -> Counter[tuple]:
    """Bronze rows as (fields..., file name): what must match between runs."""
    rows = delta_rows(settings.table("bronze", source), [*SOURCES[source].fields, "_source_file"])
    return Counter((*row[:-1], Path(row[-1]).name) for row in rows.elements())


def versions(settings) -> dict[str, int]:
    return {
        f"{layer}/{source}": DeltaTable(str(settings.table(layer, source))).version()
        for layer in ("bronze", "quarantine")
        for source in SOURCES
    }


def test_counts_reconcile_for_clean_input(spark, settings):
    summary = generate(GeneratorConfig(events=3000, seed=11, malformed_rate=0), settings.landing)
    results = {r.stage: r for r in run_bronze(spark, settings)}
    for source in SOURCES:
        lines = len(landing_lines(settings.landing, source))
        assert lines == summary.lines[source]
        assert delta_count(settings.table("bronze", source)) == lines
        assert delta_count(settings.table("quarantine", source)) == 0
        result = results[f"bronze/{source}"]
        assert result.rows_in == lines
        assert result.rows_out == {"bronze": lines, "quarantine": 0}


def test_counts_reconcile_for_malformed_input(spark, settings):
    summary = generate(GeneratorConfig(events=3000, seed=12, malformed_rate=0.05), settings.landing)
    list(run_bronze(spark, settings))
    for source in SOURCES:
        lines = len(landing_lines(settings.landing, source))
        bronze = delta_count(settings.table("bronze", source))
        quarantine = delta_table(settings.table("quarantine", source))
        assert bronze + quarantine.num_rows == lines
        assert quarantine.num_rows == summary.malformed[source] > 0
        reasons = quarantine.column("reason").to_pylist()
        assert all(reasons), "every quarantined line has a reason"
        assert all(
            f.endswith(".jsonl") or f.endswith(".gz")
            for f in quarantine["_source_file"].to_pylist()
        )


def _impression(n: int) -> dict[str, str]:
    return {
        "impression_id": f"long-{n}",
        "ad_id": "ad-1",
        "campaign_id": "camp-1",
        "user_id": f"user-{n}",
        "event_time": f"2026-11-01T10:{n % 60:02d}:00Z",
    }


def test_every_row_names_the_line_it_came_from(spark, settings):
    """`_source_line` is the line's number in its file, in bronze and quarantine, also
    for a file Spark reads in several splits (here of 1 KiB, packed several to a
    partition) and a gzip file."""
    generate(GeneratorConfig(events=200, seed=13, malformed_rate=0.05), settings.landing)
    # One file of several splits, bad lines among good ones.
    lines = ["{not json" if n % 7 == 3 else json.dumps(_impression(n)) for n in range(1, 61)]
    (settings.landing / "impressions" / "long.jsonl").write_text("\n".join(lines) + "\n")
    splits = {"spark.sql.files.maxPartitionBytes": "1k", "spark.sql.files.openCostInBytes": "256"}
    for key, value in splits.items():
        spark.conf.set(key, value)
    try:
        list(run_bronze(spark, settings))
    finally:
        for key in splits:
            spark.conf.unset(key)
    files = sorted(p for source in SOURCES for p in (settings.landing / source).iterdir())
    assert any(file.suffix == ".gz" for file in files)
    assert any(file.stat().st_size > 3 * 1024 for file in files), "some read in splits"
    for source, spec in SOURCES.items():
        landed: dict[tuple[str, int], bytes] = {}
        for file in sorted((settings.landing / source).iterdir()):
            data = file.read_bytes()
            data = gzip.decompress(data) if file.name.endswith(".gz") else data
            for number, line in enumerate(data.splitlines(), start=1):
                landed[(file_uri(str(file)), number)] = line
        accepted = delta_rows(settings.table("bronze", source), [spec.key, *WHERE])
        rejected = delta_rows(settings.table("quarantine", source), ["raw", *WHERE])
        found = Counter((file, line) for _, file, line in (accepted + rejected).elements())
        assert found == Counter(landed.keys())  # every line once, under its own number
        for key, file, line in accepted:
            assert json.loads(landed[(file, line)])[spec.key] == key
        for raw, file, line in rejected:
            assert raw == landed[(file, line)].decode("utf-8", "replace")[: len(raw)]


def test_files_deleted_after_ingestion_are_not_quarantined_after_a_bronze_recovery(spark, settings):
    """Landing folders get cleaned; `recover --layer bronze` makes the streams read every
    manifest again. A file gone since it was ingested has nothing left to say."""
    generate(GeneratorConfig(events=400, seed=14, malformed_rate=0), settings.landing)
    list(run_bronze(spark, settings))
    before = {s: delta_rows(settings.table("quarantine", s)) for s in SOURCES}
    bronze = {s: bronze_identity(settings, s) for s in SOURCES}
    for source in SOURCES:
        sorted((settings.landing / source).iterdir())[0].unlink()

    recover_bronze(spark, settings, echo=lambda line: None)
    list(run_bronze(spark, settings))
    assert {s: delta_rows(settings.table("quarantine", s)) for s in SOURCES} == before
    assert {s: bronze_identity(settings, s) for s in SOURCES} == bronze


def test_a_second_run_with_no_new_files_changes_nothing(spark, settings):
    # A new root's empty landing folders: nothing to ingest, said per source with the
    # command that writes samples, so the empty tables that follow are not a mystery.
    empty = {r.stage: r.notices for r in run_bronze(spark, settings)}
    assert all(
        any("has never held a landing file" in n and "lakehouse generate" in n for n in notices)
        for notices in empty.values()
    ), empty
    generate(GeneratorConfig(events=1000, seed=13), settings.landing)
    assert not any(r.notices for r in run_bronze(spark, settings))
    before = versions(settings)
    results = list(run_bronze(spark, settings))
    assert versions(settings) == before
    # Every landing file is in its stream's log of files read: no query is started.
    assert all(r.caught_up and r.rows_in == 0 for r in results)

    # Files Spark does not list (hidden, another format) start nothing either.
    clicks = settings.landing / "clicks"
    line = landing_lines(settings.landing, "clicks")[0]
    (clicks / ".clicks-late.jsonl").write_text('{"not": "read"}\n')
    (clicks / "_SUCCESS").write_text("")
    (clicks / "notes.txt").write_text("not read\n")
    assert all(r.caught_up for r in run_bronze(spark, settings))

    # One new file starts exactly its source's stream, which reads exactly it.
    (clicks / "clicks-late.jsonl").write_bytes(line + b"\n")
    results = {r.stage: r for r in run_bronze(spark, settings)}
    assert {stage for stage, r in results.items() if not r.caught_up} == {"bronze/clicks"}
    assert results["bronze/clicks"].rows_in == 1


def test_files_arriving_between_runs_are_ingested_exactly_once(spark, settings, tmp_path):
    generate(GeneratorConfig(events=1500, seed=21), settings.landing)
    list(run_bronze(spark, settings))
    generate(GeneratorConfig(events=1500, seed=22), settings.landing)
    list(run_bronze(spark, settings))

    # Reference: the same files ingested in a single run elsewhere.
    from tests.helpers import settings_for

    reference = settings_for(tmp_path / "reference")
    generate(GeneratorConfig(events=1500, seed=21), reference.landing)
    generate(GeneratorConfig(events=1500, seed=22), reference.landing)
    list(run_bronze(spark, reference))
    for source in SOURCES:
        assert bronze_identity(settings, source) == bronze_identity(reference, source)
        lines = len(landing_lines(settings.landing, source))
        total = delta_count(settings.table("bronze", source)) + delta_count(
            settings.table("quarantine", source)
        )
        assert total == lines


def test_admission_control_splits_a_backlog_into_batches(spark, settings):
    small_batches = settings.model_copy(update={"max_files_per_trigger": 8})
    generate(GeneratorConfig(events=2000, seed=31, file_minutes=60), settings.landing)
    # Spark compacts its log of files read every `compactInterval` batches (10 by
    # default) and deletes the log files the compaction covers.
    log_conf = {
        "spark.sql.streaming.fileSource.log.compactInterval": "2",
        "spark.sql.streaming.fileSource.log.cleanupDelay": "0",
    }
    for key, value in log_conf.items():
        spark.conf.set(key, value)
    try:
        results = {r.stage: r for r in run_bronze(spark, small_batches)}
    finally:
        for key in log_conf:
            spark.conf.unset(key)
    files = len(list((settings.landing / "impressions").iterdir()))
    assert results["bronze/impressions"].batches == -(-files // 8)
    assert delta_count(settings.table("bronze", "impressions")) + delta_count(
        settings.table("quarantine", "impressions")
    ) == len(landing_lines(settings.landing, "impressions"))

    # The compacted log still names every file read: the next run starts no query.
    log = settings.checkpoint("bronze", "impressions") / "sources" / "0"
    assert any(path.name.endswith(".compact") for path in log.iterdir())
    assert all(r.caught_up for r in run_bronze(spark, small_batches))


def test_a_new_optional_field_flows_into_bronze_without_breaking_anything(
    spark, settings, monkeypatch
):
    """A source gains a nullable field: bronze gets the column, older rows read null,
    a wrong type is quarantined like any other, and the counts still reconcile."""
    clicks = settings.landing / "clicks"
    clicks.mkdir(parents=True)
    base = '"click_id":"{0}","impression_id":"i","ad_id":"a","user_id":"u"'
    moment = '"event_time":"2026-11-01T10:00:00Z"'
    (clicks / "1.jsonl").write_text("{" + base.format("k1") + "," + moment + "}\n")
    list(run_bronze(spark, settings))

    with_referrer = dataclasses.replace(SOURCES["clicks"], optional_fields=("referrer",))
    monkeypatch.setitem(catalog.SOURCES, "clicks", with_referrer)
    (clicks / "2.jsonl").write_text(
        "".join(
            "{" + base.format(click) + f",{moment}{extra}" + "}\n"
            for click, extra in (
                ("k2", ',"referrer":"search"'),
                ("k3", ""),
                ("k4", ',"referrer":" "'),
                ("k5", ',"referrer":42'),
            )
        )
    )
    results = {r.stage: r for r in run_bronze(spark, settings)}
    assert results["bronze/clicks"].rows_out == {"bronze": 3, "quarantine": 1}
    rows = delta_rows(settings.table("bronze", "clicks"), ["click_id", "referrer"])
    assert rows == Counter({("k1", None): 1, ("k2", "search"): 1, ("k3", None): 1, ("k4", None): 1})
    (reason,) = delta_rows(settings.table("quarantine", "clicks"), ["reason"])
    assert reason == ("field 'referrer' must be a string, got bigint",)
    bronze = delta_table(settings.table("bronze", "clicks")).column_names
    assert bronze[-1] == "referrer" and "_source_file" in bronze


def test_fields_the_catalog_does_not_declare_are_kept_counted_reported_and_warned(spark, settings):
    """A producer adds fields: each accepted line keeps them in bronze's `_extra_fields`
    (values as sent, nested and null ones too), the run says so once per field with
    its lines and the first line's place, and the bronze checks warn without blocking.
    A declared field sent as a number or an array is quarantined, as before, and the
    run says so too."""
    impressions = settings.landing / "impressions"
    impressions.mkdir(parents=True)
    sent = [
        _impression(1),
        _impression(2) | {"placement": "feed"},
        _impression(3) | {"placement": "story", "slot": {"row": 2, "col": [1, None]}, "n": None},
        _impression(4) | {"ad_id": 7},
        _impression(5) | {"placement": 3, "campaign_id": ["c"]},
    ]
    (impressions / "drift.jsonl").write_text("".join(json.dumps(line) + "\n" for line in sent))

    done = run_in_process("run", "--layer", "bronze", "--data-root", str(settings.data_root))

    assert done.returncode == 0, done.stderr
    declared = set(SOURCES["impressions"].fields)
    kept = delta_rows(settings.table("bronze", "impressions"), ["impression_id", "_extra_fields"])
    assert {key: extra and json.loads(extra) for key, extra in kept} == {
        line["impression_id"]: {k: v for k, v in line.items() if k not in declared} or None
        for line in sent[:3]
    }
    assert delta_count(settings.table("quarantine", "impressions")) == 2  # 5 lines = 3 + 2
    where = "landing/impressions/drift.jsonl"
    drift = [line.strip() for line in done.stdout.splitlines() if "drift:" in line]
    assert drift == [
        "drift: field 'ad_id' sent as bigint instead of a string in 1 line(s), quarantined; "
        f"first at {where}:4",
        "drift: field 'campaign_id' sent as array instead of a string in 1 line(s), "
        f"quarantined; first at {where}:5",
        "drift: undeclared field 'n' (null) in 1 line(s), kept in bronze's _extra_fields; "
        f"first at {where}:3",
        "drift: undeclared field 'placement' (string) in 2 line(s), kept in bronze's "
        f"_extra_fields; first at {where}:2",
        "drift: undeclared field 'slot' (object) in 1 line(s), kept in bronze's "
        f"_extra_fields; first at {where}:3",
    ]
    warnings = [
        line.strip().split(":", 1)[0]
        for line in done.stdout.splitlines()
        if line.strip().startswith("warning") and "impressions" in line
    ]
    assert warnings == ["warning  bronze/impressions"]
    assert "expect_column_values_to_be_null(_extra_fields): 2 of 3 rows" in done.stdout
    assert "0 blocking failed" in done.stdout and "run passed with warnings" in done.stdout
