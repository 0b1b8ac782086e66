"""What the Delta log's commits say they wrote (`storage.delta.log`), from the metrics
Delta records: no Spark needed."""

from __future__ import annotations

from lakehouse.storage.delta.log import commit_rows

# Operation metrics as delta-spark wrote them for gold/user_status: a MERGE that updated
# 24 rows of files holding 54 others, which it copied into the files it rewrote.
MERGE = {
    "numSourceRows": "24",
    "numTargetRowsInserted": "0",
    "numTargetRowsUpdated": "24",
    "numTargetRowsMatchedUpdated": "24",
    "numTargetRowsCopied": "54",
    "numTargetRowsDeleted": "0",
    "numOutputRows": "78",
}


def test_a_merge_counts_the_rows_it_inserted_or_updated_not_those_it_copied():
    assert commit_rows({"operation": "MERGE", "operationMetrics": MERGE}) == 24
    inserted = {**MERGE, "numTargetRowsInserted": "38", "numTargetRowsUpdated": "0"}
    assert commit_rows({"operation": "MERGE", "operationMetrics": inserted}) == 38


def test_an_append_counts_the_rows_it_wrote():
    append = {"operation": "STREAMING UPDATE", "operationMetrics": {"numOutputRows": "80"}}
    assert commit_rows(append) == 80
    assert commit_rows({"operation": "CREATE TABLE", "operationMetrics": {}}) == 0
