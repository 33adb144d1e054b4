"""An agent's Prometheus metrics as the benchmarks read them: scrapes, counter deltas, histogram means and
quantiles.

The text format is parsed by hand (name, space, value per line) because the benchmarks need nothing but
the samples of a few counters and histograms; every sample keeps its labels in its name, as in
``strata_object_store_requests_total{kind="PUT"}``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx

from bench.harness import MiB

Scrape = dict[str, float]


def scrape(base_url: str) -> Scrape:
    return parse(httpx.get(base_url + "/metrics", timeout=10.0).text)


def parse(text: str) -> Scrape:
    """Prometheus's text format as samples by name (labels included in the name)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        with contextlib.suppress(ValueError):
            out[name] = float(value)
    return out


def puts(m: Scrape) -> float:
    return m.get('strata_object_store_requests_total{kind="PUT"}', 0.0)


def gets(m: Scrape) -> float:
    return m.get('strata_object_store_requests_total{kind="GET"}', 0.0)


def flushes(m: Scrape) -> float:
    return m.get("strata_flushes_total", 0.0)


def delta(before: Scrape, after: Scrape, name: str) -> float:
    return after.get(name, 0.0) - before.get(name, 0.0)


def delta_mean(before: Scrape, after: Scrape, histogram: str, labels: str = "") -> float | None:
    """Mean of a Prometheus histogram's observations between two scrapes; ``labels``: one series of it,
    as the text format writes them (``{step="upload"}``)."""
    count = delta(before, after, histogram + "_count" + labels)
    return delta(before, after, histogram + "_sum" + labels) / count if count else None


FLUSH_STEPS = ("buffered", "upload", "turn", "commit")


def flush_steps_ms(before: Scrape, after: Scrape) -> dict[str, float | None]:
    """Mean milliseconds a flush spent in each step of the round trip (agents/metrics.py)."""
    out: dict[str, float | None] = {}
    for step in FLUSH_STEPS:
        mean = delta_mean(before, after, "strata_flush_step_seconds", f'{{step="{step}"}}')
        out[step] = None if mean is None else mean * 1000
    return out


def class_puts(before: Scrape, after: Scrape, flush_class: str) -> float:
    """Flush PUTs counted under ``flush_class`` between two scrapes."""
    return delta(before, after, f'strata_flush_puts_total{{class="{flush_class}"}}')


def max_bucket(m: Scrape, histogram: str) -> str | None:
    """The smallest histogram bucket bound holding every observation (a coarse maximum)."""
    count = m.get(histogram + "_count", 0.0)
    bounds = []
    for name, value in m.items():
        if name.startswith(histogram + '_bucket{le="') and value >= count > 0:
            bounds.append(name.split('le="', 1)[1].rstrip('"}'))
    return min(bounds, key=float) if bounds else None


def histogram_quantiles(
    before: Mapping[str, float], after: Mapping[str, float], histogram: str, qs: Sequence[float]
) -> dict[float, float | None]:
    """The ``qs`` quantiles, in ms, of a Prometheus histogram's observations between two scrapes, each as
    the upper bound of the bucket that holds it (None without observations; inf past the last bound)."""
    prefix = histogram + '_bucket{le="'
    buckets = []
    for name, value in after.items():
        if name.startswith(prefix):
            bound = name[len(prefix) :].split('"', 1)[0]
            buckets.append((float("inf") if bound == "+Inf" else float(bound), value - before.get(name, 0.0)))
    buckets.sort()
    total = buckets[-1][1] if buckets else 0.0
    out: dict[float, float | None] = {}
    for q in qs:
        out[q] = next((b * 1000 for b, n in buckets if n >= q * total), None) if total > 0 else None
    return out


def flush_figures(before: Scrape, after: Scrape) -> dict[str, Any]:
    """Flushes, PUTs and stored bytes between two scrapes: one PUT per flush is the write path's rule."""
    nflush = flushes(after) - flushes(before)
    nput = puts(after) - puts(before)
    stored = delta(before, after, "strata_flush_bytes_total")
    return {
        "flushes": nflush,
        "puts": nput,
        "puts_per_flush": nput / nflush if nflush else None,
        "mib_per_flush": stored / nflush / MiB if nflush else None,
        "stored_mib": stored / MiB,
        "flush_seconds_mean": delta_mean(before, after, "strata_flush_seconds"),
        "flush_failures": delta(before, after, "strata_flush_failures_total"),
    }


def wait_buffer_empty(base_url: str, timeout: float = 30.0) -> None:
    """Until the agent's produce buffer is empty (every acknowledged record flushed), at most ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if scrape(base_url).get("strata_buffer_bytes", 0.0) == 0.0:
            return
        time.sleep(0.1)


def create_topics(
    url: str, topics: list[str], partitions: int, configs: dict[str, str] | None = None
) -> None:
    """Create ``topics`` over HTTP with ``partitions`` split evenly among them, and ``configs``."""
    per_topic = max(1, partitions // len(topics))
    for topic in topics:
        body = {"name": topic, "partitions": per_topic, "configs": configs or {}}
        r = httpx.post(url + "/v1/topics", json=body, timeout=30.0)
        if r.status_code != 201:
            raise RuntimeError(f"creating topic {topic} failed: {r.status_code} {r.text[:500]}")


class BufferWatcher:
    """The largest ``strata_buffer_bytes`` an agent reports, scraped every 250 ms in a thread while the
    ``with`` block runs: the produce buffer's bound is what the overload phases check beside RSS."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.max_bytes = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(httpx.HTTPError):
                self.max_bytes = max(self.max_bytes, scrape(self.url).get("strata_buffer_bytes", 0.0))
            self._stop.wait(0.25)

    def __enter__(self) -> BufferWatcher:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
