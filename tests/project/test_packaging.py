"""The files that ship the project stay consistent with each other."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.helpers import REPO


def pins(path: str) -> dict[str, str]:
    found = {}
    for line in (REPO / path).read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", line)
        if match:
            found[match.group(1).lower().replace("_", "-")] = match.group(2)
    return found


def requirement_lines(path: str) -> list[str]:
    """The package lines of a lock (`name==version \\`), without hashes and comments."""
    lines = [line.split("#")[0].strip() for line in (REPO / path).read_text().splitlines()]
    return [line.removesuffix("\\").strip() for line in lines if line and line[0].isalnum()]


def test_locks_pin_every_package_exactly_with_hashes_and_agree_with_the_top_level_pins():
    lock = pins("requirements.txt")
    everything = pins("requirements-dev.txt")
    for path in ("requirements.txt", "requirements-dev.txt"):
        lines = requirement_lines(path)
        assert lines and all("==" in line for line in lines), f"{path}: exact versions"
        text = (REPO / path).read_text()
        # Every package line is followed by its hashes: pip installs in hash-checking mode.
        assert text.count("==") == len(re.findall(r"==\S+ \\\n\s+--hash=sha256:", text)), path
    # The development environment runs the runtime at the runtime lock's versions.
    assert {name: everything.get(name) for name in lock} == lock
    # What pyproject.toml pins exactly, the locks pin at that version.
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    declared = [
        *project["project"]["dependencies"],
        *project["project"]["optional-dependencies"]["airflow"],
        *project["dependency-groups"]["dev"],
    ]
    for requirement in declared:
        match = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)$", requirement)
        if match:
            assert everything.get(match.group(1).lower()) == match.group(2), requirement
    # pyspark-client installs into pyspark/: a mismatch silently breaks pandas UDFs.
    assert lock["pyspark"] == lock["pyspark-client"]


def test_delta_jars_match_the_python_packages():
    """The jars Maven fetches (jars/pom.xml) are Delta's for our Spark, at delta-spark's version."""
    pom = (REPO / "jars" / "pom.xml").read_text()
    lock = pins("requirements.txt")
    delta = re.search(r"<delta.version>([^<]+)</delta.version>", pom)
    spark = re.search(r"<spark.binary>([^<]+)</spark.binary>", pom)
    assert delta and spark
    assert delta.group(1) == lock["delta-spark"]
    assert spark.group(1) == ".".join(lock["pyspark"].split(".")[:2])
    assert "delta-spark_${spark.binary}_${scala.binary}" in pom
    # Spark's Kafka connector is exactly pyspark's release.
    connector = re.search(r"<spark.version>([^<]+)</spark.version>", pom)
    assert connector and connector.group(1) == lock["pyspark"]
    assert "spark-sql-kafka-0-10_${scala.binary}" in pom
    # The image fetches the same jars at build time into the folder sessions read.
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "jars/pom.xml" in dockerfile and "./jars/" in dockerfile


def test_the_s3_connector_is_hadoops_at_the_version_pyspark_ships():
    """hadoop-aws must be built against the Hadoop on Spark's classpath (pyspark's jars)."""
    import pyspark

    shipped = sorted(
        (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"), key=str
    )
    assert len(shipped) == 1, shipped
    hadoop = shipped[0].name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    pom = (REPO / "jars" / "s3" / "pom.xml").read_text()
    assert f"<hadoop.version>{hadoop}</hadoop.version>" in pom
    assert "<artifactId>hadoop-aws</artifactId>" in pom
    # Our S3 log store is compiled against the same Hadoop API, in the image too.
    log_store = (REPO / "jars" / "log-store" / "pom.xml").read_text()
    compiled = re.search(r"hadoop-client-api</artifactId>\s*<version>([^<]+)<", log_store)
    assert compiled and compiled.group(1) == hadoop
    assert "COPY jars/log-store/pom.xml " in (REPO / "Dockerfile").read_text()
    # S3Proxy, the local S3 server, is pinned and never on Spark's classpath.
    server = (REPO / "jars" / "s3proxy" / "pom.xml").read_text()
    assert re.search(r"<artifactId>s3proxy</artifactId>\s*<version>[\d.]+</version>", server)


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    assert "make test" in readme
    assert "make test" in (REPO / ".ci" / "run").read_text()


@pytest.mark.system
def test_great_expectations_is_imported_only_when_validating():
    """The CLI and the pipeline modules import fast: GX, slow to import, only when a suite runs."""
    import subprocess
    import sys

    code = (
        "import sys, lakehouse.cli, lakehouse.drivers.pipeline, lakehouse.quality.validate, "
        "lakehouse.quality.runner; "
        "print(any(m.split('.')[0] == 'great_expectations' for m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"


@pytest.mark.system
def test_the_wheel_holds_the_package_alone_and_imports_in_an_empty_venv(tmp_path):
    """`lakehouse` from a built wheel, installed into a new virtual environment: the
    package and its data (suites, templates, log4j settings), no dev tools."""
    import subprocess
    import sys
    import zipfile

    uv = Path(sys.executable).with_name("uv")
    subprocess.run(
        [str(uv), "build", "--wheel", "--quiet", "-o", str(tmp_path / "dist"), str(REPO)],
        check=True,
    )
    (wheel,) = (tmp_path / "dist").glob("lakehouse-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    version = wheel.name.split("-")[1]
    assert {name.split("/")[0] for name in names} == {"lakehouse", f"lakehouse-{version}.dist-info"}
    assert "lakehouse/quality/suites/silver/clicks.json" in names
    assert "lakehouse/reports/templates/run.html.j2" in names
    assert "lakehouse/runtime/log4j2.properties" in names
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    install = [str(uv), "pip", "install", "--quiet", "--no-deps", "--python", python, str(wheel)]
    subprocess.run(install, check=True)
    done = subprocess.run(
        [python, "-c", "import lakehouse; print(lakehouse.__version__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == version
