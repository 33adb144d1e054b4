"""Slow and silent clients beside a normal load: what they cost the clients that behave.

    python -m bench.slow_clients_bench [--slow 300] [--rate-mib 20] [--duration 20]
    python -m bench.slow_clients_bench --slow 20 --duration 3 --warmup 1   # smoke run

One ``strata serve --role agent`` on the embedded default (local directory, SQLite; Kafka and HTTP on free
ports), and a librdkafka producer process (``bench.kafka_loadgen``) offering ``--rate-mib`` MiB/s of 1 KiB
records, acks=all, over 12 partitions. Two windows of ``--duration`` seconds:
1. alone: the producer by itself;
2. beside ``--slow`` misbehaving connections from a process of their own (``attack`` below), a third each:
   Kafka connections that declare a 1 MiB Produce frame and send one byte a second; HTTP produce requests
   that declare a 1 MiB body and send one byte a second; connections that connect and send nothing. A
   connection the agent closes (its receive deadline, or the body deadline) is opened again at once, so the
   pressure holds for the whole window.
For each window: the producer's acknowledged MiB/s and ack latency p50 / p99, and the agent's peak RSS
(VmRSS sampled every 50 ms) and CPU. What the agent's rules promise (docs/operations.md, "Slow and silent
clients"): slow senders hold at most half of the produce buffer while they last, and are dropped at their
deadline, so the producer keeps its throughput and the agent its memory bound.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness import ROOT, AgentSpec, bench_env, log, module_cmd, start_agent, stop_proc
from bench.kafka_load import KafkaLoad, run_producers
from bench.probes import CpuWindow, RssSampler

MiB = 1024 * 1024
PARTITIONS = 12


# --- the misbehaving clients (a process of their own) -----------------------------------------------------
async def _slow_kafka(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(struct.pack(">ihhi", MiB, 0, 7, 1))  # a 1 MiB Produce frame, v7, then a byte a second
    while not reader.at_eof():
        writer.write(b"\x00")
        await writer.drain()
        await asyncio.sleep(1)


async def _slow_http(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = "POST /v1/topics/slow/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    writer.write(f"{head}Content-Length: {MiB}\r\n\r\n".encode())
    while not reader.at_eof():
        writer.write(b" ")
        await writer.drain()
        await asyncio.sleep(1)


async def _silent(port: int) -> None:
    reader, _ = await asyncio.open_connection("127.0.0.1", port)
    await reader.read()  # until the agent closes it


async def _keep(kind: str, port: int, stop: float) -> int:
    """One connection of ``kind``, opened again whenever the agent closes it; how many were opened."""
    opened = 0
    behave = {"kafka": _slow_kafka, "http": _slow_http, "silent": _silent}[kind]
    while time.time() < stop:
        opened += 1
        try:
            await asyncio.wait_for(behave(port), max(0.1, stop - time.time()))
        except (OSError, TimeoutError):
            await asyncio.sleep(0.1)
    return opened


async def _attack(kafka_port: int, http_port: int, count: int, seconds: float) -> dict[str, int]:
    stop = time.time() + seconds
    kinds = [("kafka", kafka_port), ("http", http_port), ("silent", kafka_port)]
    tasks = [asyncio.create_task(_keep(*kinds[i % 3], stop)) for i in range(count)]
    opened = await asyncio.gather(*tasks)
    return {kind: sum(n for i, n in enumerate(opened) if kinds[i % 3][0] == kind) for kind, _ in kinds}


def attack_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="slow_clients_bench attack")
    parser.add_argument("--kafka-port", type=int, required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    opened = asyncio.run(_attack(args.kafka_port, args.http_port, args.count, args.seconds))
    Path(args.out).write_text(json.dumps({"connections_opened": opened}))
    return 0


# --- the orchestrator ------------------------------------------------------------------------------------
def _window(agent_pid: int, args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    load = KafkaLoad("none", procs=1, duration=args.duration, rate_mib=args.rate_mib)
    cpu = CpuWindow({"agent": agent_pid})
    with RssSampler(agent_pid) as rss:
        result = run_producers(args, bootstrap, "bench", load, cpu.mark_start, cpu.mark_end)
    peak = rss.peak_kib
    latency = result["latency_ms"]
    return {
        "mib_s": round(result["mib_s"], 1),
        "p50_ms": None if latency["p50"] is None else round(latency["p50"], 1),
        "p99_ms": None if latency["p99"] is None else round(latency["p99"], 1),
        "errors": result["errors"],
        "agent_peak_rss_mib": round(peak / 1024, 1),
        "agent_cores": round(cpu.cores()["agent"], 2),
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["attack"]:
        return attack_main(argv[1:])
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--slow", type=int, default=300, help="misbehaving connections in window 2")
    parser.add_argument("--rate-mib", type=float, default=20.0, help="the producer's offered MiB/s")
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    args = parser.parse_args(argv)
    # What bench.kafka_load's producers read from the command line.
    args.linger_ms, args.batch_bytes, args.queue_mib = 5.0, 1_000_000, 64
    args.value_bytes, args.value_kind = 1024, "text"
    with tempfile.TemporaryDirectory(prefix="strata-slow-") as tmp:
        workdir = Path(tmp)
        spec = AgentSpec(["--role", "agent", "--kafka-max-connections", str(args.slow + 100)], kafka_ports=1)
        agent = start_agent(spec, workdir, "agent")
        try:
            assert agent.bootstrap is not None
            for topic in ("bench", "slow"):
                httpx.post(
                    f"{agent.url}/v1/topics", json={"name": topic, "partitions": PARTITIONS}, timeout=10
                )
            log("window 1: the producer alone")
            alone = _window(agent.pid, args, agent.bootstrap)
            log(f"window 2: beside {args.slow} slow or silent connections")
            kafka_port = int(agent.bootstrap.rsplit(":", 1)[1])
            http_port = int(agent.url.rsplit(":", 1)[1])
            out = workdir / "attack.json"
            cmd = module_cmd("bench.slow_clients_bench", "attack", "--kafka-port", str(kafka_port))
            cmd += ["--http-port", str(http_port), "--count", str(args.slow), "--out", str(out)]
            cmd += ["--seconds", str(args.warmup + args.duration + 15)]
            attacker = subprocess.Popen(cmd, cwd=ROOT, env=bench_env())
            time.sleep(2)  # the connections open before the window
            beside = _window(agent.pid, args, agent.bootstrap)
            attacker.wait(args.warmup + args.duration + 60)
            attack = json.loads(out.read_text()) if out.exists() else {}
        finally:
            stop_proc(agent.proc, "agent")
    print("| window | MiB/s | ack p50 / p99 ms | agent peak RSS MiB | agent cores | errors |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, w in (("alone", alone), (f"beside {args.slow} slow clients", beside)):
        print(
            f"| {name} | {w['mib_s']} | {w['p50_ms']} / {w['p99_ms']} | {w['agent_peak_rss_mib']} | "
            f"{w['agent_cores']} | {w['errors'] or 0} |"
        )
    print(json.dumps({"alone": alone, "beside": beside, "slow": args.slow, **attack}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
