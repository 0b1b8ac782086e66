"""The JVM libraries beyond Spark's own, fetched from Maven Central the first time one is needed.

Each bundle is a folder of the jars folder (`jars/` of the checkout, or the
`jars_dir` setting) with a `pom.xml` that pins its artifacts: Maven copies
them, checking Maven Central's checksums (`--strict-checksums`).

- `delta`: Delta Lake's connector and Spark's Kafka connector, on Spark's
  classpath for every session (`make setup` fetches it);
- `s3`: Hadoop's S3A connector and the AWS SDK bundle (686 MB), plus our Delta log
  store compiled against them: only for a data root on S3, fetched the first
  time a session needs it;
- `kafka-broker`: Apache Kafka, for the local broker (`make kafka-up`);
- `s3proxy`: S3Proxy, the local S3 server (`make s3-up`).

A fetch copies the jars into a new folder (`.fetch-<bundle>` in the jars folder) and
swaps them into the bundle's folder only once Maven (and, for s3, javac) succeeded: a
fetch that fails, offline for one, leaves the jars that were there. The bundle's
marker (`.fetched`) then records the digest of the sources it was fetched from (its
pom; for s3 the log store's pom and source too) and each jar's size. A bundle is
fetched again when its sources' content changes, not their modification time (a copy
of the checkout, another commit checked out), or when its jars are not the ones
recorded.

Standard library only, so that `make` can fetch with any Python 3.11 while the
virtual environment installs: `python -m lakehouse.runtime.jars delta s3 ...`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lakehouse.errors import LakehouseError

# The checkout's jars/ (this file is src/lakehouse/runtime/jars.py).
CHECKOUT_JARS = Path(__file__).resolve().parents[3] / "jars"
MAVEN = [
    "mvn",
    "--batch-mode",
    "--quiet",
    "--strict-checksums",
    "-Dstyle.color=never",
    "dependency:copy-dependencies",
]
LOG_STORE_JAR = "lakehouse-log-store.jar"
MARKER = ".fetched"


@dataclass(frozen=True)
class Bundle:
    name: str
    folder: str  # under the jars folder; "" for the jars folder itself
    what: str  # for the line that says a fetch starts


BUNDLES = {
    bundle.name: bundle
    for bundle in (
        Bundle("delta", "", "Delta Lake's and Spark's Kafka connectors"),
        Bundle("s3", "s3", "Spark's S3 connector and the AWS SDK (about 700 MB)"),
        Bundle("kafka-broker", "kafka-broker", "Apache Kafka, for the local broker"),
        Bundle("s3proxy", "s3proxy", "S3Proxy, the local S3 server"),
    )
}


def bundle_dir(name: str, root: Path) -> Path:
    return root / BUNDLES[name].folder


def sources(name: str, root: Path) -> list[Path]:
    """What the bundle's jars are fetched and built from."""
    found = [bundle_dir(name, root) / "pom.xml"]
    if name == "s3":
        found += [root / "log-store" / "pom.xml", root / "log-store" / "FencedS3LogStore.java"]
    return found


def sources_digest(name: str, root: Path) -> str:
    """The SHA-256 of the bundle's sources' names (in the jars folder) and content."""
    lines = [
        f"{source.relative_to(root)} "
        f"{hashlib.sha256(source.read_bytes()).hexdigest() if source.is_file() else '-'}\n"
        for source in sources(name, root)
    ]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def jar_sizes(folder: Path) -> dict[str, int]:
    return {jar.name: jar.stat().st_size for jar in sorted(folder.glob("*.jar"))}


def fetched(name: str, root: Path) -> bool:
    """Whether the bundle's jars are the ones fetched (and built) from its sources as they
    are now: the marker records the sources' digest and each jar's size."""
    folder = bundle_dir(name, root)
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):  # none, or one of 0.10 (empty)
        return False
    return (
        isinstance(marker, dict)
        and marker.get("sources") == sources_digest(name, root)
        and marker.get("jars") == jar_sizes(folder)
    )


