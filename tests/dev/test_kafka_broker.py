"""The local broker's set-up (`dev/kafka_broker.py`), without starting it."""

from __future__ import annotations

import base64

from dev.kafka_broker import cluster_id


def test_a_cluster_id_never_reads_as_an_option():
    # One random id in 64 starts with "-"; 2,000 draws meet one with near certainty.
    ids = [cluster_id() for _ in range(2000)]
    assert not [found for found in ids if found.startswith("-")]
    assert all(len(base64.urlsafe_b64decode(found + "==")) == 16 for found in ids)
    assert len(set(ids)) == len(ids)
