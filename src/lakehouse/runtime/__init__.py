"""What every command runs on: settings, the Spark session, the writer lock, monitoring.

- `settings`: the typed settings, from the environment and the command line;
- `jars`: the JVM libraries, fetched when first needed and checked against their pins;
- `spark`: the Spark session and spark-submit's configuration;
- `class_archive`: the driver JVM's class-data-sharing archive;
- `locks`: the writer lock, one writing command per data root;
- `runs`: run ids and the links between a run and its Airflow DAG run;
- `progress`: what one query did (rows in and out, late drops, state);
- `monitoring`: every micro-batch's progress in `_meta/query_progress`, and state sizes.
"""

__all__ = [
    "class_archive",
    "jars",
    "locks",
    "monitoring",
    "progress",
    "runs",
    "settings",
    "spark",
]
