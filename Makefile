# One entry point for people and CI: README and .ci/run call these targets.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# Sample size for `make run` when landing/ is empty: two days, so that the first
# day is closed and every table, the daily one too, has rows.
SAMPLE_EVENTS ?= 20000

# Local Airflow (make airflow-up): api-server port and the spark_default master.
AIRFLOW_PORT ?= 8080
SPARK_MASTER ?= local[*]

.PHONY: setup setup-run setup-parts jars-all browser run bench bench-overhead check test test-full audit lint format typecheck lock clean \
	airflow-up airflow-down airflow-status spark-cluster-up spark-cluster-down \
	kafka-up kafka-down kafka-status s3-up s3-down s3-status

# The set-up makes two targets at a time: Maven fetches while uv installs, and in
# `make test` mypy runs while the class archive records.
TWO_AT_A_TIME := $(MAKE) --no-print-directory --jobs=2 --output-sync=target

# What a local run needs: the environment and Delta Lake's jars. The rest is fetched
# the first time it is needed (src/lakehouse/runtime/jars.py): Spark's S3 connector
# by a session on an s3a:// root, Apache Kafka by `make kafka-up`, S3Proxy by `make
# s3-up`; `make setup` and the tests fetch everything, and record the class archive.
setup-run: $(VENV)/.installed jars/.fetched

setup:
	@$(TWO_AT_A_TIME) setup-parts

setup-parts: setup-run jars-all $(VENV)/lakehouse-classes.jsa
	@: # (a recipe, so that a set-up with nothing to do says nothing)

# The JVM libraries, each bundle from the pom that pins it (jars/<bundle>/pom.xml),
# fetched with Maven, every jar checked against the SHA-256 that jars.sha256 beside the
# pom pins (after changing a pom: python -m lakehouse.runtime.jars --pin <bundle>); with
# any Python 3.11, so while uv installs. The module decides by content whether a bundle
# needs fetching (a pom that is only newer does not), and says so in one line when it
# fetches.
JARS := PYTHONPATH=src $(PYTHON) -m lakehouse.runtime.jars
jars/.fetched: jars/pom.xml jars/jars.sha256
	@$(JARS) delta

jars-all: jars/.fetched
	@$(JARS) kafka-broker s3 s3proxy

# The driver JVM's class-data-sharing archive (src/lakehouse/runtime/class_archive.py): the
# classes a run over a small sample loads, recorded once; every driver JVM after starts
# faster. `make run` records it from its own run when there is none yet.
$(VENV)/lakehouse-classes.jsa: $(VENV)/.installed jars/.fetched
	$(BIN)/python -m lakehouse.runtime.class_archive

# uv, pinned with its hashes in the dev lock, installs the locks (much faster than pip,
# docs/benchmarks.md). It compiles every module to bytecode as it
# installs (pip's default, not uv's): where Python may not write .pyc files itself
# (PYTHONDONTWRITEBYTECODE, as on these machines), every process would otherwise compile
# what it imports, Great Expectations, pandas and Airflow among it (docs/benchmarks.md).
# A PyPI mirror that serves files without cache validators (as on these machines) makes
# uv download and build pyspark's sdist again on every install, 1.4 GB in its cache each
# time: `uv cache prune` then drops the builds no install can reach any more.
UV_INSTALL := $(BIN)/uv pip install --quiet --python $(BIN)/python

