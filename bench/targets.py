"""Every target the main benchmarks check, in one place: the bar, its unit, and the comparison.

The targets were set for a 2-core machine and a 250 ms flush interval. A benchmark reports each figure
with its target and a pass or miss (``Target.ok``); ratios are in percent. Where a bound depends on a
run's setting (a buffer size, a map size, a heartbeat interval), a function builds the target from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from strata.settings import Settings

MiB = 1 << 20


@dataclass(frozen=True)
class Target:
    op: Literal[">=", "<=", "="]
    bound: float
    unit: str = ""

    def ok(self, value: float | None) -> bool:
        if value is None:
            return False
        if self.op == ">=":
            return value >= self.bound
        if self.op == "<=":
            return value <= self.bound
        return value == self.bound

    def __str__(self) -> str:
        bound = f"{int(self.bound):,}" if float(self.bound).is_integer() else f"{self.bound:g}"
        return f"{self.op} {bound} {self.unit}".rstrip()


# --- the HTTP door (bench.produce_fetch) --------------------------------------------------------------------
HTTP_PRODUCE_MIB_S = Target(">=", 40.0, "MiB/s")  # 128 closed-loop clients x 100 records of 1 KiB
HTTP_PRODUCE_LOCAL_MIB_S = Target(">=", 60.0, "MiB/s")  # the same load on a local bucket
HTTP_CEILING_RATIO = Target(">=", 60.0, "%")  # of the bare FastAPI app under the same load
PRODUCE_P50_MS = Target("<=", 200.0, "ms")
PRODUCE_P99_MS = Target("<=", 350.0, "ms")
# A low-latency topic at 20 MiB/s (agents/flush_policy.py): on a local directory a flush is a write, an
# fsync and a commit; on S3 (moto) one PUT more.
LOW_LATENCY_P50_MS = {"local": Target("<=", 15.0, "ms"), "s3": Target("<=", 60.0, "ms")}
LOW_LATENCY_P99_MS = {"local": Target("<=", 50.0, "ms"), "s3": Target("<=", 150.0, "ms")}
PUTS_PER_FLUSH = Target("=", 1.0)
PUTS_PER_S = Target("<=", 4.0, "/s")
IDLE_PUTS = Target("=", 0.0)
REFUSED = Target("=", 0.0)
HTTP_FETCH_MIB_S = Target(">=", 100.0, "MiB/s")  # catch-up, cold cache
FETCH_GETS_PER_MIB = Target("<=", 0.25)  # at most one GET per 4 MiB served
BUFFER_MIB = Target("<=", 64.0, "MiB")  # the produce buffer's default bound, shown beside the RSS
RSS_HEADROOM_MIB = 150.0  # an agent's peak RSS under overload <= its produce buffer + this


def agent_rss(buffer_mib: float) -> Target:
    return Target("<=", buffer_mib + RSS_HEADROOM_MIB, "MiB")


def fetch_agent_rss() -> Target:
    """A catching-up agent's bound: the fetch answers' budget and the object cache, at their defaults
    (``kafka_fetch_buffer_bytes``, ``cache_bytes``), plus the same headroom; its produce buffer is empty."""
    defaults = Settings()
    return Target(
        "<=", (defaults.kafka_fetch_buffer_bytes + defaults.cache_bytes) / MiB + RSS_HEADROOM_MIB, "MiB"
    )


# --- the Kafka door (bench.kafka_bench) ---------------------------------------------------------------------
KAFKA_PRODUCE_MIB_S = Target(">=", 150.0, "MiB/s")  # uncompressed, local bucket
KAFKA_CEILING_RATIO = Target(">=", 60.0, "%")  # of the bare asyncio Kafka sink, same generators
KAFKA_FETCH_MIB_S = Target(">=", 200.0, "MiB/s")  # uncompressed, local bucket, cold cache
MISSING_ACKS = Target("=", 0.0)
# Validation on produce (bench.schema_validation_bench): produce with schema id validation, as a share of
# the same load to a topic without it, back to back.
SCHEMA_ID_RATIO = Target(">=", 90.0, "%")

# --- transactions (bench.txn_bench) ------------------------------------------------------------------------
TXN_THROUGHPUT_RATIO = Target(">=", 80.0, "%")  # of idempotent produce, one commit per 100 ms per producer
END_TXN_P99_MS = Target("<=", 100.0, "ms")  # EndTxn on the embedded default

# --- consumer groups (bench.group_bench) --------------------------------------------------------------------
HEARTBEATS_TO_CONSUME_AGAIN = 2.0  # beyond the members' own wait for their next heartbeat


def consume_again_s(heartbeat_ms: int) -> Target:
    return Target("<=", HEARTBEATS_TO_CONSUME_AGAIN * heartbeat_ms / 1000, "s")


# --- compaction (bench.compaction_bench) --------------------------------------------------------------------
COMPACTION_RATIO = Target(">=", 50.0, "%")  # of the raw scan (read, CRC, decode, hash every key)
COMPACTION_RECORDS_S = {
    1024: Target(">=", 500_000.0, "records/s"),
    100: Target(">=", 700_000.0, "records/s"),
}
KEYS_IN_ONE_PASS = Target(">=", 5_000_000.0, "keys")  # with the default 128 MiB offset map
MAP_BYTES_PER_ENTRY = Target("<=", 24.0, "B")
DEDUP_LAG_S = Target("<=", 60.0, "s")
GETS_PER_INPUT_FILE = Target("=", 2.0)
PUTS_PER_OUTPUT_FILE = Target("=", 1.0)
LATEST_VALUES_LOST = Target("=", 0.0)
WORKER_RSS_HEADROOM_MIB = 200.0  # a compaction worker's peak RSS <= its map + this


def worker_rss(map_mib: float) -> Target:
    return Target("<=", round(map_mib + WORKER_RSS_HEADROOM_MIB, 1), "MiB")


# --- the Spark reader (bench.spark_read_bench) --------------------------------------------------------------
SPARK_RATIO = Target(">=", 50.0, "%")  # of Spark's own binaryFile read of the same objects

# --- the lake (bench.lake_bench) ----------------------------------------------------------------------------
LAKE_RATE_MIB_S = 50.0  # the produce rate a raw table must keep up with on the 2-core machine
LAKE_KEEP_UP_RATIO = Target(">=", 95.0, "%")  # committed MiB/s over produced, over whole commit intervals
# One core of the writer keeps up with the rate above: MiB committed per CPU second of its process.
LAKE_MIB_PER_CPU_S = Target(">=", LAKE_RATE_MIB_S, "MiB")


# The lake writer's process holds pyarrow, pyiceberg and SQLAlchemy, and its commits a fixed share (the
# writer threads' heaps, a span's decode); a commit holds one piece of its write buffer a few times over
# while pyiceberg writes it (pipeline/lake/memory.py, docs/lake.md). Neither grows with the commit's cap.
LAKE_WRITER_BASE_MIB = 350.0
LAKE_WRITER_BUFFER_COPIES = 5


def lake_writer_rss(buffer_mib: float) -> Target:
    """A lake writer's peak RSS: its base and a few copies of its write buffer, whatever the commit's cap."""
    return Target("<=", LAKE_WRITER_BASE_MIB + LAKE_WRITER_BUFFER_COPIES * buffer_mib, "MiB")


def lake_lag_s(interval_ms: int) -> Target:
    """The largest lag over a window: the commit interval, and as long again for the commit itself and the
    round that finds it due."""
    return Target("<=", 2 * interval_ms / 1000, "s")
