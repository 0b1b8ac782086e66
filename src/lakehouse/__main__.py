"""`python -m lakehouse ...` is the `lakehouse` command (also the spark-submit entry point)."""

import sys

from lakehouse.cli import main

sys.exit(main())
