"""Benchmark of Strata's Kafka door, with a bare asyncio Kafka sink (the ceiling) measured in the same run.

    python -m bench.kafka_bench                       # everything, both backends (~5 min)
    python -m bench.kafka_bench --backend local --compression none --phases ceiling,produce,latency
    python -m bench.kafka_bench --phases overload --overload-procs 6
    python -m bench.kafka_bench --http-compare        # + bench.produce_fetch's HTTP produce, same run
    python -m bench.kafka_bench --backend local --duration 1 --warmup 0.5 --idle 0.5 --producers 1 \\
        --partitions 4 --consumers 1 --overload-procs 1 --overload-instances 1 --overload-duration 1 \\
        --latency-duration 1 --rate-mib 2                              # smoke run

Load generators are librdkafka (confluent-kafka) processes, bench/kafka_loadgen.py, never in the process
they measure: ``--producers`` processes (default 2), 1 KiB values (words, so that lz4 compresses them about
2.4x) with 7-byte keys over ``--partitions`` partitions (default 32, murmur2 as Java's client), acks=all,
idempotence off. MiB/s counts the key + value bytes whose acknowledgement arrives inside the window.

Phases (``--phases``, default all):
1. ceiling: bench/kafka_sink.py, a bare asyncio Kafka server that decodes Produce as Strata does
   (``broker.codec.decode``, then ``storage.records.iter_batches(verify_crc=True)`` on every partition) and
   answers ApiVersions, Metadata and Produce at once with fake offsets; closed-loop producers, once per codec.
   With the latency phase too (``--no-latency-floor`` skips it), phase 3's load against ``kafka_sink --raw``
   answering at once, then durable in three steps (bench/kafka_phases.py ``SINKS``: one log, a file per
   round, a file and a SQLite commit per round): the floor under the latency figures on this machine.
2. produce: ``strata serve --role agent --kafka-port P`` (--flush-interval-ms 250, --buffer-bytes 64 MiB),
   the same generator with the same parameters, once per codec (``--compression none,lz4``; one topic per
   codec). A codec the agent (or the sink) refuses is reported as that codec's error, and a codec the client
   did not really use is flagged (librdkafka sends lz4 batches uncompressed to a broker that does not
   advertise FindCoordinator). PUTs, flushes and the flush steps' means (the JSON's ``steps_ms``) come
   from the agent's /metrics; CPU of the agent (and moto) from /proc/PID/stat over the window, so "agent
   CPU per MiB" is agent core-seconds / MiB acknowledged.
   librdkafka's statistics give the ProduceRequests sent, their mean size and the most awaiting an answer.
3. latency: the same agent, ``--rate-mib`` (default 20) offered at a fixed rate, linger.ms 5, uncompressed,
   once per flush class, each after a ``sync`` (what the produce phases left dirty is written first):
   p50/p99 of produce() -> acknowledgement (librdkafka's ``Message.latency()``) of every record produced in
   the window, however late its acknowledgement (up to the 30 s drain; records never acknowledged are
   counted). Then the same rate and linger.ms from Kafka's Java producer (``--no-java-latency`` skips it):
   ``kafka-producer-perf-test`` with Java's defaults (idempotent, 5 requests in flight), its first
   ``--java-warmup`` seconds left out (bench/java_producer.py). librdkafka sends one partition per
   ProduceRequest and Java every ready partition in one, so the two put very different request rates on
   the agent for the same bytes. Then PUTs per flush over phases 2-3, and PUTs while idle for ``--idle``
   seconds (target 0).
4. fetch: a fresh agent on the same bucket and metadata (cold cache) serves ``--consumers`` confluent-kafka
   Consumers (partitions assigned from offset 0, fetch.max.bytes 64 MiB) that read each codec topic back to
   its high watermark. MiB/s of key + value bytes, and GETs per MiB from /metrics.
5. overload: a fresh agent with ``--overload-buffer-bytes`` (64 MiB) and ``--overload-procs`` x
   ``--overload-instances`` producers with big batches (linger.ms 100, batch.size 1 MB, 64 MiB queue each);
   VmRSS sampled every 50 ms and VmHWM, against buffer + 150 MiB.
With ``--http-compare`` the run ends with ``python -m bench.produce_fetch --backend local --phases produce``
(same duration) for the HTTP path's agent CPU per MiB; otherwise the table shows the committed figure
(bench/figures/).

Backends (``--backend local|s3|both``): a local directory, or moto S3 in its own process
(bench/moto_server.py); SQLite metadata in both. Every process binds 127.0.0.1 and is stopped at the end
(SIGTERM, then SIGKILL); every phase is bounded in time. Results: a table per backend on stdout, JSON under
bench/results/; with ``--figures``, the page's figures under bench/figures/ (see bench/README.md).
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

from bench import report as page
from bench import targets
from bench.harness import ROOT, MiB, log
from bench.kafka_phases import ceiling_phase, http_compare, latency_floor, run_backend, topic_name
from bench.probes import cpu_ms_per_mib, other_cores
from bench.results import (
    Rows,
    add_output_args,
    backend_figures,
    finish_run,
    markdown_table,
    run_header,
)


def codec_label(codec: str) -> str:
    return "uncompressed" if codec == "none" else codec


def wire(p: dict[str, Any]) -> str:
    """librdkafka's view of the wire: requests sent; their mean KiB; the most awaiting an answer at once."""
    mean = p.get("request_bytes_mean")
    kib = f"{mean / 1024:.1f}" if mean else "-"
    return f"{p.get('requests_sent', 0)}; {kib}; {p.get('max_requests_waiting_response', 0)}"


