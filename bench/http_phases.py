"""The phases of bench.produce_fetch on one backend: ceiling, produce, idle, fetch catch-up, overload.

Each phase starts what it measures (an agent, the bare FastAPI app) and stops it, reads the agent's
metrics before and after its window, and the CPU, page faults and RSS of the processes from /proc.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import metrics, targets
from bench.harness import (
    RESULTS_DIR,
    STOP_TIMEOUT_S,
    Agent,
    AgentSpec,
    MiB,
    backend_stores,
    free_port,
    log,
    module_cmd,
    spawn,
    start_agent,
    stop_proc,
    wait_http,
)
from bench.http_load import ProduceLoad, run_fetch_load, run_produce_load
from bench.probes import CpuWindow, RssSampler, loadavg, proc_cpu_s, proc_mem_kib


def load_of(
    args: argparse.Namespace, clients: int, records: int, duration: float, think: float
) -> ProduceLoad:
    return ProduceLoad(
        clients=clients,
        records_per_request=records,
        value_bytes=args.value_bytes,
        procs=args.loadgen_procs,
        client=args.loadgen_client,
        warmup=args.warmup,
        duration=duration,
        think_ms=think,
    )


@contextlib.contextmanager
def py_spy(args: argparse.Namespace, pid: int, name: str, seconds: float) -> Iterator[None]:
    """Record a py-spy profile of ``pid`` while the block runs, if --py-spy was given.

    Collapsed stacks (``--format raw``) of the thread holding the GIL only (``--gil``): for a one-event-loop
    server that is where its core goes. Summarise with ``python -m bench.pyspy_top``.
    """
    if not args.py_spy:
        yield
        return
    out = RESULTS_DIR / f"{args.run_id}-{name}.folded"
    cmd = [args.py_spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "100", "--gil"]
    cmd += ["-o", str(out), "--duration", str(max(1, int(seconds)))]
    spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        if spy.poll() is None:
            spy.send_signal(signal.SIGINT)  # py-spy writes what it has recorded and exits
        try:
            spy.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait()


def http_agent(
    args: argparse.Namespace,
    workdir: Path,
    name: str,
    store: list[str],
    buffer_bytes: int,
    data: str | None = None,
) -> Agent:
    """``strata serve`` without a Kafka listener, or under --gc-stats / --mem-trace's wrapper."""
    serve = ["--flush-interval-ms", str(args.flush_interval_ms), "--buffer-bytes", str(buffer_bytes)]
    serve += ["--role", args.role, "--log-level", "warning", *store]
    spec = AgentSpec(serve)
    if args.gc_stats:
        spec.module = "bench.agent_gcstats"
        spec.env["STRATA_BENCH_GC_STATS"] = str(workdir / f"{name}.gc.json")
    elif args.mem_trace:
        spec.module = "bench.agent_memtrace"
        spec.env["STRATA_BENCH_MEMTRACE"] = str(
            RESULTS_DIR / f"{args.run_id}-{args.backend_now}-{name}.mem.json"
        )
    return start_agent(spec, workdir, name, data)


def stop_agent(agent: Agent, backend: str) -> dict[str, Any] | None:
    """Stop the agent; with --gc-stats, return its garbage-collector totals."""
    stop_proc(agent.proc, backend)
    gc_path = agent.proc.log_path.with_suffix(".gc.json")
    if gc_path.exists():
        return dict(json.loads(gc_path.read_text()))
    return None


