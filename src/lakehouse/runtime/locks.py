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

On an object-store root (`s3a://`) there is no `flock`: the lock is the object
`<data root>/.lakehouse-writer.lock`, created with a conditional write (S3's
`If-None-Match: *`, which only one writer can win) and holding a lease. The
holder renews the lease every third of `lease_seconds()` (a conditional write on its
own version of the object) and deletes the object when done. A holder that
died leaves its object behind: a waiting writer takes it over once the lease
has expired, or at once when the holder ran on the same host and its process
is gone. A holder that could not renew (paused longer than the lease, the
store unreachable) may have lost the lock to another writer: its command then
fails at the end instead of reporting success. Leases compare the writers'
clocks: hosts sharing a root need synchronised clocks (NTP).

The lock object also names its holder by a random token, and the Delta log
store of object-store roots (`jars/log-store/FencedS3LogStore.java`) checks
before every commit that the object still holds this process's token and an
unexpired lease (`held_object_lock`; src/lakehouse/runtime/spark.py passes both to Spark). So
a writer paused past its lease stops at its next commit, and its commit can
never replace another writer's (a conditional PUT of the commit file).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from lakehouse.environment import environment
from lakehouse.errors import LakehouseError
from lakehouse.storage.objects import PreconditionFailedError, Root, S3Path

log = logging.getLogger(__name__)

LOCK_FILE = ".lakehouse-writer.lock"
POLL_SECONDS = 0.5


def lease_seconds() -> float:
    """Seconds a holder's lease runs unrenewed (`LAKEHOUSE_LOCK_LEASE_SECONDS`: tests
    shorten it)."""
    return environment().lock_lease_seconds


# The object lock this process holds: its URI and this holder's token.
_held: dict[str, str] = {}


def held_object_lock() -> tuple[str, str] | None:
    """(lock object URI, token) while this process holds an object-store root's lock."""
    return (_held["uri"], _held["token"]) if _held else None


class WriterBusyError(LakehouseError):
    """Another writer held the data root for longer than we were willing to wait."""


def _holder(path: Root) -> str:
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return "another process"
    return _describe(info)


def _describe(info: dict[str, Any]) -> str:
    if not info:
        return "another process"
    where = f"pid {info.get('pid')} on {info.get('host')}"
    return f"{where} ({info.get('command')}, since {info.get('since')})"


@contextmanager
def writer_lock(
    data_root: Root,
    command: str,
    timeout_seconds: float,
    echo: Callable[[str], None] = print,
) -> Iterator[None]:
    """Hold the data root's writer lock for the duration of the block."""
    if isinstance(data_root, S3Path):
        with _object_lock(data_root, command, timeout_seconds, echo):
            yield
        return
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
                    raise _busy(data_root, _holder(path), timeout_seconds) from None
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


def _busy(data_root: Root, holder: str, timeout_seconds: float) -> WriterBusyError:
    return WriterBusyError(
        f"another writer is working on {data_root}: {holder}. "
        f"Gave up after {timeout_seconds:g} s; run again when it has finished, "
        "or set LAKEHOUSE_LOCK_TIMEOUT (seconds) to wait longer."
    )


def _stale(info: dict[str, Any], now: float) -> bool:
    """A lock object whose holder cannot be working any more."""
    if float(info.get("lease_until", 0)) < now:
        return True
    if info.get("host") == socket.gethostname():
        try:
            os.kill(int(info["pid"]), 0)
        except ProcessLookupError:
            return True
        except (OSError, KeyError, ValueError):
            return False
    return False


class _Lease(threading.Thread):
    """Renews a held lock object's lease until stopped; remembers whether it lost the lock."""

    def __init__(self, path: S3Path, holder: dict[str, Any], etag: str) -> None:
        super().__init__(name="lakehouse-writer-lease", daemon=True)
        self.path, self.holder, self.etag = path, holder, etag
        self.stopped = threading.Event()
        self.lost: str | None = None

    def run(self) -> None:
        while not self.stopped.wait(lease_seconds() / 3):
            body = {**self.holder, "lease_until": time.time() + lease_seconds()}
            try:
                self.etag = self.path.put(json.dumps(body).encode(), if_match=self.etag)
            except PreconditionFailedError:
                self.lost = "another writer took the lock over (this writer's lease had expired)"
                return
            except Exception as error:  # the store unreachable: try again at the next beat
                log.warning("could not renew the writer lock's lease: %s", error)


@contextmanager
def _object_lock(
    data_root: S3Path, command: str, timeout_seconds: float, echo: Callable[[str], None]
) -> Iterator[None]:
    path = data_root / LOCK_FILE
    since = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    token = uuid.uuid4().hex
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": command,
        "since": since,
        "token": token,
    }
    deadline = time.monotonic() + timeout_seconds
    announced = False
    while True:
        body = json.dumps({**holder, "lease_until": time.time() + lease_seconds()}).encode()
        try:
            etag = path.put(body, if_none_match=True)
            break
        except PreconditionFailedError:
            pass
        try:
            content, current = path.read_with_etag()
            info = json.loads(content or b"{}")
        except FileNotFoundError:
            continue  # released meanwhile: try again at once
        except ValueError:
            info, current = {}, ""
        if current and _stale(info, time.time()):
            try:
                etag = path.put(body, if_match=current)
                echo(f"took over the writer lock on {data_root} from {_describe(info)}")
                break
            except PreconditionFailedError:
                continue  # another writer was quicker
        if time.monotonic() >= deadline:
            raise _busy(data_root, _describe(info), timeout_seconds)
        if not announced:
            echo(f"waiting for the writer lock on {data_root}: held by {_describe(info)}")
            announced = True
        time.sleep(POLL_SECONDS)
    lease = _Lease(path, holder, etag)
    lease.start()
    _held.update(uri=str(path), token=token)
    try:
        yield
    finally:
        _held.clear()
        lease.stopped.set()
        lease.join()
        if lease.lost is None:
            with contextlib.suppress(PreconditionFailedError, FileNotFoundError):
                path.unlink(missing_ok=True, if_match=lease.etag)
    if lease.lost:
        raise LakehouseError(
            f"the writer lock on {data_root} was lost while {command} ran: {lease.lost}. "
            "Its work may have interleaved with another writer's; check the run report and "
            "run it again."
        )
