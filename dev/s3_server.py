"""A local S3 API server on this machine: `make s3-up`, `make s3-down`.

S3Proxy (`org.gaul.s3proxy`, from the jars fetched into jars/s3proxy/ the
first time it starts; its pom pins the version) on its file-system back end: buckets
are folders under `<state>/data` (`.s3/` in the checkout, git-ignored), served
over the S3 API on 127.0.0.1 only, with AWS signatures checked against
credentials generated at the first start (like local Airflow's password) and
kept in `<state>/credentials.json` (mode 0600). It answers conditional writes
(`If-None-Match`, `If-Match`), which the writer lock on an S3 root uses.

Starting it creates the bucket and writes `<state>/lakehouse.env`: the
variables that point every command at `s3a://<bucket>/data` (source it with
`set -a; . .s3/lakehouse.env; set +a`). Tests start their own server on a
free port (`S3Server(...).start()`) and stop it.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from dev import processes
from lakehouse.orchestration import REPO
from lakehouse.runtime import jars
from lakehouse.runtime.settings import jars_folder
from lakehouse.storage.objects import S3Connection, S3Path

JAVA = os.environ.get("JAVA", "java")
BUCKET = "lakehouse"

LOGBACK = """\
<configuration>
  <appender name="console" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{36} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="console"/></root>
</configuration>
"""


def _write_private(path: Path, text: str) -> None:
    """Written readable by its owner only (it holds the secret key)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)


@dataclass(frozen=True)
class S3Server:
    state: Path
    port: int = 9000
    heap: str = "256m"

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def credentials(self) -> dict[str, str]:
        """The server's access key and secret, generated once and kept (mode 0600)."""
        path = self.state / "credentials.json"
        if not path.exists():
            self.state.mkdir(parents=True, exist_ok=True)
            keys = {
                "access_key_id": "lakehouse-" + secrets.token_hex(6),
                "secret_access_key": secrets.token_urlsafe(30),
            }
            _write_private(path, json.dumps(keys))
        return dict(json.loads(path.read_text()))

    def connection(self) -> S3Connection:
        keys = self.credentials()
        return S3Connection(
            endpoint_url=self.endpoint_url,
            access_key_id=keys["access_key_id"],
            secret_access_key=keys["secret_access_key"],
        )

    def environment(self, bucket: str = BUCKET, prefix: str = "data") -> dict[str, str]:
        """What points the lakehouse (and the AWS tools) at `s3a://<bucket>/<prefix>` here."""
        return {
            "LAKEHOUSE_DATA_ROOT": f"s3a://{bucket}/{prefix}",
            **self.connection().environment(),
        }

    @property
    def classpath(self) -> str:
        return str(jars.ensure("s3proxy", jars_folder()) / "*")

    def _config(self) -> Path:
        keys = self.credentials()
        data = self.state / "data"
        data.mkdir(parents=True, exist_ok=True)
        settings = {
            "s3proxy.endpoint": self.endpoint_url,
            "s3proxy.authorization": "aws-v2-or-v4",
            "s3proxy.identity": keys["access_key_id"],
            "s3proxy.credential": keys["secret_access_key"],
            "jclouds.provider": "filesystem-nio2",
            "jclouds.filesystem.basedir": str(data),
        }
        config = self.state / "s3proxy.conf"
        _write_private(config, "".join(f"{key}={value}\n" for key, value in settings.items()))
        (self.state / "logback.xml").write_text(LOGBACK)
        return config

    def start(self, buckets: tuple[str, ...] = (BUCKET,), timeout: float = 60) -> float:
        """Start the server and create the buckets; the seconds it took."""
        if processes.running(self.state):
            raise RuntimeError(f"the S3 server in {self.state} is already running; stop it first")
        started = time.monotonic()
        config = self._config()
        command = [
            JAVA,
            f"-Xmx{self.heap}",
            f"-Dlogback.configurationFile={self.state / 'logback.xml'}",
            "-cp",
            self.classpath,
            "org.gaul.s3proxy.Main",
            "--properties",
            str(config),
        ]
        server = processes.start(self.state, "s3proxy", command, dict(os.environ))
        processes.wait_until(self.listening, timeout, "the S3 server to listen", [server])
        client = self.connection().client()
        existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        for bucket in buckets:
            if bucket not in existing:
                client.create_bucket(Bucket=bucket)
        env = self.environment()
        _write_private(
            self.state / "lakehouse.env", "".join(f"{key}={value}\n" for key, value in env.items())
        )
        return time.monotonic() - started

    def listening(self) -> bool:
        return processes.listening(self.port)

    def root(self, uri: str) -> S3Path:
        return S3Path.from_uri(uri, self.connection())

    def stop(self) -> list[str]:
        return processes.stop(self.state)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dev.s3_server", description=__doc__)
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("--state", type=Path, default=REPO / ".s3")
    parser.add_argument("--port", type=int, default=9000, help="S3 API port (default 9000)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    server = S3Server(args.state.resolve(), args.port)

    def ready(seconds: float) -> list[str]:
        env_file = server.state / "lakehouse.env"
        return [
            f"S3Proxy on {server.endpoint_url}, ready in {seconds:.1f} s; bucket {BUCKET}",
            f"  objects: {server.state / 'data'}; logs: {server.state / 'logs'}",
            f"  credentials (generated): {server.state / 'credentials.json'}",
            f"  use it: set -a; . {env_file}; set +a   (data root s3a://{BUCKET}/data)",
        ]

    return processes.server_command(args.action, server, "S3 server", server.endpoint_url, ready)


if __name__ == "__main__":
    sys.exit(main())
