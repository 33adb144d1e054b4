"""Prometheus metrics of compaction jobs (``strata_compaction_*``), on the process's one registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from planner.stats import JobStats
from storage.metadata.rows import Job


class CompactionMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.jobs = Counter(
            "strata_compaction_jobs",
            "Compaction jobs run, by kind and outcome",
            ["kind", "outcome"],
            registry=r,
        )
        self.read_bytes = Counter("strata_compaction_read_bytes", "Bytes read by compaction", registry=r)
        self.written_bytes = Counter(
            "strata_compaction_written_bytes", "Bytes written by compaction", registry=r
        )
        self.records_in = Counter("strata_compaction_records_in", "Records read by compaction", registry=r)
        self.records_out = Counter(
            "strata_compaction_records_out", "Records written by compaction", registry=r
        )
        self.pass_seconds = Histogram(
            "strata_compaction_pass_seconds",
            "Time per compaction pass",
            ["pass"],
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=r,
        )
        self.pass_bytes = Counter(
            "strata_compaction_pass_bytes",
            "Bytes read per compaction pass (MiB/s = rate / pass seconds)",
            ["pass"],
            registry=r,
        )
        self.requests = Counter(
            "strata_compaction_requests",
            "Object-store requests made by compaction jobs",
            ["kind"],
            registry=r,
        )
        self.map_utilization = Gauge(
            "strata_compaction_map_utilization", "Offset-map utilization of the last job", registry=r
        )
        self.dedup_ratio = Gauge(
            "strata_compaction_dedup_ratio", "Fraction of records the last job removed", registry=r
        )

    def observe_job(self, job: Job, stats: JobStats) -> None:
        self.jobs.labels(job.kind, stats.outcome.value).inc()
        self.read_bytes.inc(stats.bytes_read)
        self.written_bytes.inc(stats.bytes_written)
        self.records_in.inc(stats.records_in)
        self.records_out.inc(stats.records_out)
        self.pass_seconds.labels("1").observe(stats.pass1_seconds)
        self.pass_seconds.labels("2").observe(stats.pass2_seconds)
        self.pass_bytes.labels("1").inc(stats.pass1_bytes)
        self.pass_bytes.labels("2").inc(stats.pass2_bytes)
        self.requests.labels("GET").inc(stats.gets)
        self.requests.labels("PUT").inc(stats.puts)
        self.map_utilization.set(stats.map_utilization)
        self.dedup_ratio.set(stats.dedup_ratio)
