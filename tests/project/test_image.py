"""The project image, laid out from the Dockerfile without Docker (there is no Docker
engine where the project is tested): what its stages copy is enough to start Spark.

The final stage's COPY lines are laid out in a folder as the image would hold them. The
jars stage's output, `COPY --from=jars /jars/...`, is taken from the checkout's fetched
`jars/` (the stage fetches with the same module and command as `make setup`); its jars
are linked, not copied (the s3 bundle is 690 MB). A session then starts from the
image's code (`src/` as the image holds it, so its jars folder is the image's, as
`pip install -e .` makes it there), with a Maven that fails first on PATH: the image has
none.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from lakehouse.runtime import jars
from tests.helpers import REPO

SESSION = """
import json, sys
from lakehouse.runtime.settings import Settings
from lakehouse.runtime.spark import get_spark

settings = Settings.load(data_root=sys.argv[1])
spark = get_spark(settings, for_tests=True, streaming=False)
table = settings.data_root / "tiny"
spark.range(3).write.format("delta").save(str(table))
rows = spark.read.format("delta").load(str(table)).count()
print(json.dumps({"rows": rows, "jars": spark.conf.get("spark.jars").split(",")}))
spark.stop()
"""


def stages(dockerfile: Path) -> dict[str, list[str]]:
    """Each stage's instructions (continuation lines joined, comments dropped), by the
    stage's name; the last stage is also `final`."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    found: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            current = []
            words = line.split()
            found[words[-1] if len(words) > 2 and words[-2].upper() == "AS" else "?"] = current
        current.append(line)
    found["final"] = current
    return found


def link_or_copy(source: str, target: str) -> None:
    """Jars are linked (the image's are hundreds of MB); the rest is copied, so that
    nothing written in the layout writes through to the checkout."""
    if source.endswith(".jar"):
        Path(target).symlink_to(source)
    else:
        shutil.copy2(source, target)


def lay_out(instructions: list[str], image: Path, stage_output: dict[str, Path]) -> Path:
    """Copy what each COPY names into `image` as the stage would hold it; the stage's
    working folder in `image`. `stage_output` maps `--from` stages to what holds their
    files (a COPY from any other stage fails the test)."""
    workdir = PurePosixPath("/")
    for instruction in instructions:
        keyword, _, rest = instruction.partition(" ")
        if keyword.upper() == "WORKDIR":
            workdir = workdir / rest.strip()
        if keyword.upper() != "COPY":
            continue
        words = rest.split()
        flags = dict(w[2:].split("=", 1) for w in words if w.startswith("--") and "=" in w)
        *sources, dest = [w for w in words if not w.startswith("--")]
        target = image / (workdir / dest).relative_to("/")
        into_folder = dest.endswith("/") or len(sources) > 1
        stage = flags.get("from")
        if stage is not None and stage not in stage_output:
            pytest.fail(f"COPY --from={stage}: the test knows only {sorted(stage_output)}")
        for source in sources:
            if stage is None:
                matches = sorted(REPO.glob(source))
            else:
                base = stage_output[stage]
                relative = PurePosixPath(source).relative_to("/" + base.name).as_posix()
                matches = sorted(base.glob(relative)) if relative != "." else [base]
            assert matches, f"{instruction}: nothing matches {source}"
            for match in matches:
                if match.is_dir():
                    shutil.copytree(
                        match,
                        target,
                        copy_function=link_or_copy,
                        dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", ".fetch-*"),
                    )
                else:
                    placed = target / match.name if into_folder else target
                    placed.parent.mkdir(parents=True, exist_ok=True)
                    link_or_copy(str(match), str(placed))
    return image / workdir.relative_to("/")


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(path.relative_to(folder)): (path.lstat().st_size, path.lstat().st_mtime_ns)
        for path in sorted(folder.rglob("*"))
    }


def no_maven(tmp_path: Path) -> dict[str, str]:
    """The environment of a process in the image: no Maven (one that fails comes first
    on PATH), no LAKEHOUSE_* variable of this machine."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mvn").write_text("#!/bin/sh\necho 'no Maven in the image' >&2\nexit 1\n")
    (bin_dir / "mvn").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}


@pytest.mark.system
def test_the_jars_stage_fetches_with_the_module_from_what_it_copies(tmp_path):
    """The stage's RUN fetches the bundles the image uses with `lakehouse.runtime.jars`,
    which finds, in what the stage copied, itself (standard library only: `python -S`),
    its jars folder and each bundle's pom and pins."""
    jars_stage = stages(REPO / "Dockerfile")["jars"]
    workdir = lay_out(jars_stage, tmp_path / "stage", {})
    (run,) = [i for i in jars_stage if "lakehouse.runtime.jars" in i]
    fetched = re.search(r"-m lakehouse\.runtime\.jars((?: [\w-]+)+)", run)
    assert fetched and set(fetched.group(1).split()) == {"delta", "s3", "s3proxy"}, run
    pythonpath = re.search(r"PYTHONPATH=(\S+)", run)
    assert pythonpath, run
    code = "from lakehouse.runtime import jars; print(jars.CHECKOUT_JARS)"
    done = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={"PYTHONPATH": str(tmp_path / "stage" / pythonpath.group(1).lstrip("/"))},
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    root = Path(done.stdout.strip())
    assert root == tmp_path / "stage" / "jars"
    for name in fetched.group(1).split():
        for source in jars.sources(name, root):
            assert source.is_file(), f"the jars stage does not copy {source.relative_to(root)}"


@pytest.mark.system
def test_the_image_starts_spark_on_delta_with_what_it_holds(tmp_path):
    jars.ensure("delta")  # what the jars stage ran (make setup did it here)
    image = tmp_path / "image"
    workdir = lay_out(stages(REPO / "Dockerfile")["final"], image, {"jars": REPO / "jars"})
    image_jars = workdir / "jars"
    before = snapshot(image_jars)
    done = subprocess.run(
        [sys.executable, "-c", SESSION, str(tmp_path / "data")],
        env={**no_maven(tmp_path), "PYTHONPATH": str(workdir / "src")},
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    session = json.loads(done.stdout.strip().splitlines()[-1])
    assert session["rows"] == 3
    used = [Path(jar.removeprefix("file:")) for jar in session["jars"]]
    assert used and all(jar.parent == image_jars for jar in used), used
    assert any(jar.name.startswith("delta-spark_") for jar in used)
    # The image's user cannot write there: the session wrote nothing (no marker, no lock).
    assert snapshot(image_jars) == before
