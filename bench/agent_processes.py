"""Ack latency of bench.kafka_bench's latency load split over several agent processes on one host.

    python -m bench.agent_processes [--agents 1,2] [--rate-mib 20] [--duration 15]
    python -m bench.agent_processes --agents 1,2 --rate-mib 2 --duration 1 --warmup 0.5   # smoke run

The load is the latency phase's: ``--producers`` librdkafka processes (bench/kafka_loadgen.py, default 2),
1 KiB values, linger.ms 5, uncompressed, ``--rate-mib`` in all at a fixed rate, to one topic of
``--partitions`` partitions (32), low-latency unless ``--flush-class standard``. It runs once per count N
of ``--agents``, each time against N fresh ``strata serve --role agent`` processes sharing one data
directory (its local bucket and SQLite metadata), each the only broker at its own port, as agents behind
one load-balanced address are; producer i talks to agent i mod N. Reported per N: MiB/s acknowledged in
the window, ack p50 / p99 of every record produced in it (librdkafka's ``Message.latency()``), the
ProduceRequests sent, the agents' CPU in all and the generators' (cores, /proc over the window), the
agents' CPU per request, and the PUTs a second summed over the agents' /metrics.

The CPU per request compares trees (``--tree``) only with ``--flush-class standard``: a standard topic
flushes on its timer, while a low-latency agent cuts a flush whenever the one before has committed, so
it spends whatever CPU is left on flushes.

What it asks: how far processes would take the low-latency class here. An agent serves every connection
on one event loop, which a load of small requests saturates (librdkafka sends a ProduceRequest per
partition batch: thousands a second at linger.ms 5): docs/benchmarks.md, "The low-latency ack against
the request rate".
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import loadrun, metrics
from bench.harness import ROOT, Agent, AgentSpec, log, start_agent
from bench.kafka_load import KafkaLoad, cpu_us_per_request, merge_produce, producer_cmds
from bench.probes import CpuWindow
from bench.results import run_header, write_results

TOPIC = "bench-processes"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--agents", default="1,2", help="agent process counts, comma-separated: one run each")
    add("--rate-mib", type=float, default=20.0, help="offered MiB/s in all")
    add("--producers", type=int, default=2, help="producer processes; producer i talks to agent i mod N")
    add("--partitions", type=int, default=32)
    add("--duration", type=float, default=15.0, help="measured window, s")
    add("--warmup", type=float, default=2.0)
    add("--value-bytes", type=int, default=1024)
    add("--value-kind", choices=["text", "random"], default="text")
    add("--tree", default=str(ROOT), help="the tree the agents run from")
    add(
        "--flush-class",
        choices=["low-latency", "standard"],
        default="low-latency",
        help="the topic's strata.flush.class; standard flushes on its timer, so the agents' CPU per request"
        " is comparable between trees (a low-latency agent flushes as often as its CPU allows)",
    )
    add("--out", default=None, help="JSON results (default bench/results/agent_processes-<time>.json)")
    args = parser.parse_args(argv)
    args.agents = [int(n) for n in args.agents.split(",") if n]
    # What kafka_load.producer_cmds reads besides the load: librdkafka's batch.size and queue bound as
    # bench.kafka_bench's defaults set them (linger.ms comes with the load).
    args.linger_ms, args.batch_bytes, args.queue_mib = 5.0, 1_000_000, 64
    return args


def start_agents(args: argparse.Namespace, workdir: Path, count: int) -> list[Agent]:
    serve = ["--num-partitions", str(args.partitions), "--role", "agent", "--log-level", "warning"]
    spec = AgentSpec(serve, kafka_ports=1, tree=Path(args.tree).resolve())
    agents: list[Agent] = []
    try:
        for i in range(count):
            agents.append(start_agent(spec, workdir, f"agent{i}", data_name="data"))
            if i == 0:  # before the others start: one creates the topic, then every one can read it
                metrics.create_topics(
                    agents[0].url, [TOPIC], args.partitions, {"strata.flush.class": args.flush_class}
                )
    except BaseException:
        for agent in agents:
            agent.proc.stop()
        raise
    return agents


def run_once(args: argparse.Namespace, count: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="strata-processes-") as tmp:
        agents = start_agents(args, Path(tmp), count)
        try:
            load = KafkaLoad("none", 1, args.duration, rate_mib=args.rate_mib / args.producers, linger_ms=5.0)
            cmds = []
            for i in range(args.producers):
                bootstrap = agents[i % count].bootstrap
                assert bootstrap is not None
                [cmd] = producer_cmds(args, bootstrap, TOPIC, load, seed=i + 1)
                cmds.append(cmd)
            before = [metrics.scrape(a.url) for a in agents]
            cpu = CpuWindow({f"agent{i}": a.pid for i, a in enumerate(agents)})
            started = time.monotonic()
            with loadrun.generators(cmds, "strata-kloadgen-") as (popens, outs):
                loadrun.wait_ready(popens, outs)
                loadrun.run_window(outs, args.warmup, args.duration, cpu.mark_start, cpu.mark_end)
                parts = loadrun.collect(popens, outs, load.drain_timeout + 60)
            elapsed = time.monotonic() - started
            for agent in agents:
                metrics.wait_buffer_empty(agent.url)
            after = [metrics.scrape(a.url) for a in agents]
        finally:
            for agent in agents:
                agent.proc.stop()
    merged = merge_produce(parts, KafkaLoad("none", args.producers, args.duration, rate_mib=args.rate_mib))
    cores = cpu.cores()
    merged["agents"] = count
    merged["agents_cpu_cores"] = round(sum(cores[f"agent{i}"] for i in range(count)), 2)
    merged["cpu_us_per_request"] = cpu_us_per_request(
        merged["agents_cpu_cores"], merged["requests_sent"], args.duration, args.warmup
    )
    merged["puts_s"] = (
        sum(metrics.puts(a) - metrics.puts(b) for a, b in zip(after, before, strict=True)) / elapsed
    )
    return merged


def table(runs: list[dict[str, Any]], rate: float) -> str:
    lines = [
        f"| agent processes at {rate:g} MiB/s | MiB/s | ack p50 / p99 ms | requests sent"
        " | agents / generators cores | agent CPU µs per request | PUTs/s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        lat = r["latency_ms"]
        lines.append(
            f"| {r['agents']} | {r['mib_s']:.1f} | {lat['p50']:.1f} / {lat['p99']:.1f}"
            f" | {r['requests_sent']} | {r['agents_cpu_cores']} / {r['loadgen_cpu_cores']}"
            f" | {r['cpu_us_per_request']:.0f} | {r['puts_s']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    report = run_header("agent_processes", argv, ("agents", "broker", "storage", "strata"), Path(args.tree))
    started = time.monotonic()
    runs = []
    for count in args.agents:
        what = f"{args.producers} producers, {args.rate_mib:g} MiB/s, {args.flush_class}"
        log(f"{count} agent process(es), {what}")
        runs.append(run_once(args, count))
    report["runs"] = runs
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    out = write_results(report, args.out)
    print(table(runs, args.rate_mib))
    print(f"\nload average at start {report['machine']['loadavg_at_start']}; {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
