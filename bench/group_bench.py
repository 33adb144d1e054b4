"""Benchmark of Kafka consumer groups on one Strata agent.

    python -m bench.group_bench                          # defaults (~2 min)
    python -m bench.group_bench --heartbeat-ms 1000      # the same with shorter client heartbeats
    python -m bench.group_bench --tree /tmp/strata-head  # the agent from another source tree
    python -m bench.group_bench --fill-mib 4 --partitions 4 --members 2 --leaves 1 --stable-s 2 \\
        --baseline-s 1 --heartbeat-ms 1000 --initial-delay-ms 100       # smoke run

One ``strata serve --role agent`` (``python -m strata.cli serve`` run from ``--tree``, default this
repository) on the embedded default: a local directory as the bucket and SQLite metadata, HTTP and Kafka on
free ports. Every client is librdkafka (confluent-kafka) in a process of its own (bench/group_clients.py),
never in the process it measures. Members subscribe with librdkafka's defaults (eager
``range,roundrobin`` assignors, auto-commit every 5 s) except ``heartbeat.interval.ms`` (``--heartbeat-ms``,
default 3000, librdkafka's own) and ``session.timeout.ms`` (``--session-ms``, default 45000, librdkafka's
own).

Phases:
1. baseline: the agent idle for ``--baseline-s`` with no group (its own background metadata writes).
2. fill: a producer writes ``--fill-mib`` of ``--value-bytes`` values with 7-byte keys, round-robin over
   ``--partitions`` (32) partitions, acks=all; its metadata writes against the agent's flushes check the
   write counter (bench/group_views.py) against a known figure: one commit per flush, nothing else
   writes while a plain producer writes.
3. consume: ``--members`` (4) members start together and catch up the topic. MiB/s is key + value bytes
   over the time from the first record any member got to the last record of the topic; the group's first
   rebalance waits the initial rebalance delay (``--initial-delay-ms``, the agent's
   group.initial.rebalance.delay.ms) before that, and is reported apart.
4. leave: a producer writes ``--live-rate`` records/s to every partition; ``--leaves`` times, one member
   leaves cleanly (close(): LeaveGroup) and the others must consume again; then a new member joins and
   the group settles again, and the next leave. From the leaving member's close() call: when the last
   remaining member was told of the rebalance (its revocation, which comes with the answer to its next
   heartbeat: that wait is the client's own timer, up to one heartbeat interval), when the last got its
   new assignment, when every remaining member consumed again, and when every partition delivered again.
   The target: consuming again at most 2 x heartbeat.interval.ms beyond the clients' heartbeat wait.
5. stable: the group of ``--members`` stable for ``--stable-s``, first while the live producer runs
   (consuming, so auto-commits happen), then idle once the producer stopped and the members caught up.
   Metadata-store writes per member per minute, with the agent's flushes and its idle baseline taken out.

Results: a table on stdout, JSON under bench/results/; with ``--figures``, the page's figures under
bench/figures/ (see bench/README.md). Every process binds 127.0.0.1 and is stopped at the end (SIGTERM,
then SIGKILL).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import targets
from bench.group_phases import (
    Run,
    baseline_phase,
    consume_phase,
    fill_phase,
    group_agent,
    leave_phase,
    per_member_minute,
    stable_phase,
)
from bench.group_views import Child, StoreWrites
from bench.harness import ROOT, log
from bench.results import (
    Rows,
    add_output_args,
    finish_run,
    markdown_table,
    page_figures,
    run_header,
)


def _catch_up_rows(rows: Rows, r: dict[str, Any]) -> None:
    p, f, c = r["params"], r["fill"], r["consume"]
    rows.add("fill: produced", f"{f['mib']:.0f} MiB at {f['produce_mib_s']:.1f} MiB/s")
    ok = f["store_writes"] == f["flushes"]
    rows.add(
        "write counter check: store writes / flushes during the fill",
        f"{f['store_writes']} / {f['flushes']:g}",
        target="equal",
        ok=ok,
    )
    name = f"{p['members']}-member group catch-up, {p['partitions']} partitions"
    rows.add(name, round(c["mib_s"], 1), "MiB/s", area="groups")
    rows.add(
        "catch-up: records read / written",
        f"{c['records']:g} / {f['records']}",
        target="equal",
        ok=c["records"] == f["records"],
    )
    cpu = c["cpu_ms_per_mib"]
    rows.add(
        "catch-up CPU per MiB: agent / members / whole machine",
        f"{cpu['agent']} / {cpu['members']} / {cpu['system']}",
        "ms",
    )
    delay = p["initial_delay_ms"]
    first = round(c["subscribe_to_first_assignment_s"], 2)
    rows.add(
        f"first join: subscribe to assignment (initial rebalance delay {delay} ms)", first, "s", area="groups"
    )


def _leave_rows(rows: Rows, leaves: list[dict[str, Any]], heartbeat_ms: int) -> None:
    def figure(key: str) -> str:
        values = [x[key] for x in leaves if x[key] is not None]
        return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"

    hb = f"heartbeat.interval.ms {heartbeat_ms}"
    rows.add(f"leave -> last member told (its heartbeat wait; {hb})", figure("last_revoked_s"), "s")
    rows.add("leave -> last member assigned", figure("last_assigned_s"), "s")
    name = f"leave -> every remaining member consuming again ({hb})"
    rows.add(name, figure("consuming_again_s"), "s", area="groups")
    rows.add("leave -> every partition read again", figure("every_partition_s"), "s")
    beyond = [x["beyond_heartbeat_wait_s"] for x in leaves if x["beyond_heartbeat_wait_s"] is not None]
    bar = targets.consume_again_s(heartbeat_ms)
    name = f"consuming again beyond the members' heartbeat wait, median (range) ({hb})"
    worst = max(beyond) if beyond else None
    rows.add(name, figure("beyond_heartbeat_wait_s"), "s", bar, measured=worst, area="groups")
    name = f"join -> every member consuming (new member's subscribe to all reading; {hb})"
    rows.add(name, figure("join_consuming_s"), "s", area="groups")
    rows.add("leaving member's close() (commit + LeaveGroup)", figure("close_s"), "s")


def evaluate(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Every figure with its target and pass/miss (None: no target, shown for the analysis)."""
    rows = Rows()
    heartbeat_ms = r["params"]["heartbeat_ms"]
    _catch_up_rows(rows, r)
    if r["leaves"]:
        _leave_rows(rows, r["leaves"], heartbeat_ms)
    s, b = r["stable"], r["baseline"]
    rows.add(f"agent's own store writes, no group ({b['seconds']:g} s)", b["writes"], "writes")
    for kind in ("consuming", "idle"):
        w = s[kind]
        value = round(per_member_minute(w, b, s["members"]), 1)
        detail = f"{w['writes']} writes, {w['flushes']:g} flushes, {w['client_commits']:g} commits"
        detail += f" in {w['seconds']:g} s"
        name = (
            f"store writes per member per minute, stable group, {kind} (heartbeat.interval.ms {heartbeat_ms})"
        )
        rows.add(name, f"{value} ({detail})", area="groups")
    rows.add("heartbeats per member per minute (60 / heartbeat.interval.ms)", round(60_000 / heartbeat_ms, 1))
    return rows.rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--tree", default=str(ROOT), help="source tree the agent runs from")
    add("--members", type=int, default=4)
    add("--partitions", type=int, default=32)
    add("--fill-mib", type=int, default=256)
    add("--value-bytes", type=int, default=1024)
    add("--heartbeat-ms", type=int, default=3000, help="the members' heartbeat.interval.ms")
    add("--session-ms", type=int, default=45000, help="the members' session.timeout.ms")
    add("--initial-delay-ms", type=int, default=3000, help="group.initial.rebalance.delay.ms")
    add("--fetch-buffer-mib", type=int, default=0, help="the agent's fetch budget (0: default)")
    add("--leaves", type=int, default=3)
    add("--live-rate", type=float, default=1000.0, help="records/s while members leave")
    add("--baseline-s", type=float, default=10.0)
    add("--stable-s", type=float, default=30.0)
    add("--consume-timeout-s", type=float, default=300.0)
    add("--step-timeout-s", type=float, default=120.0)
    add("--keep", action="store_true", help="keep the temporary directory (logs, data)")
    add_output_args(parser, "group_bench")
    return parser.parse_args(argv)


def run_phases(run: Run, report: dict[str, Any]) -> None:
    live: Child | None = None
    try:
        report["baseline"] = baseline_phase(run)
        report["fill"] = fill_phase(run)
        report["consume"] = consume_phase(run, report["fill"])
        live = run.producer("live", rate=run.args.live_rate)
        report["leaves"] = leave_phase(run)
        report["stable"] = stable_phase(run, live)
    finally:
        for child in run.everyone:
            child.stop()
        for child in run.everyone:
            child.wait(30)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    tree = Path(args.tree).resolve()
    report = run_header(
        "group_bench", argv, ("agents", "api", "broker", "storage", "planner", "strata"), tree
    )
    report.update({"tree": str(tree), "params": vars(args)})
    workdir = Path(tempfile.mkdtemp(prefix="strata-gbench-"))
    started = time.monotonic()
    try:
        agent = group_agent(args, workdir)
        try:
            run_phases(Run(args, workdir, agent, StoreWrites(agent.data_dir / "metadata.db")), report)
        finally:
            agent.proc.stop()
    finally:
        if args.keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    report["targets"] = evaluate(report)
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    finish_run(report, args, lambda r: print(markdown_table(r["targets"])), page_figures(report["targets"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
