"""One consumer group member in a process of its own, for tests/kafka/test_group_mixed.py.

    python tests/kafka/group_member.py CLIENT BOOTSTRAP TOPIC GROUP NAME [--session-ms N] [--heartbeat-ms N]

CLIENT is ``confluent`` (librdkafka), ``kafka-python`` or ``aiokafka``; NAME is the client id. The member
subscribes to TOPIC in GROUP with the client's own assignors and auto-commit off, and for every record it
processes it commits that record's offset + 1 synchronously before taking the next one, so a clean
handover (a rebalance, a leave) never re-delivers a committed record. tests/kafka/js/group_member.mjs is
the same member in kafkajs.

It prints one JSON object per line on stdout, each with ``ev`` and ``t`` (time.time() when it happened):
``start``; ``assigned`` / ``revoked`` / ``lost`` with ``parts`` (from the client's rebalance callbacks);
``rec`` with ``p``, ``o`` (a record processed); ``commit`` with ``p``, ``o`` (the offset committed,
record + 1) or ``commit_failed`` with an ``error`` as well; ``error``; ``closed`` once it has left the
group. It leaves cleanly (close: LeaveGroup) and exits 0 when a line ``stop`` or end of file arrives on
stdin, so it never outlives the test that started it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from typing import Any


class Out:
    """JSON lines on stdout, one write and flush per event, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def emit(self, ev: str, **fields: Any) -> None:
        line = json.dumps({"ev": ev, "t": time.time(), **fields})
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


def _python_client_settings(args: argparse.Namespace) -> dict[str, Any]:
    """What kafka-python's and aiokafka's consumers are given alike (their settings share names)."""
    return {
        "bootstrap_servers": args.bootstrap,
        "group_id": args.group,
        "client_id": args.name,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": args.session_ms,
        "heartbeat_interval_ms": args.heartbeat_ms,
        "max_poll_interval_ms": args.rebalance_ms,
    }


def watch_stdin(stop: threading.Event) -> None:
    """``stop`` or end of file on stdin sets ``stop``."""

    def run() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=run, name="stdin", daemon=True).start()


def run_confluent(args: argparse.Namespace, out: Out, stop: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "client.id": args.name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": args.session_ms,
            "heartbeat.interval.ms": args.heartbeat_ms,
            "max.poll.interval.ms": args.rebalance_ms,
        }
    )

    def parts(partitions: list[Any]) -> list[int]:
        return sorted(tp.partition for tp in partitions)

    consumer.subscribe(
        [args.topic],
        on_assign=lambda _c, ps: out.emit("assigned", parts=parts(ps)),
        on_revoke=lambda _c, ps: out.emit("revoked", parts=parts(ps)),
        on_lost=lambda _c, ps: out.emit("lost", parts=parts(ps)),
    )
    while not stop.is_set():
        msg = consumer.poll(0.1)
        if msg is None:
            continue
        if msg.error() is not None:
            out.emit("error", error=str(msg.error()))
            continue
        p, o = msg.partition(), msg.offset()
        assert p is not None
        assert o is not None
        out.emit("rec", p=p, o=o)
        error: str | None = None
        try:
            done = consumer.commit(offsets=[TopicPartition(args.topic, p, o + 1)], asynchronous=False)
            error = next((str(tp.error) for tp in done or [] if tp.error is not None), None)
        except KafkaException as exc:
            error = str(exc)
        if error is None:
            out.emit("commit", p=p, o=o + 1)
        else:
            out.emit("commit_failed", p=p, o=o + 1, error=error)
    consumer.close()  # LeaveGroup; on_revoke runs first
    out.emit("closed")


def run_kafka_python(args: argparse.Namespace, out: Out, stop: threading.Event) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]  # kafka-python is untyped here
        def on_partitions_revoked(self, revoked: Any) -> None:
            out.emit("revoked", parts=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            out.emit("assigned", parts=sorted(tp.partition for tp in assigned))

    consumer = KafkaConsumer(**_python_client_settings(args), max_poll_records=20)
    consumer.subscribe([args.topic], listener=Listener())
    while not stop.is_set():
        # Rebalance callbacks run inside poll(), in this thread: between two polls the partitions stay
        # ours, and the heartbeat thread only asks for a rejoin, so these commits are accepted.
        for tp, records in consumer.poll(timeout_ms=100).items():
            for record in records:
                out.emit("rec", p=tp.partition, o=record.offset)
                try:
                    consumer.commit({tp: OffsetAndMetadata(record.offset + 1, "", -1)})
                except KafkaError as exc:
                    out.emit("commit_failed", p=tp.partition, o=record.offset + 1, error=repr(exc))
                else:
                    out.emit("commit", p=tp.partition, o=record.offset + 1)
    consumer.close()  # auto-commit is off: nothing more to commit; LeaveGroup
    out.emit("closed")


def run_aiokafka(args: argparse.Namespace, out: Out, stop: threading.Event) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener  # type: ignore[import-untyped]
    from aiokafka.errors import KafkaError  # type: ignore[import-untyped]

    async def main() -> None:
        # The coordinator revokes from a task of its own; the lock makes it wait for the batch being
        # processed (every record of which is committed), and ``owned`` drops a batch fetched before a
        # revocation that won the lock.
        lock = asyncio.Lock()
        owned: set[int] = set()

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                async with lock:
                    owned.clear()
                    out.emit("revoked", parts=sorted(tp.partition for tp in revoked))

            async def on_partitions_assigned(self, assigned: Any) -> None:
                owned.clear()
                owned.update(tp.partition for tp in assigned)
                out.emit("assigned", parts=sorted(tp.partition for tp in assigned))

        consumer = AIOKafkaConsumer(**_python_client_settings(args), rebalance_timeout_ms=args.rebalance_ms)
        consumer.subscribe([args.topic], listener=Listener())
        await consumer.start()
        try:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=100, max_records=20)
                async with lock:
                    for tp, records in batch.items():
                        for record in records:
                            if tp.partition not in owned:
                                break
                            out.emit("rec", p=tp.partition, o=record.offset)
                            try:
                                await consumer.commit({tp: record.offset + 1})
                            except KafkaError as exc:
                                out.emit(
                                    "commit_failed", p=tp.partition, o=record.offset + 1, error=repr(exc)
                                )
                            else:
                                out.emit("commit", p=tp.partition, o=record.offset + 1)
        finally:
            await consumer.stop()  # LeaveGroup
        out.emit("closed")

    asyncio.run(main())


CLIENTS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("client", choices=sorted(CLIENTS))
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("group")
    parser.add_argument("name", help="client id")
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-ms", type=int, default=300)
    parser.add_argument("--rebalance-ms", type=int, default=20000, help="max.poll.interval.ms")
    args = parser.parse_args()
    out = Out()
    stop = threading.Event()
    watch_stdin(stop)
    out.emit("start", client=args.client, name=args.name)
    CLIENTS[args.client](args, out, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
