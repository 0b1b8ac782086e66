"""The `lakehouse` command as a user runs it: help, errors, exit codes."""

from __future__ import annotations

import shutil

import pytest

from tests.helpers import run_cli

pytestmark = pytest.mark.system


def test_help_lists_the_commands():
    done = run_cli("--help")
    assert done.returncode == 0
    assert "generate" in done.stdout and "run" in done.stdout
    assert "LAKEHOUSE_DATA_ROOT" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["generate", "--events", "10", "--seed", "1", "--start", "2026-02-30"], "not a date"),
        (["generate", "--events", "ten", "--seed", "1"], "not an integer"),
        (["generate", "--events", "10", "--seed", "1", "--late-rate", "2"], "between 0 and 1"),
        (["generate", "--seed", "1"], "--events"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_message(args, message, tmp_path):
    done = (
        run_cli(*args, "--data-root", str(tmp_path)) if args[0] != "frobnicate" else run_cli(*args)
    )
    assert done.returncode == 2
    assert message in done.stderr


def test_generate_if_empty_leaves_existing_landing_alone(tmp_path):
    first = run_cli("generate", "--events", "200", "--seed", "1", "--data-root", str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert "files written" in first.stdout
    second = run_cli(
        "generate", "--if-empty", "--events", "200", "--seed", "2", "--data-root", str(tmp_path)
    )
    assert second.returncode == 0
    assert "already has files; not generating" in second.stdout


def test_run_failure_exits_1_with_a_one_line_reason(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the data root should be")
    done = run_cli("run", "--data-root", str(blocker))
    assert done.returncode == 1
    assert "lakehouse run: error:" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_jvm_that_cannot_start_is_one_line_naming_the_settings_it_took(tmp_path):
    done = run_cli("validate", "--data-root", str(tmp_path), env={"JAVA_HOME": "/nowhere"})
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("lakehouse validate: error: Spark's JVM exited as it started")
    assert "LAKEHOUSE_SPARK_MASTER" in last and "LAKEHOUSE_DRIVER_MEMORY" in last


def test_a_first_run_on_a_missing_root_says_it_creates_it(tmp_path):
    missing = tmp_path / "new-root"
    # Without Java the run ends as Spark starts: what it said before is what counts here.
    done = run_cli("run", "--data-root", str(missing), env={"JAVA_HOME": "/nowhere"})
    assert done.stdout.startswith(
        f"data root {missing} does not exist: this first run creates it (if it should "
        "exist, check the path or the mount)"
    ), done.stdout + done.stderr


def test_a_file_spark_cannot_read_is_one_line_naming_it_with_the_traces_behind_debug(
    streamed_root, tmp_path
):
    root = tmp_path / "root"
    shutil.copytree(streamed_root, root, symlinks=True)
    damaged = sorted((root / "lakehouse" / "bronze" / "clicks").rglob("*.parquet"))[0]
    damaged.write_bytes(b"not parquet")
    command = ("backfill", "--start", "2026-11-01", "--end", "2026-11-01", "--data-root", str(root))
    quiet = run_cli(*command)
    assert quiet.returncode == 1, quiet.stdout + quiet.stderr
    last = quiet.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "lakehouse backfill: failed: SparkException: [FAILED_READ_FILE.NO_HINT] Encountered "
        f"error while reading file file:{damaged}"
    ), quiet.stderr
    assert "\tat org.apache" not in quiet.stderr and len(quiet.stderr.splitlines()) < 10
    loud = run_cli("--debug", *command)
    assert loud.returncode == 1
    assert loud.stderr.count("\tat org.apache") > 20 and "Traceback" in loud.stderr
    assert loud.stderr.strip().splitlines()[-1] == last


def test_a_failed_stream_is_explained_by_its_innermost_python_error():
    from lakehouse.cli import explain

    spark_message = (
        "[STREAM_FAILED] Query [id = 9c8c, runId = 38e9] terminated with exception: "
        "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function "
        "in foreach batch sink. Reason: Traceback (most recent call last):\n"
        '  File "/work/main/include/delta/writes.py", line 70, in ensure_table\n'
        "lakehouse.errors.LakehouseError: Delta table /data/t has columns ['a'], the job writes "
        "['b']; migrate the table or write to a new location\n SQLSTATE: 39000\n"
        "=== Streaming Query ==="
    )
    assert explain(RuntimeError(spark_message)) == (
        "LakehouseError: Delta table /data/t has columns ['a'], the job writes ['b']; "
        "migrate the table or write to a new location"
    )
    assert explain(RuntimeError("plain failure\nmore")) == "RuntimeError: plain failure"


def test_a_jvm_error_without_an_error_class_is_explained_by_the_java_exception():
    """py4j's first line names only the call (`o93.execute`): the report and the CLI say
    the Java exception and its root cause instead."""
    from lakehouse.errors import explain

    py4j_text = (
        "An error occurred while calling o93.execute.\n"
        ": java.io.IOException: the writer lock s3a://b/.lakehouse-writer.lock is lost\n"
        "\tat lakehouse.FencedS3LogStore.checkLease(FencedS3LogStore.java:114)\n"
        "Caused by: java.net.SocketTimeoutException: Read timed out\n"
        "\t... 40 more"
    )
    assert explain(RuntimeError(py4j_text)) == (
        "IOException: the writer lock s3a://b/.lakehouse-writer.lock is lost "
        "(SocketTimeoutException: Read timed out)"
    )
