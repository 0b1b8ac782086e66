"""Security basics of what we ship: login required, no secrets, pinned dependencies, the audit."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dev.local_airflow import LocalAirflow
from dev.local_spark_cluster import LocalSparkCluster
from lakehouse.runtime.settings import Settings
from lakehouse.runtime.spark import session_conf
from tests.helpers import REPO

SHIPPED_CONFIG = ["docker-compose.yml", ".env.example", "Dockerfile", "dev/local_airflow.py"]


def tracked_files() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return [REPO / name for name in names if (REPO / name).is_file()]


@pytest.mark.parametrize("name", SHIPPED_CONFIG)
def test_no_shipped_config_turns_airflow_login_off(name):
    text = (REPO / name).read_text()
    assert not re.search(r"ALL_ADMINS\W+(true|True|1)", text), "SimpleAuthManager without login"
    assert "AUTH_MANAGER=" not in text.replace(" ", ""), "auth manager replaced"
    assert not re.search(r"AUTH_ROLE_PUBLIC|AUTH_TYPE\s*=\s*AUTH_NONE", text)


def test_local_airflow_requires_a_generated_password(tmp_path):
    airflow = LocalAirflow(home=tmp_path, port=18080, spark_master="local[*]", data_root=tmp_path)
    env = airflow.env()
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "admin:admin"
    assert "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS" not in env
    passwords = Path(env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
    assert passwords.stat().st_mode & 0o777 == 0o600
    for secret in (tmp_path / "secrets").iterdir():
        assert secret.stat().st_mode & 0o777 == 0o600, secret
    assert len(airflow.password()) >= 16
    assert (tmp_path / "secrets").stat().st_mode & 0o077 == 0
    # The api-server listens on this machine only (Airflow's default is every interface).
    assert env["AIRFLOW__API__HOST"] == "127.0.0.1"


def test_the_local_spark_cluster_has_a_private_secret_its_jobs_are_given(tmp_path):
    cluster = LocalSparkCluster(tmp_path / "spark")
    secret = cluster.secret()
    assert len(secret) >= 32 and cluster.secret() == secret  # generated once, then kept
    assert cluster.secret_file.stat().st_mode & 0o777 == 0o600
    airflow = LocalAirflow(
        home=tmp_path / "airflow",
        spark_master=cluster.master_url,
        data_root=tmp_path,
        spark_secret_file=cluster.secret_file,
    )
    assert airflow.env()["LAKEHOUSE_SPARK_AUTH_SECRET"] == secret
    # A job's session authenticates with it; without one, it asks for nothing.
    with_secret = Settings.load(tmp_path, cluster.master_url)
    with_secret = with_secret.model_copy(update={"spark_auth_secret": secret})
    conf = session_conf(with_secret)
    assert conf["spark.authenticate"] == "true"
    assert conf["spark.authenticate.secret"] == secret
    assert secret not in repr(with_secret)
    assert "spark.authenticate" not in session_conf(Settings.load(tmp_path))


SECRET_PATTERNS = {
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "AWS access key": re.compile(r"AKIA[0-9A-Z]{16}"),
    "Fernet key": re.compile(r"(?<![\w-])[A-Za-z0-9_-]{43}=(?![\w=])"),
    "password assignment": re.compile(
        r"(?i)(password|passwd|secret|token)[\"']?\s*[:=]\s*[\"'][^\"'\s${}<>]{8,}[\"']"
    ),
}


@pytest.mark.system
def test_no_secret_is_committed():
    findings = []
    for path in tracked_files():
        if path.suffix in {".png", ".gz", ".parquet"}:
            continue
        text = path.read_text(errors="ignore")
        for what, pattern in SECRET_PATTERNS.items():
            for match in pattern.finditer(text):
                findings.append(f"{path.relative_to(REPO)}: {what}: {match.group(0)[:40]}")
    assert not findings, "\n".join(findings)


def test_the_secret_patterns_find_what_they_look_for():
    # Samples built at run time, so this file itself holds nothing the scan flags.
    assert SECRET_PATTERNS["password assignment"].search('password: "' + "hunter2" * 2 + '"')
    assert not SECRET_PATTERNS["password assignment"].search("password: ${POSTGRES_PASSWORD}")
    assert SECRET_PATTERNS["Fernet key"].search("key = " + "A" * 43 + "=")


def test_every_dependency_is_pinned_to_one_version():
    lines = (REPO / "requirements.txt").read_text().splitlines()
    requirements = [line.split("#")[0].strip().removesuffix("\\").strip() for line in lines]
    requirements = [line for line in requirements if line and not line.startswith("-")]
    assert requirements
    loose = [
        line for line in requirements if not re.fullmatch(r"[A-Za-z0-9_.\[\],-]+==[\w.+!-]+", line)
    ]
    assert not loose, loose


def load_audit():
    spec = importlib.util.spec_from_file_location("ci_audit", REPO / ".ci" / "audit.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_findings_are_classified_by_the_accepted_ids():
    audit = load_audit()
    report = {
        "dependencies": [
            {"name": "ok", "version": "1.0", "vulns": []},
            {"name": "bad", "version": "2.0", "vulns": [{"id": "PYSEC-1", "aliases": []}]},
            {"name": "known", "version": "3.0", "vulns": [{"id": "GHSA-x", "aliases": ["CVE-9"]}]},
            {"name": "gone", "skip_reason": "Dependency not found on PyPI"},
        ]
    }
    found, known, skipped = audit.classify(report, {"CVE-9"})
    assert [line.split(":")[0] for line in found] == ["bad==2.0"]
    assert [line.split(":")[0] for line in known] == ["known==3.0"]
    assert skipped == ["Dependency not found on PyPI"]


AUDITED = {"name": "ok", "version": "1.0", "vulns": []}
VULNERABLE = {"name": "bad", "version": "2.0", "vulns": [{"id": "PYSEC-1", "aliases": []}]}
NOT_AUDITED = {"name": "gone", "skip_reason": "Dependency not found on PyPI"}


@pytest.mark.system
@pytest.mark.parametrize(
    ("dependencies", "passes", "says"),
    [
        ([AUDITED], True, "audit: no known vulnerabilities"),
        ([AUDITED, VULNERABLE], False, "VULNERABLE: bad==2.0: PYSEC-1"),
        ([VULNERABLE, NOT_AUDITED], False, "VULNERABLE: bad==2.0"),
        ([AUDITED, NOT_AUDITED], True, "audit: INCOMPLETE"),
    ],
    ids=["clean", "finding", "finding-and-incomplete", "incomplete"],
)
def test_make_audit_fails_on_findings_and_never_calls_a_partial_scan_clean(
    tmp_path, dependencies, passes, says
):
    """`make audit` as CI runs it, with a stand-in for pip-audit (whose service is not
    reachable here) that prints a given report: CI's pass or fail, and what it prints."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"dependencies": dependencies}))
    pip_audit = bin_dir / "pip-audit"
    pip_audit.write_text(f"#!/bin/sh\ncat '{report}'\n")
    pip_audit.chmod(0o755)
    done = subprocess.run(
        ["make", "--no-print-directory", "audit", f"AUDIT_VENV={tmp_path}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode == 0) == passes, done.stdout + done.stderr
    assert says in done.stdout
    if not passes or "INCOMPLETE" in says:
        assert "no known vulnerabilities" not in done.stdout


def test_every_report_template_is_autoescaped_and_marks_nothing_safe():
    """Landing values reach the report pages: no template may turn escaping off."""
    from lakehouse.reports.pages import TEMPLATES, _templates

    environment = _templates()
    templates = sorted(TEMPLATES.glob("*.j2"))
    assert templates
    for path in templates:
        template = environment.get_template(path.name)
        assert template.environment.autoescape is True
        source = re.sub(r"\s", "", path.read_text())
        for off in ("|safe", "autoescapefalse", "Markup("):
            assert off not in source, (path.name, off)
    rendered = environment.from_string("{{ value }}").render(value="<script>x</script>")
    assert rendered == "&lt;script&gt;x&lt;/script&gt;"
