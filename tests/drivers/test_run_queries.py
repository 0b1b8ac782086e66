"""How a run schedules a layer's queries (`lakehouse.drivers.pipeline.run_queries`): side by
side, each once what it reads has ended and passed its checks; what reads a table that
failed never runs; after an error nothing starts. Real threads, queries that record
what they see."""

from __future__ import annotations

import threading
import time

from lakehouse.drivers.pipeline import LayerQuery, run_queries
from lakehouse.runtime.progress import StageResult

WAIT = 10  # seconds: a query that waits longer for another failed the test


class Log:
    """What happened, in order, across the query threads and the run's thread."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.lock = threading.Lock()

    def add(self, event: str) -> None:
        with self.lock:
            self.events.append(event)

    def query(self, name: str, reads: frozenset[str] = frozenset(), body=None) -> LayerQuery:
        def run() -> list[StageResult]:
            self.add(f"start {name}")
            if body is not None:
                body()
            self.add(f"end {name}")
            return [StageResult(name)]

        return LayerQuery(name, run, reads)

    def ended(self, failing: frozenset[str] = frozenset()):
        def ended(results: list[StageResult]) -> bool:
            (result,) = results
            self.add(f"checked {result.stage}")
            return result.stage not in failing

        return ended


def test_queries_that_read_nothing_of_each_other_run_at_the_same_time():
    log, both_running = Log(), threading.Barrier(2, timeout=WAIT)
    queries = [
        log.query(n, body=both_running.wait) for n in ("silver/clicks", "silver/impressions")
    ]
    results, error = run_queries(queries, threads=2, ended=log.ended())
    assert error is None
    assert [r.stage for r in results] == ["silver/clicks", "silver/impressions"]


def test_a_query_starts_only_once_what_it_reads_has_ended_and_been_checked():
    log = Log()
    impressions_may_end = threading.Event()
    queries = [
        log.query("silver/impressions", body=lambda: impressions_may_end.wait(WAIT)),
        log.query("silver/ad_attribution", frozenset({"silver/impressions"})),
        log.query("silver/user_actions", body=impressions_may_end.set),
    ]
    results, error = run_queries(queries, threads=3, ended=log.ended())
    assert error is None
    events = log.events
    assert events.index("start silver/ad_attribution") > events.index("checked silver/impressions")
    # Results in the queries' order, whatever order they ended in.
    assert [r.stage for r in results] == [q.name for q in queries]


def test_what_reads_a_failed_table_never_runs_and_the_other_queries_do():
    log = Log()
    queries = [
        log.query("gold/ad_performance_hourly"),
        log.query("gold/campaign_daily", frozenset({"gold/ad_performance_hourly"})),
        log.query("gold/weekly", frozenset({"gold/campaign_daily"})),  # through the one between
        log.query("gold/user_status"),
    ]
    results, error = run_queries(
        queries, threads=1, ended=log.ended(failing=frozenset({"gold/ad_performance_hourly"}))
    )
    assert error is None
    assert [r.stage for r in results] == ["gold/ad_performance_hourly", "gold/user_status"]
    assert not [e for e in log.events if "campaign_daily" in e or "weekly" in e]


def test_after_an_error_no_query_starts_and_the_running_ones_end():
    def fail() -> None:
        raise RuntimeError("the query failed")

    log = Log()
    one_at_a_time = [log.query("bronze/impressions", body=fail), log.query("bronze/clicks")]
    results, error = run_queries(one_at_a_time, threads=1, ended=log.ended())
    assert isinstance(error, RuntimeError) and results == []
    assert log.events == ["start bronze/impressions"]

    log, all_started = Log(), threading.Barrier(3, timeout=WAIT)
    side_by_side = [
        log.query("bronze/impressions", body=lambda: (all_started.wait(), fail())),
        log.query("bronze/clicks", body=all_started.wait),
        log.query("bronze/user_actions", body=all_started.wait),
    ]
    results, error = run_queries(side_by_side, threads=3, ended=log.ended())
    assert isinstance(error, RuntimeError)
    assert [r.stage for r in results] == ["bronze/clicks", "bronze/user_actions"]


def test_the_error_returned_is_the_first_querys_in_order_not_the_first_to_end():
    """The same run fails with the same error each time (side by side, any query of
    bronze may fail first)."""
    log, second_failing = Log(), threading.Event()

    def first() -> None:
        second_failing.wait(WAIT)
        time.sleep(0.2)  # the second query's failure has ended it by now
        raise RuntimeError("the first query's checkpoint is missing")

    def second() -> None:
        second_failing.set()
        raise RuntimeError("the second query's checkpoint is from another root")

    queries = [log.query("bronze/impressions", body=first), log.query("bronze/clicks", body=second)]
    results, error = run_queries(queries, threads=2, ended=log.ended())
    assert results == [] and "first query" in str(error)
