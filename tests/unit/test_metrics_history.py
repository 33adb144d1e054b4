"""The agent's metrics history (agents/metrics_history.py): rates between samples, produce latency
quantiles from histogram bucket deltas, the monthly request cost, the ring's bound, and the lake's series
from its cluster-wide totals."""

from __future__ import annotations

import pytest

from agents.metrics import Metrics
from agents.metrics_history import GiB, MetricsHistory, MiB, RequestPrices, quantile
from storage.metadata.lake_state import LakeUsageTotals
from storage.objectstore.base import DELETE, GET, HEAD, LIST, PUT, RequestCounters


def test_quantile_interpolates_within_the_bucket_of_the_delta() -> None:
    before = ((0.1, 10.0), (0.2, 10.0), (float("inf"), 10.0))
    # 100 new observations: 50 in (0, 0.1], 50 in (0.1, 0.2].
    after = ((0.1, 60.0), (0.2, 110.0), (float("inf"), 110.0))
    assert quantile(0.5, before, after) == pytest.approx(0.1)
    assert quantile(0.99, before, after) == pytest.approx(0.1 + 0.1 * 49 / 50)
    assert quantile(0.25, before, after) == pytest.approx(0.05)
    assert quantile(0.5, after, after) is None  # nothing observed in between
    # A quantile in the +Inf bucket is the last finite bound, as Prometheus answers.
    assert quantile(0.99, ((1.0, 0.0), (float("inf"), 0.0)), ((1.0, 0.0), (float("inf"), 5.0))) == 1.0


def test_points_are_rates_between_samples() -> None:
    counters = RequestCounters()
    metrics = Metrics(counters)
    history = MetricsHistory(metrics, counters, RequestPrices(put_per_1000=5.0, get_per_1000=0.4), capacity=3)
    assert history.sample(1_000) is None  # the first sample only sets the baseline
    metrics.flush_bytes.inc(4 * MiB)
    metrics.fetch_bytes.inc(2 * MiB)
    for _ in range(8):
        counters.incr(PUT)
    for _ in range(20):
        counters.incr(GET)
    for seconds in (0.01, 0.02, 0.3):
        metrics.produce_latency.observe(seconds)
    metrics.kafka_produce_latency.observe(0.04)
    point = history.sample(3_000)  # two seconds later
    assert point is not None
    assert (point.produce_mib_s, point.fetch_mib_s) == (2.0, 1.0)
    assert (point.puts_per_s, point.gets_per_s) == (4.0, 10.0)
    assert point.produce_p50_ms is not None
    assert 10 <= point.produce_p50_ms <= 50
    assert point.produce_p99_ms is not None
    assert 250 <= point.produce_p99_ms <= 300
    # 4 PUT/s at $5 per 1,000 and 10 GET/s at $0.4 per 1,000, over 30 days.
    assert point.monthly_cost_usd == pytest.approx((4 * 5 + 10 * 0.4) / 1000 * 30 * 24 * 3600)
    quiet = history.sample(4_000)
    assert quiet is not None
    assert (quiet.produce_mib_s, quiet.puts_per_s, quiet.monthly_cost_usd) == (0.0, 0.0, 0.0)
    assert quiet.produce_p50_ms is None
    for t in (5_000, 6_000, 7_000):
        history.sample(t)
    assert [p.ts_ms for p in history.points()] == [5_000, 6_000, 7_000]  # the ring keeps `capacity`
    assert [p.ts_ms for p in history.points(since_ms=6_000)] == [6_000, 7_000]
    assert history.sample(7_000) is None  # no time passed: no rate


def lake(put: int, get: int, head: int, list_: int, stored: int = 0) -> LakeUsageTotals:
    requests = {PUT: put, GET: get, HEAD: head, LIST: list_, DELETE: 7}
    return LakeUsageTotals(
        requests, stored_objects=stored // 100, stored_bytes=stored, tables=1, unmeasured=0
    )


def test_the_lake_series_is_rates_of_its_totals_by_billing_class() -> None:
    counters = RequestCounters()
    prices = RequestPrices(put_per_1000=5.0, get_per_1000=0.4, storage_per_gb_month=0.02)
    history = MetricsHistory(Metrics(counters), counters, prices)
    history.sample(1_000, lake(10, 5, 5, 2, stored=GiB))
    # Two seconds later: 30 PUTs and 2 LISTs (the PUT class), 6 GETs and 4 HEADs (the GET class).
    point = history.sample(3_000, lake(40, 11, 9, 4, stored=3 * GiB))
    assert point is not None
    assert point.lake is not None
    assert (point.lake.puts_per_s, point.lake.gets_per_s) == (16.0, 5.0)
    assert point.lake.monthly_cost_usd == pytest.approx(prices.monthly_cost(16.0, 5.0))
    assert (point.lake.stored_bytes, point.lake.stored_objects) == (3 * GiB, 3 * GiB // 100)
    assert point.lake.storage_monthly_usd == pytest.approx(0.06)
    # The agent's own series does not hold them.
    assert (point.puts_per_s, point.monthly_cost_usd) == (0.0, 0.0)

    # A read that failed: no lake figures; the next rate spans the gap from the last read.
    gap = history.sample(4_000, None)
    assert gap is not None
    assert gap.lake is None
    after = history.sample(5_000, lake(48, 11, 9, 4, stored=3 * GiB))
    assert after is not None
    assert after.lake is not None
    assert (after.lake.puts_per_s, after.lake.gets_per_s) == (4.0, 0.0)
    # Totals that went back (another metadata database) give no negative rate.
    back = history.sample(6_000, lake(0, 0, 0, 0))
    assert back is not None
    assert back.lake is not None
    assert (back.lake.puts_per_s, back.lake.gets_per_s, back.lake.monthly_cost_usd) == (0.0, 0.0, 0.0)


def test_the_first_lake_read_has_figures_but_no_rate() -> None:
    counters = RequestCounters()
    history = MetricsHistory(Metrics(counters), counters, RequestPrices())
    history.sample(1_000)  # the baseline of the agent's own series; the lake not read
    point = history.sample(2_000, lake(3, 1, 1, 1, stored=5_000))
    assert point is not None
    assert point.lake is not None
    assert (point.lake.puts_per_s, point.lake.gets_per_s, point.lake.monthly_cost_usd) == (None, None, None)
    assert point.lake.stored_bytes == 5_000
