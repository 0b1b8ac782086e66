"""A table's suite: its expectations, read from `suites/<layer>/<table>.json` and checked.

Suites are GX's own JSON, so they are reviewed and versioned with the code. Each
expectation states two things:

- `severity`: `critical` blocks the stages after it, `warning` is reported only;
- `meta.scope`: `new_rows` (checked on the rows written since the table last
  passed), `partitions` (on every row of the `event_date` partitions those
  rows went to) or `table` (on the whole table). See src/lakehouse/quality/validate.py.

The checks the catalog implies come first (`implied`); `${name}` placeholders are
filled with the catalog's rules.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from lakehouse.quality.implied import implied_expectations

Scope = Literal["new_rows", "partitions", "table"]
SCOPES: tuple[Scope, ...] = get_args(Scope)


# A rule given as a SQL query that selects the rows breaking it (lakehouse.quality.expectations).
SQL_RULE = "expect_query_to_return_no_rows"


Severity = Literal["critical", "warning"]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)


# One Great Expectations suite per table, `<layer>/<table>.json`, shipped with the package.
EXPECTATIONS_DIR = Path(__file__).resolve().parent / "suites"


@dataclass(frozen=True)
class Suite:
    """One table's expectations, as read from its JSON file."""

    layer: str
    name: str
    expectations: tuple[dict[str, Any], ...]

    @property
    def table(self) -> str:
        return f"{self.layer}/{self.name}"

    def scoped(self, scope: Scope, time_dependent_only: bool = False) -> list[dict[str, Any]]:
        """The expectations of `scope`; optionally only those whose answer depends on
        when they run (they take a `$PARAMETER`, such as freshness's cut-off time)."""
        return [
            e
            for e in self.expectations
            if e["meta"]["scope"] == scope
            and (not time_dependent_only or "$PARAMETER" in json.dumps(e["kwargs"]))
        ]


# `${attribution_window}` in a suite: a business rule, filled in from the catalog.
RULE_PARAMETER = re.compile(r"\$\{([a-z0-9_]+)\}")


def _render(value: Any, parameters: Mapping[str, str], where: str) -> Any:
    """`value` with every `${name}` in its strings replaced by `parameters[name]`."""
    if isinstance(value, str):

        def fill(match: re.Match[str]) -> str:
            if match.group(1) not in parameters:
                raise ValueError(f"{where}: unknown parameter ${{{match.group(1)}}}")
            return parameters[match.group(1)]

        return RULE_PARAMETER.sub(fill, value)
    if isinstance(value, list):
        return [_render(item, parameters, where) for item in value]
    if isinstance(value, dict):
        return {key: _render(item, parameters, where) for key, item in value.items()}
    return value


def load_suite(path: Path, parameters: Mapping[str, str] | None = None) -> Suite:
    """Read and check one suite file; every problem names the file and the expectation.

    `parameters` fill the `${name}` placeholders of the expectations' arguments. The
    checks the catalog implies for the table (`implied`) come first, then the file's.
    """
    document = json.loads(path.read_text())
    layer, name = path.parent.name, path.stem
    if document.get("name") != f"{layer}.{name}":
        raise ValueError(
            f"{path}: suite name must be {layer}.{name!r}, got {document.get('name')!r}"
        )
    expectations = [
        *implied_expectations(f"{layer}/{name}"),
        *(document.get("expectations") or []),
    ]
    for index, expectation in enumerate(expectations):
        where = f"{path}: expectation {index} ({expectation.get('type')})"
        if expectation.get("severity") not in SEVERITIES:
            raise ValueError(f"{where}: severity must be one of {SEVERITIES}")
        if expectation.get("meta", {}).get("scope") not in SCOPES:
            raise ValueError(f"{where}: meta.scope must be one of {SCOPES}")
        expectation["kwargs"] = _render(expectation.get("kwargs", {}), parameters or {}, where)
    return Suite(layer, name, tuple(expectations))


def load_suites(
    directory: Path = EXPECTATIONS_DIR, parameters: Mapping[str, str] | None = None
) -> dict[str, Suite]:
    """Every suite under `directory`, keyed by table (`silver/impressions`)."""
    suites = [load_suite(path, parameters) for path in sorted(directory.glob("*/*.json"))]
    return {suite.table: suite for suite in suites}
