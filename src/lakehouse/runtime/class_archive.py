"""The driver JVM's class-data-sharing archive.

A JVM spends its first seconds loading and verifying classes, Spark's some
twenty thousand of them, and every `lakehouse` command and every Airflow
task starts a new driver JVM. Java's class-data sharing maps classes that
one run recorded in an archive instead (docs/benchmarks.md has the figures):
a driver JVM records the classes it loaded when it exits
(`-XX:ArchiveClassesAtExit`), and `runtime.spark.driver_java_options` hands
the archive to every driver JVM after that (`-XX:SharedArchiveFile`).

Recorded once per Python environment (it lives in `sys.prefix`), either by the
first real run (`python -m lakehouse.runtime.class_archive -- run`, what `make
run` does: the command runs as usual and records the archive if there is none
yet) or over a small sample in a scratch folder (`python -m
lakehouse.runtime.class_archive`, what `make setup` does). A JVM that finds the
archive does not match its own class path (another JDK, other jars) ignores it
and runs as without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lakehouse.environment import environment

ARCHIVE_NAME = "lakehouse-classes.jsa"
SAMPLE_EVENTS = 2000
# Set for a command that records the archive: where its driver JVM writes it at exit.
RECORDING = "LAKEHOUSE_CLASS_ARCHIVE_RECORDING"


def archive_path() -> Path:
    return Path(sys.prefix) / ARCHIVE_NAME


def recording() -> str | None:
    """Where this process's driver JVM records the archive, when it does."""
    return environment().class_archive_recording


def record(archive: Path, commands: list[list[str]], quiet: bool) -> int:
    """Run `lakehouse` commands one after another, the driver JVMs recording the classes
    they load; the last one's archive replaces `archive` once complete, if every
    command succeeded. Returns the first failed command's exit code, else 0."""
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    env = {**os.environ, RECORDING: str(partial)}
    try:
        for command in commands:
            done = subprocess.run(
                [sys.executable, "-m", "lakehouse", *command],
                env=env,
                capture_output=quiet,
                text=True,
            )
            if done.returncode != 0:
                if quiet:
                    sys.stderr.write(done.stdout + done.stderr)
                return done.returncode
        recorders_exited(partial)
        if partial.is_file():
            partial.replace(archive)
        return 0
    finally:
        partial.unlink(missing_ok=True)


def recorders_exited(partial: Path, timeout: float = 300.0) -> None:
    """Wait for the JVMs recording into `partial` to exit: a driver JVM outlives its
    Python process (it exits when its stdin closes) and writes the archive on its way
    out, after the command has returned."""
    option = f"-XX:ArchiveClassesAtExit={partial}".encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        recording = False
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                recording = recording or option in cmdline.read_bytes()
            except OSError:  # the process ended while we looked
                continue
        if not recording:
            return
        time.sleep(0.2)


def record_over_sample(archive: Path) -> None:
    """Record the archive anew from a run over a small sample, in a scratch data root."""
    with tempfile.TemporaryDirectory(prefix="lakehouse-class-archive-") as scratch:
        root = ["--data-root", scratch]
        sample = ["--events", str(SAMPLE_EVENTS), "--seed", "7", "--days", "2"]
        failed = record(archive, [["generate", *root, *sample], ["run", *root]], quiet=True)
    if failed:
        raise SystemExit("recording the class archive: a sample run failed")
    if not archive.is_file():
        raise SystemExit(f"recording the class archive: the JVM wrote no {archive}")


def main(argv: list[str]) -> int:
    archive = archive_path()
    if argv[:1] == ["--"]:
        command = argv[1:]
        if archive.is_file():
            return subprocess.run([sys.executable, "-m", "lakehouse", *command]).returncode
        return record(archive, [command], quiet=False)
    record_over_sample(archive)
    print(f"class archive: {archive} ({archive.stat().st_size / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
