"""The group benchmark's clients, each a process of its own: a librdkafka group member, or a producer.

    python -m bench.group_clients member --bootstrap H:P --topic T --group G --name N \
        --heartbeat-ms 3000 --session-ms 45000
    python -m bench.group_clients produce --bootstrap H:P --topic T --partitions 32 --value-bytes 1024 \
        (--records N | --rate R)

Started by bench.group_bench, never by hand. Each reports on stdout as JSON lines with wall-clock times
(``{"ev": ..., "t": ...}``) and stops on a line ``stop`` or the end of its standard input, so that it never
outlives the orchestrator. A member reports its subscribe, assignments and revocations (rebalance
callbacks), the first record of each partition after each assignment, and every 200 ms its record and
byte counts. A producer reports what it produced once done.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

KEY_BYTES = 7  # b"k%06d"


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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    member = sub.add_parser("member", help="one group member")
    member.add_argument("--group", required=True)
    member.add_argument("--name", required=True)
    member.add_argument("--heartbeat-ms", type=int, required=True)
    member.add_argument("--session-ms", type=int, required=True)
    produce = sub.add_parser("produce", help="fill the topic, or write at a rate until stopped")
    produce.add_argument("--partitions", type=int, required=True)
    produce.add_argument("--value-bytes", type=int, required=True)
    produce.add_argument("--records", type=int, default=0)
    produce.add_argument("--rate", type=float, default=0.0)
    for p in (member, produce):
        p.add_argument("--bootstrap", required=True)
        p.add_argument("--topic", required=True)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return member_main(args) if args.command == "member" else produce_main(args)


if __name__ == "__main__":
    sys.exit(main())
