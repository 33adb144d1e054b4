"""The agent's recent metrics as a time series: what the console's overview charts.

Prometheus keeps history for those who run one; a console beside a single agent should not need it. So the
agent samples its own counters every ``interval_ms`` into a ring of ``capacity`` points, each point the
rates between two consecutive samples:
- produce and fetch MiB/s (bytes flushed to files, and stored bytes served by either door);
- produce latency p50 and p99 over the interval, from the delta of the HTTP and Kafka produce histograms'
  buckets, interpolated within a bucket as Prometheus' ``histogram_quantile`` does;
- object-store PUTs and GETs per second, and the monthly request cost they would come to at the configured
  prices (S3's list prices by default: requests are what object storage bills a log for, beside bytes);
- flush PUTs per second by the flush class that cut them (agents/flush_policy.py), so that the cost of
  low-latency topics shows apart from the standard class's.
- what the lake adds (``Point.lake``): the requests its rounds send for the lake's tables, per second, with
  their monthly cost, and the bytes and objects its tables hold, with what storing them costs a month.

Invariants: points are in time order, at most ``capacity`` of them; a point is only made from two samples,
so the first sample after start yields none; counters that went backwards (a registry swapped in a test)
give a zero rate, never a negative one. The agent's own series count only its own requests: other agents
sharing the bucket have their own history. The lake's series are the whole cluster's, not this process's:
the lake is written by worker processes, which record what they send in the metadata store
(``LakeStore.record_lake_usage``), and the sampler reads the totals there (``LakeUsageTotals``, read off the
event loop by the caller). Their rates are between two successful reads; a read that failed (the metadata
store down) leaves the point's lake fields None and the next rate spans the gap. The lake's requests are
priced by S3's classes: PUT, its multipart POSTs and LIST at the PUT price, GET and HEAD at the GET price.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client import Counter
from prometheus_client.registry import Collector

from agents.metrics import Metrics
from storage.metadata.lake_state import LakeUsageTotals
from storage.objectstore.base import GET, HEAD, LIST, PUT, RequestCounters

SECONDS_PER_MONTH = 30 * 24 * 3600  # the 30-day month S3's pricing examples use
MiB = 1024 * 1024
GiB = 1024 * MiB  # S3's "GB" of storage pricing


@dataclass(frozen=True, slots=True)
class RequestPrices:
    """USD per 1,000 requests, and per GiB stored for a month. Defaults: S3 Standard in us-east-1
    (PUT/COPY/POST/LIST, GET/HEAD, and storage's first 50 TB)."""

    put_per_1000: float = 0.005
    get_per_1000: float = 0.0004
    storage_per_gb_month: float = 0.023

    def monthly_cost(self, puts_per_s: float, gets_per_s: float) -> float:
        per_second = puts_per_s * self.put_per_1000 / 1000 + gets_per_s * self.get_per_1000 / 1000
        return per_second * SECONDS_PER_MONTH

    def monthly_storage_cost(self, stored_bytes: int) -> float:
        return stored_bytes / GiB * self.storage_per_gb_month


@dataclass(frozen=True, slots=True)
class Point:
    ts_ms: int
    produce_mib_s: float
    fetch_mib_s: float
    produce_p50_ms: float | None  # None: no produce request finished in the interval
    produce_p99_ms: float | None
    puts_per_s: float
    gets_per_s: float
    monthly_cost_usd: float
    flush_puts_per_s: dict[str, float]  # by flush class
    lake: LakePoint | None = None  # None: the lake's totals could not be read for this point


@dataclass(frozen=True, slots=True)
class LakePoint:
    """What the lake adds, cluster-wide: its requests by billing class (None until two reads gave a
    rate), their monthly cost, and what its tables hold with its monthly storage cost."""

    puts_per_s: float | None
    gets_per_s: float | None
    monthly_cost_usd: float | None
    stored_bytes: int
    stored_objects: int
    storage_monthly_usd: float


@dataclass(frozen=True, slots=True)
class _Raw:
    ts_ms: int
    produce_bytes: float
    fetch_bytes: float
    buckets: tuple[tuple[float, float], ...]  # (upper bound, cumulative count), both histograms summed
    puts: int
    gets: int
    flush_puts: dict[str, float]


def _by_label(counter: Counter, label: str) -> dict[str, float]:
    """A labelled counter's values by one label, through the public collect()."""
    return {
        s.labels[label]: s.value for f in counter.collect() for s in f.samples if s.name.endswith("_total")
    }


def _total(counter: Counter) -> float:
    """A label-less counter's value, through the public collect() (its ``_total`` sample)."""
    return sum(s.value for f in counter.collect() for s in f.samples if s.name.endswith("_total"))


def _buckets(histograms: Iterable[Collector]) -> tuple[tuple[float, float], ...]:
    """Cumulative bucket counts by upper bound, summed over histograms that share their bounds."""
    sums: dict[float, float] = {}
    for histogram in histograms:
        for family in histogram.collect():
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    bound = float(sample.labels["le"])
                    sums[bound] = sums.get(bound, 0.0) + sample.value
    return tuple(sorted(sums.items()))


def quantile(
    q: float, before: tuple[tuple[float, float], ...], after: tuple[tuple[float, float], ...]
) -> float | None:
    """The q-quantile (seconds) of the observations made between two cumulative bucket snapshots.

    Linear within the bucket that holds it; a quantile in the +Inf bucket is the last finite bound (as
    Prometheus answers). None when nothing was observed in between.
    """
    earlier = dict(before)
    deltas = [(bound, max(0.0, count - earlier.get(bound, 0.0))) for bound, count in after]
    if not deltas or deltas[-1][1] <= 0:
        return None
    rank = q * deltas[-1][1]
    lower, below = 0.0, 0.0
    for bound, cumulative in deltas:
        if cumulative >= rank:
            if math.isinf(bound):
                return lower
            inside = cumulative - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, cumulative
    return lower


class MetricsHistory:
    def __init__(
        self,
        metrics: Metrics,
        counters: RequestCounters,
        prices: RequestPrices,
        *,
        interval_ms: int = 5_000,
        capacity: int = 180,
    ) -> None:
        self.metrics = metrics
        self.counters = counters
        self.prices = prices
        self.interval_ms = interval_ms
        self._points: deque[Point] = deque(maxlen=capacity)
        self._last: _Raw | None = None
        self._last_lake: tuple[int, LakeUsageTotals] | None = None

    def _read(self, now_ms: int) -> _Raw:
        snapshot = self.counters.snapshot()
        m = self.metrics
        return _Raw(
            ts_ms=now_ms,
            produce_bytes=_total(m.flush_bytes),
            fetch_bytes=_total(m.fetch_bytes),
            buckets=_buckets((m.produce_latency, m.kafka_produce_latency)),
            puts=snapshot[PUT],
            gets=snapshot[GET],
            flush_puts=_by_label(m.flush_puts, "class"),
        )

    def sample(self, now_ms: int, lake: LakeUsageTotals | None = None) -> Point | None:
        """Read the counters now; the point for the interval since the last sample (None for the first).
        ``lake``: the lake's totals read just before (None: not read)."""
        lake_point = None if lake is None else self._lake_point(now_ms, lake)
        raw = self._read(now_ms)
        last, self._last = self._last, raw
        if last is None or raw.ts_ms <= last.ts_ms:
            return None
        seconds = (raw.ts_ms - last.ts_ms) / 1000

        def rate(now: float, then: float) -> float:
            return max(0.0, now - then) / seconds

        puts, gets = rate(raw.puts, last.puts), rate(raw.gets, last.gets)
        p50 = quantile(0.5, last.buckets, raw.buckets)
        p99 = quantile(0.99, last.buckets, raw.buckets)
        point = Point(
            ts_ms=raw.ts_ms,
            produce_mib_s=rate(raw.produce_bytes, last.produce_bytes) / MiB,
            fetch_mib_s=rate(raw.fetch_bytes, last.fetch_bytes) / MiB,
            produce_p50_ms=None if p50 is None else p50 * 1000,
            produce_p99_ms=None if p99 is None else p99 * 1000,
            puts_per_s=puts,
            gets_per_s=gets,
            monthly_cost_usd=self.prices.monthly_cost(puts, gets),
            flush_puts_per_s={
                c: rate(n, last.flush_puts.get(c, 0.0)) for c, n in sorted(raw.flush_puts.items())
            },
            lake=lake_point,
        )
        self._points.append(point)
        return point

    def _lake_point(self, now_ms: int, lake: LakeUsageTotals) -> LakePoint:
        """The lake's part of a point: rates since the last read of its totals (None for the first)."""
        last, self._last_lake = self._last_lake, (now_ms, lake)
        puts = gets = cost = None
        if last is not None and now_ms > last[0]:
            seconds = (now_ms - last[0]) / 1000
            then, now = last[1].requests, lake.requests

            def rate(*kinds: str) -> float:
                return max(0, sum(now.get(k, 0) - then.get(k, 0) for k in kinds)) / seconds

            puts, gets = rate(PUT, LIST), rate(GET, HEAD)
            cost = self.prices.monthly_cost(puts, gets)
        return LakePoint(
            puts_per_s=puts,
            gets_per_s=gets,
            monthly_cost_usd=cost,
            stored_bytes=lake.stored_bytes,
            stored_objects=lake.stored_objects,
            storage_monthly_usd=self.prices.monthly_storage_cost(lake.stored_bytes),
        )

    def points(self, since_ms: int = 0) -> list[Point]:
        return [p for p in self._points if p.ts_ms >= since_ms]
