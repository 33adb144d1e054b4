"""The HTTP door's load, for bench.produce_fetch: ``bench.loadgen`` processes, started and merged.

Produce runs ``procs`` closed-loop generator processes with the clients split among them and one measured
window; their latencies are merged before the percentiles are taken. Fetch runs one generator that reads
every partition back from offset 0.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import loadrun
from bench.harness import ROOT, MiB, bench_env, module_cmd
from bench.probes import percentile


@dataclass(frozen=True)
class ProduceLoad:
    """One closed-loop produce load: ``clients`` split over ``procs`` generator processes."""

    clients: int
    records_per_request: int
    value_bytes: int
    procs: int
    client: str
    warmup: float
    duration: float
    think_ms: float = 0.0


def _produce_cmds(url: str, topics: list[str], load: ProduceLoad) -> list[list[str]]:
    cmds = []
    for i in range(load.procs):
        n = load.clients // load.procs + (1 if i < load.clients % load.procs else 0)
        cmd = module_cmd("bench.loadgen", "produce", "--url", url, "--topics", ",".join(topics))
        cmd += ["--clients", str(n), "--records-per-request", str(load.records_per_request)]
        cmd += [
            "--value-bytes",
            str(load.value_bytes),
            "--duration",
            str(load.duration),
            "--seed",
            str(i + 1),
        ]
        cmd += ["--think-ms", str(load.think_ms), "--client", load.client]
        cmds.append(cmd)
    return cmds


def run_produce_load(
    url: str,
    topics: list[str],
    load: ProduceLoad,
    on_window_start: loadrun.Hook = None,
    on_window_end: loadrun.Hook = None,
) -> dict[str, Any]:
    """Run the produce load against ``url`` and merge the generators' results."""
    with loadrun.generators(_produce_cmds(url, topics, load), "strata-loadgen-") as (popens, outs):
        # Every process has built its request bodies and clients: give them one start time.
        loadrun.wait_ready(popens, outs)
        loadrun.run_window(outs, load.warmup, load.duration, on_window_start, on_window_end)
        parts = loadrun.collect(popens, outs, load.duration + load.warmup + 90)
    return merge_produce(parts, load)


def merge_produce(parts: list[dict[str, Any]], load: ProduceLoad) -> dict[str, Any]:
    latencies = sorted(x for part in parts for x in part["latencies_ms"])
    duration = load.duration
    return {
        "clients": load.clients,
        "loadgen_procs": load.procs,
        "loadgen_client": load.client,
        "records_per_request": load.records_per_request,
        "value_bytes": load.value_bytes,
        "body_bytes": parts[0]["body_bytes"],
        "think_ms": load.think_ms,
        "window_s": duration,
        "mib_s": sum(p["ok_payload_bytes"] for p in parts) / duration / MiB,
        "records_s": sum(p["ok_records"] for p in parts) / duration,
        "requests_s": sum(p["ok_requests"] for p in parts) / duration,
        "latency_ms": latency_summary(latencies),
        "status": loadrun.sum_counts(parts, "status"),
        "errors": loadrun.sum_counts(parts, "errors"),
        "unfinished_clients": sum(p["unfinished_clients"] for p in parts),
        "total_ok_records": sum(p["total_ok_records"] for p in parts),
        "loadgen_cpu_cores": round(sum(p["cpu_s"] for p in parts) / duration, 2),
    }


def latency_summary(sorted_ms: list[float]) -> dict[str, Any]:
    return {
        "n": len(sorted_ms),
        "mean": sum(sorted_ms) / len(sorted_ms) if sorted_ms else None,
        "p50": percentile(sorted_ms, 0.50),
        "p90": percentile(sorted_ms, 0.90),
        "p99": percentile(sorted_ms, 0.99),
        "max": sorted_ms[-1] if sorted_ms else None,
    }


def run_fetch_load(url: str, topics: list[str], *, concurrency: int, max_bytes: int, timeout: float) -> Any:
    """One ``bench.loadgen fetch``: every partition of ``topics`` read from offset 0 to its end."""
    with tempfile.TemporaryDirectory(prefix="strata-loadgen-") as tmp:
        out = Path(tmp) / "fetch.json"
        cmd = module_cmd("bench.loadgen", "fetch", "--url", url, "--topics", ",".join(topics))
        cmd += ["--concurrency", str(concurrency), "--max-bytes", str(max_bytes), "--timeout", str(timeout)]
        cmd += ["--out", str(out)]
        subprocess.run(cmd, cwd=ROOT, env=bench_env(), timeout=timeout + 60, check=True)
        return json.loads(out.read_text())
