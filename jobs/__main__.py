"""`python -m jobs ...` is the `lakehouse` command (also the spark-submit entry point)."""

import sys

from jobs.cli import main

sys.exit(main())
