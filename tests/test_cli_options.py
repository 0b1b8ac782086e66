"""The command line's own options: the version, global options before or after the
command, `--debug` for a traceback."""

from __future__ import annotations

import pytest

from lakehouse import __version__
from lakehouse.cli import build_parser, main


def test_version(capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"lakehouse {__version__}"
    assert __version__[0].isdigit()


@pytest.mark.parametrize(
    "arguments",
    [
        ["--data-root", "/d", "--spark-master", "local[2]", "validate"],
        ["validate", "--data-root", "/d", "--spark-master", "local[2]"],
        ["--spark-master", "local[2]", "validate", "--data-root", "/d"],
    ],
    ids=["before", "after", "both"],
)
def test_global_options_go_before_or_after_the_command(arguments):
    parsed = build_parser().parse_args(arguments)
    assert (parsed.data_root, parsed.spark_master) == ("/d", "local[2]")


def test_without_global_options_the_settings_decide():
    parsed = build_parser().parse_args(["run"])
    assert not hasattr(parsed, "data_root") and not hasattr(parsed, "spark_master")


def test_debug_prints_the_traceback_of_a_failure(tmp_path, capsys):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    command = ["--data-root", str(not_a_folder), "generate", "--events", "5", "--seed", "1"]
    assert main(command) == 1
    quiet = capsys.readouterr().err
    assert "lakehouse generate: error:" in quiet and "Traceback" not in quiet
    assert main(["--debug", *command]) == 1
    loud = capsys.readouterr().err
    assert "Traceback (most recent call last)" in loud and "lakehouse generate: error:" in loud


@pytest.mark.parametrize(
    "command",
    [
        ["validate"],
        ["backfill", "--pending"],
        ["parity", "--start", "2026-11-01", "--end", "2026-11-01"],
        ["maintain"],
        ["recover", "--layer", "silver"],
        ["state"],
    ],
)
def test_a_missing_data_root_is_refused_and_not_created(tmp_path, capsys, command):
    """A share not mounted must not become an empty lakehouse that 'passes'."""
    missing = tmp_path / "not-mounted" / "lakehouse"
    assert main(["--data-root", str(missing), *command]) == 1
    error = capsys.readouterr().err.strip()
    assert error == (
        f"lakehouse {command[0]}: error: data root {missing} does not exist (a typo, or a "
        "share not mounted?): give the root that `lakehouse run` writes (--data-root or "
        "LAKEHOUSE_DATA_ROOT)"
    )
    assert not missing.parent.exists()
