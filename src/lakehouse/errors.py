"""Errors the pipeline expects and explains: the CLI prints the message, not a stack trace."""

from __future__ import annotations


class LakehouseError(RuntimeError):
    """A failure whose message says what went wrong and what to do about it."""


# Exit codes of the `lakehouse` CLI (2, bad arguments, is argparse's): 1 is a failure,
# the others are answers the job reached, which Airflow tells from a transient failure
# and does not retry (lakehouse.orchestration.operators).
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_BLOCKED = 3
# The command refused to start because of the state it found (a backfill while the
# streams still have rows to write): said in one line, and not retried by Airflow.
EXIT_REFUSED = 4
# `lakehouse parity` finished and found streaming and batch differ: the same tables give
# the same answer, so it is not retried either; 1 stays "could not finish".
EXIT_DIFFERENCES = 5
