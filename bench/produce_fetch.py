"""Produce / fetch benchmark of Strata's HTTP door, with the bare-FastAPI ceiling measured in the same run.

    python -m bench.produce_fetch [--backend local|s3|both] [--clients N] [--duration S]
                                  [--records-per-request R] [--py-spy PATH] [--figures] ...
    python -m bench.produce_fetch --duration 1 --warmup 0.5 --idle 0.5 --clients 8 --partitions 4 \\
        --overload-clients 8 --overload-records-per-request 100 --overload-duration 1   # smoke run

For each backend (a local directory, or moto S3 in its own process; SQLite metadata in both cases):
1. ceiling: a bare FastAPI app (bench/bare_app.py: the same ProduceIn body model, fake offsets, uvicorn with
   uvloop + httptools like ``strata serve``) driven by the same load generator with the same parameters,
   once before the agent's produce window and once after it; the ceiling is their mean (see
   ``bracketed_ceiling``);
2. produce: ``strata serve --flush-interval-ms 250`` as a subprocess, N closed-loop HTTP clients in a separate
   process (bench/loadgen.py), 1 KiB values, keyed records over the topic's partitions. MiB/s counts record
   keys + values. PUTs and flushes are read from the agent's /metrics before and after;
3. idle: 3 s without requests, PUTs counted again (target 0);
4. fetch catch-up: a fresh agent on the same bucket and metadata (cold cache; --fetch-warm reuses the
   producing agent) reads everything back from offset 0, one consumer per partition, 8 MiB max_bytes;
5. overload: a fresh agent (--buffer-bytes 64 MiB) hammered with many clients sending ~1 MiB requests; its
   RSS (VmRSS sampled every 50 ms, and VmHWM) against buffer limit + 150 MiB, and the 429s counted.

--phases picks produce (1-4) and/or overload (5); --gc-stats, --py-spy and --mem-trace profile the agent (GC,
CPU, memory: bench/agent_memtrace.py writes tracemalloc's top allocation sites near the peak). CPU per MiB
and minor page faults per MiB (a page the kernel had to map and zero on first touch) are read from /proc
for the agent and the bare app.
Every process it starts binds 127.0.0.1 only and is stopped at the end (SIGTERM, then SIGKILL). Every phase is
bounded in time. Results: a table on stdout and JSON under bench/results/ (ignored by git); with
``--figures``, the page's figures under bench/figures/ (see bench/README.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench import targets
from bench.harness import MiB, log
from bench.http_phases import run_backend
from bench.probes import cpu_ms_per_mib, other_cores
from bench.results import (
    Rows,
    add_output_args,
    backend_figures,
    finish_run,
    markdown_table,
    run_header,
)


# --- report -----------------------------------------------------------------------------------------------
def _produce_rows(rows: Rows, r: dict[str, Any]) -> None:
    p, b = r["produce"], r["bare"]
    think = p.get("think_ms") or 0.0
    # A load with think time measures latency only: its throughput is not the figure the targets mean.
    main = None if think else "http-produce"
    bar = targets.HTTP_PRODUCE_LOCAL_MIB_S if r["backend"] == "local" else targets.HTTP_PRODUCE_MIB_S
    rows.add("produce throughput", round(p["mib_s"], 1), "MiB/s", bar, measured=p["mib_s"], area=main)
    rows.add("produce records/s", round(p["records_s"]), "rec/s")
    ratio = 100 * p["mib_s"] / b["mib_s"] if b["mib_s"] else None
    runs = " / ".join(f"{run['mib_s']:.1f}" for run in b.get("runs", [b]))
    shown = f"{ratio:.1f} % (bare app {runs} MiB/s)" if ratio is not None else None
    rows.add(
        "produce / bare FastAPI ceiling", shown, "", targets.HTTP_CEILING_RATIO, measured=ratio, area=main
    )
    agent_ms = cpu_ms_per_mib(p["cpu_cores"].get("agent"), p["mib_s"])
    bare_ms = cpu_ms_per_mib(b["cpu_cores"].get("server"), b["mib_s"])
    rows.add("agent CPU per MiB produced", f"{agent_ms} (bare app {bare_ms})", "ms", area=main)
    if agent_ms and bare_ms:
        rows.add(
            "ceiling ratio by CPU cost (bare / agent)", round(100 * bare_ms / agent_ms, 1), "%", area=main
        )
    rows.add("agent minor page faults per MiB", faults_per_mib(p, "agent"))
    rows.add("bare server minor page faults per MiB", faults_per_mib(b, "server"))
    rows.add(
        "agent / load generator CPU", f"{p['cpu_cores'].get('agent')} / {p['loadgen_cpu_cores']}", "cores"
    )
    rows.add("other load during produce", other_cores(p), "cores")
    load = f"{p['clients']} closed-loop clients" + (f", 0-{think:g} ms think time" if think else "")
    for q, bar in (("p50", targets.PRODUCE_P50_MS), ("p99", targets.PRODUCE_P99_MS)):
        value = p["latency_ms"][q]
        rows.add(
            f"produce latency {q} ({load})", round(value, 1), "ms", bar, measured=value, area="http-produce"
        )
    ppf = p["puts_per_flush"]
    rows.add(
        "PUTs per flush", round(ppf, 3) if ppf else None, "", targets.PUTS_PER_FLUSH, measured=ppf, area=main
    )
    rows.add(
        "PUTs per second under load",
        round(p["puts_s"], 2),
        "/s",
        targets.PUTS_PER_S,
        measured=p["puts_s"],
        area=main,
    )
    rows.add("MiB per flush", round(p["mib_per_flush"] or 0, 2), "MiB")
    mean_ms = round(1000 * (p["flush_seconds_mean"] or 0))
    rows.add("flush upload + commit, mean", mean_ms, "ms", area=main)
    rows.add(f"PUTs while idle ({p['idle_s']:g} s)", p["idle_puts"], "", targets.IDLE_PUTS, area=main)


def _throughput_rows(rows: Rows, r: dict[str, Any]) -> None:
    t, bt = r["throughput"], r["bare_throughput"]
    name = f"{t['clients']} x {t['records_per_request']} records"
    bar = targets.HTTP_PRODUCE_LOCAL_MIB_S
    rows.add(f"produce throughput, {name}", round(t["mib_s"], 1), "MiB/s", bar, measured=t["mib_s"])
    rows.add(f"bare FastAPI ceiling, {name}", round(bt["mib_s"], 1), "MiB/s")
    ratio = 100 * t["mib_s"] / bt["mib_s"] if bt["mib_s"] else None
    shown = round(ratio, 1) if ratio is not None else None
    rows.add(f"produce / ceiling, {name}", shown, "%", targets.HTTP_CEILING_RATIO, measured=ratio)
    refused = sum(v for k, v in t["status"].items() if k != "200")
    rows.add(f"requests refused or failed, {name}", refused, "", targets.REFUSED)
    rows.add(
        f"agent CPU per MiB produced, {name}", cpu_ms_per_mib(t["cpu_cores"].get("agent"), t["mib_s"]), "ms"
    )


def _fetch_rows(rows: Rows, f: dict[str, Any]) -> None:
    complete = f["records"] == f["expected_records"]
    ok = complete and targets.HTTP_FETCH_MIB_S.ok(f["mib_s"])
    mib_s = round(f["mib_s"], 1) if f["mib_s"] is not None else None
    rows.add(
        f"fetch catch-up ({f['cache']} cache)",
        mib_s,
        "MiB/s",
        targets.HTTP_FETCH_MIB_S,
        ok=ok,
        area="http-fetch",
    )
    # Per MiB served (key and value bytes the consumers received), not per MiB read from the store:
    # reading the same files again shows as read amplification, not as fewer GETs per MiB.
    served_mib = f["payload_bytes"] / MiB
    per_mib = f["gets"] / served_mib if served_mib else None
    shown = f"{per_mib:.3f}" if per_mib is not None else None
    rows.add(
        "fetch GETs per MiB served",
        shown,
        "",
        targets.FETCH_GETS_PER_MIB,
        measured=per_mib,
        area="http-fetch",
    )
    amplification = round(f["store_read_mib"] / served_mib, 2) if served_mib else None
    rows.add("fetch MiB read from the store per MiB served", amplification, area="http-fetch")
    rows.add("agent minor page faults per MiB fetched", faults_per_mib(f, "agent"))
    ms = cpu_ms_per_mib(f["cpu_cores"].get("agent"), f["mib_s"])
    rows.add("agent CPU per MiB fetched", ms, "ms", area="http-fetch")


def _overload_rows(rows: Rows, o: dict[str, Any]) -> None:
    peak = max(o["peak_rss_sampled_mib"], o["vmhwm_mib"])
    bound = targets.agent_rss(o["buffer_bytes_limit_mib"])
    rows.add("HTTP agent peak RSS under overload", round(peak, 1), "MiB", bound, measured=peak, area="memory")
    rows.add(
        "max strata_buffer_bytes seen", round(o["max_buffer_bytes_mib"], 1), "MiB", str(targets.BUFFER_MIB)
    )
    rows.add("429 answers under overload", o["http_429"])


def evaluate(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Every figure with its target and pass/miss (None: no target, shown for the analysis)."""
    rows = Rows()
    if "produce" in r:
        _produce_rows(rows, r)
    if "throughput" in r:
        _throughput_rows(rows, r)
    if "fetch" in r:
        _fetch_rows(rows, r["fetch"])
    if r.get("overload") is not None:
        _overload_rows(rows, r["overload"])
    return rows.rows


