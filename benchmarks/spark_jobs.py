"""The Spark jobs of one command, read from Spark's event log.

A command run with `event_log_env(folder)` writes its event log under
`folder`; `jobs_by_stage(folder)` then counts, per pipeline stage (the
`lakehouse.stage` label the pipeline gives its jobs, `lakehouse.runtime.spark.label_jobs`),
the jobs, their seconds, and those that rebuilt a Delta table's state (Delta's
"Compute snapshot for version N": a job over the table's log that every write
with an app transaction and every first read of a new version needs).
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lakehouse.runtime.spark import STAGE_PROPERTY

STATE_RECONSTRUCTION = "Compute snapshot for version"
UNLABELLED = "(start-up and bookkeeping)"


def event_log_env(folder: Path) -> dict[str, str]:
    """Environment that makes a lakehouse command write its event log under `folder`.

    Spark's launcher passes SPARK_SUBMIT_OPTS to the driver JVM, whose `spark.*`
    properties become Spark's settings; the log is left uncompressed for
    `jobs_by_stage`. (Not a spark-defaults.conf in a SPARK_CONF_DIR of our own: the
    launcher puts that folder on the class path, and the driver then ran without the
    class archive.)
    """
    events = folder / "events"
    events.mkdir(parents=True, exist_ok=True)
    settings = {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events.resolve().as_uri(),
        "spark.eventLog.compress": "false",
    }
    options = [os.environ.get("SPARK_SUBMIT_OPTS", "")]
    options += [shlex.quote(f"-D{name}={value}") for name, value in settings.items()]
    return {"SPARK_SUBMIT_OPTS": " ".join(filter(None, options))}


def _events(folder: Path) -> Iterator[dict[str, Any]]:
    for path in sorted((folder / "events").rglob("events_*")):
        if path.is_file():
            with path.open() as lines:
                for line in lines:
                    yield json.loads(line)


def jobs_by_stage(folder: Path) -> dict[str, Any]:
    """Jobs, job seconds and state reconstructions per stage, and in all."""
    started: dict[int, tuple[str, int, bool]] = {}
    stages: dict[str, dict[str, Any]] = {}
    for event in _events(folder):
        kind = event["Event"]
        if kind == "SparkListenerJobStart":
            properties = event.get("Properties") or {}
            stage = properties.get(STAGE_PROPERTY) or UNLABELLED
            rebuild = STATE_RECONSTRUCTION in properties.get("spark.job.description", "")
            started[event["Job ID"]] = (stage, event["Submission Time"], rebuild)
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in started:
            stage, submitted, rebuild = started.pop(event["Job ID"])
            figures = stages.setdefault(
                stage, {"jobs": 0, "job_seconds": 0.0, "state_reconstructions": 0}
            )
            figures["jobs"] += 1
            figures["job_seconds"] += (event["Completion Time"] - submitted) / 1000
            figures["state_reconstructions"] += rebuild
    for figures in stages.values():
        figures["job_seconds"] = round(figures["job_seconds"], 1)
    total = {
        key: round(sum(s[key] for s in stages.values()), 1)
        for key in ("jobs", "job_seconds", "state_reconstructions")
    }
    return {"total": total, "stages": stages}
