"""Local developer tooling, not shipped in the production image.

- `local_airflow`: Airflow on embedded SQLite, DAGs from dags/ (`make airflow-up`);
- `local_spark_cluster`: a Spark standalone master and worker (`make spark-cluster-up`);
- `kafka_broker`: a single-node Apache Kafka broker in KRaft mode (`make kafka-up`);
- `processes`: starting, waiting for and measuring local processes.
"""

__all__ = ["kafka_broker", "local_airflow", "local_spark_cluster", "processes"]
