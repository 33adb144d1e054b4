"""Compaction's dedup lag, measured on a real ``strata serve`` (bench.compaction_bench --scenario lag).

Hot keys are overwritten on a schedule by a few producer lanes (each ack waits for a flush, so one lane
would fall behind), optional cold keys are written once before the window and some of them once more
inside it, and every partition is read from offset 0 every ``--lag-poll-s`` seconds. For every overwritten
(partition, offset), the lag is the time from the ack of the overwrite to the end of the first poll that no
longer returns the old offset: an upper bound, whose resolution is the poll interval. Every poll also
checks that each key's latest acknowledged value is still there.
"""

from __future__ import annotations

import argparse
import itertools
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.harness import AgentSpec, MiB, start_agent, stop_proc
from bench.probes import percentile

COLD_KEY = 1_000_000_000  # acks of cold keys carry COLD_KEY + their number
TOPIC = "lag"
Ack = tuple[int, int, int, float]  # (key, partition, offset, ack time from the window's start)


@dataclass
class LagRun:
    """The state shared by the producer lanes, the cold overwriter and the poller."""

    args: argparse.Namespace
    base: str
    acks: list[Ack] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    polls: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    t_start: float = 0.0
    checks: int = 0
    lost: list[Ack] = field(default_factory=list)

    def post(self, client: httpx.Client, records: list[dict[str, str]], keys: list[int]) -> None:
        """Produce ``records``; their acks (as ``keys``) go to ``acks``, a failure to ``errors``."""
        try:
            resp = client.post(f"/v1/topics/{TOPIC}/records", json={"records": records})
        except httpx.HTTPError as exc:
            self.errors.append(repr(exc))
            return
        t_ack = time.monotonic() - self.t_start
        if resp.status_code != 200:
            self.errors.append(f"{resp.status_code} {resp.text[:200]}")
            return
        with self.lock:
            for k, o in zip(keys, resp.json()["offsets"], strict=True):
                self.acks.append((k, o["partition"], o["offset"], t_ack))

    def preload(self, client: httpx.Client) -> None:
        """Cold keys written once before the window: a live, clean part of the log that the dirty ratio
        (min.cleanable.dirty.ratio) is measured against, as in a large table with a few hot keys. Their
        acks count (before the start) so that an overwrite of one has a record to replace."""
        a = self.args
        value = "c" * a.lag_preload_value_bytes
        self.t_start = time.monotonic()
        for first in range(0, a.lag_preload_keys, 500):
            batch = list(range(first, min(a.lag_preload_keys, first + 500)))
            self.post(
                client,
                [{"key": f"cold-{k:07d}", "value": value} for k in batch],
                [COLD_KEY + k for k in batch],
            )

    def produce(self, lane: int) -> None:
        """Request i (keys (i % per_cycle) * batch ...) is due at t_start + i * gap; lane j sends the i
        with i % lanes == j, so a slow ack (up to a flush interval) does not hold back the others."""
        a = self.args
        per_cycle = max(1, a.lag_keys // a.lag_batch)
        gap = a.lag_update_s / per_cycle
        pad = "x" * a.lag_value_bytes
        with httpx.Client(base_url=self.base, timeout=30.0) as client:
            for i in itertools.count(lane, a.lag_producers):
                self.stop.wait(max(0.0, self.t_start + i * gap - time.monotonic()))
                if self.stop.is_set():
                    return
                first = (i % per_cycle) * a.lag_batch
                keys = list(range(first, min(a.lag_keys, first + a.lag_batch)))
                records = [
                    {"key": f"key-{k:05d}", "value": f"{k}:{i}:{pad}"[: a.lag_value_bytes]} for k in keys
                ]
                self.post(client, records, keys)

    def overwrite_cold(self) -> None:
        """Cold keys overwritten once each, evenly over the window in which lags are measured."""
        a = self.args
        count = min(a.lag_cold_overwrites, a.lag_preload_keys)
        if not count:
            return
        chosen = random.Random(a.seed).sample(range(a.lag_preload_keys), count)
        span = max(0.0, a.lag_duration - a.lag_horizon_s - a.lag_warmup_s)
        with httpx.Client(base_url=self.base, timeout=30.0) as client:
            for n, k in enumerate(chosen):
                self.stop.wait(max(0.0, self.t_start + a.lag_warmup_s + span * n / count - time.monotonic()))
                if self.stop.is_set():
                    return
                record = {"key": f"cold-{k:07d}", "value": "r" * a.lag_preload_value_bytes}
                self.post(client, [record], [COLD_KEY + k])

    def poll(self, client: httpx.Client) -> None:
        """Read every partition from offset 0 once; check each key's latest acknowledged value."""
        with self.lock:
            acked_before = list(self.acks)
        start = time.monotonic() - self.t_start
        present: dict[int, set[int]] = {}
        fetched = 0
        for p in range(self.args.lag_partitions):
            present[p], n = read_partition(client, p)
            fetched += n
        end = time.monotonic() - self.t_start
        latest: dict[int, Ack] = {a[0]: a for a in acked_before}
        for k, p, o, t in latest.values():
            self.checks += 1
            if o not in present[p]:
                self.lost.append((k, p, o, t))
        self.polls.append({"start": start, "end": end, "present": present, "records": fetched})


def read_partition(client: httpx.Client, partition: int) -> tuple[set[int], int]:
    """The offsets a partition holds, read from offset 0 to its high watermark; and how many records."""
    offset, hw = 0, None
    seen: set[int] = set()
    n = 0
    while hw is None or offset < hw:
        params = {"offset": offset, "max_bytes": 8 * MiB, "max_wait_ms": 0}
        resp = client.get(f"/v1/topics/{TOPIC}/partitions/{partition}/records", params=params)
        resp.raise_for_status()
        body = resp.json()
        hw = body["high_watermark"] if hw is None else hw
        seen.update(rec["offset"] for rec in body["records"])
        n += len(body["records"])
        if body["next_offset"] <= offset:
            break
        offset = body["next_offset"]
    return seen, n


def scenario_lag(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """A ``strata serve`` (role all, embedded defaults: no STRATA_* variable) measured as above."""
    spec = AgentSpec([], defaults_only=True)
    agent = start_agent(spec, workdir, "lag")
    try:
        run = LagRun(args, agent.url)
        _run(run)
        return {**lag_figures(run), **job_figures(agent.proc.log_path.read_text(errors="replace"))}
    finally:
        stop_proc(agent.proc, "lag")


def _run(run: LagRun) -> None:
    a = run.args
    configs: dict[str, Any] = {"cleanup.policy": "compact"}
    if a.lag_max_compaction_lag_ms is not None:
        configs["max.compaction.lag.ms"] = a.lag_max_compaction_lag_ms
    with httpx.Client(base_url=run.base, timeout=30.0) as client:
        topic = {"name": TOPIC, "partitions": a.lag_partitions, "configs": configs}
        client.post("/v1/topics", json=topic).raise_for_status()
        run.preload(client)
        preload_end = time.monotonic()
        # The preload's acks move to before the window's start (negative times).
        run.acks[:] = [(k, p, o, t - (preload_end - run.t_start)) for k, p, o, t in run.acks]
        run.t_start = preload_end
        threads = [
            threading.Thread(target=run.produce, args=(j,), daemon=True) for j in range(a.lag_producers)
        ]
        threads.append(threading.Thread(target=run.overwrite_cold, daemon=True))
        for thread in threads:
            thread.start()
        next_poll = time.monotonic()
        while time.monotonic() - run.t_start < a.lag_duration:
            run.stop.wait(max(0.0, next_poll - time.monotonic()))
            next_poll += a.lag_poll_s
            run.poll(client)
        run.stop.set()
        for thread in threads:
            thread.join(30)


@dataclass
class Lags:
    """Lags of the overwrites acknowledged inside the window, and those never seen removed (censored)."""

    lags: list[float] = field(default_factory=list)
    lower: list[float] = field(default_factory=list)  # the last poll still showing the old record
    censored: list[float] = field(default_factory=list)
    all_observed: list[float] = field(default_factory=list)
    cold_lags: list[float] = field(default_factory=list)
    cold_censored: list[float] = field(default_factory=list)


def measure_lags(run: LagRun, window: tuple[float, float], end_s: float) -> Lags:
    """Per overwritten record: ack of the overwrite -> end of the first later poll without the old one."""
    by_key: dict[int, list[tuple[int, int, float]]] = {}
    for k, p, o, t in sorted(run.acks, key=lambda a: (a[0], a[2])):
        by_key.setdefault(k, []).append((p, o, t))
    out = Lags()
    for key, chain in by_key.items():
        cold = key >= COLD_KEY
        for (p, o, _), (_, _, t_over) in itertools.pairwise(chain):
            later = (pl["end"] for pl in run.polls if pl["start"] >= t_over and o not in pl["present"][p])
            gone_at = next(later, None)
            inside = window[0] <= t_over <= window[1]
            if gone_at is None:
                if inside:
                    out.censored.append(end_s - t_over)
                    if cold:
                        out.cold_censored.append(end_s - t_over)
                continue
            out.all_observed.append(gone_at - t_over)
            if inside:
                out.lags.append(gone_at - t_over)
                if cold:
                    out.cold_lags.append(gone_at - t_over)
                still = [pl["end"] for pl in run.polls if pl["end"] < gone_at and o in pl["present"][p]]
                out.lower.append(max(0.0, (still[-1] if still else t_over) - t_over))
    return out


def quantile(lags: list[float], censored: list[float], q: float) -> float | None:
    """A percentile over every overwrite; one never removed counts as infinitely late, so a percentile
    that lands on one is None (reported as "> the youngest such overwrite's age")."""
    value = percentile(sorted(lags) + [float("inf")] * len(censored), q)
    return None if value is None or value == float("inf") else round(value, 2)


def lag_figures(run: LagRun) -> dict[str, Any]:
    a = run.args
    end_s = run.polls[-1]["end"] if run.polls else 0.0
    window = (a.lag_warmup_s, end_s - a.lag_horizon_s)
    m = measure_lags(run, window, end_s)
    return {
        "preload_keys": a.lag_preload_keys,
        "max_compaction_lag_ms": a.lag_max_compaction_lag_ms,
        "cold": {
            "overwrites_in_window": len(m.cold_lags) + len(m.cold_censored),
            "removed_in_window": len(m.cold_lags),
            "not_removed_in_window": len(m.cold_censored),
            "not_removed_min_age_s": round(min(m.cold_censored), 1) if m.cold_censored else None,
            "lag_p50_s": quantile(m.cold_lags, m.cold_censored, 0.50),
            "lag_p99_s": quantile(m.cold_lags, m.cold_censored, 0.99),
            "lag_max_s": round(max(m.cold_lags), 2) if m.cold_lags else None,
        },
        "hot_keys": a.lag_keys,
        "update_s": a.lag_update_s,
        "value_bytes": a.lag_value_bytes,
        "duration_s": round(end_s, 1),
        "produced_records": len(run.acks),
        "produce_errors": len(run.errors),
        "produce_error_sample": run.errors[:3],
        "polls": len(run.polls),
        "poll_seconds_mean": round(float(np.mean([pl["end"] - pl["start"] for pl in run.polls])), 3)
        if run.polls
        else None,
        "window_s": [round(window[0], 1), round(window[1], 1)],
        "overwrites_in_window": len(m.lags) + len(m.censored),
        "removed_in_window": len(m.lags),
        "not_removed_in_window": len(m.censored),
        "not_removed_min_age_s": round(min(m.censored), 1) if m.censored else None,
        "lag_p50_s": quantile(m.lags, m.censored, 0.50),
        "lag_p90_s": quantile(m.lags, m.censored, 0.90),
        "lag_p99_s": quantile(m.lags, m.censored, 0.99),
        "lag_p99_is_lower_bound": quantile(m.lags, m.censored, 0.99) is None and bool(m.censored),
        "lag_max_s": round(max(m.lags), 2) if m.lags else None,
        "lag_lower_bound_p50_s": round(percentile(m.lower, 0.5) or 0, 2) if m.lower else None,
        "lag_lower_bound_max_s": round(max(m.lower), 2) if m.lower else None,
        "produce_rate_rec_s": round(len(run.acks) / end_s, 1) if end_s else None,
        "lag_all_observed_p50_s": round(percentile(m.all_observed, 0.5) or 0, 2) if m.all_observed else None,
        "lag_histogram_s": dict(Counter(int(x // 5 * 5) for x in m.lags).most_common()),
        "latest_checks": run.checks,
        "latest_lost": len(run.lost),
        "latest_lost_sample": run.lost[:5],
    }


def job_figures(log_text: str) -> dict[str, Any]:
    """What the server's compaction worker logged: jobs by kind and outcome, requests per file, reasons."""
    jobs = re.findall(
        r"job (\d+) \((\w+)\) ([a-z]+)[^:]*: (\d+) file\(s\) in, (\d+) out;"
        r".*?pass 1 ([\d.]+) s.*?pass 2 ([\d.]+) s.*?(\d+) GET\(s\), (\d+) PUT\(s\)",
        log_text,
    )
    planned = re.findall(r"planned job \d+ \((\w+), (\d+) file\(s\) -> L(\d)\): (.*)", log_text)
    reasons = Counter(
        f"{kind} -> L{level}: " + re.sub(r"[\d.]+", "N", reason.split(": ", 1)[-1])
        for kind, _, level, reason in planned
    )
    return {
        "jobs_by_kind": dict(Counter(j[1] for j in jobs)),
        "jobs_by_outcome": dict(Counter(j[2] for j in jobs)),
        # As logged by the server's worker (JobStats): GETs per input file, PUTs per output file.
        "job_gets_per_input_file": [round(int(j[7]) / int(j[3]), 2) for j in jobs if int(j[3])],
        "job_puts_per_output_file": [round(int(j[8]) / int(j[4]), 2) for j in jobs if int(j[4])],
        "job_seconds_max": max((float(j[5]) + float(j[6]) for j in jobs), default=None),
        "plan_reasons": dict(reasons.most_common(10)),
        "server_log_tail": log_text.splitlines()[-5:],
    }
