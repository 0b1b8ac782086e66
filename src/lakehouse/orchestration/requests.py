"""What a run of a backfill DAG recomputes: the manual form's request, or the nightly
run's, and the `lakehouse` commands its tasks submit.

Plain Python, no pyspark: the DAGs work it out in a light Python task
(`check_request`), so a bad range fails in a second with a one-line reason
instead of after a Spark start-up. Airflow has checked the form's fields one
by one (their Param schemas) before the run exists; the range as a whole is
checked here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from lakehouse.catalog import DERIVED_LAYERS, DerivedLayer
from lakehouse.catalog.dates import DateRange


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
    layers: tuple[DerivedLayer, ...]
    # The nightly run: recompute every date holding late rows (`backfill --pending`);
    # `dates` (its data interval) is then what parity checks.
    pending: bool = False

    def describe(self) -> str:
        """One line for a run's note and log: what it recomputes."""
        what = "the pending dates" if self.pending else f"{self.dates.start}..{self.dates.end}"
        return f"backfill {what}, layers {', '.join(self.layers)}"

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


def _days(interval: tuple[dt.datetime, dt.datetime]) -> DateRange:
    """The UTC dates from the interval's start up to its end, exclusive (one day if equal)."""
    first, last = (moment.astimezone(dt.UTC) for moment in interval)
    return DateRange(first.date(), max(first, last - dt.timedelta(microseconds=1)).date())


def nightly_request(
    run_type: str,
    interval: tuple[dt.datetime, dt.datetime] | None,
    run_after: dt.datetime,
) -> BackfillRequest:
    """What a run of the nightly backfill DAG (`lakehouse_backfill`) recomputes.

    A run `airflow backfill create` made recomputes its data interval: the
    day that ended at its logical date. Any other run (the scheduled one at
    midnight, or a manual trigger) recomputes the pending dates (`backfill
    --pending`) and checks parity of the UTC day that ended before it ran.
    """
    if run_type == "backfill":
        if interval is None:
            raise ValueError("a backfill run without a data interval")
        return BackfillRequest(_days(interval), DERIVED_LAYERS)
    yesterday = run_after.astimezone(dt.UTC).date() - dt.timedelta(days=1)
    return BackfillRequest(DateRange(yesterday, yesterday), DERIVED_LAYERS, pending=True)


# The longest range the backfill form runs without its "yes, the whole range" box: a
# year and a day. Longer ranges are rarely meant (a typo in a year), and each costs
# minutes per day that holds data, then a parity check over all of it.
FORM_MAX_DAYS = 366


class BackfillForm(BaseModel):
    """The manual backfill's form (`lakehouse_backfill_range`) as a run's params hold it.

    Any value may come in (`airflow dags trigger -c` skips the form's own
    schemas): each field's validator turns a wrong one into a one-line reason.
    """

    model_config = ConfigDict(frozen=True)

    start: dt.date
    end: dt.date
    layers: tuple[DerivedLayer, ...] = DERIVED_LAYERS
    # Only a ticked box (True) lets a range run past FORM_MAX_DAYS; "true" or 1 do not.
    whole_range: bool = False

    @field_validator("start", "end", mode="before")
    @classmethod
    def _date(cls, value: object, info: ValidationInfo) -> dt.date:
        if value is None:
            raise ValueError("give a start and an end date")
        return parse_date(value, str(info.field_name))

    @field_validator("layers", mode="before")
    @classmethod
    def _layers(cls, value: object) -> tuple[str, ...]:
        """In pipeline order; None: every derived layer."""
        if value is None:
            return DERIVED_LAYERS
        if not (isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)):
            raise ValueError(f"layers: expected a list of layer names, got {value!r}")
        if not value or set(value) - set(DERIVED_LAYERS):
            raise ValueError(f"layers: choose from {', '.join(DERIVED_LAYERS)}, got {list(value)}")
        return tuple(layer for layer in DERIVED_LAYERS if layer in value)

    @field_validator("whole_range", mode="before")
    @classmethod
    def _ticked(cls, value: object) -> bool:
        return value is True


def backfill_request(
    start: object, end: object, layers: object, whole_range: object = False
) -> BackfillRequest:
    """What the manual backfill's form asks for: its fields checked by `BackfillForm` (a
    wrong one is a ValueError saying which and why, the first in the form's order),
    then the range as a whole; a range of more than FORM_MAX_DAYS days needs
    `whole_range` ticked."""
    try:
        form = BackfillForm.model_validate(
            {"start": start, "end": end, "layers": layers, "whole_range": whole_range}
        )
    except ValidationError as error:
        first = error.errors()[0]
        raise ValueError(first.get("ctx", {}).get("error", first["msg"])) from None
    dates = DateRange(form.start, form.end)
    days = (dates.end - dates.start).days + 1
    if days > FORM_MAX_DAYS and not form.whole_range:
        raise ValueError(
            f"{dates.start}..{dates.end} is {days:,} days, more than {FORM_MAX_DAYS}: check "
            'the dates, or tick "Yes, the whole range" to recompute all of it'
        )
    return BackfillRequest(dates, form.layers)
