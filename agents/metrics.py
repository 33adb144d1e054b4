"""Prometheus metrics of an agent, on the process's registry (one per app, so tests don't collide).

Object-store request counts are read from the stores' ``RequestCounters`` at scrape time rather than
incremented twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from agents.flush_policy import FLUSH_CLASSES
from agents.loop_histogram import LoopHistogram
from storage.objectstore.base import REQUEST_KINDS, RequestCounters

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.5, 0.75, 1, 2.5, 5, 10, 30)
# A flush's steps take from a fraction of a millisecond (a commit on SQLite) to a PUT's time.
_STEP_BUCKETS = (0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1, 5)


def _flush_class_metrics(r: CollectorRegistry) -> tuple[Counter, Histogram]:
    """Flush classes (agents/flush_policy.py): each flush's PUTs count under the class whose rule cut it, so
    that a class's request cost can be told apart; and the time a flush spends in each step of the produce
    round trip, from its first request's arrival to its commit."""
    puts = Counter(
        "strata_flush_puts", "Flush PUTs, by the flush class whose rule cut the flush", ["class"], registry=r
    )
    for flush_class in FLUSH_CLASSES:
        puts.labels(flush_class)
    steps = Histogram(
        "strata_flush_step_seconds",
        "Time a flush spent in each step: buffered (first request's arrival to the cut), upload (the"
        " file's write, fsync included, or PUT), turn (waiting for earlier flushes to commit), commit",
        ["step"],
        buckets=_STEP_BUCKETS,
        registry=r,
    )
    return puts, steps


class _RequestCollector(Collector):
    def __init__(self, counters: RequestCounters) -> None:
        self._counters = counters

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "strata_object_store_requests", "Object-store requests sent, by kind", labels=["kind"]
        )
        snapshot = self._counters.snapshot()
        for kind in REQUEST_KINDS:
            family.add_metric([kind], snapshot[kind])
        yield family
        read = CounterMetricFamily("strata_object_store_read_bytes", "Bytes read from the object store")
        read.add_metric([], self._counters.bytes_read)
        yield read
        written = CounterMetricFamily(
            "strata_object_store_written_bytes", "Bytes written to the object store"
        )
        written.add_metric([], self._counters.bytes_written)
        yield written