# --- report -------------------------------------------------------------------------------------------------
def _ceiling_rows(rows: Rows, ceiling: dict[str, Any], sink_totals: dict[str, int] | None) -> None:
    for codec, c in ceiling.items():
        if "error" in c:
            rows.add(f"sink ceiling, {codec}", c["error"])
            continue
        rows.add(f"sink ceiling, {codec}", round(c["mib_s"], 1), "MiB/s")
        rows.add(f"sink CPU per MiB, {codec}", cpu_ms_per_mib(c["cpu_cores"].get("server"), c["mib_s"]), "ms")
        rows.add(f"sink requests: sent; mean KiB; most awaiting an answer, {codec}", wire(c))
        prefix = topic_name(codec) + " codec "
        by_codec = {k.removeprefix(prefix): v for k, v in (sink_totals or {}).items() if k.startswith(prefix)}
        if codec != "none" and by_codec and set(by_codec) == {"0"}:
            rows.add(f"sink got {codec} batches", "no: every batch was uncompressed", ok=False)


def _produce_rows(rows: Rows, codec: str, p: dict[str, Any], ceiling: dict[str, Any], local: bool) -> None:
    label = codec_label(codec)
    if "error" in p:
        rows.add(f"produce, {label}", p["error"], ok=False)
        return
    bar = targets.KAFKA_PRODUCE_MIB_S if local and codec == "none" else None
    rows.add(f"produce, {label}", round(p["mib_s"], 1), "MiB/s", bar, measured=p["mib_s"], area="kafka")
    sink = ceiling.get(codec, {}).get("mib_s")
    if sink:
        ratio = 100 * p["mib_s"] / sink
        shown = f"{ratio:.1f} % (sink {sink:.1f} MiB/s)"
        rows.add(
            f"produce / sink ceiling, {label}",
            shown,
            "",
            targets.KAFKA_CEILING_RATIO,
            measured=ratio,
            area="kafka",
        )
    agent_ms = cpu_ms_per_mib(p["cpu_cores"].get("agent"), p["mib_s"])
    rows.add(f"agent CPU per MiB produced, {label}", agent_ms, "ms", area="kafka")
    rows.add(
        f"agent / producers CPU, {label}",
        f"{p['cpu_cores'].get('agent')} / {p['loadgen_cpu_cores']}",
        "cores",
    )
    rows.add(f"other load during produce, {label}", other_cores(p), "cores")
    rows.add(f"requests: sent; mean KiB; most awaiting an answer, {label}", wire(p))
    lat = p["latency_ms"]
    if lat["p50"] is not None:
        rows.add(
            f"ack latency p50 / p99 under closed loop, {label}", f"{lat['p50']:.0f} / {lat['p99']:.0f}", "ms"
        )
    if p["errors"]:
        rows.add(f"failed deliveries, {label}", p["errors"], target="= 0", ok=False)
    if p.get("stored_mib") and p["acked"]:
        stored = p["stored_mib"] * MiB / (p["acked"] * p["record_bytes"])
        rows.add(f"bytes stored / key+value bytes acked, {label}", round(stored, 2))
        if codec != "none" and stored > 0.9:
            # librdkafka enables lz4 only with brokers that advertise FindCoordinator ("LZ4" feature).
            rows.add(
                f"{codec} really used", f"no: the client sent uncompressed batches ({stored:.2f})", ok=False
            )


