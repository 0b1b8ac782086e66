"""Data roots that several modules read: each built once per test session."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from tests.helpers import run_in_process


@pytest.fixture(scope="session")
def streamed_root(spark, tmp_path_factory, worker_id) -> Path:
    """Generated events (3,000, one day, no late ones) after one `lakehouse run`, in this
    process on the tests' Spark session (`run_in_process`: a cold process would take
    twice as long; `lakehouse run` as a process of its own runs to its end on an S3 root
    in test_object_store.py and as Airflow's tasks in test_airflow_ui.py).

    Read only: a test that writes to it copies it first (a backfill may), or
    copies its landing folder to a root of its own (a run must: the file
    streams' checkpoints hold the landing files' absolute paths).

    Built once for all of pytest-xdist's workers, the way xdist's documentation shares a
    session fixture: in the directory above each worker's own temporary one, under a
    lock, by the first worker that needs it; the others wait for it and read it.
    """
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent
    root, done = shared / "streamed", shared / "streamed" / "run.out"
    with (shared / "streamed.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return root
        if root.exists():
            pytest.fail(f"another worker's build of {root} failed: see its error")
        generated = run_in_process(
            "generate",
            "--events",
            "3000",
            "--seed",
            "9",
            "--late-rate",
            "0",
            "--data-root",
            str(root),
        )
        assert generated.returncode == 0, generated.stderr
        ran = run_in_process("run", "--data-root", str(root))
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
        done.write_text(ran.stdout)
    return root


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A local S3 API server (S3Proxy, as `make s3-up` starts it) on a free port, for
    tests that put a data root on object storage; stopped at the end of the session."""
    from dev.s3_server import S3Server, free_port

    server = S3Server(tmp_path_factory.mktemp("s3-server"), free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()
