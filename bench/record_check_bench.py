"""What checking a producer's batch record by record costs, per MiB of records, for each codec.

    python -m bench.record_check_bench [--record-bytes 1024] [--records 1000] [--seconds 3]

A batch of ``--records`` keyed records of ``--record-bytes`` values (text-like, so the codecs compress it
as they would real payloads) is encoded once per codec; then ``storage.records.check.check_batch`` (what
both doors run before a batch is stored: decompression once, within the output bound, then the C walk of
every record) runs on it repeatedly for ``--seconds``. The figure is CPU time per MiB of *uncompressed*
records, and, beside it, the same for decompression alone (``compression.decompress``), so the walk's own
share shows. One process, one core; nothing else is measured.
"""

from __future__ import annotations

import argparse
import json
import time

from storage.records import Record, compression, encode_batch, read_header
from storage.records.check import check_batch

MiB = 1024 * 1024
CODECS = {
    "none": compression.NONE,
    "gzip": compression.GZIP,
    "snappy": compression.SNAPPY,
    "lz4": compression.LZ4,
    "zstd": compression.ZSTD,
}


def _batch(records: int, record_bytes: int, codec: int) -> tuple[bytes, int]:
    words = b"order shipped customer invoice paid pending refunded warehouse "
    value = (words * (record_bytes // len(words) + 1))[:record_bytes]
    now = int(time.time() * 1000)
    recs = [Record(i, now + i, b"key-%d" % (i % 97), value) for i in range(records)]
    return encode_batch(recs, codec=codec), records * (record_bytes + 8)


def _cpu_per_mib(work: object, raw_bytes: int, seconds: float) -> float:
    assert callable(work)
    runs = 0
    started = time.process_time()
    while time.process_time() - started < seconds:
        work()
        runs += 1
    spent = time.process_time() - started
    return spent * 1000 / (runs * raw_bytes / MiB)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    rows = []
    print("| codec | batch bytes | check CPU ms per MiB of records | of which decompression | walk alone |")
    print("| --- | --- | --- | --- | --- |")
    for name, codec in CODECS.items():
        batch, raw = _batch(args.records, args.record_bytes, codec)
        header = read_header(batch, 0, True)
        check = _cpu_per_mib(lambda b=batch, h=header: check_batch(b, h, True), raw, args.seconds)
        stored = memoryview(batch)[61:]
        limit = compression.output_limit(len(stored))
        decompress = (
            _cpu_per_mib(
                lambda c=codec, s=stored, n=limit: compression.decompress(c, s, n), raw, args.seconds
            )
            if codec
            else 0.0
        )
        rows.append(
            {
                "codec": name,
                "batch_bytes": len(batch),
                "check_ms_per_mib": round(check, 3),
                "decompress_ms_per_mib": round(decompress, 3),
            }
        )
        print(f"| {name} | {len(batch)} | {check:.3f} | {decompress:.3f} | {check - decompress:.3f} |")
    print(json.dumps({"record_bytes": args.record_bytes, "records": args.records, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