def _latency_rows(rows: Rows, lat: dict[str, Any], backend: str) -> None:
    """One flush class's latency phase; the standard class keeps the figures' names from before classes."""
    rate = f"{lat.get('rate_mib_offered', 0):g} MiB/s"
    flush_class = lat.get("flush_class", "standard")
    suffix = "" if flush_class == "standard" else f", {flush_class} topic"
    if lat.get("error") or lat["latency_ms"]["p50"] is None:
        rows.add(f"ack latency at {rate}{suffix}", lat.get("error", "no acknowledgement"), ok=False)
        return
    bars = (
        (targets.PRODUCE_P50_MS, targets.PRODUCE_P99_MS)
        if flush_class == "standard"
        else (targets.LOW_LATENCY_P50_MS[backend], targets.LOW_LATENCY_P99_MS[backend])
    )
    for q, bar in zip(("p50", "p99"), bars, strict=True):
        value = lat["latency_ms"][q]
        rows.add(
            f"ack latency {q} at {rate}{suffix}", round(value, 1), "ms", bar, measured=value, area="kafka"
        )
    rows.add(f"PUTs per second at {rate}{suffix}", round(lat["puts_s"], 1), "/s", area="kafka")
    steps = "; ".join(f"{k} {v:.1f}" if v is not None else f"{k} -" for k, v in lat["steps_ms"].items())
    rows.add(f"flush steps at {rate}{suffix}, mean ms", steps, area="kafka")
    if "agent_ms" in lat:  # figures files from before the breakdown lack it
        rows.add(f"ack at {rate}{suffix}: {BREAKDOWN}", breakdown(lat), area="kafka")
    rows.add(f"latency phase acknowledged{suffix}", round(lat["mib_s"], 1), "MiB/s")
    missing = lat["unfinished"] + sum(lat["errors"].values())
    rows.add(f"latency phase: records never acknowledged{suffix}", missing, "", targets.MISSING_ACKS)
    rows.add(f"latency phase requests: sent; mean KiB; most awaiting an answer{suffix}", wire(lat))
    if "java" in lat:
        # The low-latency targets hold for any client. The standard class's were set for this load, and
        # Java's defaults hold too little in flight for a standard topic on S3 (docs/kafka-clients.md).
        _java_rows(rows, lat["java"], f"{rate}{suffix}", bars if flush_class != "standard" else (None, None))


def _java_rows(rows: Rows, java: dict[str, Any], label: str, bars: tuple[targets.Target | None, ...]) -> None:
    """The same load from Kafka's Java producer (``kafka_phases.java_latency``)."""
    props = java.get("properties") or []
    who = "Kafka's Java producer" + (f" ({', '.join(props)})" if props else "")
    if "error" in java:
        rows.add(f"ack latency at {label}, {who}", java["error"], ok=False)
        return
    for q, bar in zip(("p50", "p99"), bars, strict=True):
        value = java["latency_ms"][q]
        rows.add(f"ack latency {q} at {label}, {who}", value, "ms", bar, measured=value, area="kafka")
    rows.add(f"ack at {label}, {who}: {BREAKDOWN}", breakdown(java), area="kafka")
    shown = f"{java['requests_s']:.0f}; {java['mib_s']:.1f}; {java['cpu_cores'].get('java')}"
    if java.get("behind_s", 0) > 3:
        shown += f" (fell {java['behind_s']:.0f} s behind the rate: the agent's figures are of its warm-up)"
    rows.add(f"{who} at {label}: requests/s; MiB/s acknowledged; its cores", shown)


