"""Checks the docker-compose deployment runs before it starts anything.

`airflow-init` runs `python -m lakehouse.orchestration.deployment check-secrets` first: every
secret must be set and differ from the placeholder `.env.example` gives it,
or the stack does not start (every Airflow service and the Spark master wait
for `airflow-init` to succeed).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

# What `.env.example` sets every secret to; `cp .env.example .env` alone must not start.
PLACEHOLDER = "change-me"
SECRETS = (
    "POSTGRES_PASSWORD",
    "AIRFLOW_ADMIN_PASSWORD",
    "AIRFLOW_FERNET_KEY",
    "AIRFLOW_JWT_SECRET",
    "SPARK_AUTH_SECRET",
    "S3_SECRET_ACCESS_KEY",
)


def unsafe_secrets(environ: Mapping[str, str]) -> list[str]:
    """The secrets of `environ` that are missing, empty or still the placeholder."""
    return [name for name in SECRETS if environ.get(name, "").strip() in ("", PLACEHOLDER)]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["check-secrets"]:
        print("usage: python -m lakehouse.orchestration.deployment check-secrets", file=sys.stderr)
        return 2
    unsafe = unsafe_secrets(os.environ)
    if unsafe:
        print(
            f"refusing to start: {', '.join(unsafe)} still unset or {PLACEHOLDER!r} in .env; "
            "give each a value of its own (.env.example says how to generate them)",
            file=sys.stderr,
        )
        return 1
    print("secrets: all set")
    return 0


if __name__ == "__main__":
    sys.exit(main())
