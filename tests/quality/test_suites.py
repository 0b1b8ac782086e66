"""The suites (lakehouse/quality/suites/): complete, valid for GX, about real columns."""

from __future__ import annotations

import json
import re

import pytest

from lakehouse.catalog import LAYERS, SOURCES, TABLES_BY_ID
from lakehouse.catalog.schemas import QUARANTINE_SCHEMA, bronze_schema, table_schema
from lakehouse.quality.derived import (
    LATE_DROPS,
    LATE_DROPS_SCHEMA,
    RECONCILIATION,
    RECONCILIATION_SCHEMA,
)
from lakehouse.quality.suite import EXPECTATIONS_DIR, load_suite, load_suites
from lakehouse.quality.validate import LAYER_CHECKS, suite_parameters
from lakehouse.runtime.settings import Settings
from tests.transforms.test_landing import REJECTED_LINES

SUITES = load_suites(parameters=suite_parameters(Settings.load(data_root="unused")))
COLUMN_KEYS = ("column", "column_A", "column_B")


def columns_of(table: str) -> list[str]:
    layer, name = table.split("/")
    if table == RECONCILIATION:
        return RECONCILIATION_SCHEMA.names
    if table in LATE_DROPS.values():
        return LATE_DROPS_SCHEMA.names
    if layer == "quarantine":
        return QUARANTINE_SCHEMA.names
    if layer == "bronze":
        return bronze_schema(SOURCES[name]).names
    return table_schema(table).names


def test_there_is_one_suite_per_checked_table():
    assert sorted(SUITES) == sorted(table for tables in LAYER_CHECKS.values() for table in tables)


def test_every_rule_placeholder_is_filled_in():
    for table, suite in SUITES.items():
        assert "${" not in json.dumps([e["kwargs"] for e in suite.expectations]), table


def test_an_unknown_placeholder_is_refused_with_its_name(tmp_path):
    folder = tmp_path / "silver"
    folder.mkdir()
    path = folder / "clicks.json"
    rule = {
        "type": "expect_query_to_return_no_rows",
        "kwargs": {"unexpected_rows_query": "SELECT * FROM {batch} WHERE x > ${no_such_rule}"},
        "meta": {"scope": "new_rows"},
        "severity": "critical",
    }
    path.write_text(json.dumps({"name": "silver.clicks", "expectations": [rule]}))
    with pytest.raises(ValueError, match=r"no_such_rule"):
        load_suite(path, {"attribution_window": "INTERVAL 1 HOUR"})


@pytest.mark.parametrize("table", sorted(SUITES))
def test_every_expectation_names_columns_of_its_table(table):
    columns = columns_of(table)
    for expectation in SUITES[table].expectations:
        kwargs = expectation["kwargs"]
        named = [kwargs[key] for key in COLUMN_KEYS if key in kwargs]
        named += kwargs.get("column_list", [])
        assert set(named) <= set(columns), (table, expectation["type"], named)


@pytest.mark.parametrize("table", sorted(SUITES))
def test_every_expectation_is_a_valid_gx_configuration(table):
    import great_expectations as gx

    import lakehouse.quality.expectations  # noqa: F401  (registers the SQL rule, as the gate does)

    suite = SUITES[table]
    built = gx.ExpectationSuite(name=suite.table, expectations=list(suite.expectations))
    assert len(built.expectations) == len(suite.expectations)
    assert {str(e.severity.value) for e in built.expectations} <= {"critical", "warning"}


