"""Benchmark of Strata's Kafka door, with a bare asyncio Kafka sink (the ceiling) measured in the same run.

    .venv/bin/python bench/kafka_bench.py                       # everything, both backends (~5 min)
    .venv/bin/python bench/kafka_bench.py --backend local --compression none --phases ceiling,produce,latency
    .venv/bin/python bench/kafka_bench.py --phases overload --overload-procs 6
    .venv/bin/python bench/kafka_bench.py --http-compare        # + produce_fetch.py's HTTP produce, same run
    .venv/bin/python bench/kafka_bench.py --backend both --duration 2 --warmup 1 --idle 1 \\
        --overload-duration 2 --fetch-timeout 30               # smoke run (~2 min)

Load generators are librdkafka (confluent-kafka) processes, bench/kafka_loadgen.py, never in the process
they measure: ``--producers`` processes (default 2), 1 KiB values (words, so that lz4 compresses them about
2.4x) with 7-byte keys over ``--partitions`` partitions (default 32, murmur2 as Java's client), acks=all,
idempotence off. MiB/s counts the key + value bytes whose acknowledgement arrives inside the window.

Phases (``--phases``, default all):
1. ceiling: bench/kafka_sink.py, a bare asyncio Kafka server that decodes Produce as Strata does
   (``broker.codec.decode``, then ``storage.records.iter_batches(verify_crc=True)`` on every partition) and
   answers ApiVersions, Metadata and Produce at once with fake offsets; closed-loop producers, once per codec.
2. produce: ``strata serve --role agent --kafka-port P`` (--flush-interval-ms 250, --buffer-bytes 64 MiB),
   the same generator with the same parameters, once per codec (``--compression none,lz4``; one topic per
   codec). A codec the agent (or the sink) refuses is reported as that codec's error, and a codec the client
   did not really use is flagged: librdkafka enables lz4 only with brokers that advertise FindCoordinator,
   so until consumer groups land its "lz4" batches go out uncompressed. PUTs and flushes come from the
   agent's /metrics; CPU of the agent (and moto) from /proc/PID/stat over the window, so "agent CPU per
   MiB" is agent core-seconds / MiB acknowledged. librdkafka's statistics give the ProduceRequests sent,
   their mean size and the most awaiting an answer at once.
3. latency: the same agent, ``--rate-mib`` (default 20) offered at a fixed rate, linger.ms 5, uncompressed:
   p50/p99 of produce() -> acknowledgement (librdkafka's ``Message.latency()``) of every record produced in
   the window, however late its acknowledgement (up to the 30 s drain; records never acknowledged are
   counted). Then PUTs per flush over phases 2-3, and PUTs while idle for ``--idle`` seconds (target 0).
4. fetch: a fresh agent on the same bucket and metadata (cold cache) serves ``--consumers`` confluent-kafka
   Consumers (partitions assigned from offset 0, fetch.max.bytes 64 MiB) that read each codec topic back to
   its high watermark. MiB/s of key + value bytes, and GETs per MiB from /metrics.
5. overload: a fresh agent with ``--overload-buffer-bytes`` (64 MiB) and ``--overload-procs`` x
   ``--overload-instances`` producers with big batches (linger.ms 100, batch.size 1 MB, 64 MiB queue each);
   VmRSS sampled every 50 ms and VmHWM, against buffer + 150 MiB.
With ``--http-compare`` the run ends with ``bench/produce_fetch.py --backend local --phases produce`` (same
duration) for the HTTP path's agent CPU per MiB; otherwise the table points to docs/benchmarks.md's figure.

Backends (``--backend local|s3|both``): a local directory, or moto S3 in its own process
(bench/moto_server.py); SQLite metadata in both. Every process binds 127.0.0.1 and is stopped at the end
(SIGTERM, then SIGKILL); every phase is bounded in time. Agents run from this tree (``python -m strata.cli``
with PYTHONPATH set to it). Results: a table per backend on stdout, JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from produce_fetch import (
    BENCH_DIR,
    PYTHON,
    RESULTS_DIR,
    ROOT,
    START_TIMEOUT_S,
    CpuWindow,
    MiB,
    Moto,
    Proc,
    RssSampler,
    create_topics,
    delta_mean,
    flushes,
    free_port,
    free_port_range,
    gets,
    loadavg,
    log,
    machine_info,
    markdown_table,
    other_cores,
    percentile,
    proc_cpu_s,
    proc_mem_kib,
    puts,
    scrape,
    spawn,
    start_moto,
    wait_buffer_empty,
    wait_http,
)

# Targets from issue 8 section 7 (2-core machine, 250 ms flush interval).
TARGET_PRODUCE_MIB_S = 150.0  # uncompressed, local bucket
TARGET_CEILING_RATIO = 0.60
TARGET_P50_MS = 200.0
TARGET_P99_MS = 350.0
TARGET_FETCH_MIB_S = 200.0  # local bucket, cold cache
TARGET_GETS_PER_MIB = 0.25  # at most 1 GET per 4 MiB
TARGET_RSS_HEADROOM_MIB = 150.0
# The HTTP path's agent CPU per MiB produced, docs/benchmarks.md round 2 (3 runs, both backends).
HTTP_CPU_MS_PER_MIB_DOCS = "6.8-7.7 (docs/benchmarks.md, 2026-11-26)"
LOADGEN = BENCH_DIR / "kafka_loadgen.py"


def env_here() -> dict[str, str]:
    """Subprocesses import this tree's packages, whatever the venv's editable install points to."""
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


def wait_tcp(port: int, proc: Proc, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.tail()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{proc.name} does not accept connections on port {port} within {timeout} s")


@dataclass
class Agent:
    proc: Proc
    url: str
    bootstrap: str

    @property
    def pid(self) -> int:
        return self.proc.pid


def start_agent(
    args: argparse.Namespace,
    workdir: Path,
    name: str,
    store_args: list[str],
    buffer_bytes: int,
    data_name: str | None = None,
) -> Agent:
    """``strata serve --role agent`` with HTTP and Kafka on free ports; ``data_name`` reuses a data dir."""
    port, kafka_port = free_port(), free_port_range(8)  # room for up to 8 lanes (STRATA_KAFKA_LANES)
    data_dir = workdir / (data_name or name)
    data_dir.mkdir(exist_ok=True)
    cmd = [PYTHON, "-m", "strata.cli", "serve", "--data-dir", str(data_dir), "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--kafka-port", str(kafka_port), "--kafka-advertised-host", "127.0.0.1"]
    cmd += ["--num-partitions", str(args.partitions), "--role", "agent", "--log-level", "warning"]
    cmd += ["--flush-interval-ms", str(args.flush_interval_ms), "--buffer-bytes", str(buffer_bytes)]
    cmd += store_args
    proc = spawn(name, cmd, workdir / f"{name}.log", extra_env=env_here())
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/healthz", proc)
        wait_tcp(kafka_port, proc)
    except RuntimeError:
        proc.stop()
        raise
    return Agent(proc, url, f"127.0.0.1:{kafka_port}")


def stop_proc(proc: Proc, backend: str) -> None:
    rc = proc.stop()
    if rc not in (0, -signal.SIGTERM, None):  # uvicorn re-raises SIGTERM once it has shut down
        log(f"[{backend}] {proc.name} exited with {rc}:\n{proc.tail()}")


def topic_name(codec: str) -> str:
    return f"kbench-{codec}"


# --- load generator processes -----------------------------------------------------------------------------
def _wait_ready(popens: list[subprocess.Popen[bytes]], outs: list[Path]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not all(Path(str(o) + ".ready").exists() for o in outs):
        if time.monotonic() > deadline:
            raise RuntimeError("the Kafka load generator did not get ready in time")
        if any(p.poll() is not None for p in popens):
            # It may have written a fatal error (no broker, say) and exited before getting ready.
            for o in outs:
                if o.exists():
                    raise RuntimeError(f"load generator: {json.loads(o.read_text()).get('fatal', '?')}")
            raise RuntimeError("a Kafka load generator exited before getting ready")
        time.sleep(0.02)


def _collect(popens: list[subprocess.Popen[bytes]], outs: list[Path], limit_s: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + limit_s
    parts = []
    for p, o in zip(popens, outs, strict=True):
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise RuntimeError(f"a Kafka load generator did not finish within {limit_s:.0f} s") from None
        if p.returncode != 0 or not o.exists():
            raise RuntimeError(f"a Kafka load generator failed with {p.returncode}")
        part = json.loads(o.read_text())
        if "fatal" in part:
            raise RuntimeError(f"load generator: {part['fatal']}")
        parts.append(part)
    return parts


def run_producers(
    args: argparse.Namespace,
    bootstrap: str,
    topic: str,
    *,
    compression: str,
    procs: int,
    duration: float,
    rate_mib: float = 0.0,
    instances: int = 1,
    linger_ms: float | None = None,
    batch_bytes: int | None = None,
    queue_mib: int | None = None,
    drain_timeout: float = 30.0,
    on_window_start: Callable[[], None] | None = None,
    on_window_end: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """``procs`` bench/kafka_loadgen.py producer processes with one window; their results merged."""
    tmp = Path(tempfile.mkdtemp(prefix="strata-kloadgen-"))
    start_file = tmp / "start"
    outs = [tmp / f"{i}.json" for i in range(procs)]
    popens: list[subprocess.Popen[bytes]] = []
    try:
        for i, out in enumerate(outs):
            cmd = [PYTHON, str(LOADGEN), "produce", "--bootstrap", bootstrap, "--topic", topic]
            cmd += ["--compression", compression, "--instances", str(instances), "--seed", str(i + 1)]
            cmd += ["--value-bytes", str(args.value_bytes), "--value-kind", args.value_kind]
            cmd += ["--linger-ms", str(args.linger_ms if linger_ms is None else linger_ms)]
            cmd += ["--batch-bytes", str(args.batch_bytes if batch_bytes is None else batch_bytes)]
            cmd += ["--queue-mib", str(args.queue_mib if queue_mib is None else queue_mib)]
            cmd += ["--rate-mib", str(rate_mib / procs), "--duration", str(duration)]
            cmd += ["--drain-timeout", str(drain_timeout), "--start-file", str(start_file), "--out", str(out)]
            popens.append(subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env_here()}))
        _wait_ready(popens, outs)
        start_at = time.time() + args.warmup
        (tmp / "start.tmp").write_text(repr(start_at))
        (tmp / "start.tmp").rename(start_file)
        time.sleep(max(0.0, start_at - time.time()))
        if on_window_start is not None:
            on_window_start()
        time.sleep(max(0.0, start_at + duration - time.time()))
        if on_window_end is not None:
            on_window_end()
        parts = _collect(popens, outs, drain_timeout + 60)
    finally:
        for p in popens:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return merge_produce(parts, compression, duration, procs, instances)


def merge_produce(
    parts: list[dict[str, Any]], compression: str, duration: float, procs: int, instances: int
) -> dict[str, Any]:
    latencies = sorted(x for part in parts for x in part["latencies_ms"])
    errors: dict[str, int] = {}
    first_error: dict[str, str] = {}
    for part in parts:
        for k, v in part["errors"].items():
            errors[k] = errors.get(k, 0) + v
        for k, v in part["first_error"].items():
            first_error.setdefault(k, v)
    window_bytes = sum(p["window_bytes"] for p in parts)
    acked = sum(p["acked"] for p in parts)
    requests = sum(p["requests_sent"] for p in parts)
    request_bytes = sum(p["requests_sent"] * (p["request_bytes_mean"] or 0) for p in parts)
    result: dict[str, Any] = {
        "compression": compression,
        "record_bytes": parts[0]["record_bytes"] if parts else None,
        "producer_procs": procs,
        "producers_per_proc": instances,
        "rate_mib_offered": sum(p["rate_mib"] for p in parts),
        "window_s": duration,
        "mib_s": window_bytes / duration / MiB,
        "records_s": sum(p["window_acked"] for p in parts) / duration,
        "produced": sum(p["produced"] for p in parts),
        "acked": acked,
        "unfinished": sum(p["unfinished"] for p in parts),
        "sent_in_window": sum(p["sent_in_window"] for p in parts),
        "sent_in_window_acked": sum(p["sent_in_window_acked"] for p in parts),
        "requests_sent": requests,
        "request_bytes_mean": request_bytes / requests if requests else None,
        "max_requests_waiting_response": max((p["max_requests_waiting_response"] for p in parts), default=0),
        "latency_ms": {
            "sampled": parts[0]["latency_sampled"] if parts else None,
            "n": len(latencies),
            "p50": percentile(latencies, 0.50),
            "p90": percentile(latencies, 0.90),
            "p99": percentile(latencies, 0.99),
            "max": latencies[-1] if latencies else None,
        },
        "errors": errors,
        "first_error": first_error,
        "loadgen_cpu_cores": round(sum(p["cpu_s"] for p in parts) / duration, 2),
    }
    if errors and not acked:
        # Every delivery failed (a codec the agent refuses, say): say why, once, for the table.
        name, count = max(errors.items(), key=lambda kv: kv[1])
        result["error"] = f"{compression}: {count} deliveries failed with {name}: {first_error.get(name, '')}"
    return result


def run_consumers(args: argparse.Namespace, bootstrap: str, topic: str) -> dict[str, Any]:
    """``--consumers`` processes, partitions dealt round-robin, one start time; merged results."""
    procs = max(1, min(args.consumers, args.partitions))
    tmp = Path(tempfile.mkdtemp(prefix="strata-kconsume-"))
    start_file = tmp / "start"
    outs = [tmp / f"{i}.json" for i in range(procs)]
    popens: list[subprocess.Popen[bytes]] = []
    try:
        for i, out in enumerate(outs):
            mine = ",".join(str(p) for p in range(i, args.partitions, procs))
            cmd = [PYTHON, str(LOADGEN), "consume", "--bootstrap", bootstrap, "--topic", topic]
            cmd += ["--partitions", mine, "--fetch-max-bytes", str(args.fetch_max_bytes)]
            cmd += ["--partition-max-bytes", str(args.partition_max_bytes)]
            cmd += ["--timeout", str(args.fetch_timeout), "--start-file", str(start_file), "--out", str(out)]
            popens.append(subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env_here()}))
        _wait_ready(popens, outs)
        (tmp / "start.tmp").write_text(repr(time.time() + 0.2))
        (tmp / "start.tmp").rename(start_file)
        parts = _collect(popens, outs, args.fetch_timeout + 60)
    finally:
        for p in popens:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = max(p["elapsed_s"] for p in parts)
    payload = sum(p["payload_bytes"] for p in parts)
    errors: dict[str, int] = {}
    for part in parts:
        for k, v in part["errors"].items():
            errors[k] = errors.get(k, 0) + v
    return {
        "topic": topic,
        "consumer_procs": procs,
        "records": sum(p["records"] for p in parts),
        "expected_records": sum(p["expected_records"] for p in parts),
        "payload_bytes": payload,
        "elapsed_s": elapsed,
        "mib_s": payload / elapsed / MiB if elapsed else None,
        "unfinished_partitions": sorted(x for p in parts for x in p["unfinished_partitions"]),
        "errors": errors,
        "consumer_cpu_cores": round(sum(p["cpu_s"] for p in parts) / elapsed, 2) if elapsed else None,
    }


# --- phases -----------------------------------------------------------------------------------------------
def ceiling_phase(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The sink, driven by the produce phase's generator and parameters, once per codec."""
    port = free_port()
    cmd = [
        PYTHON,
        str(BENCH_DIR / "kafka_sink.py"),
        "--port",
        str(port),
        "--partitions",
        str(args.partitions),
    ]
    sink = spawn("sink", cmd, workdir / "sink.log", extra_env=env_here())
    out: dict[str, Any] = {}
    try:
        wait_tcp(port, sink)
        for codec in args.compression:
            log(f"[ceiling] kafka sink, {args.producers} producer processes, {codec}")
            cpu = CpuWindow({"server": sink.pid})
            try:
                r = run_producers(
                    args,
                    f"127.0.0.1:{port}",
                    topic_name(codec),
                    compression=codec,
                    procs=args.producers,
                    duration=args.duration,
                    on_window_start=cpu.mark_start,
                    on_window_end=cpu.mark_end,
                )
                r["cpu_cores"] = cpu.cores()
            except RuntimeError as exc:
                r = {"compression": codec, "error": str(exc)}
            out[codec] = r
    finally:
        sink.stop()
        for line in reversed(sink.log_path.read_text(errors="replace").splitlines()):
            if line.startswith('{"sink_totals"'):
                out["sink_totals"] = json.loads(line)["sink_totals"]
                break
    return out


