"""DAG tests import Airflow: give it a throwaway home before anything imports it."""

from __future__ import annotations

import os
import tempfile

os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="lakehouse-airflow-home-")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
