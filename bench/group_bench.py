"""Benchmark of Kafka consumer groups on one Strata agent (issue 9, section 5).

    .venv/bin/python bench/group_bench.py                          # defaults (~2 min)
    .venv/bin/python bench/group_bench.py --heartbeat-ms 1000      # the same with shorter client heartbeats
    .venv/bin/python bench/group_bench.py --tree /tmp/strata-head  # the agent from another source tree
    .venv/bin/python bench/group_bench.py --fill-mib 64 --leaves 1 --stable-s 10 --baseline-s 5  # smoke run

One ``strata serve --role agent`` (``python -m strata.cli serve`` run from ``--tree``, default this
repository) on the embedded default: a local directory as the bucket and SQLite metadata, HTTP and Kafka on
free ports. Every client is librdkafka (confluent-kafka) in a process of its own, started from this file
(``member`` and ``produce`` subcommands), never in the process it measures. Members subscribe with
librdkafka's defaults (eager ``range,roundrobin`` assignors, auto-commit every 5 s) except
``heartbeat.interval.ms`` (``--heartbeat-ms``, default 3000, librdkafka's own) and ``session.timeout.ms``
(``--session-ms``, default 45000, librdkafka's own). Members report on stdout, as JSON lines with wall-clock
times: assignments and revocations (rebalance callbacks), the first record of each partition after each
assignment, and every 200 ms their record and byte counts.


Phases:
1. baseline: the agent idle for ``--baseline-s`` with no group (its own background metadata writes).
2. fill: a producer writes ``--fill-mib`` of ``--value-bytes`` values with 7-byte keys, round-robin over
   ``--partitions`` (32) partitions, acks=all; its metadata writes against the agent's flushes check the
   write counter (below) against a known figure: one commit per flush.
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

Counting metadata-store writes without touching the agent: SQLite runs in WAL mode, and the WAL index
(the ``metadata.db-shm`` file every connection maps) starts with a header whose ``iChange`` field
(4 bytes at offset 8, native byte order) is incremented by each transaction that commits changes, by any
connection of any process; a write transaction that changed nothing leaves it alone. The header is stored
twice (offsets 0 and 48); a read is used when both copies agree, as SQLite's own readers do. ``PRAGMA
data_version`` and ``total_changes`` cannot do this: they are per connection. The fill phase checks it
(writes = flushes, the one write of a flush commit; nothing else writes while a plain producer writes).

Results: a table on stdout, JSON under bench/results/group-<time>.json. Every process binds 127.0.0.1 and
is stopped at the end (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from kafka_bench import wait_tcp
from produce_fetch import (
    PYTHON,
    RESULTS_DIR,
    ROOT,
    CpuWindow,
    MiB,
    Proc,
    flushes,
    free_port,
    log,
    machine_info,
    markdown_table,
    scrape,
    wait_http,
)

THIS = Path(__file__).resolve()
TOPIC = "gbench"
GROUP = "gbench-group"
KEY_BYTES = 7  # b"k%06d"
TARGET_HEARTBEATS = 2.0  # consuming again at most 2 x heartbeat.interval.ms beyond the clients' own wait


# --- JSON lines between the processes -----------------------------------------------------------------------
class Out:
    def __init__(self) -> None:
        self._lock = threading.Lock()

    def emit(self, ev: str, **fields: Any) -> None:
        line = json.dumps({"ev": ev, "t": fields.pop("t", time.time()), **fields})
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


def stop_on_stdin() -> threading.Event:
    """Set by a line ``stop`` or end of file on stdin: a child never outlives its orchestrator."""
    stop = threading.Event()

    def run() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=run, daemon=True).start()
    return stop


# --- member: one librdkafka consumer in the group -----------------------------------------------------------
def member_main(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, KafkaError

    out = Out()
    stop = stop_on_stdin()
    counts = {"records": 0, "bytes": 0, "commits": 0, "commit_errors": 0, "errors": 0}
    last_t = 0.0
    waiting_first: set[int] = set()  # partitions of the current assignment not read from yet

    def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        waiting_first.clear()
        waiting_first.update(tp.partition for tp in partitions)
        out.emit("assigned", parts=sorted(waiting_first))

    def on_revoke(_consumer: Any, partitions: list[Any]) -> None:
        waiting_first.clear()
        out.emit("revoked", parts=sorted(tp.partition for tp in partitions))

    def on_commit(err: KafkaError | None, _partitions: list[Any]) -> None:
        # _NO_OFFSET: an auto-commit with nothing new to commit, which sends nothing.
        if err is None:
            counts["commits"] += 1
        elif err.code() != KafkaError._NO_OFFSET:
            counts["commit_errors"] += 1

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "client.id": args.name,
            "auto.offset.reset": "earliest",
            "heartbeat.interval.ms": args.heartbeat_ms,
            "session.timeout.ms": args.session_ms,
            "on_commit": on_commit,
        }
    )
    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    out.emit("subscribed")
    next_report = 0.0

    def report() -> None:
        out.emit("progress", last_t=last_t, **counts)

    while not stop.is_set():
        # A short timeout: consume() waits that long for a full batch, which would blur "first" times.
        msgs = consumer.consume(num_messages=1000, timeout=0.02)
        now = time.time()
        for msg in msgs:
            if msg.error() is not None:
                counts["errors"] += 1
                continue
            counts["records"] += 1
            counts["bytes"] += len(msg.key() or b"") + len(msg.value() or b"")
            p = msg.partition()
            if p in waiting_first:
                waiting_first.discard(p)
                out.emit("first", p=p, t=now)
        if msgs:
            last_t = now
        if now >= next_report:
            report()
            next_report = now + 0.2
    report()
    out.emit("leaving")
    consumer.close()  # commits what was consumed (auto-commit), then LeaveGroup
    out.emit("left")
    return 0


# --- produce: fill the topic, or write at a steady rate until stopped ---------------------------------------
def produce_main(args: argparse.Namespace) -> int:
    from confluent_kafka import Producer

    out = Out()
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 65536,
            "socket.nagle.disable": True,
        }
    )
    failed = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    words = [b"%x" % (i * 2654435761 % 4294967296) for i in range(64)]
    value = b" ".join(words * (args.value_bytes // 8 + 1))[: args.value_bytes]
    started = time.monotonic()
    sent = 0

    def send(n: int) -> None:
        nonlocal sent
        for _ in range(n):
            key = b"k%06d" % (sent % 1_000_000)
            while True:
                try:
                    producer.produce(
                        args.topic, value, key, partition=sent % args.partitions, on_delivery=on_delivery
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            sent += 1
        producer.poll(0)

    if args.records:
        send(args.records)
    else:
        stop = stop_on_stdin()
        per_tick = max(1, round(args.rate / 100))
        tick = per_tick / args.rate
        next_at = time.monotonic()
        while not stop.is_set():
            send(per_tick)
            next_at += tick
            time.sleep(max(0.0, next_at - time.monotonic()))
    left = producer.flush(60)
    out.emit(
        "produced",
        records=sent,
        bytes=sent * (KEY_BYTES + args.value_bytes),
        failed=failed,
        unflushed=left,
        elapsed_s=time.monotonic() - started,
    )
    return 0 if left == 0 and failed == 0 else 1


# --- the orchestrator's side: children and their reports ----------------------------------------------------
@dataclass
class Child:
    name: str
    popen: subprocess.Popen[str]
    log_path: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    reader: threading.Thread | None = None

    def read(self) -> None:
        assert self.popen.stdout is not None
        with self.popen.stdout:
            for line in self.popen.stdout:
                with contextlib.suppress(json.JSONDecodeError), self.lock:
                    self.events.append(json.loads(line))

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def last(self, ev: str) -> dict[str, Any] | None:
        return next((e for e in reversed(self.snapshot()) if e["ev"] == ev), None)

    def stop(self) -> None:
        if self.popen.stdin is not None and not self.popen.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.popen.stdin.write("stop\n")
                self.popen.stdin.close()

    def wait(self, timeout: float) -> int:
        try:
            rc = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            rc = self.popen.wait(10)
        if self.reader is not None:
            self.reader.join(5)
        return rc

    def tail(self) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-20:])


def start_child(name: str, argv: list[str], workdir: Path) -> Child:
    log_path = workdir / f"{name}.log"
    with log_path.open("w") as stderr:
        popen = subprocess.Popen(
            [PYTHON, str(THIS), *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            bufsize=1,
            cwd=ROOT,
        )
    child = Child(name, popen, log_path)
    child.reader = threading.Thread(target=child.read, daemon=True)
    child.reader.start()
    return child


def wait_until(what: str, check: Any, timeout: float, children: list[Child]) -> Any:
    """Poll ``check()`` until it returns something other than None."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result is not None:
            return result
        for c in children:
            if c.popen.poll() is not None:
                raise RuntimeError(
                    f"{c.name} exited with {c.popen.returncode} waiting for {what}:\n{c.tail()}"
                )
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.05)


