"""Kafka load generator for bench.kafka_bench: librdkafka (confluent-kafka) in a process of its own.

    python -m bench.kafka_loadgen produce --bootstrap H:P --topic T --start-file F --duration S --out O.json
                                          [--compression none|lz4|...] [--rate-mib R] [--instances N] ...
    python -m bench.kafka_loadgen consume --bootstrap H:P --topic T --partitions 0,2,4 --start-file F \
                                          --timeout S --out O.json

Writes one JSON object to ``--out``. The orchestrator starts several of these so that no generator shares
a GIL with another or with the server it measures.

produce: ``--instances`` Producer objects (acks=all, idempotence off unless ``--idempotence``, murmur2
partitioner as Java's client) fed round-robin by one loop. Records have ``--value-bytes`` values (a pool
of words or random characters, built before the clock starts; with ``--schema-id``, each framed as
Confluent's Avro serializer frames a record of one string field with that id, for
bench.schema_validation_bench) and 7-byte keys ``k000123`` from ``--key-count`` keys, so they spread
over every partition.
Once ready the process creates ``OUT.ready`` and waits for ``--start-file`` to hold the wall-clock time T
of the measured window (written when every process is ready); it starts producing at once, and what is
acknowledged before T is warm-up.
- Without ``--rate-mib`` it is closed-loop: produce() until librdkafka's queue is full (BufferError), then
  poll for delivery reports; the queue bound (``--queue-mib`` per instance) is what keeps it "closed".
- With ``--rate-mib R`` it offers R MiB/s of key+value bytes (this process's share), paced every ms.
Throughput counts the key+value bytes whose delivery report (success) arrives inside [T, T+duration].
Latency is ``Message.latency()``: from produce() to the broker's acknowledgement, for messages produced
inside the window and acknowledged before the drain ends (every one with --rate-mib, 1 in 16 otherwise:
in the closed loop only every 16th message asks for a delivery report, and acknowledged and failed counts
are those reports times 16).
After the window no message is produced and the queue is flushed for at most ``--drain-timeout`` seconds;
``sent_in_window`` vs ``sent_in_window_acked`` says how many latencies are missing. Failed deliveries are
counted by error name, with the first message of each. librdkafka's statistics (every 500 ms) give the
ProduceRequests sent, their mean size, and the most requests waiting for a response at once.

consume: one Consumer (no group: partitions are assigned, from offset 0) reads the given partitions up to
their high watermark (ListOffsets before the clock starts). Counts key+value bytes and records; the time
runs from T to the last partition reaching its high watermark (or --timeout).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from bench.loadrun import wait_for_start

MiB = 1024 * 1024
KEY_BYTES = 7  # b"k%06d"
# Closed loop: 1 message in REPORT_SAMPLE carries a delivery callback, and each report counts for
# REPORT_SAMPLE messages (with --rate-mib every message has one). A Python callback per 1 KiB record costs
# the generator about as much CPU as the rest of its work together, on the cores the agent under test also
# uses. A batch's records are acknowledged together, so the window's count is off by at most a sample per
# batch at its two edges.
REPORT_SAMPLE = 16
# Clients kept referenced until os._exit: destroying a producer with records still queued (the overload
# phase leaves some on purpose) only logs a warning and takes time.
_KEEP: list[Any] = []


def value_pool(n: int, size: int, seed: int, kind: str) -> list[bytes]:
    """``n`` values of ``size`` bytes: random printable characters, or words drawn from a vocabulary.

    librdkafka sends a batch uncompressed when compressing does not make it smaller, which is the case for
    random characters with lz4: "text" values (words drawn from 512 random 3-10 letter ones) compress
    about 2.4x with lz4.
    """
    rng = random.Random(seed)
    if kind == "random":
        alphabet = (string.ascii_letters + string.digits).encode()
        to_printable = bytes(alphabet[i % len(alphabet)] for i in range(256))
        return [rng.randbytes(size).translate(to_printable) for _ in range(n)]
    letters = string.ascii_lowercase
    words = ["".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(512)]
    out = []
    for _ in range(n):
        text = " ".join(rng.choices(words, k=size // 4 + 1)).encode()
        out.append(text[:size])
    return out


def avro_string_framed(schema_id: int, text: bytes, size: int) -> bytes:
    """``size`` bytes as Confluent's Avro serializer frames a record of one string field: magic byte 0, the
    4-byte id, the string's zig-zag varint length, its bytes (``text``, cut or padded to fit)."""
    for width in range(1, 4):
        length = size - 5 - width
        varint = bytearray()
        encoded = max(length, 0) << 1  # zig-zag of a non-negative length
        while encoded > 0x7F:
            varint.append((encoded & 0x7F) | 0x80)
            encoded >>= 7
        varint.append(encoded)
        if length >= 0 and len(varint) == width:
            return b"\x00" + schema_id.to_bytes(4, "big") + bytes(varint) + text[:length].ljust(length, b" ")
    raise ValueError(f"no Avro string framing of {size} bytes")


