"""Transactional produce against idempotent produce, on one agent: what transactions cost.

    python -m bench.txn_bench [--producers 2] [--duration 15] [--commit-ms 100]
    python -m bench.txn_bench --producers 1 --duration 3 --warmup 1   # smoke run

One ``strata serve --role agent`` on the embedded default (local directory, SQLite; Kafka on a free port)
and a topic of ``--partitions`` partitions. Two windows of ``--duration`` seconds, each with ``--producers``
librdkafka producer processes (``produce`` below) writing 1 KiB records to random partitions, acks=all,
closed loop (as much as they can):
1. idempotent: ``enable.idempotence``; each producer's queue is bounded (8 MiB);
2. transactional: ``transactional.id``, one transaction per ``--commit-ms`` (begin, produce, commit).
For each window: acknowledged MiB/s (a transactional record counts once its transaction committed), and
for the transactional one the commit latency p50 / p99 as the client sees it (``commit_transaction``:
flushing what is unacknowledged, then EndTxn), EndTxn alone p50 / p99 from the agent's
``strata_txn_end_seconds`` histogram (upper bucket bounds), and the metadata store's write transactions
per transaction (SQLite's WAL index, bench.group_views.StoreWrites; flush commits, which both windows
have, are counted too, so the idempotent window's writes per second are shown beside them).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.group_views import StoreWrites
from bench.harness import AgentSpec, bench_env, log, module_cmd, start_agent, stop_proc
from bench.metrics import histogram_quantiles, scrape
from bench.probes import percentile
from bench.results import Rows, add_output_args, finish_run, markdown_table, page_figures, run_header
from bench.targets import END_TXN_P99_MS, TXN_THROUGHPUT_RATIO

MiB = 1024 * 1024
VALUE_BYTES = 1024


# --- one producer process ---------------------------------------------------------------------------------
def produce(args: argparse.Namespace) -> None:
    from confluent_kafka import Producer

    transactional = args.mode == "transactional"
    # A bounded queue (8 MiB), so that a transaction holds what one window of --commit-ms could enqueue
    # rather than a closed loop's unbounded backlog, which its commit would have to flush.
    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "linger.ms": 5,
        "acks": "all",
        "queue.buffering.max.kbytes": 8192,
    }
    if transactional:
        conf["transactional.id"] = f"txn-bench-{args.seed}"
    else:
        conf["enable.idempotence"] = True
    producer = Producer(conf)
    rng = random.Random(args.seed)
    value = rng.randbytes(VALUE_BYTES)
    delivered = [0]

    def on_delivery(err: object, _msg: object) -> None:
        if err is None:
            delivered[0] += 1

    if transactional:
        producer.init_transactions(30)
    commits: list[float] = []
    acked = 0
    warm_until = time.monotonic() + args.warmup
    stop = warm_until + args.duration
    counting = False
    started = time.monotonic()
    while time.monotonic() < stop:
        if not counting and time.monotonic() >= warm_until:
            counting, acked, delivered[0], commits = True, 0, 0, []
            started = time.monotonic()
        if transactional:
            producer.begin_transaction()
        ends = time.monotonic() + args.commit_ms / 1000
        while time.monotonic() < ends:
            try:
                producer.produce(
                    args.topic, value=value, partition=rng.randrange(args.partitions), on_delivery=on_delivery
                )
            except BufferError:
                producer.poll(0.005)
            producer.poll(0)
        if transactional:
            t0 = time.monotonic()
            producer.commit_transaction(60)
            commits.append((time.monotonic() - t0) * 1000)
            acked, delivered[0] = acked + delivered[0], 0
    producer.flush(60)
    if not transactional:
        acked = delivered[0]
    elapsed = time.monotonic() - started
    print(json.dumps({"acked": acked, "seconds": elapsed, "commits_ms": commits}), flush=True)


# --- the run ----------------------------------------------------------------------------------------------
def _window(args: argparse.Namespace, bootstrap: str, topic: str, mode: str) -> dict[str, Any]:
    cmds = [
        module_cmd(
            "bench.txn_bench",
            "produce",
            "--mode",
            mode,
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--partitions",
            str(args.partitions),
            "--duration",
            str(args.duration),
            "--warmup",
            str(args.warmup),
            "--commit-ms",
            str(args.commit_ms),
            "--seed",
            str(i + 1),
        )
        for i in range(args.producers)
    ]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, text=True, env=bench_env()) for c in cmds]
    outs = [
        json.loads(p.communicate(timeout=args.duration + args.warmup + 120)[0].strip().splitlines()[-1])
        for p in procs
    ]
    seconds = max(o["seconds"] for o in outs)
    commits = sorted(x for o in outs for x in o["commits_ms"])
    return {
        "mib_s": sum(o["acked"] for o in outs) * VALUE_BYTES / MiB / seconds,
        "commits": len(commits),
        "commit_p50_ms": percentile(commits, 0.5),
        "commit_p99_ms": percentile(commits, 0.99),
        "seconds": seconds,
    }


def _end_txn_quantiles(url: str) -> tuple[float | None, float | None]:
    """p50 and p99 of strata_txn_end_seconds, in ms, as the upper bounds of their buckets."""
    quantiles = histogram_quantiles({}, scrape(url), "strata_txn_end_seconds", (0.5, 0.99))
    return quantiles[0.5], quantiles[0.99]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command")
    child = sub.add_parser("produce")
    for p in (parser, child):
        p.add_argument("--producers", type=int, default=2)
        p.add_argument("--partitions", type=int, default=12)
        p.add_argument("--duration", type=float, default=15.0)
        p.add_argument("--warmup", type=float, default=3.0)
        p.add_argument("--commit-ms", type=float, default=100.0)
    child.add_argument("--mode", choices=("idempotent", "transactional"), required=True)
    child.add_argument("--bootstrap", required=True)
    child.add_argument("--topic", required=True)
    child.add_argument("--seed", type=int, default=1)
    add_output_args(parser, "txn_bench")
    args = parser.parse_args(argv)
    if args.command == "produce":
        produce(args)
        return 0
    report = run_header("txn_bench", argv, ("agents", "broker", "storage", "strata"))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="strata-txn-bench-") as tmp:
        workdir = Path(tmp)
        spec = AgentSpec(["--role", "agent", "--log-level", "warning"], kafka_ports=1)
        agent = start_agent(spec, workdir, "agent")
        try:
            assert agent.bootstrap is not None
            topic = "txn-bench"
            httpx.post(
                f"{agent.url}/v1/topics", json={"name": topic, "partitions": args.partitions}, timeout=10
            )
            writes = StoreWrites(agent.data_dir / "metadata.db")
            log("idempotent window")
            before = writes.read()
            idem = _window(args, agent.bootstrap, topic, "idempotent")
            idem_writes = StoreWrites.delta(before, writes.read())
            log("transactional window")
            before = writes.read()
            txn = _window(args, agent.bootstrap, topic, "transactional")
            txn_writes = StoreWrites.delta(before, writes.read())
            end_p50, end_p99 = _end_txn_quantiles(agent.url)
        finally:
            stop_proc(agent.proc, "agent")
    window = args.duration + args.warmup
    ratio = 100 * txn["mib_s"] / idem["mib_s"] if idem["mib_s"] else 0.0
    rows = Rows()
    area = "transactions"
    rows.add("idempotent produce, local", round(idem["mib_s"], 1), "MiB/s", area=area)
    rows.add("transactional produce, a commit per 100 ms, local", round(txn["mib_s"], 1), "MiB/s", area=area)
    rows.add("transactional / idempotent produce", round(ratio, 1), "%", TXN_THROUGHPUT_RATIO, area=area)
    rows.add("transactions committed", txn["commits"])
    if txn["commits"]:
        rows.add(
            "commit_transaction p50 / p99", f"{txn['commit_p50_ms']:.1f} / {txn['commit_p99_ms']:.1f}", "ms"
        )
    rows.add("EndTxn p50 (upper bucket bound)", end_p50, "ms")
    rows.add("EndTxn p99 (upper bucket bound)", end_p99, "ms", END_TXN_P99_MS, area=area)
    per_txn = round(txn_writes / max(txn["commits"], 1), 2)
    rows.add("metadata writes per transaction (flush commits included)", per_txn, area=area)
    rows.add(
        "metadata writes per second, idempotent / transactional",
        f"{idem_writes / window:.1f} / {txn_writes / window:.1f}",
    )
    report["targets"] = rows.rows
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    finish_run(report, args, _print, page_figures(rows.rows))
    return 0


def _print(report: dict[str, Any]) -> None:
    print(markdown_table(report["targets"]))


if __name__ == "__main__":
    raise SystemExit(main())
