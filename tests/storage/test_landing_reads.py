"""Property test: whatever a landing file is named, and however gzip wrote it, Spark reads it.

Each example is a landing folder of files with generated names (colons,
brackets, braces, percent signs, spaces, any Unicode a file name can hold)
holding plain lines or gzip in one of the forms gzip reads and Hadoop's codec
refuses (`tests.helpers.gzip_variants`). Bronze's own preparation
(`prepare_files`) and read (`read_lines`) on the tests' Spark session must
read every line of every file, each under its landing file's own URI, which
is what a micro-batch hands to the parser. A whole run over such files is
test_hostile_input.py's.
"""

from __future__ import annotations

import gzip
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.storage.landing import file_uri, prepare_files, read_lines
from tests.helpers import gzip_variants

MAX_LINE_BYTES = 1024 * 1024
KINDS = ["plain", "gzip", *gzip_variants(b"")]
FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Characters Hadoop's paths, globs and URIs treat specially, often; then any other
# a file name may hold (no `/`, no NUL, no lone surrogates: not UTF-8).
name_chars = st.one_of(
    st.sampled_from(":[]{}*?\\%#&;=+@!$'()^~` ,."),
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"),
)
names = st.text(name_chars, min_size=1, max_size=24).filter(
    lambda name: not name.startswith((".", "_"))
)
landing_files = st.lists(
    st.tuples(names, st.sampled_from(KINDS)), min_size=1, max_size=5, unique_by=lambda f: f[0]
)


@FUZZ
@given(files=landing_files)
def test_every_line_of_every_file_is_read_under_its_own_name(spark, tmp_path_factory, files):
    folder = tmp_path_factory.mktemp("landing")
    expected: Counter[tuple[str, str]] = Counter()
    uris = []
    for number, (name, kind) in enumerate(files):
        lines = [f'{{"file": {number}, "line": {line}}}' for line in range(3)]
        data = "\n".join(lines).encode() + b"\n"
        if kind == "plain":
            path = folder / f"{name}.jsonl"
            path.write_bytes(data)
        else:
            path = folder / f"{name}.jsonl.gz"
            path.write_bytes(gzip.compress(data) if kind == "gzip" else gzip_variants(data)[kind])
        uri = file_uri(str(path))
        uris.append(uri)
        expected.update((uri, line) for line in lines)

    prepared = prepare_files(uris, folder / "_staging", MAX_LINE_BYTES, folder)
    assert prepared.unreadable == {}
    read = read_lines(spark, prepared.read).collect()
    assert Counter((row["_source_file"], row["value"]) for row in read) == expected
