"""The job runner's settings, apart from the runner: what a process that never compacts (an agent) needs to
build a round's configuration without loading the runner's numpy and offset map (megabytes of its
resident set)."""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class RunnerConfig:
    map_bytes: int = 128 * MiB
    # Each upload briefly holds about three copies of an output file (chunks, the joined object, the SDK's
    # send buffer), so this bounds the runner's memory beyond the offset map. A cap: a file exceeds it only
    # when one chunk alone does (``OutputFiles.emit`` in planner/outputs.py). The default is a quarter of the
    # agents' default cache, the largest file they read whole, once for all partitions (agents/fetch.py).
    max_output_file_bytes: int = 16 * MiB
    lease_ms: int = 60_000
    # Kafka's log.cleaner.io.max.bytes.per.second: bytes per second the runner's GET streams may read
    # (planner/throttle.py); 0, Kafka's default too, is no limit.
    max_read_bytes_per_second: int = 0
