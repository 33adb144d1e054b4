"""Offset map benchmark: fill a SkimpyOffsetMap with N distinct keys, read every one back, time each part.

    .venv/bin/python bench/offset_map_bench.py --keys 5000000 [--memory-mib 128] [--batch 65536]
                                               [--single-keys N] [--seed S]

Keys are b"key-%d" % i with offset i, made and hashed one batch at a time, as the compaction worker does
with the records of a batch, so that no list of all keys or hashes inflates the process's memory.
1. batch fill: KeyHasher.hash_many, then put_many, per batch (the two are timed apart);
2. batch verify: the keys hashed again, get_many, every offset compared (lost = wrong or missing);
3. clear() of the full map, timed;
4. single fill and verify: put and get one key at a time for the first --single-keys keys (default: all).
Each put rate covers the fill from empty to the final load, so it averages over the loads on the way.

Prints a table, then the results as one JSON line. Peak RSS is ru_maxrss and /proc/self/status VmHWM; the
RSS after imports is printed too, so the map's share is visible.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from planner.offset_map import KeyHasher, SkimpyOffsetMap

MiB = 1024 * 1024


def proc_status_kib(field: str) -> int:
    """A ``VmXxx:`` line of /proc/self/status in KiB (-1 where there is no /proc)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return -1
    return -1


def batches(n: int, size: int) -> Iterator[tuple[int, list[bytes]]]:
    for start in range(0, n, size):
        yield start, [b"key-%d" % i for i in range(start, min(n, start + size))]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keys", type=int, default=5_000_000)
    parser.add_argument("--memory-mib", type=int, default=128)
    parser.add_argument("--batch", type=int, default=65536, help="records per put_many/get_many call")
    parser.add_argument("--single-keys", type=int, default=None, help="keys for the one-at-a-time pass")
    parser.add_argument("--seed", type=int, default=1, help="seeds the hash secret (reproducible runs)")
    args = parser.parse_args()
    n = args.keys
    single_n = n if args.single_keys is None else min(n, args.single_keys)

    rss_after_imports_kib = proc_status_kib("VmRSS")
    hasher = KeyHasher.random(random.Random(args.seed))
    t = time.perf_counter()
    m = SkimpyOffsetMap(args.memory_mib * MiB)
    alloc_s = time.perf_counter() - t

    # 1. batch fill
    hash_s = put_s = 0.0
    inserted = 0
    for start, keys in batches(n, args.batch):
        t0 = time.perf_counter()
        hashes = hasher.hash_many(keys)
        t1 = time.perf_counter()
        inserted += m.put_many(hashes, range(start, start + len(keys)))
        put_s += time.perf_counter() - t1
        hash_s += t1 - t0
    full_at = inserted if inserted < n else None
    size, utilization = m.size, m.utilization

    # 2. batch verify
    get_s = 0.0
    lost = 0
    for start, keys in batches(n, args.batch):
        hashes = hasher.hash_many(keys)
        t0 = time.perf_counter()
        found = m.get_many(hashes)
        get_s += time.perf_counter() - t0
        expected = np.arange(start, start + len(keys))
        lost += int(np.count_nonzero(np.asarray(found) != expected))

    # 3. clear a full map
    t0 = time.perf_counter()
    m.clear()
    clear_s = time.perf_counter() - t0

    # 4. one at a time
    single_put_s = single_get_s = 0.0
    single_lost = 0
    for start, keys in batches(single_n, args.batch):
        hashes = hasher.hash_many(keys)
        put = m.put
        t0 = time.perf_counter()
        for offset, h in enumerate(hashes, start):
            put(h, offset)
        single_put_s += time.perf_counter() - t0
    for start, keys in batches(single_n, args.batch):
        hashes = hasher.hash_many(keys)
        get = m.get
        t0 = time.perf_counter()
        found = [get(h) for h in hashes]
        single_get_s += time.perf_counter() - t0
        single_lost += sum(1 for i, o in enumerate(found, start) if o != i)

    usage = resource.getrusage(resource.RUSAGE_SELF)
    hash_us = hash_s / n * 1e6
    put_us, get_us = put_s / n * 1e6, get_s / n * 1e6
    results: dict[str, Any] = {
        "keys": n,
        "batch": args.batch,
        "memory_bytes": m.memory_bytes,
        "slots": m.slots,
        "capacity": m.capacity,
        "bytes_per_key": round(m.memory_bytes / n, 2),
        "bytes_per_capacity_key": round(m.memory_bytes / m.capacity, 2),
        "inserted": inserted,
        "full_at": full_at,
        "size": size,
        "utilization": round(utilization, 4),
        "lost": lost,
        "hash_per_s": round(n / hash_s),
        "hash_us": round(hash_us, 3),
        "put_many_per_s": round(n / put_s),
        "get_many_per_s": round(n / get_s),
        "single_keys": single_n,
        "single_put_per_s": round(single_n / single_put_s),
        "single_get_per_s": round(single_n / single_get_s),
        "single_lost": single_lost,
        # What the map adds per record to a compaction that hashes every key in both passes.
        "map_us_per_record_both_passes": round(2 * hash_us + put_us + get_us, 3),
        "alloc_ms": round(alloc_s * 1e3, 2),
        "clear_full_ms": round(clear_s * 1e3, 2),
        "rss_after_imports_kib": rss_after_imports_kib,
        "ru_maxrss_kib": usage.ru_maxrss,  # KiB on Linux
        "vm_hwm_kib": proc_status_kib("VmHWM"),
        "vm_rss_end_kib": proc_status_kib("VmRSS"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
    }

    rows = [
        ("keys", f"{n:,}"),
        ("memory_bytes / slots / capacity", f"{m.memory_bytes:,} / {m.slots:,} / {m.capacity:,}"),
        ("bytes per key (memory / keys)", f"{results['bytes_per_key']}"),
        ("inserted / size / utilization", f"{inserted:,} / {size:,} / {utilization:.4f}"),
        ("lost (batch / single)", f"{lost} / {single_lost}"),
        ("hash (KeyHasher.hash_many)", f"{n / hash_s:,.0f}/s  ({hash_us:.3f} us/key)"),
        (f"put_many (batches of {args.batch})", f"{n / put_s:,.0f}/s"),
        (f"get_many (batches of {args.batch})", f"{n / get_s:,.0f}/s"),
        (f"put, one at a time ({single_n:,})", f"{single_n / single_put_s:,.0f}/s"),
        (f"get, one at a time ({single_n:,})", f"{single_n / single_get_s:,.0f}/s"),
        ("map cost per record, 2 passes", f"{results['map_us_per_record_both_passes']} us"),
        ("allocate / clear a full map", f"{alloc_s * 1e3:.2f} ms / {clear_s * 1e3:.2f} ms"),
        ("RSS after imports", f"{rss_after_imports_kib / 1024:,.1f} MiB"),
        (
            "peak RSS: ru_maxrss / VmHWM",
            f"{usage.ru_maxrss / 1024:,.1f} / {results['vm_hwm_kib'] / 1024:,.1f} MiB",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print(json.dumps(results))
    return 0 if lost == 0 and single_lost == 0 and full_at is None else 1


if __name__ == "__main__":
    sys.exit(main())