def test_every_table_has_blocking_rules_on_new_rows_and_on_related_rows():
    late_drops = set(LATE_DROPS.values())
    for table, suite in SUITES.items():
        if table in late_drops:
            # Late drops are recovered by the nightly backfill: a warning, never blocking.
            assert {e["severity"] for e in suite.expectations} == {"warning"}
            continue
        scopes = {e["meta"]["scope"] for e in suite.expectations if e["severity"] == "critical"}
        expected = {"table"} if table == RECONCILIATION else {"new_rows"}
        assert expected <= scopes, table
    keyed = [t for t in SUITES if t.startswith(("silver/", "gold/")) and t not in late_drops]
    for table in keyed:
        # Keys are checked on the partitions new rows went to; a table without
        # date partitions is checked whole.
        scope = "partitions" if TABLES_BY_ID[table].date_column else "table"
        types = {e["type"] for e in SUITES[table].scoped(scope)}
        assert types & {
            "expect_column_values_to_be_unique",
            "expect_compound_columns_to_be_unique",
            "expect_query_to_return_no_rows",
        }, f"{table} has no uniqueness rule on its {scope}"


def test_a_suite_without_severity_or_scope_is_refused(tmp_path):
    folder = tmp_path / "silver"
    folder.mkdir()
    good = {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "a"}}
    for broken, problem in (
        ({**good, "meta": {"scope": "new_rows"}}, "severity"),
        ({**good, "severity": "critical", "meta": {"scope": "everything"}}, "meta.scope"),
    ):
        path = folder / "impressions.json"
        path.write_text(json.dumps({"name": "silver.impressions", "expectations": [broken]}))
        with pytest.raises(ValueError, match=problem):
            load_suite(path)


def test_suite_files_are_formatted_and_named_after_their_table():
    for path in EXPECTATIONS_DIR.glob("*/*.json"):
        document = json.loads(path.read_text())
        assert document["name"] == f"{path.parent.name}.{path.stem}"
        assert path.read_text() == json.dumps(document, indent=2) + "\n"


def test_the_reason_class_rule_accepts_every_reason_the_parser_writes():
    regex = next(
        e["kwargs"]["regex"]
        for e in SUITES["quarantine/user_actions"].expectations
        if e["type"] == "expect_column_values_to_match_regex"
    )
    # The parser's reasons, as its tests pin them down.
    reasons = [expected for _, expected in REJECTED_LINES] + ["line too long: 5 bytes (limit 2)"]
    for reason in reasons:
        assert re.search(regex, reason), reason
    assert not re.search(regex, "something new")


def test_every_layer_has_checks():
    assert tuple(LAYER_CHECKS) == LAYERS


GENERATED = {
    "expect_column_values_to_not_be_null",
    "expect_column_values_to_be_in_set",
    "expect_column_values_to_be_unique",
    "expect_compound_columns_to_be_unique",
}


def test_the_suite_files_restate_no_column_key_or_allowed_value_of_the_catalog():
    for path in EXPECTATIONS_DIR.glob("*/*.json"):
        kinds = {e["type"] for e in json.loads(path.read_text())["expectations"]}
        assert not kinds & GENERATED, f"{path}: generated from the catalog (quality.implied)"


def generated(table: str, kind: str) -> list[dict]:
    return [e["kwargs"] for e in SUITES[table].expectations if e["type"] == kind]


def test_every_table_gets_its_not_null_allowed_values_and_key_checks_from_the_catalog():
    for table, entry in TABLES_BY_ID.items():
        not_null = {k["column"] for k in generated(table, "expect_column_values_to_not_be_null")}
        assert not_null == set(entry.column_names) - set(entry.nullable), table
        allowed = {
            k["column"]: tuple(k["value_set"])
            for k in generated(table, "expect_column_values_to_be_in_set")
        }
        assert allowed == dict(entry.enums), table
        keys = [
            *([k["column"]] for k in generated(table, "expect_column_values_to_be_unique")),
            *(k["column_list"] for k in generated(table, "expect_compound_columns_to_be_unique")),
        ]
        assert keys == [list(entry.keys)], table
    for name, source in SOURCES.items():
        not_null = generated(f"bronze/{name}", "expect_column_values_to_not_be_null")
        required = {k["column"] for k in not_null}
        assert set(source.fields) < required, name
        allowed = generated(f"bronze/{name}", "expect_column_values_to_be_in_set")
        assert {k["column"]: tuple(k["value_set"]) for k in allowed} == dict(source.enums)
