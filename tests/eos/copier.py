"""Kafka's TransactionsTest (``kafkatest/tests/core/transactions_test.py`` with its Java
TransactionalMessageCopier) in Python, with confluent-kafka.

* ``seed``: N integers into an input topic of 2 partitions, with an idempotent producer.
* One copier process per input partition (``python -m tests.eos.copier``): a read_committed consumer on
  its partition, resuming from the group's committed offset, and a transactional producer with a
  transactional.id of its own partition, so a restarted copier fences its dead predecessor. Each
  transaction copies up to ``--batch`` records (100 here) to the output topic, adds the next input offset with
  send_offsets_to_transaction, and commits; 10% are aborted on purpose, and the copier rewinds its consumer
  to the batch's first offset, as a copier that lost its transaction must. A transaction call that runs
  ``HUNG_GRACE_S`` past its own timeout ends the copier as a crash (``CallWatch``: a librdkafka fault).
* ``run_copy``: seeds, starts the copiers, SIGKILLs a copier at a quarter, half and three quarters of the
  copy (and calls ``on_tick`` with the fraction copied, where a test kills agents too), restarts whatever
  died, and waits until every
  copier has copied its whole partition. A read_committed consumer reads the output concurrently; a final
  drain reads it again from offset 0. Both, and the group's committed offsets, go to ``check_copy``.

A copier's output partition is the value modulo the output's partition count, so with one output partition
the order of each input partition's values is checked too.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.eos.checker import Verdict
from tests.eos.copycheck import check_copy
from tests.eos.history import FAIL, INFO, INVOKE, OK, TXN, HistoryWriter, Record, read_events
from tests.eos.kafka_io import CLIENT, DrainResult, create_topic, drain, read_committed_consumer, record_of
from tests.eos.workload import ROOT, WorkloadError, describe_processes, worker_env

INPUT_PARTITIONS = 2
CALL_TIMEOUT_S = 30.0
DONE_EXIT = 0
FATAL_EXIT = 3  # the producer was fenced or failed fatally: restart me
# Exits the run tolerates that it did not cause (a traceback: a call failed for good); more fail the run.
MAX_CRASHES = 3
INIT_DEADLINE_S = 60.0
MID_TXN_WAIT_S = 1.5
STALL_REPORT_S = 10.0
# A call that overruns its own timeout by this much is taken as hung, and the copier ends as if it had
# crashed (HUNG_EXIT, counted against MAX_CRASHES, restarted): librdkafka's send_offsets_to_transaction can
# wait forever when its group coordinator left the cluster's Metadata (librdkafka issues #5511, #5456).
HUNG_GRACE_S = 30.0
HUNG_EXIT = 4


# ---- the copier process -------------------------------------------------------------------------------


@dataclass
class CopierArgs:
    bootstrap: str
    input: str
    output: str
    partition: int
    output_partitions: int
    group: str
    batch: int
    abort_rate: float
    pause_s: float
    seed: int
    history: Path
    hold: Path | None = None


class CallWatch:
    """A thread that ends the process when a ``guard``ed call runs ``HUNG_GRACE_S`` past its timeout, with
    the process's stacks on stderr (the copier's log): a hung client call becomes a crash the run survives
    and shows, not a copy that never ends."""

    def __init__(self) -> None:
        self._deadline: float | None = None
        self._what = ""
        threading.Thread(target=self._watch, name="call-watch", daemon=True).start()

    @contextmanager
    def guard(self, what: str, timeout_s: float) -> Iterator[None]:
        self._what, self._deadline = what, time.monotonic() + timeout_s + HUNG_GRACE_S
        try:
            yield
        finally:
            self._deadline = None

    def _watch(self) -> None:
        while True:
            time.sleep(1.0)
            deadline = self._deadline
            if deadline is not None and time.monotonic() > deadline:
                print(f"{self._what} overran its timeout by {HUNG_GRACE_S:g} s: hung", file=sys.stderr)
                faulthandler.dump_traceback(all_threads=True)
                sys.stderr.flush()
                os._exit(HUNG_EXIT)


def _producer(a: CopierArgs) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": a.bootstrap,
            "transactional.id": f"{a.group}-{a.partition}",
            "transaction.timeout.ms": 10_000,
            "linger.ms": 5,
            **CLIENT,
        }
    )
    deadline = time.monotonic() + INIT_DEADLINE_S
    while True:
        try:
            producer.init_transactions(CALL_TIMEOUT_S)
            return producer
        except KafkaException as e:
            if not e.args[0].retriable() or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _committed(consumer: Consumer, tp: TopicPartition) -> int:
    """The group's committed offset for the input partition (0 when none), retried through restarts."""
    deadline = time.monotonic() + 120
    while True:
        try:
            offset = consumer.committed([tp], timeout=10)[0].offset
            return max(offset, 0)
        except KafkaException as e:
            if not e.args[0].retriable() or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def copy_partition(a: CopierArgs) -> int:
    """Copies the input partition to its end; returns the process's exit code."""
    rng = random.Random(a.seed)
    log = HistoryWriter(a.history, f"copier-{a.partition}")
    consumer = read_committed_consumer(a.bootstrap, a.group)
    tp = TopicPartition(a.input, a.partition)
    end = consumer.get_watermark_offsets(tp, timeout=CALL_TIMEOUT_S, cached=False)[1]
    producer = _producer(a)
    watch = CallWatch()
    position = _committed(consumer, tp)
    consumer.assign([TopicPartition(a.input, a.partition, position)])
    while position < end:
        batch = _next_batch(consumer, tp, a, position, end)
        first, after = batch[0].offset, batch[-1].offset + 1
        while after == end and a.hold is not None and a.hold.exists():
            time.sleep(0.05)  # the run still owes kills: the last transaction waits, outside any transaction
        log.event(INVOKE, TXN, {"input": [first, after]})
        try:
            producer.begin_transaction()
            for r in batch:
                producer.produce(
                    a.output, value=str(r.value).encode(), partition=r.value % a.output_partitions
                )
            offsets = [TopicPartition(a.input, a.partition, after)]
            group = consumer.consumer_group_metadata()
            with watch.guard("send_offsets_to_transaction", CALL_TIMEOUT_S):
                producer.send_offsets_to_transaction(offsets, group, CALL_TIMEOUT_S)
            if rng.random() < a.abort_rate:
                with watch.guard("abort_transaction", CALL_TIMEOUT_S):
                    producer.abort_transaction(CALL_TIMEOUT_S)
                log.event(FAIL, TXN, {"input": [first, after], "on_purpose": True})
            else:
                with watch.guard("commit_transaction", CALL_TIMEOUT_S):
                    producer.commit_transaction(CALL_TIMEOUT_S)
                log.event(OK, TXN, {"input": [first, after]})
                position = after
        except KafkaException as e:
            error: KafkaError = e.args[0]
            log.event(INFO, TXN, {"input": [first, after], "error": str(error)})
            if not error.txn_requires_abort():
                return FATAL_EXIT  # fenced, or unknown: a restart fences this producer and resumes
            with watch.guard("abort_transaction", CALL_TIMEOUT_S):
                producer.abort_transaction(CALL_TIMEOUT_S)
        if position != after:
            # The batch did not commit: copy it again, from the first offset not committed.
            consumer.seek(TopicPartition(a.input, a.partition, position))
        time.sleep(a.pause_s)
    consumer.close()
    return DONE_EXIT


