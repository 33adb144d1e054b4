"""The lake benchmark's flush phase: whether lake commits delay the agent's flushes, whose commits go to
the same SQLite file as the lake's catalog (``storage/lake_catalog.py``) and its leases.

Two shapes, each one agent on the embedded default (local directory, SQLite) with two topics of
``--partitions`` partitions: ``flush-plain`` (no lake) and ``flush-lake`` (``strata.iceberg.mode=raw``,
``--interval-ms``):
- ``all``: ``strata serve --role all``, the embedded default, whose background loop runs the lake round
  (every 5 s) and compaction in a child process (``strata/worker_process.py``) on the same metadata store;
- ``thread``: the same with ``--no-worker-process``: the loop in a thread of the agent's process, sharing
  its GIL;
- ``split``: ``strata serve --role agent`` and the writer as ``strata lake run --loop`` in a process of its
  own on the same data directory: the lake's SQLite transactions without its GIL.
The table is made first (its first commit). Then windows of ``--flush-duration`` seconds after
``--flush-warmup``, ``--flush-repeat`` times (off, on), back to back: ``--producers`` librdkafka processes
(acks=all) offer ``--flush-rate-mib`` MiB/s of 1 KiB records to ``flush-plain`` (lake off: the table has no
new records, so its rounds find it up to date) or to ``flush-lake`` (lake on: it commits what arrives, once
per interval). Per window: the producers' ack latency p50 / p99 (every record), the agent's flushes (upload
and commit, ``strata_flush_seconds``: the mean, and p50 / p99 as the upper bounds of their buckets), the
lake commits inside the window (seen by polling the table's status), and the CPU of the agent and writer.
The flush's own metadata transaction (``strata_flush_step_seconds{step="commit"}``) is reported apart from
its upload: it is what sharing the SQLite file with the lake's catalog could delay.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from bench import metrics
from bench.harness import AgentSpec, Proc, log, start_agent, stop_proc
from bench.kafka_load import KafkaLoad, run_producers
from bench.lake_analysis import Commit, commits_seen
from bench.lake_common import (
    StatusPoller,
    create_topic,
    lake_configs,
    start_writer,
    wait_for_commit,
    with_warmup,
)
from bench.probes import CpuWindow, worker_children

PLAIN, LAKE = "flush-plain", "flush-lake"
FLUSH = "strata_flush_seconds"


def flush_phase(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    return {shape: _shape(args, workdir, shape) for shape in args.flush_shapes}


def _shape(args: argparse.Namespace, workdir: Path, shape: str) -> dict[str, Any]:
    name = f"flush-{shape}"
    serve = {
        "all": ["--role", "all"],
        "thread": ["--role", "all", "--no-worker-process"],
        "split": ["--role", "agent"],
    }[shape] + ["--log-level", "warning"]
    agent = start_agent(AgentSpec(serve, kafka_ports=1), workdir, name)
    writer: Proc | None = None
    windows: list[dict[str, Any]] = []
    try:
        create_topic(agent.url, PLAIN, args.partitions, {})
        create_topic(agent.url, LAKE, args.partitions, lake_configs(args.interval_ms))
        if shape == "split":
            writer = start_writer(agent.data_dir, workdir, f"{name}-writer", LAKE, None)
        wait_for_commit(agent.url, LAKE, 120)
        pids = {"agent": agent.pid, **({"writer": writer.pid} if writer is not None else {})}
        if shape == "all":
            (pids["writer"],) = worker_children(agent.pid)
        with StatusPoller(agent.url, LAKE) as poller:
            for _ in range(args.flush_repeat):
                for kind, topic in (("off", PLAIN), ("on", LAKE)):
                    log(f"[flush] {shape}: lake {kind}, {args.flush_rate_mib:g} MiB/s to {topic}")
                    windows.append(_window(args, agent.url, agent.bootstrap or "", pids, kind, topic))
        commits = commits_seen(poller.samples)
    finally:
        if writer is not None:
            stop_proc(writer, "flush")
        stop_proc(agent.proc, "flush")
    shutil.rmtree(agent.data_dir, ignore_errors=True)
    for w in windows:
        w["lake_commits"] = _inside(commits, w.pop("start_s"), w.pop("end_s"))
    off, on = _median(windows, "off"), _median(windows, "on")
    return {"rate_mib": args.flush_rate_mib, "windows": windows, "off": off, "on": on}


def _window(
    args: argparse.Namespace, url: str, bootstrap: str, pids: dict[str, int], kind: str, topic: str
) -> dict[str, Any]:
    scrapes: dict[str, metrics.Scrape] = {}
    marks: dict[str, float] = {}
    cpu = CpuWindow(pids)

    def start() -> None:
        marks["start"] = time.time()
        cpu.mark_start()
        scrapes["before"] = metrics.scrape(url)

    def end() -> None:
        marks["end"] = time.time()
        cpu.mark_end()
        scrapes["after"] = metrics.scrape(url)

    load = KafkaLoad("none", args.producers, args.flush_duration, rate_mib=args.flush_rate_mib)
    produced = run_producers(with_warmup(args, args.flush_warmup), bootstrap, topic, load, start, end)
    before, after = scrapes["before"], scrapes["after"]
    quantiles = metrics.histogram_quantiles(before, after, FLUSH, (0.5, 0.99))
    mean_s = metrics.delta_mean(before, after, FLUSH)
    steps = metrics.flush_steps_ms(before, after)
    latency = produced["latency_ms"]
    return {
        "kind": kind,
        "topic": topic,
        "start_s": marks["start"],
        "end_s": marks["end"],
        "mib_s": produced["mib_s"],
        "errors": produced["errors"],
        "ack_p50_ms": latency["p50"],
        "ack_p99_ms": latency["p99"],
        "flushes": metrics.delta(before, after, FLUSH + "_count"),
        "flush_mean_ms": None if mean_s is None else mean_s * 1000,
        "flush_p50_ms": quantiles[0.5],
        "flush_p99_ms": quantiles[0.99],
        "commit_mean_ms": steps["commit"],
        "upload_mean_ms": steps["upload"],
        "cpu_cores": cpu.cores(),
    }


def _inside(commits: list[Commit], start_s: float, end_s: float) -> int:
    return sum(1 for c in commits if start_s <= c.at_s <= end_s)


def _median(windows: list[dict[str, Any]], kind: str) -> dict[str, float | None]:
    """Each figure's median over the windows of ``kind`` (None where a window has none)."""
    chosen = [w for w in windows if w["kind"] == kind]
    keys: tuple[str, ...] = ("mib_s", "ack_p50_ms", "ack_p99_ms", "flushes", "flush_mean_ms", "flush_p50_ms")
    keys += ("flush_p99_ms", "commit_mean_ms", "upload_mean_ms")
    out: dict[str, float | None] = {}
    for key in (*keys, "lake_commits"):
        values = [w[key] for w in chosen if w.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    return out
