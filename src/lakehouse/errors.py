"""Errors the pipeline expects and explains: the CLI prints the message, not a stack trace."""

from __future__ import annotations

import re
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


_PYTHON_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$", re.MULTILINE)
# A JVM error with Spark's error class (`[FAILED_READ_FILE.NO_HINT] Encountered error
# while reading file ...`), a JVM error without one (py4j's `: java.io.IOException: ...`
# under its "An error occurred while calling o93.execute."), and a JVM error's root
# cause (`Caused by: ...`).
_SPARK_ERROR = re.compile(
    r"([A-Za-z_][\w.$]*(?:Error|Exception)): (\[[A-Z][A-Z0-9_.]*\] [^\n]*?)\s*(?:SQLSTATE: \w+)?$",
    re.MULTILINE,
)
_JAVA_ERROR = re.compile(r"^: ([\w.$]+(?:Error|Exception)): ([^\n]*)$", re.MULTILINE)
_CAUSE = re.compile(r"^Caused by: ([\w.$]+(?:Error|Exception)): ([^\n]*)$", re.MULTILINE)


def explain(error: BaseException) -> str:
    """The cause of a failure in one line, not a JVM stack trace: what the CLI prints
    and the run report keeps.

    A streaming query that failed in Python code (a foreachBatch writer)
    reports it wrapped in Spark's `[STREAM_FAILED] ...` text with the Python
    traceback inside; the innermost Python error line is the useful part.
    A Spark job that failed in the JVM (a file it could not read, a commit the
    object store refused) is a `Py4JJavaError` whose first line names a method
    call: its innermost Spark error (which names the file), or else the Java
    exception, and its root cause are the useful parts.
    """
    text = str(error).strip()
    inner = _PYTHON_ERROR.findall(text)
    if inner:
        name, message = inner[-1]
        return printable(f"{name.rsplit('.', 1)[-1]}: {message}")
    jvm = _SPARK_ERROR.findall(text) or _JAVA_ERROR.findall(text)
    if jvm:
        name, message = jvm[-1]
        causes = [c for c in _CAUSE.findall(text) if c != (name, message)]
        cause = f" ({causes[-1][0].rsplit('.', 1)[-1]}: {causes[-1][1]})" if causes else ""
        return printable(f"{name.rsplit('.', 1)[-1]}: {message}{cause}")
    first = text.splitlines()[0] if text else ""
    return printable(f"{type(error).__name__}: {first}")


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
