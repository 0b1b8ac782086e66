"""A Spark standalone cluster on this machine: `make spark-cluster-up`, `make spark-cluster-down`.

One master and one worker, started from the Spark that pyspark installed
(`spark-class` in the virtual environment), for trying the cluster path of
the DAGs: point the `spark_default` connection at `spark://127.0.0.1:7077`
(`make airflow-up SPARK_MASTER=spark://127.0.0.1:7077`). Executors run the
same virtual environment and read the same data root, as they would on a
cluster built from the project image with a shared volume.

Only this machine can use it: the master, the worker and their web UIs listen
on 127.0.0.1, and every connection must prove it knows the cluster's shared
secret (`spark.authenticate`), generated at the first start into
`<state>/auth-secret` (owner-only). Applications read it from
LAKEHOUSE_SPARK_AUTH_SECRET (`make airflow-up` passes it on); the worker hands
it to the executors it starts.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from dev import processes
from lakehouse.orchestration import REPO

SPARK_CLASS = str(Path(sys.executable).with_name("spark-class"))


@dataclass(frozen=True)
class LocalSparkCluster:
    state: Path
    port: int = 7077
    ui_port: int = 8081
    worker_ui_port: int = 8082
    cores: int = os.cpu_count() or 2
    memory: str = "2g"

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    @property
    def secret_file(self) -> Path:
        return self.state / "auth-secret"

    def secret(self) -> str:
        """The shared secret of the cluster, generated (owner-only) on first use."""
        if not self.secret_file.exists():
            self.state.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(self.secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as file:
                file.write(secrets.token_urlsafe(32))
        return self.secret_file.read_text().strip()

    def alive_workers(self) -> int:
        """Workers the master counts as ALIVE (its /json status page)."""
        try:
            with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as response:  # noqa: S310
                status = json.load(response)
        except OSError:
            return 0
        return sum(1 for worker in status.get("workers", []) if worker.get("state") == "ALIVE")

    def start(self, timeout: float = 90) -> list[processes.Service]:
        if processes.running(self.state):
            raise RuntimeError(f"the cluster in {self.state} is already running; stop it first")
        env = {
            **os.environ,
            # Spark's daemons bind their RPC port and web UI to this address.
            "SPARK_LOCAL_IP": "127.0.0.1",
            # Authentication on; the daemons read the secret from _SPARK_AUTH_SECRET
            # (not a -D option, which every user of `ps` could read).
            # The REST submission server (port 6066) knows no authentication: off.
            "SPARK_DAEMON_JAVA_OPTS": "-Dspark.authenticate=true -Dspark.master.rest.enabled=false",
            "_SPARK_AUTH_SECRET": self.secret(),
            "SPARK_NO_DAEMONIZE": "1",
            "PYSPARK_PYTHON": sys.executable,
        }
        master = processes.start(
            self.state,
            "spark-master",
            [
                SPARK_CLASS,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.ui_port),
            ],
            env,
        )
        worker = processes.start(
            self.state,
            "spark-worker",
            [
                SPARK_CLASS,
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--webui-port",
                str(self.worker_ui_port),
                "--work-dir",
                str(self.state / "work"),
                self.master_url,
            ],
            env,
        )
        services = [master, worker]
        processes.wait_until(
            lambda: self.alive_workers() >= 1, timeout, "a worker to register", services
        )
        return services

    def stop(self) -> list[str]:
        return processes.stop(self.state)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dev.local_spark_cluster", description=__doc__)
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("--state", type=Path, default=REPO / ".spark-cluster")
    parser.add_argument("--port", type=int, default=7077, help="master port (default 7077)")
    parser.add_argument("--memory", default="2g", help="worker memory (default 2g)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cluster = LocalSparkCluster(args.state.resolve(), args.port, memory=args.memory)
    if args.action == "stop":
        stopped = cluster.stop()
        print(f"stopped: {', '.join(stopped)}" if stopped else "the cluster was not running")
        return 0
    if args.action == "status":
        running = processes.print_status(cluster.state)
        print(f"alive workers: {cluster.alive_workers()}" if running else "not running")
        return 0
    if processes.already_running(cluster.state, "the Spark cluster"):
        return 0
    if processes.start_or_undo(cluster.start, cluster.stop, "spark cluster") is None:
        return 1
    print(f"Spark master {cluster.master_url} (UI {cluster.ui_url}), 1 worker")
    print(f"  logs: {cluster.state / 'logs'}")
    print(f"  shared secret: {cluster.secret_file} (make airflow-up passes it to the jobs)")
    print(f"  use it: make airflow-up SPARK_MASTER={cluster.master_url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
