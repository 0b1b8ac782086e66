"""Files the lakehouse keeps beside its Delta tables.

- `landing`: listing landing folders safely, and the manifests bronze reads;
- `checkpoints`: the guards around Spark's streaming checkpoints;
- `locks`: the writer lock, one writing command per data root.
"""

__all__ = ["checkpoints", "landing", "locks"]