def produce_phase(
    args: argparse.Namespace, agent: Agent, codec: str, extra_pids: dict[str, int]
) -> dict[str, Any]:
    marks: dict[str, dict[str, float]] = {"before": scrape(agent.url)}
    cpu = CpuWindow({"agent": agent.pid, **extra_pids})

    def window_start() -> None:
        marks["start"] = scrape(agent.url)
        cpu.mark_start()

    def window_end() -> None:
        cpu.mark_end()
        marks["end"] = scrape(agent.url)

    result = run_producers(
        args,
        agent.bootstrap,
        topic_name(codec),
        compression=codec,
        procs=args.producers,
        duration=args.duration,
        on_window_start=window_start,
        on_window_end=window_end,
    )
    wait_buffer_empty(agent.url)
    marks["after"] = scrape(agent.url)
    result.update(flush_figures(marks["before"], marks["after"]))
    result["puts_s"] = (puts(marks["end"]) - puts(marks["start"])) / args.duration
    result["cpu_cores"] = cpu.cores()
    result["loadavg_after"] = loadavg()
    return result


def flush_figures(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    nflush = flushes(after) - flushes(before)
    nput = puts(after) - puts(before)
    stored = after.get("strata_flush_bytes_total", 0.0) - before.get("strata_flush_bytes_total", 0.0)
    return {
        "flushes": nflush,
        "puts": nput,
        "puts_per_flush": nput / nflush if nflush else None,
        "mib_per_flush": stored / nflush / MiB if nflush else None,
        "stored_mib": stored / MiB,
        "flush_seconds_mean": delta_mean(before, after, "strata_flush_seconds"),
        "flush_failures": after.get("strata_flush_failures_total", 0.0)
        - before.get("strata_flush_failures_total", 0.0),
    }


def latency_phase(args: argparse.Namespace, agent: Agent, extra_pids: dict[str, int]) -> dict[str, Any]:
    before = scrape(agent.url)
    cpu = CpuWindow({"agent": agent.pid, **extra_pids})
    result = run_producers(
        args,
        agent.bootstrap,
        topic_name("none"),
        compression="none",
        procs=args.producers,
        duration=args.latency_duration or args.duration,
        rate_mib=args.rate_mib,
        linger_ms=args.latency_linger_ms,
        on_window_start=cpu.mark_start,
        on_window_end=cpu.mark_end,
    )
    wait_buffer_empty(agent.url)
    result.update(flush_figures(before, scrape(agent.url)))
    result["cpu_cores"] = cpu.cores()
    result["linger_ms"] = args.latency_linger_ms
    return result


def fetch_phase(
    args: argparse.Namespace, agent: Agent, topics: list[str], extra_pids: dict[str, int]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for topic in topics:
        log(f"[{args.backend_now}] fetch catch-up over Kafka: {topic}, {args.consumers} consumer processes")
        before = scrape(agent.url)
        cpu = CpuWindow({"agent": agent.pid, **extra_pids})
        cpu.mark_start()
        r = run_consumers(args, agent.bootstrap, topic)
        cpu.mark_end()
        after = scrape(agent.url)
        r["gets"] = gets(after) - gets(before)
        r["store_read_mib"] = (
            after.get("strata_object_store_read_bytes_total", 0.0)
            - before.get("strata_object_store_read_bytes_total", 0.0)
        ) / MiB
        payload_mib = r["payload_bytes"] / MiB
        r["gets_per_mib"] = r["gets"] / payload_mib if payload_mib else None
        r["cpu_cores"] = cpu.cores()
        out[topic] = r
    return out


def overload_phase(args: argparse.Namespace, workdir: Path, store_args: list[str]) -> dict[str, Any]:
    agent = start_agent(args, workdir, "agent-overload", store_args, args.overload_buffer_bytes)
    try:
        create_topics(agent.url, [topic_name("none")], args.partitions)
        baseline = proc_mem_kib(agent.pid)
        max_buffer = 0.0
        stop = threading.Event()

        def watch_buffer() -> None:
            nonlocal max_buffer
            while not stop.is_set():
                with contextlib.suppress(httpx.HTTPError):
                    max_buffer = max(max_buffer, scrape(agent.url).get("strata_buffer_bytes", 0.0))
                stop.wait(0.25)

        before = scrape(agent.url)
        cpu = CpuWindow({"agent": agent.pid})
        watcher = threading.Thread(target=watch_buffer, daemon=True)
        with RssSampler(agent.pid, 0.05) as sampler:
            watcher.start()
            try:
                result = run_producers(
                    args,
                    agent.bootstrap,
                    topic_name("none"),
                    compression="none",
                    procs=args.overload_procs,
                    instances=args.overload_instances,
                    duration=args.overload_duration,
                    linger_ms=args.overload_linger_ms,
                    batch_bytes=args.overload_batch_bytes,
                    queue_mib=args.overload_queue_mib,
                    drain_timeout=5.0,  # what is still queued in the clients is not the point here
                    on_window_start=cpu.mark_start,
                    on_window_end=cpu.mark_end,
                )
            finally:
                stop.set()
                watcher.join()
        mem = proc_mem_kib(agent.pid)
        result.update(flush_figures(before, scrape(agent.url)))
        result.pop("latency_ms", None)
        result.update(
            {
                "buffer_bytes_limit_mib": args.overload_buffer_bytes / MiB,
                "baseline_rss_mib": baseline.get("VmRSS", 0) / 1024,
                "peak_rss_sampled_mib": sampler.peak_kib / 1024,
                "rss_samples": sampler.samples,
                "vmhwm_mib": mem.get("VmHWM", 0) / 1024,
                "rss_limit_mib": args.overload_buffer_bytes / MiB + TARGET_RSS_HEADROOM_MIB,
                "max_buffer_bytes_mib": max_buffer / MiB,
                "cpu_cores": cpu.cores(),
                "loadavg_after": loadavg(),
            }
        )
        return result
    finally:
        stop_proc(agent.proc, args.backend_now)


def produce_and_fetch(
    args: argparse.Namespace,
    workdir: Path,
    store_args: list[str],
    extra_pids: dict[str, int],
    out: dict[str, Any],
) -> None:
    backend = args.backend_now
    agent = start_agent(args, workdir, "agent", store_args, args.buffer_bytes)
    written: list[str] = []
    try:
        for codec in args.compression:
            create_topics(agent.url, [topic_name(codec)], args.partitions)
        out["agent_baseline_rss_mib"] = proc_mem_kib(agent.pid).get("VmRSS", 0) / 1024
        first = scrape(agent.url)
        with RssSampler(agent.pid, 0.1) as sampler:
            if "produce" in args.phases:
                out["produce"] = {}
                for codec in args.compression:
                    log(f"[{backend}] produce over Kafka: {args.producers} producer processes, {codec}")
                    try:
                        r = produce_phase(args, agent, codec, extra_pids)
                    except RuntimeError as exc:
                        r = {"compression": codec, "error": str(exc)}
                    out["produce"][codec] = r
                    if r.get("acked"):
                        written.append(topic_name(codec))
            if "latency" in args.phases:
                linger = args.latency_linger_ms
                log(f"[{backend}] ack latency at {args.rate_mib:g} MiB/s offered, linger.ms {linger:g}")
                out["latency"] = latency_phase(args, agent, extra_pids)
                if out["latency"].get("acked") and topic_name("none") not in written:
                    written.append(topic_name("none"))
        out["agent_peak_rss_mib"] = sampler.peak_kib / 1024
        last = scrape(agent.url)
        out["puts"] = flush_figures(first, last)
        time.sleep(args.idle)
        idle = scrape(agent.url)
        out["puts"].update(
            {
                "idle_s": args.idle,
                "idle_puts": puts(idle) - puts(last),
                "idle_flushes": flushes(idle) - flushes(last),
            }
        )
    finally:
        out["agent_cpu_total_s"] = proc_cpu_s(agent.pid)
        stop_proc(agent.proc, backend)
    if "fetch" in args.phases and not written:
        log(f"[{backend}] fetch skipped: no topic got records (fetch needs the produce or latency phase)")
    if "fetch" in args.phases and written:
        # Catch-up reads history: a fresh agent on the same bucket and metadata, so its cache is cold and
        # every byte comes from the object store.
        agent = start_agent(args, workdir, "agent-fetch", store_args, args.buffer_bytes, "agent")
        try:
            out["fetch"] = fetch_phase(args, agent, written, extra_pids)
        finally:
            stop_proc(agent.proc, backend)


def run_backend(args: argparse.Namespace, backend: str, workdir: Path) -> dict[str, Any]:
    args.backend_now = backend
    moto: Moto | None = None
    store_args: list[str] = []
    overload_store_args: list[str] = []
    extra_pids: dict[str, int] = {}
    out: dict[str, Any] = {"backend": backend, "loadavg_before": loadavg()}
    try:
        if backend == "s3":
            moto = start_moto(["strata-kbench", "strata-kbench-overload"], workdir)
            extra_pids["moto"] = moto.proc.pid
            common = ["--s3-endpoint", moto.endpoint, "--s3-region", "us-east-1"]
            store_args = ["--bucket", "s3://strata-kbench", *common]
            overload_store_args = ["--bucket", "s3://strata-kbench-overload", *common]
        if {"produce", "latency", "fetch"} & set(args.phases):
            produce_and_fetch(args, workdir, store_args, extra_pids, out)
        if "overload" in args.phases:
            n = args.overload_procs * args.overload_instances
            log(f"[{backend}] overload: {n} producers, batch.size {args.overload_batch_bytes}")
            out["overload"] = overload_phase(args, workdir, overload_store_args)
    finally:
        if moto is not None:
            moto.stop()
    return out


def http_compare(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """bench/produce_fetch.py's HTTP produce on the local bucket, same duration: its agent CPU per MiB."""
    out_path = workdir / "http.json"
    cmd = [PYTHON, str(BENCH_DIR / "produce_fetch.py"), "--backend", "local", "--phases", "produce"]
    cmd += ["--duration", str(args.duration), "--warmup", str(args.warmup), "--idle", str(args.idle)]
    cmd += ["--out", str(out_path)]
    limit = 4 * (args.duration + args.warmup) + 300
    log_path = workdir / "http.log"
    with log_path.open("wb") as log_file:
        done = subprocess.run(
            cmd, cwd=ROOT, env={**os.environ, **env_here()}, timeout=limit, stdout=log_file, stderr=log_file
        )
    if done.returncode != 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-1:]
        return {"error": f"produce_fetch.py exited with {done.returncode}: {' '.join(tail)}"}
    r = json.loads(out_path.read_text())["backends"]["local"]
    if "produce" not in r:
        return {"error": r.get("error", "no produce figures")}
    p = r["produce"]
    if not p["mib_s"]:
        return {
            "error": f"no HTTP produce acknowledged in the {args.duration:g} s window (status {p['status']})"
        }
    return {
        "mib_s": p["mib_s"],
        "agent_cores": p["cpu_cores"].get("agent"),
        "agent_cpu_ms_per_mib": cpu_ms_per_mib(p["cpu_cores"].get("agent"), p["mib_s"]),
    }


# --- report -----------------------------------------------------------------------------------------------
def cpu_ms_per_mib(cores: float | None, mib_s: float | None) -> float | None:
    """CPU milliseconds a process spent per MiB acknowledged: robust to a busy machine, unlike MiB/s."""
    if not cores or not mib_s:
        return None
    return round(1000 * cores / mib_s, 1)


def wire(p: dict[str, Any]) -> str:
    """librdkafka's view of the wire: requests sent; their mean KiB; the most awaiting an answer at once."""
    mean = p.get("request_bytes_mean")
    kib = f"{mean / 1024:.1f}" if mean else "-"
    return f"{p.get('requests_sent', 0)}; {kib}; {p.get('max_requests_waiting_response', 0)}"


def evaluate(
    r: dict[str, Any],
    ceiling: dict[str, Any],
    sink_totals: dict[str, int] | None,
    http: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """Every figure with its target and pass/miss (None: no target here, shown for the analysis)."""
    rows: list[dict[str, Any]] = []
    local = r["backend"] == "local"

    def row(name: str, value: Any, target: str = "-", ok: bool | None = None, unit: str = "") -> None:
        rows.append({"metric": name, "value": value, "unit": unit, "target": target, "pass": ok})

    for codec, c in ceiling.items():
        if "error" in c:
            row(f"sink ceiling, {codec}", c["error"])
            continue
        row(f"sink ceiling, {codec}", round(c["mib_s"], 1), unit="MiB/s")
        row(f"sink CPU per MiB, {codec}", cpu_ms_per_mib(c["cpu_cores"].get("server"), c["mib_s"]), unit="ms")
        row(f"sink requests: sent; mean KiB; most awaiting an answer, {codec}", wire(c))
        prefix = topic_name(codec) + " codec "
        by_codec = {k.removeprefix(prefix): v for k, v in (sink_totals or {}).items() if k.startswith(prefix)}
        if codec != "none" and by_codec and set(by_codec) == {"0"}:
            row(f"sink got {codec} batches", "no: every batch was uncompressed", ok=False)
    for codec, p in r.get("produce", {}).items():
        if "error" in p:
            row(f"produce, {codec}", p["error"], ok=False)
            continue
        target = local and codec == "none"
        ok = p["mib_s"] >= TARGET_PRODUCE_MIB_S if target else None
        row(f"produce, {codec}", round(p["mib_s"], 1), ">= 150" if target else "-", ok, "MiB/s")
        c = ceiling.get(codec, {})
        if c.get("mib_s"):
            ratio = p["mib_s"] / c["mib_s"]
            row(
                f"produce / sink ceiling, {codec}",
                round(100 * ratio, 1),
                ">= 60",
                ratio >= TARGET_CEILING_RATIO,
                "%",
            )
        agent_ms = cpu_ms_per_mib(p["cpu_cores"].get("agent"), p["mib_s"])
        row(f"agent CPU per MiB produced, {codec}", agent_ms, unit="ms")
        row(
            f"agent / producers CPU, {codec}",
            f"{p['cpu_cores'].get('agent')} / {p['loadgen_cpu_cores']}",
            unit="cores",
        )
        row(f"other load during produce, {codec}", other_cores(p), unit="cores")
        row(f"requests: sent; mean KiB; most awaiting an answer, {codec}", wire(p))
        lat = p["latency_ms"]
        if lat["p50"] is not None:
            row(
                f"ack latency p50 / p99 under closed loop, {codec}",
                f"{lat['p50']:.0f} / {lat['p99']:.0f}",
                unit="ms",
            )
        if p["errors"]:
            row(f"failed deliveries, {codec}", p["errors"], "0", False)
        if p.get("stored_mib") and p["acked"]:
            stored = p["stored_mib"] * MiB / (p["acked"] * p["record_bytes"])
            row(f"bytes stored / key+value bytes acked, {codec}", round(stored, 2))
            if codec != "none" and stored > 0.9:
                # librdkafka enables lz4 only with brokers that advertise FindCoordinator ("LZ4" feature).
                row(
                    f"{codec} really used",
                    f"no: the client sent uncompressed batches ({stored:.2f})",
                    ok=False,
                )
    if http is not None:
        if "error" in http:
            row("HTTP path agent CPU per MiB (same run, local)", http["error"])
        else:
            row("HTTP path agent CPU per MiB (same run, local)", http["agent_cpu_ms_per_mib"], unit="ms")
    elif r.get("produce"):
        row("HTTP path agent CPU per MiB", HTTP_CPU_MS_PER_MIB_DOCS, unit="ms")
    lat = r.get("latency")
    if lat is not None:
        rate = f"{lat.get('rate_mib_offered', 0):g} MiB/s"
        if lat.get("error") or lat["latency_ms"]["p50"] is None:
            row(f"ack latency at {rate}", lat.get("error", "no acknowledgement"), ok=False)
        else:
            p50, p99 = lat["latency_ms"]["p50"], lat["latency_ms"]["p99"]
            row(f"ack latency p50 at {rate}", round(p50, 1), "<= 200", p50 <= TARGET_P50_MS, "ms")
            row(f"ack latency p99 at {rate}", round(p99, 1), "<= 350", p99 <= TARGET_P99_MS, "ms")
            row("latency phase acknowledged", round(lat["mib_s"], 1), unit="MiB/s")
            missing = lat["unfinished"] + sum(lat["errors"].values())
            row("latency phase: records never acknowledged", missing, "= 0", missing == 0)
            row("latency phase requests: sent; mean KiB; most awaiting an answer", wire(lat))
    pf = r.get("puts")
    if pf is not None:
        ppf = pf["puts_per_flush"]
        row(
            "PUTs per flush (produce + latency)",
            round(ppf, 3) if ppf is not None else None,
            "= 1",
            ppf == 1.0,
        )
        row("flushes; MiB per flush", f"{pf['flushes']:g}; {round(pf['mib_per_flush'] or 0, 2)}")
        row(f"PUTs while idle ({pf['idle_s']:g} s)", pf["idle_puts"], "= 0", pf["idle_puts"] == 0)
    for topic, f in r.get("fetch", {}).items():
        complete = f["records"] == f["expected_records"] and not f["unfinished_partitions"]
        mib_s = f["mib_s"] or 0.0
        if local and topic == topic_name("none"):
            row(
                f"fetch catch-up, cold, {topic}",
                round(mib_s, 1),
                ">= 200",
                mib_s >= TARGET_FETCH_MIB_S,
                "MiB/s",
            )
        else:
            row(f"fetch catch-up, cold, {topic}", round(mib_s, 1), unit="MiB/s")
        row(
            f"fetch records read / expected, {topic}",
            f"{f['records']} / {f['expected_records']}",
            "equal",
            complete,
        )
        gpm = f["gets_per_mib"]
        ok = gpm is not None and gpm <= TARGET_GETS_PER_MIB
        row(f"fetch GETs per MiB read, {topic}", round(gpm, 3) if gpm is not None else None, "<= 0.25", ok)
        row(
            f"agent CPU per MiB fetched, {topic}",
            cpu_ms_per_mib(f["cpu_cores"].get("agent"), mib_s),
            unit="ms",
        )
        if f["errors"]:
            row(f"consumer errors, {topic}", f["errors"], "none", False)
    o = r.get("overload")
    if o is not None:
        peak = max(o["peak_rss_sampled_mib"], o["vmhwm_mib"])
        limit = o["rss_limit_mib"]
        row("agent peak RSS under overload", round(peak, 1), f"<= {limit:g}", peak <= limit, "MiB")
        row("max strata_buffer_bytes seen", round(o["max_buffer_bytes_mib"], 1), unit="MiB")
        row("overload acknowledged", round(o["mib_s"], 1), unit="MiB/s")
        row("overload requests: sent; mean KiB; most awaiting an answer", wire(o))
    return rows


def fingerprint() -> str:
    """sha256 of the application sources (the Kafka door included), to tie figures to a state of the tree."""
    digest = hashlib.sha256()
    for package in ("agents", "api", "broker", "storage", "planner"):
        for path in sorted((ROOT / package).rglob("*.py")):
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


PHASES = ("ceiling", "produce", "latency", "fetch", "overload")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("local", "s3", "both"), default="both")
    parser.add_argument("--phases", default=",".join(PHASES), help=", ".join(PHASES))
    parser.add_argument(
        "--compression", default="none,lz4", help="codecs, comma-separated (librdkafka names)"
    )
    parser.add_argument("--producers", type=int, default=2, help="producer processes")
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--value-kind", choices=("text", "random"), default="text")
    parser.add_argument("--linger-ms", type=float, default=5.0, help="throughput phases")
    parser.add_argument("--batch-bytes", type=int, default=1_000_000, help="librdkafka batch.size")
    parser.add_argument("--queue-mib", type=int, default=64, help="librdkafka queue bound per producer")
    parser.add_argument("--duration", type=float, default=10.0, help="measured window of each produce run, s")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--idle", type=float, default=3.0, help="idle window for the 0-PUT check")
    parser.add_argument("--rate-mib", type=float, default=20.0, help="latency phase: offered MiB/s (total)")
    parser.add_argument("--latency-linger-ms", type=float, default=5.0)
    parser.add_argument("--latency-duration", type=float, default=None, help="default: --duration")
    parser.add_argument("--flush-interval-ms", type=int, default=250)
    parser.add_argument("--buffer-bytes", type=int, default=64 * MiB)
    parser.add_argument("--consumers", type=int, default=2, help="consumer processes for the catch-up")
    parser.add_argument("--fetch-max-bytes", type=int, default=64 * MiB)
    parser.add_argument("--partition-max-bytes", type=int, default=8 * MiB)
    parser.add_argument("--fetch-timeout", type=float, default=60.0)
    parser.add_argument("--overload-procs", type=int, default=4)
    parser.add_argument("--overload-instances", type=int, default=2, help="producers per overload process")
    parser.add_argument("--overload-linger-ms", type=float, default=100.0)
    parser.add_argument("--overload-batch-bytes", type=int, default=1_000_000)
    parser.add_argument("--overload-queue-mib", type=int, default=64)
    parser.add_argument("--overload-duration", type=float, default=8.0)
    parser.add_argument("--overload-buffer-bytes", type=int, default=64 * MiB)
    parser.add_argument(
        "--http-compare", action="store_true", help="also run produce_fetch.py's HTTP produce"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, data)")
    parser.add_argument(
        "--out", default=None, help="JSON results file (default bench/results/kafka-<time>.json)"
    )
    args = parser.parse_args(argv)
    args.run_id = time.strftime("%Y%m%d-%H%M%S")
    args.phases = [p for p in PHASES if p in set(args.phases.split(","))]
    if not args.phases or set(args.phases) != set(args.phases) & set(PHASES):
        parser.error(f"--phases takes some of {', '.join(PHASES)}")
    args.compression = [c for c in args.compression.split(",") if c]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    RESULTS_DIR.mkdir(exist_ok=True)
    backends = ["local", "s3"] if args.backend == "both" else [args.backend]
    workdir = Path(tempfile.mkdtemp(prefix="strata-kbench-"))
    started = time.monotonic()
    report: dict[str, Any] = {
        "run_id": args.run_id,
        "command": " ".join([".venv/bin/python", "bench/kafka_bench.py", *(argv or sys.argv[1:])]),
        "machine": machine_info(),
        "code_sha256": fingerprint(),
        "params": {k: v for k, v in vars(args).items() if k not in ("run_id", "backend_now")},
        "ceiling": {},
        "backends": {},
        "http": None,
    }
    try:
        if "ceiling" in args.phases:
            try:
                report["ceiling"] = ceiling_phase(args, workdir)
            except (RuntimeError, OSError) as exc:
                log(f"[ceiling] failed: {exc}")
                report["ceiling"] = {"error": str(exc)}
        for backend in backends:
            backend_dir = workdir / backend
            backend_dir.mkdir()
            try:
                report["backends"][backend] = run_backend(args, backend, backend_dir)
            except (RuntimeError, OSError, httpx.HTTPError, subprocess.SubprocessError) as exc:
                log(f"[{backend}] failed: {exc}")
                report["backends"][backend] = {"backend": backend, "error": str(exc)}
        if args.http_compare:
            log("[http] bench/produce_fetch.py --backend local --phases produce")
            try:
                report["http"] = http_compare(args, workdir)
            except (OSError, KeyError, subprocess.SubprocessError) as exc:
                report["http"] = {"error": str(exc)}
    finally:
        if args.keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    ceiling = {k: v for k, v in report["ceiling"].items() if isinstance(v, dict) and k != "sink_totals"}
    for r in report["backends"].values():
        if "error" not in r:
            r["targets"] = evaluate(r, ceiling, report["ceiling"].get("sink_totals"), report["http"])
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    out = Path(args.out) if args.out else RESULTS_DIR / f"kafka-{args.run_id}.json"
    out.write_text(json.dumps(report, indent=2))
    if "error" in report["ceiling"]:
        print(f"\nceiling failed: {report['ceiling']['error']}")
    for backend, r in report["backends"].items():
        print(f"\n### {backend}\n")
        print(markdown_table(r) if "targets" in r else f"failed: {r.get('error')}")
        for codec, p in r.get("produce", {}).items():
            if "cpu_cores" in p and other_cores(p) > 1.0:
                busy = other_cores(p)
                cores = os.cpu_count()
                print(f"\nWARNING: other processes used {busy} of {cores} cores producing {codec}; rerun")
    took = report["elapsed_s"]
    print(f"\nload average at start {report['machine']['loadavg_at_start']}; took {took} s; {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
