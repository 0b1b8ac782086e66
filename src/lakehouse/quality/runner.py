"""Great Expectations for the pipeline: versioned suites, one context per process, plain results.

Suites are GX's own JSON (`src/lakehouse/quality/suites/<layer>/<name>.json`), so they are
reviewed and versioned with the code. Each expectation states two things:

- `severity`: `critical` blocks the stages after it, `warning` is reported only;
- `meta.scope`: `new_rows` (checked on the rows written since the table last
  passed), `partitions` (on every row of the `event_date` partitions those
  rows went to) or `table` (on the whole table). See src/lakehouse/quality/validate.py.

The GX context is ephemeral and built on first use, never at import: importing
GX alone takes seconds, and the data root (where Data Docs go) is only known
at run time. Data Docs are written to `reports/data_docs/`, made inert
(`lakehouse.quality.data_docs`): GX 1.24 writes a failed expectation's sample
values into its pages as markup, and its pages load scripts from public CDNs.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote, urlparse

from lakehouse.quality.data_docs import inert, without_scripts
from lakehouse.quality.scopes import ArrowRows
from lakehouse.quality.suite import SQL_RULE, Scope, Suite

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame


SAMPLE_SIZE = 5


DOCS_SITE = "lakehouse"


def _import_gx() -> None:
    # Offline and quiet: no usage statistics, no progress bars on stderr.
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations  # noqa: F401

    import lakehouse.quality.expectations  # noqa: F401  (registers our SQL rule with GX)


def preload() -> None:
    """Start importing Great Expectations on a thread (seconds of CPU).

    Call it before starting Spark: the driver then imports GX while it waits
    for the JVM, instead of after. A later `import great_expectations` waits
    for this one to finish (Python's import lock), and if it failed, imports
    again and raises the error itself.
    """
    threading.Thread(target=_import_gx, name="import-great-expectations", daemon=True).start()


@dataclass(frozen=True)
class Outcome:
    """The result of one expectation on one table."""

    table: str
    scope: Scope
    expectation: str
    description: str
    blocking: bool
    success: bool
    rows_checked: int
    unexpected_count: int | None
    observed: str | None
    sample: tuple[str, ...] = ()
    docs_page: Path | None = None

    def message(self) -> str:
        if self.success:
            return f"{self.table}: {self.description}: passed"
        if self.unexpected_count is not None:
            found = f"{self.unexpected_count:,} of {self.rows_checked:,} rows unexpected"
        else:
            found = f"observed {self.observed}"
        sample = f"; sample: {', '.join(self.sample)}" if self.sample else ""
        return f"{self.table}: not met ({self.scope}): {self.description}: {found}{sample}"


def _first_known(*values: Any) -> Any:
    return next(value for value in values if value is not None)


def _counts_rows(expectation_type: str) -> bool:
    """Whether the expectation counts unexpected rows (a row rule or a SQL rule), as
    opposed to judging one aggregate (a row count, a column's maximum)."""
    from great_expectations.expectations.expectation import (
        ColumnMapExpectation,
        ColumnPairMapExpectation,
        MulticolumnMapExpectation,
    )
    from great_expectations.expectations.registry import get_expectation_impl

    row_rules = (ColumnMapExpectation, ColumnPairMapExpectation, MulticolumnMapExpectation)
    return expectation_type == SQL_RULE or issubclass(
        get_expectation_impl(expectation_type), row_rules
    )


def _describe(config: dict[str, Any]) -> str:
    kwargs = config["kwargs"]
    description = config.get("description") or kwargs.get("description")
    if description:
        return str(description)
    args = [
        str(kwargs[key])
        for key in ("column", "column_list", "column_A", "column_B", "value_set")
        if key in kwargs
    ]
    bounds = [f"{key}={kwargs[key]}" for key in ("min_value", "max_value") if key in kwargs]
    return f"{config['type']}({', '.join(args + bounds)})"


def _iso(value: Any) -> str:
    """A value JSON has no type for; times in ISO 8601, as GX's pandas engine gives them."""
    return value.isoformat() if isinstance(value, dt.date) else str(value)


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=_iso)
    return text if len(text) <= 160 else text[:157] + "..."


def _selected(expectations: list[dict[str, Any]], rules: str) -> list[dict[str, Any]]:
    """Which expectations one GX validation runs: `all` (on Spark), the `columns` rules
    (on GX's pandas engine) or the `sql` rules (on Spark)."""
    if rules == "all":
        return expectations
    return [e for e in expectations if (e["type"] == SQL_RULE) == (rules == "sql")]


@dataclass
class QualityGate:
    """Runs suites on DataFrames and renders Data Docs; one per process."""

    docs_dir: Path
    _context: Any = None
    _checkpoints: dict[str, Any] = field(default_factory=dict)
    _definitions: dict[str, Any] = field(default_factory=dict)
    _batches: dict[str, Any] = field(default_factory=dict)
    _docs_stale: bool = False  # validations ran since Data Docs were last built

    def _gx(self) -> Any:
        if self._context is None:
            _import_gx()
            import great_expectations as gx
            from great_expectations.data_context.types.base import (
                DataContextConfig,
                InMemoryStoreBackendDefaults,
                ProgressBarsConfig,
            )

            logging.getLogger("great_expectations").setLevel(logging.WARNING)
            self.docs_dir.mkdir(parents=True, exist_ok=True)
            config = DataContextConfig(
                store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
                data_docs_sites={
                    DOCS_SITE: {
                        "class_name": "SiteBuilder",
                        "show_how_to_buttons": False,
                        "store_backend": {
                            "class_name": "TupleFilesystemStoreBackend",
                            "base_directory": str(self.docs_dir),
                        },
                        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
                    }
                },
                analytics_enabled=False,
                progress_bars=ProgressBarsConfig(globally=False),
            )
            self._context = gx.get_context(project_config=config, mode="ephemeral")
        return self._context

    def _data_source(self, engine: str) -> Any:
        """GX's data source for Spark DataFrames or pandas ones, added on first use (GX's
        Spark source would start a Spark session of its own if none were running)."""
        sources = self._gx().data_sources
        name = f"lakehouse_{engine}"
        if name not in sources.all():
            if engine == "spark":
                # persist=False: GX would cache every batch and never release it; the
                # caller caches what is worth caching and unpersists it.
                sources.add_or_update_spark(name, persist=False)
            else:
                sources.add_or_update_pandas(name)
        return sources.get(name)

    def _whole_frame(self, engine: str) -> Any:
        """The batch definition every validation on `engine` shares: a whole DataFrame,
        given at run time. One per engine, not one per validation: GX saves its
        context's whole configuration again for each asset and batch definition it
        adds."""
        if engine not in self._batches:
            asset = self._data_source(engine).add_dataframe_asset("rows")
            self._batches[engine] = asset.add_batch_definition_whole_dataframe("whole")
        return self._batches[engine]

    def _checkpoint(
        self, suite: Suite, scope: Scope, time_dependent_only: bool, rules: str, samples: bool
    ) -> Any:
        """A GX checkpoint of the `scope` expectations of `suite` that `rules` selects
        (`_selected`): for the verdicts, or with `samples` for counts and sample values.

        Two checkpoints on one validation definition. The first asks for the
        verdict only (BOOLEAN_ONLY): most validations pass, and GX's counts and
        sample values cost a round trip to the JVM per expectation (about a third
        of a small validation's time). The second re-runs a failed validation
        with counts and sample values for the message and Data Docs; it is made
        when first needed (adding a checkpoint to GX's context costs about 10 ms).
        """
        key = f"{suite.layer}.{suite.name}.{scope}" + (".time" if time_dependent_only else "")
        key += "" if rules == "all" else f".{rules}"
        name, kind, sample = (
            (f"{key}.samples", "SUMMARY", SAMPLE_SIZE) if samples else (key, "BOOLEAN_ONLY", 0)
        )
        if name not in self._checkpoints:
            # GX itself first (`_definition`): importing its checkpoint module alone is circular.
            definition = self._definition(key, suite, scope, time_dependent_only, rules)
            from great_expectations.checkpoint import Checkpoint

            # `add`, not `add_or_update`: the name is new to this context, and
            # add_or_update saves the validation definition and its suite again.
            self._checkpoints[name] = self._gx().checkpoints.add(
                Checkpoint(
                    name=name,
                    validation_definitions=[definition],
                    actions=[],
                    result_format={"result_format": kind, "partial_unexpected_count": sample},
                )
            )
        return self._checkpoints[name]

    def _definition(
        self, key: str, suite: Suite, scope: Scope, time_dependent_only: bool, rules: str
    ) -> Any:
        """GX's validation definition `key`: the selected expectations on a batch of one
        DataFrame (pandas for the column rules, Spark otherwise)."""
        if key not in self._definitions:
            import great_expectations as gx

            context = self._gx()
            expectations = _selected(suite.scoped(scope, time_dependent_only), rules)
            gx_suite = gx.ExpectationSuite(name=key, expectations=expectations)
            # GX logs and drops an expectation it cannot build; refuse instead.
            if len(gx_suite.expectations) != len(expectations):
                raise ValueError(
                    f"suite {suite.table}: {len(expectations) - len(gx_suite.expectations)} "
                    f"{scope} expectation(s) are not valid Great Expectations configurations"
                )
            gx_suite = context.suites.add_or_update(gx_suite)
            batch = self._whole_frame("pandas" if rules == "columns" else "spark")
            self._definitions[key] = context.validation_definitions.add_or_update(
                gx.ValidationDefinition(name=key, data=batch, suite=gx_suite)
            )
        return self._definitions[key]

    def validate(
        self,
        suite: Suite,
        scope: Scope,
        frame: DataFrame | pd.DataFrame | ArrowRows,
        parameters: dict[str, Any],
        time_dependent_only: bool = False,
        rows: int | None = None,
    ) -> list[Outcome]:
        """Run the suite's `scope` expectations (or only its time-dependent ones) on `frame`:
        a Spark DataFrame, rows in an Arrow copy (`ArrowRows`), or a pandas
        DataFrame (GX's pandas engine: no SQL rules).

        `rows`: the frame's row count if known (the Delta log's statistics), each
        outcome's `rows_checked`; otherwise the frame is counted.
        """
        expectations = suite.scoped(scope, time_dependent_only)
        if not expectations:
            return []
        parts: list[tuple[str, Callable[[], Any]]]
        if isinstance(frame, ArrowRows):
            parts = [("columns", lambda: frame.pandas), ("sql", lambda: frame.spark_frame)]
            rows = frame.table.num_rows if rows is None else rows
        elif type(frame).__module__.startswith("pandas"):
            if _selected(expectations, "sql"):
                raise ValueError(f"suite {suite.table}: SQL rules run on Spark DataFrames only")
            parts = [("columns", lambda: frame)]
            rows = len(cast("pd.DataFrame", frame)) if rows is None else rows
        else:
            parts = [("all", lambda: frame)]
            rows = cast("DataFrame", frame).count() if rows is None else rows
        outcomes: list[Outcome] = []
        for rules, data in parts:
            if _selected(expectations, rules):
                outcomes += self._run(
                    suite, scope, time_dependent_only, rules, data(), parameters, rows
                )
        return outcomes

    def _run(
        self,
        suite: Suite,
        scope: Scope,
        time_dependent_only: bool,
        rules: str,
        frame: DataFrame | pd.DataFrame,
        parameters: dict[str, Any],
        rows: int,
    ) -> list[Outcome]:
        batch = {"dataframe": frame}
        checkpoint = self._checkpoint(suite, scope, time_dependent_only, rules, samples=False)
        result = checkpoint.run(batch_parameters=batch, expectation_parameters=parameters)
        self._docs_stale = True
        if not result.success:
            checkpoint = self._checkpoint(suite, scope, time_dependent_only, rules, samples=True)
            result = checkpoint.run(batch_parameters=batch, expectation_parameters=parameters)
        ((identifier, run),) = result.run_results.items()
        page = self._docs_page(identifier)
        outcomes = []
        for item in run.results:
            config = item.expectation_config.to_json_dict()
            details = dict(item.result or {})
            if item.success and "unexpected_count" not in details and _counts_rows(config["type"]):
                details["unexpected_count"] = 0  # a verdict without counts: it passed
            error = (item.exception_info or {}).get("exception_message")
            if error and (item.exception_info or {}).get("raised_exception"):
                details["observed_value"] = f"error: {error}"
            sample: list[Any] = list(details.get("partial_unexpected_list") or [])
            if not item.success and config["type"] == SQL_RULE:
                sample = self._unexpected_rows(frame, config["kwargs"]["unexpected_rows_query"])
            outcomes.append(
                Outcome(
                    table=suite.table,
                    scope=scope,
                    expectation=config["type"],
                    description=_describe(config),
                    blocking=config.get("severity", "critical") == "critical",
                    success=bool(item.success),
                    rows_checked=int(_first_known(details.get("element_count"), rows)),
                    unexpected_count=details.get("unexpected_count"),
                    observed=(
                        None
                        if details.get("observed_value") is None
                        else _text(details["observed_value"])
                    ),
                    sample=tuple(_text(value) for value in sample[:SAMPLE_SIZE]),
                    docs_page=page,
                )
            )
        if not result.success:
            self._store_inert(identifier, run)
        return outcomes

    def _store_inert(self, identifier: Any, run: Any) -> None:
        """Keep the failed validation's results for Data Docs with their values escaped."""
        escaped = copy.deepcopy(run)
        for item in escaped.results:
            item.result = inert(item.result or {})
            if item.exception_info:
                item.exception_info = inert(item.exception_info)
        self._gx().validation_results_store.set(identifier, escaped)

    @staticmethod
    def _unexpected_rows(frame: DataFrame, query: str) -> list[Any]:
        """A few of the rows a failed SQL expectation found (GX's SUMMARY omits them)."""
        frame.createOrReplaceTempView("dq_unexpected_batch")
        rows = frame.sparkSession.sql(query.format(batch="dq_unexpected_batch")).limit(SAMPLE_SIZE)
        # A query that selects one column (a sentence) reads best as that value alone.
        return [row[0] if len(row) == 1 else row.asDict() for row in rows.collect()]

    def _docs_page(self, identifier: Any) -> Path | None:
        for site in self._gx().get_docs_sites_urls(
            resource_identifier=identifier, site_names=[DOCS_SITE], only_if_exists=False
        ):
            return Path(unquote(urlparse(site["site_url"]).path))
        return None

    def build_docs(self) -> None:
        """Render Data Docs for every validation this process ran.

        Without GX's index: it is drawn by scripts (blank here), and building it
        deletes every validation page of earlier processes, which earlier reports
        link to (the maintenance DAG expires them with the reports).
        """
        if self._context is None:
            return
        if self._docs_stale:
            started = time.time()
            self._context.build_data_docs(site_names=[DOCS_SITE], build_index=False)
            self._docs_stale = False
            for page in self.docs_dir.rglob("*.html"):
                if page.stat().st_mtime >= started - 1:
                    page.write_text(without_scripts(page.read_text()))