# --- metadata-store writes, counted from outside the agent --------------------------------------------------
class StoreWrites:
    """Transactions that committed changes to a SQLite database in WAL mode, by every process: the WAL
    index header's ``iChange`` (see the module docstring)."""

    HEADER = 48

    def __init__(self, db: Path) -> None:
        self.shm = Path(str(db) + "-shm")

    def read(self) -> int:
        for _ in range(1000):
            with contextlib.suppress(FileNotFoundError), self.shm.open("rb") as f:
                head = f.read(2 * self.HEADER)
                # Both copies equal and isInit set: not torn by a concurrent writer.
                if len(head) == 2 * self.HEADER and head[: self.HEADER] == head[self.HEADER :] and head[12]:
                    value: int = struct.unpack_from("=I", head, 8)[0]
                    return value
            time.sleep(0.001)
        raise RuntimeError(f"no consistent WAL-index header in {self.shm}")

    @staticmethod
    def delta(before: int, after: int) -> int:
        return (after - before) % 2**32


# --- the agent ----------------------------------------------------------------------------------------------
@dataclass
class Agent:
    proc: Proc
    url: str
    bootstrap: str
    db: Path


def start_agent(args: argparse.Namespace, workdir: Path) -> Agent:
    port, kafka_port = free_port(), free_port()
    data_dir = workdir / "data"
    data_dir.mkdir()
    cmd = [PYTHON, "-m", "strata.cli", "serve", "--data-dir", str(data_dir), "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--kafka-port", str(kafka_port), "--kafka-advertised-host", "127.0.0.1"]
    cmd += ["--role", "agent", "--log-level", "warning", "--num-partitions", str(args.partitions)]
    cmd += ["--group-initial-rebalance-delay-ms", str(args.initial_delay_ms)]
    if args.fetch_buffer_mib:
        cmd += ["--kafka-fetch-buffer-bytes", str(args.fetch_buffer_mib * MiB)]
    tree = Path(args.tree).resolve()
    proc = spawn_in(tree, "agent", cmd, workdir / "agent.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/healthz", proc)
        wait_tcp(kafka_port, proc)
    except RuntimeError:
        proc.stop()
        raise
    return Agent(proc, url, f"127.0.0.1:{kafka_port}", data_dir / "metadata.db")


