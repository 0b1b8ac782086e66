"""Parity's row comparison on tiny hand-built DataFrames: the counts `exceptAll` gives,
duplicates and nulls included (tests/drivers/test_parity.py runs the command)."""

from __future__ import annotations

import pytest

from lakehouse.drivers.parity import compare

SCHEMA = "id string, clicks long, ctr double"


@pytest.mark.parametrize(
    ("live", "batch"),
    [
        # "a" twice in live, once in batch; "b" the other way round; "c" only in batch;
        # the all-null row on both sides matches itself.
        (
            [("a", 1, 0.5), ("a", 1, 0.5), ("b", 2, None), (None, None, None)],
            [("a", 1, 0.5), ("b", 2, None), ("b", 2, None), ("c", 3, 1.0), (None, None, None)],
        ),
        ([("a", 1, 0.5)], [("a", 1, 0.5)]),
        ([("a", 1, 0.5)], [("a", 1, 0.25)]),  # one column differs: one row each way
        ([], [("a", 1, 0.5)]),
        ([], []),
    ],
    ids=["duplicates-and-nulls", "same", "one-value-differs", "live-empty", "both-empty"],
)
def test_compare_counts_what_counts_and_except_all_count(spark, live, batch):
    live_frame = spark.createDataFrame(live, SCHEMA)
    batch_frame = spark.createDataFrame(batch, SCHEMA)
    assert compare(live_frame, batch_frame) == (
        len(live),
        len(batch),
        batch_frame.exceptAll(live_frame).count(),
        live_frame.exceptAll(batch_frame).count(),
    )


def test_compare_on_the_first_case_by_hand(spark):
    live = spark.createDataFrame([("a", 1, 0.5), ("a", 1, 0.5), ("b", 2, None)], SCHEMA)
    batch = spark.createDataFrame([("a", 1, 0.5), ("b", 2, None), ("c", 3, 1.0)], SCHEMA)
    # live 3, batch 3; "c" missing from live; the second "a" unexpected in it.
    assert compare(live, batch) == (3, 3, 1, 1)
