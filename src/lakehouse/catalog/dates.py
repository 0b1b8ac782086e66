"""Date ranges of backfills and parity runs, checked before any Spark job starts.

Plain Python, no pyspark: the Airflow backfill DAGs build theirs in a light Python
task (`lakehouse.orchestration.requests`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True)
class DateRange:
    """UTC event dates start..end, both inclusive.

    Any length: a backfill computes from bronze once and replaces the date
    partitions present in the range, so a range costs what it holds, however
    many empty days lie between its dates.
    """

    start: dt.date
    end: dt.date

    def __post_init__(self) -> None:
        if self.start > self.end:
            raise ValueError(f"start {self.start} is after end {self.end}")
