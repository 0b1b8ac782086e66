"""The Airflow operator the DAGs submit `lakehouse` commands with.

A `SparkSubmitOperator` that knows the CLI's exit codes: a failed blocking
data-quality check (exit 3) fails the task at once, without the retries meant
for transient failures, because bad data does not heal by running again. It
passes Delta Lake's jars (`make setup` fetched them) to spark-submit with
`--jars`, found when the task runs, not when the scheduler parses the DAG.
Kept apart from `include/orchestration/tasks.py`, which the scheduler imports on
every parse and must stay cheap; this module is imported when a task is built.
"""

from __future__ import annotations

import re
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from include.errors import EXIT_BLOCKED
from include.spark import spark_jars

# How the Spark provider reports a non-zero spark-submit exit code.
_EXIT_CODE = re.compile(r"Error code is: (\d+)\.")


class LakehouseSubmitOperator(SparkSubmitOperator):
    """spark-submit of the `lakehouse` CLI; a blocked data-quality gate is final."""

    def __init__(self, *, object_store: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # A data root on S3 also needs Spark's S3 connector (jars/s3/).
        self.object_store = object_store

    def execute(self, context: Any) -> None:
        self.jars = ",".join(str(jar) for jar in spark_jars(self.object_store))
        try:
            super().execute(context)
        except AirflowException as error:
            code = _EXIT_CODE.search(str(error))
            if code and int(code.group(1)) == EXIT_BLOCKED:
                raise AirflowFailException(
                    "a blocking data-quality check failed (exit code "
                    f"{EXIT_BLOCKED}); not retrying: the same data would fail again. "
                    "The task log and the run report name the table and the rule; "
                    "fix the data, then clear this task."
                ) from error
            raise
