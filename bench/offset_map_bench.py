"""Offset map benchmark: fill a SkimpyOffsetMap with N distinct keys, read every one back, time each part.

    python -m bench.offset_map_bench --keys 5000000 [--memory-mib 128] [--batch 65536]
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
from dataclasses import dataclass
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


@dataclass
class Timings:
    """Seconds per part of the run, and what went wrong (``lost``: wrong or missing offsets)."""

    alloc_s: float = 0.0
    hash_s: float = 0.0
    put_s: float = 0.0
    get_s: float = 0.0
    clear_s: float = 0.0
    single_put_s: float = 0.0
    single_get_s: float = 0.0
    inserted: int = 0
    lost: int = 0
    single_lost: int = 0
    size: int = 0
    utilization: float = 0.0


def batch_passes(m: SkimpyOffsetMap, hasher: KeyHasher, n: int, batch: int, t: Timings) -> None:
    """Fill with put_many, verify with get_many, then clear the full map."""
    for start, keys in batches(n, batch):
        t0 = time.perf_counter()
        hashes = hasher.hash_many(keys)
        t1 = time.perf_counter()
        t.inserted += m.put_many(hashes, range(start, start + len(keys)))
        t.put_s += time.perf_counter() - t1
        t.hash_s += t1 - t0
    t.size, t.utilization = m.size, m.utilization
    for start, keys in batches(n, batch):
        hashes = hasher.hash_many(keys)
        t0 = time.perf_counter()
        found = m.get_many(hashes)
        t.get_s += time.perf_counter() - t0
        expected = np.arange(start, start + len(keys))
        t.lost += int(np.count_nonzero(np.asarray(found) != expected))
    t0 = time.perf_counter()
    m.clear()
    t.clear_s = time.perf_counter() - t0


def single_passes(m: SkimpyOffsetMap, hasher: KeyHasher, n: int, batch: int, t: Timings) -> None:
    """put and get one key at a time for the first ``n`` keys."""
    for start, keys in batches(n, batch):
        hashes = hasher.hash_many(keys)
        put = m.put
        t0 = time.perf_counter()
        for offset, h in enumerate(hashes, start):
            put(h, offset)
        t.single_put_s += time.perf_counter() - t0
    for start, keys in batches(n, batch):
        hashes = hasher.hash_many(keys)
        get = m.get
        t0 = time.perf_counter()
        found = [get(h) for h in hashes]
        t.single_get_s += time.perf_counter() - t0
        t.single_lost += sum(1 for i, o in enumerate(found, start) if o != i)


def figures(
    args: argparse.Namespace, m: SkimpyOffsetMap, t: Timings, single_n: int, rss0: int
) -> dict[str, Any]:
    n = args.keys
    usage = resource.getrusage(resource.RUSAGE_SELF)
    hash_us, put_us, get_us = t.hash_s / n * 1e6, t.put_s / n * 1e6, t.get_s / n * 1e6
    return {
        "keys": n,
        "batch": args.batch,
        "memory_bytes": m.memory_bytes,
        "slots": m.slots,
        "capacity": m.capacity,
        "bytes_per_key": round(m.memory_bytes / n, 2),
        "bytes_per_capacity_key": round(m.memory_bytes / m.capacity, 2),
        "inserted": t.inserted,
        "full_at": t.inserted if t.inserted < n else None,
        "size": t.size,
        "utilization": round(t.utilization, 4),
        "lost": t.lost,
        "hash_per_s": round(n / t.hash_s),
        "hash_us": round(hash_us, 3),
        "put_many_per_s": round(n / t.put_s),
        "get_many_per_s": round(n / t.get_s),
        "single_keys": single_n,
        "single_put_per_s": round(single_n / t.single_put_s),
        "single_get_per_s": round(single_n / t.single_get_s),
        "single_lost": t.single_lost,
        # What the map adds per record to a compaction that hashes every key in both passes.
        "map_us_per_record_both_passes": round(2 * hash_us + put_us + get_us, 3),
        "alloc_ms": round(t.alloc_s * 1e3, 2),
        "clear_full_ms": round(t.clear_s * 1e3, 2),
        "rss_after_imports_kib": rss0,
        "ru_maxrss_kib": usage.ru_maxrss,  # KiB on Linux
        "vm_hwm_kib": proc_status_kib("VmHWM"),
        "vm_rss_end_kib": proc_status_kib("VmRSS"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
    }


def print_table(r: dict[str, Any]) -> None:
    n, single_n = r["keys"], r["single_keys"]
    rows = [
        ("keys", f"{n:,}"),
        ("memory_bytes / slots / capacity", f"{r['memory_bytes']:,} / {r['slots']:,} / {r['capacity']:,}"),
        ("bytes per key (memory / keys)", f"{r['bytes_per_key']}"),
        ("inserted / size / utilization", f"{r['inserted']:,} / {r['size']:,} / {r['utilization']:.4f}"),
        ("lost (batch / single)", f"{r['lost']} / {r['single_lost']}"),
        ("hash (KeyHasher.hash_many)", f"{r['hash_per_s']:,}/s  ({r['hash_us']:.3f} us/key)"),
        (f"put_many (batches of {r['batch']})", f"{r['put_many_per_s']:,}/s"),
        (f"get_many (batches of {r['batch']})", f"{r['get_many_per_s']:,}/s"),
        (f"put, one at a time ({single_n:,})", f"{r['single_put_per_s']:,}/s"),
        (f"get, one at a time ({single_n:,})", f"{r['single_get_per_s']:,}/s"),
        ("map cost per record, 2 passes", f"{r['map_us_per_record_both_passes']} us"),
        ("allocate / clear a full map", f"{r['alloc_ms']:.2f} ms / {r['clear_full_ms']:.2f} ms"),
        ("RSS after imports", f"{r['rss_after_imports_kib'] / 1024:,.1f} MiB"),
        (
            "peak RSS: ru_maxrss / VmHWM",
            f"{r['ru_maxrss_kib'] / 1024:,.1f} / {r['vm_hwm_kib'] / 1024:,.1f} MiB",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


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
    single_n = args.keys if args.single_keys is None else min(args.keys, args.single_keys)
    rss0 = proc_status_kib("VmRSS")
    hasher = KeyHasher.random(random.Random(args.seed))
    t = Timings()
    t0 = time.perf_counter()
    m = SkimpyOffsetMap(args.memory_mib * MiB)
    t.alloc_s = time.perf_counter() - t0
    batch_passes(m, hasher, args.keys, args.batch, t)
    single_passes(m, hasher, single_n, args.batch, t)
    results = figures(args, m, t, single_n, rss0)
    print_table(results)
    print(json.dumps(results))
    return 0 if t.lost == 0 and t.single_lost == 0 and results["full_at"] is None else 1


if __name__ == "__main__":
    sys.exit(main())
