"""Parse raw landing lines into typed events, or a reason why not.

Input: one row per line, `value` (the line's bytes as Spark read them),
`_source_file` and `_ingested_at` (when the driver planned the micro-batch),
and any other bookkeeping columns (a Kafka message's topic, partition and
offset). Output: the source's typed fields, `_extra_fields` (an accepted line's
fields the catalog does not declare, as a JSON object), `_reject_reason` (null for an
accepted line), `raw` / `raw_base64` for the quarantine (null for an accepted
line), and the input's columns other than `value` unchanged.

Every line yields exactly one output row, so lines read = accepted + rejected.
Checks, in order: UTF-8, size, empty, JSON syntax, JSON object; then every
field problem is listed (missing, null or blank, wrong type, bad timestamp, event
time out of the accepted range, unknown enum value). Nothing is repaired: a
line with any problem is rejected whole.

The accepted event times run from `EARLIEST_EVENT_TIME` to `_ingested_at`
plus the future tolerance. Later ones come from a wrong clock and would move
the watermark so far that every later event of the source counted as late.
Earlier ones cannot cross into pandas (nanosecond timestamps, from 1677),
which the per-user state functions use; before 1900 no event is plausible.
The JSON is parsed once into a VARIANT so the JSON type of each field can be
checked (`from_json` would silently turn the number 5 into the string "5").
"""

from __future__ import annotations

import datetime as dt
import itertools
import operator
import re
from collections.abc import Callable
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse.catalog import EVENT_TIME, EXTRA_FIELDS, Source

# ISO-8601 date-time with seconds and a UTC offset; fractions up to nanoseconds.
ISO_TIMESTAMP = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$"
EARLIEST_EVENT_TIME = dt.datetime(1900, 1, 1, tzinfo=dt.UTC)
# A string of nothing but Unicode white space (the White_Space property: spaces,
# tabs, line breaks, no-break and ideographic spaces) is a missing value.
BLANK = r"^\p{IsWhite_Space}*$"
# A JSON escape of half a surrogate pair (`"\ud800"`) names no Unicode character:
# Spark's JSON parser rejects the line, and this names the cause. (A correct
# pair, `"\ud83d\ude00"`, is one character and accepted; UTF-8 bytes of a lone
# surrogate are not valid UTF-8.)
LONE_SURROGATE = (
    r"(?i)(?<!\\)(?:\\\\)*\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])"
    r"|(?<!\\ud[89ab][0-9a-f]{2})(?<!\\)(?:\\\\)*\\ud[c-f][0-9a-f]{2}"
)
RAW_PREVIEW_CHARS = 1000
VALUE_PREVIEW_CHARS = 60
# The class of a reason: the reason without its details (values, sizes),
# e.g. "missing required field(s)", "unknown action". A line with several
# problems is classed by the first. Reports count quarantined lines by class.
REASON_CLASS = (
    r"^(missing required field\(s\)|unknown [a-z_]+|field '[a-z_]+' must be a string"
    r"|bad timestamp in '[a-z_]+'|[^:;(]+)"
)


# The reason's part that names a declared field sent as another JSON type.
RETYPED = r"field '([a-z_]+)' must be a string, got ([a-z]+)"


def drift(extra_fields: Column, reason: Column) -> Column:
    """What a parsed line holds that the catalog does not expect, as an array of
    (`kind`, `field`, `type`): `undeclared` for each of its `_extra_fields`, with the
    value's JSON type; `retyped` for each declared field its reason says arrived as
    another type."""
    undeclared = F.transform(
        F.map_entries(F.from_json(extra_fields, "map<string, variant>")),
        lambda entry: F.struct(
            F.lit("undeclared").alias("kind"),
            entry["key"].alias("field"),
            _kind(F.schema_of_variant(entry["value"])).alias("type"),
        ),
    )
    retyped = F.transform(
        F.arrays_zip(
            F.regexp_extract_all(reason, F.lit(RETYPED), 1).alias("field"),
            F.regexp_extract_all(reason, F.lit(RETYPED), 2).alias("type"),
        ),
        lambda pair: F.struct(
            F.lit("retyped").alias("kind"), pair["field"].alias("field"), pair["type"].alias("type")
        ),
    )
    return F.concat(F.coalesce(undeclared, F.array()), F.coalesce(retyped, F.array()))


