"""Storage: the data root on local disk or S3, Delta Lake I/O, landing files and Kafka.

- `objects`: paths under the data root, on local disk or S3;
- `delta`: all Delta Lake I/O through Spark's own connector;
- `landing`: listing landing folders safely, and the manifests bronze reads;
- `checkpoints`: the guards around Spark's streaming checkpoints;
- `kafka`: the Kafka source's options and topic checks.
"""

__all__ = ["checkpoints", "delta", "kafka", "landing", "objects"]
