"""The EOS workload: N worker processes (``tests.eos.worker``) against one cluster, then a complete drain.

``run_workload`` creates the topic, starts the workers as OS processes (each with its own history file in
the run's directory), calls ``on_tick`` with the fraction of the run's time gone about every 0.2 s while
they run (where a test injects faults: SIGKILL and restart of agents), holds them past their time while
``on_tick`` answers True (faults still to come: a slow restart must not end the run before the last
one), waits for them, drains every partition with a read_committed consumer to LSO = HWM, appends the
drain to the history as process ``drain``, and returns the merged history.

Seeded: a worker's choices (micro-ops, partitions, aborts, crashes) come from ``seed`` and its number, so
one seed replays the same plan (the interleaving, and so the outcome, still depend on timing).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass
from pathlib import Path

from tests.eos.history import DRAIN, INVOKE, OK, HistoryWriter, Op, Poll, load_history, mop_json
from tests.eos.kafka_io import create_topic, drain

ROOT = Path(__file__).resolve().parents[2]


class WorkloadError(RuntimeError):
    """A worker exited with an error or did not finish: the history is not a result."""


@dataclass
class WorkloadConfig:
    bootstrap: str
    topic: str
    partitions: int = 4
    processes: int = 3
    seconds: float = 20.0
    seed: int = 0
    txn_timeout_ms: int = 10_000
    drain_timeout_s: float = 60.0
    # The workers' consumers; the drain is always read_committed. read_uncommitted is the negative control
    # that shows the checker finds aborted and uncommitted reads on a real broker.
    isolation: str = "read_committed"


def worker_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}


def start_workers(cfg: WorkloadConfig, out: Path, hold: Path | None = None) -> list[subprocess.Popen[bytes]]:
    procs = []
    for i in range(cfg.processes):
        args = [
            sys.executable, "-m", "tests.eos.worker", "--bootstrap", cfg.bootstrap, "--topic", cfg.topic,
            "--partitions", str(cfg.partitions), "--worker", str(i), "--seed", str(cfg.seed),
            "--seconds", str(cfg.seconds), "--history", str(out / f"w{i}.jsonl"),
            "--txn-timeout-ms", str(cfg.txn_timeout_ms), "--isolation", cfg.isolation,
        ]  # fmt: skip
        if hold is not None:
            args += ["--hold", str(hold)]
        with (out / f"w{i}.log").open("wb") as log:
            procs.append(
                subprocess.Popen(args, cwd=ROOT, env=worker_env(), stdout=log, stderr=subprocess.STDOUT)
            )
    return procs


def record_drain(cfg: WorkloadConfig, out: Path) -> None:
    """Drains every partition and writes the drain to the history as one ``drain`` op."""
    log = HistoryWriter(out / "drain.jsonl", DRAIN)
    log.event(INVOKE, DRAIN, None)
    result = drain(cfg.bootstrap, [(cfg.topic, p) for p in range(cfg.partitions)], cfg.drain_timeout_s)
    poll = Poll(time.monotonic_ns(), result.records)
    value = {
        "mops": [mop_json(poll)],
        "ends": [[t, p, o] for (t, p), o in sorted(result.ends.items())],
        "hwm": [[t, p, o] for (t, p), o in sorted(result.hwm.items())],
        "complete": result.complete,
        "errors": result.errors[:20],
    }
    log.event(OK, DRAIN, value)
    log.close()


def describe_processes(
    procs: Mapping[str, subprocess.Popen[bytes]], out: Path, done: Set[str] = frozenset()
) -> str:
    """Each process's state, its history's last events and its log's tail (``out/NAME.jsonl``, ``NAME.log``):
    what a stalled run shows. Those still running are sent SIGUSR1 first, on which worker.py and copier.py
    dump their Python stacks (faulthandler) to their logs, so a stuck call is named."""
    running = [name for name, p in procs.items() if name not in done and p.poll() is None]
    for name in running:
        procs[name].send_signal(signal.SIGUSR1)
    if running:
        time.sleep(1)
    parts = []
    for name, proc in sorted(procs.items()):
        if name in done:
            state = "done"
        elif proc.poll() is None:
            state = "still running"
        else:
            state = f"exited {proc.returncode}"
        history = out / f"{name}.jsonl"
        events = history.read_text(errors="replace").splitlines()[-3:] if history.exists() else []
        tail = (out / f"{name}.log").read_text(errors="replace")[-3000:]
        parts.append(f"--- {name} ({state}); last events: {events}\nlog tail:\n{tail}")
    return "\n".join(parts)


def run_workload(
    cfg: WorkloadConfig, out: Path, on_tick: Callable[[float], object] | None = None
) -> list[Op]:
    """Runs the workload with its history in ``out``; raises WorkloadError if a worker failed."""
    out.mkdir(parents=True, exist_ok=True)
    create_topic(cfg.bootstrap, cfg.topic, cfg.partitions)
    hold = out / "hold" if on_tick is not None else None
    if hold is not None:
        hold.touch()
    procs = start_workers(cfg, out, hold)
    started = time.monotonic()
    # A worker ends its last transaction after its time is up; calls may take CALL_TIMEOUT_S, retried.
    deadline = started + cfg.seconds + 180
    try:
        while any(p.poll() is None for p in procs):
            progress = min((time.monotonic() - started) / cfg.seconds, 1.0)
            if on_tick is not None and hold is not None and on_tick(progress) is not True:
                hold.unlink(missing_ok=True)
            if time.monotonic() > deadline:
                raise WorkloadError(
                    f"workers still running {deadline - started:.0f} s after the start\n"
                    + describe_processes({f"w{i}": p for i, p in enumerate(procs)}, out)
                )
            time.sleep(0.2)
    finally:
        if hold is not None:
            hold.unlink(missing_ok=True)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    failed = [(i, p.returncode) for i, p in enumerate(procs) if p.returncode != 0]
    if failed:
        tails = "\n".join(
            f"--- w{i} exited {rc}:\n" + (out / f"w{i}.log").read_text(errors="replace")[-2000:]
            for i, rc in failed
        )
        raise WorkloadError(tails)
    record_drain(cfg, out)
    return load_history(out)
