"""One idempotent producer's acknowledgement round trip: its throughput, its latency at half that rate, and
where the round trip's time goes.

    python -m bench.round_trip_bench [--backend local|s3|both] [--duration 15] [--tree DIR]
    python -m bench.round_trip_bench --backend local --duration 2 --warmup 0.5        # smoke run

An idempotent producer keeps at most 5 requests unanswered per connection, and an answer waits for the
flush's commit, so one producer's throughput is its bytes in flight over the round trip. The load is the
peer benchmark's: one librdkafka process (bench/kafka_loadgen.py ``--idempotence``), 1 KiB values,
acks=all, linger.ms 20, batch.size 1 MiB, ``--partitions`` 12, uncompressed. One ``strata serve --role
agent`` per backend (``--role all``: the embedded default, whose worker process merges the fresh files
meanwhile; its CPU is reported beside the agent's), run from ``--tree`` (this tree by default: another tree
measures the previous code back to back) with its defaults but for the store and ``--kafka-lanes``:
1. saturation: closed loop for ``--duration`` after ``--warmup``: acknowledged MiB/s, ack p50/p99 (which
   include the client's queue), PUTs per MiB, the agent's CPU per MiB, the agent's mean Kafka produce
   latency (admission to answer: its share of the round trip) and the mean of each flush step
   (``strata_flush_step_seconds``: buffered, upload, turn, commit), and the mean flush size;
2. half rate: the same producer offered half the saturating rate: ack p50/p99;
3. ceilings (local only; ``--no-ceilings`` skips them): the same producer against ``bench.kafka_sink
   --raw`` (requests read with ``struct``, no protocol classes, no CRC check) answering at once, then
   answering only once the batches are durable (bench/durable_log.py's group commit): appended to one log
   and ``fdatasync``ed per round, then written to a new file per round as Strata's local store writes a
   flush (write, ``fsync``, rename, directory ``fsync``), then with a SQLite commit per round after the
   file, as Strata's embedded metadata store commits a flush. What the client, the loopback and the disk
   allow a durable broker on this machine, with Strata's two rules (a file per flush, offsets committed
   before the ack) and without; the step from one to the next is what that step costs.
Targets: on a local directory at least 300 MiB/s, and p99 at most 250 ms at half rate; on S3 (moto, in its
own process) at most 0.15 PUT per MiB.

Every process binds 127.0.0.1 and is stopped at the end. Results: a table per backend on stdout, JSON under
bench/results/; with ``--figures``, the page's figures (area: round trip) under bench/figures/.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import metrics
from bench.harness import ROOT, AgentSpec, log, start_agent, stop_proc
from bench.harness import backend_stores as stores
from bench.kafka_load import KafkaLoad
from bench.kafka_phases import measured_window, sink_runs
from bench.probes import cpu_ms_per_mib, worker_children
from bench.results import Rows, add_output_args, finish_run, markdown_table, page_figures, run_header
from bench.targets import Target

TOPIC = "round-trip"
ONE_PRODUCER_LOCAL_MIB_S = Target(">=", 300.0, "MiB/s")
HALF_RATE_P99_LOCAL_MS = Target("<=", 250.0, "ms")
PUTS_PER_MIB_S3 = Target("<=", 0.15)


def _window(
    args: argparse.Namespace, agent_url: str, bootstrap: str, pid: int, extra: dict[str, int], rate: float
) -> dict[str, Any]:
    """One producer for ``--duration`` (closed loop, or ``rate`` MiB/s offered), with the agent's view."""
    load = KafkaLoad("none", 1, args.duration, rate_mib=rate, idempotence=True)
    pids = {"agent": pid, **extra}
    result, before, after = measured_window(args, agent_url, bootstrap, TOPIC, load, pids)
    stored = result["stored_mib"]
    result["puts_per_mib"] = result["puts"] / stored if stored else None
    mean = metrics.delta_mean(before, after, "strata_kafka_produce_latency_seconds")
    result["agent_produce_ms"] = None if mean is None else mean * 1000
    return result


def _workers(agent_pid: int) -> dict[str, int]:
    """The agent's worker processes (role ``all``), named ``worker0``...; waits for the first to start."""
    deadline = time.monotonic() + 30
    while not (found := worker_children(agent_pid)):
        if time.monotonic() > deadline:
            raise RuntimeError("the agent started no worker process within 30 s")
        time.sleep(0.2)
    return {f"worker{i}": pid for i, pid in enumerate(found)}


def run_backend(args: argparse.Namespace, backend: str, workdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"backend": backend, "role": args.role}
    with stores(backend, workdir, ["strata-round-trip"]) as ((store_args,), extra):
        serve = ["--role", args.role, "--log-level", "warning", *store_args]
        serve += ["--kafka-lanes", str(args.lanes)]
        spec = AgentSpec(serve, kafka_ports=args.lanes, tree=Path(args.tree).resolve())
        agent = start_agent(spec, workdir, f"agent-{backend}")
        try:
            assert agent.bootstrap is not None
            if args.role == "all":  # the background jobs' process, the compaction worker among them
                extra = {**extra, **_workers(agent.pid)}
            metrics.create_topics(agent.url, [TOPIC], args.partitions)
            log(f"[{backend}] one idempotent producer, closed loop, {args.duration:g} s")
            full = _window(args, agent.url, agent.bootstrap, agent.pid, extra, 0.0)
            out["saturation"] = full
            half = round(full["mib_s"] / 2, 1)
            log(f"[{backend}] the same producer at half that rate, {half:g} MiB/s")
            out["half"] = _window(args, agent.url, agent.bootstrap, agent.pid, extra, half)
        finally:
            stop_proc(agent.proc, "agent")
    return out


