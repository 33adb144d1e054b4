"""The lake benchmark's raw phase: a raw table kept up to date at a steady produce rate.

One ``strata serve --role agent`` on the embedded default (local directory, SQLite; Kafka on a free port),
a topic of ``--partitions`` partitions with ``strata.iceberg.mode=raw`` and ``--interval-ms`` as its
commit interval, and the writer as ``strata lake run --loop`` in a process of its own (a round every
500 ms, or when the topic is due) with ``--lake-max-bytes-per-commit`` set to each of ``--raw-caps-mib``
in turn (a fresh agent and topic for each) and ``--lake-write-buffer-bytes`` to ``--raw-buffer-mib``.
``--producers`` librdkafka processes (``bench.kafka_loadgen``, acks=all) offer ``--raw-rate-mib`` MiB/s
of 1 KiB records for ``--raw-warmup`` + ``--raw-duration`` seconds, while the table's status (``GET
/v1/topics/{t}/lake``, the lag as ``storage/lake_status.py`` computes it) and the writer's CPU
(``/proc/<pid>/stat``) are polled every 250 ms.

Figures, over the commits the writer recorded inside the window (``bench.lake_analysis.steady``): the MiB/s
committed (records times the producers' key+value bytes) against the MiB/s acknowledged, the MiB committed
per CPU second of the writer process, and the lag (offsets and seconds) over the window's polls: its mean,
largest and last. A commit reads at most the cap; a topic is due again a commit interval after its last
run began, or at once when the cap cut that run short, so the table follows at the writer's own pace
whatever the cap, and lags by about the interval when the writer keeps up.

The writer's memory: its RSS just before the load (``writer_base_rss_mib``: the process with pyarrow and
pyiceberg loaded and its table made) and its peak from then to the end of the load, read from the kernel's
VmHWM after resetting it at the load's start (``probes.reset_peak_rss``), so a peak between two samples
is not missed (the 50 ms samples' peak is the fallback where the reset is refused). Its bound is the write
buffer's: ``bench.targets.lake_writer_rss``.
"""

from __future__ import annotations

import argparse
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.harness import AgentSpec, MiB, log, start_agent, stop_proc
from bench.kafka_load import KafkaLoad, run_producers
from bench.lake_analysis import commits_seen, lag_summary, steady
from bench.lake_common import (
    StatusPoller,
    create_topic,
    lake_configs,
    start_writer,
    wait_for_commit,
    with_warmup,
)
from bench.probes import CpuWindow, RssSampler, reset_peak_rss, status_kib

TOPIC = "lake-raw"


def raw_phase(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    return {str(cap): _run(args, workdir, cap) for cap in args.raw_caps_mib}


def _run(args: argparse.Namespace, workdir: Path, cap_mib: int) -> dict[str, Any]:
    name = f"raw-cap{cap_mib}"
    buffer_mib = args.raw_buffer_mib
    log(
        f"[raw] {args.raw_rate_mib:g} MiB/s offered, commit interval {args.interval_ms} ms,"
        f" cap {cap_mib} MiB, write buffer {buffer_mib} MiB"
    )
    agent = start_agent(
        AgentSpec(["--role", "agent", "--log-level", "warning"], kafka_ports=1), workdir, name
    )
    writer = None
    try:
        assert agent.bootstrap is not None
        create_topic(agent.url, TOPIC, args.partitions, lake_configs(args.interval_ms))
        writer = start_writer(
            agent.data_dir, workdir, f"{name}-writer", TOPIC, cap_mib * MiB, buffer_mib * MiB
        )
        # The table made (an empty commit of the empty topic) before the load, so that the window sees
        # steady commits, not the writer's start.
        wait_for_commit(agent.url, TOPIC, 120)
        base_kib = status_kib("VmRSS", writer.pid)
        peak_reset = reset_peak_rss(writer.pid)
        window: dict[str, float] = {}
        cpu = CpuWindow({"writer": writer.pid, "agent": agent.pid})

        def start() -> None:
            window["start"] = time.time()
            cpu.mark_start()

        def end() -> None:
            window["end"] = time.time()
            cpu.mark_end()

        load = KafkaLoad("none", args.producers, args.raw_duration, rate_mib=args.raw_rate_mib)
        with StatusPoller(agent.url, TOPIC, writer.pid) as poller, RssSampler(writer.pid) as rss:
            produced = run_producers(
                with_warmup(args, args.raw_warmup), agent.bootstrap, TOPIC, load, start, end
            )
        peak_kib = status_kib("VmHWM", writer.pid) if peak_reset else rss.peak_kib
        if writer.popen.poll() is not None:
            raise RuntimeError(f"the lake writer exited with {writer.popen.returncode}:\n{writer.tail()}")
    finally:
        if writer is not None:
            stop_proc(writer, "raw")
        stop_proc(agent.proc, "raw")
    shutil.rmtree(agent.data_dir, ignore_errors=True)  # gigabytes of records; the figures are taken
    commits = commits_seen(poller.samples)
    measured = steady(commits, window["start"], window["end"])
    record_bytes = produced["record_bytes"] or 0
    return {
        "cap_mib": cap_mib,
        "interval_ms": args.interval_ms,
        "produced": produced,
        "window": window,
        "cpu_cores": cpu.cores(),
        "buffer_mib": buffer_mib,
        "writer_base_rss_mib": round(base_kib / 1024, 1),
        "writer_peak_rss_mib": round(max(peak_kib, rss.peak_kib) / 1024, 1),
        "commits_seen": len(commits),
        "steady": None if measured is None else asdict(measured),
        "committed_mib_s": None if measured is None else measured.mib_s(record_bytes),
        "mib_per_writer_cpu_s": None if measured is None else measured.mib_per_cpu_s(record_bytes),
        "lag": lag_summary(poller.samples, window["start"], window["end"]),
        "status_poll_errors": poller.errors,
    }