def _next_batch(
    consumer: Consumer, tp: TopicPartition, a: CopierArgs, position: int, end: int
) -> list[Record]:
    """Up to ``a.batch`` records from ``position`` on. Every ``STALL_REPORT_S`` without a record, the wait
    is told on stderr (the copier's log, which a run that times out shows) with the consumer's position and
    the errors it was given: a copy that stalls says where."""
    batch: list[Record] = []
    errors: list[str] = []
    quiet_since = time.monotonic()
    while len(batch) < a.batch and position + len(batch) < end:
        got = 0
        for m in consumer.consume(a.batch - len(batch), 1.0):
            if m.error() is None:
                batch.append(record_of(m))
                got += 1
            else:
                errors.append(str(m.error()))
        if got:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= STALL_REPORT_S:
            (at,) = consumer.position([tp])
            print(
                f"copier {a.partition}: no record for {STALL_REPORT_S:g} s at {position + len(batch)} of"
                f" {end} (consumer position {at.offset}); errors: {errors[-5:]}",
                file=sys.stderr,
                flush=True,
            )
            quiet_since, errors = time.monotonic(), []
    return batch


def main() -> None:
    p = argparse.ArgumentParser(description="one transactional copier of tests.eos.copier")
    for name in ("bootstrap", "input", "output", "group"):
        p.add_argument(f"--{name}", required=True)
    for name in ("partition", "output-partitions", "batch", "seed"):
        p.add_argument(f"--{name}", type=int, required=True)
    p.add_argument("--abort-rate", type=float, default=0.1)
    p.add_argument("--pause-s", type=float, default=0.0)
    p.add_argument("--history", type=Path, required=True)
    p.add_argument("--hold", type=Path, help="while this file exists, the last transaction waits")
    a = p.parse_args()
    # A copier that a stalled run finds still running is sent SIGUSR1 (workload.describe_processes): its
    # Python stacks go to its log, so a stuck call is named.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    sys.exit(copy_partition(CopierArgs(**vars(a))))


