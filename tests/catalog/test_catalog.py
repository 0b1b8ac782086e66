"""The catalog is the one list of tables and rules, and everything follows it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import subprocess
import sys

import pytest
from pyspark.testing import assertDataFrameEqual

from lakehouse import catalog
from lakehouse.catalog import LAYERS, SOURCES, TABLES, Closing
from lakehouse.catalog.schemas import table_schema
from lakehouse.drivers.tables import TRANSFORMS
from lakehouse.quality.suite import EXPECTATIONS_DIR, load_suites
from lakehouse.quality.validate import LAYER_CHECKS, suite_parameters
from lakehouse.runtime.settings import Settings
from lakehouse.samples.generate import GeneratorConfig, generate
from lakehouse.transforms.closing import close
from lakehouse.transforms.silver import attribute_clicks
from tests.helpers import REPO, landing_lines

T0 = dt.datetime(2026, 11, 1, 10, 0)


@pytest.mark.system
def test_the_catalog_imports_without_pyspark():
    """The scheduler imports it while parsing DAGs: it must stay plain Python."""
    code = (
        "import sys; sys.modules['pyspark'] = None; "
        "import lakehouse.catalog, lakehouse.catalog.dates, lakehouse.orchestration.requests; "
        "print(len(lakehouse.catalog.TABLES))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(TABLES)


def test_every_table_has_a_suite_a_transform_and_inputs_declared_before_it():
    suites = {
        p.relative_to(EXPECTATIONS_DIR).with_suffix("").as_posix()
        for p in EXPECTATIONS_DIR.glob("*/*.json")
    }
    checked = {table for tables in LAYER_CHECKS.values() for table in tables}
    assert suites == checked
    assert set(TRANSFORMS) == {t.id for t in TABLES}, "a transform of no catalog table"
    for position, table in enumerate(TABLES):
        assert (EXPECTATIONS_DIR / f"{table.id}.json").exists(), table.id
        assert callable(TRANSFORMS.get(table.id)), f"{table.id}: no transform registered"
        earlier = {t.id for t in TABLES[:position]} | {f"bronze/{s}" for s in SOURCES}
        assert set(table.inputs) <= earlier, table.id
        assert set(table.keys) <= set(table.column_names), table.id
        assert table.layer in LAYERS


def test_schemas_come_from_the_catalog_columns():
    for table in TABLES:
        assert tuple(table_schema(table).names) == table.column_names


def test_rules_are_named_once_and_every_table_names_rules_that_exist():
    rules = catalog.rules()
    assert rules.value("clicks_delay") == dt.timedelta(hours=3)
    for table in TABLES:
        for name in table.rules:
            assert isinstance(rules.value(name), dt.timedelta)
    with pytest.raises(KeyError):
        rules.value("no_such_rule")


def test_downstream_follows_the_inputs():
    assert [t.id for t in catalog.downstream_of({"silver/user_actions"})] == [
        "silver/user_sessions",
        "gold/actions_10min",
        "gold/user_status",
    ]


@pytest.fixture
def two_hour_window(monkeypatch):
    """The attribution window widened from 1 to 2 hours: one edit, in the catalog."""
    wider = dataclasses.replace(catalog.RULES, attribution_window=dt.timedelta(hours=2))
    monkeypatch.setattr(catalog, "RULES", wider)
    return wider


def impression_and_click(spark, minutes_later: float):
    schema = table_schema("silver/impressions")
    impressions = spark.createDataFrame([("i1", "ad1", "c1", "u1", T0, T0.date())], schema)
    clicks = spark.createDataFrame(
        [("k1", "i1", "ad1", "u1", T0 + dt.timedelta(minutes=minutes_later), T0.date())],
        table_schema("silver/clicks"),
    )
    return impressions, clicks


def events(root, source: str) -> list[dict]:
    """The well-formed generated events of a source, with their times parsed."""
    found = []
    for line in landing_lines(root / "landing", source):
        try:
            event = json.loads(line)
            event["event_time"] = dt.datetime.fromisoformat(event["event_time"])
        except (ValueError, TypeError, KeyError):
            continue
        found.append(event)
    return found


def test_a_changed_rule_reaches_every_consumer(spark, tmp_path, two_hour_window):
    # The transform: a click 90 minutes later now matches.
    impressions, clicks = impression_and_click(spark, 90)
    matched = attribute_clicks()(impressions, clicks).select("impression_id", "click_id")
    assertDataFrameEqual(matched, [("i1", "k1")], checkRowOrder=False)

    # The closing rule: an unmatched impression waits for the wider window.
    unmatched = spark.createDataFrame(
        [("i2", "ad1", "c1", "u1", T0, None, None, T0.date())],
        table_schema("silver/ad_attribution"),
    )
    ninety_minutes_on = int(
        (T0 + dt.timedelta(minutes=90)).replace(tzinfo=dt.UTC).timestamp() * 1000
    )
    rule = Closing("unmatched", "attribution_window")
    assert unmatched.transform(close(rule, ninety_minutes_on)).count() == 0

    # The blocking expectation: its SQL uses the wider window.
    suites = load_suites(parameters=suite_parameters(Settings.load(data_root=tmp_path)))
    queries = json.dumps([e["kwargs"] for e in suites["silver/ad_attribution"].expectations])
    assert "impression_time + INTERVAL 7200 SECONDS" in queries

    # The sample generator: the clicks meant to match nothing come after 2 hours.
    generate(GeneratorConfig(events=3000, seed=7), tmp_path / "landing")
    shown = {r["impression_id"]: r["event_time"] for r in events(tmp_path, "impressions")}
    delays = [
        click["event_time"] - shown[click["impression_id"]]
        for click in events(tmp_path, "clicks")
        if click["impression_id"] in shown
    ]
    late = [d for d in delays if d > dt.timedelta(minutes=59)]
    assert late and all(dt.timedelta(hours=2) < d <= dt.timedelta(hours=4) for d in late)

    # The DuckDB reference: a click 90 minutes later counts there too.
    from benchmarks.references import duckdb_tables

    landing = tmp_path / "reference" / "landing"
    for source, event in (
        (
            "impressions",
            {
                "impression_id": "i1",
                "ad_id": "a",
                "campaign_id": "c",
                "user_id": "u",
                "event_time": "2026-11-01T10:00:00Z",
            },
        ),
        (
            "clicks",
            {
                "click_id": "k1",
                "impression_id": "i1",
                "ad_id": "a",
                "user_id": "u",
                "event_time": "2026-11-01T11:30:00Z",
            },
        ),
        (
            "user_actions",
            {
                "event_id": "e1",
                "user_id": "u",
                "action": "login",
                "event_time": "2026-11-01T10:00:00Z",
            },
        ),
    ):
        (landing / source).mkdir(parents=True)
        (landing / source / "one.jsonl").write_text(json.dumps(event) + "\n")
    duckdb_tables(tmp_path / "reference", tmp_path / "out")
    import duckdb

    hourly = duckdb.sql(
        f"SELECT clicks FROM '{tmp_path / 'out' / 'ad_performance_hourly.parquet'}'"  # noqa: S608
    )
    assert hourly.fetchall() == [(1,)]


def test_a_stream_records_its_rules_and_names_what_changed(tmp_path, monkeypatch):
    from lakehouse.drivers.tables import fingerprint_changes, remember_fingerprint
    from tests.helpers import settings_for

    settings = settings_for(tmp_path)
    table = catalog.table("gold/actions_10min")
    settings.checkpoint(table.layer, table.name).mkdir(parents=True)
    remember_fingerprint(settings, table)
    assert fingerprint_changes(settings, table) == []

    longer = dataclasses.replace(catalog.RULES, actions_window=dt.timedelta(minutes=15))
    monkeypatch.setattr(catalog, "RULES", longer)
    assert fingerprint_changes(settings, table) == ["actions_window: 0:10:00 -> 0:15:00"]

    wider = dataclasses.replace(table, columns=(*table.columns, ("users", "long")))
    (change,) = [c for c in fingerprint_changes(settings, wider) if c.startswith("columns")]
    assert change.endswith("event_date date, users long")


def test_a_deduplicating_stream_of_an_older_version_is_named_for_its_state_key(tmp_path):
    """Lakehouse 0.10 keyed a silver event stream's state on the id alone and recorded no
    key: Spark refuses that state under the new key, so the stream must be migrated."""
    from lakehouse.drivers.tables import FINGERPRINT, fingerprint_changes, remember_fingerprint
    from lakehouse.storage.checkpoints import read_sidecar, write_sidecar
    from tests.helpers import settings_for

    settings = settings_for(tmp_path)
    table = catalog.table("silver/impressions")
    checkpoint = settings.checkpoint(table.layer, table.name)
    checkpoint.mkdir(parents=True)
    remember_fingerprint(settings, table)
    assert fingerprint_changes(settings, table) == []
    sidecar = read_sidecar(checkpoint)
    del sidecar[FINGERPRINT]["state key"]
    write_sidecar(checkpoint, sidecar)
    assert fingerprint_changes(settings, table) == [
        "state key: not recorded -> impression_id, _delivery"
    ]


def test_the_daily_table_closes_no_day_the_hourly_table_has_not_written(tmp_path, monkeypatch):
    """campaign_daily sums ad_performance_hourly's rows: it waits for the hours it sums."""
    from lakehouse.drivers import closed

    hour = 3_600_000
    settings = Settings.load(data_root=tmp_path)
    daily = catalog.table("gold/campaign_daily")
    assert daily.closed_by == "silver/ad_attribution"
    applied: dict[str, int | None] = {"gold/ad_performance_hourly": 30 * hour}
    applied[daily.id] = None
    monkeypatch.setattr(closed, "completed_watermark", lambda _settings, query: 50 * hour)
    monkeypatch.setattr(closed, "applied_watermark", lambda _settings, entry: applied[entry.id])

    assert closed.windows_to_close(settings, daily) == (None, 30 * hour)
    applied[daily.id] = 30 * hour
    assert closed.windows_to_close(settings, daily) is None  # caught up with the hours
    applied["gold/ad_performance_hourly"] = 50 * hour
    assert closed.windows_to_close(settings, daily) == (30 * hour, 50 * hour)
    applied["gold/ad_performance_hourly"] = None
    applied[daily.id] = None
    assert closed.windows_to_close(settings, daily) is None  # no hour written yet


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"date_column": "day"}, "silver/impressions: date column day is not a column"),
        ({"keys": ("id",)}, "silver/impressions: id (a key, nullable or enum) is not a column"),
        ({"closing": {"kind": "window"}}, "Input should be 'final', 'unmatched', 'windows'"),
        ({"closing": {"kind": "windows"}}, "a windows closing rule needs the window length"),
        ({"inputs": "bronze/impressions"}, "Input should be a valid tuple"),
    ],
)
def test_a_table_that_names_what_it_lacks_is_refused_where_it_is_declared(change, message):
    """Tables and closing rules are pydantic dataclasses: the catalog refuses a table whose
    fields are of the wrong type or name columns it does not have, with the table's id."""
    entry = catalog.TABLES_BY_ID["silver/impressions"]
    with pytest.raises(ValueError, match=re.escape(message)):
        dataclasses.replace(entry, **change)
