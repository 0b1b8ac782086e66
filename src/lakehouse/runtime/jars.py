"""The JVM libraries beyond Spark's own, fetched from Maven Central the first time one is
needed, and checked against the SHA-256 the repository pins for every jar.

Each bundle is a folder of the jars folder (`jars/` of the checkout, or the `jars_dir`
setting) with a `pom.xml` that pins its artifacts by version and, beside it,
`jars.sha256` that pins every jar Maven copies from it by content (`sha256sum`'s
format; `python -m lakehouse.runtime.jars --pin BUNDLE` writes it from a fetch):

- `delta`: Delta Lake's connector and Spark's Kafka connector, on Spark's
  classpath for every session (`make setup` fetches it);
- `s3`: Hadoop's S3A connector and the AWS SDK bundle (686 MB), plus our Delta log
  store compiled against them: only for a data root on S3, fetched the first
  time a session needs it;
- `kafka-broker`: Apache Kafka, for the local broker (`make kafka-up`);
- `s3proxy`: S3Proxy, the local S3 server (`make s3-up`).

A fetch copies the jars into a new folder (`.fetch-<bundle>` in the jars folder). Maven
checks Maven Central's checksums only when it downloads (`--strict-checksums`), not
what its local repository (~/.m2) already holds, so every jar is then hashed and
compared with the pins: one that differs, or that the pins do not name, is refused in
one line naming it. Only then are the jars swapped into the bundle's folder: a fetch
that fails (Maven offline, a refused jar) leaves the jars that were there. The marker
(`.fetched`) records the digest of the sources the jars came from (the pom and the
pins; for s3 the log store's pom, pins and source too) and each jar's size and SHA-256.

Before a session, the broker or the S3 server uses a bundle (`ensure`), the marker
vouches for it when the sources' digest is still the one recorded and every jar has
the name and size recorded: a few `stat` calls, no hashing, since hashing the s3
bundle at each session would cost more than the rest of the check by far. A jar
replaced by another of the very same size after the check goes unseen there;
`--verify` hashes everything again on demand. Without a marker that vouches (none, as
in a folder copied without it or one fetched by 0.10; or one whose jars have changed
since), a folder that holds exactly the jars the pins name is hashed in full and
recorded, with no Maven; a jar that differs from its pin is refused. A marker that
records other sources (a pom that says something else: content, not modification
time, decides) means a fetch.

The log store's jar (s3) is compiled here by javac, not fetched: its bytes depend on
the JDK that compiles it and `jar` stamps each entry with the time, so no SHA-256 in
the repository could match it. What it is built from is pinned instead: its source
(checked in, part of the sources' digest) and the jars it is compiled against
(log-store/jars.sha256 and the delta bundle); annotation processing is off, and its
SHA-256 is recorded in the marker when it is built. An s3 bundle without a marker
that vouches for it is therefore fetched and built again.

Standard library only, so that `make` (and the image's jars stage) can fetch with any
Python 3.11 while the virtual environment installs:
`python -m lakehouse.runtime.jars [--pin | --verify] delta s3 ...`.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
PINS = "jars.sha256"


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
    """What the bundle's jars are fetched, checked and built from."""
    folder = bundle_dir(name, root)
    found = [folder / "pom.xml", folder / PINS]
    if name == "s3":
        log_store = root / "log-store"
        found += [log_store / "pom.xml", log_store / PINS, log_store / "FencedS3LogStore.java"]
    return found


