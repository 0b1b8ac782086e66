"""The landing parser: one output row per line, typed fields or a precise reason."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from pyspark.sql import functions as F

from lakehouse.catalog import SOURCES, Source
from lakehouse.transforms.landing import parse_landing_lines, plain_document_types, reason_class

IMPRESSIONS, CLICKS, USER_ACTIONS = SOURCES.values()

UTC = dt.UTC
GOOD_ACTION = (
    '{"event_id":"e1","user_id":"u1","action":"view","event_time":"2026-11-01T12:34:56.789Z"}'
)


# When the lines were ingested, and how far ahead of it an event time may be.
INGESTED_AT = dt.datetime(2026, 11, 23, 12, 0)
TOLERANCE = dt.timedelta(hours=24)


def parse(spark, source: Source, lines: list[bytes], max_line_bytes: int = 1024) -> list[dict]:
    """Lines as raw bytes, exactly as Spark's text source would hand them over."""
    frame = spark.createDataFrame(
        [(bytearray(line), f"file:/landing/{i}.jsonl") for i, line in enumerate(lines)],
        "line binary, _source_file string",
    ).select(
        F.col("line").cast("string").alias("value"),
        "_source_file",
        F.lit(INGESTED_AT).alias("_ingested_at"),
    )
    rows = frame.transform(parse_landing_lines(source, max_line_bytes, TOLERANCE)).collect()
    return sorted((row.asDict() for row in rows), key=lambda r: r["_source_file"])


def reason(spark, source: Source, line: bytes, **kwargs) -> str | None:
    (row,) = parse(spark, source, [line], **kwargs)
    return row["_reject_reason"]


def test_valid_line_is_typed_and_accepted(spark):
    (row,) = parse(spark, USER_ACTIONS, [GOOD_ACTION.encode()])
    assert row["_reject_reason"] is None
    assert (row["event_id"], row["user_id"], row["action"]) == ("e1", "u1", "view")
    assert row["event_time"] == dt.datetime(2026, 11, 1, 12, 34, 56, 789000)


@pytest.mark.parametrize(
    ("text", "expected_utc"),
    [
        ("2026-11-01T14:34:56+02:00", dt.datetime(2026, 11, 1, 12, 34, 56)),
        ("2026-11-01T07:34:56.5-05:00", dt.datetime(2026, 11, 1, 12, 34, 56, 500000)),
        ("2026-11-01T12:34:56.123456789Z", dt.datetime(2026, 11, 1, 12, 34, 56, 123456)),
        ("1900-01-01T01:00:00+01:00", dt.datetime(1900, 1, 1)),
        ("2026-11-24T12:00:00Z", INGESTED_AT + TOLERANCE),
        ("2026-11-24T13:00:00+01:00", INGESTED_AT + TOLERANCE),
    ],
)
def test_offsets_are_converted_to_utc(spark, text, expected_utc):
    line = f'{{"event_id":"e","user_id":"u","action":"login","event_time":"{text}"}}'
    (row,) = parse(spark, USER_ACTIONS, [line.encode()])
    assert row["_reject_reason"] is None
    assert row["event_time"] == expected_utc


