"""The data root's writer lock, between real processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lakehouse.runtime.locks import LOCK_FILE, WriterBusyError, writer_lock

HOLD = """
import sys, time
from pathlib import Path
from lakehouse.runtime.locks import writer_lock
with writer_lock(Path(sys.argv[1]), "lakehouse run", 0, print):
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def hold(root: Path, seconds: float) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(root), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "locked"
    return process


@pytest.mark.system
def test_a_second_writer_that_will_not_wait_is_told_who_holds_the_root(tmp_path):
    holder = hold(tmp_path, 30)
    try:
        with pytest.raises(WriterBusyError) as busy, writer_lock(tmp_path, "lakehouse backfill", 0):
            pytest.fail("acquired a lock another process holds")
        message = str(busy.value)
        assert f"pid {holder.pid}" in message and "lakehouse run" in message
        assert "LAKEHOUSE_LOCK_TIMEOUT" in message
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.system
def test_a_second_writer_waits_for_the_first_to_finish(tmp_path):
    holder = hold(tmp_path, 2)
    said: list[str] = []
    started = time.monotonic()
    with writer_lock(tmp_path, "lakehouse backfill", 60, said.append):
        waited = time.monotonic() - started
    assert waited > 1.5, "entered while the holder was still holding the lock"
    assert len(said) == 1 and "waiting for the writer lock" in said[0]
    assert holder.wait() == 0


@pytest.mark.system
def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    holder = hold(tmp_path, 60)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with writer_lock(tmp_path, "lakehouse run", 0):
        assert "lakehouse run" in (tmp_path / LOCK_FILE).read_text()
    assert (tmp_path / LOCK_FILE).read_text() == ""