def bare_phase(args: argparse.Namespace, workdir: Path, topics: list[str], records: int) -> dict[str, Any]:
    """The bare FastAPI app (``bench.bare_app``) under the produce load: the HTTP stack's ceiling."""
    port = free_port()
    cmd = module_cmd("uvicorn", "bench.bare_app:app", "--host", "127.0.0.1", "--port", str(port))
    cmd += ["--loop", "uvloop", "--http", "httptools", "--log-level", "warning", "--no-access-log"]
    cmd += ["--lifespan", "on"]
    proc = spawn("bare", cmd, workdir / "bare.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/healthz", proc)
        cpu = CpuWindow({"server": proc.pid})
        load = load_of(args, args.clients, records, args.duration, args.think_ms)
        result = run_produce_load(url, topics, load, cpu.mark_start, cpu.mark_end)
        result["cpu_cores"] = cpu.cores()
        result["minor_faults"] = cpu.faults()
        result["loadavg_after"] = loadavg()
        return result
    finally:
        proc.stop()


def produce_phase(
    args: argparse.Namespace, agent: Agent, topics: list[str], extra_pids: dict[str, int]
) -> dict[str, Any]:
    """The produce load against the agent, then ``--idle`` seconds without requests (PUTs counted)."""
    url = agent.url
    marks: dict[str, metrics.Scrape] = {"before": metrics.scrape(url)}
    cpu = CpuWindow({"agent": agent.pid, **extra_pids})

    def window_start() -> None:
        marks["start"] = metrics.scrape(url)
        cpu.mark_start()

    def window_end() -> None:
        cpu.mark_end()
        marks["end"] = metrics.scrape(url)

    load = load_of(args, args.clients, args.records_per_request, args.duration, args.think_ms)
    with py_spy(args, agent.pid, f"{args.backend_now}-produce", args.warmup + args.duration + 60):
        result = run_produce_load(url, topics, load, window_start, window_end)
    metrics.wait_buffer_empty(url)
    marks["after"] = metrics.scrape(url)
    result.update(metrics.flush_figures(marks["before"], marks["after"]))
    window = args.duration
    result["puts_s"] = (metrics.puts(marks["end"]) - metrics.puts(marks["start"])) / window
    result["flushes_s"] = (metrics.flushes(marks["end"]) - metrics.flushes(marks["start"])) / window
    mean = metrics.delta_mean(marks["start"], marks["end"], "strata_produce_latency_seconds")
    result["server_latency_ms_mean"] = 1000 * (mean or 0.0)
    result.update({"cpu_cores": cpu.cores(), "minor_faults": cpu.faults(), "loadavg_after": loadavg()})
    # 0 PUTs while idle: nothing is buffered now; count PUTs and flushes over args.idle seconds.
    time.sleep(args.idle)
    idle = metrics.scrape(url)
    result["idle_s"] = args.idle
    result["idle_puts"] = metrics.puts(idle) - metrics.puts(marks["after"])
    result["idle_flushes"] = metrics.flushes(idle) - metrics.flushes(marks["after"])
    return result


def throughput_phase(
    args: argparse.Namespace, agent: Agent, topics: list[str], extra_pids: dict[str, int]
) -> dict[str, Any]:
    """Closed-loop produce with enough bytes in flight that the flush interval is not the limit.

    At the standard load (128 clients x 100 records of 1 KiB, 12.5 MiB in flight) Little's law caps
    throughput near 12.5 MiB / the latency; --throughput-records-per-request raises what is in flight, and
    the same load runs against the bare FastAPI app for the ceiling. Admission refuses part of such a load
    once 4x a body being parsed exceeds the buffer (from about 150 records per request of 1 KiB with a
    64 MiB buffer), so this load is off by default.
    """
    cpu = CpuWindow({"agent": agent.pid, **extra_pids})
    load = load_of(args, args.clients, args.throughput_records_per_request, args.duration, 0.0)
    result = run_produce_load(agent.url, topics, load, cpu.mark_start, cpu.mark_end)
    result["cpu_cores"] = cpu.cores()
    return result