def faults_per_mib(phase: dict[str, Any], name: str) -> float | None:
    """Minor page faults a process took per MiB of payload in a phase (None if not measured)."""
    faults: int | None = phase.get("minor_faults", {}).get(name)
    payload_mib: float
    if "payload_bytes" in phase:  # fetch
        payload_mib = phase["payload_bytes"] / MiB
    else:  # produce: the CPU window is the load's measured window
        payload_mib = (phase.get("mib_s") or 0.0) * phase.get("window_s", 0.0)
    if faults is None or not payload_mib:
        return None
    return round(faults / payload_mib, 1)


# --- command line -------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--backend", choices=("local", "s3", "both"), default="both")
    add("--clients", type=int, default=128, help="concurrent closed-loop produce clients")
    add("--records-per-request", type=int, default=100)
    add(
        "--throughput-records-per-request",
        type=int,
        default=0,
        help="records per request of an extra load with more bytes in flight (0: none); see throughput_phase",
    )
    add("--value-bytes", type=int, default=1024)
    add("--topics", type=int, default=1)
    add("--partitions", type=int, default=32, help="total, split evenly over the topics")
    add("--duration", type=float, default=10.0, help="measured produce window, seconds")
    add("--warmup", type=float, default=2.0)
    add("--idle", type=float, default=3.0, help="idle window for the 0-PUT check")
    add("--loadgen-procs", type=int, default=1, help="load generator processes")
    add(
        "--loadgen-client",
        choices=("aiohttp", "httpx"),
        default="aiohttp",
        help="the produce load's HTTP client",
    )
    add("--flush-interval-ms", type=int, default=250)
    add("--buffer-bytes", type=int, default=64 * MiB)
    add("--role", choices=("agent", "all"), default="agent")
    add("--fetch-concurrency", type=int, default=8)
    add("--fetch-max-bytes", type=int, default=8 * MiB)
    add("--fetch-timeout", type=float, default=30.0)
    add(
        "--fetch-warm",
        action="store_true",
        help="fetch from the producing agent (warm cache), not a fresh one",
    )
    add("--think-ms", type=float, default=0.0, help="produce clients pause uniform 0..T ms after each answer")
    add("--overload-clients", type=int, default=128)
    add("--overload-records-per-request", type=int, default=1000)
    add("--overload-duration", type=float, default=8.0)
    add("--overload-buffer-bytes", type=int, default=64 * MiB)
    add("--phases", default="produce,overload", help="produce (with ceiling, idle and fetch), overload")
    add("--py-spy", default=None, help="path of a py-spy binary: profile produce and fetch")
    add(
        "--gc-stats", action="store_true", help="run the agent under bench/agent_gcstats.py (GC pause totals)"
    )
    add(
        "--mem-trace",
        action="store_true",
        help="run the agent under bench/agent_memtrace.py (tracemalloc top sites near the peak; slow)",
    )
    add("--keep", action="store_true", help="keep the temporary directory (logs, data)")
    add_output_args(parser, "produce_fetch")
    args = parser.parse_args(argv)
    args.phases = sorted(set(args.phases.split(",")))
    if not set(args.phases) <= {"produce", "overload"}:
        parser.error("--phases takes produce and/or overload")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.py_spy and not shutil.which(args.py_spy):
        log(f"py-spy not found at {args.py_spy}")
        return 2
    report = run_header("produce_fetch", argv, ("agents", "api", "storage", "planner", "strata"))
    args.run_id = report["run_id"]
    report["params"] = {k: v for k, v in vars(args).items() if k not in ("run_id", "backend_now")}
    report["backends"] = {}
    backends = ["local", "s3"] if args.backend == "both" else [args.backend]
    workdir = Path(tempfile.mkdtemp(prefix="strata-bench-"))
    started = time.monotonic()
    try:
        for backend in backends:
            (workdir / backend).mkdir()
            try:
                r = run_backend(args, backend, workdir / backend)
                r["targets"] = evaluate(r)
            except (RuntimeError, OSError, httpx.HTTPError, subprocess.SubprocessError) as exc:
                log(f"[{backend}] failed: {exc}")
                r = {"backend": backend, "error": str(exc)}
            report["backends"][backend] = r
    finally:
        if args.keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    finish_run(report, args, print_report, backend_figures(report))
    return 0


def print_report(report: dict[str, Any]) -> None:
    for backend, r in report["backends"].items():
        print(f"\n### {backend}\n")
        print(markdown_table(r["targets"]) if "targets" in r else f"failed: {r.get('error')}")
        if "produce" in r and other_cores(r["produce"]) > 1.0:
            busy = other_cores(r["produce"])
            print(f"\nWARNING: other processes used {busy} of {os.cpu_count()} cores while producing; rerun")


if __name__ == "__main__":
    sys.exit(main())