# ---- the run ------------------------------------------------------------------------------------------


@dataclass
class CopyConfig:
    bootstrap: str
    prefix: str
    records: int = 6000
    output_partitions: int = 3
    # Kafka's test commits every 750 of 100,000; here 100 of 6,000 with a pause between transactions, so
    # that a copy spans its three kills (each restart takes a second or two) on a fast broker too.
    batch: int = 100
    abort_rate: float = 0.1
    pause_s: float = 0.1
    kills: int = 3
    seed: int = 0
    timeout_s: float = 240.0


@dataclass
class CopyResult:
    verdict: Verdict
    inputs: dict[int, list[int]]
    kills: int
    starts: int  # copier processes started: one per input partition, then one per restart
    concurrent: DrainResult
    final: DrainResult
    committed: dict[int, int] = field(default_factory=dict)


def seed(cfg: CopyConfig, topic: str) -> dict[int, list[int]]:
    """Writes 0..records-1 round robin over the input partitions; returns each partition's values in order."""
    producer = Producer(
        {"bootstrap.servers": cfg.bootstrap, "enable.idempotence": True, "linger.ms": 5, **CLIENT}
    )
    for value in range(cfg.records):
        producer.produce(topic, value=str(value).encode(), partition=value % INPUT_PARTITIONS)
        producer.poll(0)
    if producer.flush(60) != 0:
        raise WorkloadError("the input was not all acknowledged in 60 s")
    return {p: list(range(p, cfg.records, INPUT_PARTITIONS)) for p in range(INPUT_PARTITIONS)}


class Copiers:
    """The copier processes, one per input partition: started, killed with SIGKILL, restarted."""

    def __init__(self, cfg: CopyConfig, out: Path) -> None:
        self.cfg, self.out = cfg, out
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.done: set[int] = set()
        self.starts = 0
        self.killed: set[int] = set()  # partitions whose copier the run SIGKILLed and not yet restarted
        self.crashes = 0
        # While this file exists no copier commits its partition's last transaction, so a copy cannot end
        # before the run has made every kill it owes (a restart can take long enough for the other copier to
        # finish, and a fast broker copies a partition in a few seconds).
        self.hold = out / "hold"
        self.hold.touch()

    def start(self, partition: int) -> None:
        c = self.cfg
        args = [
            sys.executable, "-m", "tests.eos.copier", "--bootstrap", c.bootstrap, "--input", f"{c.prefix}-in",
            "--output", f"{c.prefix}-out", "--group", f"{c.prefix}-copier", "--partition", str(partition),
            "--output-partitions", str(c.output_partitions), "--batch", str(c.batch),
            "--seed", str(c.seed * 100 + self.starts), "--abort-rate", str(c.abort_rate),
            "--pause-s", str(c.pause_s), "--history", str(self.out / f"copier-{partition}.jsonl"),
            "--hold", str(self.hold),
        ]  # fmt: skip
        self.starts += 1
        with (self.out / f"copier-{partition}.log").open("ab") as log:
            self.procs[partition] = subprocess.Popen(
                args, cwd=ROOT, env=worker_env(), stdout=log, stderr=subprocess.STDOUT
            )

    def kill(self, partition: int) -> bool:
        """SIGKILL, mid-transaction or between two: whatever it had not committed must never show."""
        proc = self.procs[partition]
        if proc.poll() is not None:
            return False
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        self.killed.add(partition)
        return True

    def in_transaction(self, partition: int) -> bool:
        """Whether the copier's last event is an invoke: it is between begin_transaction and its end."""
        path = self.out / f"copier-{partition}.jsonl"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        return bool(lines) and '"type":"invoke"' in lines[-1]

    def tend(self) -> None:
        """Notes finished copiers; restarts dead ones (SIGKILLed, or exited after a fatal error)."""
        for partition, proc in self.procs.items():
            if partition in self.done or proc.poll() is None:
                continue
            if proc.returncode == DONE_EXIT:
                self.done.add(partition)
                continue
            if partition not in self.killed and proc.returncode != FATAL_EXIT:
                self.crashes += 1
                if self.crashes > MAX_CRASHES:
                    log = (self.out / f"copier-{partition}.log").read_text(errors="replace")
                    raise WorkloadError(f"copiers crashed {self.crashes} times; the last log:\n{log[-3000:]}")
            self.killed.discard(partition)
            self.start(partition)

    def describe(self) -> str:
        """Each copier's state, its last history events and its log's tail, its stacks if it runs."""
        named = {f"copier-{partition}": proc for partition, proc in self.procs.items()}
        return describe_processes(named, self.out, {f"copier-{partition}" for partition in self.done})

    def stop(self) -> None:
        for partition in self.procs:
            self.kill(partition)