class SchemaCounts:
    """Counts of validation on produce by key, thread-safe (the Kafka door counts from its check threads
    too)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, ...], int] = {}

    def add(self, key: tuple[str, ...], n: int) -> None:
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + n

    def snapshot(self) -> dict[tuple[str, ...], int]:
        with self._lock:
            return dict(self._counts)


class _SchemaCollector(Collector):
    def __init__(self, counts: SchemaCounts) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        validated = CounterMetricFamily(
            "strata_schema_validation",
            "Records whose key or value schema was checked on produce, by result (valid, null: no schema"
            " needed, invalid: the record that failed its batch)",
            labels=["topic", "field", "result"],
        )
        lookups = CounterMetricFamily(
            "strata_schema_cache",
            "Lookups of validation on produce's caches (verdict, schema, guid, subjects), by result (hit,"
            " miss: decided anew or read from the metadata store)",
            labels=["cache", "result"],
        )
        for (kind, *labels), n in sorted(self._counts.snapshot().items()):
            (validated if kind == "validated" else lookups).add_metric(labels, n)
        yield validated
        yield lookups


class Metrics:
    """The agent's metric families. ``registry``: the process's one registry (the composition root shares it
    with the planner's ``CompactionMetrics``); a private one by default."""

    def __init__(self, counters: RequestCounters, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.produce_requests = Counter(
            "strata_produce_requests", "Produce requests by outcome", ["outcome"], registry=r
        )
        self.produce_records = Counter("strata_produce_records", "Records acknowledged", registry=r)
        # Observed once per request, on the event loop: agents/loop_histogram.py says why not Histogram.
        self.produce_latency = LoopHistogram(
            "strata_produce_latency_seconds",
            "Produce request latency (receipt to acknowledgement)",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.kafka_produce_latency = LoopHistogram(
            "strata_kafka_produce_latency_seconds",
            "Kafka Produce request latency (admission to answer; acks 1 and -1)",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.fetch_requests = Counter(
            "strata_fetch_requests", "Fetch requests by outcome", ["outcome"], registry=r
        )
        self.fetch_records = Counter("strata_fetch_records", "Records returned by fetch", registry=r)
        self.fetch_bytes = Counter(
            "strata_fetch_bytes", "Stored record bytes served by fetch, both doors", registry=r
        )
        self.fetch_latency = Histogram(
            "strata_fetch_latency_seconds",
            "Fetch latency, long-poll wait included",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.flushes = Counter("strata_flushes", "Flushes committed", registry=r)
        self.flush_failures = Counter("strata_flush_failures", "Flushes that failed", registry=r)
        self.flush_bytes = Counter("strata_flush_bytes", "Bytes written by flushes", registry=r)
        self.flush_records = Counter("strata_flush_records", "Records written by flushes", registry=r)
        self.flush_partitions = Histogram(
            "strata_flush_partitions",
            "Topic-partitions per flushed file",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 1024),
            registry=r,
        )
        self.flush_seconds = Histogram(
            "strata_flush_seconds", "Upload + commit time of a flush", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.flush_puts, self.flush_step_seconds = _flush_class_metrics(r)
        # Transactions (agents/transactions.py): ends by outcome (commit, abort, timeout: the sweep's aborts),
        # EndTxn's latency, and what the last sweep saw of the transactions open on every agent.
        self.txn_ends = Counter("strata_txn_ends", "Transactions ended, by outcome", ["outcome"], registry=r)
        self.txn_end_seconds = Histogram(
            "strata_txn_end_seconds",
            "EndTxn latency (one metadata transaction)",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.txn_open = Gauge("strata_txn_open", "Transactions open, at the last timeout sweep", registry=r)
        self.txn_oldest_open_seconds = Gauge(
            "strata_txn_oldest_open_seconds",
            "Age of the oldest open transaction at the last sweep",
            registry=r,
        )
        self.buffer_bytes = Gauge("strata_buffer_bytes", "Bytes held by the produce buffer", registry=r)
        self.cache_bytes = Gauge("strata_cache_bytes", "Bytes held by the fetch cache", registry=r)
        # Validation on produce (registry/validate.py calls the two methods below), as Redpanda counts it:
        # records by topic, field and result, and the schema cache's lookups. Counted in plain integers and
        # read at scrape time: they move on every validated batch, where a Counter's labels() and inc()
        # were most of validation's own cost per batch.
        self.schema_counts = SchemaCounts()
        r.register(_SchemaCollector(self.schema_counts))
        r.register(_RequestCollector(counters))

    def bind_gauges(self, buffer_bytes: Callable[[], float], cache_bytes: Callable[[], float]) -> None:
        self.buffer_bytes.set_function(buffer_bytes)
        self.cache_bytes.set_function(cache_bytes)

    def schema_validated(self, topic: str, field: str, result: str, records: int) -> None:
        self.schema_counts.add(("validated", topic, field, result), records)

    def schema_cache(self, cache: str, hit: bool) -> None:
        self.schema_counts.add(("cache", cache, "hit" if hit else "miss"), 1)

    def observe_flush_steps(self, *, upload: float, turn: float, commit: float) -> None:
        steps = self.flush_step_seconds
        steps.labels("upload").observe(upload)
        steps.labels("turn").observe(turn)
        steps.labels("commit").observe(commit)

    def observe_flush(self, *, nbytes: int, nrecords: int, npartitions: int, seconds: float) -> None:
        self.flushes.inc()
        self.flush_bytes.inc(nbytes)
        self.flush_records.inc(nrecords)
        self.flush_partitions.observe(npartitions)
        self.flush_seconds.observe(seconds)
