# The project image: the pinned environment plus the code. docker-compose.yml
# runs every service from it: the Airflow api-server, scheduler and
# dag-processor, the Spark master and worker, and the `lakehouse` CLI.

# Delta Lake's and Kafka's Spark connectors, Spark's S3 connector with our Delta log
# store, and S3Proxy (the s3 service), fetched at build time from Maven Central as the
# poms under jars/ pin them, by the module and command `make setup` uses: each jar is
# checked against the SHA-256 its bundle's jars.sha256 pins, and each bundle's marker
# is written, so that the image uses the jars as they are, with no Maven at run time.
FROM maven:3.9-eclipse-temurin-17 AS jars
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/*
COPY jars/pom.xml jars/jars.sha256 /jars/
COPY jars/s3/pom.xml jars/s3/jars.sha256 /jars/s3/
COPY jars/s3proxy/pom.xml jars/s3proxy/jars.sha256 /jars/s3proxy/
COPY jars/log-store/pom.xml jars/log-store/jars.sha256 jars/log-store/FencedS3LogStore.java /jars/log-store/
# The module (standard library only) and what it imports; from /src, its jars folder is /jars.
COPY src/lakehouse/__init__.py src/lakehouse/errors.py /src/lakehouse/
COPY src/lakehouse/runtime/__init__.py src/lakehouse/runtime/jars.py /src/lakehouse/runtime/
RUN PYTHONPATH=/src python3 -m lakehouse.runtime.jars delta s3 s3proxy

FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 1000 lakehouse \
    && mkdir -p /data /opt/airflow \
    && chown lakehouse:lakehouse /data /opt/airflow
WORKDIR /opt/lakehouse
COPY requirements.txt pyproject.toml README.md ./
RUN pip install --no-cache-dir --require-hashes -r requirements.txt
COPY src ./src
COPY dags ./dags
# Error messages point at the runbook and the contract.
COPY docs ./docs
# The jars with their poms, pins and markers: what lakehouse.runtime.jars checks at first use.
COPY --from=jars /jars ./jars/
RUN pip install --no-cache-dir --no-deps -e .

USER lakehouse
# No SPARK_LOCAL_IP here: on the cluster, drivers and executors talk across containers.
ENV LAKEHOUSE_DATA_ROOT=/data \
    PYSPARK_PYTHON=/usr/local/bin/python \
    PYSPARK_DRIVER_PYTHON=/usr/local/bin/python
VOLUME ["/data"]
ENTRYPOINT ["lakehouse"]
CMD ["run"]
