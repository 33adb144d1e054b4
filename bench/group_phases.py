"""The phases of bench.group_bench against one agent: baseline, fill, catch-up, leaves and joins, stable.

Each phase drives client processes (bench.group_clients) and reads the group's state from their reports
(bench.group_views), the agent's flushes from its metrics and the metadata store's writes from SQLite's
WAL index.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from bench.group_clients import KEY_BYTES
from bench.group_views import (
    Child,
    StoreWrites,
    consuming,
    partition_firsts,
    progress,
    start_child,
    wait_until,
)
from bench.harness import Agent, AgentSpec, MiB, log, start_agent
from bench.metrics import flushes, scrape
from bench.probes import CpuWindow

TOPIC = "gbench"
GROUP = "gbench-group"


def group_agent(args: argparse.Namespace, workdir: Path) -> Agent:
    """``strata serve --role agent`` from ``--tree`` on the embedded default (local directory, SQLite)."""
    serve = ["--role", "agent", "--log-level", "warning", "--num-partitions", str(args.partitions)]
    serve += ["--group-initial-rebalance-delay-ms", str(args.initial_delay_ms)]
    if args.fetch_buffer_mib:
        serve += ["--kafka-fetch-buffer-bytes", str(args.fetch_buffer_mib * MiB)]
    return start_agent(AgentSpec(serve, kafka_ports=1, tree=Path(args.tree).resolve()), workdir, "agent")


@dataclass
class Run:
    """One benchmark run: its agent, the write counter of its metadata store, and its client processes."""

    args: argparse.Namespace
    workdir: Path
    agent: Agent
    writes: StoreWrites
    members: list[Child] = field(default_factory=list)  # the group's current members
    everyone: list[Child] = field(default_factory=list)  # every child started, for the cleanup
    joined: int = 0

    @property
    def bootstrap(self) -> str:
        assert self.agent.bootstrap is not None  # the group agent always has a Kafka listener
        return self.agent.bootstrap

    def member(self) -> Child:
        self.joined += 1
        a = self.args
        argv = ["member", "--bootstrap", self.bootstrap, "--topic", TOPIC, "--group", GROUP]
        argv += ["--name", f"member-{self.joined}", "--heartbeat-ms", str(a.heartbeat_ms)]
        argv += ["--session-ms", str(a.session_ms)]
        child = start_child(f"member-{self.joined}", argv, self.workdir)
        self.everyone.append(child)
        self.members.append(child)
        return child

    def producer(self, name: str, *, records: int = 0, rate: float = 0.0) -> Child:
        a = self.args
        argv = ["produce", "--bootstrap", self.bootstrap, "--topic", TOPIC]
        argv += ["--partitions", str(a.partitions), "--value-bytes", str(a.value_bytes)]
        argv += ["--records", str(records), "--rate", str(rate)]
        child = start_child(name, argv, self.workdir)
        self.everyone.append(child)
        return child

    def window(self, seconds: float) -> dict[str, float]:
        """Store writes, flushes and the members' commits over ``seconds`` from now."""
        m0, w0, c0 = scrape(self.agent.url), self.writes.read(), progress(self.members)["commits"]
        time.sleep(seconds)
        m1, w1, c1 = scrape(self.agent.url), self.writes.read(), progress(self.members)["commits"]
        return {
            "seconds": seconds,
            "writes": StoreWrites.delta(w0, w1),
            "flushes": flushes(m1) - flushes(m0),
            "client_commits": c1 - c0,
        }


def baseline_phase(run: Run) -> dict[str, float]:
    log(f"[baseline] the agent idle, no group, {run.args.baseline_s:g} s")
    return run.window(run.args.baseline_s)