def fetch_phase(
    args: argparse.Namespace, agent: Agent, topics: list[str], extra_pids: dict[str, int]
) -> dict[str, Any]:
    """Every partition read back from offset 0 by ``bench.loadgen fetch``."""
    before = metrics.scrape(agent.url)
    cpu = CpuWindow({"agent": agent.pid, **extra_pids})
    cpu.mark_start()
    with py_spy(args, agent.pid, f"{args.backend_now}-fetch", args.fetch_timeout + 60):
        result = run_fetch_load(
            agent.url,
            topics,
            concurrency=args.fetch_concurrency,
            max_bytes=args.fetch_max_bytes,
            timeout=args.fetch_timeout,
        )
        cpu.mark_end()
    after = metrics.scrape(agent.url)
    result["mib_s"] = result["payload_bytes"] / result["elapsed_s"] / MiB if result["elapsed_s"] else None
    result["gets"] = metrics.gets(after) - metrics.gets(before)
    result["store_read_mib"] = metrics.delta(before, after, "strata_object_store_read_bytes_total") / MiB
    result.update({"cpu_cores": cpu.cores(), "minor_faults": cpu.faults(), "loadavg_after": loadavg()})
    return dict(result)


def overload_phase(
    args: argparse.Namespace, workdir: Path, topics: list[str], store_args: list[str]
) -> dict[str, Any]:
    """A fresh agent hammered by many clients with ~1 MiB requests: its RSS against its bound."""
    agent = http_agent(args, workdir, "agent-overload", store_args, args.overload_buffer_bytes)
    try:
        metrics.create_topics(agent.url, topics, args.partitions)
        baseline = proc_mem_kib(agent.pid)
        before = metrics.scrape(agent.url)
        cpu = CpuWindow({"agent": agent.pid})
        load = load_of(
            args, args.overload_clients, args.overload_records_per_request, args.overload_duration, 0.0
        )
        with RssSampler(agent.pid) as sampler, metrics.BufferWatcher(agent.url) as watcher:
            result = run_produce_load(agent.url, topics, load, cpu.mark_start, cpu.mark_end)
        mem = proc_mem_kib(agent.pid)
        after = metrics.scrape(agent.url)
        result.update(metrics.flush_figures(before, after))
        result["flush_seconds_max_bucket"] = metrics.max_bucket(after, "strata_flush_seconds")
        result.pop("latency_ms", None)
        buffer_mib = args.overload_buffer_bytes / MiB
        result.update(
            {
                "buffer_bytes_limit_mib": buffer_mib,
                "baseline_rss_mib": baseline.get("VmRSS", 0) / 1024,
                "peak_rss_sampled_mib": sampler.peak_kib / 1024,
                "vmhwm_mib": mem.get("VmHWM", 0) / 1024,
                "rss_limit_mib": targets.agent_rss(buffer_mib).bound,
                "max_buffer_bytes_mib": watcher.max_bytes / MiB,
                "http_429": result["status"].get("429", 0),
                "cpu_cores": cpu.cores(),
                "loadavg_after": loadavg(),
            }
        )
        return result
    finally:
        stop_agent(agent, args.backend_now)