def run_copy(cfg: CopyConfig, out: Path, on_tick: Callable[[float], object] | None = None) -> CopyResult:
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(cfg.seed)
    source, sink = f"{cfg.prefix}-in", f"{cfg.prefix}-out"
    create_topic(cfg.bootstrap, source, INPUT_PARTITIONS)
    create_topic(cfg.bootstrap, sink, cfg.output_partitions)
    inputs = seed(cfg, source)
    sink_partitions = [(sink, p) for p in range(cfg.output_partitions)]
    stop = threading.Event()
    concurrent: list[DrainResult] = []
    reader = threading.Thread(
        target=lambda: concurrent.append(
            drain(cfg.bootstrap, sink_partitions, 120, stop, f"{cfg.prefix}-tail")
        )
    )
    reader.start()
    copiers = Copiers(cfg, out)
    kills = mid_txn_kills = 0
    due = 0.0  # when the pending kill fell due
    started = time.monotonic()
    try:
        for partition in inputs:
            copiers.start(partition)
        while len(copiers.done) < len(inputs):
            elapsed = time.monotonic() - started
            if elapsed > cfg.timeout_s:
                raise WorkloadError(f"the copiers did not finish in {cfg.timeout_s} s\n{copiers.describe()}")
            progress = _copied(out)
            # ``on_tick`` answers True while it has faults still to make (agent kills): the copy is held
            # open for them too, or a fast copy ends before the last one.
            faults_pending = on_tick is not None and on_tick(progress / cfg.records) is True
            # Kills fall due within the first 60 % of the copy, so they spread over it while both copiers
            # run; the hold file keeps the copy from ending before the last one.
            if kills < cfg.kills and progress >= 0.6 * (kills + 1) / (cfg.kills + 1) * cfg.records:
                due = due or time.monotonic()
                running = [p for p, proc in copiers.procs.items() if proc.poll() is None]
                # Prefer a copier inside a transaction: its open transaction must be aborted by its
                # successor's InitProducerId. After MID_TXN_WAIT_S, any running copier will do.
                open_txn = [p for p in running if copiers.in_transaction(p)]
                late = time.monotonic() - due > MID_TXN_WAIT_S
                victims = open_txn or (running if late else [])
                if victims and copiers.kill(rng.choice(victims)):
                    kills += 1
                    mid_txn_kills += bool(open_txn)
                    due = 0.0
            if kills == cfg.kills and not faults_pending:
                copiers.hold.unlink(missing_ok=True)
            copiers.tend()
            time.sleep(0.1)
    finally:
        copiers.hold.unlink(missing_ok=True)
        copiers.stop()
        stop.set()
        reader.join(180)
    final = drain(cfg.bootstrap, sink_partitions, 60, group=f"{cfg.prefix}-final")
    committed = _group_offsets(cfg, source)
    verdict = check_copy(inputs, final.records, ordered=cfg.output_partitions == 1, committed=committed)
    verdict.merge(check_copy(inputs, concurrent[0].records if concurrent else [], label="concurrent"))
    verdict.stats.update({"kills": kills, "mid_txn_kills": mid_txn_kills, "copier_starts": copiers.starts})
    for name, result in (("final", final), ("concurrent", concurrent[0] if concurrent else DrainResult())):
        if not result.complete:
            verdict.add(
                "incomplete-drain", {"reader": name, "ends": str(result.ends), "hwm": str(result.hwm)}
            )
    return CopyResult(verdict, inputs, kills, copiers.starts, concurrent[0], final, committed)


def _copied(out: Path) -> int:
    """Records copied so far, from the copiers' own histories of committed transactions."""
    return sum(
        e["value"]["input"][1] - e["value"]["input"][0]
        for e in read_events(out.glob("copier-*.jsonl"))
        if e["type"] == OK
    )


def _group_offsets(cfg: CopyConfig, source: str) -> dict[int, int]:
    consumer: Consumer = read_committed_consumer(cfg.bootstrap, f"{cfg.prefix}-copier")
    try:
        tps = [TopicPartition(source, p) for p in range(INPUT_PARTITIONS)]
        return {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=CALL_TIMEOUT_S)}
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
