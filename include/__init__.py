"""Shared plumbing every job uses; nothing here knows about impressions or clicks.

- `settings`, `spark`: the typed settings and the Spark session;
- `delta`: Delta Lake I/O through Spark's own connector;
- `storage`: landing-folder listing, checkpoint guards, the writer lock;
- `orchestration`: the Airflow glue the DAGs use;
- `errors`, `faults`: error types with exit codes, and the crash points tests use.
"""

__all__ = ["delta", "errors", "faults", "orchestration", "settings", "spark", "storage"]