def producer_config(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "bootstrap.servers": args.bootstrap,
        "client.id": f"strata-bench-{args.seed}",
        "acks": "all",
        "enable.idempotence": args.idempotence,
        "compression.type": args.compression,
        "linger.ms": args.linger_ms,
        "batch.size": args.batch_bytes,
        "partitioner": "murmur2_random",
        "queue.buffering.max.kbytes": args.queue_mib * 1024,
        "queue.buffering.max.messages": 10_000_000,
        "message.timeout.ms": args.message_timeout_ms,
        "socket.nagle.disable": True,
    }


@dataclass
class Reports:
    """What the delivery reports and librdkafka's statistics said, counted against the window."""

    every: int  # messages per delivery report
    start: float = float("inf")
    end: float = float("inf")
    counts: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    first_error: dict[str, str] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    wire: dict[str, dict[str, int]] = field(default_factory=dict)
    wire_max: Counter[str] = field(default_factory=Counter)

    def on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        now = time.perf_counter()
        if err is not None:
            name = err.name()
            self.errors[name] += 1
            self.first_error.setdefault(name, err.str())
            return
        self.counts["acked"] += 1
        if self.start <= now <= self.end:
            self.counts["window_acked"] += 1
        latency = msg.latency()  # produce() -> acknowledgement received, librdkafka's clock
        if latency is not None and self.start <= now - latency <= self.end:
            self.counts["sent_in_window_acked"] += 1
            self.latencies.append(latency * 1000)

    def on_stats(self, text: str) -> None:
        """What librdkafka did on the wire: requests sent, their mean size, the most awaiting an answer."""
        stats = json.loads(text)
        for broker in stats.get("brokers", {}).values():
            if broker.get("nodeid", -1) < 0:
                continue  # the bootstrap connection
            key = stats.get("name", "") + "/" + broker["name"]  # several instances in one process
            self.wire[key] = {"tx": broker.get("tx", 0), "txbytes": broker.get("txbytes", 0)}
            self.wire_max["waitresp"] = max(self.wire_max["waitresp"], broker.get("waitresp_cnt", 0))
            self.wire_max["outbuf"] = max(self.wire_max["outbuf"], broker.get("outbuf_cnt", 0))


def produce_loop(
    args: argparse.Namespace, producers: list[Any], reports: Reports, t0: float
) -> tuple[int, float]:
    """produce() until the window ends, paced with --rate-mib or else closed-loop; (produced, CPU s)."""
    values = value_pool(args.values, args.value_bytes, args.seed, args.value_kind)
    if args.schema_id:
        values = [avro_string_framed(args.schema_id, v, args.value_bytes) for v in values]
    keys = [b"k%06d" % i for i in range(args.key_count)]
    rng = random.Random(args.seed)
    key_order = [rng.randrange(args.key_count) for _ in range(65_536)]
    rate = args.rate_mib * MiB / (KEY_BYTES + args.value_bytes)  # messages per second, this process's share
    produced, n, cpu_start = 0, len(producers), None
    while True:
        now = time.perf_counter()
        if cpu_start is None and now >= reports.start:
            cpu_start = time.process_time()
            reports.counts["produced_before_window"] = produced
        if now >= reports.end:
            break
        due = int((now - t0) * rate) - produced if rate else 1024
        full = False
        for _ in range(due):
            try:
                producers[produced % n].produce(
                    args.topic,
                    values[produced % len(values)],
                    keys[key_order[produced & 0xFFFF]],
                    on_delivery=None if produced % reports.every else reports.on_delivery,
                )
            except BufferError:
                full = True  # this instance's queue is full: serve delivery reports, then try again
                break
            produced += 1
        for p in producers:
            p.poll(0)
        if rate:
            producers[0].poll(0.001)  # paced: wait for the next millisecond's share
        elif full:
            producers[produced % n].poll(0.002)  # woken by the first acknowledgement
    end = time.process_time()
    return produced, end - (cpu_start if cpu_start is not None else end)


def produce(args: argparse.Namespace) -> dict[str, Any]:
    sample_all = args.rate_mib > 0
    reports = Reports(every=1 if sample_all else REPORT_SAMPLE)
    config = {**producer_config(args), "stats_cb": reports.on_stats, "statistics.interval.ms": 500}
    producers = [Producer(config) for _ in range(args.instances)]
    _KEEP.extend(producers)
    # Connect and fetch metadata before the clock starts (the first produce() would otherwise pay for it).
    for p in producers:
        p.list_topics(args.topic, timeout=30)
    start_at = wait_for_start(args.out, args.start_file)
    t0 = time.perf_counter()
    reports.start = t0 + (start_at - time.time())
    reports.end = reports.start + args.duration
    produced, cpu_s = produce_loop(args, producers, reports, t0)
    deadline = time.monotonic() + args.drain_timeout
    for p in producers:
        p.flush(max(0.0, deadline - time.monotonic()))
    for p in producers:
        p.poll(0)  # the last statistics
    counts, every, record_bytes = reports.counts, reports.every, KEY_BYTES + args.value_bytes
    tx = sum(w["tx"] for w in reports.wire.values())
    txbytes = sum(w["txbytes"] for w in reports.wire.values())
    return {
        "compression": args.compression,
        "rate_mib": args.rate_mib,
        "produced": produced,
        "acked": counts["acked"] * every,
        "window_acked": counts["window_acked"] * every,
        "window_bytes": counts["window_acked"] * every * record_bytes,
        "sent_in_window": produced - counts.get("produced_before_window", produced),
        "sent_in_window_acked": counts["sent_in_window_acked"] * every,
        "requests_sent": tx,
        "request_bytes_mean": txbytes / tx if tx else None,
        "max_requests_waiting_response": reports.wire_max["waitresp"],
        "max_requests_in_send_buffer": reports.wire_max["outbuf"],
        "record_bytes": record_bytes,
        "errors": {name: count * every for name, count in reports.errors.items()},
        "first_error": reports.first_error,
        "unfinished": sum(len(p) for p in producers),
        "latencies_ms": reports.latencies,
        "latency_sampled": "all" if sample_all else f"1/{REPORT_SAMPLE}",
        "reports_per_message": f"1/{every}",
        "cpu_s": cpu_s,
    }