def bracketed_ceiling(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The bare ceiling measured just before and just after the agent's produce window, as one figure.

    On a small shared VM the speed of the same code drifts by tens of percent within minutes; one
    measurement on either side of the agent's window cancels a steady drift, where one before it alone
    could flatter or wrong the ratio. Throughput and CPU are the means of the two windows, which have the
    same length; both runs stay in ``runs``."""
    combined = dict(before)
    combined["mib_s"] = (before["mib_s"] + after["mib_s"]) / 2
    combined["records_s"] = (before["records_s"] + after["records_s"]) / 2
    combined["cpu_cores"] = {
        k: round((before["cpu_cores"].get(k, 0.0) + after["cpu_cores"].get(k, 0.0)) / 2, 2)
        for k in before["cpu_cores"]
    }
    combined["minor_faults"] = {
        k: before["minor_faults"].get(k, 0) + after["minor_faults"].get(k, 0) for k in before["minor_faults"]
    }
    combined["window_s"] = before["window_s"] + after["window_s"]
    combined["runs"] = [before, after]
    return combined


def _agent_phases(
    args: argparse.Namespace, agent: Agent, topics: list[str], extra_pids: dict[str, int], out: dict[str, Any]
) -> None:
    backend = args.backend_now
    metrics.create_topics(agent.url, topics, args.partitions)
    out["agent_baseline_rss_mib"] = proc_mem_kib(agent.pid).get("VmRSS", 0) / 1024
    log(f"[{backend}] produce: strata agent, {args.clients} clients x {args.records_per_request} records")
    with RssSampler(agent.pid, 0.1) as sampler:
        out["produce"] = produce_phase(args, agent, topics, extra_pids)
    out["produce"]["peak_rss_mib"] = sampler.peak_kib / 1024
    if args.throughput_records_per_request:
        n, r = args.clients, args.throughput_records_per_request
        log(f"[{backend}] produce throughput: strata agent, {n} clients x {r} records")
        out["throughput"] = throughput_phase(args, agent, topics, extra_pids)
    if args.fetch_warm:
        log(f"[{backend}] fetch catch-up (same agent, warm cache)")
        out["fetch"] = fetch_phase(args, agent, topics, extra_pids)
        out["fetch"]["cache"] = "warm"


def produce_and_fetch(
    args: argparse.Namespace,
    workdir: Path,
    topics: list[str],
    store_args: list[str],
    extra_pids: dict[str, int],
    out: dict[str, Any],
) -> None:
    """Phases 1-4: the ceiling before, produce and idle, the ceiling after, then the catch-up."""
    backend = args.backend_now
    log(f"[{backend}] ceiling: bare FastAPI, {args.clients} clients x {args.records_per_request} records")
    bare_before = bare_phase(args, workdir, topics, args.records_per_request)
    if args.throughput_records_per_request:
        out["bare_throughput"] = bare_phase(args, workdir, topics, args.throughput_records_per_request)
    agent = http_agent(args, workdir, "agent", store_args, args.buffer_bytes)
    try:
        _agent_phases(args, agent, topics, extra_pids, out)
    finally:
        if "produce" in out:
            out["produce"]["agent_cpu_total_s"] = proc_cpu_s(agent.pid)
        gc_stats = stop_agent(agent, backend)
        if gc_stats is not None and "produce" in out:
            out["produce"]["agent_gc"] = gc_stats
    log(f"[{backend}] ceiling again, after the agent: bare FastAPI")
    out["bare"] = bracketed_ceiling(bare_before, bare_phase(args, workdir, topics, args.records_per_request))
    if not args.fetch_warm:
        # Catch-up reads history: a fresh agent on the same bucket and metadata, so its cache is cold and
        # every byte comes from the object store.
        log(f"[{backend}] fetch catch-up (fresh agent, cold cache)")
        agent = http_agent(args, workdir, "agent-fetch", store_args, args.buffer_bytes, "agent")
        try:
            out["fetch"] = fetch_phase(args, agent, topics, extra_pids)
            out["fetch"]["cache"] = "cold"
        finally:
            stop_agent(agent, backend)


def run_backend(args: argparse.Namespace, backend: str, workdir: Path) -> dict[str, Any]:
    """Every phase asked for on one backend: a local directory, or moto S3 in its own process."""
    args.backend_now = backend
    topics = [f"bench-{i}" for i in range(args.topics)]
    out: dict[str, Any] = {"backend": backend, "loadavg_before": loadavg()}
    buckets = ["strata-bench", "strata-bench-overload"]
    with backend_stores(backend, workdir, buckets) as ((store_args, overload_store_args), extra_pids):
        if "produce" in args.phases:
            produce_and_fetch(args, workdir, topics, store_args, extra_pids, out)
        if "overload" in args.phases:
            n, r = args.overload_clients, args.overload_records_per_request
            log(f"[{backend}] overload: {n} clients x {r} records")
            out["overload"] = overload_phase(args, workdir, topics, overload_store_args)
    return out
