"""The JVM libraries are fetched when first needed, once, and again when their sources'
content changes; a fetch that fails leaves the jars that were there.

Maven here is a stand-in (`mvn` first on PATH) that copies tiny jars from a folder per
pom, or fails as an offline Maven does: no test downloads anything.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from lakehouse.errors import LakehouseError
from lakehouse.runtime import jars

pytestmark = pytest.mark.system

FAKE_MAVEN = """#!{python}
import os, shutil, sys
from pathlib import Path

if os.environ.get("FAKE_MAVEN_FAILS"):
    sys.exit("[ERROR] Could not resolve dependencies: the network is unreachable")
args = sys.argv[1:]
pom = Path(args[args.index("-f") + 1])
output = next(a.split("=", 1)[1] for a in args if a.startswith("-DoutputDirectory="))
for jar in (Path(os.environ["FAKE_M2"]) / pom.parent.name).glob("*.jar"):
    shutil.copy(jar, pom.parent / output / jar.name)
"""


class FakeMaven:
    """What `mvn` copies for each pom (by the name of the pom's folder), or a failure."""

    def __init__(self, repository: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.repository = repository
        self.monkeypatch = monkeypatch

    def publish(self, folder: str, names: list[str]) -> None:
        """Jars Maven copies from the pom in a folder named `folder`, one tiny zip each."""
        published = self.repository / folder
        if published.exists():
            for old in published.glob("*.jar"):
                old.unlink()
        published.mkdir(parents=True, exist_ok=True)
        for name in names:
            with zipfile.ZipFile(published / name, "w") as jar:
                jar.writestr("about.txt", f"{name}\n")

    def fail(self) -> None:
        self.monkeypatch.setenv("FAKE_MAVEN_FAILS", "1")


@pytest.fixture
def maven(tmp_path, monkeypatch) -> FakeMaven:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "mvn"
    script.write_text(FAKE_MAVEN.format(python=sys.executable))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_M2", str(tmp_path / "m2"))
    monkeypatch.delenv("FAKE_MAVEN_FAILS", raising=False)
    return FakeMaven(tmp_path / "m2", monkeypatch)


def pins(folder: Path, published: Path) -> None:
    """The bundle's checked-in SHA-256s of what Maven publishes, as `sha256sum` writes them."""
    lines = [
        f"{hashlib.sha256(jar.read_bytes()).hexdigest()}  {jar.name}\n"
        for jar in sorted(published.glob("*.jar"))
    ]
    (folder / "jars.sha256").write_text("".join(lines))


def bundle(root: Path, maven: FakeMaven, names: list[str], version: int = 1) -> Path:
    """The kafka-broker bundle's pom (at `version`) and pins, Maven publishing `names`."""
    folder = root / "kafka-broker"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pom.xml").write_text(f"<project><!-- version {version} --></project>\n")
    maven.publish("kafka-broker", names)
    pins(folder, maven.repository / "kafka-broker")
    return folder


def contents(folder: Path) -> dict[str, bytes]:
    return {jar.name: jar.read_bytes() for jar in sorted(folder.glob("*.jar"))}


def test_a_bundle_is_fetched_once_and_again_when_its_pom_says_something_else(tmp_path, maven):
    root = tmp_path / "jars"
    folder = bundle(root, maven, ["kafka-1.jar", "scala-1.jar"])
    assert not jars.fetched("kafka-broker", root)
    assert jars.ensure("kafka-broker", root) == folder
    assert jars.fetched("kafka-broker", root)
    assert list(contents(folder)) == ["kafka-1.jar", "scala-1.jar"]
    bundle(root, maven, ["kafka-2.jar", "scala-1.jar"], version=2)
    assert not jars.fetched("kafka-broker", root)
    jars.ensure("kafka-broker", root)
    assert list(contents(folder)) == ["kafka-2.jar", "scala-1.jar"]  # kafka-1.jar is gone


def test_a_pom_that_is_merely_newer_is_not_fetched_again(tmp_path, maven):
    """A copy of the checkout, or another commit checked out, leaves poms newer than the
    fetch with the same content: nothing to fetch (Maven, offline here, is not asked)."""
    root = tmp_path / "jars"
    folder = bundle(root, maven, ["kafka-1.jar"])
    jars.ensure("kafka-broker", root)
    later = (folder / ".fetched").stat().st_mtime + 3600
    os.utime(folder / "pom.xml", (later, later))
    maven.fail()
    assert jars.fetched("kafka-broker", root)
    assert jars.ensure("kafka-broker", root) == folder


def test_a_failed_refetch_leaves_the_jars_that_were_there(tmp_path, maven):
    root = tmp_path / "jars"
    folder = bundle(root, maven, ["kafka-1.jar", "scala-1.jar"])
    jars.ensure("kafka-broker", root)
    before = contents(folder)
    bundle(root, maven, ["kafka-2.jar", "scala-1.jar"], version=2)
    maven.fail()
    with pytest.raises(LakehouseError, match="Maven could not fetch") as refused:
        jars.ensure("kafka-broker", root)
    assert "the network is unreachable" in str(refused.value)
    assert contents(folder) == before
    assert not jars.fetched("kafka-broker", root)  # the next use tries again
    assert not [p.name for p in root.iterdir() if p.name.startswith(".fetch-")]


def log_store(root: Path, source: str) -> None:
    """A log store source that compiles against nothing, and its pom (no jars to copy)."""
    folder = root / "log-store"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pom.xml").write_text("<project/>\n")
    (folder / "jars.sha256").write_text("")
    (folder / "FencedS3LogStore.java").write_text(source)


def test_the_s3_bundle_is_fetched_again_when_the_log_store_source_says_something_else(
    tmp_path, maven
):
    root = tmp_path / "jars"
    root.mkdir()
    (root / "pom.xml").write_text("<project/>\n")
    maven.publish("jars", ["delta-storage-1.jar"])
    pins(root, maven.repository / "jars")
    (root / "s3").mkdir()
    (root / "s3" / "pom.xml").write_text("<project/>\n")
    maven.publish("s3", ["hadoop-aws-1.jar"])
    pins(root / "s3", maven.repository / "s3")
    maven.publish("log-store", [])
    log_store(root, "class FencedS3LogStore {}\n")
    jars.ensure("s3", root)
    assert list(contents(root / "s3")) == ["hadoop-aws-1.jar", jars.LOG_STORE_JAR]
    java = root / "log-store" / "FencedS3LogStore.java"
    os.utime(java, (java.stat().st_mtime + 3600,) * 2)
    assert jars.fetched("s3", root)
    # Built here, the log store's jar is not pinned: the full check compares it with
    # the SHA-256 recorded when it was built.
    jars.verify("s3", root)
    change_one_byte(root / "s3" / jars.LOG_STORE_JAR)
    with pytest.raises(LakehouseError, match=r"lakehouse-log-store\.jar: SHA-256"):
        jars.verify("s3", root)
    java.write_text("class FencedS3LogStore { int fenced; }\n")
    assert not jars.fetched("s3", root)


def test_a_fetched_bundle_starts_no_maven(tmp_path, maven, monkeypatch):
    root = tmp_path / "jars"
    bundle(root, maven, ["kafka-1.jar"])
    jars.ensure("kafka-broker", root)
    monkeypatch.setenv("PATH", "")  # no mvn: ensure must not need it
    assert jars.ensure("kafka-broker", root) == root / "kafka-broker"


def test_a_jars_folder_without_poms_is_refused_in_one_line(tmp_path):
    with pytest.raises(LakehouseError, match="set LAKEHOUSE_JARS_DIR to the jars folder"):
        jars.ensure("kafka-broker", tmp_path)


# Pinned by content: jars.sha256 beside each pom holds the SHA-256 of every jar it fetches.

REPO_JARS = Path(__file__).resolve().parents[2] / "jars"


def delta_bundle_copy(root: Path) -> Path:
    """The checkout's delta bundle as a folder copied without its marker: the pom, the
    pins and the jars (23 MB)."""
    root.mkdir(parents=True)
    for name in ("pom.xml", "jars.sha256"):
        shutil.copy(REPO_JARS / name, root / name)
    for jar in REPO_JARS.glob("*.jar"):
        shutil.copy(jar, root / jar.name)
    return root


def change_one_byte(jar: Path) -> None:
    """The jar's size stays; one byte in its middle does not."""
    with open(jar, "r+b") as file:
        file.seek(jar.stat().st_size // 2)
        byte = file.read(1)
        file.seek(-1, os.SEEK_CUR)
        file.write(bytes([byte[0] ^ 0xFF]))


def one_line(error: pytest.ExceptionInfo[LakehouseError]) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    return message


def test_a_jar_maven_copies_that_is_not_the_pinned_one_is_refused(tmp_path, maven):
    """As from a tampered local repository (~/.m2): Maven checks checksums only when it
    downloads, and copies what it holds."""
    repository = delta_bundle_copy(maven.repository / "jars")
    change_one_byte(repository / "delta-storage-4.4.0.jar")
    root = tmp_path / "jars"
    root.mkdir()
    for name in ("pom.xml", "jars.sha256"):
        shutil.copy(repository / name, root / name)
    with pytest.raises(LakehouseError) as refused:
        jars.ensure("delta", root)
    assert "delta-storage-4.4.0.jar" in one_line(refused)
    assert "SHA-256" in str(refused.value)
    assert not list(root.glob("*.jar")) and not jars.fetched("delta", root)


@pytest.mark.parametrize("found", [None, ""], ids=["no marker", "0.10's empty marker"])
def test_a_bundle_copied_without_its_marker_is_checked_at_first_use(tmp_path, maven, found):
    """No Maven (it fails here): the jars are the pinned ones, hashed once and recorded."""
    root = delta_bundle_copy(tmp_path / "jars")
    if found is not None:
        (root / ".fetched").write_text(found)
    maven.fail()
    assert jars.ensure("delta", root) == root
    assert jars.fetched("delta", root)


def test_a_tampered_jar_in_a_bundle_copy_is_refused_at_first_use(tmp_path, maven):
    root = delta_bundle_copy(tmp_path / "jars")
    change_one_byte(root / "delta-storage-4.4.0.jar")
    maven.fail()
    with pytest.raises(LakehouseError) as refused:
        jars.ensure("delta", root)
    assert one_line(refused).startswith(f"{root / 'delta-storage-4.4.0.jar'}: SHA-256 ")
    assert not jars.fetched("delta", root)


def test_a_jar_changed_after_its_check_is_refused(tmp_path, maven):
    """Each use compares names and sizes with the marker; a jar of another size is hashed
    and refused. One of the same size passes that, and the full check (--verify) refuses it."""
    root = tmp_path / "jars"
    folder = bundle(root, maven, ["kafka-1.jar", "scala-1.jar"])
    jars.ensure("kafka-broker", root)
    jars.verify("kafka-broker", root)
    maven.fail()
    change_one_byte(folder / "kafka-1.jar")
    assert jars.ensure("kafka-broker", root) == folder
    with pytest.raises(LakehouseError) as refused:
        jars.verify("kafka-broker", root)
    assert one_line(refused).startswith(f"{folder / 'kafka-1.jar'}: SHA-256 ")
    with open(folder / "kafka-1.jar", "ab") as jar:
        jar.write(b"\0")
    with pytest.raises(LakehouseError) as refused:
        jars.ensure("kafka-broker", root)
    assert one_line(refused).startswith(f"{folder / 'kafka-1.jar'}: SHA-256 ")


def test_a_jar_the_pins_do_not_name_is_refused(tmp_path, maven):
    """The pom fetches another jar (a new version, a new dependency): pin it first."""
    root = tmp_path / "jars"
    folder = bundle(root, maven, ["kafka-1.jar"])
    jars.ensure("kafka-broker", root)
    (folder / "pom.xml").write_text("<project><!-- version 2 --></project>\n")
    maven.publish("kafka-broker", ["kafka-2.jar"])
    with pytest.raises(LakehouseError) as refused:
        jars.ensure("kafka-broker", root)
    assert "kafka-2.jar" in one_line(refused)
    assert "--pin kafka-broker" in str(refused.value)
    assert list(contents(folder)) == ["kafka-1.jar"]


def test_pinning_writes_the_hashes_of_the_jars_maven_fetched(tmp_path, maven):
    root = tmp_path / "jars"
    folder = root / "kafka-broker"
    folder.mkdir(parents=True)
    (folder / "pom.xml").write_text("<project/>\n")
    maven.publish("kafka-broker", ["kafka-1.jar", "scala-1.jar"])
    assert jars.main(["--pin", "kafka-broker"], root) == 0
    lines = [
        line
        for line in (folder / "jars.sha256").read_text().splitlines()
        if not line.startswith("#")
    ]
    published = maven.repository / "kafka-broker"
    assert lines == [
        f"{hashlib.sha256((published / n).read_bytes()).hexdigest()}  {n}"
        for n in ("kafka-1.jar", "scala-1.jar")
    ]
    assert jars.fetched("kafka-broker", root)
    assert jars.main(["--verify", "kafka-broker"], root) == 0


def test_every_pom_of_the_checkout_has_its_pins_beside_it():
    for pom in sorted(REPO_JARS.glob("**/pom.xml")):
        pinned = (pom.parent / "jars.sha256").read_text().splitlines()
        lines = [line for line in pinned if not line.startswith("#")]
        assert lines, pom
        for line in lines:
            digest, name = line.split("  ")
            assert len(digest) == 64 and int(digest, 16) >= 0 and name.endswith(".jar"), line
