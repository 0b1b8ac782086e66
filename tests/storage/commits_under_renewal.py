"""Delta commits on an S3 root while the writer lock's lease is renewed under them.

Run by tests/storage/test_object_store.py in a process of its own (a Spark JVM
configured for the test's S3 server): `python -m tests.storage.commits_under_renewal
<commits>`, with `LAKEHOUSE_DATA_ROOT` and the AWS variables in the environment.

Before each commit the fenced log store (jars/log-store/) reads the lock object
through S3A, which opens it with a HEAD and reads it with the ETag it saw; a renewal
between the two is answered 412. Here a thread renews the lease every 100 ms (a run
renews it every third of the lease) while the main thread commits appends to a Delta
table; it prints one JSON line: commits made, renewals made, and the first error.
"""

from __future__ import annotations

import json
import secrets
import sys
import threading
import time

from lakehouse.runtime.locks import LOCK_FILE
from lakehouse.runtime.settings import Settings
from lakehouse.runtime.spark import FENCE_SETTINGS, get_spark
from lakehouse.storage.objects import S3Path


def main(commits: int) -> int:
    settings = Settings.load()
    root = settings.data_root
    assert isinstance(root, S3Path), root
    spark = get_spark(settings, app_name="commits-under-renewal", streaming=False)
    lock, token = root / LOCK_FILE, secrets.token_hex(16)

    def body() -> bytes:
        return json.dumps({"token": token, "lease_until": time.time() + 600}).encode()

    etag = lock.put(body(), if_none_match=True)
    for key, value in zip(FENCE_SETTINGS, (str(lock), token), strict=True):
        spark.conf.set(key, value)
    done, renewals = threading.Event(), 0

    def renew() -> None:
        nonlocal etag, renewals
        while not done.wait(0.1):
            etag = lock.put(body(), if_match=etag)
            renewals += 1

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    made, error = 0, None
    try:
        for _ in range(commits):
            spark.range(1).write.format("delta").mode("append").save(str(root / "appends"))
            made += 1
    except Exception as failure:  # reported, not raised: the test prints it
        error = str(failure).strip().splitlines()[:3]
    finally:
        done.set()
        renewer.join()
        lock.unlink(missing_ok=True)
    print(json.dumps({"commits": made, "renewals": renewals, "error": error}))
    return 0 if error is None else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