REJECTED_LINES = [
    (b"", "empty line"),
    (b"   ", "empty line"),
    (b'{"event_id": "e1", ', "not valid JSON (syntax error or duplicate key)"),
    (b'{"a":1,"a":2}', "not valid JSON (syntax error or duplicate key)"),
    (b"[1, 2, 3]", "not a JSON object: got array"),
    (b'"just a string"', "not a JSON object: got string"),
    (b"\xff\xfe{}", "not valid UTF-8"),
    (
        b'{"user_id":"u1","action":"view","event_time":"2026-11-01T12:00:00Z"}',
        "missing required field(s): event_id",
    ),
    (
        b'{"event_id":null,"user_id":"u1","action":"view","event_time":null}',
        "missing required field(s): event_id, event_time",
    ),
    # Empty and blank strings are missing values (docs/contract.md, section 7).
    (
        b'{"event_id":"","user_id":" \\t","action":"view","event_time":"2026-11-01T12:00:00Z"}',
        "missing required field(s): event_id, user_id",
    ),
    (
        '{"event_id":"e","user_id":"\u00a0\u3000","action":"","event_time":" "}'.encode(),
        "missing required field(s): user_id, action, event_time",
    ),
    # Half a surrogate pair names no character: the line is not valid JSON.
    *[
        (
            b'{"event_id":"' + event_id + b'","user_id":"u","action":"view",'
            b'"event_time":"2026-11-01T12:00:00Z"}',
            "not valid JSON (a \\u escape of a lone UTF-16 surrogate)",
        )
        for event_id in (b"\\ud800", b"a\\uDC00b", b"\\ud800\\ud800", b"\\\\\\udbff")
    ],
    (
        b'{"event_id":42,"user_id":"u1","action":"view","event_time":"2026-11-01T12:00:00Z"}',
        "field 'event_id' must be a string, got bigint",
    ),
    (
        b'{"event_id":"e","user_id":{"id":1},"action":"view","event_time":"2026-11-01T12:00:00Z"}',
        "field 'user_id' must be a string, got object",
    ),
    (
        b'{"event_id":"e","user_id":"u","action":"view","event_time":1793000000}',
        "field 'event_time' must be a string, got bigint",
    ),
    (
        b'{"event_id":"e","user_id":"u","action":"view","event_time":"2026-11-01T12:00:00"}',
        "bad timestamp in 'event_time': '2026-11-01T12:00:00' (expected ISO-8601 with offset, "
        "e.g. 2026-11-01T12:34:56.789Z)",
    ),
    (
        b'{"event_id":"e","user_id":"u","action":"view","event_time":"2026-13-45T25:61:00Z"}',
        "bad timestamp in 'event_time': '2026-13-45T25:61:00Z' (expected ISO-8601 with offset, "
        "e.g. 2026-11-01T12:34:56.789Z)",
    ),
    (
        b'{"event_id":"e","user_id":"u","action":"view","event_time":"0000-06-01T00:00:00Z"}',
        "event_time too early: '0000-06-01T00:00:00Z' is before 1900-01-01 (UTC)",
    ),
    (
        b'{"event_id":"e","user_id":"u","action":"view","event_time":"1900-01-01T00:30:00+01:00"}',
        "event_time too early: '1900-01-01T00:30:00+01:00' is before 1900-01-01 (UTC)",
    ),
    (
        b'{"event_id":"e","user_id":"u","action":"view","event_time":"0001-01-01T23:59:59Z"}',
        "event_time too early: '0001-01-01T23:59:59Z' is before 1900-01-01 (UTC)",
    ),
    (
        b'{"event_id":"e","user_id":"u","action":"view","event_time":"2026-11-24T12:00:00.001Z"}',
        "event_time in the future: '2026-11-24T12:00:00.001Z' is more than 24 hours after its "
        "ingestion at 2026-11-23T12:00:00Z",
    ),
    (
        b'{"event_id":"e","user_id":"u","action":"view","event_time":"9999-06-15T00:00:00+02:00"}',
        "event_time in the future: '9999-06-15T00:00:00+02:00' is more than 24 hours after its "
        "ingestion at 2026-11-23T12:00:00Z",
    ),
    (
        b'{"event_id":"e","user_id":"u","action":"view","event_time":"yesterday"}',
        "bad timestamp in 'event_time': 'yesterday' (expected ISO-8601 with offset, "
        "e.g. 2026-11-01T12:34:56.789Z)",
    ),
    (
        b'{"event_id":"e","user_id":"u","action":"teleport","event_time":"2026-11-01T12:00:00Z"}',
        "unknown action 'teleport' (expected one of login, view, click, purchase, logout)",
    ),
    (
        b'{"event_id":"e","user_id":7,"action":"fly","event_time":"2026-11-01T12:00:00Z"}',
        "field 'user_id' must be a string, got bigint; unknown action 'fly' "
        "(expected one of login, view, click, purchase, logout)",
    ),
]


@pytest.mark.parametrize(("line", "expected"), REJECTED_LINES)
def test_rejected_lines_say_why(spark, line, expected):
    assert reason(spark, USER_ACTIONS, line) == expected


