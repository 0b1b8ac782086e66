"""Errors the pipeline expects and explains: the CLI prints the message, not a stack trace."""

from __future__ import annotations

import unicodedata


class LakehouseError(RuntimeError):
    """A failure whose message says what went wrong and what to do about it."""


class RefusedError(LakehouseError):
    """The command refused to start because of the state it found: its message says
    why and what to run first (exit 4, `EXIT_REFUSED`)."""


def printable(text: str) -> str:
    """`text` with control, format and line-separator characters escaped (`\\n`, `\\x1b`,
    `\\u202e`): a name that came from input, printed, can then neither forge a line of
    the output or of Airflow's log, nor move the cursor, colour or reorder the text."""
    return "".join(
        char.encode("unicode_escape").decode("ascii")
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp")
        else char
        for char in text
    )


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
