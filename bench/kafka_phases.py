"""The phases of bench.kafka_bench: sink ceiling, produce per codec, ack latency, catch-up, overload.

Each phase starts what it measures and stops it, reads the agent's metrics around its window and the CPU
and RSS of the processes from /proc. The ceiling runs once; the others once per backend.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from bench import java_producer, metrics, targets
from bench.harness import (
    ROOT,
    Agent,
    AgentSpec,
    MiB,
    backend_stores,
    bench_env,
    free_port,
    log,
    module_cmd,
    spawn,
    start_agent,
    stop_proc,
    wait_tcp,
)
from bench.kafka_load import KafkaLoad, cpu_us_per_request, run_consumers, run_producers
from bench.probes import (
    CpuWindow,
    RssSampler,
    cpu_ms_per_mib,
    loadavg,
    proc_cpu_s,
    proc_mem_kib,
    settle_disk,
)
from tests.java import kafka as kafka_jars


def topic_name(codec: str) -> str:
    return f"kbench-{codec}"


def kafka_agent(
    args: argparse.Namespace,
    workdir: Path,
    name: str,
    store: list[str],
    buffer_bytes: int,
    data: str | None = None,
) -> Agent:
    """``strata serve --role agent`` with HTTP and Kafka; room for up to 8 lanes (STRATA_KAFKA_LANES)."""
    serve = ["--num-partitions", str(args.partitions), "--role", "agent", "--log-level", "warning"]
    serve += ["--flush-interval-ms", str(args.flush_interval_ms), "--buffer-bytes", str(buffer_bytes), *store]
    return start_agent(AgentSpec(serve, kafka_ports=8, tree=Path(args.tree).resolve()), workdir, name, data)


def bootstrap_of(agent: Agent) -> str:
    assert agent.bootstrap is not None
    return agent.bootstrap


def ceiling_phase(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The sink, driven by the produce phase's generator and parameters, once per codec."""
    port = free_port()
    cmd = module_cmd("bench.kafka_sink", "--port", str(port), "--partitions", str(args.partitions))
    sink = spawn("sink", cmd, workdir / "sink.log")
    out: dict[str, Any] = {}
    try:
        wait_tcp(port, sink)
        for codec in args.compression:
            log(f"[ceiling] kafka sink, {args.producers} producer processes, {codec}")
            cpu = CpuWindow({"server": sink.pid})
            load = KafkaLoad(codec, args.producers, args.duration)
            try:
                r = run_producers(
                    args, f"127.0.0.1:{port}", topic_name(codec), load, cpu.mark_start, cpu.mark_end
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


# (label, bench.kafka_sink's arguments beside ``--raw``): the bare sinks a load is measured against, in
# order: answering at once, then only once the batches are durable (bench/durable_log.py's group commit),
# appended to one log, then in a file per round as Strata's local store writes a flush, then with a SQLite
# commit after the file as Strata's embedded metadata store commits a flush. The step from one to the next
# is what that step costs a durable broker on this machine.
SINKS: tuple[tuple[str, list[str]], ...] = (
    ("answering at once", []),
    ("durable: one log, fdatasync per round", ["--durable", "log"]),
    ("durable: a file per round, as Strata's local store", ["--durable", "files"]),
    ("durable: a file and a SQLite commit per round", ["--durable", "files+commit"]),
)


def sink_runs(args: argparse.Namespace, workdir: Path, load: KafkaLoad, topic: str) -> dict[str, Any]:
    """``load`` against ``bench.kafka_sink --raw`` (requests read with ``struct``: as little CPU per request
    as Python allows) in each of ``SINKS``; the producers' figures with the sink's ``cpu_cores``, by label."""
    out: dict[str, Any] = {}
    for n, (label, durable) in enumerate(SINKS):
        port = free_port()
        cmd = module_cmd(
            "bench.kafka_sink", "--port", str(port), "--partitions", str(args.partitions), "--raw"
        )
        if durable:
            cmd += [*durable, "--dir", str(workdir / f"sink-{n}")]
        sink = spawn("sink", cmd, workdir / f"sink-{n}.log")
        try:
            wait_tcp(port, sink)
            log(f"[ceiling] {load.procs} producer processes, sink {label}, {load.duration:g} s")
            settle_disk()
            cpu = CpuWindow({"sink": sink.pid})
            result = run_producers(args, f"127.0.0.1:{port}", topic, load, cpu.mark_start, cpu.mark_end)
            result["cpu_cores"] = cpu.cores()
        finally:
            sink.stop()
        out[label] = result
    return out


def latency_floor(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The latency phase's load (``--rate-mib`` at ``--latency-linger-ms``, uncompressed) against the bare
    sinks: what the client, the loopback, the disk and Python's cheapest server allow an acknowledgement
    here, step by step, beside Strata's low-latency figures."""
    return sink_runs(args, workdir, latency_load(args), latency_topic("floor"))


def produce_phase(
    args: argparse.Namespace, agent: Agent, codec: str, extra_pids: dict[str, int]
) -> dict[str, Any]:
    marks: dict[str, metrics.Scrape] = {"before": metrics.scrape(agent.url)}
    cpu = CpuWindow({"agent": agent.pid, **extra_pids})

    def window_start() -> None:
        marks["start"] = metrics.scrape(agent.url)
        cpu.mark_start()

    def window_end() -> None:
        cpu.mark_end()
        marks["end"] = metrics.scrape(agent.url)

    load = KafkaLoad(codec, args.producers, args.duration)
    result = run_producers(args, bootstrap_of(agent), topic_name(codec), load, window_start, window_end)
    metrics.wait_buffer_empty(agent.url)
    marks["after"] = metrics.scrape(agent.url)
    result.update(metrics.flush_figures(marks["before"], marks["after"]))
    result["puts_s"] = (metrics.puts(marks["end"]) - metrics.puts(marks["start"])) / args.duration
    result["steps_ms"] = metrics.flush_steps_ms(marks["start"], marks["end"])
    result["cpu_cores"] = cpu.cores()
    result["loadavg_after"] = loadavg()
    return result


def latency_topic(flush_class: str) -> str:
    return f"bench-latency-{flush_class}"


def measured_window(
    args: argparse.Namespace, url: str, bootstrap: str, topic: str, load: KafkaLoad, pids: dict[str, int]
) -> tuple[dict[str, Any], metrics.Scrape, metrics.Scrape]:
    """Producers for one window, after a ``sync``, with the agent's metrics scraped before it and after its
    buffer emptied: the producers' figures plus the flushes' (``flush_figures``, ``steps_ms``), the
    ``cpu_cores`` of ``pids`` and the seconds the ``sync`` took (``sync_s``); and the two scrapes, for
    figures of the caller's own."""
    synced_s = settle_disk()
    before = metrics.scrape(url)
    cpu = CpuWindow(pids)
    result = run_producers(args, bootstrap, topic, load, cpu.mark_start, cpu.mark_end)
    metrics.wait_buffer_empty(url)
    after = metrics.scrape(url)
    result.update(metrics.flush_figures(before, after))
    result["steps_ms"] = metrics.flush_steps_ms(before, after)
    result["cpu_cores"] = cpu.cores()
    result["sync_s"] = round(synced_s, 2)
    return result, before, after


def latency_load(args: argparse.Namespace) -> KafkaLoad:
    """The latency phase's producers: ``--rate-mib`` offered at ``--latency-linger-ms``, uncompressed."""
    duration = args.latency_duration or args.duration
    return KafkaLoad(
        "none", args.producers, duration, rate_mib=args.rate_mib, linger_ms=args.latency_linger_ms
    )


def latency_phase(
    args: argparse.Namespace, agent: Agent, extra_pids: dict[str, int], flush_class: str
) -> dict[str, Any]:
    """``--rate-mib`` offered at a fixed rate, uncompressed, to a topic of ``flush_class``: produce() ->
    acknowledgement of every record, the PUTs per second it cost, and the flushes' steps."""
    topic = latency_topic(flush_class)
    metrics.create_topics(agent.url, [topic], args.partitions, {"strata.flush.class": flush_class})
    load = latency_load(args)
    started = time.monotonic()
    pids = {"agent": agent.pid, **extra_pids}
    result, before, after = measured_window(args, agent.url, bootstrap_of(agent), topic, load, pids)
    elapsed = time.monotonic() - started
    result["puts_s"] = (metrics.puts(after) - metrics.puts(before)) / elapsed
    result["class_puts"] = metrics.class_puts(before, after, flush_class)
    result.update(ack_breakdown(args, load, result, before, after))
    result["linger_ms"] = args.latency_linger_ms
    result["flush_class"] = flush_class
    if args.java_latency:
        result["java"] = java_latency(args, agent, extra_pids, flush_class)
    return result


def java_latency(
    args: argparse.Namespace, agent: Agent, extra_pids: dict[str, int], flush_class: str
) -> dict[str, Any]:
    """The same rate and linger.ms from Kafka's Java producer (bench/java_producer.py), on a topic of its
    own: its steady-state percentiles, and the agent's figures over the window after the warm-up (its
    requests, their mean in the agent, the time between flushes, CPU per request)."""
    topic = latency_topic(flush_class) + "-java"
    metrics.create_topics(agent.url, [topic], args.partitions, {"strata.flush.class": flush_class})
    duration = args.latency_duration or args.duration
    load = java_producer.JavaLoad(
        bootstrap_of(agent),
        topic,
        args.rate_mib,
        duration,
        args.java_warmup,
        args.latency_linger_ms,
        tuple(args.java_property),
    )
    settle_disk()
    try:
        proc = java_producer.start(load)
    except (kafka_jars.KafkaJarsMissing, OSError) as exc:  # no jars (make kafka-java), or no JDK
        return {"error": f"Kafka's Java producer did not start: {exc}"}
    # The JVM starts in about a second, then the tool sends its warm-up records at the fixed rate. A tool
    # that ends before the window (a refused setting, no broker) is reported at once.
    if java_producer.exited_within(proc, 1.0 + load.warmup_s):
        return java_producer.finish(proc, timeout=1.0)
    cpu = CpuWindow({"agent": agent.pid, "java": proc.pid, **extra_pids})
    before = metrics.scrape(agent.url)
    started = time.monotonic()
    cpu.mark_start()
    time.sleep(duration)  # the window ends with the tool's last records sent, before it exits
    cpu.mark_end()
    after = metrics.scrape(agent.url)
    window_s = time.monotonic() - started
    result = java_producer.finish(proc, timeout=load.timeout_s)
    # A tool that fell behind the offered rate (the agent took less) sends its last records long after
    # the window: the agent's figures then cover part of its warm-up, and the row says so.
    behind_s = time.monotonic() - started - window_s
    requests = int(metrics.delta(before, after, "strata_kafka_produce_latency_seconds_count"))
    cores = cpu.cores()
    result.update(agent_side(before, after, window_s))
    result.update(
        {
            "cpu_cores": cores,
            "requests_s": requests / window_s,
            "agent_us_per_request": cpu_us_per_request(cores["agent"], requests, window_s, 0.0),
            "steps_ms": metrics.flush_steps_ms(before, after),
            "warmup_s": load.warmup_s,
            "properties": list(load.props),
            "behind_s": behind_s,
        }
    )
    return result


def ack_breakdown(
    args: argparse.Namespace,
    load: KafkaLoad,
    result: dict[str, Any],
    before: metrics.Scrape,
    after: metrics.Scrape,
) -> dict[str, Any]:
    """Where a latency window's acknowledgement time went: ``agent_ms``, the agent's mean from a Produce
    request's admission to its answer (per request, where the client's latency is per record; the rest
    is the client's linger and queue, the loopback and the socket buffers); ``flush_cycle_ms``, the mean
    time between flushes; ``agent_us_per_request``, the agent's CPU per Produce request in the window.

    The producers send from the warm-up's start to the window's end, and the drain after it sends little:
    flushes and requests are counted over that time. So the figures are close, not exact: ``agent_ms``
    covers the warm-up's requests too, the flushes the drain's, and librdkafka's request count its few
    ApiVersions and Metadata requests, from statistics up to 500 ms old (a few per cent on a 12 s run)."""
    return {
        **agent_side(before, after, load.duration + args.warmup),
        "agent_us_per_request": cpu_us_per_request(
            result["cpu_cores"]["agent"], result["requests_sent"], load.duration, args.warmup
        ),
    }


def agent_side(before: metrics.Scrape, after: metrics.Scrape, span_s: float) -> dict[str, float | None]:
    """Between two scrapes ``span_s`` apart: ``agent_ms``, the mean from a Produce request's admission to
    its answer, and ``flush_cycle_ms``, the mean time between flushes (None without any)."""
    agent_s = metrics.delta_mean(before, after, "strata_kafka_produce_latency_seconds")
    flushes = metrics.flushes(after) - metrics.flushes(before)
    return {
        "agent_ms": None if agent_s is None else agent_s * 1000,
        "flush_cycle_ms": span_s / flushes * 1000 if flushes else None,
    }


def fetch_phase(
    args: argparse.Namespace, agent: Agent, topics: list[str], extra_pids: dict[str, int]
) -> dict[str, Any]:
    """Each topic read back to its high watermark by ``--consumers`` processes, one topic at a time."""
    out: dict[str, Any] = {}
    for topic in topics:
        log(f"[{args.backend_now}] fetch catch-up over Kafka: {topic}, {args.consumers} consumer processes")
        before = metrics.scrape(agent.url)
        cpu = CpuWindow({"agent": agent.pid, **extra_pids})
        cpu.mark_start()
        r = run_consumers(args, bootstrap_of(agent), topic)
        cpu.mark_end()
        after = metrics.scrape(agent.url)
        r["gets"] = metrics.gets(after) - metrics.gets(before)
        r["store_read_mib"] = metrics.delta(before, after, "strata_object_store_read_bytes_total") / MiB
        payload_mib = r["payload_bytes"] / MiB
        r["gets_per_mib"] = r["gets"] / payload_mib if payload_mib else None
        r["cpu_cores"] = cpu.cores()
        out[topic] = r
    return out


def overload_phase(args: argparse.Namespace, workdir: Path, store_args: list[str]) -> dict[str, Any]:
    """A fresh agent under many producers with big batches: its RSS against buffer + headroom."""
    agent = kafka_agent(args, workdir, "agent-overload", store_args, args.overload_buffer_bytes)
    try:
        metrics.create_topics(agent.url, [topic_name("none")], args.partitions)
        baseline = proc_mem_kib(agent.pid)
        before = metrics.scrape(agent.url)
        cpu = CpuWindow({"agent": agent.pid})
        load = KafkaLoad(
            "none",
            args.overload_procs,
            args.overload_duration,
            instances=args.overload_instances,
            linger_ms=args.overload_linger_ms,
            batch_bytes=args.overload_batch_bytes,
            queue_mib=args.overload_queue_mib,
            drain_timeout=5.0,  # what is still queued in the clients is not the point here
        )
        with RssSampler(agent.pid, 0.05) as sampler, metrics.BufferWatcher(agent.url) as watcher:
            result = run_producers(
                args, bootstrap_of(agent), topic_name("none"), load, cpu.mark_start, cpu.mark_end
            )
        mem = proc_mem_kib(agent.pid)
        result.update(metrics.flush_figures(before, metrics.scrape(agent.url)))
        result.pop("latency_ms", None)
        buffer_mib = args.overload_buffer_bytes / MiB
        result.update(
            {
                "buffer_bytes_limit_mib": buffer_mib,
                "baseline_rss_mib": baseline.get("VmRSS", 0) / 1024,
                "peak_rss_sampled_mib": sampler.peak_kib / 1024,
                "rss_samples": sampler.samples,
                "vmhwm_mib": mem.get("VmHWM", 0) / 1024,
                "rss_limit_mib": targets.agent_rss(buffer_mib).bound,
                "max_buffer_bytes_mib": watcher.max_bytes / MiB,
                "cpu_cores": cpu.cores(),
                "loadavg_after": loadavg(),
            }
        )
        return result
    finally:
        stop_proc(agent.proc, args.backend_now)


def _producing(
    args: argparse.Namespace, agent: Agent, extra_pids: dict[str, int], out: dict[str, Any]
) -> list[str]:
    """The produce phase per codec, then the latency phase; the topics that got records."""
    backend = args.backend_now
    written: list[str] = []
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
        out["latency"] = {}
        for flush_class in args.latency_classes:
            log(f"[{backend}] ack latency at {args.rate_mib:g} MiB/s, linger.ms {linger:g}, {flush_class}")
            out["latency"][flush_class] = latency_phase(args, agent, extra_pids, flush_class)
    return written


def produce_and_fetch(
    args: argparse.Namespace,
    workdir: Path,
    store_args: list[str],
    extra_pids: dict[str, int],
    out: dict[str, Any],
) -> None:
    """Produce and latency on one agent with PUTs counted over both and while idle; then the catch-up."""
    backend = args.backend_now
    agent = kafka_agent(args, workdir, "agent", store_args, args.buffer_bytes)
    try:
        for codec in args.compression:
            metrics.create_topics(agent.url, [topic_name(codec)], args.partitions)
        out["agent_baseline_rss_mib"] = proc_mem_kib(agent.pid).get("VmRSS", 0) / 1024
        first = metrics.scrape(agent.url)
        with RssSampler(agent.pid, 0.1) as sampler:
            written = _producing(args, agent, extra_pids, out)
        out["agent_peak_rss_mib"] = sampler.peak_kib / 1024
        last = metrics.scrape(agent.url)
        out["puts"] = metrics.flush_figures(first, last)
        time.sleep(args.idle)
        idle = metrics.scrape(agent.url)
        out["puts"]["idle_s"] = args.idle
        out["puts"]["idle_puts"] = metrics.puts(idle) - metrics.puts(last)
        out["puts"]["idle_flushes"] = metrics.flushes(idle) - metrics.flushes(last)
    finally:
        out["agent_cpu_total_s"] = proc_cpu_s(agent.pid)
        stop_proc(agent.proc, backend)
    if "fetch" in args.phases and not written:
        log(f"[{backend}] fetch skipped: no topic got records (fetch needs the produce or latency phase)")
    if "fetch" in args.phases and written:
        # Catch-up reads history: a fresh agent on the same bucket and metadata, so its cache is cold and
        # every byte comes from the object store.
        agent = kafka_agent(args, workdir, "agent-fetch", store_args, args.buffer_bytes, "agent")
        try:
            with RssSampler(agent.pid, 0.1) as sampler:
                out["fetch"] = fetch_phase(args, agent, written, extra_pids)
            out["fetch_agent_peak_rss_mib"] = max(sampler.peak_kib, proc_mem_kib(agent.pid)["VmHWM"]) / 1024
        finally:
            stop_proc(agent.proc, backend)


def run_backend(args: argparse.Namespace, backend: str, workdir: Path) -> dict[str, Any]:
    """Every phase asked for on one backend: a local directory, or moto S3 in its own process."""
    args.backend_now = backend
    out: dict[str, Any] = {"backend": backend, "loadavg_before": loadavg()}
    buckets = ["strata-kbench", "strata-kbench-overload"]
    with backend_stores(backend, workdir, buckets) as ((store_args, overload_store_args), extra_pids):
        if {"produce", "latency", "fetch"} & set(args.phases):
            produce_and_fetch(args, workdir, store_args, extra_pids, out)
        if "overload" in args.phases:
            n = args.overload_procs * args.overload_instances
            log(f"[{backend}] overload: {n} producers, batch.size {args.overload_batch_bytes}")
            out["overload"] = overload_phase(args, workdir, overload_store_args)
    return out


def http_compare(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """``bench.produce_fetch``'s HTTP produce on the local bucket, same duration: its agent CPU per MiB."""
    out_path = workdir / "http.json"
    cmd = module_cmd("bench.produce_fetch", "--backend", "local", "--phases", "produce")
    cmd += ["--duration", str(args.duration), "--warmup", str(args.warmup), "--idle", str(args.idle)]
    cmd += ["--out", str(out_path)]
    limit = 4 * (args.duration + args.warmup) + 300
    log_path = workdir / "http.log"
    with log_path.open("wb") as log_file:
        done = subprocess.run(cmd, cwd=ROOT, env=bench_env(), timeout=limit, stdout=log_file, stderr=log_file)
    if done.returncode != 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-1:]
        return {"error": f"bench.produce_fetch exited with {done.returncode}: {' '.join(tail)}"}
    r = json.loads(out_path.read_text())["backends"]["local"]
    if "produce" not in r:
        return {"error": r.get("error", "no produce figures")}
    p = r["produce"]
    if not p["mib_s"]:
        return {
            "error": f"no HTTP produce acknowledged in the {args.duration:g} s window (status {p['status']})"
        }
    agent_cores = p["cpu_cores"].get("agent")
    return {
        "mib_s": p["mib_s"],
        "agent_cores": agent_cores,
        "agent_cpu_ms_per_mib": cpu_ms_per_mib(agent_cores, p["mib_s"]),
    }
