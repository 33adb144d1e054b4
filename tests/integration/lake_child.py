"""A lake writer in a child process that kills itself (SIGKILL) between the Parquet upload and the catalog
commit: a worker killed mid-job, for tests/integration/test_lake.py.

    python -m tests.integration.lake_child '{"metadata": ..., "bucket": ..., "s3_endpoint": ..., "topic": ..}'
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from pipeline.lake.runs import LakeWriterConfig
from pipeline.lake.writer import LakeWriter
from storage.clock import SystemClock
from storage.lake_catalog import open_catalog
from storage.metadata import open_metadata_store
from storage.objectstore import open_object_store

LEASE_MS = 8_000


class KillHook:
    def before_commit(self, topic: str, table: Any) -> None:
        sys.stdout.write("killing\n")
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    def after_commit(self, topic: str, table: Any) -> None:
        pass


def main() -> None:
    args = json.loads(sys.argv[1])
    metadata = open_metadata_store(args["metadata"])
    store = open_object_store(args["bucket"], endpoint_url=args["s3_endpoint"])
    catalog = open_catalog(args["metadata"], args["bucket"], s3_endpoint=args["s3_endpoint"])
    writer = LakeWriter(
        metadata, store, catalog, SystemClock(), "doomed", LakeWriterConfig(lease_ms=LEASE_MS), KillHook()
    )
    writer.run(metadata.get_topic(args["topic"]))
    sys.stdout.write("not killed\n")


if __name__ == "__main__":
    main()
