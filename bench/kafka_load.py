"""The Kafka door's load, for bench.kafka_bench: ``bench.kafka_loadgen`` producer and consumer processes.

Producers share one measured window and their results are merged (latencies before the percentiles are
taken); consumers read their share of the partitions from offset 0 to the high watermark, from one start.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

from bench import loadrun
from bench.harness import MiB, module_cmd
from bench.http_load import latency_summary


@dataclass(frozen=True)
class KafkaLoad:
    """Producer settings of one run; None takes the command line's throughput-phase setting."""

    compression: str
    procs: int
    duration: float
    rate_mib: float = 0.0
    instances: int = 1
    linger_ms: float | None = None
    batch_bytes: int | None = None
    queue_mib: int | None = None
    drain_timeout: float = 30.0
    schema_id: int = 0  # values framed as Avro strings of this registered schema (bench.kafka_loadgen)
    idempotence: bool = False


def producer_cmds(
    args: argparse.Namespace, bootstrap: str, topic: str, load: KafkaLoad, seed: int = 1
) -> list[list[str]]:
    """The ``load.procs`` generator commands, seeded ``seed``, ``seed + 1``, ..."""
    linger = args.linger_ms if load.linger_ms is None else load.linger_ms
    batch = args.batch_bytes if load.batch_bytes is None else load.batch_bytes
    queue = args.queue_mib if load.queue_mib is None else load.queue_mib
    cmds = []
    for i in range(load.procs):
        cmd = module_cmd("bench.kafka_loadgen", "produce", "--bootstrap", bootstrap, "--topic", topic)
        cmd += [
            "--compression",
            load.compression,
            "--instances",
            str(load.instances),
            "--seed",
            str(seed + i),
        ]
        cmd += ["--value-bytes", str(args.value_bytes), "--value-kind", args.value_kind]
        cmd += ["--linger-ms", str(linger), "--batch-bytes", str(batch), "--queue-mib", str(queue)]
        cmd += ["--rate-mib", str(load.rate_mib / load.procs), "--duration", str(load.duration)]
        cmd += ["--drain-timeout", str(load.drain_timeout)]
        if load.schema_id:
            cmd += ["--schema-id", str(load.schema_id)]
        if load.idempotence:
            cmd += ["--idempotence"]
        cmds.append(cmd)
    return cmds


def run_producers(
    args: argparse.Namespace,
    bootstrap: str,
    topic: str,
    load: KafkaLoad,
    on_window_start: loadrun.Hook = None,
    on_window_end: loadrun.Hook = None,
) -> dict[str, Any]:
    """``load.procs`` producer processes with one window; their results merged."""
    with loadrun.generators(producer_cmds(args, bootstrap, topic, load), "strata-kloadgen-") as (
        popens,
        outs,
    ):
        loadrun.wait_ready(popens, outs)
        loadrun.run_window(outs, args.warmup, load.duration, on_window_start, on_window_end)
        parts = loadrun.collect(popens, outs, load.drain_timeout + 60)
    return merge_produce(parts, load)


def merge_produce(parts: list[dict[str, Any]], load: KafkaLoad) -> dict[str, Any]:
    latencies = sorted(x for part in parts for x in part["latencies_ms"])
    errors = loadrun.sum_counts(parts, "errors")
    first_error: dict[str, str] = {}
    for part in parts:
        for k, v in part["first_error"].items():
            first_error.setdefault(k, v)
    acked = sum(p["acked"] for p in parts)
    requests = sum(p["requests_sent"] for p in parts)
    request_bytes = sum(p["requests_sent"] * (p["request_bytes_mean"] or 0) for p in parts)
    duration = load.duration
    result: dict[str, Any] = {
        "compression": load.compression,
        "record_bytes": parts[0]["record_bytes"] if parts else None,
        "producer_procs": load.procs,
        "producers_per_proc": load.instances,
        "rate_mib_offered": sum(p["rate_mib"] for p in parts),
        "window_s": duration,
        "mib_s": sum(p["window_bytes"] for p in parts) / duration / MiB,
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
            **latency_summary(latencies),
        },
        "errors": errors,
        "first_error": first_error,
        "loadgen_cpu_cores": round(sum(p["cpu_s"] for p in parts) / duration, 2),
    }
    if errors and not acked:
        # Every delivery failed (a codec the agent refuses, say): say why, once, for the table.
        name, count = max(errors.items(), key=lambda kv: kv[1])
        result["error"] = (
            f"{load.compression}: {count} deliveries failed with {name}: {first_error.get(name, '')}"
        )
    return result


def cpu_us_per_request(cores: float, requests_sent: int, window_s: float, warmup_s: float) -> float:
    """CPU microseconds per Produce request in a window of ``window_s``, from ``cores`` measured over it.

    ``requests_sent`` may include a warm-up of ``warmup_s`` before the window: librdkafka counts the
    requests of the whole run (``merge_produce``'s ``requests_sent``), and at a fixed rate the window holds
    its share of them (the drain after it sends little). Requests counted over the window alone (the
    agent's own count) take ``warmup_s`` 0."""
    in_window = requests_sent * window_s / (window_s + warmup_s)
    return cores * window_s / max(in_window, 1) * 1e6


def run_consumers(args: argparse.Namespace, bootstrap: str, topic: str) -> dict[str, Any]:
    """``--consumers`` processes, partitions dealt round-robin, one start time; merged results."""
    procs = max(1, min(args.consumers, args.partitions))
    cmds = []
    for i in range(procs):
        mine = ",".join(str(p) for p in range(i, args.partitions, procs))
        cmd = module_cmd("bench.kafka_loadgen", "consume", "--bootstrap", bootstrap, "--topic", topic)
        cmd += ["--partitions", mine, "--fetch-max-bytes", str(args.fetch_max_bytes)]
        cmd += ["--partition-max-bytes", str(args.partition_max_bytes), "--timeout", str(args.fetch_timeout)]
        cmds.append(cmd)
    with loadrun.generators(cmds, "strata-kconsume-") as (popens, outs):
        loadrun.wait_ready(popens, outs)
        loadrun.release(outs, time.time() + 0.2)
        parts = loadrun.collect(popens, outs, args.fetch_timeout + 60)
    elapsed = max(p["elapsed_s"] for p in parts)
    payload = sum(p["payload_bytes"] for p in parts)
    return {
        "topic": topic,
        "consumer_procs": procs,
        "records": sum(p["records"] for p in parts),
        "expected_records": sum(p["expected_records"] for p in parts),
        "payload_bytes": payload,
        "elapsed_s": elapsed,
        "mib_s": payload / elapsed / MiB if elapsed else None,
        "unfinished_partitions": sorted(x for p in parts for x in p["unfinished_partitions"]),
        "errors": loadrun.sum_counts(parts, "errors"),
        "consumer_cpu_cores": round(sum(p["cpu_s"] for p in parts) / elapsed, 2) if elapsed else None,
    }
