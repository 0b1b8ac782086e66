"""Lakehouse jobs: the transformations and the thin drivers that run them.

Everything Airflow submits is code in this package, run the same way the
`lakehouse` CLI runs it.
"""

__all__ = [
    "catalog",
    "cli",
    "dates",
    "drivers",
    "generate",
    "quality",
    "reports",
    "schemas",
    "transforms",
]
