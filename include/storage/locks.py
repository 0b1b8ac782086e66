"""One writer at a time per data root.

`run`, `backfill`, `maintain` and `recover` replace, append to and compact the
same Delta tables and share the streams' checkpoints. Delta's optimistic
commits keep each table consistent, but two writers interleaving would still
mix a backfill's replacement with a stream's appends (and a stream restarted
twice at once would fight over its checkpoint). So each of them holds an
exclusive lock on `<data root>/.lakehouse-writer.lock` for its whole run:
a second writer waits (up to `LAKEHOUSE_LOCK_TIMEOUT` seconds), then fails
with a message that names the holder. The kernel releases the lock when its
holder exits, even by SIGKILL, so a crash never leaves a stale lock.

`flock` is per machine: writers on several machines sharing one data root
(NFS) must be serialized by the scheduler (the Airflow pool
`lakehouse_writers`).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from include.errors import LakehouseError

LOCK_FILE = ".lakehouse-writer.lock"
POLL_SECONDS = 0.5


class WriterBusyError(LakehouseError):
    """Another writer held the data root for longer than we were willing to wait."""


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return "another process"
    if not info:
        return "another process"
    where = f"pid {info.get('pid')} on {info.get('host')}"
    return f"{where} ({info.get('command')}, since {info.get('since')})"


@contextmanager
def writer_lock(
    data_root: Path,
    command: str,
    timeout_seconds: float,
    echo: Callable[[str], None] = print,
) -> Iterator[None]:
    """Hold the data root's writer lock for the duration of the block."""
    data_root.mkdir(parents=True, exist_ok=True)
    path = data_root / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_seconds
        announced = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise WriterBusyError(
                        f"another writer is working on {data_root}: {_holder(path)}. "
                        f"Gave up after {timeout_seconds:g} s; run again when it has finished, "
                        "or set LAKEHOUSE_LOCK_TIMEOUT (seconds) to wait longer."
                    ) from None
                if not announced:
                    echo(f"waiting for the writer lock on {data_root}: held by {_holder(path)}")
                    announced = True
                time.sleep(POLL_SECONDS)
        since = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "command": command}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({**holder, "since": since}).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
