# The project image: the pinned environment plus the code. docker-compose.yml
# runs every service from it: the Airflow api-server, scheduler and
# dag-processor, the Spark master and worker, and the `lakehouse` CLI.
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 1000 lakehouse \
    && mkdir -p /data /opt/airflow \
    && chown lakehouse:lakehouse /data /opt/airflow
WORKDIR /opt/lakehouse
COPY requirements.txt pyproject.toml README.md ./
RUN pip install --no-cache-dir -r requirements.txt
COPY include ./include
COPY jobs ./jobs
COPY dags ./dags
COPY expectations ./expectations
RUN pip install --no-cache-dir --no-deps -e .

USER lakehouse
# No SPARK_LOCAL_IP here: on the cluster, drivers and executors talk across containers.
ENV LAKEHOUSE_DATA_ROOT=/data \
    PYSPARK_PYTHON=/usr/local/bin/python \
    PYSPARK_DRIVER_PYTHON=/usr/local/bin/python
VOLUME ["/data"]
ENTRYPOINT ["lakehouse"]
CMD ["run"]
