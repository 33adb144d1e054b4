"""What each Kafka compression level costs when Strata compresses on a topic's behalf, per MiB of records.

    python -m bench.compression_levels_bench [--mib 1] [--seconds 1]

``--mib`` of JSON-like records (keyed, one event object per value, as services produce them) are encoded
once as an uncompressed batch; its records section is then compressed with
``storage.records.compression.compress`` at each Kafka level listed below, repeatedly for ``--seconds``.
That is the work behind a re-compression to ``compression.type``, an HTTP produce request's batches and a
batch compaction rewrites. The figures are CPU time per MiB of records (one core, the process's own
time), the MiB/s that makes, and the output as a share of the input.

The lz4 row "HC 9 (not a Kafka mapping)" compresses with lz4's HC level 9 directly: what the default
``compression.lz4.level=9`` would cost if it meant HC 9. It does not: Kafka's writer uses lz4's fast
compressor for the default level and HC only for the others (see the codec module's docstring), and so
does Strata. One process; nothing else is measured.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable

import cramjam

from storage.records import Record, compression, encode_batch

MiB = 1024 * 1024
# (codec, Kafka level or None for the default, label)
LEVELS: list[tuple[int, int | None, str]] = [
    (compression.LZ4, None, "lz4 default (9: fast)"),
    (compression.LZ4, 1, "lz4 1 (HC 2)"),
    (compression.LZ4, 3, "lz4 3 (HC 3)"),
    (compression.LZ4, 8, "lz4 8 (HC 8)"),
    (compression.LZ4, 10, "lz4 10 (HC 10)"),
    (compression.LZ4, 12, "lz4 12 (HC 12)"),
    (compression.GZIP, None, "gzip default (-1: 6)"),
    (compression.GZIP, 1, "gzip 1"),
    (compression.GZIP, 9, "gzip 9"),
    (compression.ZSTD, None, "zstd default (3)"),
    (compression.ZSTD, -5, "zstd -5"),
    (compression.ZSTD, 1, "zstd 1"),
    (compression.ZSTD, 9, "zstd 9"),
    (compression.ZSTD, 19, "zstd 19"),
    (compression.SNAPPY, None, "snappy (no levels)"),
]


def records_section(mib: float, seed: int = 1) -> bytes:
    """About ``mib`` MiB of records: keys ``user-N``, JSON event values of 100-200 bytes."""
    rng = random.Random(seed)
    events = ["page_view", "click", "add_to_cart", "checkout", "search", "login"]
    recs: list[Record] = []
    size = 0
    now = 1_700_000_000_000
    while size < mib * MiB:
        user = rng.randrange(20_000)
        value = json.dumps(
            {
                "user_id": f"user-{user}",
                "event": rng.choice(events),
                "ts": now + len(recs),
                "session": f"{rng.getrandbits(64):016x}",
                "page": f"/products/{rng.randrange(5000)}",
                "price": round(rng.random() * 200, 2),
                "tags": rng.sample(["new", "sale", "mobile", "web", "eu", "us", "beta"], 3),
            }
        ).encode()
        recs.append(Record(len(recs), now + len(recs), f"user-{user}".encode(), value))
        size += len(value) + 12
    return encode_batch(recs)[61:]


def _cpu_per_mib(work: Callable[[], object], raw_bytes: int, seconds: float) -> float:
    runs = 0
    started = time.process_time()
    while time.process_time() - started < seconds:
        work()
        runs += 1
    spent = time.process_time() - started
    return spent * 1000 / (runs * raw_bytes / MiB)


def _compressor(codec: int, level: int | None, data: bytes) -> Callable[[], bytes]:
    return lambda: compression.compress(codec, data, level)


def _lz4_hc9(data: bytes) -> bytes:
    compressor = cramjam.lz4.Compressor(level=9, content_checksum=False, block_linked=False)
    compressor.compress(data)
    return bytes(compressor.finish())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mib", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args(argv)
    data = records_section(args.mib)
    cases: list[tuple[str, Callable[[], bytes]]] = [
        (label, _compressor(codec, level, data)) for codec, level, label in LEVELS
    ]
    cases.insert(1, ("lz4 HC 9 (not a Kafka mapping)", lambda: _lz4_hc9(data)))
    rows = []
    print(f"records section: {len(data)} bytes")
    print("| Kafka level | CPU ms per MiB | MiB/s | output / input |")
    print("| --- | --- | --- | --- |")
    for label, work in cases:
        out = work()
        ms = _cpu_per_mib(work, len(data), args.seconds)
        ratio = len(out) / len(data)
        rows.append({"level": label, "ms_per_mib": round(ms, 2), "ratio": round(ratio, 4)})
        print(f"| {label} | {ms:.2f} | {1000 / ms:.0f} | {ratio:.3f} |")
    print(json.dumps({"bytes": len(data), "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