def ensure(name: str, root: Path = CHECKOUT_JARS) -> Path:
    """The bundle's folder, its jars fetched first if they are not there yet (one line on
    stderr says so). Processes that need the same bundle at once fetch it once: the
    others wait for the first."""
    folder = bundle_dir(name, root)
    if fetched(name, root):
        return folder
    if name == "s3":
        ensure("delta", root)  # the log store compiles against delta-storage
    if not (folder / "pom.xml").is_file():
        raise LakehouseError(
            f"{BUNDLES[name].what}: no {folder / 'pom.xml'} to fetch them from; set "
            "LAKEHOUSE_JARS_DIR to the jars folder of a lakehouse checkout."
        )
    with open(root / ".fetch.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not fetched(name, root):
            print(
                f"fetching {BUNDLES[name].what} from Maven Central into {folder}", file=sys.stderr
            )
            fetch(name, root)
    return folder


def fetch(name: str, root: Path) -> None:
    """Fetch (and build) the bundle's jars into a new folder, then swap them in."""
    for tool in ("mvn",) + (("javac", "jar") if name == "s3" else ()):
        if shutil.which(tool) is None:
            raise LakehouseError(
                f"{tool} is needed to fetch {BUNDLES[name].what}: install Maven and a JDK 17."
            )
    folder = bundle_dir(name, root)
    digest = sources_digest(name, root)  # before Maven: a pom edited meanwhile is fetched again
    staging = root / f".fetch-{name}"
    shutil.rmtree(staging, ignore_errors=True)  # what a fetch that was killed left
    staging.mkdir()
    try:
        maven(folder / "pom.xml", staging)
        if name == "s3":
            build_log_store(root, staging)
        swap(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    record(name, root, digest)


def swap(staging: Path, folder: Path) -> None:
    """Move the new jars in (each replacing its namesake at once), then drop the jars the
    bundle no longer has. The marker goes first: a swap cut short is fetched again."""
    (folder / MARKER).unlink(missing_ok=True)
    new = {jar.name for jar in staging.glob("*.jar")}
    for name in sorted(new):
        (staging / name).replace(folder / name)
    for old in folder.glob("*.jar"):
        if old.name not in new:
            old.unlink()


def record(name: str, root: Path, digest: str) -> None:
    """Write the bundle's marker (a whole file or none: written aside, then renamed)."""
    folder = bundle_dir(name, root)
    marker = {"sources": digest, "jars": jar_sizes(folder)}
    partial = folder / f"{MARKER}.partial"
    partial.write_text(json.dumps(marker, indent=1) + "\n")
    partial.replace(folder / MARKER)


def run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise LakehouseError(f"{what}:\n{done.stdout}{done.stderr}")


def maven(pom: Path, output: Path) -> None:
    run(
        [*MAVEN, f"-DoutputDirectory={output}", "-f", str(pom)],
        f"Maven could not fetch the jars of {pom}",
    )


def build_log_store(root: Path, staging: Path) -> None:
    """Our Delta log store for S3 (log-store/FencedS3LogStore.java: a writer that lost the
    data root's lock cannot commit), compiled against the Hadoop client API pyspark
    ships and Delta's delta-storage, into the s3 bundle's new jars. The Hadoop API jar
    is only compiled against: it is not kept."""
    source = root / "log-store"
    api = staging / "log-store"
    api.mkdir()
    maven(source / "pom.xml", api)
    classpath = f"{api}/*:{bundle_dir('delta', root)}/*"
    with tempfile.TemporaryDirectory(prefix="lakehouse-log-store-") as classes:
        java = str(source / "FencedS3LogStore.java")
        run(
            ["javac", "--release", "17", "-d", classes, "-cp", classpath, java],
            f"javac could not compile {java}",
        )
        archive = str(staging / LOG_STORE_JAR)
        run(
            ["jar", "--create", "--file", archive, "-C", classes, "."],
            f"jar could not write {archive}",
        )
    for stale in source.glob("*.jar"):  # where 0.10 kept the API jar
        stale.unlink()


def main(argv: list[str]) -> int:
    unknown = [name for name in argv if name not in BUNDLES]
    if not argv or unknown:
        print(
            f"usage: python -m lakehouse.runtime.jars {{{','.join(BUNDLES)}}} ...", file=sys.stderr
        )
        return 2
    try:
        for name in argv:
            ensure(name)
    except LakehouseError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
