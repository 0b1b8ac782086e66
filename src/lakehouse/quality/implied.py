"""The checks the catalog implies, generated: no suite restates a column, a key or an enum.

For every bronze, quarantine, silver and gold table: each required column is never
null (bronze: the source's event fields and the bookkeeping columns; quarantine: the
columns every row has; silver and gold: every column the table does not declare
`nullable`), each column with allowed values holds only those (the source's or the
table's `enums`), and a silver or gold table's `keys` identify one row, within the
`event_date` partitions the new rows went to (the whole table for a table without a
date column); a first-arrival table's new ids are on no other date either. Bronze also
warns of fields the catalog does not declare. The JSON
suites keep only what is business SQL or a judgement
(`suite.load_suite` puts these first). Adding an action to `catalog.ACTIONS` reaches
every check of an `action` column this way.
"""

from __future__ import annotations

from typing import Any

from lakehouse.catalog import (
    BRONZE_BOOKKEEPING,
    EXTRA_FIELDS,
    QUARANTINE_COLUMNS,
    QUARANTINE_NULLABLE,
    SOURCES,
    TABLES_BY_ID,
    Table,
)


def expectation(
    kind: str, scope: str, why: str | None = None, severity: str = "critical", **kwargs: Any
) -> dict[str, Any]:
    """One expectation in the suites' JSON shape, blocking unless told otherwise."""
    meta = {"scope": scope} | ({"why": why} if why else {})
    return {"type": kind, "kwargs": kwargs, "meta": meta, "severity": severity}


# A field the catalog does not declare, kept in bronze (docs/bronze.md, "Fields the
# catalog does not declare"; docs/contract.md, 2.3). A
# warning: the values are kept. (A declared field sent as another JSON type needs none:
# its line is quarantined with the reason, which the run report counts.)
UNDECLARED = expectation(
    "expect_column_values_to_be_null",
    "new_rows",
    "every field a line held is declared in the catalog; one that is not is kept in "
    f"{EXTRA_FIELDS} until the catalog declares it (docs/bronze.md)",
    "warning",
    column=EXTRA_FIELDS,
)


def implied_expectations(table_id: str) -> list[dict[str, Any]]:
    """The generated expectations of a table (`silver/clicks`); none for a check table of
    its own (`bronze/reconciliation`, `silver/late_drops`)."""
    layer, name = table_id.split("/")
    if layer == "bronze" and name in SOURCES:
        source = SOURCES[name]
        bookkeeping = [column for column, _ in BRONZE_BOOKKEEPING]
        return [*_columns((*source.fields, *bookkeeping), source.enums), UNDECLARED]
    if layer == "quarantine" and name in SOURCES:
        required = [c for c, _ in QUARANTINE_COLUMNS if c not in QUARANTINE_NULLABLE]
        return _columns(required, {})
    entry = TABLES_BY_ID.get(table_id)
    if entry is None:
        return []
    required = [column for column in entry.column_names if column not in entry.nullable]
    across = [_on_one_date(entry)] if entry.first_write_wins and entry.date_column else []
    return [*_columns(required, entry.enums), _unique(entry), *across]


def _columns(required: Any, enums: Any) -> list[dict[str, Any]]:
    return [
        *(
            expectation("expect_column_values_to_not_be_null", "new_rows", column=column)
            for column in required
        ),
        *(
            expectation(
                "expect_column_values_to_be_in_set",
                "new_rows",
                column=column,
                value_set=list(values),
            )
            for column, values in enums.items()
        ),
    ]


def _on_one_date(entry: Table) -> dict[str, Any]:
    """An id of the new rows that the table also holds on another date: the partitions'
    uniqueness check sees only the dates the new rows went to. The new rows' ids are
    joined with the whole table's id and date columns (`scopes.register_views`
    gives a suite its own table whole); Spark reads those two columns only."""
    (key,) = entry.keys
    date = entry.date_column
    table = f"{entry.layer}_{entry.name}"
    # Names from the catalog, none from data.
    query = (
        f"SELECT new.{key}, new.{date}, held.{date} AS also_on FROM {{batch}} new "  # noqa: S608
        f"JOIN {table} held ON held.{key} = new.{key} AND held.{date} <> new.{date}"
    )
    return expectation(
        "expect_query_to_return_no_rows",
        "new_rows",
        f"one row per {key} in the whole table: a copy's date is not its first arrival's",
        description=f"no {key} of the new rows is also on another date",
        unexpected_rows_query=query,
    )


def _unique(entry: Table) -> dict[str, Any]:
    keys = ", ".join(entry.keys)
    if entry.first_write_wins:
        why = f"one row per {keys}: deduplication, first arrival wins"
    elif entry.upsert:
        why = f"upserted on {keys}: one row per {keys}"
    else:
        why = f"one row per {keys}"
    scope = "table" if entry.date_column is None else "partitions"
    if len(entry.keys) == 1:
        return expectation("expect_column_values_to_be_unique", scope, why, column=entry.keys[0])
    return expectation(
        "expect_compound_columns_to_be_unique", scope, why, column_list=list(entry.keys)
    )
