"""Background services for local development: start, find again, stop exactly those.

Each service runs in its own session (process group) with its output in
`<state>/logs/<name>.log`; `<state>/pids/<name>.json` records its pid and
start time, so `stop` never signals an unrelated process that reused the pid.
Stopping sends SIGTERM to the group and to every descendant found, then
SIGKILL to whatever is left after the grace period.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import psutil

T = TypeVar("T")


@dataclass(frozen=True)
class Service:
    name: str
    pid: int
    started: float

    def process(self) -> psutil.Process | None:
        """The process if it is still the one we started."""
        try:
            process = psutil.Process(self.pid)
            same = abs(process.create_time() - self.started) < 1 and process.is_running()
            return process if same and process.status() != psutil.STATUS_ZOMBIE else None
        except psutil.NoSuchProcess:
            return None

    def tree(self) -> list[psutil.Process]:
        """The service's process and all its descendants."""
        process = self.process()
        return process_tree(process) if process else []

    def memory_bytes(self) -> int:
        """Resident memory of the whole process tree."""
        process = self.process()
        return tree_memory_bytes(process) if process else 0


def process_tree(process: psutil.Process) -> list[psutil.Process]:
    """A process and all its descendants (just the process once it is gone)."""
    with contextlib.suppress(psutil.NoSuchProcess):
        return [process, *process.children(recursive=True)]
    return [process]


def tree_memory_bytes(process: psutil.Process) -> int:
    """Resident memory of a process and all its descendants (0 once it is gone)."""
    total = 0
    for member in process_tree(process):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += member.memory_info().rss
    return total


def _pid_file(state: Path, name: str) -> Path:
    return state / "pids" / f"{name}.json"


def log_file(state: Path, name: str) -> Path:
    return state / "logs" / f"{name}.log"


def start(state: Path, name: str, argv: Sequence[str], env: dict[str, str]) -> Service:
    """Start `argv` detached, in its own session, logging to `<state>/logs/<name>.log`."""
    for folder in ("pids", "logs"):
        (state / folder).mkdir(parents=True, exist_ok=True)
    with open(log_file(state, name), "ab") as log:
        popen = subprocess.Popen(
            list(argv),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    service = Service(name, popen.pid, psutil.Process(popen.pid).create_time())
    _pid_file(state, name).write_text(json.dumps(service.__dict__))
    return service


def running(state: Path) -> list[Service]:
    """Services recorded under `state` whose process is still alive."""
    services = []
    for path in sorted((state / "pids").glob("*.json")):
        service = Service(**json.loads(path.read_text()))
        if service.process() is not None:
            services.append(service)
    return services


def print_status(state: Path) -> bool:
    """Print each running service with its pid and memory; whether any is running."""
    services = running(state)
    for service in services:
        mib = service.memory_bytes() / 2**20
        print(f"{service.name:14} pid {service.pid:>7}  {mib:7.0f} MiB")
    return bool(services)


def stop(state: Path, grace_seconds: float = 30) -> list[str]:
    """Stop every service recorded under `state` and its descendants; their names."""
    stopped = []
    for path in sorted((state / "pids").glob("*.json")):
        service = Service(**json.loads(path.read_text()))
        tree = service.tree()
        if tree:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(service.pid, signal.SIGTERM)
            for process in tree[1:]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.terminate()
            _, alive = psutil.wait_procs(tree, timeout=grace_seconds)
            for process in alive:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()
            psutil.wait_procs(alive, timeout=10)
            stopped.append(service.name)
        path.unlink()
    return stopped


def wait_until(
    check: Callable[[], bool], timeout: float, what: str, services: Sequence[Service] = ()
) -> None:
    """Poll `check` until it holds; fail early if one of the services died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        dead = [s.name for s in services if s.process() is None]
        if dead:
            raise RuntimeError(f"{', '.join(dead)} exited while waiting for {what}")
        time.sleep(1)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (local http)
            return 200 <= response.status < 300
    except (urllib.error.URLError, OSError):
        return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:`port`."""
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class LocalServer(Protocol):
    """A local service of `dev/` (the Kafka broker, the S3 server): its state folder,
    how to start it (the seconds it took), stop it, and whether it listens."""

    @property
    def state(self) -> Path: ...

    def start(self) -> float: ...

    def stop(self) -> list[str]: ...

    def listening(self) -> bool: ...


def already_running(state: Path, what: str) -> bool:
    """`make <x>-up` while `what` runs: say so and leave it running (stopping it would
    end whatever uses it); whether it runs."""
    if not running(state):
        return False
    print(
        f"{what} is already running from {state}; nothing started or stopped "
        "(to start it with other settings, stop it first)"
    )
    return True


def start_or_undo(start: Callable[[], T], stop: Callable[[], object], name: str) -> T | None:
    """`start()`'s result; None when it failed to start, after saying why on stderr and
    stopping what it had started (`make <x>-up` then exits 1)."""
    try:
        return start()
    except (RuntimeError, TimeoutError) as error:
        print(f"{name}: {error}", file=sys.stderr)
        stop()
        return None


def server_command(
    action: str, server: LocalServer, name: str, address: str, ready: Callable[[float], list[str]]
) -> int:
    """`start`, `stop` or `status` of a local server, as `make <name>-up/-down/-status` runs it.

    `ready` gives the lines printed once it started (how to use it)."""
    if action == "stop":
        stopped = server.stop()
        print(f"stopped: {', '.join(stopped)}" if stopped else f"the {name} was not running")
        return 0
    if action == "status":
        if print_status(server.state):
            print(f"listening on {address}: {server.listening()}")
        else:
            print("not running")
        return 0
    if already_running(server.state, f"the {name}"):
        return 0
    seconds = start_or_undo(server.start, server.stop, name)
    if seconds is None:
        return 1
    for line in ready(seconds):
        print(line)
    return 0
