"""Local Airflow in one command: `make airflow-up`, `make airflow-down`.

(Both call `python -m dev.local_airflow start|stop|status`.)

Starts the api-server, scheduler, dag-processor and triggerer (not `airflow
standalone`, which forks 32 workers) on the embedded SQLite database in `.airflow/`, with
the DAGs folder, the `spark_default` connection, the writers pool and a
generated admin password. Secrets are generated once and kept in
`.airflow/` (git-ignored); `stop` stops exactly the processes `start` started.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dev import processes
from dev.local_spark_cluster import LocalSparkCluster
from lakehouse.environment import environment
from lakehouse.orchestration import REPO, WRITERS_POOL
from lakehouse.runtime.settings import Settings

ADMIN = "admin"
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def _token() -> str:
    return secrets.token_urlsafe(16)


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


@dataclass(frozen=True)
class LocalAirflow:
    home: Path
    port: int = 8080
    spark_master: str = "local[*]"
    # A folder, or s3a://bucket/prefix (docs/object-storage.md).
    data_root: str | Path = REPO / "data"
    # LocalExecutor worker processes: the writers pool runs one Spark job at a time anyway.
    parallelism: int = 2
    # Cron expression of lakehouse_incremental, or "none": it runs when triggered, once
    # per click (docs/orchestration.md, "Local Airflow").
    schedule: str = "none"
    # The Spark standalone cluster's shared secret (dev.local_spark_cluster), if any.
    spark_secret_file: Path | None = None

    @property
    def state(self) -> Path:
        """Where the service pids and logs go (Airflow's task logs are in logs/)."""
        return self.home / "services"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _private_file(self, name: str, text: str) -> Path:
        """Write `.airflow/secrets/<name>`, readable by the owner only."""
        path = self.home / "secrets" / name
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Created 0600, never readable by others even for a moment.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(text)
        path.chmod(0o600)
        return path

    def _secret(self, name: str, generate: Callable[[], str] = _token) -> str:
        """A secret generated on first use and kept for every later start."""
        path = self.home / "secrets" / name
        if not path.exists():
            self._private_file(name, generate())
        return path.read_text().strip()

    def password(self) -> str:
        return self._secret("admin-password")

    def env(self) -> dict[str, str]:
        """The environment of every Airflow process (and so of every task)."""
        passwords = self._private_file("passwords.json", json.dumps({ADMIN: self.password()}))
        venv_bin = str(Path(sys.executable).parent)
        env = {
            **os.environ,
            # spark-submit and airflow come from this virtual environment.
            "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__CORE__FERNET_KEY": self._secret("fernet-key", _fernet_key),
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__API__PORT": str(self.port),
            # Only this machine reaches the UI (Airflow's default is every interface).
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__WORKERS": "1",
            # Task workers authenticate to the api-server with tokens signed by this.
            "AIRFLOW__API_AUTH__JWT_SECRET": self._secret("jwt-secret"),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
                {"conn_type": "spark", "host": self.spark_master}
            ),
            "LAKEHOUSE_DATA_ROOT": str(self.data_root),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        env["LAKEHOUSE_INCREMENTAL_SCHEDULE"] = self.schedule
        if self.spark_secret_file is not None:
            env["LAKEHOUSE_SPARK_AUTH_SECRET"] = self.spark_secret_file.read_text().strip()
        return env

    def airflow(self, env: dict[str, str], *args: str) -> None:
        """Run an `airflow` command against this home and wait for it."""
        log = processes.log_file(self.state, "setup")
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            done = subprocess.run([AIRFLOW, *args], env=env, stdout=out, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            raise RuntimeError(f"`airflow {' '.join(args)}` failed; see {log}")

    def start(self, timeout: float = 180) -> list[processes.Service]:
        if processes.running(self.state):
            raise RuntimeError(f"Airflow is already running from {self.home}; stop it first")
        self.home.mkdir(parents=True, exist_ok=True)
        env = self.env()
        self.airflow(env, "db", "migrate")
        self.airflow(
            env,
            "pools",
            "set",
            WRITERS_POOL,
            "1",
            "tasks that write lakehouse tables, one at a time",
        )
        argv = {
            "api-server": [AIRFLOW, "api-server", "--host", "127.0.0.1", "--port", str(self.port)],
            # No log server: it listens on every interface, and the api-server reads
            # the task logs from this machine's disk anyway.
            "scheduler": [AIRFLOW, "scheduler", "--skip-serve-logs"],
            "dag-processor": [AIRFLOW, "dag-processor"],
            # Runs deferred tasks; without it the UI shows the triggerer as unhealthy.
            "triggerer": [AIRFLOW, "triggerer", "--skip-serve-logs"],
        }
        services = [processes.start(self.state, name, argv[name], env) for name in SERVICES]
        processes.wait_until(
            lambda: processes.http_ok(f"{self.url}/api/v2/monitor/health"),
            timeout,
            f"the api-server on {self.url}",
            services,
        )
        # The task execution API (Cadwyn) builds its versioned routes on its first request,
        # on the api-server's event loop: 10-35 s on two busy cores, during which the whole
        # api-server answers nothing. Left to the first task, that stall outlasts the task's
        # start-up retries and kills its first attempt; so it is paid here, before any run.
        processes.wait_until(
            lambda: processes.http_ok(f"{self.url}/execution/health"),
            timeout,
            f"the task execution API on {self.url}/execution",
            services,
        )
        return services

    def stop(self) -> list[str]:
        return processes.stop(self.state)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dev.local_airflow", description=__doc__)
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("--home", type=Path, default=REPO / ".airflow", help="AIRFLOW_HOME")
    parser.add_argument("--port", type=int, default=8080, help="api-server port (default 8080)")
    parser.add_argument(
        "--spark-master",
        default="local[*]",
        help="master of the spark_default connection, e.g. spark://127.0.0.1:7077",
    )
    parser.add_argument(
        "--data-root",
        default=None,
        help="lakehouse data root (default: $LAKEHOUSE_DATA_ROOT, else the repository's data/)",
    )
    parser.add_argument(
        "--spark-secret-file",
        type=Path,
        default=None,
        help="the standalone cluster's shared secret (default, for a spark:// master: the "
        "one `make spark-cluster-up` generated)",
    )
    return parser


def data_root(given: str | None) -> str:
    """The data root the tasks work on, as `make run` finds it: the flag, else
    $LAKEHOUSE_DATA_ROOT, else the repository's data/ (a folder made absolute)."""
    return str(Settings.load(data_root=given, default_data_root=REPO / "data").data_root)


def empty_landing_hint(root: str | Path) -> str | None:
    """What `make airflow-up` says of a local data root whose landing folders hold no
    file (a new root: the first run would write empty tables); None otherwise."""
    landing = Path(str(root)) / "landing"
    if str(root).startswith("s3") or any(landing.glob("*/*.*")):
        return None
    return (
        f"{landing} holds no file: the first run would ingest nothing; "
        "`.venv/bin/lakehouse generate --events 20000 --seed 42` writes sample events"
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    secret_file = args.spark_secret_file
    if secret_file is None and args.spark_master.startswith("spark://"):
        secret_file = LocalSparkCluster(REPO / ".spark-cluster").secret_file
    env = environment()
    scheduled = "incremental_schedule" in env.model_fields_set
    local = LocalAirflow(
        args.home.resolve(),
        args.port,
        args.spark_master,
        data_root(args.data_root),
        # No schedule here unless LAKEHOUSE_INCREMENTAL_SCHEDULE gives one.
        schedule=env.incremental_schedule if scheduled else "none",
        spark_secret_file=secret_file if secret_file and secret_file.exists() else None,
    )
    if args.action == "stop":
        stopped = local.stop()
        print(f"stopped: {', '.join(stopped)}" if stopped else "Airflow was not running")
        return 0
    if args.action == "status":
        if not processes.print_status(local.state):
            print("Airflow is not running")
        return 0
    up = {service.name for service in processes.running(local.state)}
    down = [name for name in SERVICES if name not in up]
    if up and down:
        print(
            f"airflow: {', '.join(down)} stopped, {', '.join(sorted(up))} still running "
            f"from {local.home}: run `make airflow-down`, then `make airflow-up`",
            file=sys.stderr,
        )
        return 1
    already = processes.already_running(local.state, "Airflow")
    if not already and processes.start_or_undo(local.start, local.stop, "airflow") is None:
        return 1
    print(f"Airflow is up: {local.url}")
    print(f"  user:      {ADMIN}")
    print(f"  password:  {local.password()}")
    print(f"  data root: {local.data_root}")
    hint = empty_landing_hint(local.data_root)
    if hint:
        print(f"  landing:   {hint}")
    print(f"  spark:     {local.spark_master}")
    print(f"  logs:      {local.state / 'logs'} (services), {local.home / 'logs'} (tasks)")
    if local.schedule.lower() == "none":
        print(
            "  lakehouse_incremental has no schedule here: each click on Trigger runs it once "
            "(LAKEHOUSE_INCREMENTAL_SCHEDULE='*/15 * * * *' make airflow-up schedules it)"
        )
    else:
        print(f"  lakehouse_incremental: schedule {local.schedule}; unpause it to start it")
    print("  stop with: make airflow-down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
