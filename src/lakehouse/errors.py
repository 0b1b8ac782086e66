"""Errors the pipeline expects and explains: the CLI prints the message, not a stack trace."""

from __future__ import annotations


class LakehouseError(RuntimeError):
    """A failure whose message says what went wrong and what to do about it."""


# Exit codes of the `lakehouse` CLI (2, bad arguments, is argparse's). A
# blocked quality gate has its own code so that Airflow can tell it from a
# transient failure and not retry it (src/lakehouse/orchestration/operators.py).
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_BLOCKED = 3
# The command refused to start because of the state it found (a backfill while the
# streams still have rows to write): said in one line, and not retried by Airflow.
EXIT_REFUSED = 4
