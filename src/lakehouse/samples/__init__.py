"""Sample events, for trying the pipeline and for the tests and benchmarks.

- `generate`: realistic JSON-lines files for every source in landing folders;
- `produce`: the same events as messages on the sources' Kafka topics.
"""

__all__ = ["generate", "produce"]