$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version.split()[0]'
	@command -v java >/dev/null || { echo "Java 17 is required (java not on PATH)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
		-r <(awk '/^uv==/ {p = 1; print; next} p && /^ / {print; next} {p = 0}' requirements-dev.txt)
	$(UV_INSTALL) --require-hashes --compile-bytecode -r requirements-dev.txt
	$(UV_INSTALL) --no-deps -e .
	$(BIN)/uv cache prune --quiet
	@touch $@

run:
	@$(TWO_AT_A_TIME) setup-run
	$(BIN)/lakehouse generate --if-empty --events $(SAMPLE_EVENTS) --seed 7 --days 2
	$(BIN)/python -m lakehouse.runtime.class_archive -- run

# Benchmarks (docs/benchmarks.md): figures as a table and JSON under data-bench/reports/.
# BENCH_ARGS=--quick for small sizes; see python -m benchmarks --help.
BENCH_ARGS ?=
bench: setup
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

# What a small run costs (docs/benchmarks.md, "Fixed costs"): `make run`'s sample, an
# empty run and one new file, 3 times each, against a bare Spark start.
bench-overhead: setup
	$(BIN)/python -m benchmarks.overhead $(BENCH_ARGS)

# Airflow on the embedded SQLite database, DAGs from dags/; prints the admin password.
airflow-up: setup-run $(VENV)/lakehouse-classes.jsa
	$(BIN)/python -m dev.local_airflow start --port $(AIRFLOW_PORT) --spark-master '$(SPARK_MASTER)'

airflow-down: setup-run $(VENV)/lakehouse-classes.jsa
	$(BIN)/python -m dev.local_airflow stop

airflow-status: setup-run $(VENV)/lakehouse-classes.jsa
	$(BIN)/python -m dev.local_airflow status

# A single-node Apache Kafka broker (KRaft) on 127.0.0.1:9092, data in .kafka/ (docs/kafka.md).
KAFKA_PORT ?= 9092
kafka-up: setup-run
	$(BIN)/python -m dev.kafka_broker start --port $(KAFKA_PORT)

kafka-down: setup-run
	$(BIN)/python -m dev.kafka_broker stop

kafka-status: setup-run
	$(BIN)/python -m dev.kafka_broker status --port $(KAFKA_PORT)

# S3Proxy serving .s3/data as S3 on 127.0.0.1:9000 with generated credentials; writes
# .s3/lakehouse.env, which points every command at s3a://lakehouse/data (docs/object-storage.md).
S3_PORT ?= 9000
S3_STATE ?= .s3
s3-up: setup-run
	$(BIN)/python -m dev.s3_server start --port $(S3_PORT) --state $(S3_STATE)

s3-down: setup-run
	$(BIN)/python -m dev.s3_server stop --state $(S3_STATE)

s3-status: setup-run
	$(BIN)/python -m dev.s3_server status --port $(S3_PORT) --state $(S3_STATE)

# A Spark standalone master and worker on this machine (spark://127.0.0.1:7077).
spark-cluster-up: setup-run
	$(BIN)/python -m dev.local_spark_cluster start

spark-cluster-down: setup-run
	$(BIN)/python -m dev.local_spark_cluster stop

# Tests come in three tiers by what they cost (markers, set in tests/conftest.py):
# the check tier starts no process and no JVM; `spark` tests run in the one Spark
# session the test process shares; `system` tests start processes (spark-submit, a
# Kafka broker, an S3 server, a live Airflow, a venv). docs/testing.md lists them.
#
# `make check` is the quick loop: lint, the import contract, types, and the check tier,
# with nothing but the venv (a configuration names the jars; only a JVM needs them).
check: $(VENV)/.installed
	@$(TWO_AT_A_TIME) lint typecheck
	$(BIN)/pytest -m "not spark and not system" --quiet

# CI runs `make test`: every tier, on two workers, a whole module at a time each
# (pyproject.toml): one worker's processes starting, Airflow polling or a broker waiting
# leave a core idle that the other fills. `make test-full` adds the long variants
# marked `full` (crash storms, damaged checkpoints, concurrent writers, live Airflow on a
# Spark cluster, thousands of files), on one process: their storms and races were tuned
# there.
test:
	$(TWO_AT_A_TIME) setup-parts browser lint typecheck
	$(BIN)/pytest --numprocesses 2

test-full:
	$(TWO_AT_A_TIME) setup-parts browser lint typecheck
	$(BIN)/pytest --full

# Dependency vulnerability scan of requirements.txt, pip-audit in its own venv.
# Fails on vulnerabilities not accepted in .ci/audit-accepted.txt; a scan the
# vulnerability service could not complete is printed as INCOMPLETE, not as clean.
AUDIT_VENV := .venv-audit
audit:
	@test -x $(AUDIT_VENV)/bin/pip-audit || { $(PYTHON) -m venv $(AUDIT_VENV) && \
	  $(AUDIT_VENV)/bin/pip install --quiet --disable-pip-version-check pip-audit==2.10.1; }
	$(AUDIT_VENV)/bin/python .ci/audit.py || [ $$? = 2 ]

# The browser tests render report pages in headless Chromium and drive the Airflow
# UI with Selenium (chromedriver). Where this is a Debian machine and we are root
# (CI), install Debian's chromium and chromium-driver, and fail if that fails;
# elsewhere (no root) those tests skip.
browser:
	@{ command -v chromium && command -v chromedriver; } >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's chromium and chromium-driver for the browser tests"; \
	    { apt-get install -y -qq chromium chromium-driver || \
	      { apt-get update -qq && apt-get install -y -qq chromium chromium-driver; }; } \
	      >/dev/null 2>&1 || { echo "could not install chromium with apt-get"; exit 1; }; \
	  else echo "chromium or chromedriver not found and not root: the browser tests will skip"; fi; }

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-logo

typecheck: $(VENV)/.installed
	$(BIN)/mypy

format: $(VENV)/.installed
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The locks, every package with its hashes, resolved by uv from pyproject.toml: the
# runtime with the Airflow extra (requirements.txt, what the image installs), then the
# development group on top of it at the same versions (requirements-dev.txt, what
# `make setup` installs). Versions the locks already pin are kept (make lock
# UPGRADE=--upgrade moves them on).
UPGRADE ?=
UV_COMPILE := $(BIN)/uv pip compile --quiet --generate-hashes --python-version 3.11 $(UPGRADE) \
	--extra airflow
lock: $(VENV)/.installed
	$(UV_COMPILE) pyproject.toml -o requirements.txt
	$(UV_COMPILE) --group pyproject.toml:dev pyproject.toml -c requirements.txt -o requirements-dev.txt

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache
