"""docker-compose.yml is a valid Compose file and wires the production-like setup.

There is no Docker engine here, so we do what `docker compose config` does:
load the YAML (anchors and merge keys), interpolate ${VARS} from
.env.example, and parse the result with compose-spec's typed parser, which
rejects unknown keys and wrong types. References between services and
volumes are checked on top.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml
from compose_spec import PyCompose

from tests.helpers import REPO

COMPOSE = REPO / "docker-compose.yml"
EXAMPLE = REPO / ".env.example"
VARIABLE = re.compile(r"\$\{(\w+)(?::?([-?])([^}]*))?\}")


def env_example() -> dict[str, str]:
    lines = EXAMPLE.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def interpolate(value: object, env: dict[str, str]) -> object:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?error}; $$ is a literal $."""

    def one(match: re.Match[str]) -> str:
        name, kind, rest = match.groups()
        if name in env:
            return env[name]
        if kind == "?":
            raise KeyError(f"{name} is required: {rest}")
        return rest or ""

    if isinstance(value, str):
        return VARIABLE.sub(one, value).replace("$$", "$")
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    return value


def resolved(env: dict[str, str]) -> dict:
    raw = yaml.safe_load(COMPOSE.read_text())
    return {k: v for k, v in interpolate(raw, env).items() if not k.startswith("x-")}


@pytest.fixture(scope="module")
def compose() -> dict:
    spec = resolved(env_example())
    parsed = PyCompose.from_json(json.dumps(spec))
    parsed.validate()
    return spec


def test_compose_file_is_valid_against_the_compose_spec(compose):
    services = compose["services"]
    assert set(services) == {
        "postgres",
        "airflow-init",
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
        "spark-master",
        "spark-worker",
        "kafka",
        "s3",
        "lakehouse",
    }
    for name, service in services.items():
        for dependency in service.get("depends_on", []):
            assert dependency in services, f"{name} depends on unknown {dependency}"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert source in compose["volumes"], f"{name} mounts undeclared volume {source}"


def test_the_parser_really_rejects_a_broken_file():
    spec = resolved(env_example())
    spec["services"]["postgres"]["healthcheck"]["retries"] = "many"
    with pytest.raises(ValueError, match="expected u64"):
        PyCompose.from_json(json.dumps(spec))
    spec = resolved(env_example())
    spec["services"]["spark-worker"]["restart_policy"] = "always"
    with pytest.raises(ValueError, match="restart_policy"):
        PyCompose.from_json(json.dumps(spec))


def test_airflow_uses_postgres_and_submits_to_the_spark_cluster(compose):
    services = compose["services"]
    scheduler = services["airflow-scheduler"]["environment"]
    assert scheduler["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
    connection = json.loads(scheduler["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert connection == {"conn_type": "spark", "host": "spark://spark-master:7077"}
    assert "spark://spark-master:7077" in services["spark-worker"]["command"]
    for name in (
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
    ):
        assert services[name]["depends_on"]["airflow-init"] == {
            "condition": "service_completed_successfully"
        }
    # Driver (scheduler), executors (worker) and the CLI see the same data root: on
    # the s3 service, not on a volume (test_the_data_root_is_on_the_s3_service...).
    assert "volumes" not in services["spark-worker"]
    # Every service but Postgres runs the image built from this repository.
    built = {n for n, s in services.items() if s.get("build") == "."}
    assert built == set(services) - {"postgres", "kafka"}


def test_kafka_is_apache_kafka_in_kraft_mode_wired_to_the_jobs(compose):
    services = compose["services"]
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft: no ZooKeeper
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{env['KAFKA_NODE_ID']}@kafka:9093"
    listeners = dict(item.split("://") for item in env["KAFKA_LISTENERS"].split(","))
    advertised = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    protocols = dict(
        item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")
    )
    assert (
        set(advertised) | {env["KAFKA_CONTROLLER_LISTENER_NAMES"]}
        == set(listeners)
        == set(protocols)
    )
    # The jobs (Airflow's driver, the executors on the worker, the CLI) reach the
    # internal listener; the host the published one, on localhost only.
    for name in ("airflow-scheduler", "lakehouse"):
        servers = services[name]["environment"]["LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS"]
        assert servers == advertised["INTERNAL"]
    assert advertised["HOST"] == "localhost:9092"
    assert kafka["ports"] == ["127.0.0.1:9092:9092"]
    assert listeners["HOST"] == ":9092"
    assert "kafka-data:/var/lib/kafka/data" in kafka["volumes"]
    assert env["KAFKA_LOG_DIRS"] == "/var/lib/kafka/data"
    assert services["airflow-scheduler"]["depends_on"]["kafka"] == {"condition": "service_healthy"}


@pytest.mark.system
def test_credentials_come_only_from_the_uncommitted_env_file(compose):
    text = COMPOSE.read_text()
    required = {m.group(1) for m in VARIABLE.finditer(text) if m.group(2) == "?"}
    assert required >= {"POSTGRES_PASSWORD", "AIRFLOW_ADMIN_PASSWORD", "AIRFLOW_FERNET_KEY"}
    assert required | {m.group(1) for m in VARIABLE.finditer(text)} <= set(env_example())
    # Without a .env the file refuses to resolve, rather than start with blank secrets.
    with pytest.raises(KeyError, match=r"is required: set in \.env"):
        resolved({})
    assert all(value == "change-me" for key, value in env_example().items() if "PASSWORD" in key)
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", ".env"], cwd=REPO, check=False
    ).returncode
    assert ignored == 0, ".env must be git-ignored"
    assert ".env" in (REPO / ".dockerignore").read_text().split()


def test_published_ports_listen_on_localhost_unless_configured_otherwise(compose):
    published = [
        (name, port)
        for name, service in compose["services"].items()
        for port in service.get("ports", [])
    ]
    assert {name for name, _ in published} == {"airflow-apiserver", "spark-master", "kafka", "s3"}
    assert all(port.startswith("127.0.0.1:") for _, port in published), published
    opened = resolved(env_example() | {"LAKEHOUSE_BIND_ADDRESS": "0.0.0.0"})  # noqa: S104
    ports = [p for s in opened["services"].values() for p in s.get("ports", [])]
    assert ports and all(port.startswith("0.0.0.0:") for port in ports)


def test_the_spark_cluster_requires_the_shared_secret(compose):
    services = compose["services"]
    for name in ("spark-master", "spark-worker"):
        environment = services[name]["environment"]
        options = environment["SPARK_DAEMON_JAVA_OPTS"].split()
        assert "-Dspark.authenticate=true" in options, name
        assert "-Dspark.master.rest.enabled=false" in options, name  # no auth there
        assert environment["_SPARK_AUTH_SECRET"] == env_example()["SPARK_AUTH_SECRET"], name
    # Jobs submitted by Airflow authenticate with the same secret.
    scheduler = services["airflow-scheduler"]["environment"]
    assert scheduler["LAKEHOUSE_SPARK_AUTH_SECRET"] == env_example()["SPARK_AUTH_SECRET"]


@pytest.mark.system
def test_airflow_init_refuses_the_placeholder_secrets_before_anything_else(compose, tmp_path):
    from lakehouse.orchestration.deployment import PLACEHOLDER, SECRETS

    init = compose["services"]["airflow-init"]
    assert init["command"][0].startswith(
        "python -m lakehouse.orchestration.deployment check-secrets &&"
    )
    # The Spark master waits for it too: no service starts with a placeholder secret.
    for name in ("airflow-apiserver", "airflow-scheduler", "spark-master"):
        assert "airflow-init" in compose["services"][name]["depends_on"], name
    # Every secret .env.example names is checked, and the example holds only placeholders.
    example = env_example()
    assert {k for k, v in example.items() if v == PLACEHOLDER} == set(SECRETS)
    assert set(SECRETS) <= set(init["environment"])

    def check(environment: dict[str, str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "lakehouse.orchestration.deployment", "check-secrets"],
            cwd=REPO,
            env={"PATH": os.environ["PATH"], **environment},
            capture_output=True,
            text=True,
            check=False,
        )

    refused = check(init["environment"])
    assert refused.returncode == 1
    assert all(name in refused.stderr for name in SECRETS), refused.stderr
    chosen = {name: f"secret-{n}" for n, name in enumerate(SECRETS)}
    for name in SECRETS:
        one_left = check({**chosen, name: PLACEHOLDER})
        assert one_left.returncode == 1 and name in one_left.stderr
        assert check({**chosen, name: "  "}).returncode == 1
    assert check(chosen).returncode == 0


def test_the_data_root_is_on_the_s3_service_with_credentials_from_env(compose):
    services = compose["services"]
    s3 = services["s3"]
    example = env_example()
    assert s3["environment"] == {
        "S3_ACCESS_KEY_ID": example["S3_ACCESS_KEY_ID"],
        "S3_SECRET_ACCESS_KEY": example["S3_SECRET_ACCESS_KEY"],
    }
    # S3Proxy from the project image's jars (jars/s3proxy/pom.xml), file-system back end.
    command = s3["command"][0]
    assert "org.gaul.s3proxy.Main" in command and "/opt/lakehouse/jars/s3proxy/*" in command
    assert "jclouds.provider=filesystem-nio2" in command and "mkdir -p /s3/lakehouse" in command
    assert "s3-data:/s3" in s3["volumes"]
    assert s3["ports"] == ["127.0.0.1:9000:9000"]
    for name in ("airflow-scheduler", "airflow-apiserver", "lakehouse"):
        env = services[name]["environment"]
        assert env["LAKEHOUSE_DATA_ROOT"] == "s3a://lakehouse/data", name
        assert env["AWS_ENDPOINT_URL"] == "http://s3:9000", name
        assert env["AWS_ACCESS_KEY_ID"] == example["S3_ACCESS_KEY_ID"], name
        assert env["AWS_SECRET_ACCESS_KEY"] == example["S3_SECRET_ACCESS_KEY"], name
        # Reports stay on local disk, beside Airflow.
        assert env["LAKEHOUSE_REPORTS_DIR"] == "/data/reports", name
    assert services["airflow-scheduler"]["depends_on"]["s3"] == {"condition": "service_healthy"}
    # The image holds the connector and the server: the Dockerfile's jars stage fetches
    # both (tests/project/test_image.py lays its stages out).
    dockerfile = (REPO / "Dockerfile").read_text()
    for pom in ("jars/s3/pom.xml", "jars/s3proxy/pom.xml"):
        assert f"COPY {pom} " in dockerfile, pom
    assert "-m lakehouse.runtime.jars delta s3 s3proxy" in dockerfile
