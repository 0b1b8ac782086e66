"""The driver JVM's class-data-sharing archive: `python -m lakehouse.runtime.class_archive`.

A JVM spends its first seconds loading and verifying classes, Spark's some
twenty thousand of them, and every `lakehouse` command and every Airflow
task starts a new driver JVM. Java's class-data sharing maps classes that
one run recorded in an archive instead: `make setup` records one by running
the pipeline once over a small sample (`-XX:ArchiveClassesAtExit`), and
`lakehouse.runtime.spark.driver_java_options` hands it to every driver JVM after that
(`-XX:SharedArchiveFile`). About 2.5 s less per JVM start on 2 cores
(docs/benchmarks.md).

The archive belongs to the Python environment whose pyspark jars it
records (it lives in `sys.prefix`): a new environment starts without one.
A JVM that finds the archive does not match its own class path (another
JDK, other jars) ignores it and runs as without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ARCHIVE_NAME = "lakehouse-classes.jsa"
SAMPLE_EVENTS = 2000


def archive_path() -> Path:
    return Path(sys.prefix) / ARCHIVE_NAME


def record(archive: Path) -> None:
    """Run the pipeline over a small sample in a scratch data root, recording the
    classes its driver JVM loads into `archive` (replaced only once complete)."""
    partial = archive.with_name(archive.name + ".partial")
    archive.unlink(missing_ok=True)  # the recording JVM must not load the old one
    partial.unlink(missing_ok=True)
    env = {**os.environ, "JAVA_TOOL_OPTIONS": f"-XX:ArchiveClassesAtExit={partial}"}
    with tempfile.TemporaryDirectory(prefix="lakehouse-class-archive-") as scratch:
        root = ["--data-root", scratch]
        for command in (
            ["generate", *root, "--events", str(SAMPLE_EVENTS), "--seed", "7", "--days", "2"],
            ["run", *root],
        ):
            done = subprocess.run(
                [sys.executable, "-m", "lakehouse", *command],
                env=env,
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                sys.stderr.write(done.stdout + done.stderr)
                raise SystemExit(f"recording the class archive: `lakehouse {command[0]}` failed")
    if not partial.is_file():
        raise SystemExit(f"recording the class archive: the JVM wrote no {partial}")
    partial.replace(archive)


def main() -> int:
    archive = archive_path()
    record(archive)
    print(f"class archive: {archive} ({archive.stat().st_size / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