def sources_digest(name: str, root: Path) -> str:
    """The SHA-256 of the bundle's sources' names (in the jars folder) and content."""
    lines = [
        f"{source.relative_to(root)} {sha256(source) if source.is_file() else '-'}\n"
        for source in sources(name, root)
    ]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def sha256(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def jars_in(folder: Path) -> dict[str, Path]:
    return {jar.name: jar for jar in sorted(folder.glob("*.jar"))}


def marker(folder: Path) -> dict[str, Any] | None:
    """The bundle's marker: {"sources": digest, "jars": {name: [size, sha256]}}, or None
    (none, or not one of this form: 0.10 wrote an empty file)."""
    try:
        found = json.loads((folder / MARKER).read_text())
        if isinstance(found.get("sources"), str) and all(
            isinstance(size, int) and isinstance(digest, str)
            for size, digest in found["jars"].values()
        ):
            return dict(found)
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        pass
    return None


def fetched(name: str, root: Path) -> bool:
    """Whether the marker vouches for the bundle: its jars are the ones fetched, checked
    (and built) from its sources as they are now, by name and size."""
    folder = bundle_dir(name, root)
    found = marker(folder)
    try:
        return (
            found is not None
            and found["sources"] == sources_digest(name, root)
            and {jar: size for jar, (size, _) in found["jars"].items()}
            == {jar: path.stat().st_size for jar, path in jars_in(folder).items()}
        )
    except FileNotFoundError:  # a jar another process's fetch just swapped out
        return False


def named(name: str, root: Path = CHECKOUT_JARS) -> list[Path]:
    """The bundle's jars, named by its pins (and the s3 bundle's log store), fetched or
    not: what a configuration names; `ensure` makes them present before a JVM needs them."""
    folder = bundle_dir(name, root)
    found = [folder / jar for jar in pins(folder / PINS, name)]
    if name == "s3":
        found.append(folder / LOG_STORE_JAR)
    return sorted(found)


def ensure(name: str, root: Path = CHECKOUT_JARS) -> Path:
    """The bundle's folder, checked or fetched first if its marker does not vouch for it
    (one line on stderr says when it fetches). Processes that need the same bundle at
    once fetch it once: the others wait for the first."""
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
        if not fetched(name, root) and not adopted(name, root):
            print(
                f"fetching {BUNDLES[name].what} from Maven Central into {folder}", file=sys.stderr
            )
            fetch(name, root)
    return folder


def adopted(name: str, root: Path) -> bool:
    """Check a folder that holds exactly the pinned jars in full and record it, when no
    marker says it came from other sources. A jar that differs from its pin is refused."""
    folder = bundle_dir(name, root)
    found, digest = marker(folder), sources_digest(name, root)
    present = jars_in(folder)
    if name == "s3":
        present.pop(LOG_STORE_JAR, None)
    if (found is not None and found["sources"] != digest) or not (folder / PINS).is_file():
        return False
    if not present or present.keys() != pins(folder / PINS, name).keys():
        return False
    checked = check(present, folder / PINS, name)
    if name == "s3":  # its log store's jar is built here, not pinned: build it again
        return False
    record(folder, digest, checked)
    return True


def pins(path: Path, name: str) -> dict[str, str]:
    """The jar names and SHA-256s a pins file holds."""
    if not path.is_file():
        raise LakehouseError(
            f"no {path}: the SHA-256 of every jar its pom fetches; write it with "
            f"`python -m lakehouse.runtime.jars --pin {name}` and check it in."
        )
    found = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, _, jar = line.partition("  ")
            found[jar] = digest
    return found


def write_pins(path: Path, fetched_jars: Path, name: str) -> None:
    lines = [
        f"# The SHA-256 of every jar {path.parent.name}/pom.xml fetches, in sha256sum's "
        f"format: `python -m lakehouse.runtime.jars --pin {name}` writes it.\n",
        *(f"{sha256(jar)}  {jar.name}\n" for jar in jars_in(fetched_jars).values()),
    ]
    path.write_text("".join(lines))


def check(
    found: dict[str, Path], pinned_by: Path, name: str, from_maven: bool = False
) -> dict[str, list[Any]]:
    """Each jar's size and SHA-256, once every jar is the one `pinned_by` pins; else a
    one-line error naming the first that is not (or the first pinned one missing)."""
    pinned = pins(pinned_by, name)
    again = f"after changing the pom, pin again: python -m lakehouse.runtime.jars --pin {name}"
    for jar in sorted(found.keys() - pinned.keys()):
        where = f"Maven fetched {jar}" if from_maven else str(found[jar])
        raise LakehouseError(f"{where}, which {pinned_by} does not pin; {again}")
    for jar in sorted(pinned.keys() - found.keys()):
        raise LakehouseError(f"{pinned_by} pins {jar}, which Maven did not fetch; {again}")
    checked = {}
    for jar, path in found.items():
        digest = sha256(path)
        if digest != pinned[jar]:
            where, again = (
                (f"{jar}, as Maven copied it from its local repository (~/.m2)", "downloaded")
                if from_maven
                else (str(path), "fetched")
            )
            raise LakehouseError(
                f"{where}: SHA-256 {digest} is not the {pinned[jar]} that {pinned_by} pins: "
                f"refused (delete it, and it is {again} again)"
            )
        checked[jar] = [path.stat().st_size, digest]
    return checked


def fetch(name: str, root: Path, pin: bool = False) -> None:
    """Fetch (and build) the bundle's jars into a new folder, check them against the pins
    (with `pin`, write the pins from them first), then swap them in."""
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
        if pin:
            write_pins(folder / PINS, staging, name)
        checked = check(jars_in(staging), folder / PINS, name, from_maven=True)
        if name == "s3":
            checked[LOG_STORE_JAR] = build_log_store(root, staging, pin)
        if pin:
            digest = sources_digest(name, root)
        swap(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    record(folder, digest, checked)


def swap(staging: Path, folder: Path) -> None:
    """Move the new jars in (each replacing its namesake at once), then drop the jars the
    bundle no longer has. The marker goes first: a swap cut short is checked again."""
    (folder / MARKER).unlink(missing_ok=True)
    new = jars_in(staging)
    for jar, path in new.items():
        path.replace(folder / jar)
    for old in folder.glob("*.jar"):
        if old.name not in new:
            old.unlink()


def record(folder: Path, digest: str, checked: dict[str, list[Any]]) -> None:
    """Write the bundle's marker (a whole file or none: written aside, then renamed)."""
    partial = folder / f"{MARKER}.partial"
    partial.write_text(json.dumps({"sources": digest, "jars": checked}, indent=1) + "\n")
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


def build_log_store(root: Path, staging: Path, pin: bool) -> list[Any]:
    """Our Delta log store for S3 (log-store/FencedS3LogStore.java: a writer that lost the
    data root's lock cannot commit), compiled against the Hadoop client API pyspark
    ships (fetched, checked against log-store/jars.sha256 and not kept) and Delta's
    delta-storage, into the s3 bundle's new jars. Its size and SHA-256."""
    source = root / "log-store"
    api = staging / "log-store"
    api.mkdir()
    maven(source / "pom.xml", api)
    if pin:
        write_pins(source / PINS, api, "s3")
    check(jars_in(api), source / PINS, "s3", from_maven=True)
    classpath = f"{api}/*:{bundle_dir('delta', root)}/*"
    archive = staging / LOG_STORE_JAR
    with tempfile.TemporaryDirectory(prefix="lakehouse-log-store-") as classes:
        java = str(source / "FencedS3LogStore.java")
        run(
            ["javac", "--release", "17", "-proc:none", "-d", classes, "-cp", classpath, java],
            f"javac could not compile {java}",
        )
        run(
            ["jar", "--create", "--file", str(archive), "-C", classes, "."],
            f"jar could not write {archive}",
        )
    for stale in source.glob("*.jar"):  # where 0.10 kept the API jar
        stale.unlink()
    return [archive.stat().st_size, sha256(archive)]


def verify(name: str, root: Path = CHECKOUT_JARS) -> int:
    """Hash the bundle's jars again, all of them: each must be the one pinned (the log
    store's jar, the one recorded when it was built). The number of jars checked."""
    folder = bundle_dir(name, root)
    found = marker(folder)
    if found is None or not fetched(name, root):
        raise LakehouseError(
            f"{folder}: {BUNDLES[name].what} are not the ones fetched from its sources as they "
            f"are now: python -m lakehouse.runtime.jars {name}"
        )
    present = jars_in(folder)
    built = present.pop(LOG_STORE_JAR, None) if name == "s3" else None
    check(present, folder / PINS, name)
    if built is not None and (digest := sha256(built)) != found["jars"][LOG_STORE_JAR][1]:
        raise LakehouseError(
            f"{built}: SHA-256 {digest} is not the one recorded when it was built: refused "
            "(delete it, and it is built again)"
        )
    return len(present) + (built is not None)


def pin(name: str, root: Path) -> None:
    """Fetch the bundle again and pin the jars Maven copied (a pom changed: its versions)."""
    if name == "s3":
        ensure("delta", root)
    with open(root / ".fetch.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        print(f"fetching {BUNDLES[name].what} to pin them", file=sys.stderr)
        fetch(name, root, pin=True)


def main(argv: list[str], root: Path = CHECKOUT_JARS) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lakehouse.runtime.jars",
        description="Fetch the bundles that are not fetched yet, checked against their pins.",
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--pin",
        action="store_true",
        help="fetch again and write each bundle's jars.sha256 from what Maven copied",
    )
    what.add_argument("--verify", action="store_true", help="hash every jar of each bundle again")
    parser.add_argument("bundles", nargs="+", choices=list(BUNDLES), metavar="BUNDLE")
    args = parser.parse_args(argv)
    try:
        for name in args.bundles:
            if args.pin:
                pin(name, root)
            elif args.verify:
                print(f"{name}: {verify(name, root)} jars as pinned")
            else:
                ensure(name, root)
    except LakehouseError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