def reason_class(reason: Column) -> Column:
    return F.trim(F.regexp_extract(reason, REASON_CLASS, 1))


def reason_class_of(reason: str) -> str:
    """`reason_class` of one reason, in Python: the same expression, no match an empty
    class, spaces trimmed (Spark's `trim` trims spaces only)."""
    found = re.match(REASON_CLASS, reason)
    return (found.group(1) if found else "").strip(" ")


def _json_type(path: str) -> Column:
    """JSON type of a field of `_doc`: STRING, BIGINT, ..., VOID for null, NULL if absent."""
    return F.expr(f"schema_of_variant(variant_get(_doc, '$.{path}'))")


def plain_document_types(source: Source) -> list[str]:
    """`schema_of_variant` of every object holding the source's required fields, any of
    its optional ones and no other, each a string (the variant sorts an object's keys)."""
    return [
        "OBJECT<" + ", ".join(f"{name}: STRING" for name in sorted((*source.fields, *extra))) + ">"
        for count in range(len(source.optional_fields) + 1)
        for extra in itertools.combinations(source.optional_fields, count)
    ]


def _kind(json_type: Column) -> Column:
    """`object`, `array`, `bigint`, ... without the nested detail of schema_of_variant."""
    return F.lower(F.regexp_extract(json_type, "^[A-Z]+", 0))


def _preview(column: Column) -> Column:
    return F.substring(column, 1, VALUE_PREVIEW_CHARS)


def _problems(fields: list[tuple[Column, Column]]) -> Column:
    """`; `-joined messages of the (condition, message) pairs that hold, or null."""
    return F.nullif(_join("; ", [F.when(cond, msg) for cond, msg in fields]), F.lit(""))


def _join(separator: str, parts: list[Column]) -> Column:
    """The parts that are not null, joined; `concat_ws` skips nulls and, unlike
    array functions with lambdas, keeps the projection in generated code."""
    return F.concat_ws(separator, *parts)


def parse_landing_lines(
    source: Source, max_line_bytes: int, future_tolerance: dt.timedelta
) -> Callable[[DataFrame], DataFrame]:
    """The transform of a source's landing lines: its fields, typed, and a reason for a
    line it rejects (`_reject_reason`), one row per line."""

    def transform(lines: DataFrame) -> DataFrame:
        bookkeeping = [name for name in lines.columns if name != "value"]
        fields = _Fields(source)
        checks = fields.checks(future_tolerance)
        # The reason is built only for a line with a problem: the messages (format
        # strings, lists of fields) cost more than all the tests together.
        line_ok = F.col("_doc").isNotNull() & F.col("_doc_type").startswith("OBJECT")
        no_problem = ~reduce(operator.or_, [F.coalesce(cond, F.lit(False)) for cond, _ in checks])
        reason = F.when(line_ok & no_problem, F.lit(None).cast("string")).otherwise(
            F.coalesce(_line_reason(max_line_bytes), _problems(checks))
        )
        value, is_utf8, size = F.col("value"), F.col("_utf8"), F.col("_size")
        raw = F.when(~is_utf8, F.expr("make_valid_utf8(value)")).otherwise(value)
        rejected = reason.isNotNull()
        return _with_document(lines, source, max_line_bytes).select(
            *[fields.text[n].alias(n) for n in source.string_fields],
            # Typed only when accepted: a rejected line's "timestamp" may be any string.
            F.when(reason.isNull(), fields.event_time).alias(EVENT_TIME),
            # Optional: null when missing, null or blank.
            *[F.when(fields.is_string[n], fields.text[n]).alias(n) for n in source.optional_fields],
            # Bronze keeps what the line held beyond the catalog's fields; a rejected
            # line's raw text keeps all of it.
            F.when(reason.isNull(), F.col("_extra")).alias(EXTRA_FIELDS),
            reason.alias("_reject_reason"),
            # The line itself for the quarantine only: bronze keeps the parsed fields,
            # and an accepted line's text would double what a micro-batch holds.
            F.when(
                rejected,
                F.when(size > max_line_bytes, F.substring(raw, 1, RAW_PREVIEW_CHARS)).otherwise(
                    raw
                ),
            ).alias("raw"),
            F.when(
                rejected & ~is_utf8 & (size <= max_line_bytes), F.base64(value.cast("binary"))
            ).alias("raw_base64"),
            *bookkeeping,
        )

    return transform


