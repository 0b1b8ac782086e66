# The project image: the pinned environment plus the code. docker-compose.yml
# runs every service from it: the Airflow api-server, scheduler and
# dag-processor, the Spark master and worker, and the `lakehouse` CLI.

# Delta Lake's and Kafka's Spark connectors, Spark's S3 connector and S3Proxy (the
# s3 service), fetched at build time from Maven Central as the poms under jars/ pin
# them (`make setup` does the same on a developer machine).
FROM maven:3.9-eclipse-temurin-17 AS jars
COPY jars/pom.xml /jars/pom.xml
COPY jars/s3/pom.xml /jars/s3/pom.xml
COPY jars/s3proxy/pom.xml /jars/s3proxy/pom.xml
COPY jars/log-store /jars/log-store
RUN for pom in /jars/pom.xml /jars/s3/pom.xml /jars/s3proxy/pom.xml /jars/log-store/pom.xml; do \
      mvn --batch-mode --quiet --strict-checksums -f "$pom" dependency:copy-dependencies -DoutputDirectory=. || exit 1; \
    done \
    && javac --release 17 -d /tmp/log-store -cp "/jars/log-store/*:/jars/*" /jars/log-store/FencedS3LogStore.java \
    && jar --create --file /jars/s3/lakehouse-log-store.jar -C /tmp/log-store .

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
COPY --from=jars /jars/*.jar ./jars/
COPY --from=jars /jars/s3/*.jar ./jars/s3/
COPY --from=jars /jars/s3proxy/*.jar ./jars/s3proxy/
RUN pip install --no-cache-dir --no-deps -e .

USER lakehouse
# No SPARK_LOCAL_IP here: on the cluster, drivers and executors talk across containers.
ENV LAKEHOUSE_DATA_ROOT=/data \
    PYSPARK_PYTHON=/usr/local/bin/python \
    PYSPARK_DRIVER_PYTHON=/usr/local/bin/python
VOLUME ["/data"]
ENTRYPOINT ["lakehouse"]
CMD ["run"]