BREAKDOWN = "mean ms in all; in the agent; flush cycle ms; agent CPU µs per request"


def breakdown(lat: dict[str, Any]) -> str:
    """The latency window's ``BREAKDOWN``: the client's mean per record, the agent's per request
    (admission to answer), the time between flushes and the agent's CPU per request."""
    parts = [lat["latency_ms"].get("mean"), lat["agent_ms"], lat["flush_cycle_ms"]]
    shown = [f"{v:.1f}" if v is not None else "-" for v in parts]
    return "; ".join([*shown, f"{lat['agent_us_per_request']:.0f}"])


def _floor_rows(rows: Rows, floor: dict[str, Any]) -> None:
    """The latency phase's load against each bare sink (``latency_floor``): the floor under the figures."""
    for label, r in floor.items():
        lat = r["latency_ms"]
        if lat["p50"] is None:
            rows.add(f"ack latency floor, bare sink {label}", "no acknowledgement", ok=False)
            continue
        rate = f"{r.get('rate_mib_offered', 0):g} MiB/s"
        shown = f"{lat['p50']:.1f} / {lat['p99']:.1f} (sink {r['cpu_cores'].get('sink')} cores)"
        rows.add(f"ack latency p50 / p99 at {rate}, bare sink {label}", shown, "ms", area="kafka")


def _puts_rows(rows: Rows, pf: dict[str, Any]) -> None:
    ppf = pf["puts_per_flush"]
    shown = round(ppf, 3) if ppf is not None else None
    rows.add(
        "PUTs per flush (produce + latency)", shown, "", targets.PUTS_PER_FLUSH, measured=ppf, area="kafka"
    )
    rows.add("flushes; MiB per flush", f"{pf['flushes']:g}; {round(pf['mib_per_flush'] or 0, 2)}")
    rows.add(f"PUTs while idle ({pf['idle_s']:g} s)", pf["idle_puts"], "", targets.IDLE_PUTS, area="kafka")


def _fetch_rows(rows: Rows, topic: str, f: dict[str, Any], local: bool) -> None:
    label = codec_label(topic.removeprefix(topic_name("")))
    complete = f["records"] == f["expected_records"] and not f["unfinished_partitions"]
    mib_s = f["mib_s"] or 0.0
    bar = targets.KAFKA_FETCH_MIB_S if local and topic == topic_name("none") else None
    rows.add(f"fetch catch-up, cold, {label}", round(mib_s, 1), "MiB/s", bar, measured=mib_s, area="kafka")
    rows.add(
        f"fetch records read / expected, {label}",
        f"{f['records']} / {f['expected_records']}",
        target="equal",
        ok=complete,
    )
    gpm = f["gets_per_mib"]
    shown = round(gpm, 3) if gpm is not None else None
    rows.add(
        f"fetch GETs per MiB read, {label}", shown, "", targets.FETCH_GETS_PER_MIB, measured=gpm, area="kafka"
    )
    rows.add(f"agent CPU per MiB fetched, {label}", cpu_ms_per_mib(f["cpu_cores"].get("agent"), mib_s), "ms")
    if f["errors"]:
        rows.add(f"consumer errors, {label}", f["errors"], target="none", ok=False)


def _overload_rows(rows: Rows, o: dict[str, Any]) -> None:
    peak = max(o["peak_rss_sampled_mib"], o["vmhwm_mib"])
    bound = targets.agent_rss(o["buffer_bytes_limit_mib"])
    rows.add(
        "Kafka agent peak RSS under overload", round(peak, 1), "MiB", bound, measured=peak, area="memory"
    )
    rows.add("max strata_buffer_bytes seen", round(o["max_buffer_bytes_mib"], 1), "MiB")
    rows.add("overload acknowledged", round(o["mib_s"], 1), "MiB/s")
    rows.add("overload requests: sent; mean KiB; most awaiting an answer", wire(o))