def _with_document(lines: DataFrame, source: Source, max_line_bytes: int) -> DataFrame:
    """The lines with every function of the line and of its parsed document, computed
    once per line: the rules refer to each several times. `_doc`: the line parsed
    into a VARIANT (null: not JSON, or not UTF-8, or too long); `_type_<field>` and
    `_text_<field>`: each field's JSON type and its value as a string."""
    value = F.col("value")
    is_utf8, size = F.col("_utf8"), F.col("_size")
    bookkeeping = [name for name in lines.columns if name != "value"]
    names = (*source.fields, *source.optional_fields)
    with_doc = lines.select(
        "value",
        *bookkeeping,
        F.expr("is_valid_utf8(value)").alias("_utf8"),
        F.octet_length(value).alias("_size"),
    ).withColumn(
        "_doc",
        F.when(is_utf8 & (size <= max_line_bytes), F.expr("try_parse_json(value)")),
    )
    with_doc = with_doc.withColumn("_doc_type", F.expr("schema_of_variant(_doc)"))
    # A document of the source's fields and nothing else, every one a string, is
    # the common case: its fields' types are known from its own type at once.
    expected = F.col("_doc_type").isin(*plain_document_types(source))
    return with_doc.select(
        "*",
        F.when(~expected & F.col("_doc_type").startswith("OBJECT"), _undeclared(names)).alias(
            "_extra"
        ),
        *[
            F.when(expected, F.lit("STRING")).otherwise(_json_type(name)).alias(f"_type_{name}")
            for name in names
        ],
        *[
            F.expr(f"try_variant_get(_doc, '$.{name}', 'string')").alias(f"_text_{name}")
            for name in names
        ],
    )


def _undeclared(names: tuple[str, ...]) -> Column:
    """The JSON text of an object of the line's fields other than `names`, with their
    values as sent (nested, null, any type), in the line's order; null when it has none.
    The line is parsed again into a map (a VARIANT has no function that drops keys):
    only for a document that is not one of the plain ones."""
    declared = ", ".join(f"'{name}'" for name in names)  # names from the catalog
    return F.nullif(
        F.expr(
            "to_json(map_filter(from_json(value, 'map<string, variant>'), "
            f"(name, _) -> name NOT IN ({declared})))"
        ),
        F.lit("{}"),
    )


def _line_reason(max_line_bytes: int) -> Column:
    """Why the line as a whole is rejected, before its fields are looked at; null when
    it is a JSON object."""
    value, is_utf8, size, doc_type = (
        F.col("value"), F.col("_utf8"), F.col("_size"), F.col("_doc_type")
    )  # fmt: skip
    return (
        F.when(~is_utf8, F.lit("not valid UTF-8"))
        .when(
            size > max_line_bytes,
            F.format_string(f"line too long: %d bytes (limit {max_line_bytes})", size),
        )
        .when(F.trim(value) == "", F.lit("empty line"))
        .when(
            F.col("_doc").isNull() & value.rlike(LONE_SURROGATE),
            F.lit("not valid JSON (a \\u escape of a lone UTF-16 surrogate)"),
        )
        .when(F.col("_doc").isNull(), F.lit("not valid JSON (syntax error or duplicate key)"))
        .when(
            ~doc_type.startswith("OBJECT"),
            F.concat(
                F.lit("not a JSON object: got "),
                F.lower(F.regexp_extract(doc_type, "^[A-Z]+", 0)),
            ),
        )
    )


