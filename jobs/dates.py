"""Date ranges of backfills and parity runs, checked before any Spark job starts.

Plain Python, no pyspark: the Airflow backfill DAG checks its trigger form
with `backfill_request` in a light Python task, so a bad date fails in a
second with a clear message instead of after a Spark start-up.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from jobs.catalog import DERIVED_LAYERS


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


def parse_date(text: object, what: str) -> dt.date:
    if not isinstance(text, str):
        raise ValueError(f"{what}: expected a date YYYY-MM-DD, got {text!r}")
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{what}: not a date (YYYY-MM-DD): {text!r}") from None


@dataclass(frozen=True)
class BackfillRequest:
    """What one run of the backfill DAG recomputes, and the commands it submits."""

    dates: DateRange
    layers: tuple[str, ...]
    # The nightly run: recompute every date holding late rows (`backfill --pending`);
    # `dates` (its data interval) is then what parity checks.
    pending: bool = False

    def commands(self) -> dict[str, list[str]]:
        """`lakehouse` arguments of the backfill, validate and parity tasks."""
        span = ["--start", self.dates.start.isoformat(), "--end", self.dates.end.isoformat()]
        layer_flags = [flag for layer in self.layers for flag in ("--layer", layer)]
        return {
            "backfill": ["backfill", *(["--pending"] if self.pending else span), *layer_flags],
            # A backfill replaces files: every row it wrote is new to the checks.
            "validate": ["validate", *layer_flags, "--new-rows"],
            "parity": ["parity", *span],
        }


def covered_interval(
    run_type: str,
    logical_date: dt.datetime | None,
    interval: tuple[dt.datetime, dt.datetime] | None,
) -> tuple[dt.datetime, dt.datetime] | None:
    """What a backfill run covers when its form names no dates.

    A scheduled run, or one `airflow backfill create` made, covers its data
    interval. A manual trigger covers the day of the logical date it was
    given (Airflow would give it the interval that *ends* there), and
    nothing without one.
    """
    if run_type == "manual":
        return None if logical_date is None else (logical_date, logical_date)
    return interval


def backfill_request(
    start: object,
    end: object,
    layers: Sequence[str] | None,
    interval: tuple[dt.datetime, dt.datetime] | None,
    scheduled: bool = False,
) -> BackfillRequest:
    """The range from the trigger form, else the run's data interval.

    `interval` (see `covered_interval`) covers the UTC dates from its start
    up to its end, exclusive, or the start's date when both are equal. A
    run without one must name both dates. A `scheduled` run without dates
    (the nightly one) recomputes the pending dates (`backfill --pending`).
    """
    if start is None and end is None:
        if interval is None:
            raise ValueError(
                "no dates: give a start and an end date (or trigger with a logical date)"
            )
        first, last = (moment.astimezone(dt.UTC) for moment in interval)
        dates = DateRange(first.date(), max(first, last - dt.timedelta(microseconds=1)).date())
    elif start is None or end is None:
        raise ValueError("give both a start and an end date, or neither")
    else:
        dates = DateRange(parse_date(start, "start"), parse_date(end, "end"))
    chosen = tuple(layers) if layers is not None else DERIVED_LAYERS
    unknown = sorted(set(chosen) - set(DERIVED_LAYERS))
    if unknown or not chosen:
        raise ValueError(f"layers: choose from {', '.join(DERIVED_LAYERS)}, got {list(chosen)}")
    return BackfillRequest(
        dates,
        tuple(layer for layer in DERIVED_LAYERS if layer in chosen),
        pending=scheduled and start is None and end is None,
    )