def committed_http_cpu() -> str:
    """The HTTP path's agent CPU per MiB produced (local) as the committed figures give it."""
    found = page.current().get(("http-produce", "agent CPU per MiB produced, local"))
    if found is None:
        return "no committed figure (bench/figures/)"
    row, source = found
    return f"{row['value']} ({source['date']}, bench/figures/)"


def evaluate(
    r: dict[str, Any],
    ceiling: dict[str, Any],
    sink_totals: dict[str, int] | None,
    http: dict[str, Any] | None,
    floor: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Every figure with its target and pass/miss (None: no target here, shown for the analysis)."""
    rows = Rows()
    local = r["backend"] == "local"
    _ceiling_rows(rows, ceiling, sink_totals)
    for codec, p in r.get("produce", {}).items():
        _produce_rows(rows, codec, p, ceiling, local)
    if http is not None:
        value = http.get("error") or http["agent_cpu_ms_per_mib"]
        rows.add("HTTP path agent CPU per MiB (same run, local)", value, "" if "error" in http else "ms")
    elif r.get("produce"):
        rows.add("HTTP path agent CPU per MiB, local", committed_http_cpu())
    for lat in (r.get("latency") or {}).values():
        _latency_rows(rows, lat, r["backend"])
    if local and floor:
        _floor_rows(rows, floor)
    if r.get("puts") is not None:
        _puts_rows(rows, r["puts"])
    for topic, f in r.get("fetch", {}).items():
        _fetch_rows(rows, topic, f, local)
    if r.get("fetch_agent_peak_rss_mib") is not None:
        peak = r["fetch_agent_peak_rss_mib"]
        bound = targets.fetch_agent_rss()
        rows.add(
            "Kafka agent peak RSS during catch-up", round(peak, 1), "MiB", bound, measured=peak, area="memory"
        )
    if r.get("overload") is not None:
        _overload_rows(rows, r["overload"])
    return rows.rows


# --- command line -------------------------------------------------------------------------------------------
PHASES = ("ceiling", "produce", "latency", "fetch", "overload")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--backend", choices=("local", "s3", "both"), default="both")
    add("--phases", default=",".join(PHASES), help=", ".join(PHASES))
    add("--compression", default="none,lz4", help="codecs, comma-separated (librdkafka names)")
    add("--producers", type=int, default=2, help="producer processes")
    add("--partitions", type=int, default=32)
    add("--value-bytes", type=int, default=1024)
    add("--value-kind", choices=("text", "random"), default="text")
    add("--linger-ms", type=float, default=5.0, help="throughput phases")
    add("--batch-bytes", type=int, default=1_000_000, help="librdkafka batch.size")
    add("--queue-mib", type=int, default=64, help="librdkafka queue bound per producer")
    add("--duration", type=float, default=10.0, help="measured window of each produce run, s")
    add("--warmup", type=float, default=2.0)
    add("--idle", type=float, default=3.0, help="idle window for the 0-PUT check")
    add("--rate-mib", type=float, default=20.0, help="latency phase: offered MiB/s (total)")
    add("--latency-linger-ms", type=float, default=5.0)
    add("--latency-duration", type=float, default=None, help="default: --duration")
    add("--latency-classes", default="standard,low-latency", help="latency phase: one run per flush class")
    add(
        "--no-java-latency",
        dest="java_latency",
        action="store_false",
        help="latency phase: skip the second run per class from Kafka's Java producer",
    )
    add("--java-warmup", type=float, default=5.0, help="Java producer: seconds left out of its figures")
    add(
        "--java-property",
        action="append",
        default=[],
        help="Java producer: a setting, NAME=VALUE (the tool refuses a value with '=')",
    )
    add(
        "--no-latency-floor",
        dest="latency_floor",
        action="store_false",
        help="with ceiling and latency: skip the latency load against the bare sinks",
    )
    add("--flush-interval-ms", type=int, default=250)
    add("--buffer-bytes", type=int, default=64 * MiB)
    add("--consumers", type=int, default=2, help="consumer processes for the catch-up")
    add("--fetch-max-bytes", type=int, default=64 * MiB)
    add("--partition-max-bytes", type=int, default=8 * MiB)
    add("--fetch-timeout", type=float, default=60.0)
    add("--overload-procs", type=int, default=4)
    add("--overload-instances", type=int, default=2, help="producers per overload process")
    add("--overload-linger-ms", type=float, default=100.0)
    add("--overload-batch-bytes", type=int, default=1_000_000)
    add("--overload-queue-mib", type=int, default=64)
    add("--overload-duration", type=float, default=8.0)
    add("--overload-buffer-bytes", type=int, default=64 * MiB)
    add("--http-compare", action="store_true", help="also run bench.produce_fetch's HTTP produce")
    add("--keep", action="store_true", help="keep the temporary directory (logs, data)")
    add("--tree", default=str(ROOT), help="the tree the agents run from (another: back to back)")
    add_output_args(parser, "kafka_bench")
    args = parser.parse_args(argv)
    args.phases = [p for p in PHASES if p in set(args.phases.split(","))]
    if not args.phases or not set(args.phases) <= set(PHASES):
        parser.error(f"--phases takes some of {', '.join(PHASES)}")
    args.compression = [c for c in args.compression.split(",") if c]
    args.latency_classes = [c for c in args.latency_classes.split(",") if c]
    if args.java_warmup <= 0:
        parser.error("--java-warmup must be over 0: the tool prints steady-state figures only after one")
    return args


def run_all(args: argparse.Namespace, report: dict[str, Any], workdir: Path) -> None:
    if "ceiling" in args.phases:
        try:
            report["ceiling"] = ceiling_phase(args, workdir)
        except (RuntimeError, OSError) as exc:
            log(f"[ceiling] failed: {exc}")
            report["ceiling"] = {"error": str(exc)}
        if "latency" in args.phases and args.latency_floor:
            (workdir / "floor").mkdir()
            try:
                report["latency_floor"] = latency_floor(args, workdir / "floor")
            except (RuntimeError, OSError) as exc:
                log(f"[ceiling] latency floor failed: {exc}")
    for backend in ["local", "s3"] if args.backend == "both" else [args.backend]:
        (workdir / backend).mkdir()
        try:
            report["backends"][backend] = run_backend(args, backend, workdir / backend)
        except (RuntimeError, OSError, httpx.HTTPError, subprocess.SubprocessError) as exc:
            log(f"[{backend}] failed: {exc}")
            report["backends"][backend] = {"backend": backend, "error": str(exc)}
    if args.http_compare:
        log("[http] python -m bench.produce_fetch --backend local --phases produce")
        try:
            report["http"] = http_compare(args, workdir)
        except (OSError, KeyError, subprocess.SubprocessError) as exc:
            report["http"] = {"error": str(exc)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    packages = ("agents", "api", "broker", "storage", "planner", "strata")
    report = run_header("kafka_bench", argv, packages, tree=Path(args.tree).resolve())
    report.update({"params": vars(args), "ceiling": {}, "backends": {}, "http": None})
    workdir = Path(tempfile.mkdtemp(prefix="strata-kbench-"))
    started = time.monotonic()
    try:
        run_all(args, report, workdir)
    finally:
        if args.keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    ceiling = {k: v for k, v in report["ceiling"].items() if isinstance(v, dict) and k != "sink_totals"}
    for r in report["backends"].values():
        if "error" not in r:
            totals = report["ceiling"].get("sink_totals")
            r["targets"] = evaluate(r, ceiling, totals, report["http"], report.get("latency_floor"))
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    report["params"] = {k: v for k, v in report["params"].items() if k != "backend_now"}
    finish_run(report, args, print_report, backend_figures(report))
    return 0


def print_report(report: dict[str, Any]) -> None:
    if "error" in report["ceiling"]:
        print(f"\nceiling failed: {report['ceiling']['error']}")
    for backend, r in report["backends"].items():
        print(f"\n### {backend}\n")
        print(markdown_table(r["targets"]) if "targets" in r else f"failed: {r.get('error')}")
        for codec, p in r.get("produce", {}).items():
            if "cpu_cores" in p and other_cores(p) > 1.0:
                busy = other_cores(p)
                print(f"\nWARNING: other processes used {busy} of {os.cpu_count()} cores ({codec}); rerun")


if __name__ == "__main__":
    sys.exit(main())