def ceilings(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Step 3: one idempotent producer against the bare sinks (bench/kafka_phases.py ``SINKS``)."""
    return sink_runs(args, workdir, KafkaLoad("none", 1, args.duration, idempotence=True), TOPIC)


def ceiling_rows(found: dict[str, Any]) -> list[dict[str, Any]]:
    rows = Rows()
    for label, result in found.items():
        lat = result["latency_ms"]
        rows.add(
            f"one idempotent producer against a bare sink, {label}",
            f"{result['mib_s']:.1f} MiB/s, p50 / p99 {lat['p50']:.0f} / {lat['p99']:.0f} ms",
            area="round-trip",
        )
    return rows.rows


def evaluate(r: dict[str, Any]) -> list[dict[str, Any]]:
    rows = Rows()
    local = r["backend"] == "local"
    label = ("local" if local else "S3 (moto)") + (", role all" if r.get("role") == "all" else "")
    area = "round-trip"
    full, half = r["saturation"], r["half"]
    bar = ONE_PRODUCER_LOCAL_MIB_S if local else None
    rows.add(f"one idempotent producer, {label}", round(full["mib_s"], 1), "MiB/s", bar, area=area)
    lat = full["latency_ms"]
    rows.add(f"ack p50 / p99 at saturation, {label}", f"{lat['p50']:.0f} / {lat['p99']:.0f}", "ms", area=area)
    hl = half["latency_ms"]
    rows.add(
        f"ack p50 at half rate ({half['rate_mib_offered']:g} MiB/s), {label}",
        round(hl["p50"], 1),
        "ms",
        area=area,
    )
    bar = HALF_RATE_P99_LOCAL_MS if local else None
    rows.add(f"ack p99 at half rate, {label}", round(hl["p99"], 1), "ms", bar, measured=hl["p99"], area=area)
    ppm = full["puts_per_mib"]
    bar = None if local else PUTS_PER_MIB_S3
    rows.add(
        f"PUTs per MiB at saturation, {label}", None if ppm is None else round(ppm, 3), "", bar, area=area
    )
    rows.add(
        f"agent CPU per MiB, {label}", cpu_ms_per_mib(full["cpu_cores"].get("agent"), full["mib_s"]), "ms"
    )
    workers = [v for k, v in full["cpu_cores"].items() if k.startswith("worker")]
    if workers:
        rows.add(f"worker CPU per MiB, {label}", cpu_ms_per_mib(sum(workers), full["mib_s"]), "ms")
    agent_ms = full["agent_produce_ms"]
    rows.add(
        f"agent's produce latency at saturation (admission to answer), {label}",
        None if agent_ms is None else round(agent_ms, 1),
        "ms",
        area=area,
    )
    steps = "; ".join(f"{k} {v:.1f}" if v is not None else f"{k} -" for k, v in full["steps_ms"].items())
    rows.add(f"flush steps at saturation, mean ms, {label}", steps, area=area)
    mpf = full["mib_per_flush"]
    rows.add(
        f"MiB per flush at saturation, {label}", None if mpf is None else round(mpf, 2), "MiB", area=area
    )
    return rows.rows


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--backend", choices=("local", "s3", "both"), default="both")
    add("--partitions", type=int, default=12)
    add("--duration", type=float, default=15.0, help="each measured window, s")
    add("--warmup", type=float, default=2.0)
    add("--value-bytes", type=int, default=1024)
    add("--lanes", type=int, default=1, help="the agent's --kafka-lanes")
    add(
        "--role",
        choices=("agent", "all"),
        default="agent",
        help="the agent's --role: all (the embedded default) adds the background jobs' process",
    )
    add("--tree", default=str(ROOT), help="the source tree the agent runs from")
    add("--no-ceilings", dest="ceilings", action="store_false", help="skip step 3")
    add_output_args(parser, "round_trip_bench")
    args = parser.parse_args(argv)
    # What bench.kafka_load's producers read from the command line of bench.kafka_bench: the peer load.
    args.value_kind, args.linger_ms, args.batch_bytes, args.queue_mib = "text", 20.0, 1_048_576, 64
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    tree = Path(args.tree).resolve()
    report = run_header("round_trip_bench", argv, ("agents", "broker", "storage", "strata"), tree=tree)
    report["params"] = vars(args)
    started = time.monotonic()
    backends = ["local", "s3"] if args.backend == "both" else [args.backend]
    rows: list[dict[str, Any]] = []
    figures: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="strata-rt-bench-") as tmp:
        for backend in backends:
            (Path(tmp) / backend).mkdir()
            result = run_backend(args, backend, Path(tmp) / backend)
            report[backend] = result
            backend_rows = evaluate(result)
            rows += backend_rows
            figures += page_figures(backend_rows)
        if args.ceilings and "local" in backends:
            (Path(tmp) / "ceilings").mkdir()
            report["ceilings"] = ceilings(args, Path(tmp) / "ceilings")
            found = ceiling_rows(report["ceilings"])
            rows += found
            figures += page_figures(found)
    report["targets"] = rows
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    finish_run(report, args, lambda r: print(markdown_table(r["targets"])), figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
