"""Property-based tests of the landing parser (hypothesis), against an independent oracle.

Each example is a batch of lines parsed by the real Spark transform. The
properties: one output row per line (so counts reconcile), an accepted line
has every field typed and its timestamp converted exactly, a rejected line
has the reason an independent Python reading of the contract expects, and a
line the contract does not define (random bytes, deep or huge JSON, other
encodings) is never accepted unless it is a valid event, and never stops the
batch.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.catalog import SOURCES
from tests.transforms.test_landing import INGESTED_AT, TOLERANCE
from tests.transforms.test_landing import parse as parse_by_file_name

MAX_LINE_BYTES = 4096
USER_ACTIONS = SOURCES["user_actions"]
ACTIONS = list(USER_ACTIONS.enums["action"])
KNOWN_CLASSES = (
    "not valid UTF-8",
    "line too long",
    "empty line",
    "not valid JSON",
    "not a JSON object",
    "missing required field(s)",
    "field '",
    "bad timestamp in 'event_time'",
    "event_time too early",
    "event_time in the future",
    "unknown action",
)
# Examples per property from the hypothesis profile (tests/conftest.py): 25 in
# `make test`, 500 with `pytest --hypothesis-profile long`.
FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
offsets = st.integers(-14 * 60, 14 * 60).map(lambda minutes: dt.timedelta(minutes=minutes))
# Most event times within the accepted range, some up to year 9999 (in the future).
instants = st.one_of(
    st.datetimes(min_value=dt.datetime(1900, 1, 2), max_value=INGESTED_AT + TOLERANCE),
    st.datetimes(min_value=dt.datetime(1900, 1, 2), max_value=dt.datetime(9999, 12, 30)),
).map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))


def iso(instant_utc: dt.datetime, offset: dt.timedelta) -> str:
    local = instant_utc + offset
    sign = "+" if offset >= dt.timedelta(0) else "-"
    minutes = abs(int(offset.total_seconds())) // 60
    return (
        local.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        + f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    )


FUZZED: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def report_what_was_fuzzed(request, figures):
    FUZZED.clear()
    yield
    if FUZZED:
        figures.append(
            f"fuzz ({request.node.name}): {FUZZED['examples']} examples, "
            f"{FUZZED['lines']:,} lines ({FUZZED['bytes']:,} bytes) through the landing parser"
        )


def parse(spark, lines: list[bytes]) -> list[dict]:
    """One row per line, in the order of the lines (files are named by line number)."""
    FUZZED.update(examples=1, lines=len(lines), bytes=sum(len(line) for line in lines))
    rows = parse_by_file_name(spark, USER_ACTIONS, lines, MAX_LINE_BYTES)
    return sorted(rows, key=lambda row: int(row["_source_file"].rsplit("/", 1)[1].split(".")[0]))


# Unicode's White_Space property, written out independently of the parser's regex.
WHITE_SPACE = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {
    chr(code) for code in range(0x2000, 0x200B)
}


def is_blank(value: object) -> bool:
    return isinstance(value, str) and all(char in WHITE_SPACE for char in value)


@st.composite
def events(draw) -> tuple[bytes, str | None, dt.datetime | None]:
    """A user action with each field valid, missing, null, wrongly typed or out of its enum,
    plus unknown extra fields (schema drift), and the reason the contract gives."""
    instant = draw(instants)
    doc: dict[str, object] = {
        "event_id": draw(st.text(min_size=1, max_size=12)),
        "user_id": draw(st.text(min_size=1, max_size=12)),
        "action": draw(st.sampled_from(ACTIONS)),
        "event_time": iso(instant, draw(offsets)),
    }
    missing, wrong_type = [], []
    for name in USER_ACTIONS.fields:
        fate = draw(
            st.sampled_from(["ok"] * 6 + ["absent", "null", "blank", "number", "list", "object"])
        )
        if fate == "ok" and name != "action" and is_blank(doc[name]):
            missing.append(name)  # a drawn id of nothing but white space
        elif fate == "blank":
            doc[name] = draw(st.text(alphabet=sorted(WHITE_SPACE), max_size=3))
            missing.append(name)
        elif fate == "absent":
            del doc[name]
            missing.append(name)
        elif fate == "null":
            doc[name] = None
            missing.append(name)
        elif fate == "number":
            doc[name] = draw(st.integers(-(2**31), 2**31))
            wrong_type.append(f"field '{name}' must be a string, got bigint")
        elif fate == "list":
            doc[name] = draw(st.lists(json_values, max_size=2))
            wrong_type.append(f"field '{name}' must be a string, got array")
        elif fate == "object":
            doc[name] = {"nested": draw(json_values)}
            wrong_type.append(f"field '{name}' must be a string, got object")
    bad_action = None
    action_set = isinstance(doc.get("action"), str) and "action" not in missing
    if action_set and draw(st.booleans()) and draw(st.booleans()):
        bad_action = draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=10))
        if bad_action in ACTIONS:
            bad_action = None
        else:
            doc["action"] = bad_action
    for extra in draw(st.lists(st.text(min_size=1, max_size=8), max_size=3)):
        if extra not in USER_ACTIONS.fields:
            doc[extra] = draw(json_values)

    problems = []
    if missing:
        problems.append(f"missing required field(s): {', '.join(missing)}")
    problems += wrong_type
    if (
        isinstance(doc.get("event_time"), str)
        and "event_time" not in missing
        and instant > INGESTED_AT + TOLERANCE
    ):
        problems.append(
            f"event_time in the future: '{doc['event_time']}' is more than 24 hours after its "
            f"ingestion at {INGESTED_AT:%Y-%m-%dT%H:%M:%SZ}"
        )
    if bad_action is not None:
        problems.append(f"unknown action '{bad_action}' (expected one of {', '.join(ACTIONS)})")
    line = json.dumps(doc, ensure_ascii=draw(st.booleans())).encode()
    accepted_at = instant if not problems else None
    return line, "; ".join(problems) or None, accepted_at


@FUZZ
@given(st.lists(events(), min_size=1, max_size=30))
def test_generated_events_are_accepted_or_rejected_with_the_contract_reason(spark, batch):
    rows = parse(spark, [line for line, _, _ in batch])
    assert len(rows) == len(batch)
    for row, (line, reason, accepted_at) in zip(rows, batch, strict=True):
        assert row["_reject_reason"] == reason, line
        if reason is None:
            assert row["event_time"] == accepted_at, line
            assert all(row[name] is not None for name in USER_ACTIONS.fields)
        assert row["raw"] == (None if reason is None else line.decode())


hostile_lines = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(lambda text: text.encode("utf-16")),
    st.text(max_size=200).map(lambda text: text.encode("latin-1", errors="replace")),
    st.integers(1, 3000).map(lambda depth: b"[" * depth + b"]" * depth),
    st.integers(1, 3000).map(
        lambda depth: (
            b'{"event_id":"e","user_id":"u","action":"view",'
            b'"event_time":"2026-11-01T00:00:00Z","x":'
            + b'{"a":' * depth
            + b"1"
            + b"}" * depth
            + b"}"
        )
    ),
    st.integers(MAX_LINE_BYTES - 100, MAX_LINE_BYTES + 100).map(
        lambda size: b'{"event_id":"' + b"e" * size + b'"}'
    ),
    st.sampled_from(
        [
            b'{"event_id":"e","user_id":"u","action":"view","event_time":"0001-01-01T00:00:00Z"}',
            b'{"event_id":"e","user_id":"u","action":"view","event_time":"+10000-01-01T00:00:00Z"}',
            b'{"event_id":"e","user_id":"u","action":"view","event_time":"2026-11-01T00:00:00+24:00"}',
            b'{"event_id":"e","user_id":"u","action":"view","event_time":"NaN"}',
            b"NaN",
            b"\x00",
            b"\xef\xbb\xbf{}",
            b'{"event_id":"\\ud800"}',
        ]
    ),
)


@FUZZ
@given(st.lists(hostile_lines, min_size=1, max_size=20))
def test_hostile_lines_never_stop_the_batch_and_are_quarantined_with_a_known_reason(spark, lines):
    rows = parse(spark, lines)
    assert len(rows) == len(lines)
    for row, line in zip(rows, lines, strict=True):
        reason = row["_reject_reason"]
        if reason is None:
            # Accepted only if it really is a complete, valid user action.
            doc = json.loads(line)
            assert set(USER_ACTIONS.fields) <= set(doc) and doc["action"] in ACTIONS
            assert row["event_time"] is not None
        else:
            assert reason.startswith(KNOWN_CLASSES), reason
            if len(line) > MAX_LINE_BYTES:
                assert reason.startswith(("line too long", "not valid UTF-8")), reason


reasons = st.one_of(
    st.text(max_size=40),
    st.builds(
        lambda known, rest: known + rest, st.sampled_from(KNOWN_CLASSES), st.text(max_size=30)
    ),
    st.sampled_from(
        [
            "missing required field(s): user_id",
            "field 'ad_id' must be a string, not bigint",
            "bad timestamp in 'event_time': '<img src=x>'",
            "unknown action: 'jump'; bad timestamp in 'event_time': 'x'",
            "  line too long: 2300000000 bytes (the limit is 1048576)",
            "unreadable file: gzip: not a gzip file\n(second line)",
            "\u3000ideographic space: kept, not trimmed",
        ]
    ),
)


@FUZZ
@given(st.lists(reasons, min_size=1, max_size=30))
def test_a_reasons_class_is_the_same_in_python_and_in_spark(spark, texts):
    """The run report counts quarantine rows by class with pyarrow (a few rows) or
    Spark (many): both must class every reason alike."""
    from pyspark.sql import functions as F

    from lakehouse.transforms.landing import reason_class, reason_class_of

    frame = spark.createDataFrame([(text,) for text in texts], "reason string")
    on_spark = [row[0] for row in frame.select(reason_class(F.col("reason"))).collect()]
    assert on_spark == [reason_class_of(text) for text in texts]
