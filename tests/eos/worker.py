"""One client process of the EOS workload: a transactional producer and a read_committed consumer.

Run as ``python -m tests.eos.worker ...`` by ``tests.eos.workload``. Until its time is up it runs
transactions of 1-4 micro-ops (send a fresh value to a random partition, or poll), sometimes with
send_offsets, and ends 10% of them with an abort on purpose. Now and then it *crashes*: it abandons its
producer in the middle of a transaction, starts a new incarnation with the same transactional.id (whose
InitProducerId fences the old one and aborts its open transaction), and may then try to commit through the
old producer, a zombie that must be refused. Every step goes to its history file (``tests.eos.history``).

Outcomes are recorded conservatively: ``ok`` only when commit_transaction returned, ``fail`` only when the
transaction is definitely aborted (abort_transaction returned, or the transaction was abandoned and a later
incarnation's InitProducerId returned, which aborts it), ``info`` otherwise.

The consumer is in assign mode on every partition from offset 0 and never rewinds, so the checker can hold
its polls to monotonic, skip-free order.
"""

from __future__ import annotations

import argparse
import faulthandler
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from tests.eos.history import CRASH, FAIL, INFO, INVOKE, OK, TXN, HistoryWriter, Mop, Poll, Send, SendOffsets
from tests.eos.kafka_io import CLIENT, read_committed_consumer, record_of

VALUES_PER_WORKER = 100_000_000  # worker i writes values in [i * this, (i + 1) * this): unique in the run
CALL_TIMEOUT_S = 30.0


@dataclass
class Settings:
    bootstrap: str
    topic: str
    partitions: int
    worker: int
    seed: int
    seconds: float
    history: Path
    txn_timeout_ms: int = 10_000
    abort_rate: float = 0.1
    crash_rate: float = 0.03
    offsets_rate: float = 0.3
    isolation: str = "read_committed"
    # While this file exists the worker goes on past ``seconds``: the test's faults are still to come.
    hold: Path | None = None


