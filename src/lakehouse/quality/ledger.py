"""The ingest ledger (`lakehouse/_meta/bronze_ledger`): lines read per source and micro-batch.

Bronze appends one row per micro-batch, exactly once like the data, and the
reconciliation check holds it against the tables: per source, lines read =
bronze rows + quarantine rows.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from lakehouse.catalog.schemas import meta_schema
from lakehouse.runtime.settings import Settings
from lakehouse.storage.delta import append_rows, ensure_table
from lakehouse.storage.objects import Root

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LEDGER_SCHEMA = meta_schema("bronze_ledger")


def ledger_path(settings: Settings) -> Root:
    return settings.meta("bronze_ledger")


def ensure_ledger(spark: SparkSession, settings: Settings) -> None:
    """The ledger, created before the bronze queries that append to it side by side."""
    ensure_table(spark, ledger_path(settings), LEDGER_SCHEMA)


def record_lines_read(
    spark: SparkSession,
    settings: Settings,
    source: str,
    query_id: str,
    batch_id: int,
    lines_read: int,
) -> None:
    """One ledger row per micro-batch, committed once even when the batch is replayed."""
    row = {
        "source": source,
        "query_id": query_id,
        "batch_id": batch_id,
        "lines_read": lines_read,
        "recorded_at": dt.datetime.now(dt.UTC),
    }
    append_rows(
        spark, ledger_path(settings), [row], LEDGER_SCHEMA, app_id=query_id, version=batch_id
    )
