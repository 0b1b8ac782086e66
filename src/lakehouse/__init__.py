"""The lakehouse: batch and streaming on one codebase, PySpark, Delta Lake and Airflow.

Layers, each importing only the ones below it (checked by import-linter, `make lint`):

- `cli`, `orchestration`: the `lakehouse` command and the Airflow integration;
- `samples`: sample events for landing folders and Kafka topics;
- `drivers`: thin jobs, one per command, that read, transform, check and write;
- `reports`: the run report and the pages people read;
- `quality`: Great Expectations checkpoints between the layers;
- `runtime`: settings, the Spark session, the writer lock, query monitoring;
- `storage`: Delta Lake I/O, the data root on disk or S3, landing files, Kafka;
- `transforms`: pure DataFrame -> DataFrame logic and per-key state functions;
- `catalog`: every source, table and rule, declared once;
- `errors`, `faults`: error types with exit codes, and the crash points tests use.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lakehouse")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "__version__",
    "catalog",
    "cli",
    "drivers",
    "errors",
    "faults",
    "orchestration",
    "quality",
    "reports",
    "runtime",
    "samples",
    "storage",
    "transforms",
]
