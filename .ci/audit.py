"""Dependency vulnerability scan of the lock file (`make audit`), with pip-audit.

Exit status: 0 clean, 1 vulnerabilities found (not listed in
`.ci/audit-accepted.txt` with a justification in the README), 2 the scan
could not be completed (the vulnerability service was unreachable for some
packages): reported, never shown as clean.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def accepted_ids() -> set[str]:
    path = HERE / "audit-accepted.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    return {line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()}


def classify(report: dict, accepted: set[str]) -> tuple[list[str], list[str], list[str]]:
    """(new findings, accepted findings, packages not audited) from pip-audit's JSON."""
    found, known, skipped = [], [], []
    for dependency in report.get("dependencies", []):
        name = f"{dependency['name']}=={dependency.get('version', '?')}"
        if "skip_reason" in dependency:
            skipped.append(str(dependency["skip_reason"]))
        for vulnerability in dependency.get("vulns", []):
            ids = {vulnerability["id"], *vulnerability.get("aliases", [])}
            line = f"{name}: {vulnerability['id']} (fixed in {vulnerability.get('fix_versions')})"
            (known if ids & accepted else found).append(line)
    return found, known, skipped


def main() -> int:
    pip_audit = Path(sys.executable).parent / "pip-audit"
    done = subprocess.run(
        [
            str(pip_audit),
            "--requirement",
            str(REPO / "requirements.txt"),
            "--no-deps",
            "--disable-pip",
            "--progress-spinner",
            "off",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        report = json.loads(done.stdout)
    except ValueError:
        print(f"audit: pip-audit failed (exit {done.returncode}):\n{done.stderr}")
        return 2
    found, known, skipped = classify(report, accepted_ids())
    audited = len(report.get("dependencies", [])) - len(skipped)
    print(f"audit: {audited} pinned packages audited, {len(skipped)} not audited")
    for line in known:
        print(f"  accepted (see README): {line}")
    for line in found:
        print(f"  VULNERABLE: {line}")
    if found:
        return 1
    if skipped:
        print("audit: INCOMPLETE, the vulnerability service did not answer for:")
        for line in skipped[:10]:
            print(f"  {line}")
        if len(skipped) > 10:
            print(f"  ... and {len(skipped) - 10} more")
        return 2
    print("audit: no known vulnerabilities")
    return 0


if __name__ == "__main__":
    sys.exit(main())