def fill_phase(run: Run) -> dict[str, Any]:
    a = run.args
    records = max(1, a.fill_mib * MiB // (KEY_BYTES + a.value_bytes))
    log(f"[fill] {records} records of {a.value_bytes} B over {a.partitions} partitions")
    httpx.post(
        run.agent.url + "/v1/topics", json={"name": TOPIC, "partitions": a.partitions}, timeout=30
    ).raise_for_status()
    m0, w0 = scrape(run.agent.url), run.writes.read()
    producer = run.producer("fill", records=records)
    if producer.wait(600) != 0:
        raise RuntimeError(f"the fill producer failed:\n{producer.tail()}")
    done = producer.last("produced")
    assert done is not None
    time.sleep(1.0)  # the last flush's commit
    m1, w1 = scrape(run.agent.url), run.writes.read()
    return {
        "records": records,
        "mib": done["bytes"] / MiB,
        "produce_mib_s": done["bytes"] / MiB / done["elapsed_s"],
        "store_writes": StoreWrites.delta(w0, w1),
        "flushes": flushes(m1) - flushes(m0),
    }


def consume_phase(run: Run, fill: dict[str, Any]) -> dict[str, Any]:
    a = run.args
    log(f"[consume] {a.members} members catch up {fill['mib']:.0f} MiB")
    started = time.time()
    for _ in range(a.members):
        run.member()
    everything = run.members
    cpu = CpuWindow({"agent": run.agent.pid, **{m.name: m.popen.pid for m in everything}})
    cpu.mark_start()

    def caught_up() -> dict[str, float] | None:
        total = progress(everything)
        return total if total["records"] >= fill["records"] else None

    total: dict[str, float] = wait_until(
        "the members read the whole topic", caught_up, a.consume_timeout_s, everything
    )
    cpu.mark_end()
    firsts = [e["t"] for m in everything for e in m.snapshot() if e["ev"] == "first"]
    assigned = [e["t"] for m in everything for e in m.snapshot() if e["ev"] == "assigned"]
    subscribed = [e["t"] for m in everything for e in m.snapshot() if e["ev"] == "subscribed"]
    first, last = min(firsts), total["last_t"]
    names = [m.name for m in everything]

    def per_mib(*keys: str) -> float:
        used = sum(cpu.end[k] - cpu.start[k] for k in keys)
        return round(1000 * used / (total["bytes"] / MiB), 2)

    rebalances = sum(1 for m in everything for e in m.snapshot() if e["ev"] == "assigned")
    return {
        "records": total["records"],
        "mib": total["bytes"] / MiB,
        "seconds": last - first,
        "mib_s": total["bytes"] / MiB / (last - first),
        "subscribe_to_first_assignment_s": min(assigned) - max(subscribed),
        "start_to_first_record_s": first - started,
        "assignments": rebalances,
        # CPU seconds over the whole phase (the initial delay's idle seconds cost nothing) per MiB read.
        "cpu_ms_per_mib": {
            "agent": per_mib("agent"),
            "members": per_mib(*names),
            "system": per_mib("system"),
        },
        "errors": total["errors"],
    }


def leave_phase(run: Run) -> list[dict[str, Any]]:
    a = run.args
    out = []
    for i in range(a.leaves):
        # The group consuming, all of it, before each leave.
        wait_until(
            "the group consuming before a leave",
            partial(consuming, run.members, 0.0, a.partitions),
            a.step_timeout_s,
            run.members,
        )
        leaver = run.members.pop(0)
        log(f"[leave {i + 1}/{a.leaves}] {leaver.name} leaves; {len(run.members)} stay")
        leaver.stop()
        leaving = wait_until("the member's close()", partial(leaver.last, "leaving"), 30, [leaver])
        t0 = leaving["t"]
        view = wait_until(
            "the remaining members consuming again",
            partial(consuming, run.members, t0, a.partitions),
            a.step_timeout_s,
            run.members,
        )

        def all_partitions(t: float = t0) -> dict[int, float] | None:
            firsts = partition_firsts(run.members, t)
            return firsts if len(firsts) == a.partitions else None

        firsts = wait_until("every partition read again", all_partitions, a.step_timeout_s, run.members)
        if leaver.wait(30) != 0:
            raise RuntimeError(f"{leaver.name} did not leave cleanly:\n{leaver.tail()}")
        left = leaver.last("left")
        revoked = [v["revoked"] for v in view.values() if v["revoked"] is not None]
        notice = max(revoked) - t0 if revoked else None
        again = max(v["first"] for v in view.values()) - t0
        one = {
            "leaver": leaver.name,
            "close_s": (left["t"] - t0) if left else None,
            "first_revoked_s": min(revoked) - t0 if revoked else None,
            "last_revoked_s": notice,
            "last_assigned_s": max(v["assigned"] for v in view.values()) - t0,
            "consuming_again_s": again,
            "every_partition_s": max(firsts.values()) - t0,
            "beyond_heartbeat_wait_s": again - notice if notice is not None else None,
        }
        log(
            f"[leave {i + 1}/{a.leaves}] "
            + ", ".join(f"{k} {v:.3f}" for k, v in one.items() if isinstance(v, float))
        )
        # A new member brings the group back to full size for the next leave (or for the stable phase).
        joiner = run.member()
        subscribed = wait_until(
            "the new member's subscribe", partial(joiner.last, "subscribed"), 60, [joiner]
        )
        view = wait_until(
            "the group consuming after a join",
            partial(consuming, run.members, subscribed["t"], a.partitions),
            a.step_timeout_s,
            run.members,
        )
        one["join_consuming_s"] = max(v["first"] for v in view.values()) - subscribed["t"]
        out.append(one)
    return out


def stable_phase(run: Run, live: Child) -> dict[str, Any]:
    a = run.args
    n = len(run.members)
    log(f"[stable] {n} members consuming {a.live_rate:g} records/s, {a.stable_s:g} s")
    busy = run.window(a.stable_s)
    live.stop()
    if live.wait(60) != 0:
        raise RuntimeError(f"the live producer failed:\n{live.tail()}")
    produced = live.last("produced")
    assert produced is not None
    # Caught up, and the last auto-commit (every 5 s) done: the members' counts stop changing.
    previous: dict[str, float] = {}
    quiet_since = time.monotonic()

    def quiet() -> bool | None:
        nonlocal previous, quiet_since
        now = progress(run.members)
        if now != previous:
            previous, quiet_since = now, time.monotonic()
        return True if time.monotonic() - quiet_since >= 6.0 else None

    wait_until("the members idle", quiet, 120, run.members)
    log(f"[stable] {n} members idle, {a.stable_s:g} s")
    idle = run.window(a.stable_s)
    return {"members": n, "consuming": busy, "idle": idle}


def per_member_minute(w: dict[str, float], baseline: dict[str, float], members: int) -> float:
    base = baseline["writes"] / baseline["seconds"] * w["seconds"]
    return (w["writes"] - w["flushes"] - base) / members / (w["seconds"] / 60)