class _Fields:
    """A source's fields in a document (`_with_document`'s columns), and the rules on them."""

    def __init__(self, source: Source) -> None:
        self.source = source
        names = (*source.fields, *source.optional_fields)
        self.types = {name: F.col(f"_type_{name}") for name in names}
        self.text = {name: F.col(f"_text_{name}") for name in names}
        # An empty or blank string is as good as no value (docs/contract.md, section 7):
        # otherwise every event with `"event_id": ""` would be one event to dedup.
        blank = {name: self.text[name].rlike(BLANK) for name in names}
        self.missing = {
            name: self.types[name].isNull() | (self.types[name] == "VOID") | blank[name]
            for name in names
        }
        # A string with a value: the rules on a field's content apply to these only.
        self.is_string = {name: (self.types[name] == "STRING") & ~blank[name] for name in names}
        self.event_time = self.text[EVENT_TIME].try_cast("timestamp")

    def checks(self, future_tolerance: dt.timedelta) -> list[tuple[Column, Column]]:
        """Every field rule, as (the line breaks it, the message)."""
        source, text, types = self.source, self.text, self.types
        missing_list = _join(", ", [F.when(self.missing[n], F.lit(n)) for n in source.fields])
        checks: list[tuple[Column, Column]] = [
            (missing_list != "", F.concat(F.lit("missing required field(s): "), missing_list))
        ]
        checks += [
            (
                ~self.missing[n] & (types[n] != "STRING"),
                F.format_string(f"field '{n}' must be a string, got %s", _kind(types[n])),
            )
            for n in (*source.fields, *source.optional_fields)
        ]
        checks += self._time_checks(future_tolerance)
        for name, allowed in source.enums.items():
            checks.append(
                (
                    self.is_string[name] & ~text[name].isin(*allowed),
                    F.format_string(
                        f"unknown {name} '%s' (expected one of {', '.join(allowed)})",
                        _preview(text[name]),
                    ),
                )
            )
        return checks

    def _time_checks(self, future_tolerance: dt.timedelta) -> list[tuple[Column, Column]]:
        """The event time: an ISO-8601 timestamp, from EARLIEST_EVENT_TIME to the
        ingestion plus the future tolerance."""
        event_time, time_text = self.event_time, _preview(self.text[EVENT_TIME])
        is_timestamp = self.is_string[EVENT_TIME] & self.text[EVENT_TIME].rlike(ISO_TIMESTAMP)
        latest = F.col("_ingested_at") + F.expr(
            f"INTERVAL {int(future_tolerance.total_seconds())} SECONDS"
        )
        return [
            (
                self.is_string[EVENT_TIME] & (~is_timestamp | event_time.isNull()),
                F.format_string(
                    f"bad timestamp in '{EVENT_TIME}': '%s' (expected ISO-8601 with offset, "
                    "e.g. 2026-11-01T12:34:56.789Z)",
                    time_text,
                ),
            ),
            (
                is_timestamp & (event_time < F.lit(EARLIEST_EVENT_TIME)),
                F.format_string(
                    f"{EVENT_TIME} too early: '%s' is before {EARLIEST_EVENT_TIME:%Y-%m-%d} (UTC)",
                    time_text,
                ),
            ),
            (
                is_timestamp & (event_time > latest),
                F.format_string(
                    f"{EVENT_TIME} in the future: '%s' is more than "
                    f"{_hours(future_tolerance)} after its ingestion at %s",
                    time_text,
                    F.date_format(F.col("_ingested_at"), "yyyy-MM-dd'T'HH:mm:ss'Z'"),
                ),
            ),
        ]


def _hours(span: dt.timedelta) -> str:
    hours = span.total_seconds() / 3600
    return f"{hours:g} hour{'' if hours == 1 else 's'}"
