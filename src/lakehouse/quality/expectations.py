"""The one expectation of our own: a SQL rule that runs its query once.

Great Expectations' `unexpected_rows_expectation` computes two metrics from
its query, the rows (up to 200, collected) and their count: Spark runs the
query twice, and every SQL rule (an anti-join for referential integrity, a
GROUP BY for uniqueness) costs two full evaluations, whatever the result
format asks for. `expect_query_to_return_no_rows` is the same expectation
(same arguments, rendering and Data Docs) that asks for the count only; the
gate shows a failure's first rows itself (`QualityGate._unexpected_rows`).

Importing this module registers it with GX (expectations register themselves
when their class is defined); the runner imports it before building any suite.
"""

from __future__ import annotations

from typing import Any, ClassVar

from great_expectations.expectations.core.unexpected_rows_expectation import (
    UnexpectedRowsExpectation,
)

ROW_COUNT = "unexpected_rows_query.row_count"


class ExpectQueryToReturnNoRows(UnexpectedRowsExpectation):
    """Expect `unexpected_rows_query` to return no row; observed: how many it returned."""

    metric_dependencies: ClassVar[tuple[str, ...]] = (ROW_COUNT,)

    def _validate(
        self,
        metrics: dict[str, Any],
        runtime_configuration: dict[str, Any] | None = None,
        execution_engine: Any = None,
    ) -> dict[str, Any]:
        count = metrics[ROW_COUNT]
        return {"success": count == 0, "result": {"observed_value": count}}
