# The project image: the pinned environment plus the code. Used by
# docker-compose.yml for Spark jobs (the Airflow services come later).
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 1000 lakehouse
WORKDIR /opt/lakehouse
COPY requirements.txt pyproject.toml README.md ./
RUN pip install --no-cache-dir -r requirements.txt
COPY include ./include
COPY jobs ./jobs
COPY dags ./dags
COPY expectations ./expectations
RUN pip install --no-cache-dir --no-deps -e .

USER lakehouse
ENV LAKEHOUSE_DATA_ROOT=/data \
    PYSPARK_PYTHON=/usr/local/bin/python \
    SPARK_LOCAL_IP=127.0.0.1
VOLUME ["/data"]
ENTRYPOINT ["lakehouse"]
CMD ["run"]
