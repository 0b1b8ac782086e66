"""Named crash points for fault-injection tests.

`LAKEHOUSE_CRASH_AT=<point>[:<n>][+<ms>]` makes the process SIGKILL itself the
n-th time (default first) it reaches `crash_point(<point>)`, or, with `+<ms>`,
that many milliseconds later from a timer thread, while the code after the
point (a Delta commit, say) is running. `LAKEHOUSE_PAUSE_AT=<point>[:<n>]`
makes it SIGSTOP itself there instead, for a test to resume with SIGCONT (a
writer paused past its lease). Read from the environment at each point.
Points sit where a crash is hardest to survive: after data files are written
but before their Delta commit, and after the commit but before Spark records
the micro-batch in its checkpoint.

Points: `write.before_commit`, `write.after_commit` around every Delta write
(a stream's micro-batch append or MERGE, backfill replacements, ledger and
results appends);
`stream.after_query` (every micro-batch of a run committed, nothing recorded
after it yet) and `stream.before_sidecar` (the late dates recorded, the
checkpoint's sidecar not moved on) in `lakehouse.drivers.streaming.run_available_now`.
"""

from __future__ import annotations

import os
import re
import signal
import threading

from lakehouse.environment import environment

_SPEC = re.compile(r"(?P<point>[\w.]+)(?::(?P<nth>\d+))?(?:\+(?P<ms>\d+))?")
_hits: dict[str, int] = {}


def _reached(spec: str, point: str, variable: str, counter: str) -> re.Match[str] | None:
    """The parsed spec when this is the hit of `point` it names; else None."""
    parsed = _SPEC.fullmatch(spec)
    if parsed is None:
        raise ValueError(f"{variable} must be <point>[:<n>][+<ms>], got {spec!r}")
    if parsed["point"] != point:
        return None
    _hits[counter] = _hits.get(counter, 0) + 1
    return parsed if _hits[counter] == int(parsed["nth"] or 1) else None


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def crash_point(point: str) -> None:
    env = environment()
    pause = env.pause_at
    if pause and _reached(pause, point, "LAKEHOUSE_PAUSE_AT", f"pause:{point}") is not None:
        os.kill(os.getpid(), signal.SIGSTOP)
    spec = env.crash_at
    if not spec:
        return
    parsed = _reached(spec, point, "LAKEHOUSE_CRASH_AT", point)
    if parsed is None:
        return
    if parsed["ms"] is None:
        _die()
    timer = threading.Timer(int(parsed["ms"]) / 1000, _die)
    timer.daemon = True
    timer.start()