class Worker:
    def __init__(self, s: Settings) -> None:
        self.s = s
        self.rng = random.Random(s.seed * 1_000_003 + s.worker)
        self.process = f"w{s.worker}"
        self.log = HistoryWriter(s.history, self.process)
        self.next_value = s.worker * VALUES_PER_WORKER
        self.incarnation = 0
        self.consumer: Consumer = read_committed_consumer(
            s.bootstrap, f"{s.topic}-{self.process}", **{"isolation.level": s.isolation}
        )
        self.assignment = [TopicPartition(s.topic, p, 0) for p in range(s.partitions)]
        self.consumer.assign(self.assignment)
        self.producer = self._incarnate()

    # ---- producers ----

    def _incarnate(self) -> Producer:
        """A new producer with the worker's transactional.id, initialised: every earlier one is fenced."""
        self.incarnation += 1
        producer = Producer(
            {
                "bootstrap.servers": self.s.bootstrap,
                "transactional.id": f"{self.s.topic}-{self.process}",
                "transaction.timeout.ms": self.s.txn_timeout_ms,
                "linger.ms": 2,
                **CLIENT,
            }
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                producer.init_transactions(CALL_TIMEOUT_S)
                return producer
            except KafkaException as e:
                if not e.args[0].retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _replace_producer(self) -> None:
        self.producer.purge()
        self.producer = self._incarnate()

    # ---- micro-ops ----

    def _send(self, mops: list[Mop]) -> None:
        partition = self.rng.randrange(self.s.partitions)
        send = Send(self.s.topic, partition, f"k{partition}", self.next_value)
        self.next_value += 1
        mops.append(send)

        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is None:
                send.offset = message.offset()

        self.producer.produce(
            self.s.topic,
            value=str(send.value).encode(),
            key=send.key,
            partition=partition,
            on_delivery=delivered,
        )

    def _poll(self, mops: list[Mop]) -> None:
        messages = self.consumer.consume(20, 0.05)
        poll = Poll(time.monotonic_ns(), [record_of(m) for m in messages if m.error() is None])
        mops.append(poll)

    def _send_offsets(self, mops: list[Mop]) -> None:
        positions = [tp for tp in self.consumer.position(self.assignment) if tp.offset >= 0]
        if not positions:
            return
        metadata = self.consumer.consumer_group_metadata()
        self.producer.send_offsets_to_transaction(positions, metadata, CALL_TIMEOUT_S)
        group = f"{self.s.topic}-{self.process}"
        mops.append(SendOffsets(group, [(tp.topic, tp.partition, tp.offset) for tp in positions]))

    # ---- transactions ----

    def transaction(self) -> None:
        plan = ["send" if self.rng.random() < 0.6 else "poll" for _ in range(self.rng.randint(1, 4))]
        intent = "abort" if self.rng.random() < self.s.abort_rate else "commit"
        crash_at = self.rng.randrange(len(plan)) if self.rng.random() < self.s.crash_rate else None
        mops: list[Mop] = []
        self.log.event(INVOKE, TXN, self.log.txn_value([], None, None))
        try:
            self.producer.begin_transaction()
            for i, step in enumerate(plan):
                if step == "send":
                    self._send(mops)
                else:
                    self._poll(mops)
                if i == crash_at:
                    self._crash(mops)
                    return
            if any(isinstance(m, Poll) for m in mops) and self.rng.random() < self.s.offsets_rate:
                self._send_offsets(mops)
            # Delivery reports (and so the offsets) come back while flushing.
            self.producer.flush(CALL_TIMEOUT_S)
        except (KafkaException, BufferError) as e:
            self._end_after_error(mops, e)
            return
        self._end(mops, intent)

    def _end(self, mops: list[Mop], intent: str) -> None:
        end_at = time.monotonic_ns()
        tries = 0
        while True:
            tries += 1
            try:
                if intent == "commit":
                    self.producer.commit_transaction(CALL_TIMEOUT_S)
                    self.log.event(OK, TXN, self.log.txn_value(mops, "commit", end_at))
                else:
                    self.producer.abort_transaction(CALL_TIMEOUT_S)
                    self.log.event(FAIL, TXN, self.log.txn_value(mops, "abort", end_at))
                return
            except KafkaException as e:
                error: KafkaError = e.args[0]
                if error.retriable() and tries < 5:
                    continue  # librdkafka: a retriable commit or abort may be called again
                if error.txn_requires_abort() and intent == "commit":
                    intent = "abort"  # the commit definitely failed; the abort decides the outcome
                    continue
                # Fatal, or retries exhausted: the outcome is unknown; start over with a new producer.
                self.log.event(INFO, TXN, {**self.log.txn_value(mops, intent, end_at), "error": str(error)})
                self._replace_producer()
                return

    def _end_after_error(self, mops: list[Mop], e: KafkaException | BufferError) -> None:
        """A micro-op failed: abort; only a returned abort makes the outcome definite."""
        end_at = time.monotonic_ns()
        try:
            self.producer.abort_transaction(CALL_TIMEOUT_S)
            self.log.event(FAIL, TXN, {**self.log.txn_value(mops, "abort", end_at), "error": str(e)})
        except KafkaException as abort_error:
            self.log.event(
                INFO, TXN, {**self.log.txn_value(mops, "abort", end_at), "error": str(abort_error)}
            )
            self._replace_producer()

    def _crash(self, mops: list[Mop]) -> None:
        """Abandons the producer mid-transaction; the next incarnation's InitProducerId aborts it."""
        if self.rng.random() < 0.5:
            self.producer.flush(CALL_TIMEOUT_S)  # the abandoned records reach the log before the fence
        zombie = self.producer
        self.log.event(INFO, CRASH, {"incarnation": self.incarnation})
        self.producer = self._incarnate()
        # InitProducerId returned, so the abandoned transaction is aborted: its outcome is definite.
        self.log.event(FAIL, TXN, {**self.log.txn_value(mops, None, None), "abandoned": True})
        if self.rng.random() < 0.5:
            self._zombie(zombie)
        zombie.purge()

    def _zombie(self, zombie: Producer) -> None:
        """The fenced producer tries to commit one more value; the broker must refuse it."""
        saved, self.producer = self.producer, zombie
        mops: list[Mop] = []
        self.log.event(INVOKE, TXN, self.log.txn_value([], None, None, zombie=True))
        end_at = None
        try:
            self._send(mops)
            zombie.flush(5)
            end_at = time.monotonic_ns()
            zombie.commit_transaction(5)
            self.log.event(OK, TXN, self.log.txn_value(mops, "commit", end_at, zombie=True))
        except (KafkaException, BufferError) as e:
            # Refused: definite when nothing of it was acknowledged and the error is fatal (fenced).
            refused = isinstance(e, KafkaException) and e.args[0].fatal()
            definite = refused and all(m.offset is None for m in mops if isinstance(m, Send))
            value = {**self.log.txn_value(mops, "commit", end_at, zombie=True), "error": str(e)}
            self.log.event(FAIL if definite else INFO, TXN, value)
        finally:
            self.producer = saved

    def run(self) -> None:
        deadline = time.monotonic() + self.s.seconds
        while time.monotonic() < deadline or (self.s.hold is not None and self.s.hold.exists()):
            self.transaction()
        self.producer.flush(CALL_TIMEOUT_S)
        self.consumer.close()
        self.log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--worker", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--history", type=Path, required=True)
    parser.add_argument("--txn-timeout-ms", type=int, default=10_000)
    parser.add_argument("--isolation", default="read_committed")
    parser.add_argument("--hold", type=Path, help="while this file exists, go on past --seconds")
    args = parser.parse_args()
    # A worker found still running past its deadline is sent SIGUSR1 (workload.py): its Python stacks go to
    # its log, so a stuck call is named.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    Worker(
        Settings(
            args.bootstrap,
            args.topic,
            args.partitions,
            args.worker,
            args.seed,
            args.seconds,
            args.history,
            args.txn_timeout_ms,
            isolation=args.isolation,
            hold=args.hold,
        )
    ).run()


if __name__ == "__main__":
    main()