def consume(args: argparse.Namespace) -> dict[str, Any]:
    partitions = [int(p) for p in args.partitions.split(",") if p]
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": "strata-bench-unused",  # required by librdkafka; nothing is committed or joined
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": args.fetch_max_bytes,
            "max.partition.fetch.bytes": args.partition_max_bytes,
            "receive.message.max.bytes": args.fetch_max_bytes + MiB,
            "queued.max.messages.kbytes": max(65_536, 2 * args.fetch_max_bytes // 1024),
            "fetch.wait.max.ms": 100,
        }
    )
    errors: Counter[str] = Counter()
    try:
        high = {}
        for p in partitions:
            high[p] = consumer.get_watermark_offsets(TopicPartition(args.topic, p), timeout=30)[1]
        expected = sum(high.values())
        start_at = wait_for_start(args.out, args.start_file)
        time.sleep(max(0.0, start_at - time.time()))
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        consumer.assign([TopicPartition(args.topic, p, 0) for p in partitions])
        pending = {p for p in partitions if high[p] > 0}
        records = nbytes = 0
        deadline = t0 + args.timeout
        while pending and time.perf_counter() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                err = msg.error()
                partition, offset = msg.partition() or 0, msg.offset() or 0
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if offset >= high.get(partition, 0):
                            pending.discard(partition)
                    else:
                        errors[err.name()] += 1
                    continue
                records += 1
                key, value = msg.key(), msg.value()
                nbytes += (len(key) if key else 0) + (len(value) if value else 0)
                if offset + 1 >= high[partition]:
                    pending.discard(partition)
        elapsed = time.perf_counter() - t0
        cpu_s = time.process_time() - cpu0
    finally:
        consumer.close()
    return {
        "partitions": partitions,
        "records": records,
        "expected_records": expected,
        "payload_bytes": nbytes,
        "elapsed_s": elapsed,
        "unfinished_partitions": sorted(pending),
        "errors": dict(errors),
        "cpu_s": cpu_s,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    prod = sub.add_parser("produce")
    prod.add_argument("--compression", default="none")
    prod.add_argument("--idempotence", action="store_true", help="an idempotent producer (5 in flight)")
    prod.add_argument("--rate-mib", type=float, default=0.0, help="offered MiB/s; 0 = closed loop")
    prod.add_argument("--instances", type=int, default=1, help="Producer objects in this process")
    prod.add_argument("--value-bytes", type=int, default=1024)
    prod.add_argument("--values", type=int, default=256, help="distinct values, cycled")
    prod.add_argument("--value-kind", choices=("text", "random"), default="text")
    prod.add_argument(
        "--schema-id", type=int, default=0, help="frame values as Avro strings of this schema id (0: plain)"
    )
    prod.add_argument("--key-count", type=int, default=4096)
    prod.add_argument("--linger-ms", type=float, default=5.0)
    prod.add_argument("--batch-bytes", type=int, default=1_000_000)
    prod.add_argument("--queue-mib", type=int, default=64, help="librdkafka queue bound per instance")
    prod.add_argument("--message-timeout-ms", type=int, default=60_000)
    prod.add_argument("--duration", type=float, required=True)
    prod.add_argument("--drain-timeout", type=float, default=30.0)
    prod.add_argument("--seed", type=int, default=1)
    cons = sub.add_parser("consume")
    cons.add_argument("--partitions", required=True, help="comma-separated partition indices")
    cons.add_argument("--fetch-max-bytes", type=int, default=64 * MiB)
    cons.add_argument("--partition-max-bytes", type=int, default=8 * MiB)
    cons.add_argument("--timeout", type=float, default=60.0)
    for p in (prod, cons):
        p.add_argument("--bootstrap", required=True)
        p.add_argument("--topic", required=True)
        p.add_argument("--start-file", required=True)
        p.add_argument("--out", required=True)
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    try:
        result = produce(args) if args.mode == "produce" else consume(args)
    except KafkaException as exc:
        result = {"fatal": str(exc)}
    Path(args.out).write_text(json.dumps(result))
    # Skip librdkafka's teardown: after an overload run it may hold queued messages for a while, and the
    # results are written.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