def test_reason_classes_drop_the_details(spark):
    reasons = [expected for _, expected in REJECTED_LINES] + [
        "line too long: 5 bytes (limit 2)",
        "unreadable file: corrupt or truncated gzip (Compressed file ended before the "
        "end-of-stream marker was reached)",
    ]
    frame = spark.createDataFrame([(r,) for r in reasons], "reason string")
    classes = {row[0] for row in frame.select(reason_class(F.col("reason"))).collect()}
    assert classes == {
        "empty line",
        "not valid JSON",
        "not a JSON object",
        "not valid UTF-8",
        "missing required field(s)",
        "field 'event_id' must be a string",
        "field 'user_id' must be a string",
        "field 'event_time' must be a string",
        "bad timestamp in 'event_time'",
        "event_time too early",
        "event_time in the future",
        "unknown action",
        "line too long",
        "unreadable file",
    }


def test_a_surrogate_pair_is_one_character_and_an_escaped_backslash_no_escape(spark):
    pair = b"\\ud83d\\ude00"  # U+1F600 in JSON's UTF-16 escapes
    backslash = b"\\\\ud800"  # an escaped backslash, then the letters ud800
    lines = [
        b'{"event_id":"' + event_id + b'","user_id":"u","action":"view",'
        b'"event_time":"2026-11-01T12:00:00Z"}'
        for event_id in (pair, backslash)
    ]
    first, second = parse(spark, USER_ACTIONS, lines)
    assert (first["_reject_reason"], first["event_id"]) == (None, "\U0001f600")
    assert (second["_reject_reason"], second["event_id"]) == (None, "\\ud800")


def test_extra_fields_are_ignored(spark):
    line = GOOD_ACTION[:-1] + ',"browser":{"name":"x"},"n":1}'
    assert reason(spark, USER_ACTIONS, line.encode()) is None


def test_a_plain_line_takes_the_short_way_to_its_field_types(spark):
    """A line of the source's fields only, all strings, has one of the document types
    the parser knows its fields' types from without looking at each field."""
    clicks = dataclasses.replace(SOURCES["clicks"], optional_fields=("referrer",))
    plain = '{"click_id":"c","impression_id":"i","ad_id":"a","user_id":"u","event_time":"t"'
    lines = [plain + "}", plain + ',"referrer":"r"}']
    types = spark.createDataFrame([(line,) for line in lines], "value string").select(
        F.expr("schema_of_variant(parse_json(value))").alias("type")
    )
    assert {row.type for row in types.collect()} == set(plain_document_types(clicks))


def test_oversized_line_is_rejected_and_raw_truncated(spark):
    line = GOOD_ACTION[:-1] + ',"pad":"' + "x" * 5000 + '"}'
    (row,) = parse(spark, USER_ACTIONS, [line.encode()], max_line_bytes=2000)
    assert row["_reject_reason"] == f"line too long: {len(line)} bytes (limit 2000)"
    assert row["raw"] == line[:1000]


def test_non_utf8_line_keeps_exact_bytes(spark):
    import base64

    line = b'{"event_id":"\xe9t\xe9"}'
    (row,) = parse(spark, USER_ACTIONS, [line])
    assert row["_reject_reason"] == "not valid UTF-8"
    assert base64.b64decode(row["raw_base64"]) == line
    assert "\ufffd" in row["raw"]


def test_every_line_yields_exactly_one_row(spark):
    lines = [GOOD_ACTION.encode(), b"", b"nope", GOOD_ACTION.encode(), b"[]"]
    rows = parse(spark, USER_ACTIONS, lines)
    assert len(rows) == len(lines)
    assert [r["_reject_reason"] is None for r in rows] == [True, False, False, True, False]


@pytest.mark.parametrize("source", [IMPRESSIONS, CLICKS])
def test_each_source_requires_its_own_fields(spark, source):
    values = {name: f"{name}-1" for name in source.string_fields}
    present = ",".join(f'"{k}":"{v}"' for k, v in values.items())
    good = f'{{{present},"event_time":"2026-11-01T12:00:00Z"}}'
    assert reason(spark, source, good.encode()) is None
    without_last = good.replace(f'"{source.string_fields[-1]}":', '"other":')
    assert reason(spark, source, without_last.encode()) == (
        f"missing required field(s): {source.string_fields[-1]}"
    )
