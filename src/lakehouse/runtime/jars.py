"""The JVM libraries beyond Spark's own, fetched from Maven Central the first time one is needed.

Each bundle is a folder of the jars folder (`jars/` of the checkout, or the
`jars_dir` setting) with a `pom.xml` that pins its artifacts: Maven copies
them next to it, checking Maven Central's checksums (`--strict-checksums`).

- `delta`: Delta Lake's connector and Spark's Kafka connector, on Spark's
  classpath for every session (`make setup` fetches it);
- `s3`: Hadoop's S3A connector and the AWS SDK bundle (686 MB), plus our Delta log
  store compiled against them: only for a data root on S3, fetched the first
  time a session needs it;
- `kafka-broker`: Apache Kafka, for the local broker (`make kafka-up`);
- `s3proxy`: S3Proxy, the local S3 server (`make s3-up`).

Standard library only, so that `make` can fetch with any Python 3.11 while the
virtual environment installs: `python -m lakehouse.runtime.jars delta s3 ...`.
"""

from __future__ import annotations

import fcntl
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
    "-DoutputDirectory=.",
]
LOG_STORE_JAR = "lakehouse-log-store.jar"


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


def fetched(name: str, root: Path) -> bool:
    """Whether the bundle's jars are there, fetched (and built) from its sources as they are."""
    folder = bundle_dir(name, root)
    done = folder / ".fetched"
    sources = [folder / "pom.xml"]
    if name == "s3":
        sources += [
            root / "log-store" / "pom.xml",
            root / "log-store" / "FencedS3LogStore.java",
        ]
    if not done.is_file():
        return False
    return all(not f.is_file() or f.stat().st_mtime <= done.stat().st_mtime for f in sources)


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
    for tool in ("mvn",) + (("javac", "jar") if name == "s3" else ()):
        if shutil.which(tool) is None:
            raise LakehouseError(
                f"{tool} is needed to fetch {BUNDLES[name].what}: install Maven and a JDK 17."
            )
    folder = bundle_dir(name, root)
    (folder / ".fetched").unlink(missing_ok=True)
    for jar in folder.glob("*.jar"):
        jar.unlink()
    maven(folder)
    if name == "s3":
        build_log_store(root)
    (folder / ".fetched").touch()


def maven(folder: Path) -> None:
    done = subprocess.run([*MAVEN, "-f", str(folder / "pom.xml")], capture_output=True, text=True)
    if done.returncode != 0:
        raise LakehouseError(
            f"Maven could not fetch the jars of {folder / 'pom.xml'}:\n{done.stdout}{done.stderr}"
        )


def build_log_store(root: Path) -> None:
    """Our Delta log store for S3 (log-store/FencedS3LogStore.java: a writer that lost the
    data root's lock cannot commit), compiled against the Hadoop client API pyspark
    ships and Delta's delta-storage, into the s3 bundle."""
    source = root / "log-store"
    for stale in source.glob("*.jar"):
        stale.unlink()
    maven(source)
    classpath = f"{source}/*:{bundle_dir('delta', root)}/*"
    with tempfile.TemporaryDirectory(prefix="lakehouse-log-store-") as classes:
        java = str(source / "FencedS3LogStore.java")
        subprocess.run(
            ["javac", "--release", "17", "-d", classes, "-cp", classpath, java], check=True
        )
        archive = str(bundle_dir("s3", root) / LOG_STORE_JAR)
        subprocess.run(["jar", "--create", "--file", archive, "-C", classes, "."], check=True)


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
