"""Named crash points for fault-injection tests.

`LAKEHOUSE_CRASH_AT=<point>[:<n>]` makes the process SIGKILL itself the n-th
time (default first) it reaches `crash_point(<point>)`. Unset, it costs one
dictionary lookup. Points sit where a crash is hardest to survive: after data
files are written but before their Delta commit, and after the commit but
before Spark records the micro-batch in its checkpoint.
"""

from __future__ import annotations

import os
import signal

_hits: dict[str, int] = {}


def crash_point(point: str) -> None:
    spec = os.environ.get("LAKEHOUSE_CRASH_AT")
    if not spec:
        return
    name, _, nth = spec.partition(":")
    if name != point:
        return
    _hits[point] = _hits.get(point, 0) + 1
    if _hits[point] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