def spawn_in(tree: Path, name: str, cmd: list[str], log_path: Path) -> Proc:
    """A process running from ``tree``: ``python -m`` puts its working directory first on sys.path, ahead
    of the venv's editable install of this repository."""
    log_file = log_path.open("wb")
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1"}
    popen = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=tree, env=env)
    return Proc(name, popen, log_path, log_file)


def tree_fingerprint(tree: Path) -> str:
    digest = hashlib.sha256()
    for package in ("agents", "api", "broker", "storage", "planner"):
        for path in sorted((tree / package).rglob("*.py")):
            digest.update(str(path.relative_to(tree)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


# --- group views --------------------------------------------------------------------------------------------
def latest_assignment(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    for e in reversed(events):
        if e["ev"] == "assigned":
            found: dict[str, Any] = e
            return found
        if e["ev"] in ("revoked", "leaving"):
            return None
    return None


def consuming(members: list[Child], since: float, partitions: int) -> dict[str, Any] | None:
    """When every member has an assignment made after ``since``, together covering every partition once,
    and has read a record under it: per member, its revocation, assignment and first record times."""
    owners: dict[int, str] = {}
    view: dict[str, Any] = {}
    for m in members:
        events = m.snapshot()
        assigned = latest_assignment(events)
        if assigned is None or assigned["t"] < since:
            return None
        for p in assigned["parts"]:
            if p in owners:
                return None
            owners[p] = m.name
        firsts = [e["t"] for e in events if e["ev"] == "first" and e["t"] >= assigned["t"]]
        if not firsts:
            return None
        revokes = [e["t"] for e in events if e["ev"] == "revoked" and e["t"] >= since]
        view[m.name] = {
            "revoked": min(revokes) if revokes else None,
            "assigned": assigned["t"],
            "first": min(firsts),
            "parts": assigned["parts"],
        }
    if len(owners) != partitions:
        return None
    return view


def partition_firsts(members: list[Child], since: float) -> dict[int, float]:
    out: dict[int, float] = {}
    for m in members:
        for e in m.snapshot():
            if e["ev"] == "first" and e["t"] >= since:
                out[e["p"]] = min(out.get(e["p"], e["t"]), e["t"])
    return out


def progress(members: list[Child]) -> dict[str, float]:
    total = {"records": 0.0, "bytes": 0.0, "commits": 0.0, "commit_errors": 0.0, "errors": 0.0, "last_t": 0.0}
    for m in members:
        p = m.last("progress")
        if p is None:
            continue
        for k in ("records", "bytes", "commits", "commit_errors", "errors"):
            total[k] += p[k]
        total["last_t"] = max(total["last_t"], p["last_t"])
    return total


# --- phases -------------------------------------------------------------------------------------------------
@dataclass
class Run:
    args: argparse.Namespace
    workdir: Path
    agent: Agent
    writes: StoreWrites
    members: list[Child] = field(default_factory=list)  # the group's current members
    everyone: list[Child] = field(default_factory=list)  # every child started, for the cleanup
    joined: int = 0

    def member(self) -> Child:
        self.joined += 1
        a = self.args
        argv = ["member", "--bootstrap", self.agent.bootstrap, "--topic", TOPIC, "--group", GROUP]
        argv += ["--name", f"member-{self.joined}", "--heartbeat-ms", str(a.heartbeat_ms)]
        argv += ["--session-ms", str(a.session_ms)]
        child = start_child(f"member-{self.joined}", argv, self.workdir)
        self.everyone.append(child)
        self.members.append(child)
        return child

    def producer(self, name: str, *, records: int = 0, rate: float = 0.0) -> Child:
        a = self.args
        argv = ["produce", "--bootstrap", self.agent.bootstrap, "--topic", TOPIC]
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
    cpu = CpuWindow({"agent": run.agent.proc.pid, **{m.name: m.popen.pid for m in everything}})
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
            lambda: consuming(run.members, 0.0, a.partitions),
            a.step_timeout_s,
            run.members,
        )
        leaver = run.members.pop(0)
        log(f"[leave {i + 1}/{a.leaves}] {leaver.name} leaves; {len(run.members)} stay")
        leaver.stop()
        leaving = wait_until("the member's close()", lambda c=leaver: c.last("leaving"), 30, [leaver])
        t0 = leaving["t"]
        view = wait_until(
            "the remaining members consuming again",
            lambda t=t0: consuming(run.members, t, a.partitions),
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
            "the new member's subscribe", lambda c=joiner: c.last("subscribed"), 60, [joiner]
        )
        view = wait_until(
            "the group consuming after a join",
            lambda t=subscribed["t"]: consuming(run.members, t, a.partitions),
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


# --- report -------------------------------------------------------------------------------------------------
def evaluate(r: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    p = r["params"]
    hb_s = p["heartbeat_ms"] / 1000

    def row(name: str, value: Any, target: str = "-", ok: bool | None = None, unit: str = "") -> None:
        rows.append({"metric": name, "value": value, "unit": unit, "target": target, "pass": ok})

    f = r["fill"]
    row("fill: produced", f"{f['mib']:.0f} MiB at {f['produce_mib_s']:.1f} MiB/s")
    ok = f["store_writes"] == f["flushes"]
    row(
        "write counter check: store writes / flushes during the fill",
        f"{f['store_writes']} / {f['flushes']:g}",
        "equal",
        ok,
    )
    c = r["consume"]
    row(
        f"{p['members']}-member group catch-up, {p['partitions']} partitions",
        round(c["mib_s"], 1),
        unit="MiB/s",
    )
    row(
        "catch-up: records read / written",
        f"{c['records']:g} / {f['records']}",
        "equal",
        c["records"] == f["records"],
    )
    cpu = c["cpu_ms_per_mib"]
    row(
        "catch-up CPU per MiB: agent / members / whole machine",
        f"{cpu['agent']} / {cpu['members']} / {cpu['system']}",
        unit="ms",
    )
    row(
        f"first join: subscribe to assignment (initial rebalance delay {p['initial_delay_ms']} ms)",
        round(c["subscribe_to_first_assignment_s"], 2),
        unit="s",
    )
    leaves = r["leaves"]
    if leaves:

        def figure(key: str) -> str:
            values = [x[key] for x in leaves if x[key] is not None]
            return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"

        row(
            f"leave -> last member told (its heartbeat wait; heartbeat.interval.ms {p['heartbeat_ms']})",
            figure("last_revoked_s"),
            unit="s",
        )
        row("leave -> last member assigned", figure("last_assigned_s"), unit="s")
        row("leave -> every remaining member consuming again", figure("consuming_again_s"), unit="s")
        row("leave -> every partition read again", figure("every_partition_s"), unit="s")
        beyond = [x["beyond_heartbeat_wait_s"] for x in leaves if x["beyond_heartbeat_wait_s"] is not None]
        ok = bool(beyond) and max(beyond) <= TARGET_HEARTBEATS * hb_s
        row(
            "consuming again beyond the clients' heartbeat wait",
            figure("beyond_heartbeat_wait_s"),
            f"<= {TARGET_HEARTBEATS * hb_s:g}",
            ok,
            "s",
        )
        row(
            "join -> every member consuming (new member's subscribe to all reading)",
            figure("join_consuming_s"),
            unit="s",
        )
        row("leaving member's close() (commit + LeaveGroup)", figure("close_s"), unit="s")
    s = r["stable"]
    b = r["baseline"]
    row(f"agent's own store writes, no group ({b['seconds']:g} s)", b["writes"], unit="writes")
    for kind in ("consuming", "idle"):
        w = s[kind]
        value = round(per_member_minute(w, b, s["members"]), 1)
        detail = (
            f"{w['writes']} writes, {w['flushes']:g} flushes, {w['client_commits']:g} commits"
            f" in {w['seconds']:g} s"
        )
        row(f"store writes per member per minute, stable, {kind} ({detail})", value, unit="writes")
    row("heartbeats per member per minute (60 / heartbeat.interval.ms)", round(60 / hb_s, 1))
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command")
    member = sub.add_parser("member", help="(internal) one group member")
    member.add_argument("--bootstrap", required=True)
    member.add_argument("--topic", required=True)
    member.add_argument("--group", required=True)
    member.add_argument("--name", required=True)
    member.add_argument("--heartbeat-ms", type=int, required=True)
    member.add_argument("--session-ms", type=int, required=True)
    produce = sub.add_parser("produce", help="(internal) fill the topic, or write at a rate until stopped")
    produce.add_argument("--bootstrap", required=True)
    produce.add_argument("--topic", required=True)
    produce.add_argument("--partitions", type=int, required=True)
    produce.add_argument("--value-bytes", type=int, required=True)
    produce.add_argument("--records", type=int, default=0)
    produce.add_argument("--rate", type=float, default=0.0)

    parser.add_argument("--tree", default=str(ROOT), help="source tree the agent runs from")
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--fill-mib", type=int, default=256)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--heartbeat-ms", type=int, default=3000, help="the members' heartbeat.interval.ms")
    parser.add_argument("--session-ms", type=int, default=45000, help="the members' session.timeout.ms")
    parser.add_argument("--initial-delay-ms", type=int, default=3000, help="group.initial.rebalance.delay.ms")
    parser.add_argument(
        "--fetch-buffer-mib", type=int, default=0, help="the agent's fetch budget (0: default)"
    )
    parser.add_argument("--leaves", type=int, default=3)
    parser.add_argument("--live-rate", type=float, default=1000.0, help="records/s while members leave")
    parser.add_argument("--baseline-s", type=float, default=10.0)
    parser.add_argument("--stable-s", type=float, default=30.0)
    parser.add_argument("--consume-timeout-s", type=float, default=300.0)
    parser.add_argument("--step-timeout-s", type=float, default=120.0)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, data)")
    parser.add_argument("--out", default=None, help="JSON results (default bench/results/group-<time>.json)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "member":
        return member_main(args)
    if args.command == "produce":
        return produce_main(args)
    run_id = time.strftime("%Y%m%d-%H%M%S")
    RESULTS_DIR.mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="strata-gbench-"))
    tree = Path(args.tree).resolve()
    report: dict[str, Any] = {
        "run_id": run_id,
        "command": " ".join([".venv/bin/python", "bench/group_bench.py", *(argv or sys.argv[1:])]),
        "machine": machine_info(),
        "tree": str(tree),
        "code_sha256": tree_fingerprint(tree),
        "params": {k: v for k, v in vars(args).items() if k != "command"},
    }
    started = time.monotonic()
    agent = start_agent(args, workdir)
    run = Run(args, workdir, agent, StoreWrites(agent.db))
    live: Child | None = None
    try:
        report["baseline"] = baseline_phase(run)
        report["fill"] = fill_phase(run)
        report["consume"] = consume_phase(run, report["fill"])
        live = run.producer("live", rate=args.live_rate)
        report["leaves"] = leave_phase(run)
        report["stable"] = stable_phase(run, live)
    finally:
        for child in run.everyone:
            child.stop()
        for child in run.everyone:
            child.wait(30)
        agent.proc.stop()
        if args.keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    report["targets"] = evaluate(report)
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    out = Path(args.out) if args.out else RESULTS_DIR / f"group-{run_id}.json"
    out.write_text(json.dumps(report, indent=2))
    print(markdown_table(report))
    load = report["machine"]["loadavg_at_start"]
    print(f"\nload average at start {load}; took {report['elapsed_s']} s; {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
